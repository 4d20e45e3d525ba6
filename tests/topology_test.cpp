// SPDX-License-Identifier: GPL-2.0-or-later
// Unit tests of the small pieces under the reader: addresses, the sysroot, platform facts.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "p2paudit/acs_meaning.h"
#include "p2paudit/errors.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/platform.h"
#include "p2paudit/snapshot.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"
#include "p2paudit/topology_reader.h"
#include "p2paudit/topology_report.h"
#include "p2paudit/vendor_memory.h"
#include "sysroot_builder.h"
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

// str() writes by hand what "{:04x}:{:02x}:{:02x}.{:x}" writes: the same text for every field's
// smallest, largest and in-between values, beyond what a valid address holds too.
TEST(Bdf, PrintsAsTheFormatWould) {
  for (uint32_t domain : {0u, 1u, 0xabcu, 0xffffu, 0x10000u, 0x12345678u, 0xffffffffu})
    for (unsigned bus : {0u, 0x9u, 0x10u, 0xe0u, 0xffu})
      for (unsigned dev : {0u, 0x7u, 0x1fu, 0xffu})
        for (unsigned fn : {0u, 7u, 0xfu, 0x10u, 0xffu}) {
          Bdf b{domain, static_cast<uint8_t>(bus), static_cast<uint8_t>(dev), static_cast<uint8_t>(fn)};
          EXPECT_EQ(b.str(), fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, dev, fn));
        }
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
  write("sys/kernel/iommu_groups/0/reserved_regions", "");  // an IOMMU registered (no type file)
  std::vector<Finding> findings;
  Platform p = read_platform(Sysroot::open(dir_.string()), findings);
  EXPECT_EQ(p.arch, "x86");
  EXPECT_EQ(p.cpu_vendor, "AuthenticAMD");  // processor 0, the boot CPU, not the last block
  EXPECT_EQ(p.cpu_family, 25);
  EXPECT_TRUE(p.hypervisor);
  EXPECT_EQ(p.config_p2pdma, Known::kYes);
  EXPECT_EQ(p.kernel_config_source, "boot/config-6.8.0-31-generic");
  EXPECT_EQ(p.iommu_mode, "passthrough");
  EXPECT_EQ(p.iommu_mode_source, "command line iommu=pt");
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

// --- device memory the vendor drivers publish in sysfs (vendor_memory.h) ----------------------

using test::ConfigBytes;
using test::SysrootDir;

constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;
const std::string kGpuDir = "pci0000:00/0000:00:02.0";
const std::string kGpuSys = "sys/devices/" + kGpuDir;

// A host bridge and one GPU on the root bus, bound to `driver`, with a BAR 0 of bar0 bytes.
void gpu_machine(SysrootDir& s, const std::string& driver, uint64_t bar0, uint16_t vendor = 0x1002) {
  s.function("pci0000:00/0000:00:00.0", ConfigBytes(0x1022, 0x14d8, 0x060000, 0).bytes());
  test::gpu_with_bar(s, kGpuDir, vendor, 0x744c, driver, bar0 > 4 * kGiB ? uint64_t{1} << 40 : 0xc0000000, bar0);
}

std::string findings_text(const Topology& t) {
  std::string all;
  for (const auto& f : t.findings) all += f.path + ": " + f.message + "\n";
  return all;
}

