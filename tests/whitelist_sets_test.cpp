// SPDX-License-Identifier: GPL-2.0-or-later
// Candidate sets (docs/whitelist.md, "Sets of entries"), held to the real kernel: on every
// kernel-oracle machine booted with extra whitelist entries (meta.txt extra_whitelist_used=yes, the
// table it used in whitelist=), the pairs that the candidates made of those entries unlock (single
// entries and sets) are exactly the pairs that kernel allowed and the stock table refuses.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "synthetic_tree.h"
#include "oracle_cases.h"
#include "test_support.h"

namespace p2paudit::fleet {
namespace {

namespace fs = std::filesystem;
using PairSet = std::set<std::pair<std::string, std::string>>;

const fs::path kOracle = test::oracle_dir();

// Every case whose kernel was booted with entries appended to its table.
std::vector<std::string> booted_with_entries() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kOracle, ec))
    if (test::read_oracle_meta(e.path().filename().string())["extra_whitelist_used"] == "yes") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// pci_p2pdma_distance_many()'s answer per ordered pair, as the booted kernel printed it.
std::map<std::pair<std::string, std::string>, int> kernel_answers(const fs::path& dir) {
  std::map<std::pair<std::string, std::string>, int> out;
  std::ifstream in(dir / "verdicts.txt");
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string tag, p, c, map, dist, many;
    if (words >> tag >> p >> c >> map >> dist >> many && tag == "P2P" && many.rfind("distance_many=", 0) == 0)
      out[{p, c}] = std::stoi(many.substr(14));
  }
  return out;
}

struct Booted {
  std::string name;
  Topology topo;
  KernelRules stock, booted;
  std::map<std::string, bool> extra;  // "VVVV:DDDD" -> REQ_SAME_HOST_BRIDGE, the entries it was booted with
};

Booted load(const std::string& name) {
  Booted b;
  b.name = name;
  const fs::path dir = kOracle / name;
  auto meta = test::read_oracle_meta(name);
  Sysroot root = Sysroot::open((dir / "sysroot.tar.gz").string());
  b.topo = read_topology(root);
  const fs::path rules_dir = fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel";
  b.stock = load_kernel_rules(rules_dir, b.topo.platform, {});
  // meta's whitelist= is the table the kernel used: the stock table first, then the extra entries.
  std::istringstream wl(meta["whitelist"]);
  std::vector<std::string> table;
  for (std::string item; wl >> item;) table.push_back(item);
  KernelRuleOptions options;
  for (size_t i = b.stock.table_entries; i < table.size(); ++i) {
    const std::string& item = table[i];  // "VVVV:DDDD/flags=N"
    bool same = item.ends_with("flags=1");
    b.extra[item.substr(0, 9)] = same;
    options.assume_whitelisted.push_back(item.substr(0, 9) + (same ? ":same-host-bridge" : ""));
  }
  b.booted = load_kernel_rules(rules_dir, b.topo.platform, options);
  return b;
}

// Whether the booted table holds every entry a pair needs, with a flag that lets it through.
bool booted_has(const Booted& b, const std::vector<NeededEntry>& needed) {
  return std::all_of(needed.begin(), needed.end(), [&](const NeededEntry& n) {
    auto it = b.extra.find(n.id());
    return it != b.extra.end() && (!it->second || n.same_host_bridge_ok);
  });
}

std::string str(const Booted& b, const UnlockedPair& p) {
  return b.topo.functions[p.provider].bdf.str() + " -> " + b.topo.functions[p.client].bdf.str();
}

class BootedWithEntries : public ::testing::TestWithParam<std::string> {};

