// SPDX-License-Identifier: GPL-2.0-or-later
// P2pdmaIndex must give pci_p2pdma_distance()'s map type, distances, common ancestor and host-bridge
// flag on every ordered pair: of every kernel-oracle machine, read in full and as an unprivileged
// reader sees it, under every kernel era; and of random trees with unreadable ACS and root ports,
// several host bridges, VFs and an unknown CPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "synth.h"
#include "kernel_eras.h"
#include "synthetic_tree.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;

// One release of each era the rules distinguish (kernel_rules.h).
size_t whitelist_checks_compared = 0;

// Returns the number of pairs compared; every difference is a test failure naming the pair.
size_t expect_index_agrees(const Topology& t, const KernelRules& rules, const std::string& what) {
  P2pdmaIndex index(t, rules);
  size_t compared = 0, checks = 0;
  for (size_t p = 0; p < t.functions.size(); ++p)
    for (size_t c = 0; c < t.functions.size(); ++c) {
      PairVerdict v = pci_p2pdma_distance(t, rules, p, c);
      PairOutcome o = index.outcome(p, c);
      PairOutcome want = outcome_of(t, v);
      std::string pair = fmt::format("{} {} -> {} (kernel {})", what, t.functions[p].bdf.str(), t.functions[c].bdf.str(),
                                     rules.release.version());
      EXPECT_EQ(to_string(o.map_type), std::string(to_string(v.map_type))) << pair;
      EXPECT_EQ(o.distance, v.distance) << pair;
      EXPECT_EQ(o.p2pdma_distance, v.p2pdma_distance) << pair;
      EXPECT_EQ(o.legacy_return, v.legacy_return) << pair;
      EXPECT_EQ(o.common_ancestor, v.common_ancestor) << pair;
      EXPECT_EQ(o.common_ancestor, index.common_ancestor(p, c)) << pair;
      EXPECT_EQ(o.through_host_bridge, v.through_host_bridge) << pair;
      EXPECT_EQ(o.cpu_rule_consulted, v.cpu_rule_consulted) << pair;
      EXPECT_EQ(o.acs_redirecting, want.acs_redirecting) << pair;
      EXPECT_EQ(o.acs_unreadable, want.acs_unreadable) << pair;
      EXPECT_EQ(o.whitelist_check_count, v.host_bridges.size()) << pair;
      if (o.whitelist_check_count != v.host_bridges.size()) continue;
      for (size_t h = 0; h < o.whitelist_check_count; ++h) {
        EXPECT_EQ(o.whitelist_checks[h].host_bridge, want.whitelist_checks[h].host_bridge) << pair << " check " << h;
        EXPECT_EQ(o.whitelist_checks[h].root_device, v.host_bridges[h].root_device) << pair << " check " << h;
        EXPECT_EQ(o.whitelist_checks[h].entry, v.host_bridges[h].entry) << pair << " check " << h;
        EXPECT_EQ(o.whitelist_checks[h].passed, v.host_bridges[h].passed) << pair << " check " << h;
      }
      checks += o.whitelist_check_count;
      ++compared;
    }
  whitelist_checks_compared += checks;
  return compared;
}

TEST(P2pdmaIndex, AgreesWithTheFullDecisionOnEveryOracleMachineAndEra) {
  const fs::path dir = fs::path(P2PAUDIT_TEST_DATA) / "kernel-oracle";
  size_t machines = 0, pairs = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!fs::exists(e.path() / "sysroot.tar.gz")) continue;
    Sysroot root = Sysroot::open((e.path() / "sysroot.tar.gz").string());
    Topology t = read_topology(root);
    ++machines;
    for (const auto& release : test::kKernelEras) {
      pairs += expect_index_agrees(t, test::rules_for(t, release), e.path().filename().string());
      pairs += expect_index_agrees(test::unprivileged_view(t), test::rules_for(t, release), e.path().filename().string() + " unprivileged");
    }
    Topology unknown_cpu = t;
    unknown_cpu.platform.cpu_vendor.clear();
    unknown_cpu.platform.arch.clear();
    pairs += expect_index_agrees(unknown_cpu, test::rules_for(unknown_cpu, "6.1"), e.path().filename().string() + " no CPU");
  }
  EXPECT_GE(machines, 20u);
  EXPECT_GT(pairs, 10000u);
  EXPECT_GT(whitelist_checks_compared, 1000u);
}

TEST(P2pdmaIndex, AgreesWithTheFullDecisionOnRandomTrees) {
  size_t pairs = 0;
  for (unsigned seed = 1; seed <= 60; ++seed) {
    Topology t = test::random_forest(seed);
    for (const auto& release : test::kKernelEras) pairs += expect_index_agrees(t, test::rules_for(t, release), fmt::format("seed {}", seed));
    pairs += expect_index_agrees(t, test::rules_for(t, "6.1", {"8086:29c0:same-host-bridge"}), fmt::format("seed {} assumed", seed));
    pairs += expect_index_agrees(t, test::rules_for(t, "6.1", {"8086:7000"}), fmt::format("seed {} root ports", seed));
  }
  EXPECT_GT(pairs, 20000u);
}

// Generated machines (tools/p2paudit-synth) as the reader reads them: switch trees with ACS on,
// off and mixed, SR-IOV VFs, several host bridges; every pair of every function.
TEST(P2pdmaIndex, AgreesWithTheFullDecisionOnGeneratedMachines) {
  char dir_template[] = "/tmp/p2paudit-index-test-XXXXXX";
  const fs::path dir = mkdtemp(dir_template);
  size_t pairs = 0;
  for (auto acs : {synth::AcsMode::kOn, synth::AcsMode::kOff, synth::AcsMode::kMixed}) {
    synth::Options options;
    options.functions = 160;
    options.depth = 2;
    options.fanout = 2;
    options.acs = acs;
    options.cpu = acs == synth::AcsMode::kOff ? synth::CpuVendor::kIntel : synth::CpuVendor::kAmd;
    const std::string tarball = (dir / fmt::format("machine-{}.tar.gz", static_cast<int>(acs))).string();
    synth::Machine::plan(options).write_tarball(tarball);
    Topology t = read_topology(Sysroot::open(tarball));
    ASSERT_EQ(t.functions.size(), 160u);
    for (const auto& release : {"5.4", "6.1"}) pairs += expect_index_agrees(t, test::rules_for(t, release), tarball);
  }
  fs::remove_all(dir);
  EXPECT_EQ(pairs, 6u * 160 * 160);
}

TEST(P2pdmaIndex, UpstreamAndDepthFollowVfsToTheirPfsBridge) {
  test::Tree tree;
  tree.host_dev(0x8086, 0x29c0);
  tree.rp("00:01.0");
  tree.add("01:00.0", "00:01.0", 0x10b5, 0x8747, PcieType::kSwitchUpstream);
  tree.ep("02:00.0", "01:00.0");
  tree.vf("02:00.1", "02:00.0");
  Topology& t = tree.t;
  KernelRules rules = test::rules_for(t, "6.1");
  P2pdmaIndex index(t, rules);
  EXPECT_EQ(index.depth(tree.index("00:01.0")), 0u);
  EXPECT_EQ(index.depth(tree.index("02:00.0")), 2u);
  EXPECT_EQ(index.upstream(tree.index("02:00.1")), tree.index("01:00.0"));
  EXPECT_EQ(index.common_ancestor(tree.index("02:00.1"), tree.index("02:00.0")), tree.index("01:00.0"));
  EXPECT_EQ(index.outcome(tree.index("02:00.1"), tree.index("02:00.0")).map_type, MapType::kBusAddr);
}

}  // namespace
}  // namespace p2paudit
