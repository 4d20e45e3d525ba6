// SPDX-License-Identifier: GPL-2.0-or-later
// Machines rebuilt from public P2P reports (tests/data/public-reports/<case>/SOURCE.md), as tests
// of the decisions (issue 29). Each machine is written as the sysroot a capture of it would be:
// config space, sysfs links, IOMMU groups, the kernel's command line, release and config, and
// /proc/cpuinfo; it is read back by the reader, so the IOMMU mode, ACS bits and peer cliques come
// from where a real capture has them. Where the report gives the runtime's answer (CUDA's
// cudaDeviceCanAccessPeer, `nvidia-smi topo -p2p`, HIP, Level Zero), it is passed the way
// --vendor-facts passes it.
//
// The acceptance, per pair: where reality failed (hung, zeros, corrupt, refused), the decision is
// not a plain peer; where it worked, the decision is peer wherever the capture shows what decides
// it. Each report's facts are those it published; a part the tree needs that it does not name (a
// root port's address, a switch's IDs, a GPU's PCI ID) is a stand-in, said so where it is added
// and in the case's SOURCE.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "sysroot_builder.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using policy::Action;

using test::kEndpoint;
using test::kRootPort;
using test::kSwitchDown;
using test::kSwitchUp;
constexpr uint16_t kKernelAcs = kAcsSv | kAcsRr | kAcsCr | kAcsUf;  // what the kernel sets once an IOMMU asks
constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;

// The IOMMU as a capture shows it: which unit registered (sys/class/iommu) and the default domain
// type of every group (sys/kernel/iommu_groups/N/type; empty: a kernel before 5.11 has none).
// `groups` false: the IOMMU is off (no groups at all).
struct Iommu {
  std::string unit;  // "ivhd0" (AMD-Vi), "dmar0" (VT-d), "" (none registered)
  std::string type;  // "DMA-FQ", "DMA", "identity", ""
  bool groups = true;
};
const Iommu kAmdViTranslating{"ivhd0", "DMA-FQ"}, kAmdViPassthrough{"ivhd0", "identity"};
const Iommu kVtdTranslating{"dmar0", "DMA-FQ"}, kVtdPassthrough{"dmar0", "identity"}, kIommuOff{"", "", false};

// One function of the machine, written on read().
struct Node {
  std::string bdf, parent, host;
  test::ConfigBytes config;
  bool bridge = false;
  std::string driver;
  int numa_node = -1;
  std::vector<std::pair<int, uint64_t>> bars;  // (BAR index, size), 64-bit prefetchable above 4 GiB
  bool p2pmem = false;                          // an NVMe CMB published to P2PDMA (sys/.../p2pmem)
};

// A machine of a report, as its capture would be.
class Machine {
 public:
  Machine(const std::string& release, const std::string& cmdline, const std::string& cpu_vendor, int family, int model,
          Iommu iommu, bool guest = false)
      : iommu_(std::move(iommu)) {
    fs::remove(s_.dir() / "boot/config-6.8.0");
    s_.write("proc/sys/kernel/osrelease", release + "\n");
    s_.write("proc/cmdline", "BOOT_IMAGE=/vmlinuz-" + release + " root=/dev/sda1 ro " + cmdline + "\n");
    s_.write("boot/config-" + release,
             "CONFIG_PCI_P2PDMA=y\nCONFIG_INTEL_IOMMU=y\nCONFIG_AMD_IOMMU=y\nCONFIG_IOMMU_DEFAULT_DMA_LAZY=y\n");
    s_.write("proc/cpuinfo", fmt::format("processor\t: 0\nvendor_id\t: {}\ncpu family\t: {}\nmodel\t\t: {}\n"
                                         "flags\t\t: fpu sse2{}\naddress sizes\t: 48 bits physical, 57 bits virtual\n",
                                         cpu_vendor, family, model, guest ? " hypervisor" : ""));
    if (!iommu_.unit.empty()) s_.link("sys/class/iommu/" + iommu_.unit, "../../devices/virtual/iommu/" + iommu_.unit);
  }

  // The root bus's first device, the one the kernel's whitelist is keyed by.
  void host_bridge(const std::string& host, uint16_t vendor, uint16_t device, const std::string& bdf) {
    add(bdf, "", host, test::ConfigBytes(vendor, device, 0x060000, -1), false);
  }
  void bridge(const std::string& bdf, const std::string& parent, uint16_t vendor, uint16_t device, int type,
              std::optional<uint16_t> acs = std::nullopt, const std::string& host = "") {
    test::ConfigBytes c(vendor, device, 0x060400, type, true);
    if (acs) c.acs(*acs);
    add(bdf, parent, host, c, true);
  }
  Node& endpoint(const std::string& bdf, const std::string& parent, uint16_t vendor, uint16_t device,
                 uint32_t class_code, const std::string& driver, int numa_node = -1, uint64_t bar_size = 0) {
    Node& n = add(bdf, parent, "", test::ConfigBytes(vendor, device, class_code, kEndpoint), false);
    n.driver = driver;
    n.numa_node = numa_node;
    if (bar_size) n.bars.push_back({vendor == 0x10de ? 1 : 0, bar_size});
    return n;
  }
  // NVIDIA's peer-clique capability, as QEMU's x-nv-gpudirect-clique=N injects it (a vendor
  // capability after the PCIe one: "P2P" signature 0x5032, version 0, the clique in bits 22:19).
  void clique(const std::string& bdf, uint8_t id) {
    test::ConfigBytes& c = nodes_.at(at_.at(bdf)).config;
    c.b[0x41] = 0x60;
    c.b[0x60] = 0x09, c.b[0x61] = 0, c.b[0x62] = 8, c.b[0x63] = 0x50;
    c.put32(0x64, 0x5032u | (uint32_t{id} << 19));
  }

