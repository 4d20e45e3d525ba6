// SPDX-License-Identifier: GPL-2.0-or-later
// whitelist, report and --format prom decide their pairs through P2pdmaIndex and PolicyEvaluator
// (issue 21): what they print must equal what the full pci_p2pdma_distance() of every pair gives.
// The reference path: every pair's whole verdict, fleet::entries_needed() of that verdict (a
// KernelRules copy per pair), decide_in_full() for the decisions, the report
// document built in one tree and printed by json_text(). Compared on every capture in tests/data
// under every kernel era the rules know, on random trees (unreadable ACS and root ports, several
// host bridges, VFs, an unknown CPU), on generated machines, on public-case shapes, with
// --assume-whitelisted and booted (--kernel-rules) entries, and with copy evidence.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "p2paudit/fleet/prometheus.h"
#include "p2paudit/fleet/report.h"
#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/json_output.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "synth.h"
#include "kernel_eras.h"
#include "synthetic_tree.h"
#include "temp_dir.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using fleet::NeededEntry;
using fleet::UnlockedPair;
using ordered_json = nlohmann::ordered_json;

// One release of each era the kernel rules distinguish (kernel_rules.h).
// A kernel booted with an entry for every root device of the machine, as --kernel-rules adds it:
// each candidate is judged without it, and run_kernel_allowed reads it.
KernelRules booted_with_every_root(const Topology& t, const std::string& release) {
  KernelRules rules = test::rules_for(t, release);
  for (const auto& hb : t.host_bridges) {
    if (hb.root_bus_devices.empty()) continue;
    const Function& root = t.functions[hb.root_bus_devices.front()];
    WhitelistEntry e;
    e.vendor = root.vendor;
    e.device = root.device;
    e.origin = "--kernel-rules test";
    rules.whitelist.push_back(e);
  }
  return rules;
}

const policy::RuleSet& default_policy() {
  static const policy::RuleSet rules = policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  return rules;
}

// ---- The reference: every pair's full verdict (the code before the index) ----

struct Unlocked {
  UnlockedPair pair;
  std::vector<NeededEntry> needed;
};

std::vector<Unlocked> reference_unlocked(const Topology& topo, const KernelRules& kernel,
                                         const policy::VendorFactsDocument* evidence, const fleet::WhitelistOptions& options) {
  std::vector<Unlocked> out;
  if (!kernel.p2pdma || !kernel.whitelist_table || kernel.config_p2pdma == Known::kNo) return out;
  const KernelRules base = fleet::without_booted_entries(kernel);
  const bool booted = base.whitelist.size() != kernel.whitelist.size();
  const auto devices = matrix_devices(topo, options.all_functions);
  for (const auto& p : devices)
    for (const auto& c : devices) {
      if (p.index == c.index) continue;
      PairVerdict v = pci_p2pdma_distance(topo, base, p.index, c.index);
      if (!v.p2pdma_distance || *v.p2pdma_distance >= 0 || !v.through_host_bridge) continue;
      auto needed = fleet::entries_needed(topo, base, v);  // of the full verdict
      if (needed.empty()) continue;
      UnlockedPair pair;
      pair.provider = p.index, pair.client = c.index;
      pair.same_host_bridge = topo.functions[p.index].host_bridge == topo.functions[c.index].host_bridge;
      for (const auto& t : v.acs_tests)
        if (t.redirect == true) pair.acs_redirect.push_back(topo.functions[t.function].bdf.str());
      if (booted) {
        PairVerdict run = pci_p2pdma_distance(topo, kernel, p.index, c.index);
        pair.run_kernel_allowed = run.p2pdma_distance && *run.p2pdma_distance >= 0;
      }
      fleet::pair_copy_evidence(topo, evidence, options.claimed, pair);
      out.push_back({std::move(pair), std::move(needed)});
    }
  return out;
}

