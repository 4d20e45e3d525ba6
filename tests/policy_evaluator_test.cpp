// SPDX-License-Identifier: GPL-2.0-or-later
// PolicyEvaluator remembers decisions by the facts the rules' conditions read and groups pairs by
// decision. Every pair's group must be exactly what evaluating the rules on that pair's whole fact
// set gives, on real captures (with and without vendor facts) and on random trees.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>

#include <fmt/format.h>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/rules.h"
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

// A random machine as the policy sees it: host bridges with root ports (ACS redirecting, not, or
// unreadable), switches, bridge windows with and without a 64-bit prefetchable one, GPUs, NICs with
// VFs and NVMe drives on their drivers (or none), two NUMA nodes, links below their maximum.
test::Tree random_tree(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  test::Tree tree;
  if (pick(3) == 0) tree.amd_zen();
  tree.t.platform.cpu_physical_address_bits = pick(2) ? 46 : 52;
  static const char* const kSpeeds[] = {"2.5 GT/s PCIe", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "Unknown"};
  auto link = [&](size_t i) {
    Function& f = tree.t.functions[i];
    int max = 1 + pick(3);
    f.link.max_speed = kSpeeds[max];
    f.link.current_speed = kSpeeds[pick(4) == 0 ? pick(5) : max];
    f.link.max_width = 16;
    f.link.current_width = pick(4) == 0 ? 4 : 16;
  };
  struct Kind {
    uint16_t vendor, device;
    uint32_t class_code;
    const char* driver;
  };
  static const Kind kKinds[] = {{0x10de, 0x2335, 0x030200, "nvidia"},  {0x10de, 0x2330, 0x030200, "nvidia"},
                                {0x1002, 0x740f, 0x038000, "amdgpu"},  {0x15b3, 0x1021, 0x020000, "mlx5_core"},
                                {0x144d, 0xa824, 0x010802, "nvme"},    {0x1da3, 0x1020, 0x120000, "habanalabs"},
                                {0x10de, 0x2335, 0x030200, ""}};
  std::vector<std::string> bridges;
  int bus = 0;
  for (int h = 0; h < 1 + pick(2); ++h) {
    std::string host = fmt::format("pci0000:{:02x}", bus);
    int root_bus = bus++;
    tree.host_dev(pick(2) ? 0x8086 : 0x1022, pick(2) ? 0x09a2 : 0x1450, host, fmt::format("{:02x}:00.0", root_bus));
    size_t first = bridges.size();
    for (int r = 0; r < 1 + pick(3); ++r) {
      std::optional<uint16_t> acs;
      if (pick(2)) acs = pick(2) ? (kAcsRr | kAcsCr) : kAcsSv;
      std::string rp = fmt::format("{:02x}:{:02x}.0", root_bus, 1 + r);
      size_t i = tree.rp(rp, acs, host);
      if (pick(5) == 0) tree.t.functions[i].acs.state = CapState::kUnknown, tree.t.functions[i].config_readable = 64;
      tree.windows(i, pick(4) != 0);
      link(i);
      tree.t.functions[i].numa_node = h;
      bridges.push_back(rp);
    }
    for (int d = 0; d < 3 + pick(6); ++d) {
      const std::string parent = bridges[first + static_cast<size_t>(pick(static_cast<int>(bridges.size() - first)))];
      std::string bdf = fmt::format("{:02x}:00.0", ++bus);
      size_t i;
      if (pick(3) == 0) {
        std::optional<uint16_t> acs;
        if (pick(2)) acs = pick(2) ? kAcsRr : kAcsEc;
        i = tree.add(bdf, parent, 0x10b5, 0x8747, pick(2) ? PcieType::kSwitchDownstream : PcieType::kSwitchUpstream, acs, host);
        tree.windows(i, pick(4) != 0);
        bridges.push_back(bdf);
      } else {
        const Kind& k = kKinds[pick(static_cast<int>(std::size(kKinds)))];
        i = tree.add(bdf, parent, k.vendor, k.device, PcieType::kEndpoint, std::nullopt, host);
        Function& f = tree.describe(i, k.class_code, k.driver, uint64_t{1} << (28 + pick(10)), uint64_t{1} << (40 + pick(12)));
        if (pick(3) == 0) f.memory_size = uint64_t{1} << (30 + pick(6));
        if (f.driver == std::string("nvidia") && pick(2))
          f.nvidia_clique_state = CapState::kPresent, f.nvidia_clique = static_cast<uint8_t>(pick(2));
        if (f.driver == std::string("mlx5_core") && pick(2)) {
          size_t v = tree.vf(fmt::format("{:02x}:00.1", bus), bdf);
          tree.t.functions[v].vendor = 0x15b3, tree.t.functions[v].device = 0x101e;
          tree.describe(v, 0x020000, "mlx5_core");
          tree.t.functions[v].numa_node = pick(3) - 1;
        }
      }
      link(i);
      tree.t.functions[i].numa_node = pick(4) == 0 ? -1 : pick(2);
    }
    bus += 2;
  }
  return tree;
}