  Topology read() {
    int group = 0;
    for (const Node& n : nodes_) write(n, group++);
    return read_topology(Sysroot::open(s_.str()));
  }

 private:
  Node& add(const std::string& bdf, const std::string& parent, const std::string& host, const test::ConfigBytes& c,
            bool bridge) {
    Node n{bdf, parent, parent.empty() ? (host.empty() ? "pci0000:00" : host) : nodes_.at(at_.at(parent)).host, c,
           bridge, "", -1, {}, false};
    at_[bdf] = nodes_.size();
    nodes_.push_back(n);
    return nodes_.back();
  }
  std::string path(const Node& n) const {
    std::string p = "0000:" + n.bdf;
    for (const Node* up = &n; !up->parent.empty();) {
      up = &nodes_.at(at_.at(up->parent));
      p = "0000:" + up->bdf + "/" + p;
    }
    return n.host + "/" + p;
  }
  int bus(const std::string& bdf) const { return std::stoi(bdf.substr(0, 2), nullptr, 16); }
  // The buses below a bridge, for its secondary and subordinate bus numbers.
  std::pair<int, int> buses_below(const std::string& bdf) const {
    int lo = 0x100, hi = -1;
    for (const Node& n : nodes_) {
      for (const Node* up = &n; !up->parent.empty(); up = &nodes_.at(at_.at(up->parent)))
        if (up->parent == bdf) {
          lo = std::min(lo, bus(n.bdf)), hi = std::max(hi, bus(n.bdf));
          break;
        }
    }
    return hi < 0 ? std::pair{bus(bdf) + 1, bus(bdf) + 1} : std::pair{lo, hi};
  }
  void write(const Node& n, int group) {
    test::ConfigBytes c = n.config;
    if (n.bridge) {
      auto [secondary, subordinate] = buses_below(n.bdf);
      c.buses(static_cast<uint8_t>(bus(n.bdf)), static_cast<uint8_t>(secondary), static_cast<uint8_t>(subordinate));
      // A 64-bit prefetchable window over the high MMIO every BAR here is placed in.
      const uint64_t base = uint64_t{1} << 40, limit = (uint64_t{1} << 44) - 1;
      c.put16(0x24, static_cast<uint16_t>(((base >> 16) & 0xfff0) | 1));
      c.put16(0x26, static_cast<uint16_t>(((limit >> 16) & 0xfff0) | 1));
      c.put32(0x28, static_cast<uint32_t>(base >> 32));
      c.put32(0x2c, static_cast<uint32_t>(limit >> 32));
    }
    const std::string dir = path(n), sys = "sys/devices/" + dir;
    s_.function(dir, c.bytes());
    std::string to_sys;  // from the function's directory back up to sys/
    for (long i = 0; i < std::count(dir.begin(), dir.end(), '/') + 2; ++i) to_sys += "../";
    if (!n.driver.empty()) s_.link(sys + "/driver", to_sys + "bus/pci/drivers/" + n.driver);
    s_.write(sys + "/numa_node", std::to_string(n.numa_node) + "\n");
    if (!n.bars.empty()) {
      std::string resource;
      for (int i = 0; i < 7; ++i) {
        uint64_t size = 0;
        for (auto [index, s] : n.bars)
          if (index == i) size = s;
        const uint64_t start = size ? next_bar_ : 0;
        if (size) next_bar_ += std::max(size, uint64_t{1} << 32);
        resource += fmt::format("0x{:016x} 0x{:016x} 0x{:016x}\n", start, size ? start + size - 1 : 0,
                                size ? 0x14220c : 0);
      }
      s_.write(sys + "/resource", resource);
    }
    if (n.p2pmem) {
      s_.write(sys + "/p2pmem/size", "2097152\n");
      s_.write(sys + "/p2pmem/available", "2097152\n");
      s_.write(sys + "/p2pmem/published", "1\n");
    }
    if (iommu_.groups) {  // one group a function, as with ACS isolating every port
      const std::string g = "sys/kernel/iommu_groups/" + std::to_string(group);
      s_.link(g + "/devices/0000:" + n.bdf, "../../../../devices/" + dir);
      s_.link(sys + "/iommu_group", to_sys + "kernel/iommu_groups/" + std::to_string(group));
      if (!iommu_.type.empty()) s_.write(g + "/type", iommu_.type + "\n");
    }
  }

  test::SysrootDir s_;
  Iommu iommu_;
  std::vector<Node> nodes_;
  std::map<std::string, size_t> at_;
  uint64_t next_bar_ = uint64_t{1} << 40;
};

// The runtime's answer for both directions of a pair, as a --vendor-facts file gives it.
struct RuntimeAnswers {
  ordered_json pairs = ordered_json::array();
  RuntimeAnswers& pair(const std::string& a, const std::string& b, const ordered_json& facts) {
    for (auto [p, c] : {std::pair{a, b}, std::pair{b, a}})
      pairs.push_back({{"provider", "0000:" + p}, {"client", "0000:" + c}, {"facts", facts}});
    return *this;
  }
  policy::VendorFactsDocument document() const {
    ordered_json doc = {{"schema_version", 1}, {"pairs", pairs}};
    return policy::VendorFactsDocument::parse(doc.dump(), "public report");
  }
};
const ordered_json kCudaYes = {{"vendor.peer_supported", true}, {"vendor.nvlink", false}};
const ordered_json kCudaNo = {{"vendor.peer_supported", false}, {"vendor.nvlink", false}};
const ordered_json kHipYes = {{"vendor.peer_supported", true}, {"vendor.xgmi", false}};