TEST_P(BootedWithEntries, CandidatesUnlockExactlyWhatTheKernelAllowedThroughThoseEntries) {
  Booted b = load(GetParam());
  ASSERT_FALSE(b.extra.empty()) << b.name;

  // The truth: pairs the booted kernel allowed that the stock table refuses.
  PairSet truth;
  for (const auto& [pair, many] : kernel_answers(kOracle / b.name)) {
    auto p = b.topo.index_of(*Bdf::parse(pair.first));
    auto c = b.topo.index_of(*Bdf::parse(pair.second));
    ASSERT_TRUE(p && c) << b.name << ": " << pair.first << " " << pair.second;
    if (*p == *c || many < 0) continue;
    PairVerdict stock = pci_p2pdma_distance(b.topo, b.stock, *p, *c);
    ASSERT_TRUE(stock.p2pdma_distance) << b.name;
    if (*stock.p2pdma_distance < 0) truth.insert(pair);
  }

  // The candidates made of the booted entries: single entries and sets, each pair with its flags.
  WhitelistOptions all;
  all.all_functions = true;
  PairSet predicted;
  size_t from_sets = 0;
  auto add = [&](const UnlockedPair& p, const std::vector<NeededEntry>& needed, const std::string& what) {
    if (!booted_has(b, needed)) return;
    bool fresh = predicted.insert({b.topo.functions[p.provider].bdf.str(), b.topo.functions[p.client].bdf.str()}).second;
    EXPECT_TRUE(fresh) << b.name << ": " << str(b, p) << " listed twice (" << what << ")";
  };
  for (const auto& c : whitelist_candidates(b.topo, b.stock, nullptr, all))
    for (const auto& p : c.pairs) {
      EXPECT_EQ(c.pairs.size(), c.pair_count);
      add(p, {{c.vendor, c.device, p.same_host_bridge}}, c.id());
    }
  for (const auto& s : candidate_sets(b.topo, b.stock, nullptr, all)) {
    EXPECT_GE(s.entries.size(), 2u) << b.name << ": a set of one entry is a single candidate";
    EXPECT_EQ(s.pairs.size(), s.pair_count);
    for (const auto& p : s.pairs) {
      EXPECT_FALSE(p.same_host_bridge) << b.name << ": " << str(b, p) << " under one host bridge needs one entry";
      size_t before = predicted.size();
      add(p, s.entries, s.id());
      from_sets += predicted.size() - before;
    }
  }
  std::vector<std::string> missing, extra;
  for (const auto& p : truth)
    if (!predicted.count(p)) missing.push_back(p.first + " -> " + p.second);
  for (const auto& p : predicted)
    if (!truth.count(p)) extra.push_back(p.first + " -> " + p.second);
  EXPECT_TRUE(missing.empty()) << b.name << ": allowed by the booted kernel, in no candidate: " << fmt::format("{}", fmt::join(missing, ", "));
  EXPECT_TRUE(extra.empty()) << b.name << ": in a candidate, not allowed by the booted kernel: " << fmt::format("{}", fmt::join(extra, ", "));
  RecordProperty("pairs_allowed_only_through_entries", static_cast<int>(truth.size()));
  RecordProperty("pairs_from_sets", static_cast<int>(from_sets));
  std::cout << "[ sets     ] " << b.name << ": " << predicted.size() << "/" << truth.size() << " pairs, " << from_sets
            << " through sets\n";

  // Booted with the entries, nothing is left that needs them.
  for (const auto& c : whitelist_candidates(b.topo, b.booted, nullptr, all))
    EXPECT_FALSE(b.extra.count(c.id())) << b.name << ": " << c.id() << " proposed although the kernel has it";
  for (const auto& s : candidate_sets(b.topo, b.booted, nullptr, all))
    for (const auto& e : s.entries)
      EXPECT_FALSE(b.extra.count(e.id())) << b.name << ": set " << s.id() << " proposed although the kernel has " << e.id();
}

INSTANTIATE_TEST_SUITE_P(Cases, BootedWithEntries, ::testing::ValuesIn(booted_with_entries()), test::oracle_param_name);

