// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/p2pdma_index.h"

#include <memory>
#include <set>
#include <type_traits>

#include "p2pdma_unknowns.h"

namespace p2paudit {

P2pdmaIndex::P2pdmaIndex(const Topology& topo, const KernelRules& rules) : topo_(topo), rules_(rules) {
  const size_t n = topo.functions.size();
  up_.assign(n, kNone);
  depth_.assign(n, 0);
  redirects_.assign(n, 0);
  unreadable_.assign(n, 0);
  irregular_.assign(n, 0);
  host_bridge_.assign(n, kNone);
  acs_redirect_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    auto redirect = pci_bridge_has_acs_redir(topo.functions[i]);
    acs_redirect_[i] = redirect ? (*redirect ? 1 : 0) : -1;
  }
  for (size_t i = 0; i < n; ++i)
    if (auto u = pci_upstream_bridge(topo, i); u && *u < n) up_[i] = static_cast<uint32_t>(*u);

  // Chains are settled from the top down; `done` marks functions whose counts are final.
  std::vector<uint8_t> done(n, 0);
  std::vector<uint32_t> pending;
  for (size_t i = 0; i < n; ++i) {
    pending.clear();
    uint32_t d = static_cast<uint32_t>(i);
    while (d != kNone && !done[d] && pending.size() <= n) {
      pending.push_back(d);
      d = up_[d];
    }
    bool loop = pending.size() > n || (d != kNone && !done[d]);
    bool above_irregular = d != kNone && irregular_[d];
    for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
      uint32_t f = *it;
      done[f] = 1;
      if (loop || above_irregular) {
        irregular_[f] = 1;
        continue;
      }
      uint32_t parent = up_[f];
      depth_[f] = parent == kNone ? 0 : depth_[parent] + 1;
      redirects_[f] = (parent == kNone ? 0 : redirects_[parent]) + (acs_redirect_[f] == 1 ? 1 : 0);
      unreadable_[f] = (parent == kNone ? 0 : unreadable_[parent]) + (acs_redirect_[f] == -1 ? 1 : 0);
    }
  }

  for (size_t i = 0; i < n; ++i)
    if (const HostBridge* hb = topo.host_bridge_of(topo.functions[i]))
      host_bridge_[i] = static_cast<uint32_t>(hb - topo.host_bridges.data());
  for (size_t h = 0; h < topo.host_bridges.size(); ++h) {
    whitelist_same_.push_back(whitelist_result(h, true));
    whitelist_different_.push_back(whitelist_result(h, false));
    zen_root_complex_.push_back(zen_root_complex(topo, topo.host_bridges[h]) ? 1 : 0);
    bool root_port_unknown = false;
    auto root = pci_host_bridge_dev(topo, rules, topo.host_bridges[h], false, root_port_unknown);
    root_device_.push_back(root);
    root_entry_.push_back(root ? whitelist_entry(rules, topo.functions[*root]) : std::nullopt);
    bool unknown = false;
    for (bool assume : {false, true})
      if (auto r = pci_host_bridge_dev(topo, rules, topo.host_bridges[h], assume, root_port_unknown))
        unknown |= !whitelist_entry(rules, topo.functions[*r]) && unknown_whitelist_entry(rules, topo.functions[*r]);
    whitelist_unknown_.push_back(unknown ? 1 : 0);
  }
  if (rules.cpu_supports_p2pdma) cpu_supports_ = cpu_supports_p2pdma(topo.platform, rules);
  refused_by_config_ = rules.config_p2pdma == Known::kNo || !rules.p2pdma;
}

P2pdmaIndex::HostBridgeResult P2pdmaIndex::whitelist_result(size_t host_bridge, bool same) const {
  HostBridgeResult out;
  for (int assume_root_port = 0; assume_root_port < 2; ++assume_root_port) {
    bool root_port_unknown = false;
    auto root = pci_host_bridge_dev(topo_, rules_, topo_.host_bridges[host_bridge], assume_root_port != 0,
                                    root_port_unknown);
    out.root_port_unknown |= root_port_unknown;
    if (!root) continue;
    auto entry = whitelist_entry(rules_, topo_.functions[*root]);
    out.passed[assume_root_port] = entry && !(rules_.whitelist[*entry].same_host_bridge && !same);
  }
  return out;
}

