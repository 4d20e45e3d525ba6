// SPDX-License-Identifier: GPL-2.0-or-later
// The P2PDMA decision on synthetic trees built in code, one rule per test, across kernel eras.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "synthetic_tree.h"

namespace p2paudit {
namespace {

using test::Tree;

constexpr uint16_t kRr = kAcsRr | kAcsCr;

KernelRules rules_for(const Tree& tree, const std::string& release, std::vector<std::string> assume = {}) {
  Platform platform = tree.t.platform;
  platform.kernel_release = release;
  return load_kernel_rules(std::filesystem::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", platform,
                           {"", {}, std::move(assume)});
}

PairVerdict verdict(const Tree& tree, const std::string& release, const std::string& p, const std::string& c,
                    std::vector<std::string> assume = {}) {
  KernelRules rules = rules_for(tree, release, std::move(assume));
  return pci_p2pdma_distance(tree.t, rules, tree.index(p), tree.index(c));
}

const char* map(const PairVerdict& v) { return to_string(v.map_type); }

std::string not_shared(const std::string& client_log, const std::string& provider) {
  return fmt::format("{}: cannot be used for peer-to-peer DMA as the client and provider ({}) do not share an "
                     "upstream bridge or whitelisted host bridge", client_log, provider);
}

// q35-like: host bridge 8086:29c0 at 00.0 (not whitelisted), a Root Port with a switch below it.
Tree switch_tree(std::optional<uint16_t> dsp0_acs = std::nullopt) {
  Tree tree;
  tree.host_dev(0x8086, 0x29c0);
  tree.rp("00:01.0");
  tree.add("01:00.0", "00:01.0", 0x10b5, 0x8747, PcieType::kSwitchUpstream);
  tree.add("02:00.0", "01:00.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream, dsp0_acs);
  tree.add("02:01.0", "01:00.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream);
  tree.ep("03:00.0", "02:00.0");
  tree.ep("04:00.0", "02:01.0");
  return tree;
}

TEST(P2pdma, SameFunctionIsBusAddrAtDistanceZero) {
  Tree tree = switch_tree();
  auto v = verdict(tree, "6.1.192", "03:00.0", "03:00.0");
  EXPECT_STREQ(map(v), "BUS_ADDR");
  EXPECT_EQ(v.distance, 0);
  EXPECT_EQ(v.p2pdma_distance, 0);
  EXPECT_TRUE(v.kernel_log.empty());
}

TEST(P2pdma, BelowOneSwitchIsBusAddrAtDistanceFour) {
  Tree tree = switch_tree();
  for (const char* release : {"4.20", "5.4", "5.15", "6.1", "7.3-rc7"}) {
    auto v = verdict(tree, release, "03:00.0", "04:00.0");
    EXPECT_STREQ(map(v), "BUS_ADDR") << release;
    EXPECT_EQ(v.distance, 4) << release;
    EXPECT_EQ(v.p2pdma_distance, 4) << release;
    EXPECT_EQ(v.common_ancestor, tree.index("01:00.0")) << release;
    EXPECT_EQ(v.acs_tests.size(), 5u) << release;  // A, DSP0, USP, then B, DSP1
  }
}

TEST(P2pdma, AcsRedirectOnThePathGoesThroughTheHostBridge) {
  Tree tree = switch_tree(kAcsRr);
  auto v = verdict(tree, "6.1", "03:00.0", "04:00.0");
  EXPECT_STREQ(map(v), "NOT_SUPPORTED");
  EXPECT_EQ(v.distance, 4);
  EXPECT_EQ(v.p2pdma_distance, -1);
  EXPECT_EQ(v.remedy.disable_acs_redir, "0000:02:00.0");
  std::vector<std::string> log = {
      "pci 0000:04:00.0: ACS redirect is set between the client and provider (0000:03:00.0)",
      "pci 0000:04:00.0: to disable ACS redirect for this path, add the kernel parameter: "
      "pci=disable_acs_redir=0000:02:00.0",
      "pci 0000:00:00.0: Host bridge not in P2PDMA whitelist: 8086:29c0",
      not_shared("pci 0000:04:00.0", "0000:03:00.0")};
  EXPECT_EQ(v.kernel_log, log);
  // Not gated by verbose: a quiet call prints the whitelist line too.
  EXPECT_EQ(v.quiet_log, std::vector<std::string>{log[2]});
  // 5.4-5.13 had no whitelist warning.
  auto v510 = verdict(tree, "5.10", "03:00.0", "04:00.0");
  EXPECT_EQ(v510.kernel_log, (std::vector<std::string>{log[0], log[1], log[3]}));
  EXPECT_TRUE(v510.quiet_log.empty());
}

TEST(P2pdma, AcsOnTheEndpointItselfCounts) {
  Tree tree = switch_tree();
  tree.t.functions[tree.index("04:00.0")].acs = {CapState::kPresent, 0x100, 0x7f, kAcsEc};
  tree.t.functions[tree.index("04:00.0")].driver = "nvme";
  auto v = verdict(tree, "6.1", "03:00.0", "04:00.0");
  EXPECT_STREQ(map(v), "NOT_SUPPORTED");
  EXPECT_EQ(v.kernel_log.at(0),
            "nvme 0000:04:00.0: ACS redirect is set between the client and provider (0000:03:00.0)");
  EXPECT_EQ(v.remedy.disable_acs_redir, "0000:04:00.0");
}

TEST(P2pdma, AcsBitsOtherThanRrCrEcAreIgnored) {
  Tree tree = switch_tree(kAcsSv | kAcsTb | kAcsUf | kAcsDt);
  EXPECT_STREQ(map(verdict(tree, "6.1", "03:00.0", "04:00.0")), "BUS_ADDR");
}

TEST(P2pdma, AcsOnTheCommonAncestorIsTested) {
  Tree tree;
  tree.host_dev(0x8086, 0x29c0);
  tree.rp("00:01.0", kRr);
  tree.ep("01:00.0", "00:01.0");
  tree.ep("01:00.1", "00:01.0");
  auto v = verdict(tree, "6.1", "01:00.0", "01:00.1");
  EXPECT_EQ(v.common_ancestor, tree.index("00:01.0"));
  EXPECT_STREQ(map(v), "NOT_SUPPORTED");
  EXPECT_EQ(v.distance, 2);
  EXPECT_EQ(v.remedy.disable_acs_redir, "0000:00:01.0");
  tree.amd_zen();  // the CPU rule allows it; the ACS lines are still printed
  v = verdict(tree, "6.1", "01:00.0", "01:00.1");
  EXPECT_STREQ(map(v), "THRU_HOST_BRIDGE");
  EXPECT_EQ(v.p2pdma_distance, 2);
  EXPECT_EQ(v.kernel_log.size(), 2u);
}

TEST(P2pdma, MultifunctionEndpointWithoutAcsIsBusAddr) {
  Tree tree;
  tree.host_dev(0x8086, 0x29c0);
  tree.rp("00:01.0");
  tree.ep("01:00.0", "00:01.0");
  tree.ep("01:00.1", "00:01.0");
  auto v = verdict(tree, "6.1", "01:00.0", "01:00.1");
  EXPECT_STREQ(map(v), "BUS_ADDR");
  EXPECT_EQ(v.distance, 2);
}

TEST(P2pdma, VirtualFunctionsGoUpFromTheirPfsBridge) {
  Tree tree;
  tree.host_dev(0x8086, 0x29c0);
  tree.rp("00:01.0");
  tree.ep("01:00.0", "00:01.0", kRr);  // the PF redirects: never on a VF's chain
  tree.vf("01:00.1", "01:00.0");
  tree.vf("01:00.2", "01:00.0");
  EXPECT_EQ(pci_upstream_bridge(tree.t, tree.index("01:00.1")), tree.index("00:01.0"));
  auto v = verdict(tree, "6.1", "01:00.1", "01:00.2");
  EXPECT_EQ(v.provider_chain, (std::vector<size_t>{tree.index("01:00.1"), tree.index("00:01.0")}));
  EXPECT_STREQ(map(v), "BUS_ADDR");
  EXPECT_EQ(v.distance, 2);
  auto pf = verdict(tree, "6.1", "01:00.1", "01:00.0");  // the PF is the client: tested
  EXPECT_STREQ(map(pf), "NOT_SUPPORTED");
  EXPECT_EQ(pf.distance, 2);
}

TEST(P2pdma, RootBusDevicesShareNoUpstreamBridge) {
  Tree tree;
  tree.host_dev(0x8086, 0x29c0);
  tree.add("00:02.0", "", 0x10de, 0x2335, PcieType::kRcIntegratedEndpoint, kRr);
  tree.add("00:03.0", "", 0x10de, 0x2335, PcieType::kRcIntegratedEndpoint, kRr);
  auto v = verdict(tree, "6.1", "00:02.0", "00:03.0");
  EXPECT_FALSE(v.common_ancestor);
  EXPECT_FALSE(v.acs_considered);
  EXPECT_STREQ(map(v), "NOT_SUPPORTED");
  EXPECT_EQ(v.distance, 2);
  // ACS is not consulted on this path: no ACS lines and no whitelist warning.
  EXPECT_EQ(v.kernel_log, std::vector<std::string>{not_shared("pci 0000:00:03.0", "0000:00:02.0")});
  EXPECT_TRUE(v.remedy.disable_acs_redir.empty());
  EXPECT_EQ(v.remedy.whitelist, "host bridge 8086:29c0 is not in this kernel's whitelist");
  tree.amd_zen(0x17);
  EXPECT_STREQ(map(verdict(tree, "6.1", "00:02.0", "00:03.0")), "THRU_HOST_BRIDGE");
}

// Two Root Ports below one host bridge whose first device is VVVV:DDDD at `devfn`.
Tree two_root_ports(uint16_t vendor, uint16_t device, const std::string& first = "00:00.0",
                    PcieType first_type = PcieType::kNotPcie) {
  Tree tree;
  tree.add(first, "", vendor, device, first_type);
  tree.rp("00:1c.0");
  tree.rp("00:1d.0");
  tree.ep("01:00.0", "00:1c.0");
  tree.ep("02:00.0", "00:1d.0");
  return tree;
}

TEST(P2pdma, EveryWhitelistEntryFromItsFirstRelease) {
  KernelRuleData data = load_kernel_rule_data(std::filesystem::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel");
  for (const auto& e : data.whitelist) {
    Tree tree = two_root_ports(e.vendor, e.device.value_or(0x1234));
    tree.t.platform.iommu_groups_present = true;  // keeps 5.2-5.3's AMD ZEN rule out of 1022:1450's "before"
    const KernelRelease& added = *e.releases.added;
    std::string before = fmt::format("{}.{}", added.major, added.minor - 1);
    auto on = verdict(tree, added.version(), "01:00.0", "02:00.0");
    EXPECT_STREQ(map(on), "THRU_HOST_BRIDGE") << e.id() << " on " << added.version();
    EXPECT_EQ(on.p2pdma_distance, 4) << e.id();
    EXPECT_STREQ(map(verdict(tree, before, "01:00.0", "02:00.0")), "NOT_SUPPORTED") << e.id() << " on " << before;
    for (const auto& b : e.releases.backports) {
      EXPECT_STREQ(map(verdict(tree, b.version(), "01:00.0", "02:00.0")), "THRU_HOST_BRIDGE") << e.id();
      std::string earlier = fmt::format("{}.{}.{}", b.major, b.minor, b.patch - 1);
      EXPECT_STREQ(map(verdict(tree, earlier, "01:00.0", "02:00.0")), "NOT_SUPPORTED") << e.id() << " " << earlier;
    }
    if (e.releases.removed) {
      EXPECT_STREQ(map(verdict(tree, e.releases.removed->version(), "01:00.0", "02:00.0")), "NOT_SUPPORTED")
          << e.id() << " removed";
    }
  }
}

TEST(P2pdma, SpecExampleAcceleratorIdsFirstInRelease72) {
  Tree tree = two_root_ports(0x8086, 0x0b25);
  EXPECT_STREQ(map(verdict(tree, "7.2", "01:00.0", "02:00.0")), "THRU_HOST_BRIDGE");
  auto refused = verdict(tree, "7.0", "01:00.0", "02:00.0");
  EXPECT_STREQ(map(refused), "NOT_SUPPORTED");
  EXPECT_EQ(refused.remedy.whitelist, "host bridge 8086:0b25 is not in this kernel's whitelist");
  bool names_release = false;
  for (const auto& a : refused.remedy.alternatives) names_release = names_release || a.starts_with("boot kernel 7.2+");
  EXPECT_TRUE(names_release);
}

TEST(P2pdma, SpecExampleRootPortAtNonZeroDevfn) {
  Tree tree;
  tree.add("00:01.0", "", 0x8086, 0x2031, PcieType::kRootPort);
  tree.rp("00:02.0");
  tree.ep("01:00.0", "00:01.0");
  tree.ep("02:00.0", "00:02.0");
  EXPECT_STREQ(map(verdict(tree, "5.19", "01:00.0", "02:00.0")), "THRU_HOST_BRIDGE");
  auto v = verdict(tree, "5.15", "01:00.0", "02:00.0");
  EXPECT_STREQ(map(v), "NOT_SUPPORTED");
  ASSERT_EQ(v.host_bridges.size(), 1u);
  EXPECT_FALSE(v.host_bridges[0].root_device);
}

TEST(P2pdma, SlotDevfn0BeforeRelease514FirstDeviceAfter) {
  Tree tree = two_root_ports(0x8086, 0x2030);
  auto& roots = tree.bridge("pci0000:00").root_bus_devices;
  std::rotate(roots.begin(), roots.begin() + 1, roots.end());  // 00.0 re-added after a rescan
  EXPECT_STREQ(map(verdict(tree, "5.13", "01:00.0", "02:00.0")), "THRU_HOST_BRIDGE");
  EXPECT_STREQ(map(verdict(tree, "5.15", "01:00.0", "02:00.0")), "NOT_SUPPORTED");
}

TEST(P2pdma, AnyDeviceEntryFromRelease71) {
  Tree tree = two_root_ports(0x1ae0, 0x0042);
  EXPECT_STREQ(map(verdict(tree, "7.1", "01:00.0", "02:00.0")), "THRU_HOST_BRIDGE");
  EXPECT_STREQ(map(verdict(tree, "7.0", "01:00.0", "02:00.0")), "NOT_SUPPORTED");
}

Tree two_host_bridges(uint16_t device_a, uint16_t device_b) {
  Tree tree;
  tree.host_dev(0x8086, device_a, "pci0000:00");
  tree.rp("00:01.0");
  tree.ep("01:00.0", "00:01.0");
  tree.host_dev(0x8086, device_b, "pci0000:80", "80:00.0");
  tree.rp("80:01.0", std::nullopt, "pci0000:80");
  tree.ep("81:00.0", "80:01.0", std::nullopt, "pci0000:80");
  return tree;
}

TEST(P2pdma, TwoHostBridgesNeedFlagZeroEntriesOnBoth) {
  auto ok = verdict(two_host_bridges(0x2020, 0x09a2), "6.1", "01:00.0", "81:00.0");
  EXPECT_STREQ(map(ok), "THRU_HOST_BRIDGE");
  EXPECT_EQ(ok.distance, 4);
  EXPECT_EQ(ok.host_bridges.size(), 2u);
  // REQ_SAME_HOST_BRIDGE (Xeon E5 3c00) refuses across host bridges, without a warning.
  auto same = verdict(two_host_bridges(0x3c00, 0x3c00), "6.1", "01:00.0", "81:00.0");
  EXPECT_STREQ(map(same), "NOT_SUPPORTED");
  EXPECT_TRUE(same.host_bridges[0].refused_same_host_bridge);
  EXPECT_EQ(same.host_bridges.size(), 1u);  // short-circuit: the second is not examined
  // Within one host bridge the same entry passes.
  EXPECT_STREQ(map(verdict(two_root_ports(0x8086, 0x3c00), "6.1", "01:00.0", "02:00.0")), "THRU_HOST_BRIDGE");
  // An assumed entry with same-host-bridge behaves like the kernel's flag.
  auto assumed = verdict(two_host_bridges(0x29c0, 0x29c0), "6.1", "01:00.0", "81:00.0", {"8086:29c0"});
  EXPECT_STREQ(map(assumed), "THRU_HOST_BRIDGE");
  auto assumed_same =
      verdict(two_host_bridges(0x29c0, 0x29c0), "6.1", "01:00.0", "81:00.0", {"8086:29c0:same-host-bridge"});
  EXPECT_STREQ(map(assumed_same), "NOT_SUPPORTED");
}

TEST(P2pdma, CpuRuleFromRelease59AmdFamily17hOnly) {
  Tree tree = two_root_ports(0x8086, 0x29c0);
  tree.amd_zen(0x17);
  EXPECT_STREQ(map(verdict(tree, "5.9", "01:00.0", "02:00.0")), "THRU_HOST_BRIDGE");
  EXPECT_STREQ(map(verdict(tree, "5.8", "01:00.0", "02:00.0")), "NOT_SUPPORTED");
  tree.amd_zen(0x16);
  EXPECT_STREQ(map(verdict(tree, "6.1", "01:00.0", "02:00.0")), "NOT_SUPPORTED");
  tree.t.platform.cpu_vendor = "HygonGenuine";
  tree.t.platform.cpu_family = 0x18;
  EXPECT_STREQ(map(verdict(tree, "6.1", "01:00.0", "02:00.0")), "NOT_SUPPORTED");
  tree.amd_zen();
  tree.t.platform.arch = "arm64";
  EXPECT_STREQ(map(verdict(tree, "6.1", "01:00.0", "02:00.0")), "NOT_SUPPORTED");
}

TEST(P2pdma, UnknownCpuMakesTheHostBridgePathUnknown) {
  Tree tree = two_root_ports(0x8086, 0x29c0);
  tree.t.platform.arch.clear();
  tree.t.platform.cpu_vendor.clear();
  auto v = verdict(tree, "6.1", "01:00.0", "02:00.0");
  EXPECT_STREQ(map(v), "UNKNOWN");
  EXPECT_FALSE(v.p2pdma_distance);
  EXPECT_FALSE(v.kernel_log_complete);
}

TEST(P2pdma, TruncatedAcsListPrintsAtMost127Characters) {
  // 13 redirecting devices: the 128-byte seq_buf holds 9 entries and 10 characters of the 10th.
  Tree tree;
  tree.host_dev(0x8086, 0x29c0);
  tree.rp("00:01.0", kRr);
  tree.add("01:00.0", "00:01.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream, kRr);
  tree.ep("01:00.1", "00:01.0", kRr);
  std::string parent = "01:00.0";
  for (int bus = 2; bus <= 10; ++bus) {
    std::string bdf = fmt::format("{:02x}:00.0", bus);
    tree.add(bdf, parent, 0x10b5, 0x8747, PcieType::kSwitchDownstream, kRr);
    parent = bdf;
  }
  tree.ep("0b:00.0", parent, kRr);

  std::string full;
  for (const char* d : {"0b:00.0", "0a:00.0", "09:00.0", "08:00.0", "07:00.0", "06:00.0", "05:00.0", "04:00.0",
                        "03:00.0", "02:00.0", "01:00.0", "00:01.0", "01:00.1"})
    full += fmt::format("0000:{};", d);
  full.pop_back();
  const std::string prefix = "pci 0000:01:00.1: to disable ACS redirect for this path, add the kernel parameter: "
                             "pci=disable_acs_redir=";
  auto v = verdict(tree, "6.1", "0b:00.0", "01:00.1");
  EXPECT_EQ(v.remedy.disable_acs_redir, full);
  ASSERT_GE(v.kernel_log.size(), 2u);
  EXPECT_EQ(v.kernel_log[1], prefix + full.substr(0, 127));
  auto old = verdict(tree, "5.13", "0b:00.0", "01:00.1");  // PAGE_SIZE buffer
  EXPECT_EQ(old.kernel_log[1], prefix + full);
}

TEST(P2pdma, UnreadableAcsMakesTheMapTypeUnknown) {
  Tree tree = switch_tree();
  Function& dsp = tree.t.functions[tree.index("02:00.0")];
  dsp.acs = {CapState::kUnknown, 0, 0, 0};
  dsp.config_readable = 64;
  auto v = verdict(tree, "6.1", "03:00.0", "04:00.0");
  EXPECT_STREQ(map(v), "UNKNOWN");
  EXPECT_FALSE(v.p2pdma_distance);  // BUS_ADDR (4) or NOT_SUPPORTED (-1)
  EXPECT_EQ(v.distance, 4);
  EXPECT_FALSE(v.kernel_log_complete);
  ASSERT_FALSE(v.unknowns.empty());
  EXPECT_NE(v.unknowns[0].find("0000:02:00.0"), std::string::npos);
  EXPECT_EQ(v.remedy.acs_unknown, std::vector<std::string>{"0000:02:00.0"});

  tree.amd_zen();  // both outcomes allowed: the distance is known though the map type is not
  v = verdict(tree, "6.1", "03:00.0", "04:00.0");
  EXPECT_STREQ(map(v), "UNKNOWN");
  EXPECT_EQ(v.p2pdma_distance, 4);

  // A known redirect fixes the map type; the unknown one only changes the printed list.
  Tree known = switch_tree();
  known.t.functions[known.index("02:01.0")].acs = {CapState::kPresent, 0x100, 0x1f, kRr};
  known.t.functions[known.index("02:00.0")].acs = {CapState::kUnknown, 0, 0, 0};
  v = verdict(known, "6.1", "03:00.0", "04:00.0");
  EXPECT_STREQ(map(v), "NOT_SUPPORTED");
  EXPECT_EQ(v.p2pdma_distance, -1);
  EXPECT_FALSE(v.kernel_log_complete);
}

TEST(P2pdma, UnreadableAcsDoesNotMatterWithoutCommonAncestor) {
  Tree tree = two_root_ports(0x8086, 0x29c0);
  tree.t.functions[tree.index("00:1c.0")].acs = {CapState::kUnknown, 0, 0, 0};
  auto v = verdict(tree, "6.1", "01:00.0", "02:00.0");
  EXPECT_STREQ(map(v), "NOT_SUPPORTED");
  EXPECT_TRUE(v.kernel_log_complete);
  EXPECT_TRUE(v.unknowns.empty());
}

TEST(P2pdma, ConfigOffRefusesEveryPairSilently) {
  Tree tree = switch_tree();
  tree.t.platform.config_p2pdma = Known::kNo;
  auto v = verdict(tree, "6.1", "03:00.0", "04:00.0");
  EXPECT_STREQ(map(v), "NOT_SUPPORTED");
  EXPECT_EQ(v.p2pdma_distance, -1);
  EXPECT_TRUE(v.kernel_log.empty());
  EXPECT_EQ(v.reason, "CONFIG_PCI_P2PDMA is not set in this kernel's config (boot/config-test)");
}

TEST(P2pdma, Era420To51RefusesWithMinusOneAndMinusTwo) {
  Tree tree = two_root_ports(0x8086, 0x2030);
  auto none = verdict(tree, "5.1", "01:00.0", "02:00.0");
  EXPECT_STREQ(map(none), "NOT_SUPPORTED");
  EXPECT_EQ(none.legacy_return, -1);
  EXPECT_EQ(none.kernel_log,
            std::vector<std::string>{"pci 0000:02:00.0: cannot be used for peer-to-peer DMA as the client and provider "
                                     "(0000:01:00.0) do not share an upstream bridge"});
  Tree acs = switch_tree(kAcsRr);
  auto redirect = verdict(acs, "4.20", "03:00.0", "04:00.0");
  EXPECT_EQ(redirect.legacy_return, -2);
  EXPECT_EQ(redirect.p2pdma_distance, -1);
  EXPECT_EQ(redirect.kernel_log.at(0), "pci 0000:04:00.0: cannot be used for peer-to-peer DMA as ACS redirect is set "
                                       "between the client and provider (0000:03:00.0)");
  EXPECT_EQ(redirect.kernel_log.size(), 2u);
}

TEST(P2pdma, Era52AmdZenRootComplexWithoutIommu) {
  Tree tree = two_root_ports(0x1022, 0x1450);
  auto v = verdict(tree, "5.2", "01:00.0", "02:00.0");
  EXPECT_STREQ(map(v), "THRU_HOST_BRIDGE");
  EXPECT_EQ(v.p2pdma_distance, 0x1000 + 4);
  tree.t.platform.iommu_groups_present = true;
  EXPECT_STREQ(map(verdict(tree, "5.3", "01:00.0", "02:00.0")), "NOT_SUPPORTED");
  EXPECT_STREQ(map(verdict(tree, "5.1", "01:00.0", "02:00.0")), "NOT_SUPPORTED");
}

TEST(P2pdma, DistanceManySumsAndRefusesIfAnyClientIsRefused) {
  Tree tree;
  tree.host_dev(0x8086, 0x29c0);
  tree.rp("00:01.0");
  tree.rp("00:02.0");
  tree.ep("01:00.0", "00:01.0");
  tree.ep("01:00.1", "00:01.0");
  tree.ep("05:00.0", "00:02.0");
  KernelRules rules = rules_for(tree, "6.1");
  size_t a = tree.index("01:00.0"), b = tree.index("01:00.1"), c = tree.index("05:00.0");
  auto ok = pci_p2pdma_distance_many(tree.t, rules, a, {b, a});
  EXPECT_EQ(ok.result, 2);
  auto refused = pci_p2pdma_distance_many(tree.t, rules, a, {c, b, c});
  EXPECT_EQ(refused.result, -1);
  EXPECT_EQ(refused.clients.size(), 3u);  // verbose keeps going
  EXPECT_EQ(refused.kernel_log.size(), 2u);
  EXPECT_EQ(pci_p2pdma_distance_many(tree.t, rules, a, {}).result, -1);
}

}  // namespace
}  // namespace p2paudit
