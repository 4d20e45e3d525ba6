// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/fleet/report.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <ostream>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/fleet/pretty_writer.h"
#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/json_output.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/pair_facts.h"
#include "p2paudit/probe/decision_inputs.h"
#include "p2paudit/snapshot.h"
#include "p2paudit/topology_reader.h"

namespace p2paudit::fleet {

namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json or_null(const std::optional<int>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); }
ordered_json or_null(const std::string& s) { return s.empty() ? ordered_json(nullptr) : ordered_json(s); }

std::string pci_id(const Function& f) { return fmt::format("{:04x}:{:04x}", f.vendor, f.device); }

ordered_json machine_json(const Platform& p, bool redact) {
  ordered_json m = ordered_json::object();
  if (!redact) m["hostname"] = p.hostname;
  m["arch"] = p.arch;
  m["cpu_vendor"] = p.cpu_vendor;
  m["cpu_family"] = or_null(p.cpu_family);
  m["cpu_model"] = or_null(p.cpu_model);
  m["cpu_model_name"] = p.cpu_model_name;
  m["kernel_release"] = p.kernel_release;
  m["iommu_mode"] = p.iommu_mode.empty() ? "unknown" : p.iommu_mode;
  m["vm"] = p.hypervisor;
  return m;
}

// Each host bridge with the first device on its root bus: the device pci_host_bridge_dev() looks
// at first, and the ID the fleet is grouped by whatever kernel release runs.
ordered_json host_bridges_json(const Topology& topo) {
  ordered_json out = ordered_json::array();
  for (const auto& hb : topo.host_bridges) {
    ordered_json root = nullptr, id = nullptr, name = nullptr;
    if (!hb.root_bus_devices.empty()) {
      const Function& f = topo.functions[hb.root_bus_devices.front()];
      root = f.bdf.str(), id = pci_id(f), name = f.device_name;
    }
    out.push_back({{"name", hb.name}, {"root_device", root}, {"id", id}, {"device_name", name}});
  }
  return out;
}

}  // namespace

std::string topology_digest(const Topology& topo) {
  std::vector<std::string> lines;
  for (const auto& f : topo.functions)
    lines.push_back(fmt::format("{} {} {}\n", f.bdf.str(), pci_id(f), f.parent ? topo.functions[*f.parent].bdf.str() : "-"));
  std::sort(lines.begin(), lines.end());
  std::uint64_t hash = 0xcbf29ce484222325u;  // FNV-1a, 64-bit
  for (const auto& line : lines)
    for (unsigned char c : line) hash = (hash ^ c) * 0x100000001b3u;
  return fmt::format("fnv1a64:{:016x}", hash);
}

const char* verdict_word(const PairOutcome& o) {
  if (!o.p2pdma_distance) return "unknown";
  return *o.p2pdma_distance < 0 ? "refused" : "allowed";
}

namespace {

// The root devices whose whitelist check refused the pair. The kernel stops at the first failing
// host bridge, so a pair names at most one.
template <typename Visit>
void for_each_refusing_root(const PairOutcome& o, Visit&& visit) {
  if (!o.p2pdma_distance || *o.p2pdma_distance >= 0) return;
  for (size_t k = 0; k < o.whitelist_check_count; ++k) {
    const WhitelistCheck& check = o.whitelist_checks[k];
    if (check.passed == false && check.root_device) visit(*check.root_device);
  }
}

}  // namespace

std::vector<std::string> refused_at(const Topology& topo, const PairOutcome& o) {
  std::vector<std::string> out;
  for_each_refusing_root(o, [&](size_t root) { out.push_back(pci_id(topo.functions[root])); });
  return out;
}