policy::PairDecision decide(const Topology& t, const std::string& p, const std::string& c,
                            const policy::VendorFactsDocument* facts = nullptr) {
  static const auto policy_rules = policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  KernelRules rules = load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", t.platform, {});
  return policy::decide_pair(t, rules, policy_rules, facts, *t.index_of(*Bdf::parse(p)), *t.index_of(*Bdf::parse(c)));
}

std::string told(const policy::PairDecision& d) {
  return fmt::format("{} ({}): {}", policy::to_string(d.decision.action), d.decision.rule, d.decision.reason);
}

// Reality failed on this pair: the decision must not be a plain peer. Today that is any action but
// peer; once decisions carry their uncertainty, an uncertain peer is no plain peer either (the
// lead extends this helper).
void expect_not_plain_peer(const policy::PairDecision& d, const std::string& what) {
  EXPECT_NE(d.decision.action, Action::kPeer) << what << ": " << told(d);
}
// Reality worked on this pair and the capture shows what decides it: peer.
void expect_peer(const policy::PairDecision& d, const std::string& what) {
  EXPECT_EQ(d.decision.action, Action::kPeer) << what << ": " << told(d);
}

// Both directions of every pair of `devices`.
template <typename F>
void each_pair(const std::vector<std::string>& devices, F f) {
  for (const auto& a : devices)
    for (const auto& b : devices)
      if (a != b) f(a, b);
}

// ---------------------------------------------------------------------------------------------
// (b) nccl257-4x1080ti-2socket-intel-iommu-on: four GTX 1080 Ti at 02, 03 (socket 0) and 82, 83
// (socket 1); CUDA: peers within a socket, none across; NCCL's AllReduce hung with intel_iommu=on
// and ran once the kernel booted with intel_iommu=off. The CPU, host bridges and root ports are
// stand-ins (Xeon E5 v4, 8086:6f00 / 6f04 / 6f08), each GPU below a root port of its socket; the
// kernel release is the era's (4.15, no iommu_group type files), so the mode comes from the
// command line and the kernel config.
// ---------------------------------------------------------------------------------------------
Topology nccl257(const std::string& cmdline, Iommu iommu) {
  Machine m("4.15.0-64-generic", cmdline, "GenuineIntel", 6, 79, iommu);
  m.host_bridge("pci0000:00", 0x8086, 0x6f00, "00:00.0");
  m.bridge("00:02.0", "", 0x8086, 0x6f04, kRootPort, kKernelAcs);
  m.bridge("00:03.0", "", 0x8086, 0x6f08, kRootPort, kKernelAcs);
  m.endpoint("02:00.0", "00:02.0", 0x10de, 0x1b06, 0x030000, "nvidia", 0, 256 * kMiB);
  m.endpoint("03:00.0", "00:03.0", 0x10de, 0x1b06, 0x030000, "nvidia", 0, 256 * kMiB);
  m.host_bridge("pci0000:80", 0x8086, 0x6f00, "80:00.0");
  m.bridge("80:02.0", "", 0x8086, 0x6f04, kRootPort, kKernelAcs, "pci0000:80");
  m.bridge("80:03.0", "", 0x8086, 0x6f08, kRootPort, kKernelAcs, "pci0000:80");
  m.endpoint("82:00.0", "80:02.0", 0x10de, 0x1b06, 0x030000, "nvidia", 1, 256 * kMiB);
  m.endpoint("83:00.0", "80:03.0", 0x10de, 0x1b06, 0x030000, "nvidia", 1, 256 * kMiB);
  return m.read();
}

policy::VendorFactsDocument nccl257_cuda() {
  RuntimeAnswers a;
  a.pair("02:00.0", "03:00.0", kCudaYes).pair("82:00.0", "83:00.0", kCudaYes);
  for (const char* x : {"02:00.0", "03:00.0"})
    for (const char* y : {"82:00.0", "83:00.0"}) a.pair(x, y, kCudaNo);
  return a.document();
}

TEST(PublicReports, Nccl257IntelIommuOnTwoSocket1080TiIsNotPeer) {
  const Topology t = nccl257("intel_iommu=on", {"dmar0", ""});
  ASSERT_EQ(t.platform.iommu_mode, "translated") << t.platform.iommu_mode_source;
  const auto cuda = nccl257_cuda();
  // The pairs CUDA called peers hung under NCCL; the others were never peers (CUDA said no).
  each_pair({"02:00.0", "03:00.0", "82:00.0", "83:00.0"}, [&](const std::string& p, const std::string& c) {
    expect_not_plain_peer(decide(t, p, c, &cuda), "intel_iommu=on " + p + " -> " + c);
  });
}

TEST(PublicReports, Nccl257WithIntelIommuOffThePeersCudaNamedArePeer) {
  const Topology t = nccl257("intel_iommu=off", kIommuOff);
  ASSERT_EQ(t.platform.iommu_mode, "off") << t.platform.iommu_mode_source;
  const auto cuda = nccl257_cuda();
  for (auto [p, c] : {std::pair{"02:00.0", "03:00.0"}, std::pair{"83:00.0", "82:00.0"}})
    expect_peer(decide(t, p, c, &cuda), std::string("intel_iommu=off ") + p + " -> " + c);
  expect_not_plain_peer(decide(t, "03:00.0", "82:00.0", &cuda), "across the sockets CUDA said no");
}