std::optional<size_t> P2pdmaIndex::common_ancestor(size_t a, size_t b) const {
  if (irregular_[a] || irregular_[b]) return pci_p2pdma_distance(topo_, rules_, a, b).common_ancestor;
  uint32_t x = static_cast<uint32_t>(a), y = static_cast<uint32_t>(b);
  while (depth_[x] > depth_[y]) x = up_[x];
  while (depth_[y] > depth_[x]) y = up_[y];
  while (x != y && x != kNone) x = up_[x], y = up_[y];
  return x == kNone ? std::nullopt : std::optional<size_t>(x);
}

// __host_bridge_whitelist() for dev's host bridge, from the precomputed result.
bool P2pdmaIndex::host_bridge_passes(Evaluation& e, size_t dev, bool same, unsigned assume, unsigned& used) const {
  uint32_t h = host_bridge_[dev];
  Check& check = e.checks[e.check_count++];
  check = {h, false};
  if (h == kNone) return false;
  const HostBridgeResult& r = same ? whitelist_same_[h] : whitelist_different_[h];
  if (r.root_port_unknown) used |= kRootPortUnknown;
  return check.passed = r.passed[(assume & kRootPortUnknown) ? 1 : 0];
}

// One run of calc_map_type_and_dist() (5.4+) or upstream_bridge_distance() (4.20-5.3) under one
// set of assumptions, as Model in p2pdma.cpp makes it, from the precomputed chains.
P2pdmaIndex::Evaluation P2pdmaIndex::evaluate(size_t provider, size_t client, std::optional<size_t> common,
                                              uint32_t acs_redirecting, uint32_t acs_unreadable, int dist_a, int dist_b,
                                              unsigned assume, unsigned& used) const {
  Evaluation e;
  e.dist = dist_a + dist_b;
  int acs_cnt = 0;
  if (common) {
    if (acs_unreadable) used |= kAcsUnknown;
    acs_cnt = static_cast<int>(acs_redirecting + ((assume & kAcsUnknown) ? acs_unreadable : 0));
  }
  if (!rules_.map_types) {
    if (!common) {
      e.thru = true;
      auto zen = [&](size_t dev) {
        uint32_t h = host_bridge_[dev];
        e.checks[e.check_count++] = {h, h != kNone && zen_root_complex_[h]};
        return e.checks[e.check_count - 1].passed;
      };
      if (rules_.amd_zen_root_complex && zen(provider) && zen(client)) {
        e.dist = 0x1000 + dist_a + dist_b;
        e.legacy = e.dist;
        e.type = MapType::kThruHostBridge;
      } else {
        e.legacy = -1;
        e.type = MapType::kNotSupported;
      }
      return e;
    }
    e.legacy = acs_cnt == 0 ? e.dist : -2;
    e.type = acs_cnt == 0 ? MapType::kBusAddr : MapType::kNotSupported;
    return e;
  }
  if (common && acs_cnt == 0) {
    e.type = MapType::kBusAddr;
    return e;
  }
  e.thru = true;
  e.type = MapType::kThruHostBridge;
  bool cpu = false;
  if (rules_.cpu_supports_p2pdma) {
    e.cpu_consulted = true;
    if (!cpu_supports_) used |= kCpuUnknown;
    cpu = cpu_supports_ ? *cpu_supports_ : (assume & kCpuUnknown) != 0;
  }
  if (cpu) return e;
  bool passes;
  if (host_bridge_[provider] == host_bridge_[client] && host_bridge_[provider] != kNone)
    passes = host_bridge_passes(e, provider, true, assume, used);
  else
    passes = host_bridge_passes(e, provider, false, assume, used) && host_bridge_passes(e, client, false, assume, used);
  if (!passes) e.type = MapType::kNotSupported;
  return e;
}