std::string describe(const Topology& topo, const Unlocked& u) {
  std::vector<std::string> ids;
  for (const auto& e : u.needed) ids.push_back(e.id() + (e.same_host_bridge_ok ? "/same" : ""));
  const UnlockedPair& p = u.pair;
  return fmt::format("{} -> {} same={} acs=[{}] copy={} seen={} provenance={} runtime={} run_allowed={} note={} "
                     "gbps={} staged={} needs {}",
                     topo.functions[p.provider].bdf.str(), topo.functions[p.client].bdf.str(), p.same_host_bridge,
                     fmt::join(p.acs_redirect, ","), p.copy_result, p.seen_copy_result, p.copy_provenance, p.copy_runtime,
                     p.run_kernel_allowed, p.copy_note, p.copy_gbps ? fmt::format("{}", *p.copy_gbps) : "-",
                     p.staged_gbps ? fmt::format("{}", *p.staged_gbps) : "-", fmt::join(ids, "+"));
}

// What a report's kernel_verdicts and decisions held before the index: each element built from
// the pair's whole verdict and its decide_in_full().
ordered_json reference_verdict_json(const Topology& topo, const PairVerdict& v) {
  const char* word = !v.p2pdma_distance ? "unknown" : *v.p2pdma_distance < 0 ? "refused" : "allowed";
  std::vector<std::string> refused_at;
  if (std::string_view(word) == "refused")
    for (const auto& check : v.host_bridges)
      if (check.passed == false && check.root_device) {
        const Function& f = topo.functions[*check.root_device];
        refused_at.push_back(fmt::format("{:04x}:{:04x}", f.vendor, f.device));
      }
  return {{"provider", topo.functions[v.provider].bdf.str()},
          {"client", topo.functions[v.client].bdf.str()},
          {"code", matrix_code(v)},
          {"map_type", to_string(v.map_type)},
          {"p2pdma_distance", v.p2pdma_distance ? ordered_json(*v.p2pdma_distance) : ordered_json(nullptr)},
          {"verdict", word},
          {"refused_at", refused_at},
          {"reason", v.reason}};
}

std::string fact_copy_result(const policy::FactSet& facts) {
  const auto* r = facts.get("vendor.copy_result");
  return r ? std::get<std::string>(*r) : "";
}

// The whole report as one tree printed by json_text(): what write_machine_report() streamed before.
std::string reference_report(const fleet::MachineAnalysis& m, const std::vector<Unlocked>& unlocked) {
  const Topology& topo = m.topo;
  ordered_json doc = fleet::report_head(m, {"test", false});
  policy::PolicyEvaluator evaluator(topo, m.kernel, m.rules, m.evidence);
  const auto devices = matrix_devices(topo, false);
  ordered_json verdicts = ordered_json::array(), decisions = ordered_json::array();
  std::map<std::string, int> copies{{"verified", 0}, {"corrupt", 0}, {"failed", 0}};
  for (const auto& p : devices)
    for (const auto& c : devices)
      if (p.index != c.index) verdicts.push_back(reference_verdict_json(topo, pci_p2pdma_distance(topo, m.kernel, p.index, c.index)));
  for (const auto& p : devices)
    for (const auto& c : devices) {
      if (p.index == c.index) continue;
      auto d = evaluator.decide_in_full(p.index, c.index);
      std::string copy = fact_copy_result(d.facts);
      if (auto it = copies.find(copy); it != copies.end()) ++it->second;
      decisions.push_back({{"provider", topo.functions[p.index].bdf.str()},
                           {"client", topo.functions[c.index].bdf.str()},
                           {"decision", policy::to_string(d.decision.action)},
                           {"certain", d.decision.certain()},
                           {"rule", d.decision.rule.empty() ? ordered_json(nullptr) : ordered_json(d.decision.rule)},
                           {"authority", d.decision.authority ? ordered_json(policy::to_string(*d.decision.authority))
                                                              : ordered_json(nullptr)},
                           {"copy_result", copy.empty() ? ordered_json(nullptr) : ordered_json(copy)}});
    }
  doc["pairs"] = fleet::pairs_summary(devices.size(), kMostListedPairs);
  doc["kernel_verdicts"] = std::move(verdicts);
  doc["decisions"] = std::move(decisions);
  ordered_json candidates = ordered_json::array();
  fleet::WhitelistOptions counted;
  counted.count_pairs_only = true;
  for (auto& c : fleet::whitelist_candidates(topo, m.kernel, m.evidence, counted)) {
    ordered_json j = fleet::candidate_head(topo, c);
    ordered_json pairs = ordered_json::array();
    for (const auto& u : unlocked)
      if (u.needed.size() == 1 && u.needed[0].vendor == c.vendor && u.needed[0].device == c.device)
        pairs.push_back(fleet::unlocked_pair_json(topo, u.pair));
    EXPECT_EQ(pairs.size(), c.pair_count) << c.id();
    j["pairs"] = std::move(pairs);
    candidates.push_back(std::move(j));
  }
  doc["candidates"] = std::move(candidates);
  doc["probe"] = {{"source", m.probe.source}, {"note", m.probe.note}, {"asked", m.probe.asked}, {"copies", copies}};
  return json_text(doc);
}

