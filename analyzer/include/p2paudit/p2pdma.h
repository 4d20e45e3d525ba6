// SPDX-License-Identifier: GPL-2.0-or-later
// The kernel's P2PDMA decision (drivers/pci/p2pdma.c) re-done in userspace for one release's
// rules: what pci_p2pdma_distance[_many]() returns, the map type, and the lines it would log.
// Facts the sysroot could not give (ACS control cut off by an unprivileged read, an unknown CPU)
// are never guessed: every outcome they allow is computed and a result that differs is unknown.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/topology.h"

namespace p2paudit {

// PCI_P2PDMA_MAP_*; kUnknown here means "cannot be known from this sysroot".
enum class MapType { kUnknown, kNotSupported, kBusAddr, kThruHostBridge };
const char* to_string(MapType t);  // "BUS_ADDR", "THRU_HOST_BRIDGE", "NOT_SUPPORTED", "UNKNOWN"

// One pci_bridge_has_acs_redir() test the walk made, in the kernel's order.
struct AcsTest {
  size_t function = 0;
  bool provider_chain = false;   // on the provider's chain (common ancestor included)
  Acs acs;                       // as read
  std::optional<bool> redirect;  // RR|CR|EC set; nullopt when the control word was not readable
};

// One __host_bridge_whitelist() evaluation.
struct HostBridgeCheck {
  std::string host_bridge;                 // "pci0000:00"
  std::optional<size_t> first_device;      // first device on its root bus
  std::optional<size_t> root_device;       // what pci_host_bridge_dev() returned
  bool same_host_bridge = false;           // the argument the kernel passed
  std::optional<size_t> entry;             // matching index into KernelRules::whitelist
  std::optional<size_t> unknown_entry;     // else the KernelRules::unknown_whitelist entry it matches
  bool refused_same_host_bridge = false;   // matched an entry flagged REQ_SAME_HOST_BRIDGE
  std::optional<bool> passed;              // nullopt when unknown
};

struct Remedy {
  std::string disable_acs_redir;           // pci=disable_acs_redir= value, ';'-separated; "" if none
  std::vector<std::string> acs_unknown;    // devices whose redirect bits could not be read
  bool cpu_unknown = false;                // the CPU rule's answer depends on an unknown boot CPU
  std::vector<std::string> unknown_whitelist;  // how to learn whether the build carries a deciding entry
  std::string acs_override;                // pcie_acs_override= is on the command line: why it does not help
  std::vector<int> iommu_groups_merged;    // groups the ACS change would likely merge
  std::string whitelist;                   // "host bridge VVVV:DDDD (name) is not in ..." or ""
  std::vector<std::string> alternatives;   // what else would change the answer
};

// The kernel's answer for one (provider, client) pair.
struct PairVerdict {
  size_t provider = 0, client = 0;
  MapType map_type = MapType::kUnknown;
  int distance = 0;                        // calc_map_type_and_dist()'s distance
  std::optional<int> p2pdma_distance;      // pci_p2pdma_distance(): -1 refused; nullopt unknown
  std::optional<int> legacy_return;        // 4.20-5.3 upstream_bridge_distance(): -1, -2 or distance

  std::vector<size_t> provider_chain, client_chain;  // the device itself first, up to the root bus
  std::optional<size_t> common_ancestor;
  std::vector<AcsTest> acs_tests;
  bool acs_considered = false;             // false on the no-common-ancestor path
  bool through_host_bridge = false;        // the THRU_HOST_BRIDGE branch was taken (in any outcome)
  bool cpu_rule_consulted = false;
  std::optional<bool> cpu_supports_p2pdma; // nullopt: not consulted or not knowable
  std::vector<HostBridgeCheck> host_bridges;

  std::vector<std::string> kernel_log;     // verbose lines, "<driver|pci> DDDD:BB:DD.F: text"
  std::vector<std::string> quiet_log;      // lines printed even by a quiet call
  bool kernel_log_complete = true;
  std::vector<std::string> unknowns;       // why something is not known
  std::string reason;                      // one sentence
  Remedy remedy;
};

// pci_p2pdma_distance_many() for one provider and several clients (verbose: every client).
struct ManyVerdict {
  size_t provider = 0;
  std::vector<PairVerdict> clients;
  std::optional<int> result;               // sum of distances, -1 if any refused, nullopt unknown
  std::vector<std::string> kernel_log;     // the verbose call's lines, all clients in order
  bool kernel_log_complete = true;
};

// A device as the kernel's texts name it here: "BDF [vvvv:dddd] (pci.ids' device name)".
std::string device_label(const Topology& t, size_t dev);
// Mirrors pci_upstream_bridge() in include/linux/pci.h: a VF goes up from its PF's bus.
std::optional<size_t> pci_upstream_bridge(const Topology& topo, size_t dev);
// Mirrors pci_bridge_has_acs_redir() in drivers/pci/p2pdma.c (applied to any device).
std::optional<bool> pci_bridge_has_acs_redir(const Function& dev);
// Mirrors cpu_supports_p2pdma() in drivers/pci/p2pdma.c; nullopt when the platform is not known.
std::optional<bool> cpu_supports_p2pdma(const Platform& platform, const KernelRules& rules);

// Mirrors pci_host_bridge_dev() in drivers/pci/p2pdma.c (5.14+; before, pci_get_slot(bus, 00.0)).
// A root bus's first device whose PCIe type was not readable is taken as a Root Port when
// assume_root_port; root_port_unknown is then set.
std::optional<size_t> pci_host_bridge_dev(const Topology& topo, const KernelRules& rules, const HostBridge& host,
                                          bool assume_root_port, bool& root_port_unknown);
// pci_get_slot(host->bus, PCI_DEVFN(0, 0)).
std::optional<size_t> slot_devfn0(const Topology& topo, const HostBridge& host);
// The first entry of rules.whitelist that __host_bridge_whitelist() matches root against.
std::optional<size_t> whitelist_entry(const KernelRules& rules, const Function& root);
// The first entry of rules.unknown_whitelist root matches (an entry this build may or may not carry).
std::optional<size_t> unknown_whitelist_entry(const KernelRules& rules, const Function& root);
// What a pair decided by rules.unknown_whitelist[i] depends on, and how to find it out: one text
// per entry, the same for every pair (the report and the policy show it once).
std::string unknown_whitelist_note(const KernelRules& rules, size_t i);
std::string unknown_whitelist_action(const KernelRules& rules, size_t i);
// The notes for the unknown entries some host bridge of topo is keyed by (none for the others).
std::vector<std::string> unknown_whitelist_notes(const Topology& topo, const KernelRules& rules);
// Mirrors root_complex_whitelist() of 5.2-5.3: an AMD ZEN root complex (1022:1450), no IOMMU.
bool zen_root_complex(const Topology& topo, const HostBridge& host);

PairVerdict pci_p2pdma_distance(const Topology& topo, const KernelRules& rules, size_t provider,
                                size_t client);
ManyVerdict pci_p2pdma_distance_many(const Topology& topo, const KernelRules& rules, size_t provider,
                                     const std::vector<size_t>& clients);

}  // namespace p2paudit
