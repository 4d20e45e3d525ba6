// SPDX-License-Identifier: GPL-2.0-or-later
// The IOMMU mode from every source a capture holds (group type files, command line, kernel config,
// era, which IOMMU registered) and where it came from; kernels whose whitelist entry depends on a
// stable patch level the release string hides; pcie_acs_override= named in the ACS remedy.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/platform.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_report.h"
#include "synthetic_tree.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using test::SysrootDir;
using test::Tree;

// A sysroot with IOMMU groups 0 and 1 (no type files unless `type` is given), a kernel release,
// a command line and, unless empty, a kernel config.
struct Machine {
  SysrootDir s;
  explicit Machine(const std::string& release, const std::string& cmdline, const std::string& config,
                   const std::string& type = "", int groups = 2) {
    fs::remove(s.dir() / "boot/config-6.8.0");
    s.write("proc/sys/kernel/osrelease", release + "\n");
    s.write("proc/cmdline", cmdline + "\n");
    if (!config.empty()) s.write("boot/config-" + release, config);
    for (int g = 0; g < groups; ++g) {
      fs::create_directories(s.dir() / ("sys/kernel/iommu_groups/" + std::to_string(g) + "/devices"));
      if (!type.empty()) s.write("sys/kernel/iommu_groups/" + std::to_string(g) + "/type", type + "\n");
    }
  }
  Machine& cpu(const std::string& vendor) {
    s.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: " + vendor + "\ncpu family\t: 6\nmodel\t\t: 85\n");
    return *this;
  }
  Machine& iommu_unit(const std::string& name) {  // sys/class/iommu/dmar0, ivhd0
    s.link("sys/class/iommu/" + name, "../../devices/virtual/iommu/" + name);
    return *this;
  }
  Platform platform() const {
    std::vector<Finding> findings;
    return read_platform(Sysroot::open(s.str()), findings);
  }
};

const std::string kTranslatedConfig = "CONFIG_PCI_P2PDMA=y\nCONFIG_IOMMU_DEFAULT_DMA_LAZY=y\n";
const std::string kPassthroughConfig = "CONFIG_PCI_P2PDMA=y\nCONFIG_IOMMU_DEFAULT_PASSTHROUGH=y\n";

TEST(IommuMode, GroupTypeFilesDecideFirst) {
  Machine dma("6.8.0-31-generic", "root=/dev/sda1 iommu=pt", kPassthroughConfig, "DMA-FQ");
  EXPECT_EQ(dma.platform().iommu_mode, "translated");  // the type file beats the command line and config
  EXPECT_EQ(dma.platform().iommu_mode_source, "iommu_group type");
  Machine identity("6.8.0-31-generic", "iommu.passthrough=0", kTranslatedConfig, "identity");
  EXPECT_EQ(identity.platform().iommu_mode, "passthrough");
  EXPECT_EQ(identity.platform().iommu_mode_source, "iommu_group type");
  Machine plain_dma("6.8.0-31-generic", "", "", "DMA");
  EXPECT_EQ(plain_dma.platform().iommu_mode, "translated");
}

TEST(IommuMode, GroupsThatDisagreeFallBackToTheDefault) {
  Machine m("6.8.0-31-generic", "", "", "DMA");
  m.s.write("sys/kernel/iommu_groups/1/type", "identity\n");
  Platform p = m.platform();
  EXPECT_EQ(p.iommu_mode, "unknown");
  EXPECT_NE(p.iommu_mode_source.find("iommu_group types differ"), std::string::npos) << p.iommu_mode_source;
  Machine pt("6.8.0-31-generic", "iommu=pt", "", "DMA");
  pt.s.write("sys/kernel/iommu_groups/1/type", "identity\n");
  EXPECT_EQ(pt.platform().iommu_mode, "passthrough");
  EXPECT_EQ(pt.platform().iommu_mode_source, "command line iommu=pt (iommu_group types differ (1 translated, 1 identity))");
}

