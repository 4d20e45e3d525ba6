// SPDX-License-Identifier: GPL-2.0-or-later
// The default policy's failure-shape rules (rules/policy/default.yaml, after the fabric rules):
// where they hold on trees, and that on pairs that are not theirs they are false rather than open
// questions. The public reports behind them are rebuilt in
// public_cases_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/evaluate.h"
#include "synthetic_tree.h"

namespace p2paudit {
namespace {

using test::Tree;

const char* const kShapeRules[] = {"nvidia-peer-through-translating-iommu", "nvidia-peer-through-acs-redirect",
                                   "nvidia-peer-in-vm-without-clique", "nvidia-vm-clique-between-gpu-models"};

policy::PairDecision decide(const Tree& tree, const std::string& p, const std::string& c,
                            const policy::VendorFactsDocument* facts = nullptr) {
  Topology t = tree.t;
  t.platform.kernel_release = "6.8.0";
  KernelRules rules = load_kernel_rules(std::filesystem::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", t.platform, {});
  static const auto policy_rules = policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  return policy::decide_pair(t, rules, policy_rules, facts, tree.index(p), tree.index(c));
}

// NVIDIA's answer for both directions: peer access yes, no NVLink (a PCIe pair).
policy::VendorFactsDocument driver_yes(const std::string& a, const std::string& b) {
  policy::VendorFactsDocument doc;
  for (auto [p, c] : {std::pair{a, b}, std::pair{b, a}}) {
    auto& f = doc.pairs[{*Bdf::parse(p), *Bdf::parse(c)}];
    f.set("vendor.peer_supported", true);
    f.set("vendor.nvlink", false);
  }
  return doc;
}

// Two GPUs of a VM, each on a root port of the guest's host bridge; `clique` the peer-clique
// capability each carries (nullopt: none).
Tree vm_pair(uint16_t second_device, std::optional<uint8_t> clique_a, std::optional<uint8_t> clique_b) {
  Tree tree;
  tree.t.platform.hypervisor = true;
  tree.rp("00:02.0");
  tree.rp("00:03.0");
  uint16_t devices[] = {0x2330, second_device};
  std::optional<uint8_t> cliques[] = {clique_a, clique_b};
  const char* gpus[] = {"01:00.0", "02:00.0"};
  const char* ports[] = {"00:02.0", "00:03.0"};
  for (int i = 0; i < 2; ++i) {
    Function& g = tree.describe(tree.add(gpus[i], ports[i], 0x10de, devices[i], PcieType::kEndpoint), 0x030200, "nvidia");
    g.nvidia_clique_state = cliques[i] ? CapState::kPresent : CapState::kAbsent;
    g.nvidia_clique = cliques[i].value_or(0);
  }
  return tree;
}

TEST(FailureShapes, NvidiaGpusInAVmWithoutACommonCliqueAreHostStaged) {
  auto yes = driver_yes("0000:01:00.0", "0000:02:00.0");
  auto none = decide(vm_pair(0x2330, std::nullopt, std::nullopt), "01:00.0", "02:00.0", &yes);
  EXPECT_EQ(none.decision.action, policy::Action::kHostStaged);
  EXPECT_EQ(none.decision.rule, "nvidia-peer-in-vm-without-clique");
  EXPECT_NE(none.decision.remedy.find("x-nv-gpudirect-clique"), std::string::npos) << none.decision.remedy;
  // A driver's own "no" stays its own.
  auto no = yes;
  for (auto& [pair, f] : no.pairs) f.set("vendor.peer_supported", false);
  EXPECT_EQ(decide(vm_pair(0x2330, std::nullopt, std::nullopt), "01:00.0", "02:00.0", &no).decision.rule,
            "nvidia-driver-refuses");
  // Different clique IDs are no common clique either.
  EXPECT_EQ(decide(vm_pair(0x2330, 1, 2), "01:00.0", "02:00.0", &yes).decision.rule, "nvidia-peer-in-vm-without-clique");
  // One clique, one model: the driver's yes stands; unasked, its clique approval is predicted.
  auto clique = decide(vm_pair(0x2330, 3, 3), "01:00.0", "02:00.0", &yes);
  EXPECT_EQ(clique.decision.action, policy::Action::kPeer);
  EXPECT_EQ(clique.decision.rule, "nvidia-driver-allows");
  EXPECT_EQ(decide(vm_pair(0x2330, 3, 3), "01:00.0", "02:00.0").decision.rule, "nvidia-vm-peer-clique");
  // One clique, two models: the clique skips the driver's same-chip check.
  auto models = decide(vm_pair(0x26b5, 3, 3), "01:00.0", "02:00.0", &yes);
  EXPECT_EQ(models.decision.action, policy::Action::kHostStaged);
  EXPECT_EQ(models.decision.rule, "nvidia-vm-clique-between-gpu-models");
  // Without the runtime's word on NVLink the path may not be PCIe: the driver-unknown rule stages.
  EXPECT_EQ(decide(vm_pair(0x2330, std::nullopt, std::nullopt), "01:00.0", "02:00.0").decision.rule,
            "nvidia-driver-unknown");
  // A verified copy of the pair passes the VM rule.
  yes.pairs[{*Bdf::parse("0000:01:00.0"), *Bdf::parse("0000:02:00.0")}].set("vendor.copy_verified", true);
  yes.pairs[{*Bdf::parse("0000:01:00.0"), *Bdf::parse("0000:02:00.0")}].set("vendor.copy_result", std::string("verified"));
  auto verified = decide(vm_pair(0x2330, std::nullopt, std::nullopt), "01:00.0", "02:00.0", &yes);
  EXPECT_EQ(verified.decision.action, policy::Action::kPeer) << verified.decision.rule;
}

// Two NVIDIA GPUs on root ports of different host bridges, or below one switch.
Tree nvidia_pair(bool below_switch, std::optional<uint16_t> acs) {
  Tree tree;
  tree.amd_zen();
  tree.t.platform.iommu_mode = "off";  // as a capture shows it; the tests below set other modes
  tree.t.platform.iommu_mode_source = "test";
  if (below_switch) {
    tree.add("00:01.1", "", 0x1022, 0x1483, PcieType::kRootPort, acs);
    tree.add("01:00.0", "00:01.1", 0x10b5, 0x8796, PcieType::kSwitchUpstream);
    tree.add("02:08.0", "01:00.0", 0x10b5, 0x8796, PcieType::kSwitchDownstream, acs);
    tree.add("02:10.0", "01:00.0", 0x10b5, 0x8796, PcieType::kSwitchDownstream, acs);
    tree.describe(tree.add("03:00.0", "02:08.0", 0x10de, 0x2684, PcieType::kEndpoint), 0x030000, "nvidia");
    tree.describe(tree.add("04:00.0", "02:10.0", 0x10de, 0x2684, PcieType::kEndpoint), 0x030000, "nvidia");
    return tree;
  }
  tree.add("00:01.1", "", 0x1022, 0x1483, PcieType::kRootPort, acs);
  tree.describe(tree.add("03:00.0", "00:01.1", 0x10de, 0x2684, PcieType::kEndpoint), 0x030000, "nvidia");
  tree.add("40:01.1", "", 0x1022, 0x1483, PcieType::kRootPort, acs, "pci0000:40");
  tree.describe(tree.add("41:00.0", "40:01.1", 0x10de, 0x2684, PcieType::kEndpoint, std::nullopt, "pci0000:40"),
                0x030000, "nvidia");
  return tree;
}

TEST(FailureShapes, AcsRedirectCountsBelowACommonSwitchOnly) {
  const uint16_t kernel_default = kAcsSv | kAcsRr | kAcsCr | kAcsUf;  // what the kernel sets once an IOMMU asks
  auto yes = driver_yes("0000:03:00.0", "0000:04:00.0");
  auto below = decide(nvidia_pair(true, kernel_default), "03:00.0", "04:00.0", &yes);
  EXPECT_EQ(below.decision.rule, "nvidia-peer-through-acs-redirect");
  EXPECT_NE(below.decision.remedy.find("pci=disable_acs_redir=0000:02:08.0;0000:02:10.0"), std::string::npos)
      << below.decision.remedy;
  EXPECT_NE(below.decision.reason.find("0000:02:08.0, 0000:02:10.0"), std::string::npos) << below.decision.reason;
  // SrcValid and UpstreamFwd alone redirect nothing.
  EXPECT_EQ(decide(nvidia_pair(true, kAcsSv | kAcsUf), "03:00.0", "04:00.0", &yes).decision.rule, "nvidia-driver-allows");
  // Between root ports the traffic crosses the root complex anyway: the ports' bits add nothing
  // while the IOMMU passes DMA through; translating, the IOMMU rule decides.
  auto across_yes = driver_yes("0000:03:00.0", "0000:41:00.0");
  Tree across = nvidia_pair(false, kernel_default);
  across.t.platform.iommu_mode = "passthrough";
  EXPECT_EQ(decide(across, "03:00.0", "41:00.0", &across_yes).decision.rule, "nvidia-driver-allows");
  across.t.platform.iommu_mode = "translated";
  EXPECT_EQ(decide(across, "03:00.0", "41:00.0", &across_yes).decision.rule, "nvidia-peer-through-translating-iommu");
  // A port whose ACS could not be read leaves the rule open, not false.
  Tree unreadable = nvidia_pair(true, std::nullopt);
  unreadable.t.functions[unreadable.index("02:10.0")].acs.state = CapState::kUnknown;
  auto open = decide(unreadable, "03:00.0", "04:00.0", &yes);
  EXPECT_NE(std::find(open.decision.undecided_rules.begin(), open.decision.undecided_rules.end(),
                      "nvidia-peer-through-acs-redirect"),
            open.decision.undecided_rules.end());
}

// An NVMe drive, a NIC and an NVIDIA GPU below one switch, with everything the shape rules read
// unknown (no CPU, ACS unreadable): on the NVMe<->NIC and NVMe<->GPU pairs each shape rule is false,
// never undecided; on the NIC<->GPU pair the ACS rule is the open question it should be.
TEST(FailureShapes, RulesAreFalseNotOpenOnPairsThatAreNotTheirs) {
  Tree tree;
  tree.t.platform.cpu_vendor.clear();
  tree.t.platform.cpu_family.reset();
  tree.t.platform.hypervisor = true;
  tree.rp("00:01.0");
  tree.add("01:00.0", "00:01.0", 0x10b5, 0x8796, PcieType::kSwitchUpstream);
  tree.add("02:01.0", "01:00.0", 0x10b5, 0x8796, PcieType::kSwitchDownstream);
  tree.add("02:02.0", "01:00.0", 0x10b5, 0x8796, PcieType::kSwitchDownstream);
  tree.add("02:03.0", "01:00.0", 0x10b5, 0x8796, PcieType::kSwitchDownstream);
  tree.describe(tree.ep("03:00.0", "02:01.0"), 0x010802, "nvme");
  tree.describe(tree.add("04:00.0", "02:02.0", 0x15b3, 0x101d, PcieType::kEndpoint), 0x020000, "mlx5_core");
  tree.describe(tree.add("05:00.0", "02:03.0", 0x10de, 0x2330, PcieType::kEndpoint), 0x030200, "nvidia");
  for (auto& f : tree.t.functions) f.acs.state = CapState::kUnknown;
  for (auto [p, c] : {std::pair{"03:00.0", "04:00.0"}, std::pair{"04:00.0", "03:00.0"}, std::pair{"03:00.0", "05:00.0"},
                      std::pair{"05:00.0", "03:00.0"}}) {
    auto d = decide(tree, p, c);
    for (const char* rule : kShapeRules) {
      const auto& open = d.decision.undecided_rules;
      EXPECT_EQ(std::find(open.begin(), open.end(), rule), open.end()) << rule << " undecided for " << p << " " << c;
    }
  }
  auto gdr = decide(tree, "05:00.0", "04:00.0");
  const auto& open = gdr.decision.undecided_rules;
  EXPECT_NE(std::find(open.begin(), open.end(), "nvidia-peer-through-acs-redirect"), open.end());
}

}  // namespace
}  // namespace p2paudit
