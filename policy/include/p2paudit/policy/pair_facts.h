// SPDX-License-Identifier: GPL-2.0-or-later
// From analysis to facts: what the analyzer read and the kernel's verdict become the catalogued
// facts (facts.h) of one (provider, client) pair. Facts the sysroot cannot tell (vendor fabric
// links, runtime versions) stay unknown unless a vendor facts file supplies them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <utility>

#include "p2paudit/device_class.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/nvidia_third_party.h"
#include "p2paudit/topology.h"

namespace p2paudit::policy {

// The machine's facts, shared by every pair: platform, IOMMU, the kernel's config and release, and
// the copy defaults (no copy tested until a probe's results or a facts file say so).
FactSet machine_facts(const Topology& topo, const KernelRules& rules);
// One device's facts, as "provider.X" or as "client.X". With drivers_read (a capture of sysfs, not
// an lspci dump), a function bound to no driver has driver kNoDriver rather than an unknown one.
inline constexpr std::string_view kNoDriver = "none";
FactSet device_facts(const Function& f, bool as_provider, bool drivers_read = false);
// The pair's own facts (kernel verdict, path, whose peer logic) from the index's outcome, in
// O(depth). The kernel's texts need the whole verdict and are added by add_kernel_text_facts()
// only for pairs whose reasons are printed, or when a rule's condition reads one.
struct PairFactsContext {
  explicit PairFactsContext(const P2pdmaIndex& index);
  // A function's PCIe link as a path sees it: present only with a known current speed and width
  // (else a virtual or integrated function), and degraded when it runs below its maximum speed
  // or width.
  struct Link {
    bool present = false, degraded = false;
    double speed = 0;  // GT/s
    int width = 0;
  };
  static constexpr uint32_t kNoParent = UINT32_MAX, kIrregular = UINT32_MAX - 1;
  const P2pdmaIndex& index;
  std::vector<Link> links;                      // per function, parsed once
  std::vector<int8_t> bridge_prefetch_64bit;    // per function: 1 yes (or not a bridge), 0 no, -1 unknown
  NvidiaGrdmaMachine nvidia_machine;            // the third-party gate's machine inputs, read once
  std::optional<bool> cpu_rule;                 // cpu_supports_p2pdma() of the machine, once
  // Per function: the topmost ancestor of its parent (kNoParent without a parent, kIrregular when
  // the walk up did not end): two functions have an upstream bridge in common exactly when these
  // are equal (nv_pci_has_common_pci_switch() in O(1)).
  std::vector<uint32_t> top_of_parent;
  // Per function: its driver's name as a small number (0: unbound), for keys, and per such number
  // what the pair rules ask of a driver (a DriverKind): compared once, not per pair.
  std::vector<uint32_t> driver_id;
  enum DriverKind : uint8_t { kUnbound, kNvidia, kAmdgpu, kXe, kXrt, kOtherDriver };
  std::vector<uint8_t> driver_kind;
  // Per function: its host bridge's name as a small number.
  std::vector<uint32_t> host_bridge_id;
  // Per function: classify_device(), and for a function on the nvidia driver nvidia_passthrough()
  // (-1 unknown, 0 no, 1 yes; 0 elsewhere): both read once, not for every pair.
  std::vector<DeviceClass> device_class;
  std::vector<int8_t> nvidia_passthrough;
  // Per function, from the device table (device_knowledge()), read once: its chip as a small
  // number (0: unknown) and whether its product is known to have no peer fabric (NVLink, xGMI).
  std::vector<uint32_t> chip_id;
  std::vector<uint8_t> no_fabric;
};

// The values of a pair's own facts (pair_own_facts()) as plain numbers, computed in O(depth) with
// no allocation: what PolicyEvaluator keys its memo on before building any fact set. The facts
// are made from these values alone (set_pair_fact_values()), so equal values give equal facts.
// Every field is 0 when its fact is not set; tri-states are 0 unset, 1 false, 2 true.
struct PairFactValues {
  // Wider fields first: no padding, so that the bytes are the value (hashing, comparing).
  uint64_t narrowest_link_speed_bits = 0;  // path.narrowest_link_speed_gts: the double's bits
  int32_t distance = 0;                    // kernel.distance
  int32_t p2pdma_distance = 0;             // with has_p2pdma_distance
  uint32_t host_bridge = 0;                // kernel.host_bridge: vendor << 16 | device, with has_host_bridge
  int32_t narrowest_link_width = 0;        // with has_link
  uint32_t peer_driver = 0;                // third party: PairFactsContext::driver_id of the other device
  // kernel.*: from the index's outcome.
  uint8_t map_type = 0;                    // MapType
  uint8_t has_p2pdma_distance = 0;
  uint8_t has_common_ancestor = 0;         // kernel.acs_redirect_devices is [] without one
  uint8_t acs_redirect = 0;                // tri
  uint8_t has_host_bridge = 0;
  uint8_t whitelist = 0;                   // 0 unset, 1 whitelisted, 2 not_whitelisted, 3 not_consulted
  uint8_t whitelist_assumed = 0;           // tri
  uint8_t cpu_rule = 0;                    // tri
  // path.*
  uint8_t has_link = 0;
  uint8_t degraded_link = 0;
  uint8_t relation = 0;                    // 1 + index into the relation names
  uint8_t same_model = 0;                  // tri
  uint8_t same_numa_node = 0;              // tri
  uint8_t bridges_64bit_prefetch = 0;      // tri
  // vendor.*
  uint8_t authority = 0;                   // 1 + index into the authority names
  uint8_t nvidia_common_switch = 0;        // tri
  uint8_t nvidia_vm_clique = 0;            // tri
  // NVIDIA's third-party gate (set_nvidia_third_party_pair_facts()): its inputs, all 0 unless
  // vendor.authority is nvidia_third_party.
  uint8_t third_party_gpu = 0;             // 1 the provider is the GPU, 2 the client
  uint8_t nvidia_passthrough = 0;          // tri
  uint8_t nvidia_shared_upstream_bridge = 0;  // tri
  uint8_t peer_class = 0;                  // 1 + DeviceClass of the other device
  uint8_t nccl_path_class = 0;             // 1 + NcclPath; 0 when not set (or not asked for)
  // The device table's: path.same_chip (tri), and 1 when vendor.nvlink, 2 when vendor.xgmi is
  // false because a product of the pair has no such fabric.
  uint8_t same_chip = 0;
  uint8_t no_fabric_link = 0;
  uint8_t unused[4] = {0, 0, 0, 0};        // explicit, so that no byte is padding