TEST(IommuMode, NoGroupsIsOffAndSaysWhatTheCommandLineAsked) {
  Machine off("6.8.0-31-generic", "quiet intel_iommu=on intel_iommu=off", kTranslatedConfig, "", 0);
  EXPECT_EQ(off.platform().iommu_mode, "off");
  EXPECT_EQ(off.platform().iommu_mode_source, "no IOMMU groups (command line intel_iommu=off)");
  Machine none("6.8.0-31-generic", "quiet", kTranslatedConfig + "CONFIG_AMD_IOMMU=y\n", "", 0);
  EXPECT_EQ(none.platform().iommu_mode_source, "no IOMMU groups");
  Machine amd("6.8.0-31-generic", "amd_iommu=fullflush,off", "", "", 0);
  EXPECT_EQ(amd.platform().iommu_mode_source, "no IOMMU groups (command line amd_iommu=off)");
  // The config says why, where the command line does not.
  Machine not_built("6.8.0-31-generic", "quiet", "CONFIG_PCI_P2PDMA=y\n", "", 0);
  EXPECT_EQ(not_built.platform().iommu_mode_source,
            "no IOMMU groups (kernel built without CONFIG_INTEL_IOMMU and CONFIG_AMD_IOMMU)");
  Machine default_off("6.8.0-31-generic", "quiet", "CONFIG_INTEL_IOMMU=y\nCONFIG_AMD_IOMMU=y\n", "", 0);
  default_off.cpu("GenuineIntel");
  EXPECT_EQ(default_off.platform().iommu_mode, "off");
  EXPECT_EQ(default_off.platform().iommu_mode_source,
            "no IOMMU groups (CONFIG_INTEL_IOMMU_DEFAULT_ON not set and no intel_iommu=on)");
  Machine default_on("6.8.0-31-generic", "quiet", "CONFIG_INTEL_IOMMU=y\nCONFIG_INTEL_IOMMU_DEFAULT_ON=y\n", "", 0);
  default_on.cpu("GenuineIntel");
  EXPECT_EQ(default_on.platform().iommu_mode_source, "no IOMMU groups");  // on by default, yet none registered
}

TEST(IommuMode, CommandLineLastWordWins) {
  // No type file (a kernel before 5.11 has none): the command line, in the order the kernel parses it.
  struct Case {
    std::string cmdline, mode, source;
  } cases[] = {
      {"iommu=pt iommu.passthrough=0", "translated", "command line iommu.passthrough=0"},
      {"iommu.passthrough=0 iommu=pt", "passthrough", "command line iommu=pt"},
      {"iommu=soft,pt", "passthrough", "command line iommu=pt"},
      {"iommu=pt iommu=nopt", "translated", "command line iommu=nopt"},
      {"iommu.passthrough=on", "passthrough", "command line iommu.passthrough=on"},
      {"iommu.passthrough=N", "translated", "command line iommu.passthrough=N"},
      {"iommu.strict=1", "passthrough", "kernel config: CONFIG_IOMMU_DEFAULT_PASSTHROUGH=y"},  // strictness only
  };
  for (const auto& c : cases) {
    Machine m("5.10.0-28-amd64", c.cmdline, kPassthroughConfig);
    m.cpu("AuthenticAMD").iommu_unit("ivhd0");
    EXPECT_EQ(m.platform().iommu_mode, c.mode) << c.cmdline;
    EXPECT_EQ(m.platform().iommu_mode_source, c.source) << c.cmdline;
  }
}

