// Public P2P reports with ground truth (shared/fixtures/public-cases, see each case's SOURCE.md):
// the trees are rebuilt from what the reports state, and the verdict must match what the
// reporter's kernel said or did.
#include <gtest/gtest.h>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
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

}  // namespace
}  // namespace p2paudit
