// SPDX-License-Identifier: GPL-2.0-or-later
// --format html: one self-contained page (picture/src/page.html) with the machine as JSON in it.
#include <fmt/format.h>

#include "machine_view.h"
#include "page.h"
#include "p2paudit/json_output.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/topology_report.h"

namespace p2paudit::picture {

namespace {

using Json = nlohmann::ordered_json;

Json optional_json(const std::optional<int>& v) { return v ? Json(*v) : Json(nullptr); }

std::string link_text(const Link& l) {
  if (l.current_speed.empty()) return "";
  std::string text = fmt::format("{} x{}", l.current_speed, l.current_width);
  if (!l.max_speed.empty() && (l.max_speed != l.current_speed || l.max_width != l.current_width))
    text += fmt::format(" (max {} x{})", l.max_speed, l.max_width);
  return text;
}

Json function_json(const Topology& topo, const DrawnTree& tree, size_t i, const std::string& short_name) {
  const Function& f = topo.functions[i];
  NodeKind kind = node_kind(f);
  auto redirect = acs_redirects(f);
  return {{"bdf", f.bdf.str()},
          {"parent", tree.parent[i] ? Json(*tree.parent[i]) : Json(nullptr)},
          {"root", tree.root_of[i]},
          {"depth", tree.depth[i]},
          {"kind", kind_id(kind)},
          {"kind_title", kind_title(kind)},
          {"device", short_name},
          {"name", f.device_name.empty() ? fmt::format("[{:04x}:{:04x}]", f.vendor, f.device) : f.device_name},
          {"vendor", f.vendor_name},
          {"class", f.class_name},
          {"ids", fmt::format("{:04x}:{:04x}", f.vendor, f.device)},
          {"driver", f.driver},
          {"numa", f.numa_node},
          {"iommu_group", optional_json(f.iommu_group)},
          {"link", link_text(f.link)},
          {"acs", acs_summary(f.acs)},
          {"redirect", redirect ? Json(*redirect) : Json(nullptr)},
          {"vf", f.is_virtfn}};
}

Json kernel_part(const PairVerdict& v) {
  std::vector<std::string> remedies;
  if (!v.remedy.disable_acs_redir.empty())
    remedies.push_back("boot with pci=disable_acs_redir=" + v.remedy.disable_acs_redir);
  remedies.insert(remedies.end(), v.remedy.alternatives.begin(), v.remedy.alternatives.end());
  // Why the kernel refuses is no fix: the whitelist statement is shown on its own, as explain does.
  return {{"reason", v.reason},
          {"log", v.kernel_log},
          {"unknowns", v.unknowns},
          {"whitelist", v.remedy.whitelist},
          {"remedies", remedies}};
}

Json policy_part(const policy::Decision& d) {
  Json fired = Json::array();
  for (const auto& r : d.fired)
    fired.push_back({{"id", r.id}, {"action", policy::to_string(r.action)}, {"reason", r.reason}, {"remedy", r.remedy}});
  return {{"rule", d.rule},
          {"authority", d.authority ? policy::to_string(*d.authority) : ""},
          {"reason", d.reason},
          {"remedy", d.remedy},
          {"fired", fired},
          {"unknown_facts", d.unknown_facts}};
}

Json machine_json(const Topology& topo, Pairs* pairs, const std::string& source) {
  DrawnTree tree = drawn_tree(topo);
  auto names = short_names(topo, pairs);
  const Platform& p = topo.platform;
  Json j = {{"source", source},
            {"platform", {{"kernel_release", p.kernel_release},
                          {"hostname", p.hostname},
                          {"cpu", p.cpu_model_name},
                          {"hypervisor", p.hypervisor},
                          {"iommu_mode", p.iommu_mode}}}};
  Json roots = Json::array();
  for (const auto& r : tree.roots)
    roots.push_back({{"name", r.name}, {"numa", tree.numa_known ? r.numa_node : -1},
                     {"first_device", r.first_device}, {"functions", r.functions}});
  j["roots"] = std::move(roots);
  Json functions = Json::array();
  for (size_t i = 0; i < topo.functions.size(); ++i) functions.push_back(function_json(topo, tree, i, names[i]));
  j["functions"] = std::move(functions);
  Json notes = Json::array();
  for (const auto& f : topo.findings) notes.push_back(f.path + ": " + f.message);
  if (auto note = privilege_note(topo); !note.empty()) notes.push_back(note);
  if (pairs) {
    for (const auto& note : pairs->evaluator->index().rules().notes) notes.push_back(note);
    PairGrid grid = pair_grid(*pairs);
    Json devices = Json::array(), rows = Json::array();
    for (const auto& d : pairs->devices) devices.push_back(d.index);
    for (const auto& row : grid.cell) {
      Json cells = Json::array();
      for (size_t e : row) cells.push_back(e == PairGrid::kSelf ? Json(-1) : Json(e));
      rows.push_back(std::move(cells));
    }
    j["pairs"] = {{"devices", std::move(devices)}, {"grid", std::move(rows)}};
    Json explanations = Json::array();
    for (const Explanation& e : grid.explanations) {
      policy::PairDecision full = pairs->evaluator->decide_in_full(e.example.first, e.example.second);
      explanations.push_back({{"map_type", to_string(e.map_type)},
                              {"decision", policy::to_string(e.action)},
                              {"pairs", e.pairs},
                              {"example", {e.example.first, e.example.second}},
                              {"kernel", kernel_part(full.verdict)},
                              {"policy", policy_part(full.decision)}});
    }
    j["explanations"] = std::move(explanations);
    Json candidates = Json::array();
    for (const auto& c : pairs->candidates) candidates.push_back(fleet::candidate_json(topo, c));
    j["candidates"] = std::move(candidates);
  } else {
    j["pairs"] = nullptr;
    j["candidates"] = nullptr;
  }
  j["notes"] = std::move(notes);
  return j;
}

}  // namespace

void write_html(std::ostream& out, const Topology& topo, Pairs* pairs, const std::string& source) {
  Json j = machine_json(topo, pairs, source);
  escape_json_strings(j);  // hostile bytes as \xNN: the JSON is UTF-8
  std::string data = j.dump();
  // Inside <script> only "</script" (or "<!--") could end the block early: no '<' is left raw.
  std::string safe;
  safe.reserve(data.size());
  for (char c : data)
    if (c == '<') safe += "\\u003c";
    else safe += c;
  constexpr std::string_view kMarker = "@MACHINE_DATA@";
  size_t at = kPageTemplate.find(kMarker);
  out << kPageTemplate.substr(0, at) << safe << kPageTemplate.substr(at + kMarker.size());
}

}  // namespace p2paudit::picture