// Some of those machines were booted with two entries whose host bridges both hold devices (the
// q35 host bridge and a pxb root bridge): pairs across them need the set, and the kernel allowed
// them. Derived from the captures: a case counts when its booted kernel allowed a pair whose two
// host bridges' roots are both among the extra entries and differ.
TEST(CandidateSets, CrossHostBridgePairsOfTheCapturesNeedTwoEntries) {
  size_t cases = 0;
  for (const auto& name : booted_with_entries()) {
    Booted b = load(name);
    size_t kernel_allowed = 0, as_sets = 0;
    WhitelistOptions all;
    all.all_functions = true;
    for (const auto& [pair, many] : kernel_answers(kOracle / name)) {
      auto p = b.topo.index_of(*Bdf::parse(pair.first));
      auto c = b.topo.index_of(*Bdf::parse(pair.second));
      if (!p || !c || many < 0) continue;
      PairVerdict stock = pci_p2pdma_distance(b.topo, b.stock, *p, *c);
      auto needed = entries_needed(b.topo, b.stock, stock);
      if (needed.size() < 2) continue;
      ++kernel_allowed;
      // The entries it needs are the two roots, each without REQ_SAME_HOST_BRIDGE, and together
      // they allow it while each alone does not.
      EXPECT_NE(b.topo.functions[*p].host_bridge, b.topo.functions[*c].host_bridge) << name;
      for (const auto& n : needed) {
        EXPECT_FALSE(n.same_host_bridge_ok) << name;
        auto alone = pci_p2pdma_distance(b.topo, with_whitelist_entries(b.stock, {n}), *p, *c);
        EXPECT_TRUE(alone.p2pdma_distance && *alone.p2pdma_distance < 0) << name << ": " << n.id() << " alone allows it";
      }
      auto both = pci_p2pdma_distance(b.topo, with_whitelist_entries(b.stock, needed), *p, *c);
      EXPECT_TRUE(both.p2pdma_distance && *both.p2pdma_distance >= 0) << name;
      as_sets += booted_has(b, needed);
    }
    EXPECT_EQ(as_sets, kernel_allowed) << name << ": a pair needing two entries the kernel allowed without them";
    cases += kernel_allowed > 0;
  }
  EXPECT_GT(cases, 0u) << "no capture exercises a pair that needs two entries";
}

// Two host bridges, one NVMe under a root port of each; the root devices' IDs as given.
test::Tree two_host_bridges(uint16_t root_a, uint16_t root_b) {
  test::Tree tree;
  tree.t.functions[tree.host_dev(0x8086, root_a)].class_code = 0x060000;
  tree.rp("00:01.0");
  tree.describe(tree.add("01:00.0", "00:01.0", 0x144d, 0xa80a, PcieType::kEndpoint), 0x010802, "nvme");
  tree.t.functions[tree.host_dev(0x8086, root_b, "pci0000:80", "80:00.0")].class_code = 0x060000;
  tree.rp("80:01.0", std::nullopt, "pci0000:80");
  tree.describe(tree.add("81:00.0", "80:01.0", 0x144d, 0xa80a, PcieType::kEndpoint, std::nullopt, "pci0000:80"),
                0x010802, "nvme");
  return tree;
}

KernelRules rules_6_8(const Topology& topo) {
  Platform platform = topo.platform;
  platform.kernel_release = "6.8.0";
  return load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", platform, {});
}