TEST(VendorMemory, AmdgpuVramAndVisibleVramFromSysfs) {
  SysrootDir s;
  gpu_machine(s, "amdgpu", 256 * kMiB);
  s.write(kGpuSys + "/mem_info_vram_total", "17179869184\n");
  s.write(kGpuSys + "/mem_info_vis_vram_total", "268435456\n");
  Topology t = read_topology(Sysroot::open(s.str()));
  const Function& gpu = t.functions[1];
  EXPECT_EQ(gpu.memory_size, 16 * kGiB);
  EXPECT_EQ(gpu.memory_size_source, kGpuSys + "/mem_info_vram_total");
  EXPECT_EQ(gpu.memory_visible_size, 256 * kMiB);
  EXPECT_EQ(findings_text(t), "");
  auto j = topology_to_json(t)["functions"][1];
  EXPECT_EQ(j["memory_size"], 16 * kGiB);
  EXPECT_EQ(j["memory_size_source"], kGpuSys + "/mem_info_vram_total");
  EXPECT_EQ(j["memory_visible_size"], 256 * kMiB);
  EXPECT_EQ(topology_to_json(t)["functions"][0]["memory_size"], nullptr);
  EXPECT_NE(topology_tree_text(t).find("driver amdgpu, memory 16 GiB"), std::string::npos) << topology_tree_text(t);
}

TEST(VendorMemory, OnlyTheBoundDriversOwnFilesAreRead) {
  SysrootDir s;
  gpu_machine(s, "nvidia", 256 * kMiB, 0x10de);
  s.write(kGpuSys + "/mem_info_vram_total", "17179869184\n");  // not nvidia's: ignored, not a finding
  s.write(kGpuSys + "/drm/card0/lmem_total_bytes", "17179869184\n");
  Topology t = read_topology(Sysroot::open(s.str()));
  EXPECT_FALSE(t.functions[1].memory_size);
  EXPECT_EQ(findings_text(t), "");
  EXPECT_TRUE(vendor_memory_files(Sysroot::open(s.str()), t.functions[1]).empty());
}

// Mainline xe publishes no VRAM size; xe as first written has tile<N>/physical_vram_size_bytes,
// read where present and summed over the tiles (docs/vendor-gates.md).
TEST(VendorMemory, XeTileVramWherePublished) {
  SysrootDir s;
  gpu_machine(s, "xe", 256 * kMiB, 0x8086);
  s.write(kGpuSys + "/tile0/freq0/max_freq", "1000\n");  // mainline: a tile directory without the size
  Topology t = read_topology(Sysroot::open(s.str()));
  EXPECT_FALSE(t.functions[1].memory_size);
  EXPECT_EQ(findings_text(t), "");
  s.write(kGpuSys + "/tile0/physical_vram_size_bytes", "17179869184\n");
  t = read_topology(Sysroot::open(s.str()));
  EXPECT_EQ(t.functions[1].memory_size, 16 * kGiB);
  EXPECT_EQ(t.functions[1].memory_size_source, kGpuSys + "/tile0/physical_vram_size_bytes");
  s.write(kGpuSys + "/tile1/physical_vram_size_bytes", "17179869184\n");  // one LMEM BAR spans both tiles
  t = read_topology(Sysroot::open(s.str()));
  EXPECT_EQ(t.functions[1].memory_size, 32 * kGiB);
  s.write(kGpuSys + "/tile2/freq0/max_freq", "1000\n");  // a tile without its size: the sum is unknown
  t = read_topology(Sysroot::open(s.str()));
  EXPECT_FALSE(t.functions[1].memory_size);
  EXPECT_NE(findings_text(t).find("2 of 3 tiles publish physical_vram_size_bytes"), std::string::npos) << findings_text(t);
}

TEST(VendorMemory, I915BackportLmemOnItsDrmCard) {
  SysrootDir s;
  gpu_machine(s, "i915", 256 * kMiB, 0x8086);
  s.write(kGpuSys + "/drm/card1/lmem_total_bytes", "17179869184\n");
  s.write(kGpuSys + "/drm/renderD128/dev", "226:128\n");
  Topology t = read_topology(Sysroot::open(s.str()));
  EXPECT_EQ(t.functions[1].memory_size, 16 * kGiB);
  EXPECT_EQ(t.functions[1].memory_size_source, kGpuSys + "/drm/card1/lmem_total_bytes");
  EXPECT_FALSE(t.functions[1].memory_visible_size);
  s.write(kGpuSys + "/drm/card2/lmem_total_bytes", "8589934592\n");  // two cards for one device: which?
  t = read_topology(Sysroot::open(s.str()));
  EXPECT_FALSE(t.functions[1].memory_size);
  EXPECT_NE(findings_text(t).find("2 DRM cards publish lmem_total_bytes"), std::string::npos) << findings_text(t);
}

