// SPDX-License-Identifier: GPL-2.0-or-later
// The directory sysroot lists each directory once and answers from the listing (issue 21): what
// it reads must not change. Absent files, links, FIFOs and links out of the sysroot read exactly
// as a lookup of each name would; a directory's listing is its state when first opened; the lone
// read of an IOMMU group's type (openat2 through the groups directory) refuses what a walk
// refuses; and TopologyReadScope leaves out only the attributes it names.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "p2paudit/errors.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "p2paudit/topology_report.h"
#include "sysroot_builder.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using test::ConfigBytes;
using test::SysrootDir;

TEST(SysrootListing, AbsentFilesLinksAndDirectoriesReadAsBefore) {
  SysrootDir s;
  s.write("sys/x/attr", "one\ntwo\n");
  s.write("sys/x/empty", "");
  s.link("sys/x/link", "attr");
  s.link("sys/x/out", "../../../../../../etc/passwd");
  fs::create_directories(s.dir() / "sys/x/sub");
  Sysroot root = Sysroot::open(s.str());
  EXPECT_EQ(root.read_line("sys/x/attr"), "one");
  EXPECT_EQ(root.read_text("sys/x/attr"), "one\ntwo\n");
  EXPECT_EQ(root.read_text("sys/x/empty"), "");
  EXPECT_FALSE(root.read_line("sys/x/absent"));
  EXPECT_FALSE(root.exists("sys/x/absent"));
  EXPECT_EQ(root.read_line("sys/x/link"), "one") << "a link inside the sysroot is followed";
  EXPECT_EQ(root.read_link("sys/x/link"), "attr");
  EXPECT_FALSE(root.read_link("sys/x/attr")) << "a regular file is no link";
  EXPECT_FALSE(root.read_text("sys/x/out")) << "a link leading out of the sysroot";
  EXPECT_FALSE(root.read_text("sys/x/sub")) << "a directory is not a file";
  EXPECT_TRUE(root.exists("sys/x/sub"));
  EXPECT_EQ(root.list("sys/x"), (std::vector<std::string>{"attr", "empty", "link", "out", "sub"}));
}

TEST(SysrootListing, ALargeFileIsReadWholeOrRefusedAtTheLimit) {
  SysrootDir s;
  std::string big(100000, 'x');
  s.write("sys/x/big", big);
  Sysroot root = Sysroot::open(s.str());
  EXPECT_EQ(root.read_text("sys/x/big"), big) << "more than one read's worth";
  auto some = root.read_bytes("sys/x/big", 4096);
  ASSERT_TRUE(some);
  EXPECT_EQ(some->size(), 4096u);
  SysrootLimits small;
  small.max_file_bytes = 1000;
  Sysroot limited = Sysroot::open(s.str(), small);
  EXPECT_THROW(limited.read_text("sys/x/big"), InputError);
}

