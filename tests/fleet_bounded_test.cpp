// SPDX-License-Identifier: GPL-2.0-or-later
// Issue 18: `report`, `--format prom`, `--format html` and `aggregate` hold nothing per pair: their
// peak RSS does not grow with the number of pairs (docs/performance.md, "Memory"), and running out
// of memory in one `aggregate` input is that input's error, never the run's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/fleet/aggregate.h"
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

}  // namespace
}  // namespace p2paudit