ReportPairs::ReportPairs(const MachineAnalysis& machine)
    : machine_(machine),
      devices_(matrix_devices(machine.topo, false)),
      evaluator_(std::make_unique<policy::PolicyEvaluator>(machine.topo, machine.kernel, machine.rules, machine.evidence)),
      reasons_(std::make_unique<VerdictReasons>(evaluator_->index())) {
  // The machine's layer of every pair's facts, as PolicyEvaluator lays the evidence's "all" over it.
  policy::FactSet facts = policy::machine_facts(machine.topo, machine.kernel);
  if (machine.evidence)
    for (const auto& [name, value] : machine.evidence->all.entries()) {
      if (value) facts.set(name, *value);
      else facts.set_unknown(name);
    }
  if (const auto* r = facts.get("vendor.copy_result")) machine_copy_result_ = std::get<std::string>(*r);
}

ReportPairs::~ReportPairs() = default;

const std::string& ReportPairs::copy_result(size_t provider, size_t client) const {
  static const std::string kUnknown;
  static const policy::FactId kCopyResult = *policy::fact_id("vendor.copy_result");
  const policy::VendorFactsDocument* evidence = machine_.evidence;
  // Device facts are "provider."/"client." ones: only the pair's own entry lies over the machine's.
  if (evidence && !evidence->pairs.empty()) {
    const Topology& topo = machine_.topo;
    auto it = evidence->pairs.find({topo.functions[provider].bdf, topo.functions[client].bdf});
    if (it != evidence->pairs.end())
      if (auto here = it->second.lookup_here(kCopyResult); here.set)
        return here.value ? std::get<std::string>(*here.value) : kUnknown;
  }
  return machine_copy_result_;
}

void ReportPairs::each_outcome(const std::function<void(size_t, size_t, const PairOutcome&)>& fn) {
  const P2pdmaIndex& index = evaluator_->index();
  for (const auto& p : devices_)
    for (const auto& c : devices_)
      if (p.index != c.index) fn(p.index, c.index, index.outcome(p.index, c.index));
}

const std::string& ReportPairs::reason(size_t provider, size_t client, const PairOutcome& outcome) {
  return reasons_->reason(provider, client, outcome);
}

void ReportPairs::each_group(
    const std::function<void(size_t, size_t, size_t, const policy::DecisionGroup&, const std::string&)>& fn) {
  for (const auto& p : devices_)
    for (const auto& c : devices_) {
      if (p.index == c.index) continue;
      size_t group = evaluator_->decide(p.index, c.index);
      fn(p.index, c.index, group, evaluator_->groups()[group], copy_result(p.index, c.index));
    }
}

void ReportPairs::each_verdict(const std::function<void(const ordered_json&)>& fn) {
  const Topology& topo = machine_.topo;
  each_outcome([&](size_t p, size_t c, const PairOutcome& o) {
    fn(ordered_json{{"provider", topo.functions[p].bdf.str()},
                    {"client", topo.functions[c].bdf.str()},
                    {"code", matrix_code(o.map_type, false)},
                    {"map_type", to_string(o.map_type)},
                    {"p2pdma_distance", or_null(o.p2pdma_distance)},
                    {"verdict", verdict_word(o)},
                    {"refused_at", refused_at(topo, o)},
                    {"reason", reason(p, c, o)}});
  });
}

void ReportPairs::each_decision(const std::function<void(const ordered_json&, const std::string&)>& fn) {
  const Topology& topo = machine_.topo;
  each_group([&](size_t p, size_t c, size_t, const policy::DecisionGroup& g, const std::string& copy) {
    fn(ordered_json{{"provider", topo.functions[p].bdf.str()},
                    {"client", topo.functions[c].bdf.str()},
                    {"decision", policy::to_string(g.action)},
                    {"certain", g.certain()},
                    {"rule", or_null(g.rule)},
                    {"authority", g.authority ? ordered_json(policy::to_string(*g.authority)) : ordered_json(nullptr)},
                    {"copy_result", or_null(copy)}},
       copy);
  });
}