// ---------------------------------------------------------------------------------------------
// cuda-samples48-3x1080ti-x399-amdvi-page-fault: three GTX 1080 Ti on X399 boards (Threadripper,
// family 17h); simpleP2P and p2pBandwidthLatencyTest hung the GPUs with AMD-Vi IO_PAGE_FAULTs
// logged by nvidia 0000:07:00.0; with the IOMMU disabled the tests ran. The samples attempted peer
// copies, so CUDA reported peer access (inferred). Root ports (1022:1453) and the other GPUs'
// addresses are stand-ins; the kernel release is not stated (5.4 stands in).
// ---------------------------------------------------------------------------------------------
Topology cuda_samples48(Iommu iommu) {
  Machine m("5.4.0-48-generic", "", "AuthenticAMD", 0x17, 1, iommu);
  m.host_bridge("pci0000:00", 0x1022, 0x1450, "00:00.0");
  m.bridge("00:01.1", "", 0x1022, 0x1453, kRootPort, kKernelAcs);
  m.bridge("00:03.1", "", 0x1022, 0x1453, kRootPort, kKernelAcs);
  m.endpoint("07:00.0", "00:01.1", 0x10de, 0x1b06, 0x030000, "nvidia", 0, 256 * kMiB);
  m.endpoint("08:00.0", "00:03.1", 0x10de, 0x1b06, 0x030000, "nvidia", 0, 256 * kMiB);
  m.host_bridge("pci0000:40", 0x1022, 0x1450, "40:00.0");
  m.bridge("40:01.1", "", 0x1022, 0x1453, kRootPort, kKernelAcs, "pci0000:40");
  m.endpoint("41:00.0", "40:01.1", 0x10de, 0x1b06, 0x030000, "nvidia", 1, 256 * kMiB);
  return m.read();
}

TEST(PublicReports, CudaSamples48AmdViTranslatingGeForcePairsAreNotPeer) {
  RuntimeAnswers a;
  a.pair("07:00.0", "08:00.0", kCudaYes).pair("07:00.0", "41:00.0", kCudaYes).pair("08:00.0", "41:00.0", kCudaYes);
  const auto cuda = a.document();
  const Topology t = cuda_samples48(kAmdViTranslating);
  ASSERT_EQ(t.platform.iommu_mode, "translated");
  each_pair({"07:00.0", "08:00.0", "41:00.0"}, [&](const std::string& p, const std::string& c) {
    expect_not_plain_peer(decide(t, p, c, &cuda), "AMD-Vi translating " + p + " -> " + c);
  });
  // "disabling IOMMU does allow those test to run"
  const Topology off = cuda_samples48(kIommuOff);
  expect_peer(decide(off, "07:00.0", "08:00.0", &cuda), "IOMMU off");
}

// ---------------------------------------------------------------------------------------------
// tinygrad18-4090-amdvi-zeros: RTX 4090s on tinygrad's P2P driver (CUDA peer access yes); with the
// IOMMU on, peer copies logged IO_PAGE_FAULT and the tensor arrived zeroed; IOMMU off fixed it, and
// a maintainer: iommu=pt suffices. AMD-Vi names the host's IOMMU; CPU (Zen 3, family 19h), root
// ports and addresses are stand-ins, each GPU on a root port of its own host bridge.
// ---------------------------------------------------------------------------------------------
Topology tinygrad18(const std::string& cmdline, Iommu iommu) {
  Machine m("6.8.0-45-generic", cmdline, "AuthenticAMD", 0x19, 1, iommu);
  for (auto [host, hb, rp, gpu] : {std::tuple{"pci0000:00", "00:00.0", "00:01.1", "01:00.0"},
                                   std::tuple{"pci0000:40", "40:00.0", "40:01.1", "41:00.0"}}) {
    m.host_bridge(host, 0x1022, 0x1480, hb);
    m.bridge(rp, "", 0x1022, 0x1483, kRootPort, kKernelAcs, host);
    m.endpoint(gpu, rp, 0x10de, 0x2684, 0x030000, "nvidia", 0, 32 * kGiB);
  }
  return m.read();
}

TEST(PublicReports, Tinygrad18PatchedGeForceThroughTranslatingAmdViIsNotPeer) {
  const auto cuda = RuntimeAnswers().pair("01:00.0", "41:00.0", kCudaYes).document();
  const Topology on = tinygrad18("", kAmdViTranslating);
  expect_not_plain_peer(decide(on, "01:00.0", "41:00.0", &cuda), "AMD-Vi translating (zeros)");
  expect_not_plain_peer(decide(on, "41:00.0", "01:00.0", &cuda), "AMD-Vi translating (zeros)");
  const Topology pt = tinygrad18("iommu=pt", kAmdViPassthrough);
  ASSERT_EQ(pt.platform.iommu_mode, "passthrough");
  expect_peer(decide(pt, "01:00.0", "41:00.0", &cuda), "iommu=pt");
}