struct Junk {
  std::string name, text;
};

class VendorMemoryJunk : public ::testing::TestWithParam<Junk> {};

TEST_P(VendorMemoryJunk, IsUnknownAndAFinding) {
  SysrootDir s;
  gpu_machine(s, "amdgpu", 256 * kMiB);
  s.write(kGpuSys + "/mem_info_vram_total", GetParam().text);
  Topology t = read_topology(Sysroot::open(s.str()));
  EXPECT_FALSE(t.functions[1].memory_size);
  EXPECT_EQ(t.functions[1].memory_size_source, "");
  EXPECT_NE(findings_text(t).find(kGpuSys + "/mem_info_vram_total: "), std::string::npos) << findings_text(t);
  EXPECT_NO_THROW((void)topology_to_json(t).dump());
}

INSTANTIATE_TEST_SUITE_P(
    Text, VendorMemoryJunk,
    ::testing::Values(Junk{"trailing_letters", "12abc\n"}, Junk{"hex", "0x400000000\n"}, Junk{"negative", "-1\n"},
                      Junk{"plus", "+17179869184\n"}, Junk{"empty", ""}, Junk{"newline_only", "\n"},
                      Junk{"leading_space", " 17179869184\n"}, Junk{"leading_zero", "017179869184\n"},
                      Junk{"two_lines", "17179869184\n1\n"}, Junk{"nul", std::string("1717\0" "9869184\n", 13)},
                      Junk{"above_a_pebibyte", "1125899906842625\n"}, Junk{"u64_max", "18446744073709551615\n"},
                      Junk{"overflows_u64", "99999999999999999999999\n"}, Junk{"long", std::string(100000, '7') + "\n"},
                      Junk{"not_utf8", "\xff\xfe\n"}),
    [](const auto& info) { return info.param.name; });

TEST(VendorMemory, DirectoryOrLinkOutOfTheSysrootIsUnknownAndAFinding) {
  SysrootDir s;
  gpu_machine(s, "amdgpu", 256 * kMiB);
  fs::create_directories(s.dir() / kGpuSys / "mem_info_vram_total");
  s.link(kGpuSys + "/mem_info_vis_vram_total", "../../../../../../../../../../proc/meminfo");
  Topology t = read_topology(Sysroot::open(s.str()));
  EXPECT_FALSE(t.functions[1].memory_size);
  EXPECT_FALSE(t.functions[1].memory_visible_size);
  std::string all = findings_text(t);
  EXPECT_NE(all.find("mem_info_vram_total: not a regular file"), std::string::npos) << all;
  EXPECT_NE(all.find("mem_info_vis_vram_total: not a regular file"), std::string::npos) << all;
  s.link(kGpuSys + "/mem_info_vis_vram_total", "/etc/passwd");  // absolute: the sysroot's /etc, absent
  EXPECT_FALSE(read_topology(Sysroot::open(s.str())).functions[1].memory_visible_size);
}

TEST(VendorMemory, ZeroAndTheLimitAreNumbers) {
  SysrootDir s;
  gpu_machine(s, "amdgpu", 256 * kMiB);
  s.write(kGpuSys + "/mem_info_vram_total", "1125899906842624");  // 2^50, no newline
  s.write(kGpuSys + "/mem_info_vis_vram_total", "0\n");
  Topology t = read_topology(Sysroot::open(s.str()));
  EXPECT_EQ(t.functions[1].memory_size, kMaxDeviceMemoryBytes);
  EXPECT_EQ(t.functions[1].memory_visible_size, 0u);
}