// The class, on trees built in code: two missing roots make a set (each entry without
// REQ_SAME_HOST_BRIDGE, neither a single candidate); one ID rooting both host bridges is a single
// entry; a root already in the table with REQ_SAME_HOST_BRIDGE leaves nothing an addition fixes.
TEST(CandidateSets, TwoHostBridgesOnTreesBuiltInCode) {
  auto both_missing = two_host_bridges(0xa001, 0xa002);
  KernelRules rules = rules_6_8(both_missing.t);
  EXPECT_TRUE(whitelist_candidates(both_missing.t, rules, nullptr).empty());
  auto sets = candidate_sets(both_missing.t, rules, nullptr);
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].id(), "8086:a001+8086:a002");
  EXPECT_EQ(sets[0].pair_count, 2u);  // both directions
  for (const auto& e : sets[0].entries) EXPECT_FALSE(e.same_host_bridge_ok);
  EXPECT_EQ(sets[0].host_bridges, (std::vector<std::vector<std::string>>{{"pci0000:00"}, {"pci0000:80"}}));
  std::string lines = kernel_table_lines(sets[0]);
  EXPECT_NE(lines.find("{PCI_VENDOR_ID_INTEL, 0xa001, 0},"), std::string::npos) << lines;
  EXPECT_NE(lines.find("{PCI_VENDOR_ID_INTEL, 0xa002, 0},"), std::string::npos) << lines;
  // With both entries nothing is left; with one, the other is a single candidate without the flag.
  EXPECT_TRUE(candidate_sets(both_missing.t, with_whitelist_entries(rules, sets[0].entries), nullptr).empty());
  auto half = whitelist_candidates(both_missing.t, with_whitelist_entries(rules, {sets[0].entries[0]}), nullptr);
  ASSERT_EQ(half.size(), 1u);
  EXPECT_EQ(half[0].id(), "8086:a002");
  EXPECT_FALSE(half[0].needs_same_host_bridge);

  auto one_id = two_host_bridges(0xa001, 0xa001);
  auto single = whitelist_candidates(one_id.t, rules_6_8(one_id.t), nullptr);
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0].pair_count, 2u);
  EXPECT_FALSE(single[0].needs_same_host_bridge);
  EXPECT_TRUE(candidate_sets(one_id.t, rules_6_8(one_id.t), nullptr).empty());

  // 8086:2f00 is in the table with REQ_SAME_HOST_BRIDGE: across host bridges the kernel stops there.
  auto flagged = two_host_bridges(0xa001, 0x2f00);
  KernelRules flagged_rules = rules_6_8(flagged.t);
  ASSERT_TRUE(std::any_of(flagged_rules.whitelist.begin(), flagged_rules.whitelist.end(), [](const WhitelistEntry& e) {
    return e.id() == "8086:2f00" && e.same_host_bridge;
  }));
  EXPECT_TRUE(whitelist_candidates(flagged.t, flagged_rules, nullptr).empty());
  EXPECT_TRUE(candidate_sets(flagged.t, flagged_rules, nullptr).empty());
}

// The CLI shows the sets in text and JSON (docs/whitelist.md).
TEST(CandidateSets, TextAndJson) {
  for (const auto& name : booted_with_entries()) {
    Booted b = load(name);
    WhitelistOptions all;
    all.all_functions = true;
    auto sets = candidate_sets(b.topo, b.stock, nullptr, all);
    std::string sysroot = (kOracle / name / "sysroot.tar.gz").string();
    auto r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(sysroot) +
                               " --format json whitelist --all");
    ASSERT_EQ(r.status, 0) << r.output;
    auto j = nlohmann::json::parse(r.output);
    ASSERT_TRUE(j.contains("candidate_sets")) << name;
    ASSERT_EQ(j["candidate_sets"].size(), sets.size()) << name;
    for (size_t i = 0; i < sets.size(); ++i) {
      EXPECT_EQ(j["candidate_sets"][i]["id"], sets[i].id());
      EXPECT_EQ(j["candidate_sets"][i]["pairs"].size(), sets[i].pair_count);
      EXPECT_EQ(j["candidate_sets"][i]["entries"].size(), sets[i].entries.size());
    }
    r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(sysroot) + " whitelist --all");
    ASSERT_EQ(r.status, 0) << r.output;
    for (const auto& s : sets) {
      EXPECT_NE(r.output.find("set " + s.id()), std::string::npos) << name << "\n" << r.output;
      for (const auto& e : s.entries)
        EXPECT_NE(r.output.find(fmt::format("0x{:04x}, 0}},", e.device)), std::string::npos) << name;
    }
    // The HTML picture (default view) carries the default view's sets, each with its pairs.
    r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(sysroot) + " --format html");
    ASSERT_EQ(r.status, 0) << name;
    auto shown = candidate_sets(b.topo, b.stock, nullptr);
    EXPECT_NE(r.output.find(shown.empty() ? "\"candidate_sets\":[]" : "\"candidate_sets\":[{"), std::string::npos) << name;
    for (const auto& s : shown) {
      size_t at = r.output.find("{\"id\":\"" + s.id() + "\"");
      ASSERT_NE(at, std::string::npos) << name << ": set " << s.id();
      size_t end = r.output.find("]}", r.output.find("\"pairs\":[", at));
      ASSERT_NE(end, std::string::npos);
      std::string listed = r.output.substr(at, end - at);
      size_t providers = 0;
      for (size_t k = 0; (k = listed.find("\"provider\":", k)) != std::string::npos; ++k) ++providers;
      EXPECT_EQ(providers, s.pair_count) << name << ": set " << s.id();
    }
  }
}

}  // namespace
}  // namespace p2paudit::fleet
