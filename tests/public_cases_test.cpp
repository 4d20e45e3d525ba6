// SPDX-License-Identifier: GPL-2.0-or-later
// Public P2P reports with ground truth (shared/fixtures/public-cases, see each case's SOURCE.md):
// the trees are rebuilt from what the reports state, and the verdict must match what the
// reporter's kernel said or did.
#include <gtest/gtest.h>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
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
  tree.describe(tree.add(gpu, dsp, 0x8086, 0xe223, PcieType::kEndpoint), 0x030000, "xe");
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

policy::PairDecision decide(const Tree& tree, const std::string& release, const std::string& p, const std::string& c,
                            const policy::VendorFactsDocument* facts = nullptr) {
  Topology t = tree.t;
  t.platform.kernel_release = release;
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
  tree.describe(tree.add("0d:00.0", "0c:00.0", 0x1002, 0x66af, PcieType::kEndpoint), 0x030000, "amdgpu");
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

}  // namespace
}  // namespace p2paudit
