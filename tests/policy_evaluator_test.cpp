// SPDX-License-Identifier: GPL-2.0-or-later
// PolicyEvaluator remembers decisions by the facts the rules' conditions read and groups pairs by
// decision. Every pair's group must be exactly what evaluating the rules on that pair's whole fact
// set gives, on real captures (with and without vendor facts) and on random trees.
#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "synthetic_tree.h"

namespace p2paudit::policy {
namespace {

namespace fs = std::filesystem;

const RuleSet& default_rules() {
  static const RuleSet rules = RuleSet::load(default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  return rules;
}

KernelRules kernel_for(const Topology& t, std::vector<std::string> assume = {}) {
  return load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", t.platform, {"", {}, std::move(assume)});
}

// Returns the number of pairs compared.
size_t expect_groups_match_full_decisions(const Topology& t, const KernelRules& kernel,
                                          const VendorFactsDocument* vendor, const std::string& what) {
  PolicyEvaluator evaluator(t, kernel, default_rules(), vendor);
  size_t pairs = 0;
  for (size_t p = 0; p < t.functions.size(); ++p)
    for (size_t c = 0; c < t.functions.size(); ++c, ++pairs) {
      const DecisionGroup& g = evaluator.groups()[evaluator.decide(p, c)];
      PairDecision full = evaluator.decide_in_full(p, c);
      // The one-off path builds everything anew: it must agree too.
      Decision alone = decide_pair(t, kernel, default_rules(), vendor, p, c).decision;
      std::string pair = fmt::format("{}: {} -> {}", what, t.functions[p].bdf.str(), t.functions[c].bdf.str());
      EXPECT_EQ(to_string(g.action), std::string(to_string(full.decision.action))) << pair;
      EXPECT_EQ(g.rule, full.decision.rule) << pair;
      EXPECT_EQ(g.fired, full.decision.rule_ids()) << pair;
      // The pair's other problems read the same facts as its decision: the memo keeps them exact.
      std::vector<std::string> findings;
      for (const auto& f : full.decision.findings) findings.push_back(f.id);
      EXPECT_EQ(g.findings, findings) << pair;
      EXPECT_EQ(g.undecided_rules, full.decision.undecided_rules) << pair;
      EXPECT_EQ(g.unknown_facts, full.decision.unknown_facts) << pair;
      EXPECT_EQ(alone.rule_ids(), full.decision.rule_ids()) << pair;
      EXPECT_EQ(alone.reasons(), full.decision.reasons()) << pair;
    }
  size_t counted = 0;
  for (const auto& g : evaluator.groups()) counted += g.pairs;
  EXPECT_EQ(counted, pairs) << what;
  EXPECT_LT(evaluator.groups().size(), pairs) << what << ": pairs that decide alike share a group";
  return pairs;
}

TEST(PolicyEvaluator, GroupsEqualFullDecisionsOnCaptures) {
  size_t pairs = 0;
  std::vector<fs::path> sysroots;
  for (const char* dir : {"machines", "kernel-oracle"})
    for (const auto& e : fs::directory_iterator(fs::path(P2PAUDIT_TEST_DATA) / dir))
      if (fs::exists(e.path() / "sysroot.tar.gz")) sysroots.push_back(e.path());
  for (const auto& dir : sysroots) {
    Sysroot root = Sysroot::open((dir / "sysroot.tar.gz").string());
    Topology t = read_topology(root);
    KernelRules kernel = kernel_for(t);
    pairs += expect_groups_match_full_decisions(t, kernel, nullptr, dir.filename().string());
    if (fs::exists(dir / "vendor-facts.json")) {
      auto vendor = VendorFactsDocument::load((dir / "vendor-facts.json").string());
      pairs += expect_groups_match_full_decisions(t, kernel, &vendor, dir.filename().string() + " with vendor facts");
    }
  }
  EXPECT_GT(pairs, 5000u);
}

TEST(PolicyEvaluator, GroupsEqualFullDecisionsWithPerDeviceAndPerPairVendorFacts) {
  test::Tree tree;
  tree.host_dev(0x8086, 0x09a2);
  tree.rp("00:01.0");
  tree.rp("00:02.0");
  tree.add("01:00.0", "00:01.0", 0x10b5, 0x8747, PcieType::kSwitchUpstream);
  tree.add("02:08.0", "01:00.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream, kAcsRr | kAcsCr);
  tree.add("02:10.0", "01:00.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream);
  tree.describe(tree.add("03:00.0", "02:08.0", 0x10de, 0x2335, PcieType::kEndpoint), 0x030200, "nvidia", 256u << 20);
  tree.describe(tree.add("04:00.0", "02:10.0", 0x10de, 0x2335, PcieType::kEndpoint), 0x030200, "nvidia", 64ull << 30);
  tree.describe(tree.add("05:00.0", "00:02.0", 0x1002, 0x74a1, PcieType::kEndpoint), 0x030000, "amdgpu", 32ull << 30);
  auto vendor = VendorFactsDocument::parse(R"({"schema_version": 1,
      "all": {"runtime.compute_runtime_version": "26.09.1"},
      "devices": [{"bdf": "0000:03:00.0", "facts": {"memory_size": 85899345920}}],
      "pairs": [{"provider": "0000:03:00.0", "client": "0000:04:00.0", "symmetric": true,
                 "facts": {"vendor.nvlink": true}},
                {"provider": "0000:04:00.0", "client": "0000:05:00.0",
                 "facts": {"vendor.copy_result": "corrupt", "vendor.copy_runtime": "cuda"}}]})",
                                           "test facts");
  KernelRules kernel = kernel_for(tree.t);
  expect_groups_match_full_decisions(tree.t, kernel, &vendor, "tree");
  PolicyEvaluator evaluator(tree.t, kernel, default_rules(), &vendor);
  EXPECT_EQ(evaluator.groups()[evaluator.decide(tree.index("03:00.0"), tree.index("04:00.0"))].rule, "nvlink");
  EXPECT_EQ(evaluator.groups()[evaluator.decide(tree.index("04:00.0"), tree.index("05:00.0"))].rule, "copy-corrupt");
}

// Which bridges need a 64-bit prefetchable window depends on the direction: only those above the
// provider. Devices alike in every fact still decide differently by direction, and the memo
// (keyed by the pair's own facts) must keep them apart.
TEST(PolicyEvaluator, GroupsEqualFullDecisionsWithBridgeWindowsOnOneSide) {
  test::Tree tree;
  tree.host_dev(0x8086, 0x09a2);
  tree.windows(tree.rp("00:01.0"), true);
  tree.windows(tree.rp("00:02.0"), true);
  tree.windows(tree.add("01:00.0", "00:01.0", 0x10b5, 0x8747, PcieType::kSwitchUpstream), true);
  tree.windows(tree.add("02:08.0", "01:00.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream), true);
  tree.windows(tree.add("02:10.0", "01:00.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream), false);
  tree.describe(tree.ep("03:00.0", "02:08.0"), 0x030000, "amdgpu", uint64_t{16} << 30);
  tree.describe(tree.ep("04:00.0", "02:10.0"), 0x030000, "amdgpu", uint64_t{16} << 30);
  tree.describe(tree.ep("05:00.0", "00:02.0"), 0x030000, "amdgpu", uint64_t{16} << 30);
  KernelRules kernel = kernel_for(tree.t);
  expect_groups_match_full_decisions(tree.t, kernel, nullptr, "windows");
  PolicyEvaluator evaluator(tree.t, kernel, default_rules(), nullptr);
  auto rule = [&](const char* p, const char* c) {
    return evaluator.groups()[evaluator.decide(tree.index(p), tree.index(c))].rule;
  };
  EXPECT_EQ(rule("04:00.0", "03:00.0"), "large-bar-without-64bit-window");
  EXPECT_NE(rule("03:00.0", "04:00.0"), "large-bar-without-64bit-window");
}

}  // namespace
}  // namespace p2paudit::policy
