// SPDX-License-Identifier: GPL-2.0-or-later
// Module facts through libkmod, against a real module index that depmod builds for a test sysroot:
// module objects carrying only a .modinfo section (what depmod and libkmod read).
#include <gtest/gtest.h>

#include <fstream>

#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "module_fixture.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;

class ModuleIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::depmod_available())
      GTEST_SKIP() << "depmod (Debian package kmod) is not installed";
    dir_ = fs::path(::testing::TempDir()) / ("p2paudit-kmod-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::string release = "6.1.192";  // the fixture's osrelease
    ASSERT_EQ(test::run_command("tar xzf " + test::data_path("kernel-oracle/h-f6-sriov-nvme/sysroot.tar.gz") + " -C " +
                                dir_.string()).status, 0);
    fs::path mods = dir_ / "lib/modules" / release / "kernel/drivers";
    fs::create_directories(mods);
    test::make_module(mods / "nvme.ko", {"alias=pci:v*d*sv*sd*bc01sc08i02*", "version=9.9-in-the-ko-file",
                                   "srcversion=NOTREADFROMTHEKOFILE00", "license=GPL"});
    test::make_module(mods / "fakenvme.ko", {"alias=pci:v00001B36d00000010sv*sd*bc*sc*i*", "license=GPL"});
    test::run_depmod(dir_, release);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

// Version and srcversion come from the running kernel's sys/module, never from the module file
// (which libkmod would decompress whole): the .ko's own .modinfo values are not read.
TEST_F(ModuleIndex, BoundDriverGetsItsModuleVersion) {
  fs::create_directories(dir_ / "sys/module/nvme");
  std::ofstream(dir_ / "sys/module/nvme/version") << "1.0-nvme-test\n";
  std::ofstream(dir_ / "sys/module/nvme/srcversion") << "AAAABBBBCCCCDDDDEEEEFF\n";
  Topology t = read_topology(Sysroot::open(dir_.string()));
  const Function* nvme = t.find(*Bdf::parse("0000:01:00.0"));
  ASSERT_NE(nvme, nullptr);
  EXPECT_EQ(nvme->driver, "nvme");
  EXPECT_EQ(nvme->module.name, "nvme");
  EXPECT_EQ(nvme->module.version, "1.0-nvme-test");
  EXPECT_EQ(nvme->module.srcversion, "AAAABBBBCCCCDDDDEEEEFF");
  EXPECT_EQ(nvme->module.builtin, Known::kNo);
}

TEST_F(ModuleIndex, UnboundFunctionListsModulesItsModaliasWouldLoad) {
  Topology t = read_topology(Sysroot::open(dir_.string()));
  const Function* vf = t.find(*Bdf::parse("0000:01:00.1"));  // a VF left unbound (autoprobe off)
  ASSERT_NE(vf, nullptr);
  EXPECT_TRUE(vf->driver.empty());
  std::vector<std::string> got = vf->module.alias_matches;
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"fakenvme", "nvme"}));
}

TEST(ModuleFacts, WithoutAnIndexModuleFactsStayUnknown) {
  Topology t = read_topology(Sysroot::open(test::data_path("kernel-oracle/h-f6-sriov-nvme/sysroot.tar.gz")));
  const Function* nvme = t.find(*Bdf::parse("0000:01:00.0"));
  ASSERT_NE(nvme, nullptr);
  EXPECT_EQ(nvme->module.builtin, Known::kUnknown);
  EXPECT_TRUE(nvme->module.version.empty());
}

}  // namespace
}  // namespace p2paudit
