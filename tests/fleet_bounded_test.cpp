// SPDX-License-Identifier: GPL-2.0-or-later
// Issue 18: `report`, `--format prom`, `--format html` and `aggregate` hold nothing per pair: their
// peak RSS does not grow with the number of pairs (docs/performance.md, "Memory"), and running out
// of memory in one `aggregate` input is that input's error, never the run's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/fleet/aggregate.h"
#include "p2paudit/fleet/prometheus.h"
#include "p2paudit/fleet/report.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/sysroot.h"
#include "peak_rss.h"
#include "synth.h"
#include "temp_dir.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;
using test::write_file;

std::vector<std::string> three_fixtures() {
  return {test::data_path("kernel-oracle/h-c-switch-two-endpoints/sysroot.tar.gz"),
          test::data_path("kernel-oracle/h-a-two-rootports-intel/sysroot.tar.gz"),
          test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz")};
}

fleet::AggregateOptions options() {
  fleet::AggregateOptions o;
  o.rules_dir = test::rules_source();
  o.tool_version = "test";
  o.jobs = 2;
  return o;
}

// The counts without the skipped list: what the inputs that were read added.
nlohmann::ordered_json counts(const fleet::AggregateResult& r) {
  auto j = r.state.to_json(true, "test");
  j.erase("skipped");
  return j;
}

// The counts without the machines' names: a snapshot and its redacted report name the machine by
// each input's own id (docs/fleet.md "Machines"); its topology digest is the same.
nlohmann::ordered_json unnamed(const fleet::AggregateResult& r) {
  auto j = counts(r);
  EXPECT_EQ(j["machine_list"].size(), 1u);
  for (auto& m : j["machine_list"]) m.erase("name"), m.erase("input");
  for (auto& [id, s] : j["host_bridge_ids"].items())
    for (const char* list : {"refused_on", "candidate_on", "corrupt_on", "failed_on"})
      for (auto& m : s[list]) m.erase("name");
  for (auto& [rule, d] : j["decisions"].items())
    for (auto& m : d["on"]) m.erase("name");
  return j;
}

TEST(AggregateBounded, OutOfMemoryInOneInputIsThatInputsError) {
  auto inputs = three_fixtures();
  const std::string failing = inputs[1];
  fleet::AggregateOptions o = options();
  // Thrown once the input is read, before it is counted: nothing it held may reach the state.
  o.fail_input = [&](const std::string& path) {
    if (path == failing) throw std::bad_alloc();
  };
  fleet::AggregateResult with_failure;
  ASSERT_NO_THROW(with_failure = fleet::aggregate(inputs, o));
  EXPECT_EQ(with_failure.inputs_read, 2u);
  EXPECT_EQ(with_failure.state.machines, 2u);
  ASSERT_EQ(with_failure.state.skipped.size(), 1u);
  EXPECT_EQ(with_failure.state.skipped[0].input, failing);
  EXPECT_NE(with_failure.state.skipped[0].reason.find("out of memory"), std::string::npos)
      << with_failure.state.skipped[0].reason;

  // Exactly what the other two inputs give on their own.
  fleet::AggregateResult without = fleet::aggregate({inputs[0], inputs[2]}, options());
  EXPECT_EQ(counts(with_failure), counts(without));
  EXPECT_TRUE(without.state.skipped.empty());
}

TEST(AggregateBounded, AnyExceptionInOneInputIsThatInputsError) {
  auto inputs = three_fixtures();
  fleet::AggregateOptions o = options();
  o.fail_input = [&](const std::string& path) {
    if (path == inputs[0]) throw std::length_error("basic_string::_M_create");
  };
  fleet::AggregateResult r;
  ASSERT_NO_THROW(r = fleet::aggregate(inputs, o));
  EXPECT_EQ(r.inputs_read, 2u);
  EXPECT_EQ(r.state.machines, 2u);
  ASSERT_EQ(r.state.skipped.size(), 1u);
  EXPECT_EQ(r.state.skipped[0].input, inputs[0]);
}

// aggregate folds a snapshot pair by pair, each kind of pair once through add_report() and the
// rest as counts: it must count exactly what the snapshot's streamed report file counts, on every
// capture and on a generated machine with whitelist candidates and mixed ACS.
TEST(AggregateBounded, SnapshotFoldedPairByPairCountsAsItsReport) {
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  auto sysroots = test::fixture_sysroots();
  ASSERT_GT(sysroots.size(), 20u);
  {
    synth::Options o;
    o.host_bridges = 2, o.root_ports = 2, o.depth = 1, o.fanout = 4, o.endpoints_per_port = 2, o.vfs = 0;
    o.cpu = synth::CpuVendor::kIntel;
    o.kernel = "5.4.0";
    o.acs = synth::AcsMode::kMixed;
    fs::create_directories(tmp.path() / "generated");
    synth::Machine::plan(o).write_directory((tmp.path() / "generated").string());
    sysroots.push_back((tmp.path() / "generated").string());
  }
  auto kernel_data = load_kernel_rule_data(fs::path(test::rules_source()) / "kernel");
  auto rules = policy::RuleSet::load(policy::default_rule_files(test::rules_source()));
  size_t with_candidates = 0;
  for (size_t i = 0; i < sysroots.size(); ++i) {
    const fs::path report = tmp.path() / ("report-" + std::to_string(i) + ".json");
    {
      std::ofstream out(report);
      fleet::with_sysroot_analysis(Sysroot::open(sysroots[i]), kernel_data, rules,
                                   [&](const fleet::MachineAnalysis& m) { fleet::write_machine_report(out, m, {"test", true}); });
    }
    std::ifstream in(report);
    with_candidates += !nlohmann::json::parse(in)["candidates"].empty();
    auto from_snapshot = fleet::aggregate({sysroots[i]}, options());
    auto from_report = fleet::aggregate({report.string()}, options());
    ASSERT_EQ(from_snapshot.inputs_read, 1u) << sysroots[i];
    ASSERT_EQ(from_report.inputs_read, 1u) << sysroots[i];
    EXPECT_EQ(unnamed(from_snapshot), unnamed(from_report)) << sysroots[i];
  }
  EXPECT_GT(with_candidates, 2u);
}

// 64 devices (4,032 pairs) and 192 devices (36,672 pairs): nine times the pairs. Holding one
// report document of every pair took about 2.8 KB per pair (100 MB more at 192 devices); a
// streamed output's peak stays what the tree and the rules take.
TEST(StreamedOutputs, PeakRssDoesNotGrowWithPairs) {
  // ASan's quarantine holds up to 256 MiB of freed memory: peak RSS then measures the quarantine.
  if (test::kSanitized) GTEST_SKIP() << "built with sanitizers; the plain build checks peak memory";
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const fs::path small = tmp.path() / "small", big = tmp.path() / "big";
  test::write_candidate_machine(small, 1);
  test::write_candidate_machine(big, 3);

  // The streamed report is still one JSON document with every ordered pair.
  const fs::path out = tmp.path() / "report.json";
  ASSERT_EQ(test::run_command(test::shell_quote(test::tool_file()) + " --sysroot " + test::shell_quote(small.string()) +
                              " report -o " + test::shell_quote(out.string()))
                .status,
            0);
  std::ifstream in(out);
  auto report = nlohmann::json::parse(in);
  ASSERT_EQ(report["devices"].size(), 64u);
  EXPECT_EQ(report["kernel_verdicts"].size(), 64u * 63u);
  EXPECT_EQ(report["decisions"].size(), 64u * 63u);

  const std::vector<std::vector<std::string>> commands = {
      {"report"}, {"--format", "prom"}, {"--format", "html"}};
  for (const auto& command : commands) {
    auto with = [&](const fs::path& root) {
      std::vector<std::string> args{"--sysroot", root.string()};
      args.insert(args.end(), command.begin(), command.end());
      return args;
    };
    long rss_small = test::peak_rss_kib(with(small)), rss_big = test::peak_rss_kib(with(big));
    ASSERT_GT(rss_small, 0) << command[0];
    ASSERT_GT(rss_big, 0) << command[0];
    // Generous: the bigger tree itself costs a little; a per-pair document costs 100 MB here.
    EXPECT_LT(rss_big, rss_small * 13 / 10 + 16 * 1024) << command.back() << ": " << rss_small << " KiB at 64 devices, "
                                                         << rss_big << " KiB at 192";
  }
  long agg_small = test::peak_rss_kib({"aggregate", "--jobs", "1", "--format", "json", small.string()});
  long agg_big = test::peak_rss_kib({"aggregate", "--jobs", "1", "--format", "json", big.string()});
  ASSERT_GT(agg_small, 0);
  ASSERT_GT(agg_big, 0);
  EXPECT_LT(agg_big, agg_small * 13 / 10 + 16 * 1024) << "aggregate: " << agg_small << " KiB at 64 devices, " << agg_big
                                                      << " KiB at 192";
}

// Issue 31: past ReportOptions::most_listed_pairs a report and the prom text give the pairs by
// kind, with exact counts, in output that does not grow with the pairs. The bound is lowered here
// so that a machine of 192 devices (36,672 pairs) is past it; its listed report is the reference.
TEST(GroupedPairs, PastTheBoundReportAndPromCountEveryPairInBoundedOutput) {
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  synth::Options o;
  o.host_bridges = 2, o.root_ports = 3, o.depth = 1, o.fanout = 8, o.endpoints_per_port = 4, o.vfs = 0;
  o.cpu = synth::CpuVendor::kIntel;
  o.acs = synth::AcsMode::kMixed;
  const fs::path machine = tmp.path() / "machine";
  fs::create_directories(machine);
  synth::Machine::plan(o).write_directory(machine.string());
  auto kernel_data = load_kernel_rule_data(fs::path(test::rules_source()) / "kernel");
  auto rules = policy::RuleSet::load(policy::default_rule_files(test::rules_source()));
  const std::uint64_t bound = 1000;
  std::string listed_text, grouped_text, listed_prom, grouped_prom;
  fleet::with_sysroot_analysis(Sysroot::open(machine.string()), kernel_data, rules, [&](const fleet::MachineAnalysis& m) {
    std::ostringstream listed, grouped;
    fleet::write_machine_report(listed, m, {"test", true});
    fleet::write_machine_report(grouped, m, {"test", true, bound});
    listed_text = listed.str(), grouped_text = grouped.str();
    fleet::PrometheusOptions p{"test", 0};
    listed_prom = fleet::prometheus_text(m, p);
    p.most_listed_pairs = bound;
    grouped_prom = fleet::prometheus_text(m, p);
  });
  auto listed = nlohmann::json::parse(listed_text), grouped = nlohmann::json::parse(grouped_text);
  const std::uint64_t devices = listed["devices"].size(), pairs = devices * (devices - 1);
  ASSERT_GT(pairs, 30 * bound);
  EXPECT_EQ(listed["pairs"]["count"], pairs);
  EXPECT_TRUE(listed["pairs"]["listed"].get<bool>());
  EXPECT_EQ(listed["decisions"].size(), pairs);

  // Grouped: said so (by a schema version older aggregates refuse, too), counted exactly, and
  // small: the listed report is about 20 MB here.
  EXPECT_EQ(listed["schema_version"], 1);
  EXPECT_EQ(grouped["schema_version"], 2);
  EXPECT_EQ(grouped["pairs"]["count"], pairs);
  EXPECT_FALSE(grouped["pairs"]["listed"].get<bool>());
  EXPECT_NE(grouped["pairs"]["note"].get<std::string>().find("--all-pairs"), std::string::npos);
  EXPECT_LT(grouped_text.size(), 1u << 20) << "listed: " << listed_text.size() << " bytes";
  EXPECT_GT(listed_text.size(), 10 * grouped_text.size());
  auto sum = [](const nlohmann::json& elements) {
    std::uint64_t n = 0;
    for (const auto& e : elements) n += e.value("pairs", std::uint64_t{1});
    return n;
  };
  EXPECT_EQ(sum(grouped["kernel_verdicts"]), pairs);
  EXPECT_EQ(sum(grouped["decisions"]), pairs);
  EXPECT_LT(grouped["decisions"].size(), 100u);
  // The same pairs per decision, rule and copy result; per verdict and refusing host bridges.
  std::map<std::string, std::uint64_t> by_decision_listed, by_decision_grouped, by_verdict_listed, by_verdict_grouped;
  auto decision_key = [](const nlohmann::json& e) {
    return e["decision"].dump() + e["certain"].dump() + e["rule"].dump() + e["authority"].dump() + e["copy_result"].dump();
  };
  auto verdict_key = [](const nlohmann::json& e) { return e["code"].dump() + e["p2pdma_distance"].dump() + e["refused_at"].dump(); };
  for (const auto& e : listed["decisions"]) ++by_decision_listed[decision_key(e)];
  for (const auto& e : grouped["decisions"]) by_decision_grouped[decision_key(e)] += e["pairs"].get<std::uint64_t>();
  for (const auto& e : listed["kernel_verdicts"]) ++by_verdict_listed[verdict_key(e)];
  for (const auto& e : grouped["kernel_verdicts"]) by_verdict_grouped[verdict_key(e)] += e["pairs"].get<std::uint64_t>();
  EXPECT_EQ(by_decision_grouped, by_decision_listed);
  EXPECT_EQ(by_verdict_grouped, by_verdict_listed);
  EXPECT_EQ(grouped["probe"], listed["probe"]);
  ASSERT_EQ(grouped["candidates"].size(), listed["candidates"].size());
  for (size_t i = 0; i < listed["candidates"].size(); ++i)
    EXPECT_EQ(sum(grouped["candidates"][i]["pairs"]), listed["candidates"][i]["pairs"].size());

  // aggregate counts the grouped report as the listed one and as the machine itself.
  const fs::path listed_file = tmp.path() / "listed.json", grouped_file = tmp.path() / "grouped.json";
  write_file(listed_file, listed_text);
  write_file(grouped_file, grouped_text);
  auto from_listed = fleet::aggregate({listed_file.string()}, options());
  auto from_grouped = fleet::aggregate({grouped_file.string()}, options());
  auto from_machine = fleet::aggregate({machine.string()}, options());
  ASSERT_EQ(from_grouped.inputs_read, 1u);
  EXPECT_EQ(unnamed(from_grouped), unnamed(from_listed));
  EXPECT_EQ(unnamed(from_grouped), unnamed(from_machine));
  // A version this aggregate does not know is refused, naming the field.
  auto future = grouped;
  future["schema_version"] = 3;
  const fs::path future_file = tmp.path() / "future.json";
  write_file(future_file, future.dump());
  auto from_future = fleet::aggregate({future_file.string()}, options());
  EXPECT_EQ(from_future.inputs_read, 0u);
  ASSERT_EQ(from_future.state.skipped.size(), 1u);
  EXPECT_NE(from_future.state.skipped[0].reason.find("schema_version: expected 1 to 2"), std::string::npos)
      << from_future.state.skipped[0].reason;

  // prom: no series per pair, the counts by kind add up to every pair, and it says so.
  auto lines_of = [](const std::string& text, const std::string& metric) {
    std::uint64_t lines = 0, total = 0;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (line.starts_with(metric + "{") || line.starts_with(metric + " "))
        ++lines, total += std::stoull(line.substr(line.rfind(' ') + 1));
    return std::pair{lines, total};
  };
  EXPECT_EQ(lines_of(listed_prom, "p2paudit_pair_decision").first, pairs);
  EXPECT_EQ(lines_of(grouped_prom, "p2paudit_pair_decision").first, 0u);
  EXPECT_EQ(lines_of(grouped_prom, "p2paudit_pair_kernel_verdict").first, 0u);
  EXPECT_EQ(lines_of(grouped_prom, "p2paudit_pair_decisions").second, pairs);
  EXPECT_EQ(lines_of(grouped_prom, "p2paudit_pair_kernel_verdicts").second, pairs);
  EXPECT_EQ(lines_of(grouped_prom, "p2paudit_pairs").second, pairs);
  EXPECT_NE(grouped_prom.find("\np2paudit_pairs_listed 0\n"), std::string::npos);
  EXPECT_NE(listed_prom.find("\np2paudit_pairs_listed 1\n"), std::string::npos);
  EXPECT_LT(grouped_prom.size(), 256u << 10) << "listed: " << listed_prom.size() << " bytes";
}

}  // namespace
}  // namespace p2paudit