TEST(VendorMemory, InconsistentAmdgpuSizesAreFindings) {
  SysrootDir s;
  gpu_machine(s, "amdgpu", 32 * kGiB);
  s.write(kGpuSys + "/mem_info_vram_total", "17179869184\n");
  s.write(kGpuSys + "/mem_info_vis_vram_total", "34359738368\n");  // more visible than there is: not amdgpu
  Topology t = read_topology(Sysroot::open(s.str()));
  EXPECT_EQ(t.functions[1].memory_size, 16 * kGiB);
  EXPECT_FALSE(t.functions[1].memory_visible_size);
  EXPECT_NE(findings_text(t).find("exceed the 17179869184 bytes"), std::string::npos) << findings_text(t);
  // The BAR holds all VRAM but less is visible (amdgpu.vis_vramlimit): amdgpu is not large-BAR.
  s.write(kGpuSys + "/mem_info_vis_vram_total", "268435456\n");
  t = read_topology(Sysroot::open(s.str()));
  EXPECT_EQ(t.functions[1].memory_visible_size, 256 * kMiB);
  EXPECT_NE(findings_text(t).find("only 256 MiB of 16 GiB VRAM is CPU-visible although the largest BAR is 32 GiB"),
            std::string::npos)
      << findings_text(t);
}

TEST(VendorMemory, SnapshotKeepsTheFilesAndReadsBackTheSame) {
  SysrootDir s;
  gpu_machine(s, "amdgpu", 256 * kMiB);
  s.write(kGpuSys + "/mem_info_vram_total", "17179869184\n");
  s.write(kGpuSys + "/mem_info_vis_vram_total", "268435456\n");
  s.write(kGpuSys + "/mem_info_vram_used", "1\n");  // not read, so not captured
  Sysroot root = Sysroot::open(s.str());
  Topology live = read_topology(root);
  std::string out = ::testing::TempDir() + "/vendor-memory-" + std::to_string(::getpid()) + ".tar.gz";
  fs::remove(out);
  write_snapshot(root, live, out, {});
  Sysroot archive = Sysroot::open(out);
  EXPECT_EQ(archive.read_line(kGpuSys + "/mem_info_vram_total"), "17179869184");
  EXPECT_EQ(archive.read_line(kGpuSys + "/mem_info_vis_vram_total"), "268435456");
  EXPECT_FALSE(archive.exists(kGpuSys + "/mem_info_vram_used"));
  Topology back = read_topology(archive);
  EXPECT_EQ(back.functions[1].memory_size, 16 * kGiB);
  EXPECT_EQ(back.functions[1].memory_visible_size, 256 * kMiB);
  EXPECT_EQ(topology_to_json(back)["functions"], topology_to_json(live)["functions"]);
  fs::remove(out);
}


// --- ACS with its meaning (acs_meaning.h) -------------------------------------------------------

// The seven bits in register order, named as the kernel's PCI_ACS_* flags; P2PDMA reads exactly the
// redirect bits pci_bridge_has_acs_redir() tests.
TEST(AcsMeaning, SevenBitsAndP2pdmaReadsTheRedirectOnes) {
  auto all = acs_bit_meanings();
  ASSERT_EQ(all.size(), 7u);
  uint16_t masks = 0, read = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].mask, 1u << i) << all[i].bit;
    EXPECT_FALSE(all[i].effect.empty() || all[i].p2pdma.empty() || all[i].name.empty()) << all[i].bit;
    masks |= all[i].mask;
    if (all[i].p2pdma_reads) read |= all[i].mask;
    // A bit P2PDMA reads is said to be counted as redirect, one it does not as not read.
    EXPECT_EQ(all[i].p2pdma.find("counted as redirect") != std::string_view::npos, all[i].p2pdma_reads) << all[i].bit;
  }
  EXPECT_EQ(masks, kAcsSv | kAcsTb | kAcsRr | kAcsCr | kAcsUf | kAcsEc | kAcsDt);
  EXPECT_EQ(read, kAcsRedirectBits);
  EXPECT_EQ(acs_bit_names(kAcsSv | kAcsRr | kAcsCr | kAcsUf), "SV RR CR UF");
  EXPECT_EQ(acs_bit_names(0), "none");
  EXPECT_EQ(acs_bit_names(0x8000), "none");  // reserved bits are not named
}

