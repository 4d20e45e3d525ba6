// SPDX-License-Identifier: GPL-2.0-or-later
// --format dot: the tree as a Graphviz digraph, the audit's pairs as undirected edges beside it.
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "machine_view.h"
#include "p2paudit/acs_meaning.h"
#include "p2paudit/input_file.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/topology_report.h"

namespace p2paudit::picture {

namespace {

// Past this many devices the pair edges (n(n-1)/2) would bury the tree: the HTML page has them.
constexpr size_t kMaxEdgeDevices = 64;

// A DOT quoted string of lines: hostile bytes (control characters, invalid UTF-8) shown as \xNN
// first, so no newline, quote or backslash of the input can end the string or start an escape.
std::string dot_string(const std::vector<std::string>& lines) {
  std::string out = "\"";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\\n";
    for (char c : escape_text(lines[i])) {
      if (c == '\\' || c == '"') out += '\\';
      out += c == '\t' ? ' ' : c;
    }
  }
  return out + "\"";
}
std::string dot_string(const std::string& line) { return dot_string(std::vector<std::string>{line}); }

const char* fill_of(NodeKind k) {
  switch (k) {
    case NodeKind::kRootPort: return "#bbdefb";
    case NodeKind::kSwitchUpstream: return "#d1c4e9";
    case NodeKind::kSwitchDownstream: return "#e1bee7";
    case NodeKind::kBridge: return "#cfd8dc";
    case NodeKind::kEndpoint: return "#ffffff";
  }
  return "#ffffff";
}

const char* verdict_colour(MapType t) {
  switch (t) {
    case MapType::kBusAddr: return "#2e7d32";
    case MapType::kThruHostBridge: return "#1565c0";
    case MapType::kNotSupported: return "#c62828";
    case MapType::kUnknown: return "#757575";
  }
  return "#757575";
}

const char* decision_style(policy::Action a) {
  return a == policy::Action::kPeer ? "solid" : a == policy::Action::kDeny ? "dotted" : "dashed";
}

std::string function_node(const Topology& topo, const DrawnTree& tree, size_t i, const std::string& short_name) {
  const Function& f = topo.functions[i];
  NodeKind kind = node_kind(f);
  std::vector<std::string> lines{short_name.empty() ? f.bdf.str() : f.bdf.str() + "  " + short_name};
  lines.push_back(kind == NodeKind::kEndpoint ? f.class_name : kind_title(kind));
  lines.push_back(f.device_name.empty() ? fmt::format("[{:04x}:{:04x}]", f.vendor, f.device) : f.device_name);
  std::string facts;
  auto add = [&facts](const std::string& fact) { facts += (facts.empty() ? "" : ", ") + fact; };
  if (!f.driver.empty()) add("driver " + f.driver);
  if (f.numa_node >= 0 && f.numa_node != tree.roots[tree.root_of[i]].numa_node) add(fmt::format("NUMA {}", f.numa_node));
  if (f.iommu_group) add(fmt::format("IOMMU group {}", *f.iommu_group));
  if (!facts.empty()) lines.push_back(facts);
  auto redirect = acs_redirects(f);
  std::string attrs = fmt::format("fillcolor=\"{}\"", short_name.empty() ? fill_of(kind) : "#fff59d");
  if (kind != NodeKind::kEndpoint || f.acs.state == CapState::kPresent) lines.push_back(acs_line(f.acs));
  if (redirect == true) {
    lines.push_back("ACS redirect: P2P goes up to the root complex");
    attrs += ", color=\"#d32f2f\", penwidth=3, class=\"acs-redirect\"";
  } else if (!redirect.has_value() && kind != NodeKind::kEndpoint) {
    attrs += ", color=\"#ef6c00\", style=\"rounded,filled,dashed\", class=\"acs-unknown\"";
  }
  if (!short_name.empty()) attrs += ", penwidth=2";
  return fmt::format("f{} [label={}, {}];\n", i, dot_string(lines), attrs);
}

}  // namespace

