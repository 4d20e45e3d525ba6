// SPDX-License-Identifier: GPL-2.0-or-later
// --format html: one self-contained page (picture/src/page.html) with the machine as JSON in it.
#include <ostream>
#include <string_view>

#include <fmt/format.h>

#include "machine_view.h"
#include "p2paudit/acs_meaning.h"
#include "page.h"
#include "p2paudit/fleet/report.h"
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
          {"acs", acs_line(f.acs)},
          // The bits set, by name; what each does is in the page's acs_bits once (acs_meaning.h).
          {"acs_set", f.acs.state == CapState::kPresent ? Json(acs_bit_names(f.acs.ctrl)) : Json(nullptr)},
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
          {"certain", d.certain()},
          {"uncertain", policy::also_possible_text(d)},
          {"settle", policy::settle_text(d)},
          {"fired", fired},
          {"unknown_facts", d.unknown_facts}};
}

// The page's data, compact JSON with hostile strings escaped as in text (the JSON is UTF-8; the
// page shows them, so bidi and zero-width characters too: JsonReader::kPerson) and no '<' left
// raw (inside <script> only "</script" or "<!--" could end the block early), written as it is
// computed: one function, one grid row, one candidate pair at a time, flushed every 64 KiB, so
// memory does not grow with the number of pairs.
class DataWriter {
 public:
  explicit DataWriter(std::ostream& out) : out_(out) {}
  void raw(std::string_view text) {
    for (char c : text)
      if (c == '<') buf_ += "\\u003c";
      else buf_ += c;
    if (buf_.size() >= kFlushBytes) flush();
  }
  void key(std::string_view name, bool first = false) {
    if (!first) raw(",");
    raw(Json(std::string(name)).dump());
    raw(":");
  }
  void value(Json j) {
    escape_json_strings(j, JsonReader::kPerson);
    raw(j.dump());
  }
  void member(std::string_view name, Json j, bool first = false) {
    key(name, first);
    value(std::move(j));
  }
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

 private:
  static constexpr size_t kFlushBytes = 64 * 1024;
  std::ostream& out_;
  std::string buf_;
};

