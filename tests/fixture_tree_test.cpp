// SPDX-License-Identifier: GPL-2.0-or-later
// Whole-tree tests on the real captures: every parent-child edge must equal what the sysfs paths
// say and what pciutils' own tree (`lspci -A linux-sysfs -O sysfs.path=... -PP`, the same tree
// `lspci -tv` draws) says for the same sysroot.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;

// The capture unpacked by GNU tar, for the tools that need a directory (lspci, canonical()).
class Unpacked {
 public:
  explicit Unpacked(const std::string& tarball) {
    char templ[] = "/tmp/p2paudit-fixture-XXXXXX";
    dir_ = mkdtemp(templ);
    auto r = test::run_command("tar xzf " + test::shell_quote(tarball) + " -C " + test::shell_quote(dir_.string()));
    EXPECT_EQ(r.status, 0) << tarball;
  }
  ~Unpacked() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // The capture's top: the archive may hold its tree inside one directory ("sysroot/").
  fs::path dir() const {
    if (fs::exists(dir_ / "sys")) return dir_;
    for (const auto& e : fs::directory_iterator(dir_))
      if (fs::exists(e.path() / "sys")) return e.path();
    return dir_;
  }

 private:
  fs::path dir_;
};

// BDF -> parent BDF ("" for a root bus), from lspci -D -PP lines "0000:00:01.0/01:00.0 ...".
std::map<std::string, std::string> lspci_parents(const fs::path& dir) {
  std::string cmd = "lspci -A linux-sysfs -O sysfs.path=" + test::shell_quote((dir / "sys/bus/pci").string()) +
                    " -D -PP -n 2>/dev/null";
  auto r = test::run_command(cmd);
  EXPECT_EQ(r.status, 0) << cmd;
  std::map<std::string, std::string> parents;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    std::string path = line.substr(0, line.find(' '));
    std::vector<std::string> hops;
    std::istringstream p(path);
    for (std::string hop; std::getline(p, hop, '/');) hops.push_back(hop);
    std::string domain = hops[0].substr(0, 5);
    auto full = [&](const std::string& hop) { return hop.size() == 12 ? hop : domain + hop; };
    parents[full(hops.back())] = hops.size() > 1 ? full(hops[hops.size() - 2]) : "";
  }
  return parents;
}

class FixtureTree : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureTree, ParentsMatchSysfsAndLspci) {
  Unpacked unpacked(GetParam());
  Sysroot root = Sysroot::open(unpacked.dir().string());
  Topology t = read_topology(root);
  ASSERT_FALSE(t.functions.empty());
  auto lspci = lspci_parents(unpacked.dir());
  ASSERT_EQ(lspci.size(), t.functions.size());
  for (const auto& f : t.functions) {
    SCOPED_TRACE(f.bdf.str());
    std::string ours = f.parent ? t.functions[*f.parent].bdf.str() : "";
    // The kernel's own placement: the directory the sysfs link resolves to, read without our resolver.
    fs::path dir = fs::canonical(unpacked.dir() / ("sys/bus/pci/devices/" + f.bdf.str()));
    std::string up = dir.parent_path().filename().string();
    std::string sysfs_parent = up.rfind("pci", 0) == 0 ? "" : up;
    if (f.is_virtfn) {
      // The kernel's upstream bridge of a VF is its PF's; sysfs nests VFs beside their PF.
      ASSERT_TRUE(f.physfn.has_value());
      EXPECT_EQ(ours, sysfs_parent);
      EXPECT_EQ(t.functions[*f.physfn].parent, f.parent);
    } else {
      EXPECT_EQ(ours, sysfs_parent);
    }
    ASSERT_TRUE(lspci.count(f.bdf.str()));
    EXPECT_EQ(ours, lspci[f.bdf.str()]);
    EXPECT_EQ(f.host_bridge, dir.string().substr(dir.string().find("/sys/devices/") + 13, 10));
  }
  for (const auto& finding : t.findings)
    EXPECT_EQ(finding.message.find("bus range"), std::string::npos) << finding.path << ": " << finding.message;
}

// The archive is read in memory, the directory through the file system: one answer.
TEST_P(FixtureTree, ArchiveReadsLikeItsUnpackedDirectory) {
  Unpacked unpacked(GetParam());
  Topology from_dir = read_topology(Sysroot::open(unpacked.dir().string()));
  Topology from_archive = read_topology(Sysroot::open(GetParam()));
  ASSERT_EQ(from_dir.functions.size(), from_archive.functions.size());
  for (size_t i = 0; i < from_dir.functions.size(); ++i) {
    const Function &a = from_dir.functions[i], &b = from_archive.functions[i];
    SCOPED_TRACE(a.bdf.str());
    EXPECT_EQ(a.bdf, b.bdf);
    EXPECT_EQ(a.sysfs_path, b.sysfs_path);
    EXPECT_EQ(a.parent, b.parent);
    EXPECT_EQ(a.acs.state, b.acs.state);
    EXPECT_EQ(a.acs.ctrl, b.acs.ctrl);
    EXPECT_EQ(a.config_size, b.config_size);
    EXPECT_EQ(a.driver, b.driver);
    EXPECT_EQ(a.bars.size(), b.bars.size());
  }
  EXPECT_EQ(from_dir.platform.kernel_release, from_archive.platform.kernel_release);
  EXPECT_EQ(from_dir.platform.config_p2pdma, from_archive.platform.config_p2pdma);
  EXPECT_EQ(from_dir.findings.size(), from_archive.findings.size());
}