// The pair samples of --format prom as the full verdicts and decisions give them, in order.
std::vector<std::string> reference_prom_pair_lines(const fleet::MachineAnalysis& m) {
  const Topology& topo = m.topo;
  policy::PolicyEvaluator evaluator(topo, m.kernel, m.rules, m.evidence);
  const auto devices = matrix_devices(topo, false);
  std::map<std::string, std::string> names;
  for (const auto& d : devices) names[topo.functions[d.index].bdf.str()] = d.short_name;
  auto labels = [&](size_t p, size_t c) {
    std::string provider = topo.functions[p].bdf.str(), client = topo.functions[c].bdf.str();
    return fmt::format("provider=\"{}\",client=\"{}\",provider_name=\"{}\",client_name=\"{}\"",
                       fleet::prometheus_label_value(provider), fleet::prometheus_label_value(client),
                       fleet::prometheus_label_value(names[provider]), fleet::prometheus_label_value(names[client]));
  };
  std::vector<std::string> out;
  for (const auto& p : devices)
    for (const auto& c : devices) {
      if (p.index == c.index) continue;
      auto d = evaluator.decide_in_full(p.index, c.index);
      out.push_back(fmt::format("p2paudit_pair_decision{{{},decision=\"{}\",certain=\"{}\",rule=\"{}\",authority=\"{}\"}} 1",
                                labels(p.index, c.index), policy::to_string(d.decision.action), d.decision.certain(),
                                fleet::prometheus_label_value(d.decision.rule),
                                d.decision.authority ? policy::to_string(*d.decision.authority) : ""));
    }
  for (const auto& p : devices)
    for (const auto& c : devices) {
      if (p.index == c.index) continue;
      PairVerdict v = pci_p2pdma_distance(topo, m.kernel, p.index, c.index);
      const char* word = !v.p2pdma_distance ? "unknown" : *v.p2pdma_distance < 0 ? "refused" : "allowed";
      out.push_back(fmt::format("p2paudit_pair_kernel_verdict{{{},verdict=\"{}\",map_type=\"{}\"}} 1", labels(p.index, c.index),
                                word, to_string(v.map_type)));
    }
  return out;
}

std::vector<std::string> prom_pair_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("p2paudit_pair_decision{") || line.starts_with("p2paudit_pair_kernel_verdict{")) out.push_back(line);
  return out;
}

// ---- The comparisons ----

struct Counts {
  size_t machines = 0, unlocked = 0, sets = 0, reports = 0, reasons = 0;
};
Counts counts;

void expect_unlocked_agree(const Topology& topo, const KernelRules& kernel, const policy::VendorFactsDocument* evidence,
                           bool all, const std::string& what) {
  fleet::WhitelistOptions options;
  options.all_functions = all;
  const auto want = reference_unlocked(topo, kernel, evidence, options);
  std::vector<Unlocked> got;
  fleet::for_each_unlocked(topo, kernel, evidence, options,
                           [&](const UnlockedPair& p, const std::vector<NeededEntry>& needed) { got.push_back({p, needed}); });
  ASSERT_EQ(got.size(), want.size()) << what << " (kernel " << kernel.release.version() << ")";
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(describe(topo, got[i]), describe(topo, want[i])) << what << " (kernel " << kernel.release.version() << ")";
    counts.sets += want[i].needed.size() > 1;
  }
  counts.unlocked += want.size();
}

