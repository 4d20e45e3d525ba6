// SPDX-License-Identifier: GPL-2.0-or-later
// Whitelist candidates (docs/whitelist.md): which host bridge's entry would unlock which pairs,
// checked against the kernel booted with that entry added, and the evidence each candidate has.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <unistd.h>

#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "synthetic_tree.h"
#include "test_support.h"

namespace p2paudit::fleet {
namespace {

namespace fs = std::filesystem;
using PairSet = std::set<std::pair<std::string, std::string>>;

const fs::path kOracle = fs::path(P2PAUDIT_TEST_DATA) / "kernel-oracle";

// The kernel's own map type per ordered pair of a kernel-oracle case (verdicts.txt).
std::map<std::pair<std::string, std::string>, std::string> kernel_verdicts(const std::string& oracle_case) {
  std::map<std::pair<std::string, std::string>, std::string> out;
  std::ifstream in(kOracle / oracle_case / "verdicts.txt");
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string tag, p, c, map;
    if (words >> tag >> p >> c >> map && tag == "P2P" && map.rfind("map=", 0) == 0) out[{p, c}] = map.substr(4);
  }
  return out;
}

KernelRules rules_for(const Topology& topo, const std::string& release = "") {
  Platform platform = topo.platform;
  if (!release.empty()) platform.kernel_release = release;
  return load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", platform, {});
}

const WhitelistCandidate* find(const std::vector<WhitelistCandidate>& all, const std::string& id) {
  for (const auto& c : all)
    if (c.id() == id) return &c;
  return nullptr;
}

// QEMU's q35 host bridge 8086:29c0: a candidate with exactly the pairs the real kernel refused and
// then allowed through the host bridge when booted with the entry added (h-g1 is h-a plus
// p2poracle.extra_whitelist=8086:29c0; h-g2 the same entry with REQ_SAME_HOST_BRIDGE).
TEST(WhitelistCandidates, QemuHostBridgeUnlocksExactlyWhatTheKernelThenAllowed) {
  for (const auto& [plain, whitelisted] : {std::pair{"h-a-two-rootports-intel", "h-g1-whitelist-q35"}}) {
    Sysroot root = Sysroot::open((kOracle / plain / "sysroot.tar.gz").string());
    Topology topo = read_topology(root);
    auto candidates = whitelist_candidates(topo, rules_for(topo), nullptr, {true});
    const WhitelistCandidate* q35 = find(candidates, "8086:29c0");
    ASSERT_NE(q35, nullptr);
    EXPECT_EQ(q35->status, CandidateStatus::kProposedUpstream);  // rules/kernel/upstream.yaml
    EXPECT_FALSE(q35->missing.empty());
    PairSet ours;
    for (const auto& p : q35->pairs) ours.insert({topo.functions[p.provider].bdf.str(), topo.functions[p.client].bdf.str()});
    auto before = kernel_verdicts(plain), after = kernel_verdicts(whitelisted);
    PairSet kernel;
    for (const auto& [pair, map] : before)
      if (map == "NOT_SUPPORTED" && after.at(pair) == "THRU_HOST_BRIDGE") kernel.insert(pair);
    ASSERT_FALSE(kernel.empty());
    EXPECT_EQ(ours, kernel);
    EXPECT_TRUE(q35->needs_same_host_bridge);
    EXPECT_EQ(kernel_table_line(*q35), "\t/* 82G33/G31/P35/P31 Express DRAM Controller */\n"
                                       "\t{PCI_VENDOR_ID_INTEL, 0x29c0, REQ_SAME_HOST_BRIDGE},");
  }
}

// Seed case 1: two B70 on root ports of a Rocket Lake-S host (8086:4c43), kernel 7.0.
test::Tree b70_on_rocket_lake() {
  test::Tree tree;
  tree.t.platform.cpu_model = 167;
  tree.host_dev(0x8086, 0x4c43);
  tree.t.functions.back().device_name = "Rocket Lake-S 8c Host Bridge/DRAM Registers";
  tree.t.functions.back().class_code = 0x060000;
  tree.rp("00:01.0");
  tree.rp("00:06.0");
  for (auto [port, usp, dsp, gpu] : {std::tuple{"00:01.0", "01:00.0", "02:01.0", "03:00.0"},
                                     std::tuple{"00:06.0", "05:00.0", "06:01.0", "07:00.0"}}) {
    tree.add(usp, port, 0x8086, 0xe2ff, PcieType::kSwitchUpstream);
    tree.add(dsp, usp, 0x8086, 0xe2f0, PcieType::kSwitchDownstream);
    tree.describe(tree.add(gpu, dsp, 0x8086, 0xe223, PcieType::kEndpoint), 0x030000, "xe");
  }
  return tree;
}

// Level Zero's copy results both ways, as a stored probe's facts (measured).
policy::VendorFactsDocument copy_evidence(const std::string& result) {
  policy::VendorFactsDocument doc;
  for (auto [p, c] : {std::pair{"0000:03:00.0", "0000:07:00.0"}, std::pair{"0000:07:00.0", "0000:03:00.0"}}) {
    auto& f = doc.pairs[{*Bdf::parse(p), *Bdf::parse(c)}];
    f.set("vendor.copy_result", result);
    f.set("vendor.copy_verified", result == "verified");
    f.set("vendor.copy_runtime", std::string("level_zero"));
    if (result == "verified") f.set("vendor.copy_gbps", 24.8);
  }
  return doc;
}

TEST(WhitelistCandidates, SeedMachineNeedsEvidenceAndNamesTheCorruptionReport) {
  auto tree = b70_on_rocket_lake();
  auto candidates = whitelist_candidates(tree.t, rules_for(tree.t, "7.0.0-22-generic"), nullptr);
  ASSERT_EQ(candidates.size(), 1u);
  const auto& c = candidates[0];
  EXPECT_EQ(c.id(), "8086:4c43");
  // The public report of wrong data decides (whitelist_evidence_test.cpp has the rest).
  EXPECT_EQ(c.status, CandidateStatus::kDoNotSubmit);
  EXPECT_EQ(c.pairs.size(), 2u);  // both directions of the GPU pair
  ASSERT_EQ(c.reports.size(), 1u);
  EXPECT_NE(c.reports[0].find("compute-runtime/issues/935"), std::string::npos);
  EXPECT_NE(c.reports[0].find("wrong data"), std::string::npos);
  KernelRules rules = rules_for(tree.t, "7.0.0-22-generic");
  auto message = commit_message(tree.t, rules, candidate_context(tree.t, rules), c);
  EXPECT_EQ(message.rfind("PCI/P2PDMA: Add Rocket Lake-S 8c host bridge to allowlist\n\n", 0), 0u) << message;
  EXPECT_NE(message.find("none yet (needs evidence"), std::string::npos);
  EXPECT_NE(message.find("Link: https://github.com/intel/compute-runtime/issues/935\n"), std::string::npos);
  // Prose is wrapped; indented lines quote the kernel's log and lspci verbatim, as upstream messages do.
  for (size_t start = 0, end; (end = message.find('\n', start)) != std::string::npos; start = end + 1)
    if (message.compare(start, 2, "  ") != 0) {
      EXPECT_LE(end - start, 80u) << message.substr(start, end - start);
    }
}

TEST(WhitelistCandidates, EvidenceDecidesTheStatus) {
  auto tree = b70_on_rocket_lake();
  // A host bridge no report or upstream entry names, the kernel of the run booted with its entry
  // (--kernel-rules): Level Zero's copies went through it as peer traffic.
  tree.t.functions[tree.index("00:00.0")].device = 0xa700;
  fs::path file = fs::temp_directory_path() / ("p2paudit-whitelist-test-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(file) << "schema: 1\nentries:\n  - {vendor: \"8086\", device: \"a700\", same_host_bridge: true}\n";
  KernelRuleOptions booted;
  booted.kernel = "7.0.0-22-generic";
  booted.kernel_rules = {file.string()};
  KernelRules rules = load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", tree.t.platform, booted);
  fs::remove(file);
  auto verified = copy_evidence("verified");
  auto c = whitelist_candidates(tree.t, rules, &verified);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, CandidateStatus::kReadyToSubmit);
  EXPECT_NE(commit_message(tree.t, rules, candidate_context(tree.t, rules), c[0]).find("verified, 24.8 GB/s"), std::string::npos);
  // The path's ceiling beside the bandwidth (docs/probe.md, "Bandwidth against the path").
  for (auto& [pair, f] : verified.pairs) f.set("vendor.copy_ceiling_gbps", 31.504);
  c = whitelist_candidates(tree.t, rules, &verified);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NE(commit_message(tree.t, rules, candidate_context(tree.t, rules), c[0]).find("verified, 24.8 GB/s of the path's 31.5 GB/s"),
            std::string::npos);
  const auto shown = unlocked_pair_json(tree.t, c[0].pairs.at(0));
  EXPECT_EQ(shown["copy_ceiling_gbps"], 31.504);
  EXPECT_NEAR(shown["copy_ceiling_ratio"].get<double>(), 24.8 / 31.504, 0.0005);
  auto corrupt = copy_evidence("corrupt");
  c = whitelist_candidates(tree.t, rules, &corrupt);
  EXPECT_EQ(c[0].status, CandidateStatus::kDoNotSubmit);
}

// Not a candidate where something else refuses: no CONFIG_PCI_P2PDMA, a kernel before 4.20.
TEST(WhitelistCandidates, NoneWhereSomethingElseRefuses) {
  auto tree = b70_on_rocket_lake();
  tree.t.platform.config_p2pdma = Known::kNo;
  KernelRules rules = rules_for(tree.t, "7.0.0");
  rules.config_p2pdma = Known::kNo;
  EXPECT_TRUE(whitelist_candidates(tree.t, rules, nullptr).empty());
  auto old = b70_on_rocket_lake();
  EXPECT_TRUE(whitelist_candidates(old.t, rules_for(old.t, "4.19.0"), nullptr).empty());
}

// An entry a later release carries is reported as fixed there (Intel QAT/DSA/IAA 8086:0b25, 7.2).
TEST(WhitelistCandidates, EntryOfALaterKernelIsFixedIn) {
  test::Tree tree;
  tree.t.functions[tree.host_dev(0x8086, 0x0b25)].class_code = 0x060000;
  tree.rp("00:01.0");
  tree.rp("00:02.0");
  tree.describe(tree.add("01:00.0", "00:01.0", 0x8086, 0x0b25, PcieType::kEndpoint), 0x010802, "nvme");
  tree.describe(tree.add("02:00.0", "00:02.0", 0x144d, 0xa80a, PcieType::kEndpoint), 0x010802, "nvme");
  auto c = whitelist_candidates(tree.t, rules_for(tree.t, "6.8.0"), nullptr);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, CandidateStatus::kFixedIn);
  EXPECT_EQ(c[0].fixed_in, "7.2");
  EXPECT_TRUE(whitelist_candidates(tree.t, rules_for(tree.t, "7.2.0"), nullptr).empty());
}

TEST(WhitelistCommand, TextAndJson) {
  std::string sysroot = (kOracle / "h-a-two-rootports-intel" / "sysroot.tar.gz").string();
  auto r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(sysroot) + " whitelist");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("8086:29c0 82G33/G31/P35/P31 Express DRAM Controller [pci0000:00]: proposed upstream"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("{PCI_VENDOR_ID_INTEL, 0x29c0, REQ_SAME_HOST_BRIDGE},"), std::string::npos);
  r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(sysroot) +
                        " --format json whitelist");
  ASSERT_EQ(r.status, 0);
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["schema_version"], 1);
  ASSERT_EQ(j["candidates"].size(), 1u);
  EXPECT_EQ(j["candidates"][0]["status"], "proposed upstream");
  std::string message = j["candidates"][0]["commit_message"];
  EXPECT_EQ(message.rfind("PCI/P2PDMA: Add ", 0), 0u);
  EXPECT_NE(message.find("host bridge to allowlist\n\n"), std::string::npos) << "newlines stay newlines in JSON";
  EXPECT_EQ(message.find("\\x0a"), std::string::npos);
  // Already whitelisted for this run: nothing left to propose.
  r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(sysroot) +
                        " --assume-whitelisted 8086:29c0 --format json whitelist");
  EXPECT_TRUE(nlohmann::json::parse(r.output)["candidates"].empty());
}

}  // namespace
}  // namespace p2paudit::fleet