TEST(AcsMeaning, LineSaysSetAndImplementedAndUnknownStaysUnknown) {
  EXPECT_EQ(acs_line(Acs{CapState::kUnknown}).rfind("ACS unknown", 0), 0u);
  EXPECT_EQ(acs_line(Acs{CapState::kAbsent}), "no ACS");
  Acs port{CapState::kPresent, 0x100, 0x001f, 0x001d};
  EXPECT_EQ(acs_line(port), "ACS set SV RR CR UF (implements SV TB RR CR UF)");
  EXPECT_FALSE(acs_egress(port)) << "no EC: no vector";
  Acs egress{CapState::kPresent, 0x100, static_cast<uint16_t>(0x007f | (8 << 8)), kAcsEc, 0x5};
  EXPECT_EQ(acs_line(egress), "ACS set EC (implements SV TB RR CR UF EC DT), egress vector 8 bits 0x00000005");
  egress.cap = 0x007f;  // a size of 0 encodes 256 bits
  EXPECT_EQ(acs_egress(egress)->size_bits, 256);
  egress.egress_first_word.reset();
  EXPECT_NE(acs_line(egress).find("(not readable)"), std::string::npos) << acs_line(egress);
  // Each set bit's line carries its effect and what P2PDMA does, in register order.
  auto lines = acs_set_bit_lines(kAcsRr | kAcsSv);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("SV (Source Validation): ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("RR (P2P Request Redirect): ", 0), 0u) << lines[1];
  EXPECT_NE(lines[1].find("; P2PDMA: counted as redirect"), std::string::npos) << lines[1];
}

// A machine on disk: a root port implementing every ACS capability with RR, CR and EC set and an
// 8-bit egress vector, a switch whose downstream ports set RR and CR, two GPUs below it, and a
// function read unprivileged (64 bytes). topology's JSON names the bits, its text says what each
// set bit does once, explain says it for the tested ports; the unknown stays unknown.
class AcsOnDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    s_.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n");
    s_.function("pci0000:00/0000:00:00.0", test::ConfigBytes(0x8086, 0x4c43, 0x060000, 0).bytes(256));
    std::string rp = "pci0000:00/0000:00:01.0";
    s_.function(rp, test::ConfigBytes(0x8086, 0x4c01, 0x060400, 4, true)
                        .buses(0, 1, 4)
                        .acs(kAcsRr | kAcsCr | kAcsEc, static_cast<uint16_t>(0x007f | (8 << 8)), 0x5)
                        .bytes());
    std::string usp = rp + "/0000:01:00.0";
    s_.function(usp, test::ConfigBytes(0x10b5, 0x8747, 0x060400, 5, true).buses(1, 2, 4).bytes());
    for (int k = 0; k < 2; ++k) {
      std::string dsp = fmt::format("{}/0000:02:{:02x}.0", usp, k);
      s_.function(dsp, test::ConfigBytes(0x10b5, 0x8747, 0x060400, 6, true).buses(2, 3 + k, 3 + k).acs(kAcsRr | kAcsCr).bytes());
      s_.function(fmt::format("{}/0000:{:02x}:00.0", dsp, 3 + k), test::ConfigBytes(0x8086, 0xe223, 0x030000, 0).bytes());
    }
    s_.function("pci0000:00/0000:00:1f.0", test::ConfigBytes(0x8086, 0x7a84, 0x060100, 0).bytes(64));
  }
  test::SysrootDir s_;
};