void expect_report_and_prom_agree(const Topology& topo, const KernelRules& kernel, const policy::VendorFactsDocument* evidence,
                                  const std::string& what) {
  fleet::MachineAnalysis m{topo, kernel, default_policy(), evidence, {}};
  fleet::WhitelistOptions options;
  const auto unlocked = reference_unlocked(topo, kernel, evidence, options);
  std::ostringstream report;
  fleet::write_machine_report(report, m, {"test", false});
  const std::string want = reference_report(m, unlocked);
  EXPECT_EQ(report.str(), want) << what << " (kernel " << kernel.release.version() << ")";
  if (report.str() != want) {
    // Name the first differing line rather than print two documents.
    std::istringstream a(report.str()), b(want);
    std::string la, lb;
    for (size_t line = 1; std::getline(b, lb); ++line)
      if (!std::getline(a, la) || la != lb) {
        ADD_FAILURE() << what << " line " << line << ":\n  got  " << la << "\n  want " << lb;
        break;
      }
  }
  ++counts.reports;
  const size_t n = matrix_devices(topo, false).size();
  counts.reasons += n > 1 ? n * (n - 1) : 0;

  const std::string prom = fleet::prometheus_text(m, {"test", 1});
  EXPECT_EQ(prom_pair_lines(prom), reference_prom_pair_lines(m)) << what << " (kernel " << kernel.release.version() << ")";
}

// Copy evidence on some pairs: verified, failed, an explicitly unknown result, a claimed one, and
// an "all" that every other pair reads.
policy::VendorFactsDocument evidence_for(const Topology& topo, unsigned seed) {
  const auto devices = matrix_devices(topo, true);
  ordered_json pairs = ordered_json::array();
  std::mt19937 rng(seed);
  const char* results[] = {"verified", "failed", "corrupt"};
  for (int i = 0; i < 6 && devices.size() > 1; ++i) {
    size_t p = devices[rng() % devices.size()].index, c = devices[rng() % devices.size()].index;
    if (p == c) continue;
    ordered_json facts = {{"vendor.copy_result", i == 5 ? ordered_json(nullptr) : ordered_json(results[i % 3])},
                          {"vendor.copy_runtime", i % 2 ? "cuda" : "level_zero"}};
    pairs.push_back({{"provider", topo.functions[p].bdf.str()}, {"client", topo.functions[c].bdf.str()}, {"facts", facts}});
  }
  ordered_json doc = {{"schema_version", 1}, {"all", {{"vendor.copy_result", seed % 2 ? "not_run" : "verified"}}}, {"pairs", pairs}};
  return policy::VendorFactsDocument::parse(doc.dump(), "test evidence");
}

// Every comparison of one machine under one kernel.
void expect_all_agree(const Topology& t, const KernelRules& kernel, const std::string& what, bool with_report = true) {
  expect_unlocked_agree(t, kernel, nullptr, false, what);
  expect_unlocked_agree(t, kernel, nullptr, true, what + " --all");
  if (with_report) expect_report_and_prom_agree(t, kernel, nullptr, what);
}