// The command line as the kernel reads it (kernel_cmdline.h): nothing after "--" (init's), no
// parameter inside another's quoted value, names with '-' for '_', the last option winning.
TEST(IommuMode, CommandLineIsReadAsTheKernelReadsIt) {
  struct Case {
    std::string cmdline, mode, source;
  } cases[] = {
      {"iommu=pt -- iommu=nopt", "passthrough", "command line iommu=pt"},
      {"iommu=nopt dyndbg=\"module x +p iommu=pt\"", "translated", "command line iommu=nopt"},
      {"iommu.passthrough=0 -- iommu.passthrough=1", "translated", "command line iommu.passthrough=0"},
      {"iommu=pt \"--\" iommu=nopt", "passthrough", "command line iommu=pt"},
      {"iommu=\"soft,pt\"", "passthrough", "command line iommu=pt"},
      {"-- iommu=pt", "passthrough", "kernel config: CONFIG_IOMMU_DEFAULT_PASSTHROUGH=y"},
  };
  for (const auto& c : cases) {
    Machine m("5.10.0-28-amd64", c.cmdline, kPassthroughConfig);
    m.cpu("AuthenticAMD").iommu_unit("ivhd0");
    EXPECT_EQ(m.platform().iommu_mode, c.mode) << c.cmdline;
    EXPECT_EQ(m.platform().iommu_mode_source, c.source) << c.cmdline;
  }
  // No groups: what the command line said, with intel-iommu= spelt as the kernel accepts it.
  Machine dashed("6.8.0-31-generic", "quiet intel-iommu=off", kTranslatedConfig, "", 0);
  EXPECT_EQ(dashed.platform().iommu_mode_source, "no IOMMU groups (command line intel_iommu=off)");
  Machine after("6.8.0-31-generic", "quiet -- intel_iommu=off", kTranslatedConfig, "", 0);
  EXPECT_EQ(after.platform().iommu_mode_source,  // what the config says: the intel_iommu=off is init's
            "no IOMMU groups (kernel built without CONFIG_INTEL_IOMMU and CONFIG_AMD_IOMMU)");
  Machine last("6.8.0-31-generic", "amd_iommu=off amd_iommu=fullflush,on", "", "", 0);
  EXPECT_EQ(last.platform().iommu_mode_source, "no IOMMU groups (command line amd_iommu=on)");
}

// NVIDIA's module option on the command line: modprobe applies it, reading /proc/cmdline with
// libkmod's parser; one after "--" may or may not reach the module, so the setting is unknown.
TEST(IommuMode, NvidiaOptionOnTheCommandLineIsTheKernelsWordsOnly) {
  const std::string key = "nvidia.NVreg_GrdmaPciTopoCheckOverride";
  auto read = [&](const std::string& cmdline) {
    Platform p = Machine("6.8.0-31-generic", cmdline, kTranslatedConfig).platform();
    return std::make_pair(p.nvidia_grdma_override, p.nvidia_grdma_override_source);
  };
  EXPECT_EQ(read("quiet " + key + "=1 " + key + "=2"), std::make_pair(std::optional<int64_t>(2), std::string("the kernel command line")));
  EXPECT_EQ(read("quiet nvidia.NVreg-GrdmaPciTopoCheckOverride=1").first, 1);
  EXPECT_FALSE(read("quiet -- " + key + "=1").first);
  EXPECT_FALSE(read(key + "=2 -- " + key + "=1").first);
  EXPECT_FALSE(read("dyndbg=\"x " + key + "=1\"").first);  // part of another parameter's value
}

TEST(IommuMode, HostileCommandLineWordIsEscapedInTheSource) {
  Machine m("6.8.0-31-generic", "iommu.passthrough=1\x1b[2J", kTranslatedConfig);
  Platform p = m.platform();
  EXPECT_EQ(p.iommu_mode, "passthrough");
  EXPECT_EQ(p.iommu_mode_source.find('\x1b'), std::string::npos) << p.iommu_mode_source;
  EXPECT_EQ(p.iommu_mode_source.rfind("command line iommu.passthrough=1", 0), 0u) << p.iommu_mode_source;
}

TEST(IommuMode, KernelConfigDefault) {
  Machine translated("5.10.0-28-amd64", "quiet", kTranslatedConfig);
  EXPECT_EQ(translated.platform().iommu_mode, "translated");
  EXPECT_EQ(translated.platform().iommu_mode_source, "kernel config: CONFIG_IOMMU_DEFAULT_PASSTHROUGH not set");
  Machine pt("5.10.0-28-amd64", "quiet", kPassthroughConfig);
  pt.iommu_unit("dmar0");
  EXPECT_EQ(pt.platform().iommu_mode, "passthrough");
  // Nothing says: unknown, and the source says why.
  Machine nothing("5.10.0-28-amd64", "quiet", "");
  nothing.iommu_unit("dmar0");
  EXPECT_EQ(nothing.platform().iommu_mode, "unknown");
  EXPECT_NE(nothing.platform().iommu_mode_source.find("no iommu_group type"), std::string::npos);
}

