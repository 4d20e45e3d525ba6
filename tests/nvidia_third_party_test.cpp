// SPDX-License-Identifier: GPL-2.0-or-later
// NVIDIA's third-party peer paths (issue 17): GPUDirect RDMA / Storage and dma-buf export between an
// NVIDIA GPU and a NIC, NVMe drive or FPGA are decided by the driver's gate
// nv_grdma_pci_topology_supported() (vendor-p2p-gates.md §1.10), not by the kernel's P2PDMA rules;
// NCCL's path class for GPU<->NIC pairs; Intel client root complexes that forward peer writes only.
#include <gtest/gtest.h>

#include <filesystem>

#include "p2paudit/device_class.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/env_exports.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/nvidia_third_party.h"
#include "p2paudit/snapshot.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "synthetic_tree.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

using policy::Action;
using test::Tree;
namespace fs = std::filesystem;

// The machines' GPU (H100 PCIe 10de:2331) and NIC (ConnectX-7 15b3:1021), as the reader describes them.
size_t gpu(Tree& tree, const std::string& bdf, const std::string& parent) {
  size_t i = tree.add(bdf, parent, 0x10de, 0x2331, PcieType::kEndpoint);
  tree.describe(i, 0x030200, "nvidia", uint64_t{128} << 30);
  return i;
}
size_t nic(Tree& tree, const std::string& bdf, const std::string& parent, uint16_t device = 0x1021) {
  size_t i = tree.add(bdf, parent, 0x15b3, device, PcieType::kEndpoint);
  tree.describe(i, 0x020000, "mlx5_core", uint64_t{32} << 20);
  return i;
}
size_t nvme(Tree& tree, const std::string& bdf, const std::string& parent) {
  size_t i = tree.add(bdf, parent, 0x144d, 0xa80a, PcieType::kEndpoint);
  tree.describe(i, 0x010802, "nvme");
  return i;
}

// GPU and NIC on two root ports of one host bridge (override stated 0 unless told).
Tree root_ports(std::optional<int64_t> override_value = 0) {
  Tree tree;
  tree.host_dev(0x8086, 0x09a2);
  tree.rp("00:01.0");
  tree.rp("00:02.0");
  gpu(tree, "01:00.0", "00:01.0");
  nic(tree, "02:00.0", "00:02.0");
  tree.t.platform.cpu_model = 0x8f;  // Sapphire Rapids: a server part
  if (override_value) {
    tree.t.platform.nvidia_grdma_override = *override_value;
    tree.t.platform.nvidia_grdma_override_source = "/proc/driver/nvidia/params";
  }
  return tree;
}

// GPU and NIC below one PCIe switch: root port -> upstream port -> two downstream ports.
Tree one_switch(std::optional<int64_t> override_value = 0) {
  Tree tree;
  tree.host_dev(0x8086, 0x09a2);
  tree.rp("00:01.0");
  tree.add("01:00.0", "00:01.0", 0x10b5, 0x9797, PcieType::kSwitchUpstream);
  tree.add("02:01.0", "01:00.0", 0x10b5, 0x9797, PcieType::kSwitchDownstream);
  tree.add("02:02.0", "01:00.0", 0x10b5, 0x9797, PcieType::kSwitchDownstream);
  gpu(tree, "03:00.0", "02:01.0");
  nic(tree, "04:00.0", "02:02.0");
  tree.t.platform.cpu_model = 0x8f;
  if (override_value) tree.t.platform.nvidia_grdma_override = *override_value;
  return tree;
}

struct Decided {
  policy::PairDecision d;
  std::string fact(const std::string& name) const {
    const policy::FactValue* v = d.facts.get(name);
    return v ? policy::render_fact_value(*v) : "unknown";
  }
  std::string source() const {
    for (const auto& f : d.decision.fired)
      if (f.id == d.decision.rule) return f.source;
    return "";
  }
  bool fired(const std::string& id) const {
    return std::any_of(d.decision.fired.begin(), d.decision.fired.end(), [&](const auto& f) { return f.id == id; });
  }
};

const policy::RuleSet& default_rules() {
  static const auto rules = policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  return rules;
}