TEST(FleetIndexEquality, EveryCaptureUnderEveryKernelEra) {
  counts = {};
  for (const auto& sysroot : test::fixture_sysroots()) {
    Topology t = read_topology(Sysroot::open(sysroot));
    const std::string name = fs::path(sysroot).parent_path().filename().string();
    ++counts.machines;
    for (const auto& release : test::kKernelEras) {
      expect_all_agree(t, test::rules_for(t, release), name);
      expect_all_agree(test::unprivileged_view(t), test::rules_for(t, release), name + " unprivileged", release == "6.1" || release == "5.4");
    }
    // The machine's own release (distribution strings, whose entries may be unknown).
    expect_all_agree(t, test::rules_for(t, t.platform.kernel_release), name + " own release");
    // --assume-whitelisted entries, booted entries, and copy evidence.
    if (!t.host_bridges.empty() && !t.host_bridges[0].root_bus_devices.empty()) {
      const Function& root = t.functions[t.host_bridges[0].root_bus_devices.front()];
      std::string id = fmt::format("{:04x}:{:04x}", root.vendor, root.device);
      expect_all_agree(t, test::rules_for(t, "6.1", {id + ":same-host-bridge"}), name + " assumed same", false);
      expect_all_agree(t, test::rules_for(t, "5.9", {id}), name + " assumed", false);
    }
    const KernelRules booted = booted_with_every_root(t, "6.1");
    const auto evidence = evidence_for(t, static_cast<unsigned>(counts.machines));
    expect_unlocked_agree(t, booted, &evidence, true, name + " booted");
    expect_unlocked_agree(t, test::rules_for(t, "5.4"), &evidence, true, name + " evidence");
    expect_report_and_prom_agree(t, test::rules_for(t, "5.4"), &evidence, name + " evidence");
    expect_report_and_prom_agree(t, booted, &evidence, name + " booted");
    Topology unknown_cpu = t;
    unknown_cpu.platform.cpu_vendor.clear();
    unknown_cpu.platform.arch.clear();
    expect_all_agree(unknown_cpu, test::rules_for(unknown_cpu, "6.1"), name + " no CPU");
  }
  EXPECT_GE(counts.machines, 20u);
  EXPECT_GT(counts.unlocked, 1000u);  // candidates' pairs were compared, not only their absence
  EXPECT_GT(counts.reports, 100u);
  EXPECT_GT(counts.reasons, 5000u);
}

TEST(FleetIndexEquality, RandomTrees) {
  counts = {};
  for (unsigned seed = 1; seed <= 60; ++seed) {
    Topology t = test::random_forest(seed, {.client_host_bridge = true, .gpus_and_nics = true});
    const std::string what = fmt::format("seed {}", seed);
    for (const auto& release : test::kKernelEras) expect_all_agree(t, test::rules_for(t, release), what, release == "6.1" || release == "5.4");
    expect_all_agree(t, test::rules_for(t, "6.1", {"8086:29c0:same-host-bridge"}), what + " assumed same");
    expect_all_agree(t, test::rules_for(t, "6.1", {"1022:1450"}), what + " assumed");
    const auto evidence = evidence_for(t, seed);
    expect_unlocked_agree(t, booted_with_every_root(t, "5.9"), &evidence, true, what + " booted");
    expect_report_and_prom_agree(t, booted_with_every_root(t, "5.9"), &evidence, what + " booted");
  }
  EXPECT_GT(counts.unlocked, 500u);
  EXPECT_GT(counts.sets, 10u);  // pairs that need two entries (candidate sets)
  EXPECT_GT(counts.reports, 100u);
}

// Generated machines (p2paudit-synth) on 5.4.0, whose table lacks the generated host bridges: most
// pairs are candidates' pairs, across host bridges too; switch trees with ACS on, off, mixed.
TEST(FleetIndexEquality, GeneratedMachines) {
  counts = {};
  test::TempDir dir;
  for (auto acs : {synth::AcsMode::kOn, synth::AcsMode::kOff, synth::AcsMode::kMixed}) {
    synth::Options options;
    options.functions = 160;
    options.depth = 2;
    options.fanout = 2;
    options.acs = acs;
    options.cpu = acs == synth::AcsMode::kOff ? synth::CpuVendor::kIntel : synth::CpuVendor::kAmd;
    const std::string tarball = (dir.path() / fmt::format("machine-{}.tar.gz", static_cast<int>(acs))).string();
    synth::Machine::plan(options).write_tarball(tarball);
    Topology t = read_topology(Sysroot::open(tarball));
    for (const auto& release : {"5.4.0", "6.1.0"}) expect_all_agree(t, test::rules_for(t, release), tarball);
  }
  EXPECT_GT(counts.unlocked, 1000u);  // the generated host bridges share one ID: one entry unlocks each pair
}

}  // namespace
}  // namespace p2paudit