// A rule file that tells apart every value `fact` takes on the pairs of `t` (a warn rule for each,
// at most 48, and one for unknown): pairs whose values differ fire different rules, so they must be
// in different groups. Empty when the fact takes fewer than two distinct outcomes there.
std::string rules_telling_values_apart(const Topology& t, PolicyEvaluator& evaluator, const FactSpec& spec) {
  const FactId id = *fact_id(spec.name);
  const auto& texts = kernel_text_facts();
  const bool is_text = std::find(texts.begin(), texts.end(), spec.name) != texts.end();
  std::vector<std::string> values;  // as YAML
  bool unknown = false;
  for (size_t p = 0; p < t.functions.size(); ++p)
    for (size_t c = 0; c < t.functions.size(); ++c) {
      FactSet facts = is_text ? evaluator.decide_in_full(p, c).facts : evaluator.facts(p, c);
      const FactValue* v = facts.get(id);
      if (v && spec.type == FactType::kStringList) {  // no equality test on lists: known or not
        if (values.empty()) values.push_back("{unknown: false}");
        continue;
      }
      if (!v) {
        unknown = true;
        continue;
      }
      std::string yaml;
      if (const auto* b = std::get_if<bool>(v)) yaml = *b ? "true" : "false";
      else if (const auto* i = std::get_if<int64_t>(v)) yaml = std::to_string(*i);
      else if (const auto* d = std::get_if<double>(v)) yaml = fmt::format("{}", *d);
      else if (const auto* str = std::get_if<std::string>(v)) yaml = nlohmann::json(*str).dump();
      if (std::find(values.begin(), values.end(), yaml) == values.end() && values.size() < 48) values.push_back(yaml);
    }
  if (values.size() + (unknown ? 1 : 0) < 2) return "";
  std::string text = "version: 1\nreplace: true\nrules:\n";
  for (size_t i = 0; i < values.size(); ++i)
    text += fmt::format("  - id: value-{}\n    when: {{{}: {}}}\n    action: warn\n    reason: value {}\n", i, spec.name,
                        values[i], i);
  text += fmt::format("  - id: unknown\n    when: {{{}: {{unknown: true}}}}\n    action: warn\n    reason: unknown\n", spec.name);
  return text;
}