TEST(IommuMode, IntelVtdBefore53HadNoDefaultDomains) {
  // 4.20-5.2: VT-d translated every device unless iommu=pt; CONFIG_IOMMU_DEFAULT_PASSTHROUGH and
  // iommu.passthrough= did not reach it.
  Machine on("5.0.0-23-generic", "intel_iommu=on", "");
  on.iommu_unit("dmar0");
  EXPECT_EQ(on.platform().iommu_mode, "translated");
  EXPECT_EQ(on.platform().iommu_mode_source, "Intel VT-d before 5.3: translated unless iommu=pt");
  Machine config("5.0.0-23-generic", "intel_iommu=on iommu.passthrough=1", kPassthroughConfig);
  config.iommu_unit("dmar0");
  EXPECT_EQ(config.platform().iommu_mode, "translated");
  Machine pt("4.20.17", "intel_iommu=on iommu=pt", "");
  pt.iommu_unit("dmar0");
  EXPECT_EQ(pt.platform().iommu_mode, "passthrough");
  // A bare-metal Intel CPU without sys/class/iommu has only VT-d.
  Machine bare("5.0.0-23-generic", "intel_iommu=on", "");
  bare.cpu("GenuineIntel");
  EXPECT_EQ(bare.platform().iommu_mode, "translated");
  // 5.3+ VT-d honours the config: without it, nothing says.
  Machine later("5.4.0-42-generic", "intel_iommu=on", "");
  later.iommu_unit("dmar0");
  EXPECT_EQ(later.platform().iommu_mode, "unknown");
  Machine later_pt("5.4.0-42-generic", "intel_iommu=on", kPassthroughConfig);
  later_pt.iommu_unit("dmar0");
  EXPECT_EQ(later_pt.platform().iommu_mode, "passthrough");
  // AMD-Vi used default domains already: the config decides on 5.0 too.
  Machine amd("5.0.0-23-generic", "", kPassthroughConfig);
  amd.iommu_unit("ivhd0");
  EXPECT_EQ(amd.platform().iommu_mode, "passthrough");
}

TEST(IommuMode, NoptOnlyFrom55) {
  Machine old("5.4.0-42-generic", "iommu=nopt", kPassthroughConfig);
  old.iommu_unit("ivhd0");
  EXPECT_EQ(old.platform().iommu_mode, "passthrough");  // 5.4's iommu_setup() has no nopt
  Machine later("5.5.19", "iommu=nopt", kPassthroughConfig);
  later.iommu_unit("ivhd0");
  EXPECT_EQ(later.platform().iommu_mode, "translated");
}

TEST(IommuMode, MemoryEncryptionTurnsAConfiguredPassthroughBack) {
  const std::string sme = kPassthroughConfig + "CONFIG_AMD_MEM_ENCRYPT=y\n";
  Machine on("6.1.0-13-amd64", "mem_encrypt=on", sme);
  on.cpu("AuthenticAMD").iommu_unit("ivhd0");
  EXPECT_EQ(on.platform().iommu_mode, "translated");
  Machine maybe("6.1.0-13-amd64", "", sme + "CONFIG_AMD_MEM_ENCRYPT_ACTIVE_BY_DEFAULT=y\n");
  maybe.cpu("AuthenticAMD").iommu_unit("ivhd0");
  EXPECT_EQ(maybe.platform().iommu_mode, "unknown");
  Machine off("6.1.0-13-amd64", "mem_encrypt=off", sme + "CONFIG_AMD_MEM_ENCRYPT_ACTIVE_BY_DEFAULT=y\n");
  off.cpu("AuthenticAMD").iommu_unit("ivhd0");
  EXPECT_EQ(off.platform().iommu_mode, "passthrough");
}

