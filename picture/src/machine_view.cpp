// SPDX-License-Identifier: GPL-2.0-or-later
#include "machine_view.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace p2paudit::picture {

NodeKind node_kind(const Function& f) {
  switch (f.pcie_type) {
    case PcieType::kRootPort: return NodeKind::kRootPort;
    case PcieType::kSwitchUpstream: return NodeKind::kSwitchUpstream;
    case PcieType::kSwitchDownstream: return NodeKind::kSwitchDownstream;
    default: return f.is_bridge() ? NodeKind::kBridge : NodeKind::kEndpoint;
  }
}

const char* kind_id(NodeKind k) {
  switch (k) {
    case NodeKind::kRootPort: return "root_port";
    case NodeKind::kSwitchUpstream: return "switch_upstream";
    case NodeKind::kSwitchDownstream: return "switch_downstream";
    case NodeKind::kBridge: return "bridge";
    case NodeKind::kEndpoint: return "endpoint";
  }
  return "endpoint";
}

const char* kind_title(NodeKind k) {
  switch (k) {
    case NodeKind::kRootPort: return "Root Port";
    case NodeKind::kSwitchUpstream: return "Switch Upstream Port";
    case NodeKind::kSwitchDownstream: return "Switch Downstream Port";
    case NodeKind::kBridge: return "Bridge";
    case NodeKind::kEndpoint: return "Endpoint";
  }
  return "Endpoint";
}

std::optional<bool> acs_redirects(const Function& f) { return pci_bridge_has_acs_redir(f); }

DrawnTree drawn_tree(const Topology& topo) {
  const size_t n = topo.functions.size();
  DrawnTree tree;
  tree.parent.assign(n, std::nullopt);
  tree.depth.assign(n, 0);
  std::vector<bool> drawn(n, false);
  // A hostile capture may list a function under two parents or in a loop: each is drawn once.
  auto draw_from = [&](DrawnRoot& root, size_t start) {
    std::vector<size_t> stack{start};
    drawn[start] = true;
    while (!stack.empty()) {
      size_t f = stack.back();
      stack.pop_back();
      root.functions.push_back(f);
      if (root.numa_node < 0) root.numa_node = std::max(topo.functions[f].numa_node, -1);
      std::vector<size_t> children;
      for (size_t c : topo.functions[f].children)
        if (c < n && !drawn[c]) children.push_back(c), drawn[c] = true;
      std::sort(children.rbegin(), children.rend());  // popped in BDF order
      for (size_t c : children) {
        tree.parent[c] = f;
        tree.depth[c] = tree.depth[f] + 1;
        stack.push_back(c);
      }
    }
  };
  for (const auto& hb : topo.host_bridges) {
    DrawnRoot root;
    root.name = hb.name;
    std::vector<size_t> devices;
    for (size_t d : hb.root_bus_devices)
      if (d < n && !drawn[d]) devices.push_back(d);
    std::sort(devices.begin(), devices.end());
    if (!hb.root_bus_devices.empty() && hb.root_bus_devices.front() < n) {
      const Function& first = topo.functions[hb.root_bus_devices.front()];
      root.first_device = fmt::format("{} [{:04x}:{:04x}]", first.bdf.str(), first.vendor, first.device);
    }
    for (size_t d : devices) draw_from(root, d);
    tree.roots.push_back(std::move(root));
  }
  std::stable_sort(tree.roots.begin(), tree.roots.end(), [](const DrawnRoot& a, const DrawnRoot& b) {
    return static_cast<unsigned>(a.numa_node) < static_cast<unsigned>(b.numa_node);  // unknown (-1) last
  });
  DrawnRoot lost;
  lost.name = kNoHostBridge;
  for (size_t f = 0; f < n; ++f)
    if (!drawn[f]) draw_from(lost, f);
  if (!lost.functions.empty()) tree.roots.push_back(std::move(lost));
  tree.root_of.assign(n, 0);
  for (size_t r = 0; r < tree.roots.size(); ++r) {
    for (size_t f : tree.roots[r].functions) tree.root_of[f] = r;
    tree.numa_known |= tree.roots[r].numa_node >= 0;
  }
  return tree;
}

PairExplanations::PairExplanations(Pairs& pairs) : pairs_(pairs) {}

size_t PairExplanations::cell(size_t r, size_t c) {
  if (r == c) return PairGrid::kSelf;
  policy::PolicyEvaluator& evaluator = *pairs_.evaluator;
  size_t provider = pairs_.devices[r].index, client = pairs_.devices[c].index;
  size_t group = evaluator.decide(provider, client);
  PairOutcome o = evaluator.index().outcome(provider, client);
  unsigned whitelist = 0;
  for (size_t k = 0; k < o.whitelist_check_count; ++k) {
    const auto& passed = o.whitelist_checks[k].passed;
    whitelist |= (passed ? (*passed ? 1u : 2u) : 3u) << (2 * k);
  }
  Key key{group, o.map_type, o.common_ancestor.has_value(), o.acs_redirecting > 0, o.acs_unreadable > 0,
          o.through_host_bridge, whitelist, o.p2pdma_distance.has_value()};
  auto [it, added] = explanation_of_.emplace(key, explanations.size());
  if (added) {
    Explanation e;
    e.map_type = o.map_type;
    e.action = evaluator.groups()[group].action;
    e.certain = evaluator.groups()[group].certain();
    e.policy_group = group;
    e.example = {provider, client};
    explanations.push_back(e);
  }
  ++explanations[it->second].pairs;
  return it->second;
}

PairGrid pair_grid(Pairs& pairs) {
  PairGrid grid;
  PairExplanations explain(pairs);
  const size_t n = pairs.devices.size();
  grid.cell.assign(n, std::vector<size_t>(n, PairGrid::kSelf));
  for (size_t r = 0; r < n; ++r)
    for (size_t c = 0; c < n; ++c) grid.cell[r][c] = explain.cell(r, c);
  grid.explanations = std::move(explain.explanations);
  return grid;
}

std::vector<std::string> short_names(const Topology& topo, const Pairs* pairs) {
  std::vector<std::string> names(topo.functions.size());
  if (pairs)
    for (const auto& d : pairs->devices) names[d.index] = d.short_name;
  return names;
}

}  // namespace p2paudit::picture