KernelRules kernel_rules(const Topology& t, const std::string& release = "6.8.0") {
  Platform platform = t.platform;
  if (platform.kernel_release.empty()) platform.kernel_release = release;
  return load_kernel_rules(std::filesystem::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", platform, {});
}

Decided decide(const Topology& t, size_t p, size_t c, const policy::VendorFactsDocument* vendor = nullptr) {
  return {policy::decide_pair(t, kernel_rules(t), default_rules(), vendor, p, c)};
}
Decided decide(const Tree& tree, const std::string& p, const std::string& c,
               const policy::VendorFactsDocument* vendor = nullptr) {
  return decide(tree.t, tree.index(p), tree.index(c), vendor);
}

void expect_vendor_driver(const Decided& r, Action action, const std::string& rule) {
  EXPECT_EQ(r.d.decision.action, action) << r.d.decision.rule << ": " << r.d.decision.reason;
  EXPECT_EQ(r.d.decision.rule, rule) << r.d.decision.reason;
  ASSERT_TRUE(r.d.decision.authority.has_value());
  EXPECT_EQ(std::string(policy::to_string(*r.d.decision.authority)), "vendor-driver");
  EXPECT_EQ(r.fact("vendor.authority"), "nvidia_third_party");
}

// ---------------------------------------------------------------------------------------------
// The gate, branch by branch.
// ---------------------------------------------------------------------------------------------

TEST(NvidiaGrdmaGate, EachStepOverKnownInputs) {
  using policy::GrdmaStep;
  policy::NvidiaGrdmaMachine m;
  m.coherent = true;
  m.override_value = 2;
  auto r = policy::nv_grdma_pci_topology_supported(m, false, false);
  EXPECT_EQ(r.allowed, true);  // coherent is tested before the override
  EXPECT_EQ(r.step, GrdmaStep::kCoherent);
  m.coherent = false;
  EXPECT_EQ(policy::nv_grdma_pci_topology_supported(m, true, true).step, GrdmaStep::kOverrideDeny);
  EXPECT_EQ(policy::nv_grdma_pci_topology_supported(m, true, true).allowed, false);
  m.override_value = 1;
  m.unsupported_chipset = true;
  EXPECT_EQ(policy::nv_grdma_pci_topology_supported(m, false, false).step, GrdmaStep::kOverrideAllow);
  m.override_value = 0;
  EXPECT_EQ(policy::nv_grdma_pci_topology_supported(m, true, false).step, GrdmaStep::kPassthrough);
  r = policy::nv_grdma_pci_topology_supported(m, false, false);
  EXPECT_EQ(r.allowed, false);
  EXPECT_EQ(r.step, GrdmaStep::kNoCommonBridge);
  r = policy::nv_grdma_pci_topology_supported(m, false, true);
  EXPECT_EQ(r.allowed, true);
  EXPECT_EQ(r.step, GrdmaStep::kCommonBridge);
  m.unsupported_chipset = false;
  m.override_value = 7;  // neither 1 nor 2: the topology check
  EXPECT_EQ(policy::nv_grdma_pci_topology_supported(m, false, false).step, GrdmaStep::kAllow);
}

TEST(NvidiaGrdmaGate, UnknownInputsGiveAnAnswerOnlyWhereEveryValueAgrees) {
  policy::NvidiaGrdmaMachine m;
  m.coherent = false;
  auto r = policy::nv_grdma_pci_topology_supported(m, false, true);  // override unknown: 2 would deny
  EXPECT_FALSE(r.allowed.has_value());
  EXPECT_FALSE(r.step.has_value());
  m.override_value = 0;
  r = policy::nv_grdma_pci_topology_supported(m, std::nullopt, true);  // pass-through unknown, both allow
  EXPECT_EQ(r.allowed, true);
  EXPECT_FALSE(r.step.has_value());
  m.unsupported_chipset = true;
  m.coherent.reset();  // a Grace machine: C2C or not
  EXPECT_FALSE(policy::nv_grdma_pci_topology_supported(m, false, false).allowed.has_value());
  EXPECT_EQ(policy::nv_grdma_pci_topology_supported(m, false, true).allowed, true);
}

TEST(NvidiaThirdParty, GpuNicPairsAreTheDriversNotTheKernels) {
  Tree tree = root_ports();
  for (auto [p, c] : {std::pair{"01:00.0", "02:00.0"}, std::pair{"02:00.0", "01:00.0"}}) {
    auto r = decide(tree, p, c);
    expect_vendor_driver(r, Action::kPeer, "nvidia-third-party-allows");
    EXPECT_EQ(r.fact("vendor.nvidia_grdma_step"), "supported_chipset");
    EXPECT_EQ(r.fact("vendor.nccl_path_class"), "PHB");
    EXPECT_EQ(r.fact("vendor.nccl_gdr_default"), "false");
    EXPECT_NE(r.d.decision.reason.find("PHB"), std::string::npos) << r.d.decision.reason;
    EXPECT_NE(r.d.decision.reason.find("NCCL_NET_GDR_LEVEL"), std::string::npos) << r.d.decision.reason;
  }
  // The same pair with the kernel built without P2PDMA: still the driver's.
  tree.t.platform.config_p2pdma = Known::kNo;
  EXPECT_EQ(decide(tree, "01:00.0", "02:00.0").d.decision.rule, "nvidia-third-party-allows");
}

TEST(NvidiaThirdParty, NvmeAndGpuPairsToo) {
  Tree tree;
  tree.rp("00:01.0");
  tree.rp("00:03.0");
  gpu(tree, "01:00.0", "00:01.0");
  nvme(tree, "03:00.0", "00:03.0");
  tree.t.platform.nvidia_grdma_override = 0;
  auto r = decide(tree, "01:00.0", "03:00.0");
  expect_vendor_driver(r, Action::kPeer, "nvidia-third-party-allows-device");
  EXPECT_EQ(r.fact("vendor.nccl_path_class"), "unknown");  // NCCL's class is for NICs
}

TEST(NvidiaThirdParty, GpuPublishingP2pmemAsProviderStaysWithTheKernel) {
  Tree tree = root_ports();
  tree.t.functions[tree.index("01:00.0")].has_p2pmem = true;  // §1.11: BAR1 published to P2PDMA
  auto r = decide(tree, "01:00.0", "02:00.0");
  EXPECT_EQ(r.fact("vendor.authority"), "kernel");
  EXPECT_EQ(r.fact("vendor.nvidia_grdma_allowed"), "unknown");
  // The NIC as provider is still a third-party mapping of the GPU's own side.
  EXPECT_EQ(decide(tree, "02:00.0", "01:00.0").fact("vendor.authority"), "nvidia_third_party");
}

TEST(NvidiaThirdParty, OverrideTwoRefusesNamingTheLogLine) {
  auto r = decide(root_ports(2), "01:00.0", "02:00.0");
  expect_vendor_driver(r, Action::kHostStaged, "nvidia-third-party-refused-by-override");
  EXPECT_NE(r.d.decision.reason.find("PCI topology not supported for dma-buf"), std::string::npos);
  EXPECT_NE(r.d.decision.reason.find("/proc/driver/nvidia/params"), std::string::npos);
  EXPECT_NE(r.d.decision.remedy.find("NVreg_GrdmaPciTopoCheckOverride"), std::string::npos);
}

TEST(NvidiaThirdParty, UnknownOverrideIsUnknownNotAGuess) {
  auto r = decide(root_ports(std::nullopt), "01:00.0", "02:00.0");
  expect_vendor_driver(r, Action::kHostStaged, "nvidia-third-party-unknown");
  EXPECT_EQ(r.fact("vendor.nvidia_grdma_override"), "unknown");
  EXPECT_NE(r.d.decision.remedy.find("/proc/driver/nvidia/params"), std::string::npos);
}

// An Ampere Altra machine (arm64): the gate lets a device reach GPU memory only below a shared bridge.
Tree altra(bool shared_bridge, bool earlier_chipset_present = false) {
  Tree tree;
  tree.t.platform.arch = "arm64";
  tree.t.platform.cpu_vendor.clear();
  tree.t.platform.cpu_family.reset();
  tree.host_dev(0x1def, 0xe000);
  if (earlier_chipset_present) tree.add("00:00.1", "", 0x1022, 0x790e, PcieType::kNotPcie);  // CS_AMD_X370 row
  tree.add("00:01.0", "", 0x1def, 0xe001, PcieType::kRootPort);
  tree.add("00:02.0", "", 0x1def, 0xe002, PcieType::kRootPort);
  if (shared_bridge) {
    tree.add("01:00.0", "00:01.0", 0x10b5, 0x9797, PcieType::kSwitchUpstream);
    tree.add("02:01.0", "01:00.0", 0x10b5, 0x9797, PcieType::kSwitchDownstream);
    tree.add("02:02.0", "01:00.0", 0x10b5, 0x9797, PcieType::kSwitchDownstream);
    gpu(tree, "03:00.0", "02:01.0");
    nic(tree, "04:00.0", "02:02.0");
  } else {
    gpu(tree, "03:00.0", "00:01.0");
    nic(tree, "04:00.0", "00:02.0");
  }
  tree.t.platform.nvidia_grdma_override = 0;
  tree.t.platform.firmware_vm = Known::kNo;  // SMBIOS: not a virtual machine
  return tree;
}

TEST(NvidiaThirdParty, UnsupportedChipsetNeedsASharedBridge) {
  auto apart = decide(altra(false), "03:00.0", "04:00.0");
  expect_vendor_driver(apart, Action::kHostStaged, "nvidia-third-party-refused-by-chipset");
  EXPECT_EQ(apart.fact("vendor.nvidia_chipset"), "CS_AMPERE_ALTRA");
  EXPECT_EQ(apart.fact("vendor.nvidia_unsupported_chipset"), "true");
  EXPECT_EQ(apart.fact("vendor.nvidia_coherent"), "false");  // C2C needs Grace
  EXPECT_EQ(apart.fact("vendor.nvidia_grdma_step"), "no_common_bridge");
  EXPECT_NE(apart.d.decision.reason.find("CS_AMPERE_ALTRA"), std::string::npos);
  EXPECT_NE(apart.d.decision.remedy.find("switch"), std::string::npos);
  auto shared = decide(altra(true), "03:00.0", "04:00.0");
  expect_vendor_driver(shared, Action::kPeer, "nvidia-third-party-allows");
  EXPECT_EQ(shared.fact("vendor.nvidia_grdma_step"), "common_bridge");
  EXPECT_EQ(shared.fact("vendor.nccl_path_class"), "PIX");
}

TEST(NvidiaThirdParty, OverrideOneAllowsEvenOnAnUnsupportedChipset) {
  Tree tree = altra(false);
  tree.t.platform.nvidia_grdma_override = 1;
  auto r = decide(tree, "03:00.0", "04:00.0");
  EXPECT_EQ(r.fact("vendor.nvidia_grdma_step"), "override_allow");
  expect_vendor_driver(r, Action::kPeer, "nvidia-third-party-allows");
}

TEST(NvidiaThirdParty, ChipsetIsTheFirstTableEntryPresent) {
  // NVIDIA's search walks its table in order: an earlier entry present wins over Ampere Altra.
  auto r = decide(altra(false, true), "03:00.0", "04:00.0");
  EXPECT_EQ(r.fact("vendor.nvidia_chipset"), "CS_AMD_X370");
  EXPECT_EQ(r.fact("vendor.nvidia_unsupported_chipset"), "false");
  EXPECT_EQ(r.d.decision.rule, "nvidia-third-party-allows");
}

TEST(NvidiaThirdParty, GraceWithoutASharedBridgeIsUnknown) {
  Tree tree = altra(false);
  tree.t.functions[tree.index("00:00.0")].device = 0x22b1;  // a TH500 (Grace) function instead
  tree.t.functions[tree.index("00:00.0")].vendor = 0x10de;
  auto r = decide(tree, "03:00.0", "04:00.0");
  EXPECT_EQ(r.fact("vendor.nvidia_chipset"), "CS_NVIDIA_TH500");
  EXPECT_EQ(r.fact("vendor.nvidia_coherent"), "unknown");  // C2C or not: the snapshot does not show it
  expect_vendor_driver(r, Action::kHostStaged, "nvidia-third-party-unknown");
}

TEST(NvidiaThirdParty, Arm64GuestIsKnownBySmbiosOnly) {
  Tree tree = altra(false);
  tree.t.platform.firmware_vm = Known::kUnknown;  // no SMBIOS in the capture: pass-through unknown
  auto r = decide(tree, "03:00.0", "04:00.0");
  EXPECT_EQ(r.fact("vendor.nvidia_passthrough"), "unknown");
  expect_vendor_driver(r, Action::kHostStaged, "nvidia-third-party-unknown");
  tree.t.platform.firmware_vm = Known::kYes;
  EXPECT_EQ(decide(tree, "03:00.0", "04:00.0").fact("vendor.nvidia_grdma_step"), "passthrough");
}

TEST(NvidiaThirdParty, PassThroughGpuInAGuestIsAllowed) {
  Tree tree = altra(false);
  tree.t.platform.arch = "x86";
  tree.t.platform.cpu_vendor = "GenuineIntel";
  tree.t.platform.cpu_family = 6;
  tree.t.platform.hypervisor = true;
  auto r = decide(tree, "03:00.0", "04:00.0");
  EXPECT_EQ(r.fact("vendor.nvidia_passthrough"), "true");
  EXPECT_EQ(r.fact("vendor.nvidia_grdma_step"), "passthrough");  // before the chipset rule
  EXPECT_EQ(r.d.decision.action, Action::kPeer);
}

// ---------------------------------------------------------------------------------------------
// NCCL's path classes.
// ---------------------------------------------------------------------------------------------

std::string nccl_class(const Tree& tree, const std::string& a, const std::string& b) {
  auto c = policy::nccl_path_class(tree.t, tree.index(a), tree.index(b));
  return c ? policy::to_string(*c) : "none";
}

TEST(NcclPathClass, PixPxbPhbSys) {
  EXPECT_EQ(nccl_class(one_switch(), "03:00.0", "04:00.0"), "PIX");
  EXPECT_EQ(nccl_class(root_ports(), "01:00.0", "02:00.0"), "PHB");

  Tree two_levels;  // GPU below a second switch hanging off the first one's port
  two_levels.rp("00:01.0");
  two_levels.add("01:00.0", "00:01.0", 0x10b5, 0x9797, PcieType::kSwitchUpstream);
  two_levels.add("02:01.0", "01:00.0", 0x10b5, 0x9797, PcieType::kSwitchDownstream);
  two_levels.add("02:02.0", "01:00.0", 0x10b5, 0x9797, PcieType::kSwitchDownstream);
  two_levels.add("03:00.0", "02:01.0", 0x10b5, 0x8747, PcieType::kSwitchUpstream);
  two_levels.add("04:08.0", "03:00.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream);
  gpu(two_levels, "05:00.0", "04:08.0");
  nic(two_levels, "06:00.0", "02:02.0");
  EXPECT_EQ(nccl_class(two_levels, "05:00.0", "06:00.0"), "PXB");

  Tree sockets = root_ports();  // the two root ports on different NUMA nodes
  sockets.t.functions[sockets.index("01:00.0")].numa_node = 0;
  sockets.t.functions[sockets.index("02:00.0")].numa_node = 1;
  EXPECT_EQ(nccl_class(sockets, "01:00.0", "02:00.0"), "SYS");
  auto r = decide(sockets, "01:00.0", "02:00.0");
  EXPECT_EQ(r.fact("vendor.nccl_path_class"), "SYS");
  EXPECT_EQ(r.fact("vendor.nccl_gdr_default"), "false");
}

TEST(NcclPathClass, NvidiaSmisNodeIsPhbForNccl) {
  // nvidia-smi topo says NODE for two host bridges of one NUMA node; NCCL has no NODE type: both
  // attach to the one CPU node of that NUMA node, so its path type is PHB.
  Tree tree;
  tree.rp("00:01.0");
  gpu(tree, "01:00.0", "00:01.0");
  tree.rp("80:01.0", std::nullopt, "pci0000:80");
  nic(tree, "81:00.0", "80:01.0");
  tree.t.functions[tree.index("01:00.0")].numa_node = 0;
  tree.t.functions[tree.index("81:00.0")].numa_node = 0;
  EXPECT_EQ(nccl_class(tree, "01:00.0", "81:00.0"), "PHB");
}

TEST(NcclPathClass, BroadcomSubSwitchIsFlattened) {
  // A Gen4 PEX (1000:c010, subsystem 1000:a0xx) presents two levels; NCCL merges them.
  auto build = [](uint16_t subsystem_device) {
    Tree tree;
    tree.rp("00:01.0");
    size_t outer = tree.add("01:00.0", "00:01.0", 0x1000, 0xc010, PcieType::kSwitchUpstream);
    tree.add("02:00.0", "01:00.0", 0x1000, 0xc010, PcieType::kSwitchDownstream);
    tree.add("02:01.0", "01:00.0", 0x1000, 0xc010, PcieType::kSwitchDownstream);
    size_t inner = tree.add("03:00.0", "02:00.0", 0x1000, 0xc010, PcieType::kSwitchUpstream);
    tree.add("04:00.0", "03:00.0", 0x1000, 0xc010, PcieType::kSwitchDownstream);
    gpu(tree, "05:00.0", "04:00.0");
    nic(tree, "06:00.0", "02:01.0");
    for (size_t i : {outer, inner}) {
      tree.t.functions[i].subsystem_vendor = 0x1000;
      tree.t.functions[i].subsystem_device = subsystem_device;
    }
    return tree;
  };
  EXPECT_EQ(nccl_class(build(0xa064), "05:00.0", "06:00.0"), "PIX");
  EXPECT_EQ(nccl_class(build(0x0000), "05:00.0", "06:00.0"), "PXB");  // not the BCM signature
}

// ---------------------------------------------------------------------------------------------
// Modules and --format env.
// ---------------------------------------------------------------------------------------------

TEST(NvidiaThirdParty, PeermemNotLoadedIsSaidAndNotGuessed) {
  Tree tree = root_ports();
  EXPECT_FALSE(decide(tree, "01:00.0", "02:00.0").fired("nvidia-peermem-not-loaded"));  // unknown: silent
  tree.t.platform.nvidia_peermem_loaded = Known::kNo;
  auto r = decide(tree, "01:00.0", "02:00.0");
  EXPECT_TRUE(r.fired("nvidia-peermem-not-loaded"));
  EXPECT_EQ(r.d.decision.action, Action::kPeer);  // a warning: dma-buf needs no module
  tree.t.platform.nvidia_peermem_loaded = Known::kYes;
  tree.t.platform.nvidia_fs_loaded = Known::kNo;
  r = decide(tree, "01:00.0", "02:00.0");
  EXPECT_FALSE(r.fired("nvidia-peermem-not-loaded"));
  EXPECT_NE(r.d.decision.reason.find("nvidia_peermem loaded: true, nvidia_fs loaded: false"), std::string::npos)
      << r.d.decision.reason;
}

TEST(NvidiaThirdParty, ReaderTakesModulesAndOverrideFromWhereTheyAreStated) {
  test::SysrootDir s;
  s.function("pci0000:00/0000:00:01.0", test::ConfigBytes(0x10de, 0x2331, 0x030200, 0).bytes());
  s.write("proc/modules", "nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)\nnvidia 1 2 - Live 0x0\n");
  s.write("proc/driver/nvidia/params", "ResmanDebugLevel: 4294967295\nGrdmaPciTopoCheckOverride: 1\n");
  s.write("etc/modprobe.d/nvidia.conf", "options nvidia NVreg_GrdmaPciTopoCheckOverride=2\n");
  Topology t = read_topology(Sysroot::open(s.str()));
  EXPECT_EQ(t.platform.nvidia_peermem_loaded, Known::kYes);
  EXPECT_EQ(t.platform.nvidia_fs_loaded, Known::kNo);
  EXPECT_EQ(t.platform.nvidia_grdma_override, 1);  // the running driver's value wins
  EXPECT_EQ(t.platform.nvidia_grdma_override_source, "/proc/driver/nvidia/params");
  EXPECT_EQ(t.platform.firmware_vm, Known::kUnknown);
  std::string smbios(0x18, '\0');  // type 0, length 0x18, byte 0x13 bit 4: a virtual machine
  smbios[1] = 0x18;
  smbios[0x13] = 0x10;
  s.write("sys/firmware/dmi/entries/0-0/raw", smbios + std::string(2, '\0'));
  EXPECT_EQ(read_topology(Sysroot::open(s.str())).platform.firmware_vm, Known::kYes);

  fs::remove(s.dir() / "proc/driver/nvidia/params");
  fs::remove(s.dir() / "proc/modules");
  t = read_topology(Sysroot::open(s.str()));
  EXPECT_EQ(t.platform.nvidia_grdma_override, 2);  // the configuration, said as such
  EXPECT_NE(t.platform.nvidia_grdma_override_source.find("etc/modprobe.d/nvidia.conf"), std::string::npos);
  EXPECT_EQ(t.platform.nvidia_peermem_loaded, Known::kUnknown);  // a snapshot without /proc/modules

  s.write("proc/cmdline", "root=/dev/sda1 nvidia.NVreg_GrdmaPciTopoCheckOverride=1\n");
  EXPECT_EQ(read_topology(Sysroot::open(s.str())).platform.nvidia_grdma_override, 1);

  fs::remove(s.dir() / "etc/modprobe.d/nvidia.conf");
  s.write("proc/cmdline", "root=/dev/sda1\n");
  s.write("proc/driver/nvidia/params", "ResmanDebugLevel: 4294967295\n");  // a driver without the key
  EXPECT_FALSE(read_topology(Sysroot::open(s.str())).platform.nvidia_grdma_override.has_value());
}

TEST(NvidiaThirdParty, SnapshotKeepsWhatTheGateReads) {
  test::SysrootDir s;
  s.function("pci0000:00/0000:00:01.0", test::ConfigBytes(0x10de, 0x2331, 0x030200, 0).bytes());
  s.write("proc/modules", "nvidia_fs 16384 0 - Live 0x0\n");
  s.write("proc/driver/nvidia/params", "GrdmaPciTopoCheckOverride: 2\n");
  s.write("etc/modprobe.d/nvidia.conf", "options nvidia NVreg_GrdmaPciTopoCheckOverride=1\n");
  std::string out = ::testing::TempDir() + "/nvtp-snapshot-" + std::to_string(::getpid()) + ".tar.gz";
  fs::remove(out);
  Sysroot root = Sysroot::open(s.str());
  write_snapshot(root, read_topology(root), out, {});
  Sysroot captured = Sysroot::open(out);
  EXPECT_TRUE(captured.exists("etc/modprobe.d/nvidia.conf"));
  Topology t = read_topology(captured);
  EXPECT_EQ(t.platform.nvidia_grdma_override, 2);
  EXPECT_EQ(t.platform.nvidia_fs_loaded, Known::kYes);
  EXPECT_EQ(t.platform.nvidia_peermem_loaded, Known::kNo);
  fs::remove(out);
}

std::string env_of(const Topology& t) {
  KernelRules rules = kernel_rules(t);
  policy::PolicyEvaluator evaluator(t, rules, default_rules(), nullptr);
  return policy::env_exports(evaluator, matrix_devices(t, false));
}

TEST(NvidiaThirdParty, EnvLowersTheGdrLevelOnlyBelowARefusedPair) {
  EXPECT_NE(env_of(one_switch().t).find("unset NCCL_NET_GDR_LEVEL"), std::string::npos);
  std::string refused = env_of(one_switch(2).t);  // refused at PIX: no GPUDirect RDMA at all
  EXPECT_NE(refused.find("export NCCL_NET_GDR_LEVEL=LOC"), std::string::npos) << refused;
  // Refused at PHB only: NCCL's default already stages there.
  std::string phb = env_of(root_ports(2).t);
  EXPECT_NE(phb.find("unset NCCL_NET_GDR_LEVEL"), std::string::npos) << phb;
  EXPECT_EQ(env_of(Tree().t).find("NCCL_NET_GDR_LEVEL"), std::string::npos);  // no GPU<->NIC pair
}

// ---------------------------------------------------------------------------------------------
// NVIDIA/open-gpu-kernel-modules#1253 (public-cases/nvidia1253-arrowlake-nic-gpu-dmabuf-read-fail):
// Core Ultra 9 285K (Arrow Lake-S, family 6 model 0xC6) on a Z890 board, the NVIDIA GPU and a
// ConnectX-5 (15b3:1017) on two CPU root ports; the dma-buf mapping was made (the bpftrace shows
// the BAR1 address handed to the NIC: the driver's gate allowed, as with override 0), NIC writes
// to GPU memory worked, reads failed. Control: the same stack on a Threadripper PRO worked both
// ways. The reporter's GPU model and host bridge ID are in the gist, not the excerpt: the tree
// keeps what the excerpt states.
// ---------------------------------------------------------------------------------------------

Tree issue1253(bool intel_client) {
  Tree tree;
  if (intel_client) tree.t.platform.cpu_model = 0xC6;
  else tree.amd_zen(0x19);
  tree.rp("00:01.0");
  tree.rp("00:06.0");
  gpu(tree, "01:00.0", "00:01.0");
  nic(tree, "02:00.0", "00:06.0", 0x1017);
  tree.t.platform.nvidia_grdma_override = 0;
  tree.t.platform.nvidia_peermem_loaded = Known::kNo;  // dma-buf path
  return tree;
}

TEST(PublicCaseNvidia1253, ArrowLakeRootPortsAreHostStagedSayingWritesWork) {
  for (auto [p, c] : {std::pair{"01:00.0", "02:00.0"}, std::pair{"02:00.0", "01:00.0"}}) {
    auto r = decide(issue1253(true), p, c);
    expect_vendor_driver(r, Action::kHostStaged, "nvidia-peer-reads-intel-client");
    EXPECT_EQ(r.fact("platform.intel_client_cpu"), "true");
    EXPECT_EQ(r.fact("vendor.nvidia_grdma_allowed"), "true");  // the driver maps it; the platform fails reads
    EXPECT_EQ(r.source(), "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1253");
    EXPECT_NE(r.d.decision.reason.find("0000:" + std::string(c) + " writing into 0000:" + p + "'s memory works"), std::string::npos)
        << r.d.decision.reason;
  }
}

TEST(PublicCaseNvidia1253, ThreadripperProControlIsPeer) {
  auto r = decide(issue1253(false), "01:00.0", "02:00.0");
  expect_vendor_driver(r, Action::kPeer, "nvidia-third-party-allows");
  EXPECT_EQ(r.fact("platform.intel_client_cpu"), "false");
}

TEST(PublicCaseNvidia1253, VerifiedCopyOrASharedSwitchLiftsTheReadRule) {
  policy::VendorFactsDocument verified;
  auto& f = verified.pairs[{*Bdf::parse("01:00.0"), *Bdf::parse("02:00.0")}];
  f.set("vendor.copy_result", std::string("verified"));
  f.set("vendor.copy_verified", true);
  Tree tree = issue1253(true);
  EXPECT_EQ(decide(tree, "01:00.0", "02:00.0", &verified).d.decision.rule, "nvidia-third-party-allows");
  Tree below = one_switch();
  below.t.platform.cpu_model = 0xC6;  // Arrow Lake, GPU and NIC below one switch: traffic stays there
  EXPECT_EQ(decide(below, "03:00.0", "04:00.0").d.decision.rule, "nvidia-third-party-allows");
}

TEST(IntelClientCpu, ByTheKernelsModelNames) {
  Platform p;
  p.cpu_vendor = "GenuineIntel";
  p.cpu_family = 6;
  for (int client : {0xC6, 0xB7, 0x97, 0xA7, 0x9E}) {
    p.cpu_model = client;
    EXPECT_EQ(policy::intel_client_cpu(p), true) << client;
  }
  for (int server : {0x8F, 0x55, 0x6A, 0xAD, 0x4F}) {
    p.cpu_model = server;
    EXPECT_EQ(policy::intel_client_cpu(p), false) << server;
  }
  // Every model the advisory intel-client-peer-reads listed by hand before it read this fact.
  for (int client : {142, 158, 165, 166, 167, 151, 154, 183, 186, 191, 170, 172, 189, 197, 198}) {
    p.cpu_model = client;
    EXPECT_EQ(policy::intel_client_cpu(p), true) << client;
  }
  p.cpu_model = 0x57;  // Xeon Phi: the naming does not class it
  EXPECT_FALSE(policy::intel_client_cpu(p).has_value());
  p.cpu_vendor = "AuthenticAMD";
  EXPECT_EQ(policy::intel_client_cpu(p), false);
}

// ---------------------------------------------------------------------------------------------
// The recorded 2x H200 VM (tests/data/machines/h200x2-firecracker-vm): its GPU<->NIC pairs (the
// capture's NIC is a virtio-net function, 1af4:1041, class 0200).
// ---------------------------------------------------------------------------------------------

TEST(H200Snapshot, GpuNicPairsAreDecidedByTheThirdPartyRuleNotByConfigP2pdma) {
  Topology t = read_topology(Sysroot::open(test::data_path("machines/h200x2-firecracker-vm/sysroot.tar.gz")));
  std::vector<size_t> gpus, nics;
  for (size_t i = 0; i < t.functions.size(); ++i) {
    if (t.functions[i].driver == "nvidia") gpus.push_back(i);
    if (classify_device(t.functions[i]) == DeviceClass::kNic) nics.push_back(i);
  }
  ASSERT_EQ(gpus.size(), 2u);
  ASSERT_FALSE(nics.empty());
  for (size_t g : gpus)
    for (size_t n : nics)
      for (auto [p, c] : {std::pair{g, n}, std::pair{n, g}}) {
        auto r = decide(t, p, c);
        // The guest's NIC is virtio-net (1af4:1041 on virtio-pci): no RDMA provider, so nothing can
        // map GPU memory for it, whatever the gate (whose override this capture lacks) would say.
        expect_vendor_driver(r, Action::kHostStaged, "nvidia-third-party-no-importer");
        EXPECT_EQ(r.fact("vendor.nvidia_importer"), "none");
        EXPECT_EQ(r.fact("vendor.nvidia_passthrough"), "true");
        EXPECT_EQ(r.fact("vendor.nccl_path_class"), "PHB");  // every device on the guest's root bus
        EXPECT_EQ(r.d.decision.reason.find("CONFIG_PCI_P2PDMA"), std::string::npos);
      }
  // Were the NIC an RDMA provider's (a ConnectX VF passed through), the gate would decide: unknown
  // without the driver's parameters, and with them stated the GPUs are passed through and it allows.
  for (size_t n : nics) t.functions[n].driver = "mlx5_core";
  auto unknown = decide(t, gpus[0], nics[0]);
  expect_vendor_driver(unknown, Action::kHostStaged, "nvidia-third-party-unknown");
  EXPECT_NE(unknown.d.decision.reason.find("PHB"), std::string::npos);
  t.platform.nvidia_grdma_override = 0;
  auto r = decide(t, gpus[0], nics[0]);
  expect_vendor_driver(r, Action::kPeer, "nvidia-third-party-allows");
  EXPECT_EQ(r.fact("vendor.nvidia_grdma_step"), "passthrough");
  EXPECT_EQ(r.fact("vendor.nvidia_importer"), "rdma");
}

// A real driver's parameters (tests/data/SOURCE.md: the H100 VM, 2026-11-25): the snapshot keeps
// /proc/driver/nvidia/params and /proc/modules, so the gate's inputs are read, not unknown.
TEST(H100Snapshot, TheDriversParametersAreReadFromTheCapture) {
  Topology t = read_topology(
      Sysroot::open(test::data_path("machines/h100-firecracker-vm/live-2026-11-25/snapshot.tar.gz")));
  ASSERT_EQ(t.platform.nvidia_grdma_override, std::optional<int64_t>{0});
  EXPECT_NE(t.platform.nvidia_grdma_override_source.find("proc/driver/nvidia/params"), std::string::npos)
      << t.platform.nvidia_grdma_override_source;
  EXPECT_EQ(t.platform.nvidia_peermem_loaded, Known::kNo);
  std::optional<size_t> gpu, nic;
  for (size_t i = 0; i < t.functions.size(); ++i) {
    if (t.functions[i].driver == "nvidia") gpu = i;
    if (classify_device(t.functions[i]) == DeviceClass::kNic) nic = i;
  }
  ASSERT_TRUE(gpu && nic);
  auto r = decide(t, *gpu, *nic);
  expect_vendor_driver(r, Action::kHostStaged, "nvidia-third-party-no-importer");
  EXPECT_EQ(r.fact("vendor.nvidia_grdma_allowed"), "true");  // the gate allows: the GPU is passed through
  EXPECT_EQ(r.fact("vendor.nvidia_grdma_step"), "passthrough");
  // The same VM with an RDMA NIC passed through would be GPUDirect RDMA's, without nvidia_peermem.
  t.functions[*nic].driver = "mlx5_core";
  auto rdma = decide(t, *gpu, *nic);
  expect_vendor_driver(rdma, Action::kPeer, "nvidia-third-party-allows");
  bool warned = false;
  for (const auto& fired : rdma.d.decision.fired) warned |= fired.id == "nvidia-peermem-not-loaded";
  EXPECT_TRUE(warned);
}

}  // namespace
}  // namespace p2paudit