  bool operator==(const PairFactValues&) const = default;
  // A mask of every field whose facts (or facts it decides whether to set) `read` (by FactId)
  // names: all bits set there, none elsewhere. apply_mask() keeps those fields and clears the rest,
  // leaving the values that can change a decision whose conditions read only those facts.
  static PairFactValues mask_for(const std::vector<bool>& read);
  void apply_mask(const PairFactValues& mask);
};
// With `read` (by FactId), values whose facts are not read may be left 0 (the NCCL path class is
// the only one that costs more than O(depth)).
PairFactValues pair_fact_values(const PairFactsContext& context, size_t provider, size_t client,
                                const PairOutcome& outcome, const std::vector<bool>* read = nullptr);
void set_pair_fact_values(const PairFactsContext& context, size_t provider, size_t client,
                          const PairFactValues& values, FactSet& facts);
FactSet pair_own_facts(const PairFactsContext& context, size_t provider, size_t client, const PairOutcome& outcome);
const std::vector<std::string>& kernel_text_facts();  // "kernel.reason", "kernel.remedy", ...
void add_kernel_text_facts(const Topology& topo, const PairVerdict& verdict, FactSet& facts);
// Every analyzer fact of one pair in one set, the kernel's texts included.
FactSet pair_facts(const P2pdmaIndex& index, size_t provider, size_t client);

}  // namespace p2paudit::policy