TEST(SysrootListing, AFifoListedAsAFileIsNotReadAndDoesNotBlock) {
  SysrootDir s;
  s.write("sys/x/attr", "1\n");
  ASSERT_EQ(mkfifo((s.dir() / "sys/x/fifo").c_str(), 0600), 0);
  Sysroot root = Sysroot::open(s.str());
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(root.read_text("sys/x/fifo"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "blocked on the FIFO";
  EXPECT_EQ(root.read_line("sys/x/attr"), "1");
}

TEST(SysrootListing, AFileSwappedForALinkAfterTheListingIsNotFollowedOut) {
  SysrootDir s;
  s.write("sys/x/a", "first\n");
  s.write("sys/x/b", "second\n");
  Sysroot root = Sysroot::open(s.str());
  ASSERT_EQ(root.read_line("sys/x/a"), "first");  // the directory is now open and listed
  fs::remove(s.dir() / "sys/x/b");
  fs::create_symlink("/etc/hostname", s.dir() / "sys/x/b");
  EXPECT_FALSE(root.read_text("sys/x/b")) << "O_NOFOLLOW refuses the link the listing did not see";
}

TEST(SysrootListing, LoneGroupTypeReadsAsAWalkWould) {
  SysrootDir s;
  s.write("sys/kernel/iommu_groups/1/type", "DMA-FQ\n");
  fs::create_directories(s.dir() / "sys/kernel/iommu_groups/2");  // no type file
  fs::create_directories(s.dir() / "outside");
  s.write("outside/type", "identity\n");
  s.link("sys/kernel/iommu_groups/3", "../../../outside");             // inside the sysroot: followed
  s.link("sys/kernel/iommu_groups/4", "/outside");                     // absolute: the sysroot's /outside
  s.link("sys/kernel/iommu_groups/5", "../../../../../../../../tmp");  // above the top: refused
  s.link("sys/kernel/iommu_groups/6/type", "../1/type");               // a link as the file itself
  ASSERT_EQ(mkfifo((s.dir() / "sys/kernel/iommu_groups/2/fifo").c_str(), 0600), 0);
  Sysroot root = Sysroot::open(s.str());
  ASSERT_EQ(root.list("sys/kernel/iommu_groups").size(), 6u);
  for (const char* g : {"1", "2", "3", "4", "5", "6"}) {
    std::string path = std::string("sys/kernel/iommu_groups/") + g + "/type";
    EXPECT_EQ(root.read_lone_line(path), root.read_line(path)) << path;
  }
  EXPECT_EQ(root.read_lone_line("sys/kernel/iommu_groups/1/type"), "DMA-FQ");
  EXPECT_FALSE(root.read_lone_line("sys/kernel/iommu_groups/2/type"));
  EXPECT_EQ(root.read_lone_line("sys/kernel/iommu_groups/3/type"), "identity");
  EXPECT_FALSE(root.read_lone_line("sys/kernel/iommu_groups/5/type"));
  EXPECT_EQ(root.read_lone_line("sys/kernel/iommu_groups/6/type"), "DMA-FQ");
  EXPECT_FALSE(root.read_lone_line("sys/kernel/iommu_groups/2/fifo"));
}

// A bound endpoint and a driverless one below a root port, with every attribute the scope names.
void write_two_functions(SysrootDir& s) {
  s.function("pci0000:00/0000:00:01.0", ConfigBytes(0x8086, 0x7c10, 0x060400, 4, true).buses(0, 1, 1).bytes());
  for (const char* fn : {"0000:01:00.0", "0000:01:00.1"}) {
    std::string dir = std::string("sys/devices/pci0000:00/0000:00:01.0/") + fn;
    s.write(dir + "/config", ConfigBytes(0x10de, 0x2335, 0x030200, 0).bytes());
    s.link(std::string("sys/bus/pci/devices/") + fn, std::string("../../../devices/pci0000:00/0000:00:01.0/") + fn);
    s.write(dir + "/modalias", std::string("pci:v000010DEd00002335") + fn + "\n");
    s.write(dir + "/local_cpulist", "0-15\n");
    s.write(dir + "/numa_node", "0\n");
    s.link(dir + "/iommu_group", "../../../../kernel/iommu_groups/7");
  }
  s.write("sys/bus/pci/drivers/nvidia/.keep", "");
  s.link("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/driver", "../../../../bus/pci/drivers/nvidia");
  s.write("sys/kernel/iommu_groups/7/type", "DMA\n");
}

TEST(SysrootListing, NarrowScopeLeavesOutOnlyTheDescriptiveAttributes) {
  SysrootDir s;
  write_two_functions(s);
  Topology full = read_topology(Sysroot::open(s.str()));
  Topology narrow = read_topology(Sysroot::open(s.str()), {.descriptive_attributes = false});
  ASSERT_EQ(full.functions.size(), 3u);
  ASSERT_EQ(narrow.functions.size(), 3u);
  const Function& bound = full.functions[1];
  const Function& driverless = full.functions[2];
  ASSERT_EQ(bound.driver, "nvidia");
  ASSERT_TRUE(driverless.driver.empty());
  EXPECT_EQ(bound.local_cpulist, "0-15");
  EXPECT_EQ(bound.iommu_group_type, "DMA");
  EXPECT_FALSE(bound.modalias.empty());
  EXPECT_TRUE(narrow.functions[1].local_cpulist.empty());
  EXPECT_TRUE(narrow.functions[1].iommu_group_type.empty());
  EXPECT_TRUE(narrow.functions[1].modalias.empty()) << "a bound function's module comes from its driver";
  EXPECT_EQ(narrow.functions[2].modalias, driverless.modalias) << "a driverless function's module is looked up by it";
  // Everything else is the same: the JSON tree with the three fields of every function blanked.
  auto blank = [](Topology t) {
    for (auto& f : t.functions) {
      f.local_cpulist.clear();
      f.iommu_group_type.clear();
      if (!f.driver.empty()) f.modalias.clear();
    }
    return topology_to_json(t).dump();
  };
  EXPECT_EQ(blank(full), blank(narrow));
  EXPECT_EQ(topology_to_json(narrow).dump(), blank(narrow)) << "the narrow read holds none of them";
}

}  // namespace
}  // namespace p2paudit