ordered_json report_head(const MachineAnalysis& m, const ReportOptions& options) {
  const Topology& topo = m.topo;
  ordered_json devices_json = ordered_json::array();
  for (const auto& d : matrix_devices(topo, false)) {
    const Function& f = topo.functions[d.index];
    devices_json.push_back({{"name", d.short_name}, {"bdf", f.bdf.str()}, {"id", pci_id(f)}, {"driver", or_null(f.driver)}});
  }
  ordered_json j;
  j["schema_version"] = kReportSchemaVersion;
  j["kind"] = kReportKind;
  j["tool_version"] = options.tool_version;
  j["machine"] = machine_json(topo.platform, options.redact);
  j["topology_digest"] = topology_digest(topo);
  j["kernel_rules"] = {{"release", m.kernel.release.text.empty() ? m.kernel.release.version() : m.kernel.release.text},
                       {"rules_release", m.kernel.release.version()},
                       {"release_source", m.kernel.release_source},
                       {"config_pci_p2pdma", to_string(m.kernel.config_p2pdma)}};
  j["host_bridges"] = host_bridges_json(topo);
  j["devices"] = std::move(devices_json);
  return j;
}

ordered_json candidate_head(const Topology& topo, WhitelistCandidate& c) {
  std::vector<UnlockedPair> pairs = std::move(c.pairs);
  c.pairs.clear();
  ordered_json j = candidate_json(topo, c);
  c.pairs = std::move(pairs);
  j.erase("pairs");
  return j;
}

ordered_json pairs_summary(size_t devices, std::uint64_t most_listed) {
  const std::uint64_t count = ordered_pairs(devices);
  const bool listed = count <= most_listed;
  ordered_json j{{"count", count},
                 {"listed", listed},
                 {"most_listed", most_listed == UINT64_MAX ? ordered_json(nullptr) : ordered_json(most_listed)}};
  j["note"] = listed ? ordered_json(nullptr)
                     : ordered_json(fmt::format(
                           "{} ordered pairs, more than {}: kernel_verdicts, decisions and each candidate's pairs are "
                           "grouped, one element per kind of pair with its \"pairs\" count (every pair counted once); "
                           "`report --all-pairs` lists each pair, `p2paudit explain` tells one",
                           count, most_listed));
  return j;
}

namespace {

// The pairs of a machine past ReportOptions::most_listed_pairs: each section one element per kind
// of pair, counted exactly. Every pair is still decided (O(depth) each, nothing kept per pair);
// what is kept grows with the kinds: kernel codes and distances (bounded by the tree's depth), the
// host-bridge IDs that refuse, the policy's decision groups and the copy results.
void write_grouped_pairs(PrettyWriter& w, const MachineAnalysis& m, std::map<std::string, int>& copies) {
  const Topology& topo = m.topo;
  ReportPairs pairs(m);
  using VerdictKind = std::tuple<std::string, std::string, std::optional<int>, std::string, std::vector<size_t>>;
  std::map<VerdictKind, std::uint64_t> verdicts;
  std::vector<size_t> roots;
  pairs.each_outcome([&](size_t, size_t, const PairOutcome& o) {
    roots.clear();
    for_each_refusing_root(o, [&](size_t root) { roots.push_back(root); });
    ++verdicts[{matrix_code(o.map_type, false), to_string(o.map_type), o.p2pdma_distance, verdict_word(o), roots}];
  });
  w.key("kernel_verdicts");
  w.open_array();
  for (const auto& [kind, n] : verdicts) {
    const auto& [code, map_type, distance, verdict, refusing] = kind;
    ordered_json ids = ordered_json::array();
    for (size_t root : refusing) ids.push_back(pci_id(topo.functions[root]));
    w.element(ordered_json{{"pairs", n},
                           {"code", code},
                           {"map_type", map_type},
                           {"p2pdma_distance", or_null(distance)},
                           {"verdict", verdict},
                           {"refused_at", std::move(ids)}});
  }
  w.close_array();

  // By what an element shows (decision groups differ also in facts it does not): per decision
  // group and copy result while deciding, then merged by the members written.
  std::map<std::pair<size_t, std::string>, std::uint64_t> decided;  // (decision group, copy_result) -> pairs
  std::vector<const policy::DecisionGroup*> groups;
  pairs.each_group([&](size_t, size_t, size_t group, const policy::DecisionGroup& g, const std::string& copy) {
    if (auto it = copies.find(copy); it != copies.end()) ++it->second;
    if (group >= groups.size()) groups.resize(group + 1);
    groups[group] = &g;
    ++decided[{group, copy}];
  });
  using DecisionKind = std::tuple<std::string, bool, std::string, std::string, std::string>;
  std::map<DecisionKind, std::uint64_t> shown;
  for (const auto& [key, n] : decided) {
    const policy::DecisionGroup& g = *groups[key.first];
    shown[{policy::to_string(g.action), g.certain(), g.rule, g.authority ? policy::to_string(*g.authority) : "",
           key.second}] += n;
  }
  w.key("decisions");
  w.open_array();
  for (const auto& [kind, n] : shown) {
    const auto& [decision, certain, rule, authority, copy] = kind;
    w.element(ordered_json{{"pairs", n},
                           {"decision", decision},
                           {"certain", certain},
                           {"rule", or_null(rule)},
                           {"authority", or_null(authority)},
                           {"copy_result", or_null(copy)}});
  }
  w.close_array();

  // Each candidate's pairs by copy result: what whitelist_candidates() counts without keeping them.
  w.key("candidates");
  w.open_array();
  WhitelistOptions counted;
  counted.count_pairs_only = true;
  for (auto& c : whitelist_candidates(topo, m.kernel, m.evidence, counted)) {
    ordered_json j = candidate_json(topo, c);
    ordered_json kinds = ordered_json::array();
    for (const auto& [result, n] : c.copy_results) kinds.push_back({{"pairs", n}, {"copy_result", or_null(result)}});
    j["pairs"] = std::move(kinds);
    w.element(std::move(j));
  }
  w.close_array();
}

}  // namespace