void write_dot(std::ostream& out, const Topology& topo, Pairs* pairs, const std::string& source) {
  DrawnTree tree = drawn_tree(topo);
  auto names = short_names(topo, pairs);
  std::vector<std::string> title{"p2paudit: " + source, "Linux " + topo.platform.kernel_release};
  std::vector<std::string> legend{
      "red border: ACS redirect (RR/CR/EC) on the port: peer traffic goes up to the root complex",
      "orange dashed border: ACS control not readable"};
  bool draw_pairs = pairs && pairs->devices.size() <= kMaxEdgeDevices;
  if (pairs && draw_pairs)
    legend.push_back("yellow: devices that matter; edges: green BUS_ADDR, blue THRU_HOST_BRIDGE, red NOT_SUPPORTED, "
                     "grey unknown; solid peer, dashed host_staged, dotted deny");
  else if (pairs)
    legend.push_back(fmt::format("{} devices: the pairs are left out (p2paudit --format html, or p2paudit policy)",
                                 pairs->devices.size()));
  title.insert(title.end(), legend.begin(), legend.end());

  std::string s = "// p2paudit --format dot (docs/pictures.md); render with: dot -Tsvg -o machine.svg\n";
  s += "digraph p2paudit {\n";
  s += fmt::format("  graph [rankdir=LR, fontname=\"Helvetica\", fontsize=11, labelloc=t, labeljust=l, "
                   "nodesep=0.12, ranksep=0.45, label={}];\n", dot_string(title));
  s += "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=9, color=\"#546e7a\"];\n";
  s += "  edge [color=\"#78909c\", arrowhead=none, fontname=\"Helvetica\"];\n";
  int open_numa = -1;  // the NUMA node whose cluster is open, -1 none
  for (size_t r = 0; r < tree.roots.size(); ++r) {
    const DrawnRoot& root = tree.roots[r];
    int numa = tree.numa_known ? root.numa_node : -1;
    if (open_numa >= 0 && numa != open_numa) s += "  }\n", open_numa = -1;
    if (numa >= 0 && open_numa < 0) {
      s += fmt::format("  subgraph cluster_numa{} {{\n    label={}; style=dashed; color=\"#8d6e63\";\n", numa,
                       dot_string(fmt::format("NUMA node {}", numa)));
      open_numa = numa;
    }
    s += fmt::format("  subgraph cluster_hb{} {{\n    label={}; style=rounded; color=\"#ffb74d\";\n", r, dot_string(root.name));
    std::vector<std::string> hb_label{"host bridge " + root.name};
    if (!root.first_device.empty()) hb_label.push_back("first device " + root.first_device);
    s += fmt::format("    hb{} [label={}, shape=box3d, style=filled, fillcolor=\"#ffcc80\"];\n", r, dot_string(hb_label));
    for (size_t f : root.functions) s += "    " + function_node(topo, tree, f, names[f]);
    s += "  }\n";
  }
  if (open_numa >= 0) s += "  }\n";
  for (size_t r = 0; r < tree.roots.size(); ++r)
    for (size_t f : tree.roots[r].functions)
      s += tree.parent[f] ? fmt::format("  f{} -> f{};\n", *tree.parent[f], f) : fmt::format("  hb{} -> f{};\n", r, f);
  out << s;
  if (draw_pairs && pairs->devices.size() > 1) {
    PairGrid grid = pair_grid(*pairs);
    std::string edges = "  // pairs of the devices that matter: kernel verdict (colour) and policy decision (style)\n";
    const auto& devices = pairs->devices;
    auto label = [&](size_t e) {
      const Explanation& x = grid.explanations[e];
      return fmt::format("{} {}{}", matrix_code(x.map_type, false), policy::to_string(x.action), x.certain ? "" : "?");
    };
    for (size_t a = 0; a < devices.size(); ++a)
      for (size_t b = a + 1; b < devices.size(); ++b) {
        const Explanation& forward = grid.explanations[grid.cell[a][b]];
        std::string text = label(grid.cell[a][b]), back = label(grid.cell[b][a]);
        if (back != text) text = fmt::format("{}: {}, {}: {}", names[devices[a].index], text, names[devices[b].index], back);
        edges += fmt::format("  f{} -> f{} [dir=none, constraint=false, penwidth=2, color=\"{}\", fontcolor=\"{}\", "
                             "fontsize=8, style={}, label={}];\n",
                             devices[a].index, devices[b].index, verdict_colour(forward.map_type),
                             verdict_colour(forward.map_type), decision_style(forward.action), dot_string(text));
      }
    out << edges;
  }
  out << "}\n";
}

}  // namespace p2paudit::picture