TEST_P(FixtureTree, RootBusListStartsWithLowestDevfn) {
  Sysroot root = Sysroot::open(GetParam());
  Topology t = read_topology(root);
  for (const auto& hb : t.host_bridges) {
    ASSERT_FALSE(hb.root_bus_devices.empty()) << hb.name;
    bool seen_vf = false;
    for (size_t k = 0; k < hb.root_bus_devices.size(); ++k) {
      const Function& f = t.functions[hb.root_bus_devices[k]];
      EXPECT_FALSE(f.parent.has_value());
      EXPECT_EQ(f.host_bridge, hb.name);
      if (seen_vf) {
        EXPECT_TRUE(f.is_virtfn) << "a VF was enumerated before " << f.bdf.str();
      }
      seen_vf |= f.is_virtfn;
      if (k && !f.is_virtfn) {
        EXPECT_LT(t.functions[hb.root_bus_devices[k - 1]].bdf, f.bdf);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Captures, FixtureTree, ::testing::ValuesIn(test::fixture_sysroots()),
                         [](const auto& info) { return test::case_name(info.param); });

// A real 6.1 kernel's sysfs with two QEMU NVMe PFs (1b36:0010) of two VFs each: their config space reads
// 0xffff for the IDs, as SR-IOV specifies; the sysfs files carry the IDs the kernel gave them.
TEST(FixtureFacts, SriovVfsTakeTheirIdsFromSysfs) {
  Sysroot root = Sysroot::open(test::data_path("kernel-oracle/h-f6-sriov-nvme/sysroot.tar.gz"));
  Topology t = read_topology(root);
  int vfs = 0;
  for (const auto& f : t.functions) {
    if (!f.is_virtfn) continue;
    ++vfs;
    EXPECT_EQ(f.vendor, 0x1b36) << f.bdf.str();
    EXPECT_EQ(f.device, 0x0010) << f.bdf.str();
    EXPECT_EQ(f.class_code, 0x010802u) << f.bdf.str();
    EXPECT_NE(f.vendor_name.find("Red Hat"), std::string::npos) << f.vendor_name;
    for (const auto& finding : t.findings)
      EXPECT_EQ(finding.path.find(f.bdf.str()), std::string::npos) << finding.path << ": " << finding.message;
  }
  EXPECT_EQ(vfs, 4);  // two of the NVMe on the Root Port, two of the one behind the switch
}

TEST(FixtureFacts, H200MachineReadsAsCaptured) {
  Sysroot root = Sysroot::open(test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz"));
  Topology t = read_topology(root);
  int gpus = 0;
  for (const auto& f : t.functions) {
    if (f.vendor != 0x10de) continue;
    ++gpus;
    EXPECT_EQ(f.device, 0x2335);
    EXPECT_EQ(f.driver, "nvidia");
    EXPECT_FALSE(f.parent.has_value());
    EXPECT_EQ(f.pcie_type, PcieType::kEndpoint);
    EXPECT_TRUE(f.serial_number.has_value());
    // BAR1 of an H200 maps its whole memory: far above 4 GiB, 64-bit, prefetchable.
    bool big_bar = false;
    for (const auto& b : f.bars) big_bar |= b.size >= (uint64_t{64} << 30) && b.is_64bit && b.prefetchable;
    EXPECT_TRUE(big_bar);
  }
  EXPECT_EQ(gpus, 4);
  EXPECT_EQ(t.platform.cpu_vendor, "GenuineIntel");
  EXPECT_EQ(t.platform.cpu_family, 6);
  EXPECT_EQ(t.platform.cpu_model, 207);
  EXPECT_TRUE(t.platform.hypervisor);
  EXPECT_EQ(t.platform.arch, "x86");
  EXPECT_EQ(t.platform.kernel_release.rfind("6.18.44", 0), 0u);
  EXPECT_EQ(t.platform.config_p2pdma, Known::kUnknown);  // the capture holds no kernel config
  ASSERT_EQ(t.host_bridges.size(), 1u);
  EXPECT_EQ(t.functions[t.host_bridges[0].root_bus_devices[0]].device, 0x0d57);
}

TEST(FixtureFacts, OwnSnapshotCarriesCaptureMetadata) {
  // Captured with `p2paudit snapshot` on a live 2x H200 VM: config sizes come from the metadata.
  Sysroot root = Sysroot::open(test::data_path("machines/h200x2-firecracker-vm/sysroot.tar.gz"));
  Topology t = read_topology(root);
  ASSERT_EQ(t.functions.size(), 8u);
  EXPECT_TRUE(t.config_fully_readable);
  int gpus = 0;
  for (const auto& f : t.functions) {
    if (f.vendor != 0x10de) continue;
    ++gpus;
    EXPECT_EQ(f.config_size, 4096u);
    EXPECT_EQ(f.link.current_speed, "32.0 GT/s PCIe");
    EXPECT_EQ(f.link.current_width, 16);
    EXPECT_EQ(f.acs.state, CapState::kAbsent);
  }
  EXPECT_EQ(gpus, 2);
}

TEST(FixtureFacts, EpycMachineIsAmdZen) {
  Sysroot root = Sysroot::open(test::data_path("machines/epyc-firecracker-vm/sysroot.tar.gz"));
  Topology t = read_topology(root);
  EXPECT_EQ(t.platform.cpu_vendor, "AuthenticAMD");
  EXPECT_EQ(t.platform.cpu_family, 26);
}

}  // namespace
}  // namespace p2paudit
