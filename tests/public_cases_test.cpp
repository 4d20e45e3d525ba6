// SPDX-License-Identifier: GPL-2.0-or-later
// Public P2P reports with ground truth (shared/fixtures/public-cases, see each case's SOURCE.md):
// the trees are rebuilt from what the reports state, and the verdict must match what the
// reporter's kernel said or did.
#include <gtest/gtest.h>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/env_exports.h"
#include "p2paudit/policy/evaluate.h"
#include "synthetic_tree.h"

namespace p2paudit {
namespace {

using test::Tree;

constexpr uint16_t kRedirect = kAcsRr | kAcsCr;  // ECAP_ACS+0x6.w = 000c, as the report set it

PairVerdict verdict(const Tree& tree, const std::string& release, const std::string& p, const std::string& c) {
  Platform platform = tree.t.platform;
  platform.kernel_release = release;
  KernelRules rules = load_kernel_rules(std::filesystem::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", platform, {});
  return pci_p2pdma_distance(tree.t, rules, tree.index(p), tree.index(c));
}

// An Arc Pro B70 carries its own switch: root port -> card upstream port -> card downstream port -> GPU.
void b70_below(Tree& tree, const std::string& port, const std::string& usp, const std::string& dsp,
               const std::string& gpu, std::optional<uint16_t> dsp_acs = std::nullopt) {
  tree.add(usp, port, 0x8086, 0xe2ff, PcieType::kSwitchUpstream);
  tree.add(dsp, usp, 0x8086, 0xe2f0, PcieType::kSwitchDownstream, dsp_acs);
  // A B70 carries 32 GB (rules/devices/gpus.yaml); with Resizable BAR its BAR2 covers all of it.
  tree.describe(tree.add(gpu, dsp, 0x8086, 0xe223, PcieType::kEndpoint), 0x030000, "xe", uint64_t{32} << 30);
}

// Two B70 on separate root ports of the host bridge whose root bus starts with vendor:device.
Tree b70_pair_on_root_ports(uint16_t host_vendor, uint16_t host_device, const std::string& second_port,
                            std::optional<int> amd_family = std::nullopt) {
  Tree tree;
  if (amd_family) tree.amd_zen(*amd_family);
  tree.host_dev(host_vendor, host_device);
  tree.rp("00:01.0");
  tree.rp(second_port);
  b70_below(tree, "00:01.0", "01:00.0", "02:01.0", "03:00.0");
  b70_below(tree, second_port, "05:00.0", "06:01.0", "07:00.0");
  return tree;
}

// b70-dual-intel-client-refused: two B70 on separate CPU root ports of a Rocket Lake-S host
// (host bridge 8086:4c43), kernel 7.0.0-22: the kernel printed this line and refused.
TEST(PublicCases, B70OnIntelClientRootPortsIsRefusedWithTheKernelsOwnLine) {
  PairVerdict v = verdict(b70_pair_on_root_ports(0x8086, 0x4c43, "00:06.0"), "7.0.0-22-generic", "03:00.0", "07:00.0");
  EXPECT_EQ(v.map_type, MapType::kNotSupported);
  EXPECT_EQ(v.p2pdma_distance, -1);
  ASSERT_EQ(v.kernel_log.size(), 1u);
  EXPECT_EQ(v.kernel_log[0],
            "xe 0000:07:00.0: cannot be used for peer-to-peer DMA as the client and provider (0000:03:00.0) do not "
            "share an upstream bridge or whitelisted host bridge");
}

// b70-dual-amd-am5-allowed: the same cards on a Ryzen 9 9950X (family 0x1a): allowed, 28.6 GB/s.
TEST(PublicCases, B70OnAmdZen5RootPortsIsAllowedThroughTheHostBridge) {
  PairVerdict v = verdict(b70_pair_on_root_ports(0x1022, 0x14d8, "00:06.0", 0x1a), "6.14.0", "03:00.0", "07:00.0");
  EXPECT_EQ(v.map_type, MapType::kThruHostBridge);
  EXPECT_EQ(v.p2pdma_distance, 8);
  EXPECT_TRUE(v.kernel_log.empty());
}

// b70-dual-rocketlake-pex880xx-acs: both B70 below one Broadcom PEX880xx switch (upstream port
// 0a:00.0). With ReqRedir+CmpltRedir on the four listed bridges the kernel refused (hop count 8);
// with them cleared it reported BUS_ADDR, distance 8, and copies passed.
Tree pex_switch(std::optional<uint16_t> acs) {
  Tree tree;
  tree.host_dev(0x8086, 0x4c43);
  tree.rp("00:01.0");
  tree.add("0a:00.0", "00:01.0", 0x1000, 0xc030, PcieType::kSwitchUpstream);
  tree.add("0b:00.0", "0a:00.0", 0x1000, 0xc030, PcieType::kSwitchDownstream, acs);
  tree.add("0b:10.0", "0a:00.0", 0x1000, 0xc030, PcieType::kSwitchDownstream, acs);
  b70_below(tree, "0b:00.0", "0c:00.0", "0d:01.0", "0e:00.0", acs);
  b70_below(tree, "0b:10.0", "10:00.0", "11:01.0", "12:00.0", acs);
  return tree;
}

TEST(PublicCases, B70BelowPexSwitchWithAcsRedirectIsRefused) {
  PairVerdict v = verdict(pex_switch(kRedirect), "7.0.0-22-generic", "0e:00.0", "12:00.0");
  EXPECT_EQ(v.map_type, MapType::kNotSupported);
  EXPECT_EQ(v.distance, 8);
  EXPECT_EQ(v.p2pdma_distance, -1);
  // The report's bridge list, in the kernel's order: provider chain up, then client chain up.
  EXPECT_EQ(v.remedy.disable_acs_redir, "0000:0d:01.0;0000:0b:00.0;0000:11:01.0;0000:0b:10.0");
}

TEST(PublicCases, B70BelowPexSwitchWithoutAcsRedirectIsBusAddress) {
  PairVerdict v = verdict(pex_switch(std::nullopt), "7.0.0-22-generic", "0e:00.0", "12:00.0");
  EXPECT_EQ(v.map_type, MapType::kBusAddr);
  EXPECT_EQ(v.p2pdma_distance, 8);
}

// llama27198-b70-skylake-e-p2p-works: B70 pair on an X299 / Sky Lake-E host whose root bus starts
// with 8086:2020, on the whitelist without the same-host-bridge flag: P2P worked.
TEST(PublicCases, SkylakeEHostBridgeIsWhitelisted) {
  PairVerdict v = verdict(b70_pair_on_root_ports(0x8086, 0x2020, "00:03.0"), "6.8.0-31-generic", "03:00.0", "07:00.0");
  EXPECT_EQ(v.map_type, MapType::kThruHostBridge);
  EXPECT_GE(v.p2pdma_distance.value_or(-1), 0);
}

// ---------------------------------------------------------------------------------------------
// Where reality failed although the kernel allows: the default policy must not answer a plain
// "peer". It refuses with a rule citing the report, or answers peer only on a verified copy of the
// pair (vendor.copy_verified), and says which.
// ---------------------------------------------------------------------------------------------

// A tree's IOMMU mode as a capture would show it; the reports seldom say, so where a tree leaves it
// unset the IOMMU is off (a stand-in, like the addresses), except in decide_as_reported().
constexpr bool kIommuAsCaptured = true;

policy::PairDecision decide(const Tree& tree, const std::string& release, const std::string& p, const std::string& c,
                            const policy::VendorFactsDocument* facts = nullptr, bool iommu_as_captured = kIommuAsCaptured) {
  Tree sized = tree;
  sized.t.platform.kernel_release = release;
  if (iommu_as_captured && sized.t.platform.iommu_mode.empty()) {
    sized.t.platform.iommu_mode = "off";
    sized.t.platform.iommu_mode_source = "stand-in: the report does not say";
  }
  // amdgpu publishes its VRAM size (mem_info_vram_total), so a capture holds it; the reports' GPUs ran
  // with large BARs (AMD's peer path needs one). Stand-ins where the report gives neither.
  for (auto& f : sized.t.functions) {
    if (f.driver != "amdgpu" || f.memory_size) continue;
    if (std::none_of(f.bars.begin(), f.bars.end(), [](const Bar& b) { return !b.io && b.size > 0; }))
      f.bars.push_back(Bar{0, uint64_t{1} << 40, uint64_t{16} << 30, false, true, true});
    uint64_t largest = 0;
    for (const auto& b : f.bars) largest = std::max(largest, b.io ? 0 : b.size);
    f.memory_size = largest;
    f.memory_size_source = "stand-in: mem_info_vram_total as large as the BAR";
  }
  // The bridges' windows as firmware with Above 4G Decoding sets them: the reports' large BARs were
  // reachable, which the cases do not question.
  for (size_t i = 0; i < sized.t.functions.size(); ++i)
    if (sized.t.functions[i].is_bridge() && sized.t.functions[i].windows.empty()) sized.windows(i, true);
  const Topology& t = sized.t;
  KernelRules rules = load_kernel_rules(std::filesystem::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", t.platform, {});
  static const auto policy_rules = policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  return policy::decide_pair(t, rules, policy_rules, facts, tree.index(p), tree.index(c));
}

// A passing copy test of (provider, client), as `probe --copy` would record it.
policy::VendorFactsDocument verified_copy(const std::string& provider, const std::string& client) {
  policy::VendorFactsDocument doc;
  auto& f = doc.pairs[{*Bdf::parse(provider), *Bdf::parse(client)}];
  f.set("vendor.copy_result", std::string("verified"));
  f.set("vendor.copy_verified", true);
  f.set("vendor.copy_runtime", std::string("level_zero"));
  f.set("vendor.copy_gbps", 24.0);
  return doc;
}

void expect_refused_citing(const policy::PairDecision& d, const std::string& rule, const std::string& source) {
  EXPECT_GE(d.verdict.p2pdma_distance.value_or(-1), 0) << "the kernel allows these pairs";
  EXPECT_EQ(d.decision.action, policy::Action::kHostStaged) << d.decision.rule << ": " << d.decision.reason;
  EXPECT_EQ(d.decision.rule, rule);
  bool cited = false;
  for (const auto& fired : d.decision.fired) cited |= fired.id == rule && fired.source == source;
  EXPECT_TRUE(cited) << rule << " should cite " << source;
}

// cr942-4xb70-amd-matisse-pex880xx-corrupt: four B70 below a two-level PEX880xx (1000:c012) on an
// AMD Matisse host (family 17h): peer copies corrupted in every ACS state.
Tree matisse_four_b70(std::optional<uint16_t> pex_acs) {
  Tree tree;
  tree.amd_zen(0x17);
  tree.t.platform.cpu_model = 0x71;
  tree.host_dev(0x1022, 0x1480);
  tree.add("00:03.1", "", 0x1022, 0x1483, PcieType::kRootPort);
  tree.add("09:00.0", "00:03.1", 0x1000, 0xc012, PcieType::kSwitchUpstream);
  tree.add("0a:00.0", "09:00.0", 0x1000, 0xc012, PcieType::kSwitchDownstream, pex_acs);
  tree.add("0a:04.0", "09:00.0", 0x1000, 0xc012, PcieType::kSwitchDownstream, pex_acs);
  tree.add("0b:00.0", "0a:00.0", 0x1000, 0xc012, PcieType::kSwitchUpstream);
  tree.add("0c:10.0", "0b:00.0", 0x1000, 0xc012, PcieType::kSwitchDownstream, pex_acs);
  tree.add("0c:18.0", "0b:00.0", 0x1000, 0xc012, PcieType::kSwitchDownstream, pex_acs);
  b70_below(tree, "0c:10.0", "0d:00.0", "0e:01.0", "0f:00.0");
  b70_below(tree, "0c:18.0", "11:00.0", "12:01.0", "13:00.0");
  tree.add("15:00.0", "0a:04.0", 0x1000, 0xc012, PcieType::kSwitchUpstream);
  tree.add("16:00.0", "15:00.0", 0x1000, 0xc012, PcieType::kSwitchDownstream, pex_acs);
  tree.add("16:08.0", "15:00.0", 0x1000, 0xc012, PcieType::kSwitchDownstream, pex_acs);
  b70_below(tree, "16:00.0", "17:00.0", "18:01.0", "19:00.0");
  b70_below(tree, "16:08.0", "1b:00.0", "1c:01.0", "1d:00.0");
  return tree;
}

TEST(PublicCasesPolicy, FourB70OnMatisseAreNotPeerInAnyAcsState) {
  for (std::optional<uint16_t> acs : {std::optional<uint16_t>(kRedirect), std::optional<uint16_t>(uint16_t{0}),
                                      std::optional<uint16_t>()}) {
    Tree tree = matisse_four_b70(acs);
    for (const auto& [p, c] : {std::pair{"0f:00.0", "13:00.0"}, std::pair{"0f:00.0", "19:00.0"},
                               std::pair{"1d:00.0", "13:00.0"}})
      expect_refused_citing(decide(tree, "6.17.0", p, c), "xe-peer-on-amd-family-17h",
                            "https://github.com/intel/compute-runtime/issues/942");
  }
  // A verified copy of that very pair is the way past, and the decision says so.
  Tree tree = matisse_four_b70(std::nullopt);
  auto facts = verified_copy("0000:0f:00.0", "0000:13:00.0");
  auto d = decide(tree, "6.17.0", "0f:00.0", "13:00.0", &facts);
  EXPECT_EQ(d.decision.action, policy::Action::kPeer);
  EXPECT_EQ(d.decision.rule, "copy-verified");
  EXPECT_EQ(decide(tree, "6.17.0", "13:00.0", "0f:00.0", &facts).decision.rule, "xe-peer-on-amd-family-17h");
}

// rocm4793-mi50-xeon-w2135-p2p-fail: two MI50 (Vega 20, with the card's own switch) on IIO stacks
// of a Xeon W-2135 (Sky Lake-E root ports 8086:2030, whitelisted without the same-host-bridge flag).
Tree w2135_two_mi50() {
  Tree tree;
  tree.t.platform.cpu_model = 85;
  for (auto [host, rp, usp, dsp, gpu] :
       {std::tuple{"pci0000:16", "16:00.0", "17:00.0", "18:00.0", "19:00.0"},
        std::tuple{"pci0000:64", "64:00.0", "65:00.0", "66:00.0", "67:00.0"}}) {
    tree.add(rp, "", 0x8086, 0x2030, PcieType::kRootPort, std::nullopt, host);
    tree.add(usp, rp, 0x1002, 0x14a0, PcieType::kSwitchUpstream, std::nullopt, host);
    tree.add(dsp, usp, 0x1002, 0x14a1, PcieType::kSwitchDownstream, std::nullopt, host);
    tree.describe(tree.add(gpu, dsp, 0x1002, 0x66a1, PcieType::kEndpoint, std::nullopt, host), 0x038000, "amdgpu");
    tree.t.functions.back().numa_node = 0;
  }
  return tree;
}

TEST(PublicCasesPolicy, Mi50PairOnXeonW2135IsNotPeer) {
  expect_refused_citing(decide(w2135_two_mi50(), "6.5.0", "19:00.0", "67:00.0"),
                        "amdgpu-vega20-peer-through-skylake-e-host-bridge",
                        "https://github.com/ROCm/legacy-rocm-build/issues/4793");
}

// rocm1495-vii-6900xt-ryzen3950x-access-ok: Radeon VII (Vega 20) and RX 6900 XT (Navi 21), each
// with its card's switch, on root ports of a Ryzen 9 3950X: access advertised, transfers fault.
TEST(PublicCasesPolicy, RadeonViiWith6900XtOnRyzen3950XIsNotPeer) {
  Tree tree;
  tree.amd_zen(0x17);
  tree.t.platform.cpu_model = 0x71;
  tree.host_dev(0x1022, 0x1480);
  tree.add("00:01.1", "", 0x1022, 0x1483, PcieType::kRootPort);
  tree.add("00:03.1", "", 0x1022, 0x1483, PcieType::kRootPort);
  tree.add("0b:00.0", "00:01.1", 0x1002, 0x14a0, PcieType::kSwitchUpstream);
  tree.add("0c:00.0", "0b:00.0", 0x1002, 0x14a1, PcieType::kSwitchDownstream);
  // ROCm advertised peer access, which amdgpu gives only with a large BAR: all 16 GB of the Radeon VII.
  tree.describe(tree.add("0d:00.0", "0c:00.0", 0x1002, 0x66af, PcieType::kEndpoint), 0x030000, "amdgpu", uint64_t{16} << 30);
  tree.add("0e:00.0", "00:03.1", 0x1002, 0x1478, PcieType::kSwitchUpstream);
  tree.add("0f:00.0", "0e:00.0", 0x1002, 0x1479, PcieType::kSwitchDownstream);
  tree.describe(tree.add("10:00.0", "0f:00.0", 0x1002, 0x73bf, PcieType::kEndpoint), 0x030000, "amdgpu");
  expect_refused_citing(decide(tree, "5.14.14", "0d:00.0", "10:00.0"), "amdgpu-peer-between-gpu-generations",
                        "https://github.com/ROCm/legacy-rocm-build/issues/1495");
  expect_refused_citing(decide(tree, "5.14.14", "10:00.0", "0d:00.0"), "amdgpu-peer-between-gpu-generations",
                        "https://github.com/ROCm/legacy-rocm-build/issues/1495");
}

// rvs289-mi25-x11dgq-cross-socket-no-peers: two MI25 on the two sockets of a Sky Lake-SP board:
// no peers across sockets, peers under one CPU.
Tree x11dgq_mi25(bool same_socket) {
  Tree tree;
  tree.t.platform.cpu_model = 85;
  // The report gives no tree: each GPU directly below a root port of its socket's IIO stack.
  auto card = [&](const char* host, const char* rp, const char* gpu, int node) {
    tree.add(rp, "", 0x8086, 0x2030, PcieType::kRootPort, std::nullopt, host);
    tree.describe(tree.add(gpu, rp, 0x1002, 0x6860, PcieType::kEndpoint, std::nullopt, host), 0x038000, "amdgpu");
    tree.t.functions.back().numa_node = node;
  };
  card("pci0000:17", "17:00.0", "18:00.0", 0);
  if (same_socket) card("pci0000:3a", "3a:00.0", "3b:00.0", 0);
  else card("pci0000:85", "85:00.0", "86:00.0", 1);
  return tree;
}

TEST(PublicCasesPolicy, Mi25AcrossIntelSocketsIsNotPeer) {
  expect_refused_citing(decide(x11dgq_mi25(false), "6.8.0", "18:00.0", "86:00.0"), "peer-across-intel-sockets",
                        "https://github.com/ROCm/ROCmValidationSuite/issues/289");
  // Under one CPU the report found peers, and so does the policy.
  auto same = decide(x11dgq_mi25(true), "6.8.0", "18:00.0", "3b:00.0");
  EXPECT_EQ(same.decision.action, policy::Action::kPeer) << same.decision.rule << ": " << same.decision.reason;
}

// Where reality worked, the policy still answers peer.
TEST(PublicCasesPolicy, WorkingReportsStayPeer) {
  auto am5 = decide(b70_pair_on_root_ports(0x1022, 0x14d8, "00:06.0", 0x1a), "6.14.0", "03:00.0", "07:00.0");
  EXPECT_EQ(am5.decision.action, policy::Action::kPeer) << am5.decision.rule;
  auto skylake = decide(b70_pair_on_root_ports(0x8086, 0x2020, "00:03.0"), "6.8.0-31-generic", "03:00.0", "07:00.0");
  EXPECT_EQ(skylake.decision.action, policy::Action::kPeer) << skylake.decision.rule;
  auto pex = decide(pex_switch(std::nullopt), "7.0.0-22-generic", "0e:00.0", "12:00.0");
  EXPECT_EQ(pex.decision.action, policy::Action::kPeer) << pex.decision.rule;
}

// ---------------------------------------------------------------------------------------------
// Every other labelled situation of public-cases/INDEX.md (nvidia1253 is tested with its own rule).
// Each tree holds what the report states; a part the report does not name but the tree needs (a
// root port's address, a switch's upstream port) is marked as a stand-in where it is added. The
// driver's stated answer is given as vendor facts; each test asserts the decision and its rule.
// ---------------------------------------------------------------------------------------------

// The runtime's answer for both directions of a pair, as `probe` (or a vendor facts file) gives it.
void driver_says(policy::VendorFactsDocument& doc, const std::string& a, const std::string& b, bool peer,
                 std::optional<bool> fabric = false, const char* fabric_fact = "vendor.nvlink") {
  for (auto [p, c] : {std::pair{a, b}, std::pair{b, a}}) {
    auto& f = doc.pairs[{*Bdf::parse(p), *Bdf::parse(c)}];
    f.set("vendor.peer_supported", peer);
    if (fabric) f.set(fabric_fact, *fabric);
  }
}

// `probe --copy`'s record of the pair in one direction.
void copy_was(policy::VendorFactsDocument& doc, const std::string& p, const std::string& c, const std::string& result) {
  auto& f = doc.pairs[{*Bdf::parse(p), *Bdf::parse(c)}];
  f.set("vendor.copy_result", result);
  f.set("vendor.copy_verified", result == "verified");
  f.set("vendor.copy_runtime", std::string("cuda"));
  if (result == "corrupt") f.set("vendor.copy_mismatched_bytes", int64_t{4096});
  if (result == "failed") f.set("vendor.copy_error", std::string("hung"));
}

bool fired_rule(const policy::PairDecision& d, const std::string& id) {
  for (const auto& f : d.decision.fired)
    if (f.id == id) return true;
  return false;
}

void expect_decision(const policy::PairDecision& d, policy::Action action, const std::string& rule) {
  EXPECT_EQ(d.decision.action, action) << d.decision.rule << ": " << d.decision.reason;
  EXPECT_EQ(d.decision.rule, rule) << d.decision.reason;
}

std::string source_of(const policy::PairDecision& d) {
  for (const auto& f : d.decision.fired)
    if (f.id == d.decision.rule) return f.source;
  return "";
}

// What `p2paudit --format env policy` prints for the tree.
std::string env_of(const Tree& tree, const std::string& release, const policy::VendorFactsDocument* facts) {
  static Topology t;  // the evaluator keeps references
  t = tree.t;
  t.platform.kernel_release = release;
  static KernelRules rules;
  rules = load_kernel_rules(std::filesystem::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", t.platform, {});
  static const auto policy_rules = policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  policy::PolicyEvaluator evaluator(t, rules, policy_rules, facts);
  return policy::env_exports(evaluator, matrix_devices(t, false));
}

// b70-b50-intel-arrowlake-refused: an Arc Pro B70 (03:00.0 below root port 00:06.0) and an Arc Pro
// B50 (07:00.0 below 00:06.3), each with its card's own switch ("..." in the report's lspci -tv),
// on an Arrow Lake-S host. The report gives no host bridge ID; 8086:7d1a stands in for the client
// host bridge (the test checks it is not whitelisted, which is what the report's kernel said).
// The B50's IDs are not in the report either; 8086:e212 (Arc Pro B50) stands in.
TEST(PublicCasesPolicy, B70AndB50OnArrowLakeRootPortsAreRefusedByTheKernel) {
  Tree tree;
  tree.host_dev(0x8086, 0x7d1a);
  tree.rp("00:06.0");
  tree.rp("00:06.3");
  b70_below(tree, "00:06.0", "01:00.0", "02:01.0", "03:00.0");
  tree.add("05:00.0", "00:06.3", 0x8086, 0xe2ff, PcieType::kSwitchUpstream);
  tree.add("06:01.0", "05:00.0", 0x8086, 0xe2f0, PcieType::kSwitchDownstream);
  tree.describe(tree.add("07:00.0", "06:01.0", 0x8086, 0xe212, PcieType::kEndpoint), 0x030000, "xe");
  // Level Zero: can_access_peer false both ways.
  policy::VendorFactsDocument facts;
  driver_says(facts, "0000:03:00.0", "0000:07:00.0", false, std::nullopt);
  // The B70 era: the kernel's line names the B50 (07:00.0) as the client.
  PairVerdict v = verdict(tree, "7.0.0-22-generic", "03:00.0", "07:00.0");
  EXPECT_EQ(v.map_type, MapType::kNotSupported);
  ASSERT_EQ(v.kernel_log.size(), 1u);
  EXPECT_EQ(v.kernel_log[0],
            "xe 0000:07:00.0: cannot be used for peer-to-peer DMA as the client and provider (0000:03:00.0) do not "
            "share an upstream bridge or whitelisted host bridge");
  // The B580 era, the other direction.
  PairVerdict back = verdict(tree, "7.0.0-22-generic", "07:00.0", "03:00.0");
  ASSERT_EQ(back.kernel_log.size(), 1u);
  EXPECT_EQ(back.kernel_log[0],
            "xe 0000:03:00.0: cannot be used for peer-to-peer DMA as the client and provider (0000:07:00.0) do not "
            "share an upstream bridge or whitelisted host bridge");
  for (auto [p, c] : {std::pair{"03:00.0", "07:00.0"}, std::pair{"07:00.0", "03:00.0"}}) {
    auto d = decide(tree, "7.0.0-22-generic", p, c, &facts);
    expect_decision(d, policy::Action::kHostStaged, "kernel-refuses");
    EXPECT_EQ(std::get<std::string>(*d.facts.get("kernel.whitelist")), "not_whitelisted");
  }
}

// The reports already rebuilt above, decided by the policy with their runtimes' answers.
TEST(PublicCasesPolicy, KernelStatedCasesDecideWithTheirRules) {
  // b70-dual-intel-client-refused: zeDeviceCanAccessPeer false.
  policy::VendorFactsDocument refused;
  driver_says(refused, "0000:03:00.0", "0000:07:00.0", false, std::nullopt);
  expect_decision(decide(b70_pair_on_root_ports(0x8086, 0x4c43, "00:06.0"), "7.0.0-22-generic", "03:00.0", "07:00.0",
                         &refused),
                  policy::Action::kHostStaged, "kernel-refuses");
  // b70-dual-amd-am5-allowed: zeDeviceCanAccessPeer 1, copy PASS.
  policy::VendorFactsDocument allowed;
  driver_says(allowed, "0000:03:00.0", "0000:07:00.0", true, std::nullopt);
  expect_decision(decide(b70_pair_on_root_ports(0x1022, 0x14d8, "00:06.0", 0x1a), "6.14.0", "03:00.0", "07:00.0",
                         &allowed),
                  policy::Action::kPeer, "through-host-bridge");
  // llama27198: the Sky Lake-E host bridge is whitelisted and P2P worked.
  expect_decision(decide(b70_pair_on_root_ports(0x8086, 0x2020, "00:03.0"), "6.8.0-31-generic", "03:00.0", "07:00.0"),
                  policy::Action::kPeer, "through-host-bridge");
  // b70-dual-rocketlake-pex880xx-acs, both states: refused with redirect, below the switch without.
  auto on = decide(pex_switch(kRedirect), "7.0.0-22-generic", "0e:00.0", "12:00.0");
  expect_decision(on, policy::Action::kHostStaged, "kernel-refuses");
  EXPECT_TRUE(fired_rule(on, "acs-redirect-on-path"));
  expect_decision(decide(pex_switch(std::nullopt), "7.0.0-22-generic", "0e:00.0", "12:00.0"), policy::Action::kPeer,
                  "same-switch");
}

// The runtimes' stated answers for the AMD reports rebuilt above do not move their rules: amdgpu's
// peer access follows the kernel, and the reports' failures happened with ROCm saying yes.
TEST(PublicCasesPolicy, AmdReportsKeepTheirRulesWithTheRuntimesAnswers) {
  // rocm4793: "p2p not working" (no runtime answer stated beyond it): ROCm's no.
  policy::VendorFactsDocument mi50;
  driver_says(mi50, "0000:19:00.0", "0000:67:00.0", false, false, "vendor.xgmi");
  expect_decision(decide(w2135_two_mi50(), "6.5.0", "19:00.0", "67:00.0", &mi50), policy::Action::kHostStaged,
                  "amdgpu-vega20-peer-through-skylake-e-host-bridge");
  // rvs289: RVS "peers: false" across the sockets, peers under one CPU.
  policy::VendorFactsDocument across, same;
  driver_says(across, "0000:18:00.0", "0000:86:00.0", false, false, "vendor.xgmi");
  driver_says(same, "0000:18:00.0", "0000:3b:00.0", true, false, "vendor.xgmi");
  expect_decision(decide(x11dgq_mi25(false), "6.8.0", "18:00.0", "86:00.0", &across), policy::Action::kHostStaged,
                  "peer-across-intel-sockets");
  expect_decision(decide(x11dgq_mi25(true), "6.8.0", "18:00.0", "3b:00.0", &same), policy::Action::kPeer,
                  "through-host-bridge");
}

// amdgpu-acs-redirect-switch-log: two amdgpu devices below one switch (its internal bus 2e), each
// behind a bridge of its own, ACS redirect on the four bridges the kernel listed. The log names no
// CPU, root port or switch upstream port: an AMD Zen 3 host, root port 00:01.1 and upstream port
// 2d:00.0 stand in (the report says only that the host-bridge check passed).
Tree amdgpu_redirect_log_tree() {
  Tree tree;
  tree.amd_zen(0x19);
  tree.add("00:01.1", "", 0x1022, 0x1483, PcieType::kRootPort);
  tree.add("2d:00.0", "00:01.1", 0x1022, 0x14a0, PcieType::kSwitchUpstream);
  tree.add("2e:00.0", "2d:00.0", 0x1022, 0x14a1, PcieType::kSwitchDownstream, kRedirect);
  tree.add("2e:10.0", "2d:00.0", 0x1022, 0x14a1, PcieType::kSwitchDownstream, kRedirect);
  tree.add("30:00.0", "2e:00.0", 0x1022, 0x14a1, PcieType::kSwitchDownstream, kRedirect);
  // MI210 (64 GB) stands in for the patch's unnamed amdgpu devices, each with a large BAR.
  tree.describe(tree.add("31:00.0", "30:00.0", 0x1002, 0x740f, PcieType::kEndpoint), 0x038000, "amdgpu", uint64_t{64} << 30);
  tree.add("33:00.0", "2e:10.0", 0x1022, 0x14a1, PcieType::kSwitchDownstream, kRedirect);
  tree.describe(tree.add("34:00.0", "33:00.0", 0x1002, 0x740f, PcieType::kEndpoint), 0x038000, "amdgpu", uint64_t{64} << 30);
  return tree;
}

TEST(PublicCasesPolicy, AmdgpuPairWithAcsRedirectGoesThroughTheHostBridgeAsTheKernelLogged) {
  Tree tree = amdgpu_redirect_log_tree();
  PairVerdict v = verdict(tree, "6.0.0", "31:00.0", "34:00.0");
  EXPECT_EQ(v.map_type, MapType::kThruHostBridge);
  EXPECT_GE(v.p2pdma_distance.value_or(-1), 0);
  EXPECT_EQ(v.remedy.disable_acs_redir, "0000:30:00.0;0000:2e:00.0;0000:33:00.0;0000:2e:10.0");
  ASSERT_GE(v.kernel_log.size(), 1u);
  EXPECT_EQ(v.kernel_log[0], "amdgpu 0000:34:00.0: ACS redirect is set between the client and provider (0000:31:00.0)");
  // amdgpu asks the kernel, which already routed the pair through the host bridge: the policy
  // follows the kernel and warns about the redirect; the NVIDIA ACS rule is not amdgpu's.
  auto d = decide(tree, "6.0.0", "31:00.0", "34:00.0");
  expect_decision(d, policy::Action::kPeer, "through-host-bridge");
  EXPECT_TRUE(fired_rule(d, "acs-redirect-on-path"));
  EXPECT_FALSE(fired_rule(d, "nvidia-peer-through-acs-redirect"));
}

// nccl2079-rtx5880-amd-acs-hang: two RTX 5880 Ada at 41:00.0 and 61:00.0 behind AMD Starship/Matisse
// GPP bridges with ACSCtl 0x001d (SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+), nvidia-smi topo
// NODE (different host bridges of one NUMA node), 64 CPUs (Zen 2: family 17h), no NVLink, driver
// 580.82.09 whose "yes" let NCCL's P2P transport deadlock; the reporter: the ACS bits "forced P2P
// traffic through the IOMMU instead of direct GPU-to-GPU", so the IOMMU translated it (the mode's
// name is not in the report). The GPP bridges' addresses (40:03.1, 60:03.1) and the GPUs' PCI ID
// (10de:26b9, RTX 5880 Ada) are stand-ins: the report names neither.
Tree nccl2079_tree(uint16_t gpp_acs, const std::string& iommu = "translated") {
  Tree tree;
  tree.amd_zen(0x17);
  tree.t.platform.cpu_model = 0x31;
  tree.t.platform.iommu_mode = iommu;
  for (auto [host, gpp, gpu] : {std::tuple{"pci0000:40", "40:03.1", "41:00.0"}, std::tuple{"pci0000:60", "60:03.1", "61:00.0"}}) {
    tree.add(gpp, "", 0x1022, 0x1483, PcieType::kRootPort, gpp_acs, host);
    tree.describe(tree.add(gpu, gpp, 0x10de, 0x26b9, PcieType::kEndpoint, std::nullopt, host), 0x030000, "nvidia");
    tree.t.functions.back().numa_node = 0;
  }
  return tree;
}

policy::VendorFactsDocument nccl2079_driver() {
  policy::VendorFactsDocument doc;
  driver_says(doc, "0000:41:00.0", "0000:61:00.0", true);
  return doc;
}

TEST(PublicCasesPolicy, Nccl2079GpusWhosePeerTrafficTheIommuTranslatedAreHostStaged) {
  Tree tree = nccl2079_tree(kAcsSv | kAcsRr | kAcsCr | kAcsUf);
  ASSERT_EQ(tree.t.functions[tree.index("40:03.1")].acs.ctrl, 0x001d);
  auto driver = nccl2079_driver();
  // The kernel's P2PDMA (which NVIDIA's driver never asks) would allow it: AMD Zen host bridge; it
  // does not look at ACS between root ports of different host bridges.
  PairVerdict v = verdict(tree, "6.16.3", "41:00.0", "61:00.0");
  EXPECT_EQ(v.map_type, MapType::kThruHostBridge);
  EXPECT_FALSE(v.acs_considered);
  for (auto [p, c] : {std::pair{"41:00.0", "61:00.0"}, std::pair{"61:00.0", "41:00.0"}}) {
    auto d = decide(tree, "6.16.3", p, c, &driver);
    expect_decision(d, policy::Action::kHostStaged, "nvidia-peer-through-translating-iommu");
    EXPECT_EQ(source_of(d), "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#iommu-on-linux");
    EXPECT_NE(d.decision.reason.find("NVIDIA/nccl#2079"), std::string::npos) << d.decision.reason;
    for (const char* fix : {"iommu=pt", "amd_iommu=off", "intel_iommu=off"})
      EXPECT_NE(d.decision.remedy.find(fix), std::string::npos) << fix << " in " << d.decision.remedy;
  }
  // `--format env` must not unset NCCL_P2P_DISABLE, the setting that deadlocked.
  std::string env = env_of(tree, "6.16.3", &driver);
  EXPECT_EQ(env.find("unset NCCL_P2P_DISABLE"), std::string::npos) << env;
  EXPECT_NE(env.find("export NCCL_P2P_DISABLE=1"), std::string::npos) << env;

  // A copy of the pair verified on this machine passes the rule; a corrupt one still loses.
  auto verified = nccl2079_driver();
  copy_was(verified, "0000:41:00.0", "0000:61:00.0", "verified");
  expect_decision(decide(tree, "6.16.3", "41:00.0", "61:00.0", &verified), policy::Action::kPeer, "nvidia-driver-allows");
  expect_decision(decide(tree, "6.16.3", "61:00.0", "41:00.0", &verified), policy::Action::kHostStaged,
                  "nvidia-peer-through-translating-iommu");
  auto corrupt = nccl2079_driver();
  copy_was(corrupt, "0000:41:00.0", "0000:61:00.0", "corrupt");
  expect_decision(decide(tree, "6.16.3", "41:00.0", "61:00.0", &corrupt), policy::Action::kHostStaged, "copy-corrupt");

  // The documented fixes: passthrough or no IOMMU (with passthrough the kernel still sets the bits).
  for (const char* mode : {"passthrough", "off"}) {
    Tree fixed = nccl2079_tree(mode == std::string("off") ? 0 : kAcsSv | kAcsRr | kAcsCr | kAcsUf, mode);
    expect_decision(decide(fixed, "6.16.3", "41:00.0", "61:00.0", &driver), policy::Action::kPeer, "nvidia-driver-allows");
    EXPECT_NE(env_of(fixed, "6.16.3", &driver).find("unset NCCL_P2P_DISABLE"), std::string::npos);
  }
  // A snapshot that does not say how the IOMMU maps DMA cannot clear the pair: the driver's yes is
  // not acted on while the IOMMU rule may hold (uncertain, host_staged), and the IOMMU mode is named
  // as what settles it (`check` exits 3, not 0).
  auto unknown = decide(nccl2079_tree(kAcsSv | kAcsRr | kAcsCr | kAcsUf, ""), "6.16.3", "41:00.0", "61:00.0", &driver,
                        !kIommuAsCaptured);
  expect_decision(unknown, policy::Action::kHostStaged, "nvidia-peer-through-translating-iommu");
  EXPECT_FALSE(unknown.decision.certain());
  ASSERT_FALSE(unknown.decision.alternatives.empty());
  EXPECT_EQ(unknown.decision.alternatives[0].rule, "nvidia-driver-allows");
  const auto& could = unknown.decision.decisive_unknown_facts;
  EXPECT_NE(std::find(could.begin(), could.end(), "iommu.mode"), could.end());
  // In a VM the IOMMU the guest sees is not the host's (NVIDIA supports IOMMU via VM pass-through).
  Tree guest = nccl2079_tree(0);
  guest.t.platform.hypervisor = true;
  EXPECT_FALSE(fired_rule(decide(guest, "6.16.3", "41:00.0", "61:00.0", &driver), "nvidia-peer-through-translating-iommu"));
}

// Two AMD GPUs the kernel allows, with the IOMMU translating: amdgpu's own peer check takes the
// IOMMU into account, but the ROCm path above it hangs (AMD asks for iommu=pt on Instinct and on
// Radeon multi-GPU systems; ROCm/rccl#1129): staged, Instinct and Radeon alike.
TEST(PublicCasesPolicy, TranslatingIommuStagesAmdInstinctAndRadeonPairs) {
  Tree amd = amdgpu_redirect_log_tree();
  amd.t.platform.iommu_mode = "translated";
  policy::VendorFactsDocument hip;
  driver_says(hip, "0000:31:00.0", "0000:34:00.0", true, false, "vendor.xgmi");
  auto instinct = decide(amd, "6.0.0", "31:00.0", "34:00.0", &hip);
  expect_decision(instinct, policy::Action::kHostStaged, "amdgpu-peer-through-translating-iommu");
  EXPECT_EQ(source_of(instinct), "https://rocm.docs.amd.com/en/latest/conceptual/iommu.html");
  for (const char* gpu : {"31:00.0", "34:00.0"}) amd.t.functions[amd.index(gpu)].device = 0x744c;  // RX 7900 XTX
  auto radeon = decide(amd, "6.0.0", "31:00.0", "34:00.0", &hip);
  expect_decision(radeon, policy::Action::kHostStaged, "amdgpu-peer-through-translating-iommu");
  EXPECT_TRUE(fired_rule(radeon, "iommu-translating"));
  amd.t.platform.iommu_mode = "passthrough";  // the fix it names: the kernel's verdict stands
  expect_decision(decide(amd, "6.0.0", "31:00.0", "34:00.0", &hip), policy::Action::kPeer, "through-host-bridge");
}

// nccl304-plx-acs-gdr-crash: GPUDirect RDMA through PLX switch ports with ACSCtl SrcValid+
// ReqRedir+ CmpltRedir+ UpstreamFwd+ crashed nccl-tests; `setpci -s <plx port> f2a.w=0000` fixed
// it. The report gives no tree: one PLX switch with a GPU and a NIC below it is the least that
// shape needs. The root port, the PLX part (10b5:8796), the GPU (10de:1db4) and the NIC (15b3:1017,
// mlx5_core) are stand-ins, on a Sky Lake-E host the kernel whitelists, so that only ACS differs;
// the kernel release is not stated (5.15 unless said).
Tree nccl304_tree(uint16_t plx_acs) {
  Tree tree;
  tree.t.platform.cpu_model = 85;
  tree.host_dev(0x8086, 0x2020);
  tree.add("00:02.0", "", 0x8086, 0x2030, PcieType::kRootPort);
  tree.add("02:00.0", "00:02.0", 0x10b5, 0x8796, PcieType::kSwitchUpstream);
  tree.add("03:08.0", "02:00.0", 0x10b5, 0x8796, PcieType::kSwitchDownstream, plx_acs);
  tree.add("03:10.0", "02:00.0", 0x10b5, 0x8796, PcieType::kSwitchDownstream, plx_acs);
  tree.describe(tree.add("04:00.0", "03:08.0", 0x10de, 0x1db4, PcieType::kEndpoint), 0x030200, "nvidia");
  tree.describe(tree.add("05:00.0", "03:10.0", 0x15b3, 0x1017, PcieType::kEndpoint), 0x020700, "mlx5_core");
  return tree;
}

TEST(PublicCasesPolicy, Nccl304GpuDirectRdmaThroughRedirectingPlxPortsIsHostStaged) {
  Tree broken = nccl304_tree(kAcsSv | kAcsRr | kAcsCr | kAcsUf);
  EXPECT_EQ(verdict(broken, "5.15.0", "04:00.0", "05:00.0").map_type, MapType::kThruHostBridge);
  // The ports in the kernel's order: the provider's chain first.
  for (auto [p, c, ports] : {std::tuple{"04:00.0", "05:00.0", "0000:03:08.0;0000:03:10.0"},
                             std::tuple{"05:00.0", "04:00.0", "0000:03:10.0;0000:03:08.0"}}) {
    auto d = decide(broken, "5.15.0", p, c);
    expect_decision(d, policy::Action::kHostStaged, "nvidia-peer-through-acs-redirect");
    EXPECT_NE(d.decision.reason.find("NVIDIA/nccl#304"), std::string::npos) << d.decision.reason;
    EXPECT_NE(d.decision.remedy.find(std::string("pci=disable_acs_redir=") + ports), std::string::npos)
        << d.decision.remedy;
  }
  // On a kernel before 5.14 P2PDMA refuses a redirected pair outright; NVIDIA's driver never asks.
  expect_decision(decide(broken, "5.4.0", "04:00.0", "05:00.0"), policy::Action::kHostStaged,
                  "nvidia-peer-through-acs-redirect");
  // After f2a.w=0000 the switch keeps the traffic below it, and the rule no longer holds. GPUDirect
  // RDMA then ran, so NVIDIA's gate allowed it: stated here as the driver's defaults (override 0,
  // the peer-memory module loaded), which the report's era had no way to change.
  Tree fixed = nccl304_tree(0);
  fixed.t.platform.nvidia_grdma_override = 0;
  fixed.t.platform.nvidia_grdma_override_source = "stand-in: the driver's default";
  fixed.t.platform.nvidia_peermem_loaded = Known::kYes;
  EXPECT_EQ(verdict(fixed, "5.15.0", "04:00.0", "05:00.0").map_type, MapType::kBusAddr);
  auto d = decide(fixed, "5.15.0", "04:00.0", "05:00.0");
  EXPECT_EQ(d.decision.action, policy::Action::kPeer) << d.decision.rule;
  EXPECT_FALSE(fired_rule(d, "nvidia-peer-through-acs-redirect"));
  // A verified copy of the redirected pair passes the rule too.
  policy::VendorFactsDocument verified;
  copy_was(verified, "0000:04:00.0", "0000:05:00.0", "verified");
  Tree broken_known = broken;  // with the driver's defaults known, as in the fixed tree
  broken_known.t.platform.nvidia_grdma_override = 0;
  broken_known.t.platform.nvidia_grdma_override_source = "stand-in: the driver's default";
  broken_known.t.platform.nvidia_peermem_loaded = Known::kYes;
  auto v = decide(broken_known, "5.15.0", "04:00.0", "05:00.0", &verified);
  EXPECT_EQ(v.decision.action, policy::Action::kPeer) << v.decision.rule;
  EXPECT_FALSE(fired_rule(v, "nvidia-peer-through-acs-redirect"));
}

// rocm-smi110-radeonpro7-tr2950x-p2p-ok: two Radeon Pro VII (1002:66a1) at 0c:00.0 and 43:00.0 on
// the two dies of a Threadripper 2950X (family 17h, model 8; two host bridges), Inter-Device Access
// 1 both ways. The report gives no tree: each GPU directly below a root port of its die (00:01.1,
// 40:01.1 stand in).
TEST(PublicCasesPolicy, RadeonProViiAcrossThreadripperDiesStaysPeer) {
  Tree tree;
  tree.amd_zen(0x17);
  tree.t.platform.cpu_model = 8;
  for (auto [host, rp, gpu] : {std::tuple{"pci0000:00", "00:01.1", "0c:00.0"}, std::tuple{"pci0000:40", "40:01.1", "43:00.0"}}) {
    tree.add(rp, "", 0x1022, 0x1453, PcieType::kRootPort, std::nullopt, host);
    tree.describe(tree.add(gpu, rp, 0x1002, 0x66a1, PcieType::kEndpoint, std::nullopt, host), 0x038000, "amdgpu");
  }
  policy::VendorFactsDocument hip;
  driver_says(hip, "0000:0c:00.0", "0000:43:00.0", true, false, "vendor.xgmi");
  EXPECT_EQ(verdict(tree, "6.8.0", "0c:00.0", "43:00.0").map_type, MapType::kThruHostBridge);
  for (auto [p, c] : {std::pair{"0c:00.0", "43:00.0"}, std::pair{"43:00.0", "0c:00.0"}})
    expect_decision(decide(tree, "6.8.0", p, c, &hip), policy::Action::kPeer, "through-host-bridge");
}

// cuda-samples284-l4-cross-numa-p2p: two L4 (10de:27b8) on NUMA nodes 0 and 2 (topo SYS), simpleP2P:
// peer access Yes both ways, 19.87 GB/s, test passed. The CPU is not stated, so it stays unknown;
// each GPU directly below a root port of its own host bridge (addresses are stand-ins).
TEST(PublicCasesPolicy, L4PairAcrossNumaNodesStaysPeerOnTheDriversYes) {
  Tree tree;
  tree.t.platform.cpu_vendor.clear();
  tree.t.platform.cpu_family.reset();
  for (auto [host, rp, gpu, node] : {std::tuple{"pci0000:00", "00:01.0", "01:00.0", 0},
                                     std::tuple{"pci0000:80", "80:01.0", "81:00.0", 2}}) {
    tree.add(rp, "", 0x8086, 0x7000, PcieType::kRootPort, std::nullopt, host);
    tree.describe(tree.add(gpu, rp, 0x10de, 0x27b8, PcieType::kEndpoint, std::nullopt, host), 0x030200, "nvidia");
    tree.t.functions.back().numa_node = node;
  }
  policy::VendorFactsDocument driver;
  driver_says(driver, "0000:01:00.0", "0000:81:00.0", true);
  for (auto [p, c] : {std::pair{"01:00.0", "81:00.0"}, std::pair{"81:00.0", "01:00.0"}}) {
    auto d = decide(tree, "6.5.0", p, c, &driver);
    expect_decision(d, policy::Action::kPeer, "nvidia-driver-allows");
    EXPECT_TRUE(fired_rule(d, "different-numa-nodes"));
  }
}

// nccl606-4gpu-amd-switch-gpu23-hang: four GPUs below an AMD PCIe switch whose ports show ACSCtl
// SrcValid+ and nothing else; NCCL hung between GPU2 and GPU3 every time, every other pair worked.
// SrcValid alone redirects nothing, so no ACS rule may fire; the hang of GPU2<->GPU3 is a measured
// failure of that pair (vendor.copy_result failed), and the other pairs stay peer on the driver's
// yes. The GPUs' model and the switch's IDs are not in the report: 10de:2204 and 1022:57ad/57a3
// stand in, on an AMD Zen 2 host (an AMD chipset switch).
TEST(PublicCasesPolicy, Nccl606SrcValidAloneIsNoRedirectAndTheHungPairIsHostStaged) {
  Tree tree;
  tree.amd_zen(0x17);
  tree.add("00:01.1", "", 0x1022, 0x1483, PcieType::kRootPort, kAcsSv);
  tree.add("01:00.0", "00:01.1", 0x1022, 0x57ad, PcieType::kSwitchUpstream);
  const char* ports[] = {"02:01.0", "02:02.0", "02:03.0", "02:04.0"};
  const char* gpus[] = {"03:00.0", "04:00.0", "05:00.0", "06:00.0"};
  for (const char* port : ports) tree.add(port, "01:00.0", 0x1022, 0x57a3, PcieType::kSwitchDownstream, kAcsSv);
  for (int i = 0; i < 4; ++i)
    tree.describe(tree.add(gpus[i], ports[i], 0x10de, 0x2204, PcieType::kEndpoint), 0x030000, "nvidia");
  policy::VendorFactsDocument facts;
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b) driver_says(facts, std::string("0000:") + gpus[a], std::string("0000:") + gpus[b], true);
  copy_was(facts, "0000:05:00.0", "0000:06:00.0", "failed");
  copy_was(facts, "0000:06:00.0", "0000:05:00.0", "failed");
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      auto d = decide(tree, "5.11.0", gpus[a], gpus[b], &facts);
      EXPECT_FALSE(std::get<bool>(*d.facts.get("kernel.acs_redirect"))) << gpus[a] << " " << gpus[b];
      EXPECT_EQ(d.verdict.map_type, MapType::kBusAddr);
      if ((a == 2 && b == 3) || (a == 3 && b == 2)) expect_decision(d, policy::Action::kHostStaged, "copy-failed");
      else expect_decision(d, policy::Action::kPeer, "nvidia-driver-allows");
    }
}

// nccl19-supermicro-7048gr-k80-plx: SYS-7048GR-TR, three K80 (GK210, 10de:102d), each with its own
// PEX 8747 (03:00.0 -> 04:08.0/04:10.0, 82:00.0 -> 83:08.0/83:10.0, 86:00.0 -> 87:08.0/87:10.0), GPUs
// 0-1 on socket 0, 2-5 on socket 1 (topo PIX within a card, PHB between cards, SOC across sockets),
// no NVLink (the matrix shows none). The thread checked ACS on the PLX ports; their values are not
// in it, so both states are tested. The root ports (00:02.0, 80:02.0, 80:03.0) are stand-ins, the
// GPU addresses follow the report's "[0x06]", "[0x85]", "[0x89]".
Tree k80_tree(std::optional<uint16_t> plx_acs) {
  Tree tree;
  auto card = [&](const char* host, const char* rp, const char* usp, const char* d1, const char* d2, const char* g1,
                  const char* g2, int node) {
    tree.add(usp, rp, 0x10b5, 0x8747, PcieType::kSwitchUpstream, std::nullopt, host);
    tree.add(d1, usp, 0x10b5, 0x8747, PcieType::kSwitchDownstream, plx_acs, host);
    tree.add(d2, usp, 0x10b5, 0x8747, PcieType::kSwitchDownstream, plx_acs, host);
    for (const char* g : {g1, g2}) {
      tree.describe(tree.add(g, g == g1 ? d1 : d2, 0x10de, 0x102d, PcieType::kEndpoint, std::nullopt, host), 0x030200,
                    "nvidia");
      tree.t.functions.back().numa_node = node;
    }
  };
  tree.host_dev(0x8086, 0x2f00);
  tree.add("00:02.0", "", 0x8086, 0x2f04, PcieType::kRootPort);
  card("pci0000:00", "00:02.0", "03:00.0", "04:08.0", "04:10.0", "05:00.0", "06:00.0", 0);
  tree.host_dev(0x8086, 0x2f00, "pci0000:80", "80:00.0");
  tree.add("80:02.0", "", 0x8086, 0x2f04, PcieType::kRootPort, std::nullopt, "pci0000:80");
  tree.add("80:03.0", "", 0x8086, 0x2f08, PcieType::kRootPort, std::nullopt, "pci0000:80");
  card("pci0000:80", "80:02.0", "82:00.0", "83:08.0", "83:10.0", "84:00.0", "85:00.0", 1);
  card("pci0000:80", "80:03.0", "86:00.0", "87:08.0", "87:10.0", "88:00.0", "89:00.0", 1);
  return tree;
}

TEST(PublicCasesPolicy, K80PairsBelowTheirPex8747AreStagedWhileItsPortsRedirect) {
  policy::VendorFactsDocument topo;  // nvidia-smi topo: no NV# between any two GPUs
  const char* gpus[] = {"05:00.0", "06:00.0", "84:00.0", "85:00.0", "88:00.0", "89:00.0"};
  for (int a = 0; a < 6; ++a)
    for (int b = a + 1; b < 6; ++b)
      for (auto [p, c] : {std::pair{gpus[a], gpus[b]}, std::pair{gpus[b], gpus[a]}})
        topo.pairs[{*Bdf::parse(std::string("0000:") + p), *Bdf::parse(std::string("0000:") + c)}].set("vendor.nvlink", false);
  // The driver's per-pair answer is not in the thread: its rule says so and stages, in both states.
  for (std::optional<uint16_t> acs : {std::optional<uint16_t>(kRedirect), std::optional<uint16_t>(uint16_t{0})})
    for (auto [p, c] : {std::pair{"05:00.0", "06:00.0"}, std::pair{"84:00.0", "88:00.0"}, std::pair{"05:00.0", "89:00.0"}})
      expect_decision(decide(k80_tree(acs), "4.4.0", p, c, &topo), policy::Action::kHostStaged, "nvidia-driver-unknown");
  // Had the driver said yes for a card's two GPUs (PIX, PLX 87xx above both, which NVIDIA's driver
  // recognises), the ports' redirect would overrule it, and clearing it would let the yes stand.
  policy::VendorFactsDocument yes = topo;
  driver_says(yes, "0000:05:00.0", "0000:06:00.0", true);
  auto pix = decide(k80_tree(kRedirect), "4.4.0", "05:00.0", "06:00.0", &yes);
  expect_decision(pix, policy::Action::kHostStaged, "nvidia-peer-through-acs-redirect");
  EXPECT_NE(pix.decision.remedy.find("pci=disable_acs_redir=0000:04:08.0;0000:04:10.0"), std::string::npos)
      << pix.decision.remedy;
  EXPECT_TRUE(std::get<bool>(*pix.facts.get("vendor.nvidia_common_switch")));
  expect_decision(decide(k80_tree(uint16_t{0}), "4.4.0", "05:00.0", "06:00.0", &yes), policy::Action::kPeer,
                  "nvidia-driver-allows");
  EXPECT_FALSE(std::get<bool>(*decide(k80_tree(uint16_t{0}), "4.4.0", "84:00.0", "88:00.0", &topo)
                                   .facts.get("vendor.nvidia_common_switch")));
}

// rocm787-wx8100-x99-broadwell-no-peer: two Radeon PRO WX 8100 (1002:6868) at 07:00.0 and 0d:00.0
// on CPU root ports of an i7-6900K (Broadwell-E, host bridge 8086:6f00), kernel 4.15, ROCm 2.3:
// Device Access 0. The root ports (00:02.0, 00:03.0; 8086:6f04/6f08) are stand-ins. ROCm 2.3 used
// its own peer rules then; what the policy can say of that kernel is that it has no P2PDMA at all.
TEST(PublicCasesPolicy, WX8100PairOnX99IsNotPeer) {
  Tree tree;
  tree.t.platform.cpu_model = 79;
  tree.host_dev(0x8086, 0x6f00);
  tree.add("00:02.0", "", 0x8086, 0x6f04, PcieType::kRootPort);
  tree.add("00:03.0", "", 0x8086, 0x6f08, PcieType::kRootPort);
  tree.describe(tree.add("07:00.0", "00:02.0", 0x1002, 0x6868, PcieType::kEndpoint), 0x030000, "amdgpu");
  tree.describe(tree.add("0d:00.0", "00:03.0", 0x1002, 0x6868, PcieType::kEndpoint), 0x030000, "amdgpu");
  policy::VendorFactsDocument rocm;
  driver_says(rocm, "0000:07:00.0", "0000:0d:00.0", false, false, "vendor.xgmi");
  for (auto [p, c] : {std::pair{"07:00.0", "0d:00.0"}, std::pair{"0d:00.0", "07:00.0"}}) {
    auto d = decide(tree, "4.15.0-48-generic", p, c, &rocm);
    EXPECT_EQ(d.decision.action, policy::Action::kHostStaged) << d.decision.rule;
    EXPECT_EQ(d.decision.rule, "kernel-refuses") << d.decision.reason;
    EXPECT_NE(d.decision.reason.find("has no P2PDMA"), std::string::npos) << d.decision.reason;
  }
}

}  // namespace
// The same trees as their reports give them, with the IOMMU mode unknown: what the IOMMU does to
// peer traffic can decide (NVIDIA and AMD Instinct peers under translation), so an NVIDIA pair the
// driver allows is uncertain and staged, and says that iommu.mode settles it; a pair the kernel
// alone decides (xe) is a plain peer, since nothing unknown can change it.
TEST(PublicCasesPolicy, WorkedReportsWithoutTheIommuModeAreUncertainOnlyWhereItCanDecide) {
  Tree tree;
  for (auto [host, rp, gpu] : {std::tuple{"pci0000:00", "00:01.0", "01:00.0"}, std::tuple{"pci0000:80", "80:01.0", "81:00.0"}}) {
    tree.add(rp, "", 0x8086, 0x7000, PcieType::kRootPort, std::nullopt, host);
    tree.describe(tree.add(gpu, rp, 0x10de, 0x27b8, PcieType::kEndpoint, std::nullopt, host), 0x030200, "nvidia");
  }
  policy::VendorFactsDocument driver;
  driver_says(driver, "0000:01:00.0", "0000:81:00.0", true);
  auto d = decide(tree, "6.5.0", "01:00.0", "81:00.0", &driver, !kIommuAsCaptured);
  EXPECT_EQ(d.decision.action, policy::Action::kHostStaged) << d.decision.rule;
  EXPECT_FALSE(d.decision.certain());
  EXPECT_EQ(d.decision.rule, "nvidia-peer-through-translating-iommu");
  EXPECT_EQ(d.decision.decisive_unknown_facts, std::vector<std::string>{"iommu.mode"});
  ASSERT_EQ(d.decision.alternatives.size(), 1u);
  EXPECT_EQ(d.decision.alternatives[0].rule, "nvidia-driver-allows");
  auto known = decide(tree, "6.5.0", "01:00.0", "81:00.0", &driver);
  EXPECT_EQ(known.decision.action, policy::Action::kPeer);
  EXPECT_TRUE(known.decision.certain());

  auto xe = decide(b70_pair_on_root_ports(0x1022, 0x14d8, "00:06.0", 0x1a), "6.14.0", "03:00.0", "07:00.0", nullptr,
                   !kIommuAsCaptured);
  EXPECT_EQ(xe.decision.action, policy::Action::kPeer) << xe.decision.rule << ": " << xe.decision.reason;
  EXPECT_TRUE(xe.decision.certain());
}

}  // namespace p2paudit