PairOutcome P2pdmaIndex::outcome(size_t provider, size_t client) const {
  PairOutcome out;
  auto unknown_entry = [&](size_t dev) { return host_bridge_[dev] != kNone && whitelist_unknown_[host_bridge_[dev]]; };
  if (irregular_[provider] || irregular_[client] || unknown_entry(provider) || unknown_entry(client)) {
    return outcome_of(topo_, verdict(provider, client));
  }
  out.common_ancestor = common_ancestor(provider, client);
  int dist_a, dist_b;
  if (out.common_ancestor) {
    // The provider's chain up to the common device inclusive, then the client's below it.
    size_t c = *out.common_ancestor;
    out.acs_redirecting = redirects_[provider] + redirects_[client] - 2 * redirects_[c] + (acs_redirect_[c] == 1 ? 1 : 0);
    out.acs_unreadable = unreadable_[provider] + unreadable_[client] - 2 * unreadable_[c] + (acs_redirect_[c] == -1 ? 1 : 0);
    dist_a = static_cast<int>(depth_[provider] - depth_[*out.common_ancestor]);
    dist_b = static_cast<int>(depth_[client] - depth_[*out.common_ancestor]);
  } else {  // the walk counted every device of both chains
    dist_a = static_cast<int>(depth_[provider]) + 1;
    dist_b = static_cast<int>(depth_[client]) + 1;
  }

  // As pci_p2pdma_distance_many() does: evaluate under every combination of the assumptions some
  // evaluation consulted, until no new one is consulted.
  // Storage for the runs, constructed only as each is made (Evaluation is trivially destructible):
  // most pairs need one or two of the eight, and this runs for every pair.
  static_assert(std::is_trivially_destructible_v<Evaluation>);
  union Runs {
    Runs() {}
    Evaluation at[kIndexUnknowns + 1];
  } storage;
  Evaluation* const runs = storage.at;
  size_t count = 0;
  unsigned explore = 0;
  for (;;) {
    count = 0;
    unsigned used = 0;
    for (unsigned assume = 0; assume <= kIndexUnknowns; ++assume)
      if (!(assume & ~explore)) std::construct_at(&runs[count++], evaluate(provider, client, out.common_ancestor, out.acs_redirecting, out.acs_unreadable,
                                                       dist_a, dist_b, assume, used));
    if (!(used & ~explore)) break;
    explore |= used;
  }
  out.distance = runs[0].dist;
  out.legacy_return = runs[0].legacy;
  out.map_type = runs[0].type;
  std::optional<int> distance = runs[0].type == MapType::kNotSupported ? -1 : runs[0].dist;
  for (size_t i = 0; i < count; ++i) {
    out.through_host_bridge |= runs[i].thru;
    if (runs[i].type != out.map_type) out.map_type = MapType::kUnknown;
    if ((runs[i].type == MapType::kNotSupported ? -1 : runs[i].dist) != distance) distance.reset();
  }
  out.p2pdma_distance = distance;
  out.cpu_rule_consulted = runs[0].cpu_consulted;
  out.whitelist_check_count = runs[0].check_count;
  for (size_t h = 0; h < runs[0].check_count; ++h) {
    uint32_t hb = runs[0].checks[h].host_bridge;
    WhitelistCheck& check = out.whitelist_checks[h];
    if (hb != kNone) {
      check.host_bridge = hb;
      check.root_device = rules_.map_types ? root_device_[hb] : slot_devfn0(topo_, topo_.host_bridges[hb]);
      if (rules_.map_types) check.entry = root_entry_[hb];
    }
    check.passed = runs[0].checks[h].passed;
    for (size_t i = 1; i < count; ++i)  // as pci_p2pdma_distance_many() merges the evaluations
      if (h < runs[i].check_count && runs[i].checks[h].passed != runs[0].checks[h].passed) check.passed.reset();
  }
  if (refused_by_config_) {
    out.map_type = MapType::kNotSupported;
    out.p2pdma_distance = -1;
  }
  return out;
}

PairOutcome outcome_of(const Topology& topo, const PairVerdict& v) {
  PairOutcome o;
  o.map_type = v.map_type;
  o.distance = v.distance;
  o.p2pdma_distance = v.p2pdma_distance;
  o.legacy_return = v.legacy_return;
  o.common_ancestor = v.common_ancestor;
  o.through_host_bridge = v.through_host_bridge;
  o.cpu_rule_consulted = v.cpu_rule_consulted;
  for (const auto& hb : v.host_bridges) {
    if (o.whitelist_check_count == std::size(o.whitelist_checks)) break;
    WhitelistCheck& check = o.whitelist_checks[o.whitelist_check_count++];
    for (size_t h = 0; h < topo.host_bridges.size() && !check.host_bridge; ++h)
      if (topo.host_bridges[h].name == hb.host_bridge) check.host_bridge = h;
    check.root_device = hb.root_device;
    check.entry = hb.entry;
    check.passed = hb.passed;
  }
  if (v.acs_considered)
    for (const auto& test : v.acs_tests) {
      o.acs_redirecting += test.redirect.value_or(false) ? 1 : 0;
      o.acs_unreadable += test.redirect ? 0 : 1;
    }
  return o;
}

PairVerdict P2pdmaIndex::verdict(size_t provider, size_t client) const {
  return pci_p2pdma_distance(topo_, rules_, provider, client);
}

}  // namespace p2paudit