TEST(IommuMode, SourceInTheJsonPlatformBlock) {
  Machine m("6.8.0-31-generic", "iommu=pt", kTranslatedConfig);
  auto j = platform_to_json(m.platform());
  EXPECT_EQ(j["iommu_mode"], "passthrough");
  EXPECT_EQ(j["iommu_mode_source"], "command line iommu=pt");
}

// The kernel-oracle captures (real 6.1.192 kernels booted with these command lines, dmesg saying
// "Default domain type: Translated" unless the command line chose): the mode read without the
// group type files, from the command line and a config like theirs, equals the type files' answer.
TEST(IommuMode, OracleCapturesAgreeWithoutTypeFiles) {
  const fs::path oracle = fs::path(P2PAUDIT_TEST_DATA) / "kernel-oracle";
  for (const char* name : {"h-d4-intel-iommu-on", "h-d4b-intel-iommu-on-pt", "h-d6-intel-iommu-off",
                           "h-d7-amd-iommu-epyc", "h-d7b-amd-iommu-epyc-pt", "h-d8-intel-iommu-on-epyc-cpu"}) {
    Sysroot capture = Sysroot::open((oracle / name / "sysroot.tar.gz").string());
    std::vector<Finding> findings;
    Platform real = read_platform(capture, findings);
    ASSERT_NE(real.iommu_mode, "unknown") << name;

    SysrootDir copy;
    for (const char* file : {"proc/cmdline", "proc/cpuinfo", "proc/sys/kernel/osrelease"})
      if (auto text = capture.read_text(file)) copy.write(file, *text);
    fs::remove(copy.dir() / "boot/config-6.8.0");
    copy.write("boot/config-" + real.kernel_release, kTranslatedConfig);
    auto groups = capture.list("sys/kernel/iommu_groups");
    for (const auto& g : groups) fs::create_directories(copy.dir() / ("sys/kernel/iommu_groups/" + g + "/devices"));
    std::vector<Finding> copy_findings;
    Platform derived = read_platform(Sysroot::open(copy.str()), copy_findings);
    EXPECT_EQ(derived.iommu_mode, real.iommu_mode) << name << ": " << derived.iommu_mode_source;
    if (!groups.empty()) EXPECT_NE(derived.iommu_mode_source, real.iommu_mode_source) << name;
  }
}

// --- Backported whitelist entries behind a distribution release --------------------------------

Tree host_bridge_0b25() {
  Tree tree;
  tree.add("00:00.0", "", 0x8086, 0x0b25, PcieType::kNotPcie);
  tree.rp("00:1c.0");
  tree.rp("00:1d.0");
  tree.ep("01:00.0", "00:1c.0");
  tree.ep("02:00.0", "00:1d.0");
  return tree;
}

KernelRules rules_for(const Platform& platform, const std::string& kernel = "") {
  return load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", platform, {kernel, {}, {}});
}

