// SPDX-License-Identifier: GPL-2.0-or-later
// pci_p2pdma_distance() for many pairs. Each function's upstream chain, depth, ACS redirect counts
// and host-bridge whitelist result are computed once, so a pair's map type and distance cost
// O(depth) and allocate nothing; reasons, log lines and remedies (PairVerdict) are built only
// for the pairs that are printed. The answers equal pci_p2pdma_distance()'s on every pair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/topology.h"

namespace p2paudit {

// One __host_bridge_whitelist() (or, before 5.4, root_complex_whitelist()) check of a pair.
struct WhitelistCheck {
  std::optional<size_t> host_bridge;   // index into Topology::host_bridges; nullopt when not found
  std::optional<size_t> root_device;   // the device the whitelist is keyed by
  std::optional<size_t> entry;         // matching index into KernelRules::whitelist
  std::optional<bool> passed;          // nullopt when unknown
};

// The part of a PairVerdict that needs no text.
struct PairOutcome {
  MapType map_type = MapType::kUnknown;
  int distance = 0;                     // calc_map_type_and_dist()'s distance
  std::optional<int> p2pdma_distance;   // -1 refused; nullopt unknown
  std::optional<int> legacy_return;     // 4.20-5.3 only
  std::optional<size_t> common_ancestor;
  bool through_host_bridge = false;     // the THRU_HOST_BRIDGE branch was taken under some assumption
  bool cpu_rule_consulted = false;
  // PairVerdict::host_bridges: the checks in the kernel's order (at most two).
  WhitelistCheck whitelist_checks[2];
  size_t whitelist_check_count = 0;
  // With a common ancestor: the devices on the path whose ACS redirects, and whose ACS control
  // was not readable (PairVerdict::acs_tests); both 0 without one.
  uint32_t acs_redirecting = 0, acs_unreadable = 0;
};

// The outcome a full verdict gives (what P2pdmaIndex::outcome() must equal).
PairOutcome outcome_of(const Topology& topo, const PairVerdict& v);

class P2pdmaIndex {
 public:
  // Keeps references: both must outlive the index. O(functions + host bridges).
  P2pdmaIndex(const Topology& topo, const KernelRules& rules);

  const Topology& topology() const { return topo_; }
  const KernelRules& rules() const { return rules_; }

  PairOutcome outcome(size_t provider, size_t client) const;
  // The whole verdict with texts: pci_p2pdma_distance().
  PairVerdict verdict(size_t provider, size_t client) const;

  // pci_upstream_bridge(), precomputed (inline: the policy's path walks call it at every step).
  std::optional<size_t> upstream(size_t dev) const {
    return up_[dev] == kNone ? std::nullopt : std::optional<size_t>(up_[dev]);
  }
  // Steps from dev up to its root bus device; 0 on a root bus.
  size_t depth(size_t dev) const { return depth_[dev]; }
  // The first device on both upstream chains (the device itself counts), nullopt when none.
  std::optional<size_t> common_ancestor(size_t a, size_t b) const;

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct HostBridgeResult {
    bool passed[2] = {false, false};  // [assume the root device is a Root Port]
    bool root_port_unknown = false;   // the answer depended on that assumption
  };
  struct Check {
    uint32_t host_bridge = kNone;
    bool passed = false;
  };
  struct Evaluation {
    MapType type = MapType::kUnknown;
    int dist = 0;
    std::optional<int> legacy;
    bool thru = false;
    bool cpu_consulted = false;
    Check checks[2];
    size_t check_count = 0;
  };

  Evaluation evaluate(size_t provider, size_t client, std::optional<size_t> common, uint32_t acs_redirecting,
                      uint32_t acs_unreadable, int dist_a, int dist_b, unsigned assume, unsigned& used) const;
  bool host_bridge_passes(Evaluation& e, size_t dev, bool same, unsigned assume, unsigned& used) const;
  HostBridgeResult whitelist_result(size_t host_bridge, bool same) const;

  const Topology& topo_;
  const KernelRules& rules_;
  std::vector<uint32_t> up_;           // kNone on a root bus
  std::vector<uint32_t> depth_;
  std::vector<uint32_t> redirects_;    // devices with ACS redirect set, from dev to its root inclusive
  std::vector<uint32_t> unreadable_;   // devices whose ACS control was not readable, likewise
  std::vector<uint8_t> irregular_;     // on an upstream loop: answered by pci_p2pdma_distance()
  // pci_bridge_has_acs_redir() of each function, read once: 1 redirects, 0 not, -1 not readable.
  std::vector<int8_t> acs_redirect_;
  std::vector<uint32_t> host_bridge_;  // index into topo.host_bridges, kNone when not found
  std::vector<HostBridgeResult> whitelist_same_, whitelist_different_;
  std::vector<uint8_t> whitelist_unknown_;  // keyed by an entry this build may lack: pci_p2pdma_distance() answers
  std::vector<uint8_t> zen_root_complex_;  // root_complex_whitelist() of 5.2-5.3, per host bridge
  // pci_host_bridge_dev() when nothing unreadable is assumed, and its whitelist entry.
  std::vector<std::optional<size_t>> root_device_, root_entry_;
  std::optional<bool> cpu_supports_;
  bool refused_by_config_ = false;
};

}  // namespace p2paudit