// ---------------------------------------------------------------------------------------------
// (f) fideslib28-4gpu-amd-amdvi-dropped-writes: four NVIDIA GPUs on an AMD host, AMD-Vi active
// (ivhd0..3), no iommu parameter (translating by default), each GPU in its own IOMMU group;
// cudaDeviceCanAccessPeer 1 and `topo -p2p r` OK for every pair, yet direct peer writes were
// silently dropped. topo -m: GPU0/GPU1 NODE, GPU2/GPU3 SYS. The runtime's NVLink answer is not in
// the report, so vendor.nvlink is left unset. GPU model: RTX PRO 6000 Blackwell Workstation
// (10de:2bb1) stands in, a workstation part without NVLink; CPU, bridges, addresses are stand-ins.
// ---------------------------------------------------------------------------------------------
Topology fideslib28(Iommu iommu) {
  Machine m("6.8.0-60-generic", "quiet splash", "AuthenticAMD", 0x19, 0x11, iommu);
  m.host_bridge("pci0000:00", 0x1022, 0x14a4, "00:00.0");
  m.bridge("00:01.1", "", 0x1022, 0x14ab, kRootPort, kKernelAcs);
  m.bridge("00:03.1", "", 0x1022, 0x14ab, kRootPort, kKernelAcs);
  m.endpoint("01:00.0", "00:01.1", 0x10de, 0x2bb1, 0x030000, "nvidia", 0, 128 * kGiB);
  m.endpoint("02:00.0", "00:03.1", 0x10de, 0x2bb1, 0x030000, "nvidia", 0, 128 * kGiB);
  m.host_bridge("pci0000:80", 0x1022, 0x14a4, "80:00.0");
  m.bridge("80:01.1", "", 0x1022, 0x14ab, kRootPort, kKernelAcs, "pci0000:80");
  m.bridge("80:03.1", "", 0x1022, 0x14ab, kRootPort, kKernelAcs, "pci0000:80");
  m.endpoint("81:00.0", "80:01.1", 0x10de, 0x2bb1, 0x030000, "nvidia", 1, 128 * kGiB);
  m.endpoint("82:00.0", "80:03.1", 0x10de, 0x2bb1, 0x030000, "nvidia", 1, 128 * kGiB);
  return m.read();
}

TEST(PublicReports, Fideslib28FourGpuAmdHostWithAmdViTranslatingIsNotPeerOnTheDriversYesAlone) {
  const std::vector<std::string> gpus = {"01:00.0", "02:00.0", "81:00.0", "82:00.0"};
  RuntimeAnswers a;
  for (size_t i = 0; i < gpus.size(); ++i)
    for (size_t j = i + 1; j < gpus.size(); ++j) a.pair(gpus[i], gpus[j], {{"vendor.peer_supported", true}});
  const auto cuda = a.document();
  const Topology t = fideslib28(kAmdViTranslating);
  ASSERT_EQ(t.platform.iommu_mode, "translated");
  each_pair(gpus, [&](const std::string& p, const std::string& c) {
    expect_not_plain_peer(decide(t, p, c, &cuda), "AMD-Vi translating, NVLink unset " + p + " -> " + c);
  });
}

// ---------------------------------------------------------------------------------------------
// (a) rccl1129-2xmi100-amd-iommu-hang: two Instinct MI100 (1002:738c) at 03:00.0 and 2f:00.0, each
// behind the card's own switch, kernel 5.15.0-101-generic; RCCL warned of the missing iommu=pt and
// all_reduce_perf hung; with iommu=pt on the command line it ran. HIP reported the pair as peers
// (inferred: RCCL chose its P2P transport). The host's IOMMU lists as "Milan IOMMU" in the same
// reporter's lspci (ROCm/legacy-rocm-build#2927), so an EPYC Milan (family 19h) with AMD-Vi on by
// default; root ports and the cards' switch IDs (1002:14a0 / 14a1) are stand-ins.
// ---------------------------------------------------------------------------------------------
Topology rccl1129(const std::string& cmdline, Iommu iommu) {
  Machine m("5.15.0-101-generic", cmdline, "AuthenticAMD", 0x19, 1, iommu);
  m.host_bridge("pci0000:00", 0x1022, 0x1480, "00:00.0");
  m.bridge("00:01.1", "", 0x1022, 0x1483, kRootPort, kKernelAcs);
  m.bridge("00:03.1", "", 0x1022, 0x1483, kRootPort, kKernelAcs);
  m.bridge("01:00.0", "00:01.1", 0x1002, 0x14a0, kSwitchUp);
  m.bridge("02:00.0", "01:00.0", 0x1002, 0x14a1, kSwitchDown, kKernelAcs);
  m.endpoint("03:00.0", "02:00.0", 0x1002, 0x738c, 0x038000, "amdgpu", 0, 32 * kGiB);
  m.bridge("2d:00.0", "00:03.1", 0x1002, 0x14a0, kSwitchUp);
  m.bridge("2e:00.0", "2d:00.0", 0x1002, 0x14a1, kSwitchDown, kKernelAcs);
  m.endpoint("2f:00.0", "2e:00.0", 0x1002, 0x738c, 0x038000, "amdgpu", 0, 32 * kGiB);
  return m.read();
}

TEST(PublicReports, Rccl1129Mi100PairWithTheIommuTranslatingIsNotPeer) {
  const auto hip = RuntimeAnswers().pair("03:00.0", "2f:00.0", kHipYes).document();
  const Topology t = rccl1129("", kAmdViTranslating);
  ASSERT_EQ(t.platform.iommu_mode, "translated");
  expect_not_plain_peer(decide(t, "2f:00.0", "03:00.0", &hip), "MI100, AMD-Vi translating (hang)");
  expect_not_plain_peer(decide(t, "03:00.0", "2f:00.0", &hip), "MI100, AMD-Vi translating (hang)");
}

TEST(PublicReports, Rccl1129Mi100PairWithIommuPtIsPeer) {
  const auto hip = RuntimeAnswers().pair("03:00.0", "2f:00.0", kHipYes).document();
  const Topology t = rccl1129("iommu=pt", kAmdViPassthrough);
  ASSERT_EQ(t.platform.iommu_mode, "passthrough");
  expect_peer(decide(t, "2f:00.0", "03:00.0", &hip), "MI100, iommu=pt (ran)");
}

