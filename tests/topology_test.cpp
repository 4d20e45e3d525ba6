// Unit tests of the small pieces under the reader: addresses, the sysroot, platform facts.
#include <gtest/gtest.h>

#include <fstream>

#include "p2paudit/errors.h"
#include "p2paudit/platform.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"
#include "p2paudit/topology_reader.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;

TEST(Bdf, ParsesAndPrintsLikePciName) {
  auto b = Bdf::parse("0000:3B:00.1");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->str(), "0000:3b:00.1");
  EXPECT_EQ(b->devfn(), 1);
  EXPECT_EQ(Bdf::parse("01:1f.7")->str(), "0000:01:1f.7");
  EXPECT_EQ(Bdf::parse("10000:e0:1d.0")->domain, 0x10000u);
  EXPECT_EQ(Bdf::parse("01:1f.7")->devfn(), (0x1f << 3) | 7);
}

TEST(Bdf, RejectsMalformed) {
  for (const char* bad : {"", "gpu0", "00:00", "0000:00:20.0", "0000:00:00.8", "0000:100:00.0", "00:00.0x", "x:00:00.0"})
    EXPECT_FALSE(Bdf::parse(bad)) << bad;
}

class TempTree : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("p2paudit-" + std::to_string(::getpid()) + "-" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << text;
  }
  fs::path dir_;
};

TEST_F(TempTree, ResolveStaysInsideTheSysroot) {
  write("sys/devices/pci0000:00/0000:00:01.0/vendor", "0x8086\n");
  fs::create_directories(dir_ / "sys/bus/pci/devices");
  fs::create_symlink("../../../devices/pci0000:00/0000:00:01.0", dir_ / "sys/bus/pci/devices/0000:00:01.0");
  fs::create_symlink("/sys/devices/pci0000:00", dir_ / "sys/absolute");
  fs::create_symlink("../../../../../../etc", dir_ / "sys/bus/pci/escape");
  Sysroot root = Sysroot::open(dir_.string());
  EXPECT_EQ(root.resolve("sys/bus/pci/devices/0000:00:01.0"), "sys/devices/pci0000:00/0000:00:01.0");
  EXPECT_EQ(root.resolve("sys/absolute"), "sys/devices/pci0000:00");  // absolute links mean the sysroot's /
  EXPECT_FALSE(root.resolve("sys/bus/pci/escape"));
  EXPECT_EQ(root.read_line("sys/bus/pci/devices/0000:00:01.0/vendor"), "0x8086");
  EXPECT_FALSE(root.read_line("sys/missing"));
}

TEST_F(TempTree, DirectoryWithoutSysOrProcIsRejected) {
  write("etc/hostname", "x\n");
  try {
    Sysroot::open(dir_.string());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(dir_.string()), std::string::npos);
  }
}

TEST_F(TempTree, NoPciDevicesIsAnInputError) {
  write("proc/cpuinfo", "processor\t: 0\n");
  Sysroot root = Sysroot::open(dir_.string());
  EXPECT_THROW(read_topology(root), InputError);
}

TEST_F(TempTree, PlatformFromProcAndBoot) {
  write("proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7763\n"
        "flags\t\t: fpu vme hypervisor\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n");
  write("proc/sys/kernel/osrelease", "6.8.0-31-generic\n");
  write("proc/cmdline", "BOOT_IMAGE=/vmlinuz iommu=pt pci=noaer,disable_acs_redir=0000:01:00.0;0000:02:00.0\n");
  write("boot/config-6.8.0-31-generic", "CONFIG_PCI=y\nCONFIG_PCI_P2PDMA=y\n");
  std::vector<Finding> findings;
  Platform p = read_platform(Sysroot::open(dir_.string()), findings);
  EXPECT_EQ(p.arch, "x86");
  EXPECT_EQ(p.cpu_vendor, "AuthenticAMD");  // processor 0, the boot CPU, not the last block
  EXPECT_EQ(p.cpu_family, 25);
  EXPECT_TRUE(p.hypervisor);
  EXPECT_EQ(p.config_p2pdma, Known::kYes);
  EXPECT_EQ(p.kernel_config_source, "boot/config-6.8.0-31-generic");
  EXPECT_EQ(p.iommu_mode, "passthrough");
  EXPECT_EQ(cmdline_pci_option(p.cmdline, "disable_acs_redir"), "0000:01:00.0;0000:02:00.0");
}

TEST_F(TempTree, ConfigWithoutP2pdmaMeansOff) {
  write("proc/sys/kernel/osrelease", "6.1.0-13-amd64\n");
  write("boot/config-6.1.0-13-amd64", "CONFIG_PCI=y\n# CONFIG_PCI_P2PDMA is not set\n");
  std::vector<Finding> findings;
  Platform p = read_platform(Sysroot::open(dir_.string()), findings);
  EXPECT_EQ(p.config_p2pdma, Known::kNo);
}

TEST_F(TempTree, MissingConfigIsUnknownNotOff) {
  write("proc/sys/kernel/osrelease", "6.1.0-13-amd64\n");
  std::vector<Finding> findings;
  Platform p = read_platform(Sysroot::open(dir_.string()), findings);
  EXPECT_EQ(p.config_p2pdma, Known::kUnknown);
}

TEST(Cmdline, LastValueWins) {
  EXPECT_EQ(cmdline_param("iommu=on quiet iommu=pt", "iommu"), "pt");
  EXPECT_EQ(cmdline_param("quiet", "quiet"), "");
  EXPECT_FALSE(cmdline_param("intel_iommu=on", "iommu"));
  EXPECT_FALSE(cmdline_pci_option("pci=noaer", "disable_acs_redir"));
}

TEST(Sysroot, MissingPathNamesIt) {
  try {
    Sysroot::open("/nonexistent/capture.tar.gz");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/capture.tar.gz"), std::string::npos);
  }
}

TEST(Sysroot, ArchiveIsReadInMemoryWithoutTouchingDisk) {
  // Nothing is unpacked: no p2paudit-sysroot-* directory appears in TMPDIR while it is open.
  char templ[] = "/tmp/p2paudit-tmpdir-XXXXXX";
  fs::path tmp = mkdtemp(templ);
  setenv("TMPDIR", tmp.c_str(), 1);
  {
    Sysroot root = Sysroot::open(test::data_path("machines/epyc-firecracker-vm/sysroot.tar.gz"));
    EXPECT_TRUE(root.is_archive());
    EXPECT_TRUE(root.exists("proc/cpuinfo"));
    EXPECT_TRUE(fs::is_empty(tmp));
  }
  unsetenv("TMPDIR");
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace p2paudit
