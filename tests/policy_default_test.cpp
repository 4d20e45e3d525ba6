// SPDX-License-Identifier: GPL-2.0-or-later
// The default policy and the advisories: every rule has a case that fires it and one that does
// not; the seed cases go from a tree through the kernel verdict to the decision.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/snapshot.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "synthetic_tree.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit::policy {
namespace {

using json = nlohmann::json;

const std::string kRules = P2PAUDIT_SOURCE_RULES_DIR;

const RuleSet& default_rules() {
  static const RuleSet rules = RuleSet::load(default_rule_files(kRules));
  return rules;
}

bool fired(const Decision& d, const std::string& id) {
  auto ids = d.rule_ids();
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

struct RuleCase {
  std::string id;
  json fires;      // facts with which the rule fires
  json stays_off;  // facts with which it does not
};

// An allowed kernel path and an in-tree driver, so that only the facts under test change the outcome.
json base() { return {{"kernel.allowed", true}, {"kernel.map_type", "BUS_ADDR"}, {"vendor.authority", "kernel"}}; }
json with(json j, const json& more) {
  for (const auto& [k, v] : more.items()) j[k] = v;
  return j;
}

const json kXe = {{"provider.driver", "xe"}, {"client.driver", "xe"}, {"vendor.authority", "xe"}};
// The fabric rules apply only to their vendor's GPUs.
const json kNvidiaGpus = {{"vendor.authority", "nvidia"}, {"provider.vendor", "10de"}, {"client.vendor", "10de"},
                          {"provider.class", "gpu"}, {"client.class", "gpu"}};
const json kAmdGpus = {{"vendor.authority", "amdgpu"}, {"provider.vendor", "1002"}, {"client.vendor", "1002"},
                       {"provider.class", "accelerator"}, {"client.class", "accelerator"}};

std::vector<RuleCase> cases() {
  return {
      {"iommu-translating", with(base(), {{"iommu.mode", "translated"}}), with(base(), {{"iommu.mode", "passthrough"}})},
      {"acs-redirect-on-path",
       with(base(), {{"kernel.acs_redirect", true}, {"kernel.acs_redirect_devices", {"0000:00:01.0"}}}),
       with(base(), {{"kernel.acs_redirect", false}})},
      {"degraded-link", with(base(), {{"path.degraded_link", true}}), with(base(), {{"path.degraded_link", false}})},
      {"different-numa-nodes", with(base(), {{"path.same_numa_node", false}}), with(base(), {{"path.same_numa_node", true}})},
      {"resizable-bar-not-at-max", with(base(), {{"client.rebar_at_max", false}}), with(base(), {{"client.rebar_at_max", true}})},
      {"vm-guest", with(base(), {{"platform.vm_guest", true}}), with(base(), {{"platform.vm_guest", false}})},
      {"copy-corrupt", with(base(), {{"vendor.copy_result", "corrupt"}, {"vendor.nvlink", true}}),
       with(base(), {{"vendor.copy_result", "verified"}})},
      {"copy-failed", with(base(), {{"vendor.copy_result", "failed"}}), with(base(), {{"vendor.copy_result", "not_run"}})},
      // Kernel stores lost while the copy engine's copy verified (tinygrad/open-gpu-kernel-modules#44);
      // atomics the driver does not offer natively are no failure.
      {"kernel-peer-path-failed",
       with(base(), {{"vendor.copy_result", "verified"}, {"vendor.kernel_store_result", "dropped"},
                     {"vendor.kernel_load_result", "verified"}, {"vendor.atomic_result", "verified"}}),
       with(base(), {{"vendor.copy_result", "verified"}, {"vendor.kernel_store_result", "verified"},
                     {"vendor.kernel_load_result", "verified"}, {"vendor.atomic_result", "not_supported"}})},
      // Peer 2-12 GB/s, staged 42 GB/s (aikitoria/open-gpu-kernel-modules#9); equal is not slower.
      {"copy-slower-than-staged",
       with(base(), {{"vendor.copy_verified", true}, {"vendor.copy_gbps", 12.0}, {"vendor.copy_staged_gbps", 42.0}}),
       with(base(), {{"vendor.copy_verified", true}, {"vendor.copy_gbps", 42.0}, {"vendor.copy_staged_gbps", 42.0}})},
      {"copy-below-half-ceiling",
       with(base(), {{"vendor.copy_verified", true}, {"vendor.copy_gbps", 12.0}, {"vendor.copy_ceiling_ratio", 0.49}}),
       with(base(), {{"vendor.copy_verified", true}, {"vendor.copy_gbps", 12.0}, {"vendor.copy_ceiling_ratio", 0.5}})},
      {"nvlink", with(kNvidiaGpus, {{"vendor.nvlink", true}}), with(kNvidiaGpus, {{"vendor.nvlink", false}})},
      {"xgmi", with(kAmdGpus, {{"vendor.xgmi", true}}), with(base(), {{"vendor.xgmi", false}})},
      // Failure shapes: a PCIe peer path (no NVLink/XGMI) and no verified copy of the pair.
      {"nvidia-peer-through-translating-iommu",
       with(kNvidiaGpus, {{"vendor.nvlink", false}, {"vendor.peer_supported", true}, {"vendor.copy_verified", false}, {"iommu.mode", "translated"},
                          {"platform.vm_guest", false}, {"path.relation", "same_host_bridge"}}),
       with(kNvidiaGpus, {{"vendor.nvlink", false}, {"vendor.peer_supported", true}, {"vendor.copy_verified", false}, {"iommu.mode", "passthrough"},
                          {"platform.vm_guest", false}, {"path.relation", "same_host_bridge"}})},
      {"nvidia-peer-through-acs-redirect",
       with(kNvidiaGpus, {{"vendor.nvlink", false}, {"vendor.peer_supported", true}, {"vendor.copy_verified", false}, {"kernel.acs_redirect", true},
                          {"path.relation", "same_switch"}}),
       with(kNvidiaGpus, {{"vendor.nvlink", false}, {"vendor.peer_supported", true}, {"vendor.copy_verified", true}, {"kernel.acs_redirect", true},
                          {"path.relation", "same_switch"}})},
      {"nvidia-peer-in-vm-without-clique",
       with(kNvidiaGpus, {{"vendor.nvlink", false}, {"vendor.peer_supported", true}, {"vendor.copy_verified", false}, {"platform.vm_guest", true},
                          {"vendor.nvidia_vm_clique", false}}),
       with(kNvidiaGpus, {{"vendor.nvlink", false}, {"vendor.peer_supported", true}, {"vendor.copy_verified", false}, {"platform.vm_guest", true},
                          {"vendor.nvidia_vm_clique", true}})},
      {"nvidia-vm-clique-between-gpu-models",
       with(kNvidiaGpus, {{"vendor.nvlink", false}, {"vendor.peer_supported", true}, {"vendor.copy_verified", false}, {"platform.vm_guest", true},
                          {"vendor.nvidia_vm_clique", true}, {"path.same_model", false}}),
       with(kNvidiaGpus, {{"vendor.nvlink", false}, {"vendor.peer_supported", true}, {"vendor.copy_verified", false}, {"platform.vm_guest", true},
                          {"vendor.nvidia_vm_clique", true}, {"path.same_model", true}})},
      {"amdgpu-peer-through-translating-iommu",
       with(kAmdGpus, {{"provider.driver", "amdgpu"}, {"client.driver", "amdgpu"}, {"vendor.xgmi", false},
                       {"vendor.copy_verified", false}, {"iommu.mode", "translated"}, {"platform.vm_guest", false},
                       {"path.relation", "same_host_bridge"}, {"provider.product_line", "datacenter"}}),
       with(kAmdGpus, {{"provider.driver", "amdgpu"}, {"client.driver", "amdgpu"}, {"vendor.xgmi", false},
                       {"vendor.copy_verified", false}, {"iommu.mode", "passthrough"}, {"platform.vm_guest", false},
                       {"path.relation", "same_host_bridge"}, {"provider.product_line", "consumer"},
                       {"client.product_line", "workstation"}})},
      {"nvidia-vm-clique-on-geforce",
       with(kNvidiaGpus, {{"vendor.nvlink", false}, {"vendor.peer_supported", true}, {"vendor.copy_verified", false},
                          {"platform.vm_guest", true}, {"vendor.nvidia_vm_clique", true}, {"client.product_line", "consumer"}}),
       with(kNvidiaGpus, {{"vendor.nvlink", false}, {"vendor.peer_supported", true}, {"vendor.copy_verified", false},
                          {"platform.vm_guest", true}, {"vendor.nvidia_vm_clique", true},
                          {"provider.product_line", "datacenter"}, {"client.product_line", "datacenter"}})},
      {"nvidia-geforce-pcie-peer-refused",
       with(kNvidiaGpus, {{"platform.vm_guest", false}, {"vendor.nvlink", false}, {"provider.driver_pcie_peer", "refused"}}),
       with(kNvidiaGpus, {{"platform.vm_guest", false}, {"vendor.nvlink", false}, {"vendor.peer_supported", true},
                          {"provider.driver_pcie_peer", "refused"}})},
      {"nvidia-pcie-peer-between-chips-refused",
       with(kNvidiaGpus, {{"platform.vm_guest", false}, {"vendor.nvlink", false}, {"path.same_chip", false}}),
       with(kNvidiaGpus, {{"platform.vm_guest", false}, {"vendor.nvlink", false}, {"path.same_chip", true}})},
      {"nvidia-common-switch-peer-predicted",
       with(kNvidiaGpus, {{"platform.vm_guest", false}, {"provider.driver_pcie_peer", "allowed"},
                          {"client.driver_pcie_peer", "allowed"}, {"path.same_chip", true}, {"vendor.nvidia_common_switch", true}}),
       with(kNvidiaGpus, {{"platform.vm_guest", false}, {"provider.driver_pcie_peer", "allowed"},
                          {"client.driver_pcie_peer", "allowed"}, {"path.same_chip", true}, {"vendor.nvidia_common_switch", false}})},
      {"nvidia-driver-allows", {{"vendor.authority", "nvidia"}, {"vendor.peer_supported", true}},
       {{"vendor.authority", "nvidia"}, {"vendor.peer_supported", false}}},
      {"nvidia-driver-refuses", {{"vendor.authority", "nvidia"}, {"vendor.peer_supported", false}},
       {{"vendor.authority", "nvidia"}, {"vendor.peer_supported", true}}},
      {"nvidia-vm-peer-clique", {{"vendor.authority", "nvidia"}, {"platform.vm_guest", true}, {"vendor.nvidia_vm_clique", true}},
       {{"vendor.authority", "nvidia"}, {"platform.vm_guest", true}, {"vendor.nvidia_vm_clique", false}}},
      {"nvidia-driver-unknown", {{"vendor.authority", "nvidia"}}, base()},
      // NVIDIA's third-party paths (tests/nvidia_third_party_test.cpp builds the trees).
      {"nvidia-peermem-not-loaded",
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_peermem_loaded", false}, {"vendor.nvidia_importer", "rdma"}},
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_peermem_loaded", true}, {"vendor.nvidia_importer", "rdma"}}},
      {"nvidia-third-party-no-importer",
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_importer", "none"}, {"vendor.copy_verified", false}},
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_importer", "rdma"}, {"vendor.copy_verified", false}}},
      {"nvidia-third-party-refused-by-override",
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_grdma_allowed", false},
        {"vendor.nvidia_grdma_step", "override_deny"}},
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_grdma_allowed", false},
        {"vendor.nvidia_grdma_step", "no_common_bridge"}}},
      {"nvidia-third-party-refused-by-chipset",
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_grdma_allowed", false},
        {"vendor.nvidia_grdma_step", "no_common_bridge"}},
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_grdma_allowed", true}}},
      {"nvidia-peer-reads-intel-client",
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_grdma_allowed", true}, {"platform.intel_client_cpu", true},
        {"path.relation", "different_host_bridges"}, {"vendor.copy_verified", false}},
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_grdma_allowed", true}, {"platform.intel_client_cpu", true},
        {"path.relation", "same_switch"}, {"vendor.copy_verified", false}}},
      {"nvidia-third-party-allows",
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_grdma_allowed", true}, {"vendor.nccl_path_class", "PIX"}},
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_grdma_allowed", true}}},
      {"nvidia-third-party-allows-device", {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_grdma_allowed", true}},
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_grdma_allowed", false}}},
      {"nvidia-third-party-copy-verified",
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.copy_verified", true}},
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.copy_verified", false}}},
      {"nvidia-third-party-unknown",
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.copy_verified", false}, {"vendor.nvidia_importer", "rdma"}},
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.copy_verified", false}, {"vendor.nvidia_importer", "none"}}},
      {"kernel-without-p2pdma", with(base(), {{"kernel.config_p2pdma", false}, {"kernel.allowed", false}}),
       with(base(), {{"kernel.config_p2pdma", true}})},
      {"kernel-refuses", with(base(), {{"kernel.allowed", false}, {"kernel.map_type", "NOT_SUPPORTED"}}), base()},
      {"kernel-verdict-unknown", {{"vendor.authority", "kernel"}, {"kernel.map_type", "UNKNOWN"}}, base()},
      {"bar-unassigned", with(base(), {{"client.bar_unassigned", true}}),
       with(base(), {{"provider.bar_unassigned", false}, {"client.bar_unassigned", false}})},
      {"resized-bar-without-room", with(base(), {{"provider.rebar_no_room", true}}),
       with(base(), {{"provider.rebar_no_room", false}, {"client.rebar_no_room", false}})},
      {"large-bar-without-64bit-window",
       with(base(), {{"provider.bar_above_4g", true}, {"path.bridges_64bit_prefetch", false}}),
       with(base(), {{"provider.bar_above_4g", true}, {"path.bridges_64bit_prefetch", true}})},
      // Seed case 2: the BAR's address against the CPU's width and XRT's 32 TiB.
      {"bar-beyond-address-width", with(base(), {{"provider.bar_beyond_address_width", true}}),
       with(base(), {{"provider.bar_beyond_address_width", false}})},
      {"xrt-p2p-bar-above-32t", with(base(), {{"provider.driver", "xocl"}, {"provider.bar_above_32t", true}}),
       with(base(), {{"provider.driver", "xocl"}, {"provider.bar_above_32t", false}})},
      {"bar-smaller-than-memory", with(base(), {{"provider.class", "fpga"}, {"provider.bar_covers_memory", false}}),
       with(base(), {{"provider.class", "fpga"}, {"provider.bar_covers_memory", true}})},
      {"copy-verified", with(base(), {{"vendor.copy_verified", true}}), with(base(), {{"vendor.copy_verified", false}})},
      {"xe-peer-on-amd-family-17h",
       with(with(base(), kXe), {{"platform.cpu_vendor", "AuthenticAMD"}, {"platform.cpu_family", 23}}),
       with(with(base(), kXe), {{"platform.cpu_vendor", "AuthenticAMD"}, {"platform.cpu_family", 26}})},
      {"peer-across-intel-sockets",
       with(base(), {{"platform.cpu_vendor", "GenuineIntel"}, {"path.same_numa_node", false},
                     {"kernel.map_type", "THRU_HOST_BRIDGE"}}),
       with(base(), {{"platform.cpu_vendor", "GenuineIntel"}, {"path.same_numa_node", true},
                     {"kernel.map_type", "THRU_HOST_BRIDGE"}})},
      {"amdgpu-vega20-peer-through-skylake-e-host-bridge",
       with(base(), {{"provider.driver", "amdgpu"}, {"client.driver", "amdgpu"}, {"provider.device", "66a1"},
                     {"client.device", "66a1"}, {"platform.cpu_vendor", "GenuineIntel"}, {"platform.cpu_family", 6},
                     {"platform.cpu_model", 85}, {"kernel.map_type", "THRU_HOST_BRIDGE"}}),
       with(base(), {{"provider.driver", "amdgpu"}, {"client.driver", "amdgpu"}, {"provider.device", "6860"},
                     {"client.device", "6860"}, {"platform.cpu_vendor", "GenuineIntel"}, {"platform.cpu_family", 6},
                     {"platform.cpu_model", 85}, {"kernel.map_type", "THRU_HOST_BRIDGE"}})},
      {"amdgpu-peer-between-gpu-generations",
       with(base(), {{"provider.driver", "amdgpu"}, {"client.driver", "amdgpu"}, {"path.same_model", false}}),
       with(base(), {{"provider.driver", "amdgpu"}, {"client.driver", "amdgpu"}, {"path.same_model", true}})},
      {"same-switch", base(), with(base(), {{"kernel.map_type", "THRU_HOST_BRIDGE"}})},
      {"hypothetical-whitelist-entry",
       with(base(), {{"kernel.map_type", "THRU_HOST_BRIDGE"}, {"kernel.whitelist_assumed", true}}),
       with(base(), {{"kernel.map_type", "THRU_HOST_BRIDGE"}, {"kernel.whitelist_assumed", false}})},
      {"through-host-bridge", with(base(), {{"kernel.map_type", "THRU_HOST_BRIDGE"}}), base()},
      // Advisories
      {"untested-host-bridge-whitelisted", with(base(), {{"kernel.whitelist_assumed", true}}),
       with(base(), {{"kernel.whitelist_assumed", false}})},
      {"intel-client-peer-reads",
       with(base(), {{"platform.intel_client_cpu", true}, {"path.relation", "same_host_bridge"}}),
       with(base(), {{"platform.intel_client_cpu", false}, {"path.relation", "same_host_bridge"}})},
      {"xe-runtime-pins-peer-mirror", with(with(base(), kXe), {{"runtime.compute_runtime_version", "26.09.37435.1"}}),
       with(with(base(), kXe), {{"runtime.compute_runtime_version", "26.05.37020.3"}})},
      {"measured-host-mirror", with(base(), {{"runtime.host_mirror_per_byte", 1.02}}),
       with(base(), {{"runtime.host_mirror_per_byte", 0.01}})},
      // The driver's branch: R495 and R460 have the problem, R470 and R510 do not.
      {"nvidia-driver-grdma-free-callback",
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_importer", "rdma"},
        {"runtime.nvidia_driver_version", "495.29.05"}, {"runtime.nvidia_driver_major", 495}},
       {{"vendor.authority", "nvidia_third_party"}, {"vendor.nvidia_importer", "rdma"},
        {"runtime.nvidia_driver_version", "470.256.02"}, {"runtime.nvidia_driver_major", 470}}},
      {"xe-peer-usm-on-old-kernel",
       with(with(base(), kXe), {{"runtime.compute_runtime_version", "26.14.1.1"}, {"kernel.release", "7.0.0-22-generic"}}),
       with(with(base(), kXe), {{"runtime.compute_runtime_version", "26.14.1.1"}, {"kernel.release", "7.1.3"}})},
  };
}

class DefaultRule : public ::testing::TestWithParam<RuleCase> {};

TEST_P(DefaultRule, FiresOnItsCaseOnly) {
  const RuleCase& c = GetParam();
  Decision on = default_rules().decide(FactSet::from_json(c.fires, c.id + " fires"));
  Decision off = default_rules().decide(FactSet::from_json(c.stays_off, c.id + " stays off"));
  EXPECT_TRUE(fired(on, c.id)) << "fired: " << json(on.rule_ids()).dump();
  EXPECT_FALSE(fired(off, c.id)) << "fired: " << json(off.rule_ids()).dump();
}

INSTANTIATE_TEST_SUITE_P(Policy, DefaultRule, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           std::string n = info.param.id;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(DefaultPolicy, EveryRuleHasACase) {
  std::set<std::string> tested;
  for (const auto& c : cases()) tested.insert(c.id);
  for (const auto& rule : default_rules().rules()) EXPECT_TRUE(tested.count(rule.id)) << rule.id << " has no test case";
}

TEST(DefaultPolicy, AdvisoriesOnlyWarnAndNameTheirSource) {
  for (const auto& file : default_rule_files(kRules)) {
    RuleFile f = load_rule_file(file);
    if (f.kind != RuleFileKind::kAdvisories) continue;
    for (const auto& rule : f.rules) {
      EXPECT_EQ(rule.action, Action::kWarn) << rule.id;
      EXPECT_EQ(rule.source.rfind("https://", 0), 0u) << rule.id;
    }
  }
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// A fabric rule states whose fabric it is ahead of the fabric fact, so on any other pair it is
// false, not undecided: "is there an NVLink?" is no open question between an NVMe drive and a NIC.
TEST(DefaultPolicy, FabricUnknownsOnlyWhereTheFabricCanExist) {
  json refused = with(base(), {{"kernel.allowed", false}, {"kernel.map_type", "NOT_SUPPORTED"}});
  json nvme_nic = with(refused, {{"provider.vendor", "144d"}, {"provider.class", "nvme"},
                                 {"client.vendor", "15b3"}, {"client.class", "nic"}});
  Decision d = default_rules().decide(FactSet::from_json(nvme_nic, "nvme and nic"));
  EXPECT_EQ(d.rule, "kernel-refuses");
  EXPECT_FALSE(has(d.unknown_facts, "vendor.nvlink")) << json(d.unknown_facts).dump();
  EXPECT_FALSE(has(d.unknown_facts, "vendor.xgmi")) << json(d.unknown_facts).dump();
  EXPECT_TRUE(d.decisive_unknown_facts.empty()) << json(d.decisive_unknown_facts).dump();
  // Two NVIDIA GPUs: NVLink could change the decision, XGMI cannot.
  json nvidia = with(refused, kNvidiaGpus);
  nvidia["vendor.authority"] = "kernel";
  d = default_rules().decide(FactSet::from_json(nvidia, "two NVIDIA GPUs"));
  EXPECT_TRUE(has(d.decisive_unknown_facts, "vendor.nvlink")) << json(d.decisive_unknown_facts).dump();
  EXPECT_FALSE(has(d.decisive_unknown_facts, "vendor.xgmi")) << json(d.decisive_unknown_facts).dump();
  json amd = with(refused, kAmdGpus);
  amd["vendor.authority"] = "kernel";
  d = default_rules().decide(FactSet::from_json(amd, "two AMD GPUs"));
  EXPECT_TRUE(has(d.decisive_unknown_facts, "vendor.xgmi")) << json(d.decisive_unknown_facts).dump();
  EXPECT_FALSE(has(d.decisive_unknown_facts, "vendor.nvlink")) << json(d.decisive_unknown_facts).dump();
}

// Every later refusal that holds is reported beside the decision with its own fix; a later peer
// rule is not a problem, and a rule that did not hold is not reported.
TEST(DefaultPolicy, OtherProblemsOfThePairAreFindingsWithTheirFixes) {
  json facts = with(base(), {{"kernel.config_p2pdma", false}, {"client.bar_unassigned", true},
                             {"provider.rebar_no_room", false}, {"client.rebar_no_room", false}});
  Decision d = default_rules().decide(FactSet::from_json(facts, "two problems"));
  EXPECT_EQ(d.rule, "kernel-without-p2pdma");
  std::vector<std::string> ids;
  for (const auto& f : d.findings) ids.push_back(f.id);
  EXPECT_EQ(ids, std::vector<std::string>{"bar-unassigned"}) << json(ids).dump();
  ASSERT_FALSE(d.findings.empty());
  EXPECT_NE(d.findings[0].remedy.find("pci=realloc"), std::string::npos) << d.findings[0].remedy;
  EXPECT_TRUE(decision_to_json(d).contains("findings"));
  EXPECT_EQ(decision_to_json(d)["findings"][0]["id"], "bar-unassigned");
  // same-switch (peer) also holds on base(): it adds nothing.
  EXPECT_FALSE(has(ids, "same-switch"));
  // Where NVIDIA's driver decides, the kernel's P2PDMA is no problem of the pair; a BAR still is.
  json nvidia = with(with(facts, kNvidiaGpus), {{"kernel.allowed", false}});
  d = default_rules().decide(FactSet::from_json(nvidia, "NVIDIA pair"));
  EXPECT_EQ(d.rule, "nvidia-driver-unknown");
  ids.clear();
  for (const auto& f : d.findings) ids.push_back(f.id);
  EXPECT_EQ(ids, std::vector<std::string>{"bar-unassigned"}) << json(ids).dump();
  // With one problem only, no findings.
  d = default_rules().decide(FactSet::from_json(with(base(), {{"client.bar_unassigned", true}}), "one problem"));
  EXPECT_EQ(d.rule, "bar-unassigned");
  EXPECT_TRUE(d.findings.empty());
}

// The seed case: two GPUs on separate root ports of one host bridge, xe driver, P2PDMA kernel.
Decision seed(uint16_t host_vendor, uint16_t host_device, bool amd) {
  test::Tree tree;
  if (amd) tree.amd_zen(0x1a);
  tree.host_dev(host_vendor, host_device);
  tree.rp("00:01.0");
  tree.rp("00:06.0");
  // Two Arc Pro B70 (8086:e223, 32 GiB: the device table knows the memory the BAR must cover).
  for (const char* gpu : {"03:00.0", "07:00.0"}) {
    Function& f = tree.describe(tree.ep(gpu, gpu[1] == '3' ? "00:01.0" : "00:06.0"), 0x030000, "xe", uint64_t{32} << 30);
    f.vendor = 0x8086, f.device = 0xe223;
  }
  Platform platform = tree.t.platform;
  platform.kernel_release = "7.2.13";
  KernelRules kernel = load_kernel_rules(std::filesystem::path(kRules) / "kernel", platform, {});
  return decide_pair(tree.t, kernel, default_rules(), nullptr, tree.index("03:00.0"), tree.index("07:00.0")).decision;
}

TEST(SeedCase, IntelClientHostBridgeIsHostStagedNamingKernelAndBridge) {
  Decision d = seed(0x8086, 0x4c43, false);
  EXPECT_EQ(d.action, Action::kHostStaged);
  EXPECT_EQ(d.rule, "kernel-refuses");
  EXPECT_EQ(d.authority, Authority::kKernel);
  EXPECT_NE(d.reason.find("refuses"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("8086:4c43"), std::string::npos) << d.reason;
  EXPECT_NE(d.remedy.find("8086:4c43"), std::string::npos) << d.remedy;
}

TEST(SeedCase, SameCardsOnAmdZenArePeerThroughTheHostBridge) {
  Decision d = seed(0x1022, 0x14d8, true);
  EXPECT_EQ(d.action, Action::kPeer);
  EXPECT_EQ(d.rule, "through-host-bridge");
  EXPECT_NE(d.reason.find("host bridge"), std::string::npos) << d.reason;
}

TEST(SeedCase, AssumedWhitelistEntryIsNotTrustedForPeer) {
  test::Tree tree;
  tree.host_dev(0x8086, 0x4c43);
  tree.rp("00:01.0");
  tree.rp("00:06.0");
  tree.describe(tree.ep("03:00.0", "00:01.0"), 0x030000, "xe");
  tree.describe(tree.ep("07:00.0", "00:06.0"), 0x030000, "xe");
  Platform platform = tree.t.platform;
  platform.kernel_release = "7.2.13";
  KernelRules kernel = load_kernel_rules(std::filesystem::path(kRules) / "kernel", platform, {"", {}, {"8086:4c43"}});
  Decision d = decide_pair(tree.t, kernel, default_rules(), nullptr, tree.index("03:00.0"), tree.index("07:00.0")).decision;
  EXPECT_EQ(d.action, Action::kHostStaged);
  EXPECT_EQ(d.rule, "hypothetical-whitelist-entry");
  EXPECT_TRUE(fired(d, "untested-host-bridge-whitelisted"));
}

// Facts as the analysis produces them, from synthetic trees.
FactSet facts_of(const test::Tree& tree, const std::string& p, const std::string& c, std::vector<std::string> assume = {}) {
  Platform platform = tree.t.platform;
  platform.kernel_release = "7.2.13";
  KernelRules kernel = load_kernel_rules(std::filesystem::path(kRules) / "kernel", platform, {"", {}, std::move(assume)});
  return pair_facts(P2pdmaIndex(tree.t, kernel), tree.index(p), tree.index(c));
}

std::string str(const FactSet& f, const std::string& name) {
  const FactValue* v = f.get(name);
  return v ? render_fact_value(*v) : "unknown";
}

TEST(PairFacts, PathRelationAndNvidiaCommonSwitch) {
  test::Tree tree;
  tree.host_dev(0x8086, 0x09a2);
  tree.rp("00:01.0");
  tree.add("01:00.0", "00:01.0", 0x10b5, 0x8747, PcieType::kSwitchUpstream);  // PLX: NVIDIA recognises it
  tree.add("02:08.0", "01:00.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream);
  tree.add("02:10.0", "01:00.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream);
  tree.describe(tree.add("03:00.0", "02:08.0", 0x10de, 0x2335, PcieType::kEndpoint), 0x030200, "nvidia");
  tree.describe(tree.add("04:00.0", "02:10.0", 0x10de, 0x2335, PcieType::kEndpoint), 0x030200, "nvidia");
  FactSet f = facts_of(tree, "03:00.0", "04:00.0");
  EXPECT_EQ(str(f, "path.relation"), "same_switch");
  EXPECT_EQ(str(f, "vendor.authority"), "nvidia");
  EXPECT_EQ(str(f, "vendor.nvidia_common_switch"), "true");
  EXPECT_EQ(str(f, "kernel.map_type"), "BUS_ADDR");
  EXPECT_EQ(str(f, "provider.class"), "gpu");
  tree.t.functions[tree.index("01:00.0")].vendor = 0x1000;  // a Broadcom PEX: not on NVIDIA's list
  tree.t.functions[tree.index("02:08.0")].vendor = 0x1000;
  tree.t.functions[tree.index("02:10.0")].vendor = 0x1000;
  EXPECT_EQ(str(facts_of(tree, "03:00.0", "04:00.0"), "vendor.nvidia_common_switch"), "false");
}

TEST(PairFacts, BarStatesAndAssumedWhitelist) {
  test::Tree tree;
  tree.host_dev(0x8086, 0x4c43);
  tree.rp("00:01.0");
  tree.rp("00:06.0");
  Function& fpga = tree.describe(tree.ep("01:00.0", "00:01.0"), 0x120000, "xocl", uint64_t{256} << 20);
  fpga.vendor = 0x10ee;
  fpga.rebar_state = CapState::kPresent;
  fpga.rebar.push_back(ResizableBar{2, uint64_t{64} << 30, {uint64_t{256} << 20, uint64_t{64} << 30}});
  Function& nic = tree.describe(tree.ep("02:00.0", "00:06.0"), 0x020000, "mlx5_core");
  nic.bars.push_back(Bar{0, 0, uint64_t{32} << 20, false, true, true});  // sized but never given an address
  FactSet f = facts_of(tree, "01:00.0", "02:00.0", {"8086:4c43"});
  EXPECT_EQ(str(f, "provider.class"), "fpga");
  EXPECT_EQ(str(f, "provider.rebar_no_room"), "true");   // control asks 64 GiB, BAR got 256 MiB
  EXPECT_EQ(str(f, "provider.rebar_at_max"), "true");
  EXPECT_EQ(str(f, "client.bar_unassigned"), "true");
  EXPECT_EQ(str(f, "provider.bar_unassigned"), "false");
  EXPECT_EQ(str(f, "path.relation"), "same_host_bridge");
  EXPECT_EQ(str(f, "kernel.whitelist"), "whitelisted");
  EXPECT_EQ(str(f, "kernel.whitelist_assumed"), "true");
  EXPECT_EQ(str(facts_of(tree, "01:00.0", "02:00.0"), "kernel.whitelist"), "not_whitelisted");
}

// A GPU whose BAR sits above 4 GiB and a NIC with 32-bit BARs only, below one switch: the
// switch port above one of them has no 64-bit prefetchable window. Peer requests turn at the
// switch's internal bus, so only the port above the provider (whose BAR is the target) must
// forward a 64-bit address.
test::Tree window_tree(bool provider_port_has_window) {
  test::Tree tree;
  tree.host_dev(0x8086, 0x09a2);
  tree.windows(tree.rp("00:01.0"), true);
  tree.windows(tree.add("01:00.0", "00:01.0", 0x10b5, 0x8747, PcieType::kSwitchUpstream), true);
  tree.windows(tree.add("02:08.0", "01:00.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream), provider_port_has_window);
  tree.windows(tree.add("02:10.0", "01:00.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream), !provider_port_has_window);
  tree.describe(tree.ep("03:00.0", "02:08.0"), 0x030000, "amdgpu", uint64_t{16} << 30);
  tree.describe(tree.ep("04:00.0", "02:10.0"), 0x020000, "mlx5_core").bars.push_back(Bar{0, 0xfc000000, 32u << 20, false, false, false});
  return tree;
}

Decision window_decision(const test::Tree& tree, const std::string& p, const std::string& c) {
  Platform platform = tree.t.platform;
  platform.kernel_release = "7.2.13";
  KernelRules kernel = load_kernel_rules(std::filesystem::path(kRules) / "kernel", platform, {});
  return decide_pair(tree.t, kernel, default_rules(), nullptr, tree.index(p), tree.index(c)).decision;
}

TEST(BridgeWindows, ClientPortWithoutPrefetchWindowDoesNotRefuseALargeBar) {
  test::Tree tree = window_tree(true);
  FactSet f = facts_of(tree, "03:00.0", "04:00.0");
  EXPECT_EQ(str(f, "provider.bar_above_4g"), "true");
  EXPECT_EQ(str(f, "path.bridges_64bit_prefetch"), "true");
  Decision d = window_decision(tree, "03:00.0", "04:00.0");
  EXPECT_FALSE(fired(d, "large-bar-without-64bit-window")) << d.rule;
}

TEST(BridgeWindows, ProviderPortWithoutPrefetchWindowRefusesALargeBar) {
  test::Tree tree = window_tree(false);
  EXPECT_EQ(str(facts_of(tree, "03:00.0", "04:00.0"), "path.bridges_64bit_prefetch"), "false");
  Decision d = window_decision(tree, "03:00.0", "04:00.0");
  EXPECT_EQ(d.action, Action::kHostStaged);
  EXPECT_EQ(d.rule, "large-bar-without-64bit-window");
}

TEST(BridgeWindows, ThroughTheHostBridgeTheProvidersRootPortCounts) {
  test::Tree tree;
  tree.host_dev(0x8086, 0x09a2);
  tree.windows(tree.rp("00:01.0"), true);
  tree.windows(tree.rp("00:06.0"), false);
  tree.describe(tree.ep("03:00.0", "00:01.0"), 0x030000, "amdgpu", uint64_t{16} << 30);
  tree.describe(tree.ep("07:00.0", "00:06.0"), 0x030000, "amdgpu", uint64_t{16} << 30);
  EXPECT_EQ(str(facts_of(tree, "03:00.0", "07:00.0"), "path.bridges_64bit_prefetch"), "true");
  EXPECT_EQ(str(facts_of(tree, "07:00.0", "03:00.0"), "path.bridges_64bit_prefetch"), "false");
  // With the provider's whole chain not readable, the fact is unknown.
  tree.t.functions[tree.index("00:01.0")].windows.clear();
  EXPECT_EQ(str(facts_of(tree, "03:00.0", "07:00.0"), "path.bridges_64bit_prefetch"), "unknown");
}

class H200 : public ::testing::Test {
 protected:
  std::vector<PairDecision> gpu_pairs(const VendorFactsDocument* vendor) {
    Sysroot root = Sysroot::open(test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz"));
    topo = read_topology(root);
    KernelRules kernel = load_kernel_rules(std::filesystem::path(kRules) / "kernel", topo.platform, {});
    std::vector<size_t> gpus;
    for (size_t i = 0; i < topo.functions.size(); ++i)
      if (topo.functions[i].vendor == 0x10de) gpus.push_back(i);
    EXPECT_EQ(gpus.size(), 4u);
    std::vector<PairDecision> out;
    for (size_t p : gpus)
      for (size_t c : gpus)
        if (p != c) out.push_back(decide_pair(topo, kernel, default_rules(), vendor, p, c));
    return out;
  }
  Topology topo;
};

TEST_F(H200, WithoutVendorDataTheNvidiaDriverDecidesAndItIsUnknown) {
  for (const auto& p : gpu_pairs(nullptr)) {
    EXPECT_FALSE(p.verdict.p2pdma_distance.value_or(0) >= 0);  // the kernel itself would refuse
    EXPECT_EQ(p.decision.rule, "nvidia-driver-unknown");
    EXPECT_FALSE(fired(p.decision, "kernel-refuses"));
    EXPECT_EQ(p.decision.authority, Authority::kVendorDriver);
    EXPECT_NE(p.decision.reason.find("NVIDIA driver"), std::string::npos);
    EXPECT_NE(p.decision.reason.find("unknown"), std::string::npos);
    EXPECT_EQ(p.decision.reason.find("kernel refuses"), std::string::npos);
  }
}

TEST_F(H200, WithNvlinkVendorFactsTheDecisionIsPeer) {
  VendorFactsDocument vendor = VendorFactsDocument::load(test::data_path("machines/h200x4-firecracker-vm/vendor-facts.json"));
  for (const auto& p : gpu_pairs(&vendor)) {
    EXPECT_EQ(p.decision.action, Action::kPeer);
    EXPECT_EQ(p.decision.rule, "nvlink");
    EXPECT_EQ(p.decision.authority, Authority::kVendorFabric);
  }
}

TEST(VendorFactsFile, BadInputNamesFileAndPlace) {
  std::string path = ::testing::TempDir() + "/bad-vendor-facts.json";
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    std::ofstream(path) << text;
    try {
      VendorFactsDocument::load(path);
      ADD_FAILURE() << "no error for " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("{", "not JSON");
  expect_error(R"({"schema_version": 1, "pairs": [{"provider": "gpu0", "client": "0000:00:07.0", "facts": {}}]})",
               "pairs[0]");
  expect_error(R"({"schema_version": 1, "pairs": [{"provider": "0000:00:06.0", "client": "0000:00:07.0",
                   "facts": {"vendor.nvlnk": true}}]})", "vendor.nvlnk");
  expect_error(R"({"schema_version": 1, "extra": 1})", "extra");
}

// --- memory sizes from vendor sysfs (amdgpu mem_info_vram_total) through to the decision -------

constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;

// An AMD Zen host (the kernel allows P2PDMA through its host bridge) with two amdgpu GPUs on the
// root bus: 00:02.0 with a 256 MiB BAR and 00:03.0 with a 32 GiB one, each with 16 GiB of VRAM.
class SysfsVram : public ::testing::Test {
 protected:
  void SetUp() override {
    s.function("pci0000:00/0000:00:00.0", test::ConfigBytes(0x1022, 0x14d8, 0x060000, 0).bytes());
    test::gpu_with_bar(s, "pci0000:00/0000:00:02.0", 0x1002, 0x744c, "amdgpu", 0xc0000000, 256 * kMiB);
    test::gpu_with_bar(s, "pci0000:00/0000:00:03.0", 0x1002, 0x744c, "amdgpu", uint64_t{1} << 40, 32 * kGiB);
    vram("0000:00:02.0", "17179869184\n", "268435456\n");
    vram("0000:00:03.0", "17179869184\n", "17179869184\n");
  }
  void vram(const std::string& bdf, const std::string& total, const std::string& visible) {
    s.write("sys/devices/pci0000:00/" + bdf + "/mem_info_vram_total", total);
    s.write("sys/devices/pci0000:00/" + bdf + "/mem_info_vis_vram_total", visible);
  }
  PairDecision decide(const std::string& sysroot, const std::string& p, const std::string& c,
                      const VendorFactsDocument* vendor = nullptr) {
    Topology t = read_topology(Sysroot::open(sysroot));
    KernelRules kernel = load_kernel_rules(std::filesystem::path(kRules) / "kernel", t.platform, {});
    return decide_pair(t, kernel, default_rules(), vendor, *t.index_of(*Bdf::parse(p)), *t.index_of(*Bdf::parse(c)));
  }
  test::SysrootDir s;
};

TEST_F(SysfsVram, SmallBarProviderIsHostStagedByBarSmallerThanMemory) {
  PairDecision d = decide(s.str(), "00:02.0", "00:03.0");
  EXPECT_EQ(str(d.facts, "provider.memory_size"), "17179869184");
  EXPECT_EQ(str(d.facts, "provider.largest_bar"), "268435456");
  EXPECT_EQ(str(d.facts, "provider.bar_covers_memory"), "false");
  EXPECT_EQ(str(d.facts, "kernel.allowed"), "true");
  EXPECT_EQ(d.decision.action, Action::kHostStaged);
  EXPECT_EQ(d.decision.rule, "bar-smaller-than-memory");
  EXPECT_EQ(d.decision.authority, Authority::kVendorDriver);
  EXPECT_NE(d.decision.reason.find("256 MiB BAR for 16 GiB"), std::string::npos) << d.decision.reason;
}

TEST_F(SysfsVram, BarCoveringTheVramDoesNotFire) {
  PairDecision d = decide(s.str(), "00:03.0", "00:02.0");
  EXPECT_EQ(str(d.facts, "provider.memory_size"), "17179869184");
  EXPECT_EQ(str(d.facts, "provider.bar_covers_memory"), "true");
  EXPECT_FALSE(fired(d.decision, "bar-smaller-than-memory"));
  EXPECT_EQ(d.decision.action, Action::kPeer) << d.decision.rule;
  vram("0000:00:03.0", "34359738368\n", "34359738368\n");  // exactly the BAR
  EXPECT_FALSE(fired(decide(s.str(), "00:03.0", "00:02.0").decision, "bar-smaller-than-memory"));
}

TEST_F(SysfsVram, VendorFactsFileOverridesTheSysfsValue) {
  VendorFactsDocument vendor = VendorFactsDocument::parse(
      R"({"schema_version": 1, "pairs": [{"provider": "0000:00:02.0", "client": "0000:00:03.0",
          "facts": {"provider.memory_size": 134217728}}]})", "vf.json");
  PairDecision d = decide(s.str(), "00:02.0", "00:03.0", &vendor);
  EXPECT_EQ(str(d.facts, "provider.memory_size"), "134217728");
  EXPECT_EQ(str(d.facts, "provider.bar_covers_memory"), "true");
  EXPECT_FALSE(fired(d.decision, "bar-smaller-than-memory"));
  VendorFactsDocument unknown = VendorFactsDocument::parse(
      R"({"schema_version": 1, "pairs": [{"provider": "0000:00:02.0", "client": "0000:00:03.0",
          "facts": {"provider.memory_size": null}}]})", "vf.json");
  d = decide(s.str(), "00:02.0", "00:03.0", &unknown);
  EXPECT_EQ(str(d.facts, "provider.memory_size"), "unknown");
  EXPECT_FALSE(fired(d.decision, "bar-smaller-than-memory"));
}

TEST_F(SysfsVram, ApertureBeyondEveryBarIsNoBarComparison) {
  // An APU: amdgpu makes its carve-out all CPU-visible (aper_size = VRAM) whatever BAR 0 is.
  vram("0000:00:02.0", "2147483648\n", "2147483648\n");
  PairDecision d = decide(s.str(), "00:02.0", "00:03.0");
  EXPECT_EQ(str(d.facts, "provider.memory_size"), "unknown");
  EXPECT_FALSE(fired(d.decision, "bar-smaller-than-memory"));
  // Not known, so not a yes either: staged until the memory size is known, and said so.
  EXPECT_EQ(d.decision.action, Action::kHostStaged) << d.decision.rule;
  EXPECT_FALSE(d.decision.certain());
  EXPECT_EQ(d.decision.rule, "bar-smaller-than-memory");
  const auto& settle = d.decision.decisive_unknown_facts;  // the memory size, not the fact derived from it
  EXPECT_NE(std::find(settle.begin(), settle.end(), "provider.memory_size"), settle.end());
  EXPECT_EQ(std::find(settle.begin(), settle.end(), "provider.bar_covers_memory"), settle.end());
}

TEST_F(SysfsVram, JunkIsUnknownAndDecidesNothing) {
  for (const char* junk : {"12abc\n", "99999999999999999999\n", "-17179869184\n", ""}) {
    vram("0000:00:02.0", junk, "268435456\n");
    PairDecision d = decide(s.str(), "00:02.0", "00:03.0");
    EXPECT_EQ(str(d.facts, "provider.memory_size"), "unknown") << junk;
    EXPECT_FALSE(fired(d.decision, "bar-smaller-than-memory")) << junk;
  }
}

TEST_F(SysfsVram, SnapshotGivesTheSameDecision) {
  std::string out = ::testing::TempDir() + "/sysfs-vram-" + std::to_string(::getpid()) + ".tar.gz";
  std::filesystem::remove(out);
  Sysroot root = Sysroot::open(s.str());
  write_snapshot(root, read_topology(root), out, {});
  for (auto [p, c] : {std::pair{"00:02.0", "00:03.0"}, std::pair{"00:03.0", "00:02.0"}}) {
    PairDecision live = decide(s.str(), p, c), captured = decide(out, p, c);
    EXPECT_EQ(captured.decision.rule, live.decision.rule) << p;
    EXPECT_EQ(captured.decision.action, live.decision.action) << p;
    EXPECT_EQ(captured.facts.to_json(), live.facts.to_json()) << p;
  }
  EXPECT_EQ(decide(out, "00:02.0", "00:03.0").decision.rule, "bar-smaller-than-memory");
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace p2paudit::policy