// ---------------------------------------------------------------------------------------------
// (c) nccl667-4gpu-plx-pix-pxb-hang: four GPUs on two sockets, topo -m PXB between GPU0/GPU1 and
// PIX between GPU2/GPU3; all_reduce_perf hung on the PXB and PIX pairs and ran only across SYS;
// pointed at the ACS section of NCCL's troubleshooting guide, the reporter disabled VT-d and it
// worked. With VT-d on the kernel sets ReqRedir/CmpltRedir on the switches' downstream ports (the
// capture's ACSCtl). The switches (Broadcom PEX88096 Gen4, 1000:c010), the GPUs (RTX A6000,
// 10de:2230), the Xeon (Ice Lake-SP, model 106) and addresses are stand-ins. CUDA said yes within
// a switch (NVIDIA's driver recognises a common PLX/Broadcom switch) and no across sockets.
// ---------------------------------------------------------------------------------------------
Topology nccl667(const std::string& cmdline, Iommu iommu, std::optional<uint16_t> dsp_acs) {
  Machine m("5.15.0-60-generic", cmdline, "GenuineIntel", 6, 106, iommu);
  m.host_bridge("pci0000:00", 0x8086, 0x09a2, "00:00.0");
  m.bridge("00:02.0", "", 0x8086, 0x347a, kRootPort, kKernelAcs);
  // GPU0/GPU1 (PXB): two levels of switch.
  m.bridge("01:00.0", "00:02.0", 0x1000, 0xc010, kSwitchUp);
  m.bridge("02:00.0", "01:00.0", 0x1000, 0xc010, kSwitchDown, dsp_acs);
  m.bridge("02:04.0", "01:00.0", 0x1000, 0xc010, kSwitchDown, dsp_acs);
  m.bridge("03:00.0", "02:00.0", 0x1000, 0xc010, kSwitchUp);
  m.bridge("04:00.0", "03:00.0", 0x1000, 0xc010, kSwitchDown, dsp_acs);
  m.endpoint("05:00.0", "04:00.0", 0x10de, 0x2230, 0x030000, "nvidia", 0, 64 * kGiB);
  m.bridge("06:00.0", "02:04.0", 0x1000, 0xc010, kSwitchUp);
  m.bridge("07:00.0", "06:00.0", 0x1000, 0xc010, kSwitchDown, dsp_acs);
  m.endpoint("08:00.0", "07:00.0", 0x10de, 0x2230, 0x030000, "nvidia", 0, 64 * kGiB);
  // GPU2/GPU3 (PIX): one switch.
  m.host_bridge("pci0000:80", 0x8086, 0x09a2, "80:00.0");
  m.bridge("80:02.0", "", 0x8086, 0x347a, kRootPort, kKernelAcs, "pci0000:80");
  m.bridge("81:00.0", "80:02.0", 0x1000, 0xc010, kSwitchUp);
  m.bridge("82:00.0", "81:00.0", 0x1000, 0xc010, kSwitchDown, dsp_acs);
  m.bridge("82:04.0", "81:00.0", 0x1000, 0xc010, kSwitchDown, dsp_acs);
  m.endpoint("83:00.0", "82:00.0", 0x10de, 0x2230, 0x030000, "nvidia", 1, 64 * kGiB);
  m.endpoint("84:00.0", "82:04.0", 0x10de, 0x2230, 0x030000, "nvidia", 1, 64 * kGiB);
  return m.read();
}

policy::VendorFactsDocument nccl667_cuda() {
  RuntimeAnswers a;
  a.pair("05:00.0", "08:00.0", kCudaYes).pair("83:00.0", "84:00.0", kCudaYes);
  for (const char* x : {"05:00.0", "08:00.0"})
    for (const char* y : {"83:00.0", "84:00.0"}) a.pair(x, y, kCudaNo);
  return a.document();
}

TEST(PublicReports, Nccl667NvidiaPairsBelowRedirectingGen4SwitchPortsAreNotPeer) {
  const auto cuda = nccl667_cuda();
  // VT-d translating, and the kernel's ACS bits on the switch ports.
  const Topology vtd = nccl667("intel_iommu=on", kVtdTranslating, kKernelAcs);
  for (auto [p, c] : {std::pair{"05:00.0", "08:00.0"}, std::pair{"83:00.0", "84:00.0"}}) {
    expect_not_plain_peer(decide(vtd, p, c, &cuda), std::string("VT-d + ACS redirect ") + p + " -> " + c);
    expect_not_plain_peer(decide(vtd, c, p, &cuda), std::string("VT-d + ACS redirect ") + c + " -> " + p);
  }
  // iommu=pt: DMA untranslated, but the kernel still sets ACS redirect on the switch ports, which
  // sends the PIX pair's traffic up to the root complex: the ACS mechanism alone.
  const Topology pt = nccl667("intel_iommu=on iommu=pt", kVtdPassthrough, kKernelAcs);
  ASSERT_EQ(pt.platform.iommu_mode, "passthrough");
  auto d = decide(pt, "83:00.0", "84:00.0", &cuda);
  expect_not_plain_peer(d, "ACS redirect below one switch, iommu=pt");
  EXPECT_TRUE(std::get<bool>(*d.facts.get("kernel.acs_redirect")));
}

TEST(PublicReports, Nccl667WithVtdOffAndNoRedirectThePixPairIsPeer) {
  const auto cuda = nccl667_cuda();
  const Topology off = nccl667("intel_iommu=off", kIommuOff, uint16_t{0});
  for (auto [p, c] : {std::pair{"83:00.0", "84:00.0"}, std::pair{"05:00.0", "08:00.0"}})
    expect_peer(decide(off, p, c, &cuda), std::string("VT-d off, ACSCtl 0 ") + p + " -> " + c);
  // Across the sockets CUDA said no: those pairs staged, and ran.
  expect_not_plain_peer(decide(off, "05:00.0", "83:00.0", &cuda), "SYS pair, CUDA no");
}