TEST(BackportedWhitelist, DistroReleaseHidingThePatchLevelIsUnknownWithOneNote) {
  Tree tree = host_bridge_0b25();
  tree.t.platform.kernel_release = "7.1.0-14-generic";
  KernelRules rules = rules_for(tree.t.platform);
  for (const auto& note : rules.notes) EXPECT_EQ(note.find("8086:0cfe"), std::string::npos) << note;
  auto v = pci_p2pdma_distance(tree.t, rules, tree.index("01:00.0"), tree.index("02:00.0"));
  EXPECT_EQ(v.map_type, MapType::kUnknown);
  EXPECT_FALSE(v.p2pdma_distance);
  ASSERT_EQ(v.unknowns.size(), 1u);
  EXPECT_NE(v.unknowns[0].find("8086:0b25"), std::string::npos) << v.unknowns[0];
  ASSERT_EQ(v.remedy.unknown_whitelist.size(), 1u);
  EXPECT_NE(v.remedy.unknown_whitelist[0].find("/proc/version_signature"), std::string::npos);
  EXPECT_TRUE(v.remedy.whitelist.empty());  // not "not in this kernel's whitelist": that is the unknown
  for (const auto& a : v.remedy.alternatives) EXPECT_EQ(a.find("needs evidence"), std::string::npos) << a;
  // Both directions, one note for the machine: the entry its host bridge is keyed by, not the other nine.
  auto back = pci_p2pdma_distance(tree.t, rules, tree.index("02:00.0"), tree.index("01:00.0"));
  EXPECT_EQ(back.unknowns, v.unknowns);
  auto notes = unknown_whitelist_notes(tree.t, rules);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("8086:0b25"), std::string::npos);
  // The index answers as pci_p2pdma_distance() does.
  P2pdmaIndex index(tree.t, rules);
  EXPECT_EQ(index.outcome(tree.index("01:00.0"), tree.index("02:00.0")).map_type, MapType::kUnknown);
  // A host bridge no unknown entry keys keeps its known verdict and gets no note.
  Tree other = host_bridge_0b25();
  other.t.functions[0].device = 0x29c0;
  other.t.platform.kernel_release = "7.1.0-14-generic";
  KernelRules other_rules = rules_for(other.t.platform);
  EXPECT_EQ(pci_p2pdma_distance(other.t, other_rules, other.index("01:00.0"), other.index("02:00.0")).map_type,
            MapType::kNotSupported);
  EXPECT_TRUE(unknown_whitelist_notes(other.t, other_rules).empty());
}