void write_machine_data(DataWriter& w, const Topology& topo, Pairs* pairs, const std::string& source) {
  DrawnTree tree = drawn_tree(topo);
  auto names = short_names(topo, pairs);
  const Platform& p = topo.platform;
  w.raw("{");
  w.member("source", source, true);
  w.member("platform", {{"kernel_release", p.kernel_release},
                        {"hostname", p.hostname},
                        {"cpu", p.cpu_model_name},
                        {"hypervisor", p.hypervisor},
                        {"iommu_mode", p.iommu_mode}});
  Json roots = Json::array();
  for (const auto& r : tree.roots)
    roots.push_back({{"name", r.name}, {"numa", tree.numa_known ? r.numa_node : -1},
                     {"first_device", r.first_device}, {"functions", r.functions}});
  w.member("roots", std::move(roots));
  w.member("acs_bits", acs_meanings_json());
  w.key("functions");
  w.raw("[");
  for (size_t i = 0; i < topo.functions.size(); ++i) {
    if (i) w.raw(",");
    w.value(function_json(topo, tree, i, names[i]));
  }
  w.raw("]");
  Json notes = Json::array();
  for (const auto& f : topo.findings) notes.push_back(f.path + ": " + f.message);
  if (auto note = privilege_note(topo); !note.empty()) notes.push_back(note);
  if (pairs) {
    for (const auto& note : pairs->evaluator->index().rules().notes) notes.push_back(note);
    Json devices = Json::array();
    for (const auto& d : pairs->devices) devices.push_back(d.index);
    w.key("pairs");
    w.raw("{");
    w.member("devices", std::move(devices), true);
    w.key("grid");
    w.raw("[");
    PairExplanations explain(*pairs);
    const size_t n = pairs->devices.size();
    for (size_t r = 0; r < n; ++r) {
      std::string row = r ? ",[" : "[";
      for (size_t c = 0; c < n; ++c) {
        size_t e = explain.cell(r, c);
        if (c) row += ',';
        row += e == PairGrid::kSelf ? "-1" : std::to_string(e);
      }
      w.raw(row + "]");
    }
    w.raw("]}");
    Json explanations = Json::array();
    for (const Explanation& e : explain.explanations) {
      policy::PairDecision full = pairs->evaluator->decide_in_full(e.example.first, e.example.second);
      explanations.push_back({{"map_type", to_string(e.map_type)},
                              {"decision", policy::to_string(e.action)},
                              {"pairs", e.pairs},
                              {"example", {e.example.first, e.example.second}},
                              {"kernel", kernel_part(full.verdict)},
                              {"policy", policy_part(full.decision)}});
    }
    w.member("explanations", std::move(explanations));
    w.key("candidates");
    w.raw("[");
    for (size_t i = 0; i < pairs->candidates.size(); ++i) {
      fleet::WhitelistCandidate& c = pairs->candidates[i];
      Json head = fleet::candidate_head(topo, c);
      // The page names no address (self-contained): upstream's state without its link.
      if (head.contains("upstream") && head["upstream"].is_object()) head["upstream"].erase("link");
      escape_json_strings(head, JsonReader::kPerson);
      std::string text = head.dump();
      text.pop_back();  // "}": its pairs follow
      w.raw(i ? "," : "");
      w.raw(text);
      w.key("pairs", head.empty());
      w.raw("[");
      bool first = true;
      auto pair = [&](const fleet::UnlockedPair& p) {
        w.raw(first ? "" : ",");
        first = false;
        w.value(fleet::unlocked_pair_json(topo, p));
      };
      if (c.pairs.empty() && c.pair_count) {  // counted, not kept: handed out again one at a time
        fleet::WhitelistOptions counted;
        counted.count_pairs_only = true;
        fleet::for_each_unlocked_pair(topo, pairs->evaluator->index().rules(), pairs->evidence, counted,
                                      [&](const fleet::UnlockedPair& p, uint16_t vendor, uint16_t device) {
                                        if (vendor == c.vendor && device == c.device) pair(p);
                                      });
      } else {
        for (const auto& p : c.pairs) pair(p);
      }
      w.raw("]}");
    }
    w.raw("]");
    // Sets of entries (docs/whitelist.md): pairs no single entry unlocks, each set's pairs handed
    // out one at a time as the candidates' are.
    fleet::WhitelistOptions counted;
    counted.count_pairs_only = true;
    const KernelRules& rules = pairs->evaluator->index().rules();
    w.key("candidate_sets");
    w.raw("[");
    bool first_set = true;
    for (const auto& s : fleet::candidate_sets(topo, rules, pairs->evidence, counted)) {
      Json head = fleet::candidate_set_json(topo, s);
      head.erase("pairs");
      escape_json_strings(head, JsonReader::kPerson);
      std::string text = head.dump();
      text.pop_back();  // "}": its pairs follow
      w.raw(first_set ? "" : ",");
      first_set = false;
      w.raw(text);
      w.key("pairs");
      w.raw("[");
      bool first = true;
      fleet::for_each_unlocked(topo, rules, pairs->evidence, counted,
                               [&](const fleet::UnlockedPair& p, const std::vector<fleet::NeededEntry>& needed) {
                                 if (needed != s.entries) return;
                                 w.raw(first ? "" : ",");
                                 first = false;
                                 w.value(fleet::unlocked_pair_json(topo, p));
                               });
      w.raw("]}");
    }
    w.raw("]");
  } else {
    w.member("pairs", nullptr);
    w.member("candidates", nullptr);
    w.member("candidate_sets", nullptr);
  }
  w.member("notes", std::move(notes));
  w.raw("}");
}

}  // namespace

void write_html(std::ostream& out, const Topology& topo, Pairs* pairs, const std::string& source) {
  constexpr std::string_view kMarker = "@MACHINE_DATA@";
  size_t at = kPageTemplate.find(kMarker);
  out << kPageTemplate.substr(0, at);
  DataWriter w(out);
  write_machine_data(w, topo, pairs, source);
  w.flush();
  out << kPageTemplate.substr(at + kMarker.size());
}

}  // namespace p2paudit::picture