// ---------------------------------------------------------------------------------------------
// nccl2335-2x3090-vfio-clique-mirror: two GeForce RTX 3090 (GA102, 10de:2204) passed through to a
// Proxmox q35 guest with x-nv-gpudirect-clique=1 on both; the driver granted peer access both ways
// (cudaDeviceCanAccessPeer 1, topo -p2p OK), but the peer mapping was a private mirror: NCCL hung,
// a copy-engine path returned wrong data. The guest's root ports and addresses are stand-ins.
// ---------------------------------------------------------------------------------------------
Topology nccl2335() {
  Machine m("6.8.0-60-generic", "", "AuthenticAMD", 0x19, 0x21, kIommuOff, /*guest=*/true);
  m.host_bridge("pci0000:00", 0x8086, 0x29c0, "00:00.0");
  m.bridge("00:1c.0", "", 0x1b36, 0x000c, kRootPort);
  m.bridge("00:1c.1", "", 0x1b36, 0x000c, kRootPort);
  m.endpoint("01:00.0", "00:1c.0", 0x10de, 0x2204, 0x030000, "nvidia", -1, 32 * kGiB);
  m.endpoint("02:00.0", "00:1c.1", 0x10de, 0x2204, 0x030000, "nvidia", -1, 32 * kGiB);
  m.clique("01:00.0", 1);
  m.clique("02:00.0", 1);
  return m.read();
}

TEST(PublicReports, Nccl2335GeForcePairInAVmCliqueIsNotPeer) {
  const Topology t = nccl2335();
  ASSERT_TRUE(t.platform.hypervisor);
  ASSERT_EQ(t.functions[*t.index_of(*Bdf::parse("01:00.0"))].nvidia_clique_state, CapState::kPresent);
  const auto cuda = RuntimeAnswers().pair("01:00.0", "02:00.0", kCudaYes).document();
  expect_not_plain_peer(decide(t, "01:00.0", "02:00.0", &cuda), "GeForce clique, driver yes (mirror)");
  expect_not_plain_peer(decide(t, "02:00.0", "01:00.0", &cuda), "GeForce clique, driver yes (mirror)");
  // Without the driver's answer the clique alone must not predict a peer for GeForce either.
  expect_not_plain_peer(decide(t, "01:00.0", "02:00.0"), "GeForce clique, unasked");
}

// ---------------------------------------------------------------------------------------------
// nccl175-1080ti-vm-clique-chipset-not-supported: GTX 1080 Ti passed through to a QEMU VM "with
// the PCI capability to let the GPU driver in VM know the GPU topology" (the clique); nvidia-smi's
// p2p topology said chipset not supported, while Tesla GPUs in the same setup got peer access.
// Guest bridges, addresses and the clique ID are stand-ins.
// ---------------------------------------------------------------------------------------------
TEST(PublicReports, Nccl175GeForceInAVmWithACliqueIsRefused) {
  Machine m("4.15.0-43-generic", "", "GenuineIntel", 6, 85, kIommuOff, /*guest=*/true);
  m.host_bridge("pci0000:00", 0x8086, 0x29c0, "00:00.0");
  m.bridge("00:1c.0", "", 0x1b36, 0x000c, kRootPort);
  m.bridge("00:1c.1", "", 0x1b36, 0x000c, kRootPort);
  m.endpoint("01:00.0", "00:1c.0", 0x10de, 0x1b06, 0x030000, "nvidia", -1, 256 * kMiB);
  m.endpoint("02:00.0", "00:1c.1", 0x10de, 0x1b06, 0x030000, "nvidia", -1, 256 * kMiB);
  m.clique("01:00.0", 2);
  m.clique("02:00.0", 2);
  const Topology t = m.read();
  // The driver's stated answer: CNS (chipset not supported).
  const auto cns = RuntimeAnswers().pair("01:00.0", "02:00.0", kCudaNo).document();
  expect_not_plain_peer(decide(t, "01:00.0", "02:00.0", &cns), "GeForce clique, driver CNS");
  // The prediction without it.
  expect_not_plain_peer(decide(t, "01:00.0", "02:00.0"), "GeForce clique, unasked");
}

// ---------------------------------------------------------------------------------------------
// tinygrad44-2x5090-am5-iommu-off-works: two RTX 5090 (10de:2b85) on an AM5 board, Ryzen 9 9950X3D
// (family 1Ah), AMD-Vi disabled in the firmware, the patched open driver (595.58.03): P2P matrix OK,
// peer access enabled, transfers worked. Root ports and addresses are stand-ins (one GPU on each of
// the CPU's x8 root ports).
// ---------------------------------------------------------------------------------------------
TEST(PublicReports, Tinygrad44TwoRtx5090OnAm5WithTheIommuOffArePeer) {
  Machine m("6.14.0-24-generic", "", "AuthenticAMD", 0x1a, 0x44, kIommuOff);
  m.host_bridge("pci0000:00", 0x1022, 0x14d8, "00:00.0");
  m.bridge("00:01.1", "", 0x1022, 0x14db, kRootPort);
  m.bridge("00:01.2", "", 0x1022, 0x14db, kRootPort);
  m.endpoint("01:00.0", "00:01.1", 0x10de, 0x2b85, 0x030000, "nvidia", 0, 32 * kGiB);
  m.endpoint("02:00.0", "00:01.2", 0x10de, 0x2b85, 0x030000, "nvidia", 0, 32 * kGiB);
  const Topology t = m.read();
  ASSERT_EQ(t.platform.iommu_mode, "off");
  const auto cuda = RuntimeAnswers().pair("01:00.0", "02:00.0", kCudaYes).document();
  expect_peer(decide(t, "01:00.0", "02:00.0", &cuda), "RTX 5090 pair, IOMMU off");
  expect_peer(decide(t, "02:00.0", "01:00.0", &cuda), "RTX 5090 pair, IOMMU off");
}