TEST(BackportedWhitelist, KnownPatchLevelKeepsAKnownVerdict) {
  Tree tree = host_bridge_0b25();
  auto map_for = [&](const std::string& release, const std::string& version = "", const std::string& signature = "") {
    tree.t.platform.kernel_release = release;
    tree.t.platform.kernel_version = version;
    tree.t.platform.kernel_version_signature = signature;
    KernelRules rules = rules_for(tree.t.platform);
    return pci_p2pdma_distance(tree.t, rules, tree.index("01:00.0"), tree.index("02:00.0")).map_type;
  };
  EXPECT_EQ(map_for("7.1.3"), MapType::kThruHostBridge);   // certainly in
  EXPECT_EQ(map_for("7.1.2"), MapType::kNotSupported);     // certainly out
  EXPECT_EQ(map_for("7.2.0-3-generic"), MapType::kThruHostBridge);  // mainline has it
  EXPECT_EQ(map_for("7.0.0-22-generic"), MapType::kNotSupported);   // no 7.0 backport
  // The running kernel names its stable base: Ubuntu's version_signature, Debian's proc/version.
  EXPECT_EQ(map_for("7.1.0-14-generic", "", "Ubuntu 7.1.0-14.14-generic 7.1.5"), MapType::kThruHostBridge);
  EXPECT_EQ(map_for("7.1.0-14-generic", "", "Ubuntu 7.1.0-14.14-generic 7.1.1"), MapType::kNotSupported);
  EXPECT_EQ(map_for("7.1.0-2-amd64", "Linux version 7.1.0-2-amd64 (debian-kernel@lists.debian.org) #1 SMP "
                                     "PREEMPT_DYNAMIC Debian 7.1.4-1 (2026-09-01)"),
            MapType::kThruHostBridge);
  // A base of another X.Y says nothing about this one.
  EXPECT_EQ(map_for("7.1.0-14-generic", "", "Ubuntu 7.1.0-14.14-generic 7.2.1"), MapType::kUnknown);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The tool on a sysroot of that machine: `?` in the grid, one note in matrix and in policy.
TEST(BackportedWhitelist, ToolShowsOneNoteAndUnknownCells) {
  using test::ConfigBytes;
  SysrootDir s;
  s.write("proc/sys/kernel/osrelease", "7.1.0-14-generic\n");
  s.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n");
  s.write("boot/config-7.1.0-14-generic", "CONFIG_PCI_P2PDMA=y\n");
  s.function("pci0000:00/0000:00:00.0", ConfigBytes(0x8086, 0x0b25, 0x060000, 0).bytes());
  s.function("pci0000:00/0000:00:1c.0", ConfigBytes(0x8086, 0x7000, 0x060400, 4, true).buses(0, 1, 1).bytes());
  s.function("pci0000:00/0000:00:1d.0", ConfigBytes(0x8086, 0x7000, 0x060400, 4, true).buses(0, 2, 2).bytes());
  s.function("pci0000:00/0000:00:1c.0/0000:01:00.0", ConfigBytes(0x1b36, 0x0010, 0x010802, 0).bytes());
  s.function("pci0000:00/0000:00:1d.0/0000:02:00.0", ConfigBytes(0x1b36, 0x0010, 0x010802, 0).bytes());
  auto matrix = test::run_command(test::tool_file() + " --sysroot " + s.str() + " matrix 2>&1");
  EXPECT_EQ(count(matrix.output, "whitelist entry 8086:0b25"), 1u) << matrix.output;
  EXPECT_EQ(count(matrix.output, "whitelist entry 8086:0cfe"), 0u) << matrix.output;
  EXPECT_EQ(count(matrix.output, "  ?"), 3u) << matrix.output;  // the legend and both cells
  auto policy = test::run_command(test::tool_file() + " --sysroot " + s.str() + " policy 2>&1");
  EXPECT_EQ(count(policy.output, "carries whitelist entry 8086:0b25"), 1u) << policy.output;
  EXPECT_NE(policy.output.find("/proc/version_signature"), std::string::npos) << policy.output;
  // With the stable base known, the verdict is known again and nothing is noted.
  s.write("proc/version_signature", "Ubuntu 7.1.0-14.14-generic 7.1.4\n");
  matrix = test::run_command(test::tool_file() + " --sysroot " + s.str() + " matrix 2>&1");
  EXPECT_EQ(count(matrix.output, "8086:0b25"), 0u) << matrix.output;
  EXPECT_EQ(count(matrix.output, "HB"), 3u) << matrix.output;  // the legend and both cells
}

// --- pcie_acs_override= -------------------------------------------------------------------------

TEST(AcsOverride, RemedySaysItNeverChangesTheP2pdmaCheck) {
  Tree tree;
  tree.add("00:00.0", "", 0x8086, 0x4c43, PcieType::kNotPcie);
  tree.rp("00:01.0");
  tree.add("01:00.0", "00:01.0", 0x1000, 0xc010, PcieType::kSwitchUpstream);
  tree.add("02:00.0", "01:00.0", 0x1000, 0xc010, PcieType::kSwitchDownstream, kAcsRr | kAcsCr);
  tree.add("02:01.0", "01:00.0", 0x1000, 0xc010, PcieType::kSwitchDownstream, kAcsRr | kAcsCr);
  tree.ep("03:00.0", "02:00.0");
  tree.ep("04:00.0", "02:01.0");
  tree.t.platform.kernel_release = "7.0.0-22-generic";
  KernelRules rules = rules_for(tree.t.platform);
  auto plain = pci_p2pdma_distance(tree.t, rules, tree.index("03:00.0"), tree.index("04:00.0"));
  EXPECT_EQ(plain.map_type, MapType::kNotSupported);
  EXPECT_TRUE(plain.remedy.acs_override.empty());
  EXPECT_EQ(plain.reason.find("pcie_acs_override"), std::string::npos);

  tree.t.platform.cmdline = "quiet pcie_acs_override=downstream,multifunction";
  auto v = pci_p2pdma_distance(tree.t, rules, tree.index("03:00.0"), tree.index("04:00.0"));
  EXPECT_EQ(v.map_type, MapType::kNotSupported);  // the override changes nothing the kernel reads here
  EXPECT_NE(v.remedy.acs_override.find("pcie_acs_override=downstream,multifunction"), std::string::npos);
  EXPECT_NE(v.remedy.acs_override.find("IOMMU grouping only"), std::string::npos);
  EXPECT_NE(v.reason.find("pcie_acs_override"), std::string::npos) << v.reason;
  EXPECT_FALSE(v.remedy.disable_acs_redir.empty());  // the fix is still pci=disable_acs_redir=

  // Without ACS redirect on the path it changes nothing either, and the verdict says so.
  Tree clean;
  clean.rp("00:01.0");
  clean.add("01:00.0", "00:01.0", 0x1000, 0xc010, PcieType::kSwitchUpstream);
  clean.add("02:00.0", "01:00.0", 0x1000, 0xc010, PcieType::kSwitchDownstream);
  clean.add("02:01.0", "01:00.0", 0x1000, 0xc010, PcieType::kSwitchDownstream);
  clean.ep("03:00.0", "02:00.0");
  clean.ep("04:00.0", "02:01.0");
  clean.t.platform.cmdline = tree.t.platform.cmdline;
  auto ok = pci_p2pdma_distance(clean.t, rules, clean.index("03:00.0"), clean.index("04:00.0"));
  EXPECT_EQ(ok.map_type, MapType::kBusAddr);
  EXPECT_EQ(ok.remedy.acs_override, v.remedy.acs_override);
  EXPECT_NE(ok.reason.find("does not change the kernel's P2PDMA verdict"), std::string::npos) << ok.reason;
}

// Every pair of a machine booted with pcie_acs_override= says it: the public case is two Arc Pro
// B70s on separate root ports of an Intel client host (8086:4c43), refused because the host bridge
// is missing from the whitelist, whose reporter booted with the override to rule ACS out
// (https://github.com/TSUMUGI-XE/b70-dual-tp2). No ACS is on their path; the override still
// changes nothing the kernel reads, and the index's sentence is the full verdict's, byte for byte.
TEST(AcsOverride, NamedOnEveryPairOfTheMachine) {
  Tree tree;
  tree.add("00:00.0", "", 0x8086, 0x4c43, PcieType::kNotPcie);
  tree.rp("00:01.0");
  tree.rp("00:06.0");
  tree.describe(tree.add("03:00.0", "00:01.0", 0x8086, 0xe223, PcieType::kEndpoint), 0x030000, "xe");
  tree.describe(tree.add("07:00.0", "00:06.0", 0x8086, 0xe223, PcieType::kEndpoint), 0x030000, "xe");
  tree.t.platform.kernel_release = "7.0.0-22-generic";
  tree.t.platform.arch = "x86";
  tree.t.platform.cpu_vendor = "GenuineIntel";
  tree.t.platform.cpu_family = 6;
  KernelRules rules = rules_for(tree.t.platform);
  const size_t a = tree.index("03:00.0"), b = tree.index("07:00.0");
  auto without = pci_p2pdma_distance(tree.t, rules, a, b);
  EXPECT_TRUE(without.remedy.acs_override.empty());
  EXPECT_EQ(without.reason.find("pcie_acs_override"), std::string::npos);

  tree.t.platform.cmdline = "quiet pcie_acs_override=downstream,multifunction";
  P2pdmaIndex index(tree.t, rules);
  VerdictReasons reasons(index);
  for (auto [p, c] : {std::pair{a, b}, std::pair{b, a}, std::pair{a, a}}) {
    auto v = pci_p2pdma_distance(tree.t, rules, p, c);
    EXPECT_EQ(v.map_type, p == c ? MapType::kBusAddr : without.map_type);
    EXPECT_FALSE(v.acs_considered && p != c) << "no common upstream device: ACS is not read";
    EXPECT_NE(v.remedy.acs_override.find("pcie_acs_override=downstream,multifunction on the command line does not "
                                         "change the kernel's P2PDMA verdict"),
              std::string::npos)
        << v.remedy.acs_override;
    EXPECT_NE(v.reason.find(v.remedy.acs_override), std::string::npos) << v.reason;
    EXPECT_EQ(reasons.reason(p, c, index.outcome(p, c)), v.reason);
  }
  EXPECT_EQ(pci_p2pdma_distance(tree.t, rules, a, b).map_type, MapType::kNotSupported);
}

}  // namespace
}  // namespace p2paudit