// One fact at a time, every catalogued fact a pair can have (the machine's aside): when the rules
// read that fact alone, each pair's group must fire exactly the rules its whole fact set fires. A
// per-pair fact that the memo's key (PairFactValues, the device signatures) failed to carry would
// put pairs of different values in one group, and fail here. Returns the facts that took at least
// two outcomes on `t` (those the check could catch).
std::set<std::string> expect_each_fact_read_alone_keeps_groups_exact(const Topology& t, const KernelRules& kernel,
                                                                     const std::string& what) {
  std::set<std::string> told_apart;
  PolicyEvaluator all_facts(t, kernel, default_rules(), nullptr);
  for (const FactSpec& spec : fact_catalog()) {
    if (is_machine_fact(spec.name)) continue;
    std::string text = rules_telling_values_apart(t, all_facts, spec);
    if (text.empty()) continue;
    told_apart.insert(spec.name);
    const auto& texts = kernel_text_facts();
    const bool reads_text = std::find(texts.begin(), texts.end(), spec.name) != texts.end();
    RuleSet rules;
    rules.add(parse_rule_file(text, spec.name + ".yaml"));
    PolicyEvaluator evaluator(t, kernel, rules, nullptr);
    size_t mismatches = 0;
    for (size_t p = 0; p < t.functions.size(); ++p)
      for (size_t c = 0; c < t.functions.size(); ++c) {
        const DecisionGroup& g = evaluator.groups()[evaluator.decide(p, c)];
        Decision full = reads_text ? evaluator.decide_in_full(p, c).decision : rules.decide(evaluator.facts(p, c));
        if (g.fired != full.rule_ids() && mismatches++ < 3)
          ADD_FAILURE() << what << ": " << spec.name << ": " << t.functions[p].bdf.str() << " -> "
                        << t.functions[c].bdf.str() << " grouped with " << fmt::format("{}", fmt::join(g.fired, ","))
                        << ", its facts fire " << fmt::format("{}", fmt::join(full.rule_ids(), ","));
      }
    EXPECT_EQ(mismatches, 0u) << what << ": " << spec.name;
  }
  return told_apart;
}

TEST(PolicyEvaluator, GroupsEqualFullDecisionsOnRandomTrees) {
  size_t pairs = 0;
  for (uint32_t seed = 1; seed <= 24; ++seed) {
    test::Tree tree = random_tree(seed);
    pairs += expect_groups_match_full_decisions(tree.t, kernel_for(tree.t), nullptr, fmt::format("random tree {}", seed));
  }
  EXPECT_GT(pairs, 2000u);
}

TEST(PolicyEvaluator, EachPairFactReadAloneKeepsGroupsExact) {
  std::set<std::string> told_apart;
  for (const char* dir : {"machines", "kernel-oracle"})
    for (const auto& e : fs::directory_iterator(fs::path(P2PAUDIT_TEST_DATA) / dir)) {
      if (!fs::exists(e.path() / "sysroot.tar.gz")) continue;
      Sysroot root = Sysroot::open((e.path() / "sysroot.tar.gz").string());
      Topology t = read_topology(root);
      told_apart.merge(expect_each_fact_read_alone_keeps_groups_exact(t, kernel_for(t), e.path().filename().string()));
    }
  // The random trees vary what the captures do not (ACS on one side, windows, NUMA, link widths).
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    test::Tree tree = random_tree(seed);
    told_apart.merge(expect_each_fact_read_alone_keeps_groups_exact(tree.t, kernel_for(tree.t), fmt::format("random tree {}", seed)));
  }
  // kernel.whitelist_assumed is the tool's own option, false unless an entry is assumed for the run:
  // the random trees once more with their root-bus devices assumed whitelisted.
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    test::Tree tree = random_tree(seed);
    std::set<std::string> assume;
    for (const auto& hb : tree.t.host_bridges)
      for (size_t i : hb.root_bus_devices)
        assume.insert(fmt::format("{:04x}:{:04x}", tree.t.functions[i].vendor, tree.t.functions[i].device));
    told_apart.merge(expect_each_fact_read_alone_keeps_groups_exact(
        tree.t, kernel_for(tree.t, {assume.begin(), assume.end()}), fmt::format("random tree {} assumed whitelisted", seed)));
  }
  // Every fact a pair sets itself (pair_own_facts()) must have been told apart somewhere, or the
  // check above proves nothing about it.
  for (const char* fact : {"kernel.map_type", "kernel.allowed", "kernel.p2pdma_distance", "kernel.distance",
                           "kernel.acs_redirect", "kernel.acs_redirect_devices", "kernel.whitelist", "kernel.host_bridge",
                           "kernel.whitelist_assumed", "kernel.cpu_rule", "path.relation", "path.same_model",
                           "path.same_numa_node", "path.narrowest_link_speed_gts", "path.narrowest_link_width",
                           "path.degraded_link", "path.bridges_64bit_prefetch", "vendor.authority"})
    EXPECT_TRUE(told_apart.count(fact)) << fact << " took one value on every pair";
  std::string list;
  for (const auto& f : told_apart) list += f + " ";
  RecordProperty("told_apart", list);
}

}  // namespace
}  // namespace p2paudit::policy
