// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/fleet/report.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/probe/runtime_facts.h"
#include "p2paudit/snapshot.h"
#include "p2paudit/topology_reader.h"

namespace p2paudit::fleet {

namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json or_null(const std::optional<int>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); }
ordered_json or_null(const std::string& s) { return s.empty() ? ordered_json(nullptr) : ordered_json(s); }

std::string pci_id(const Function& f) { return fmt::format("{:04x}:{:04x}", f.vendor, f.device); }

const char* verdict_word(const PairVerdict& v) {
  if (!v.p2pdma_distance) return "unknown";
  return *v.p2pdma_distance < 0 ? "refused" : "allowed";
}

// The root devices whose whitelist check refused the pair: what `aggregate` counts per
// host-bridge ID. The kernel stops at the first failing host bridge, so a pair names at most one.
std::vector<std::string> refused_at(const Topology& topo, const PairVerdict& v) {
  std::vector<std::string> out;
  if (verdict_word(v) != std::string_view("refused")) return out;
  for (const auto& check : v.host_bridges)
    if (check.passed == false && check.root_device) out.push_back(pci_id(topo.functions[*check.root_device]));
  return out;
}

std::string copy_result(const policy::FactSet& facts) {
  const auto* r = facts.get("vendor.copy_result");
  return r ? std::get<std::string>(*r) : "";
}

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

ordered_json machine_report(const MachineAnalysis& m, const ReportOptions& options) {
  const Topology& topo = m.topo;
  auto bdf = [&](size_t i) { return topo.functions[i].bdf.str(); };
  auto devices = matrix_devices(topo, false);

  ordered_json devices_json = ordered_json::array();
  for (const auto& d : devices) {
    const Function& f = topo.functions[d.index];
    devices_json.push_back({{"name", d.short_name}, {"bdf", f.bdf.str()}, {"id", pci_id(f)}, {"driver", or_null(f.driver)}});
  }

  ordered_json verdicts = ordered_json::array(), decisions = ordered_json::array();
  std::map<std::string, int> copies{{"verified", 0}, {"corrupt", 0}, {"failed", 0}};
  policy::PolicyEvaluator evaluator(topo, m.kernel, m.rules, m.evidence);
  for (const auto& p : devices)
    for (const auto& c : devices) {
      if (p.index == c.index) continue;
      auto d = evaluator.decide_in_full(p.index, c.index);
      const PairVerdict& v = d.verdict;
      verdicts.push_back({{"provider", bdf(p.index)},
                          {"client", bdf(c.index)},
                          {"code", matrix_code(v)},
                          {"map_type", to_string(v.map_type)},
                          {"p2pdma_distance", or_null(v.p2pdma_distance)},
                          {"verdict", verdict_word(v)},
                          {"refused_at", refused_at(topo, v)},
                          {"reason", v.reason}});
      std::string copy = copy_result(d.facts);
      if (auto it = copies.find(copy); it != copies.end()) ++it->second;
      decisions.push_back({{"provider", bdf(p.index)},
                           {"client", bdf(c.index)},
                           {"decision", policy::to_string(d.decision.action)},
                           {"rule", or_null(d.decision.rule)},
                           {"authority", d.decision.authority ? ordered_json(policy::to_string(*d.decision.authority))
                                                              : ordered_json(nullptr)},
                           {"copy_result", or_null(copy)}});
    }

  ordered_json candidates = ordered_json::array();
  for (const auto& c : whitelist_candidates(topo, m.kernel, m.evidence)) candidates.push_back(candidate_json(topo, c));

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
  j["kernel_verdicts"] = std::move(verdicts);
  j["decisions"] = std::move(decisions);
  j["candidates"] = std::move(candidates);
  j["probe"] = {{"source", m.probe.source}, {"note", m.probe.note}, {"asked", m.probe.asked}, {"copies", copies}};
  return j;
}

ordered_json sysroot_report(const Sysroot& root, const KernelRuleData& kernel_data, const policy::RuleSet& rules,
                            const ReportOptions& options) {
  Topology topo = read_topology(root);
  KernelRules kernel = select_kernel_rules(kernel_data, topo.platform, {});
  ProbeSummary probe;
  std::optional<policy::VendorFactsDocument> evidence;
  if (!root.is_live() && root.exists(kProbeResultsPath)) {
    std::string origin = fmt::format("{}: {}", root.origin(), kProbeResultsPath);
    auto text = root.read_text(kProbeResultsPath);
    if (!text) throw InputError(fmt::format("{}: not a regular file of at most {} bytes", origin, root.limits().max_file_bytes));
    auto facts = probe::runtime_facts(probe::parse_probe_document(*text, origin), origin, &topo);
    for (auto& finding : facts.findings) topo.findings.push_back(std::move(finding));
    probe = {"snapshot", "runtime answers stored in the snapshot (snapshot --probe)", std::move(facts.asked)};
    evidence = std::move(facts.facts);
  } else {
    probe.note = "the snapshot holds no probe results (`p2paudit snapshot --probe` stores them)";
  }
  return machine_report({topo, kernel, rules, evidence ? &*evidence : nullptr, std::move(probe)}, options);
}

}  // namespace p2paudit::fleet