TEST_F(AcsOnDisk, TopologyJsonNamesTheBitsAndTheMeaningsOnce) {
  auto r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + s_.str() + " topology --format json");
  ASSERT_EQ(r.status, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["acs_bits"].size(), acs_bit_meanings().size());
  for (size_t i = 0; i < acs_bit_meanings().size(); ++i) {
    EXPECT_EQ(j["acs_bits"][i]["bit"], std::string(acs_bit_meanings()[i].bit));
    EXPECT_EQ(j["acs_bits"][i]["effect"], std::string(acs_bit_meanings()[i].effect));
  }
  std::map<std::string, nlohmann::json> by_bdf;
  for (const auto& f : j["functions"]) by_bdf[f["bdf"]] = f;
  const auto& rp = by_bdf["0000:00:01.0"];
  EXPECT_EQ(rp["acs_implemented"], nlohmann::json({"SV", "TB", "RR", "CR", "UF", "EC", "DT"}));
  EXPECT_EQ(rp["acs_enabled"], nlohmann::json({"RR", "CR", "EC"}));
  EXPECT_EQ(rp["acs_egress_vector"], nlohmann::json({{"size_bits", 8}, {"first_word", 5}}));
  const auto& dsp = by_bdf["0000:02:00.0"];
  EXPECT_EQ(dsp["acs_implemented"], nlohmann::json({"SV", "TB", "RR", "CR", "UF"}));
  EXPECT_EQ(dsp["acs_enabled"], nlohmann::json({"RR", "CR"}));
  EXPECT_TRUE(dsp["acs_egress_vector"].is_null()) << "no EC implemented";
  const auto& gpu = by_bdf["0000:03:00.0"];
  EXPECT_EQ(gpu["acs"], "absent");
  EXPECT_EQ(gpu["acs_enabled"], nlohmann::json::array());
  const auto& unread = by_bdf["0000:00:1f.0"];
  EXPECT_EQ(unread["acs"], "unknown");
  EXPECT_TRUE(unread["acs_implemented"].is_null());
  EXPECT_TRUE(unread["acs_enabled"].is_null());
}

TEST_F(AcsOnDisk, TopologyTextSaysEachSetBitOnce) {
  auto r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + s_.str() + " topology");
  ASSERT_EQ(r.status, 0) << r.output;
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = r.output.find(what); at != std::string::npos; at = r.output.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("ACS set RR CR EC (implements SV TB RR CR UF EC DT), egress vector 8 bits 0x00000005"), 1u) << r.output;
  EXPECT_EQ(count("ACS set RR CR (implements SV TB RR CR UF)"), 2u) << r.output;
  for (const auto& m : acs_bit_meanings()) {
    std::string line = fmt::format("  {} ({}), set on ", m.bit, m.name);
    size_t expected = (m.mask & (kAcsRr | kAcsCr | kAcsEc)) ? 1 : 0;
    EXPECT_EQ(count(line), expected) << m.bit << "\n" << r.output;
    if (expected) EXPECT_NE(r.output.find(std::string(m.effect)), std::string::npos) << m.bit;
  }
  EXPECT_EQ(count("  RR (P2P Request Redirect), set on 3 function(s): "), 1u) << r.output;
  EXPECT_EQ(count("  EC (P2P Egress Control), set on 1 function(s): "), 1u) << r.output;
  EXPECT_NE(r.output.find("ACS unknown (config space cut short)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ACS unknown on some functions"), std::string::npos) << r.output;
}

TEST_F(AcsOnDisk, ExplainSaysWhatTheTestedBitsDo) {
  auto r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + s_.str() + " --kernel 7.0 explain 03:00.0 04:00.0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ctrl 0x000c (set RR CR; implements SV TB RR CR UF)  -> redirect"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("What those ACS bits do to a peer request:"), std::string::npos) << r.output;
  for (const auto& line : acs_set_bit_lines(kAcsRr | kAcsCr)) EXPECT_NE(r.output.find("    " + line + "\n"), std::string::npos) << line;
  // Only the bits set on the tested ports: the root port's EC is above their common switch.
  EXPECT_EQ(r.output.find("EC (P2P Egress Control): "), std::string::npos) << r.output;
}

}  // namespace
}  // namespace p2paudit