// ---------------------------------------------------------------------------------------------
// (d) nvme-cmb-p2pdma-below-switch: SPDK's cmb_copy and p2pmem-test copy between two NVMe drives
// through one drive's CMB; both projects recommend a PCIe switch (Microsemi Switchtec, PLX) with
// ACS off, and Eideticom measured P2PDMA to a NoLoad CMB on Ubuntu 24.04. Two NVMe drives below one
// Switchtec (11f8:8536) switch without ACS redirect, with and without a published CMB: the kernel
// keeps the traffic below the switch. The drives' IDs, the host and addresses are stand-ins.
// ---------------------------------------------------------------------------------------------
Topology nvme_pair(bool cmb, std::optional<uint16_t> dsp_acs, Iommu iommu) {
  Machine m("6.8.0-31-generic", "", "AuthenticAMD", 0x19, 1, iommu);
  m.host_bridge("pci0000:00", 0x1022, 0x1480, "00:00.0");
  m.bridge("00:01.1", "", 0x1022, 0x1483, kRootPort);
  m.bridge("01:00.0", "00:01.1", 0x11f8, 0x8536, kSwitchUp);
  m.bridge("02:00.0", "01:00.0", 0x11f8, 0x8536, kSwitchDown, dsp_acs);
  m.bridge("02:01.0", "01:00.0", 0x11f8, 0x8536, kSwitchDown, dsp_acs);
  Node& a = m.endpoint("03:00.0", "02:00.0", 0x1de5, 0x3000, 0x010802, "nvme", 0, cmb ? 2 * kMiB : 0);
  a.p2pmem = cmb;
  m.endpoint("04:00.0", "02:01.0", 0x144d, 0xa80a, 0x010802, "nvme", 0);
  return m.read();
}

TEST(PublicReports, NvmePairBelowOneSwitchWithoutAcsRedirectIsPeer) {
  for (bool cmb : {true, false})
    for (const Iommu& iommu : {kAmdViTranslating, kAmdViPassthrough, kIommuOff}) {
      const Topology t = nvme_pair(cmb, uint16_t{kAcsSv}, iommu);
      const std::string what = fmt::format("NVMe pair below a switch, CMB {}, IOMMU {}", cmb, t.platform.iommu_mode);
      expect_peer(decide(t, "03:00.0", "04:00.0"), what);
      expect_peer(decide(t, "04:00.0", "03:00.0"), what);
    }
  // ACS redirect on the switch ports (the kernel's own bits): traffic goes up to the root
  // complex; the kernel still allows it through an AMD host bridge, warning of the redirect.
  auto d = decide(nvme_pair(true, kKernelAcs, kAmdViTranslating), "03:00.0", "04:00.0");
  EXPECT_TRUE(std::get<bool>(*d.facts.get("kernel.acs_redirect")));
}

// ---------------------------------------------------------------------------------------------
// (e) b70-dual-amd-am5-allowed (shared/fixtures/public-cases): two Arc Pro B70, each with its
// card's switch, on root ports 00:01.1 and 00:01.3 of a Ryzen 9 9950X (family 1Ah), kernel 7.1.2:
// zeDeviceCanAccessPeer 1, peer copies verified, 28.6 GB/s. The IOMMU mode is not in the report:
// Ubuntu 26.04's default (AMD-Vi translating, DMA-FQ) stands in; the kernel's P2PDMA maps the peer
// through it. The host bridge (1022:14d8) and the card switch IDs are stand-ins.
// ---------------------------------------------------------------------------------------------
TEST(PublicReports, B70PairOnAm5IsPeer) {
  Machine m("7.1.2-generic", "", "AuthenticAMD", 0x1a, 0x44, kAmdViTranslating);
  m.host_bridge("pci0000:00", 0x1022, 0x14d8, "00:00.0");
  m.bridge("00:01.1", "", 0x1022, 0x14db, kRootPort, kKernelAcs);
  m.bridge("00:01.3", "", 0x1022, 0x14db, kRootPort, kKernelAcs);
  m.bridge("01:00.0", "00:01.1", 0x8086, 0xe2ff, kSwitchUp);
  m.bridge("02:01.0", "01:00.0", 0x8086, 0xe2f0, kSwitchDown);
  m.endpoint("03:00.0", "02:01.0", 0x8086, 0xe223, 0x030000, "xe", 0, 32 * kGiB);
  m.bridge("06:00.0", "00:01.3", 0x8086, 0xe2ff, kSwitchUp);
  m.bridge("07:01.0", "06:00.0", 0x8086, 0xe2f0, kSwitchDown);
  m.endpoint("08:00.0", "07:01.0", 0x8086, 0xe223, 0x030000, "xe", 0, 32 * kGiB);
  const Topology t = m.read();
  const auto ze = RuntimeAnswers().pair("03:00.0", "08:00.0", {{"vendor.peer_supported", true}}).document();
  expect_peer(decide(t, "03:00.0", "08:00.0", &ze), "B70 pair on AM5");
  expect_peer(decide(t, "08:00.0", "03:00.0", &ze), "B70 pair on AM5");
  expect_peer(decide(t, "03:00.0", "08:00.0"), "B70 pair on AM5, unasked");
}

}  // namespace
}  // namespace p2paudit