void write_machine_report(std::ostream& out, const MachineAnalysis& m, const ReportOptions& options) {
  const Topology& topo = m.topo;
  PrettyWriter w(out);
  w.open_object();
  ordered_json head = report_head(m, options);
  const size_t device_count = head["devices"].size();
  if (!pairs_listed(device_count, options.most_listed_pairs)) head["schema_version"] = kGroupedReportSchemaVersion;
  for (auto& [key, value] : head.items()) w.member(key, std::move(value));
  w.member("pairs", pairs_summary(device_count, options.most_listed_pairs));
  if (!pairs_listed(device_count, options.most_listed_pairs)) {
    std::map<std::string, int> copies{{"verified", 0}, {"corrupt", 0}, {"failed", 0}};
    write_grouped_pairs(w, m, copies);
    w.member("probe", {{"source", m.probe.source}, {"note", m.probe.note}, {"asked", m.probe.asked}, {"copies", copies}});
    w.close_object();
    w.finish();
    return;
  }

  // Each pair's element written as PrettyWriter::element() would write its JSON, without building
  // it: what does not change from pair to pair (keys, indentation, a device's quoted BDF, a root
  // device's quoted ID, a decision's members) is made once, and a value that repeats from the
  // pair before is not scanned again.
  ReportPairs pairs(m);
  std::vector<std::string> quoted_bdf(topo.functions.size()), quoted_id(topo.functions.size());
  for (const auto& d : pairs.devices()) append_json_string(quoted_bdf[d.index], topo.functions[d.index].bdf.str());
  auto id_of = [&](size_t root) -> const std::string& {
    if (quoted_id[root].empty()) append_json_string(quoted_id[root], pci_id(topo.functions[root]));
    return quoted_id[root];
  };
  RepeatedString code, map_type, verdict, reason;
  w.key("kernel_verdicts");
  w.open_array();
  const ObjectLayout verdict_layout(
      {"provider", "client", "code", "map_type", "p2pdma_distance", "verdict", "refused_at", "reason"}, w.element_indent());
  pairs.each_outcome([&](size_t p, size_t c, const PairOutcome& o) {
    w.element_with([&](std::string& text) {
      ObjectText e(text, verdict_layout);
      e.json(quoted_bdf[p]);
      e.json(quoted_bdf[c]);
      e.json(code.json(matrix_code(o.map_type, false)));
      e.json(map_type.json(to_string(o.map_type)));
      e.number(o.p2pdma_distance);
      e.json(verdict.json(verdict_word(o)));
      e.open_array();
      for_each_refusing_root(o, [&](size_t root) { e.array_json(id_of(root)); });
      e.close_array();
      e.json(reason.json(pairs.reason(p, c, o)));
      e.close();
    });
  });
  w.close_array();

  std::map<std::string, int> copies{{"verified", 0}, {"corrupt", 0}, {"failed", 0}};
  w.key("decisions");
  w.open_array();
  const ObjectLayout decision_layout({"provider", "client", "decision", "certain", "rule", "authority", "copy_result"},
                                     w.element_indent());
  // Per decision group: its "decision", "certain", "rule" and "authority" values as JSON.
  std::vector<std::array<std::string, 4>> group_json;
  auto json_or_null = [](std::string_view value) {
    std::string json = value.empty() ? "null" : "";
    if (!value.empty()) append_json_string(json, value);
    return json;
  };
  RepeatedString copy_json;
  pairs.each_group([&](size_t p, size_t c, size_t group, const policy::DecisionGroup& g, const std::string& copy) {
    if (auto it = copies.find(copy); it != copies.end()) ++it->second;
    if (group >= group_json.size()) group_json.resize(group + 1);
    auto& decision = group_json[group];
    if (decision[0].empty())
      decision = {json_or_null(policy::to_string(g.action)), g.certain() ? "true" : "false", json_or_null(g.rule),
                  json_or_null(g.authority ? policy::to_string(*g.authority) : "")};
    w.element_with([&](std::string& text) {
      ObjectText e(text, decision_layout);
      e.json(quoted_bdf[p]);
      e.json(quoted_bdf[c]);
      for (const auto& member : decision) e.json(member);
      e.json(copy.empty() ? std::string_view("null") : std::string_view(copy_json.json(copy)));
      e.close();
    });
  });
  w.close_array();

  w.key("candidates");
  w.open_array();
  // Candidates counted first, then each one's pairs handed out again: one pass over the pairs per
  // candidate, nothing kept per pair.
  WhitelistOptions counted;
  counted.count_pairs_only = true;
  for (auto& c : whitelist_candidates(topo, m.kernel, m.evidence, counted))
    write_with_pairs(w, topo, candidate_json(topo, c), candidate_pairs(topo, m.kernel, m.evidence, counted, c));
  w.close_array();

  w.member("probe", {{"source", m.probe.source}, {"note", m.probe.note}, {"asked", m.probe.asked}, {"copies", copies}});
  w.close_object();
  w.finish();
}

void with_sysroot_analysis(const Sysroot& root, const KernelRuleData& kernel_data, const policy::RuleSet& rules,
                           const std::function<void(const MachineAnalysis&)>& fn) {
  Topology topo = read_topology(root);
  KernelRules kernel = select_kernel_rules(kernel_data, topo.platform, {});
  ProbeSummary probe;
  std::optional<policy::VendorFactsDocument> evidence;
  if (!root.is_live() && root.exists(kProbeResultsPath)) {
    std::string origin = fmt::format("{}: {}", root.origin(), kProbeResultsPath);
    auto text = root.read_text(kProbeResultsPath);
    if (!text) throw InputError(fmt::format("{}: not a regular file of at most {} bytes", origin, root.limits().max_file_bytes));
    RuntimeEvidence stored = stored_runtime_evidence(*text, origin, topo);
    probe = {stored.source, stored.note, std::move(stored.asked)};
    evidence = std::move(stored.facts);
  } else {
    probe.note = "the snapshot holds no probe results (`p2paudit snapshot --probe` stores them)";
  }
  fn({topo, kernel, rules, evidence ? &*evidence : nullptr, std::move(probe)});
}

}  // namespace p2paudit::fleet
