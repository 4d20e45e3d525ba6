// SPDX-License-Identifier: GPL-2.0-or-later
// The driver and runtime versions as facts (runtime_versions.h): read from a sysroot's files and
// from the runtimes' answers, kept in a snapshot, and hostile files (huge, binary, several lines,
// escapes) dropped with a finding that names the file, never turned into a fact.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/platform.h"
#include "p2paudit/policy/pair_facts.h"
#include "p2paudit/policy/rules.h"
#include "p2paudit/probe/runtime_facts.h"
#include "p2paudit/runtime_versions.h"
#include "p2paudit/sysroot.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

using json = nlohmann::json;
using test::SysrootDir;

const std::string kOpenModuleLine =
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22-I3-AM02-24-3)  "
    "Wed Jul 30 21:16:48 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n";
const std::string kProprietaryLine =
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\nGCC version:  gcc 12\n";

struct Read {
  RuntimeVersions versions;
  std::vector<Finding> findings;
  policy::FactSet facts;

  bool finding_names(const std::string& path) const {
    for (const auto& f : findings)
      if (f.path == path) return true;
    return false;
  }
  std::string fact(const std::string& name) const {
    const policy::FactValue* v = facts.get(name);
    if (!v) return "(unknown)";
    if (auto* s = std::get_if<std::string>(v)) return *s;
    if (auto* i = std::get_if<std::int64_t>(v)) return std::to_string(*i);
    return "(other)";
  }
};

Read read(const std::string& sysroot) {
  Read r;
  Sysroot root = Sysroot::open(sysroot);
  Topology t;
  t.platform = read_platform(root, r.findings);
  r.versions = t.platform.versions;
  r.facts = policy::machine_facts(t, KernelRules{});
  return r;
}

TEST(RuntimeVersions, ReadFromTheSysrootAsFacts) {
  SysrootDir s;
  s.write(kNvidiaProcVersionPath, kOpenModuleLine);
  s.write(kNvidiaModuleVersionPath, "580.159.04\n");
  s.write(kAmdgpuModuleVersionPath, "5.0.19.20.6\n");
  s.write(kRocmVersionPath, "6.2.0-66\n");
  Read r = read(s.str());
  EXPECT_TRUE(r.findings.empty()) << r.findings.front().path << ": " << r.findings.front().message;
  EXPECT_EQ(r.versions.nvidia_driver_source, "/proc/driver/nvidia/version");
  EXPECT_EQ(r.fact("runtime.nvidia_driver_version"), "580.159.04");
  EXPECT_EQ(r.fact("runtime.nvidia_driver_major"), "580");
  EXPECT_EQ(r.fact("runtime.amdgpu_module_version"), "5.0.19.20.6");
  EXPECT_EQ(r.fact("runtime.rocm_version"), "6.2.0-66");
  // The proprietary module's line has no "Open Kernel Module for": the same word is found.
  s.write(kNvidiaProcVersionPath, kProprietaryLine);
  EXPECT_EQ(read(s.str()).fact("runtime.nvidia_driver_version"), "535.104.05");
}

TEST(RuntimeVersions, TheModuleVersionWhenTheDriverSaysNothing) {
  SysrootDir s;
  s.write(kNvidiaModuleVersionPath, "570.86.15\n");
  Read r = read(s.str());
  EXPECT_EQ(r.versions.nvidia_driver_source, "/sys/module/nvidia/version");
  EXPECT_EQ(r.fact("runtime.nvidia_driver_version"), "570.86.15");
  EXPECT_EQ(r.fact("runtime.nvidia_driver_major"), "570");
  // A proc file that is not the driver's line: said, and the module's version is used.
  s.write(kNvidiaProcVersionPath, "NVRM: something else entirely\n");
  r = read(s.str());
  EXPECT_TRUE(r.finding_names(kNvidiaProcVersionPath));
  EXPECT_EQ(r.fact("runtime.nvidia_driver_version"), "570.86.15");
}

// A capture without the version files (an older snapshot) still states the module's version
// through the device bound to it; a version file, where there is one, is the running driver's.
TEST(RuntimeVersions, TheBoundModulesVersionWithoutTheFiles) {
  Topology t;
  Function gpu;
  gpu.module.name = "nvidia";
  gpu.module.version = "570.86.15";
  Function amd;
  amd.module.name = "amdgpu";
  amd.module.version = "5.0.19.20.6";
  Function hostile;
  hostile.module.name = "nvidia";
  hostile.module.version = "580\x1b[31m";
  t.functions = {hostile, gpu, amd};
  policy::FactSet f = policy::machine_facts(t, KernelRules{});
  ASSERT_TRUE(f.get("runtime.nvidia_driver_version"));
  EXPECT_EQ(std::get<std::string>(*f.get("runtime.nvidia_driver_version")), "570.86.15");  // the escape is no version
  EXPECT_EQ(std::get<std::int64_t>(*f.get("runtime.nvidia_driver_major")), 570);
  EXPECT_EQ(std::get<std::string>(*f.get("runtime.amdgpu_module_version")), "5.0.19.20.6");
  t.platform.versions.nvidia_driver = "580.159.04";
  f = policy::machine_facts(t, KernelRules{});
  EXPECT_EQ(std::get<std::string>(*f.get("runtime.nvidia_driver_version")), "580.159.04");
}

// What the sysroot does not hold is unknown: no fact, no finding.
TEST(RuntimeVersions, AbsentFilesLeaveTheFactsUnknown) {
  SysrootDir s;
  Read r = read(s.str());
  EXPECT_TRUE(r.findings.empty());
  for (const char* name : {"runtime.nvidia_driver_version", "runtime.nvidia_driver_major", "runtime.amdgpu_module_version",
                           "runtime.rocm_version", "runtime.cuda_driver_version"})
    EXPECT_FALSE(r.facts.known(name)) << name;
}

// Each hostile content of each file: the fact stays unknown and a finding names the file.
TEST(RuntimeVersions, HostileContentsAreDroppedWithAFinding) {
  const std::vector<std::string> hostile = {
      std::string(5000, '5'),                       // larger than a version file
      std::string(20u << 20, '1'),                  // larger than the sysroot's limit for one file
      std::string("580\0.159", 8) + "\n",           // binary
      "\xff\xfe" "580.1\n",                         // not UTF-8
      "580.159.04\n590.48.01\n",                    // several lines
      "580.1\x1b[31m\n",                            // an escape sequence
      std::string(kMaxVersionText + 1, '7') + "\n",  // one byte too long for a version
      "$(reboot)\n",                                // not a version's characters
      "\n",                                         // empty
  };
  for (const char* rel : {kNvidiaModuleVersionPath, kAmdgpuModuleVersionPath, kRocmVersionPath}) {
    for (const std::string& content : hostile) {
      SysrootDir s;
      s.write(rel, content);
      Read r = read(s.str());
      EXPECT_TRUE(r.finding_names(rel)) << rel << " holding " << content.size() << " bytes";
      EXPECT_FALSE(r.facts.known("runtime.nvidia_driver_version")) << rel;
      EXPECT_FALSE(r.facts.known("runtime.amdgpu_module_version")) << rel;
      EXPECT_FALSE(r.facts.known("runtime.rocm_version")) << rel;
      for (const auto& f : r.findings) EXPECT_LT(f.message.size(), 400u) << f.message;  // never the whole file
    }
  }
  // The driver's line: a version word too long, binary in it, or none at all.
  for (const std::string& content :
       {"NVRM version: NVIDIA UNIX x86_64 Kernel Module  " + std::string(100, '5') + ".1  today\n",
        std::string("NVRM version: \0\x01 580.159.04", 27), std::string("NVRM version: NVIDIA UNIX\n580.159.04\n"),
        std::string(100000, 'N')}) {
    SysrootDir s;
    s.write(kNvidiaProcVersionPath, content);
    Read r = read(s.str());
    EXPECT_TRUE(r.finding_names(kNvidiaProcVersionPath)) << content.substr(0, 40);
    EXPECT_FALSE(r.facts.known("runtime.nvidia_driver_version")) << content.substr(0, 40);
  }
}

TEST(RuntimeVersions, VersionTextAndMajor) {
  EXPECT_TRUE(is_version_text("580.159.04"));
  EXPECT_TRUE(is_version_text("6.2.0-66"));
  EXPECT_TRUE(is_version_text("1:6.12.12.60401-2164967.24.04"));
  EXPECT_FALSE(is_version_text(""));
  EXPECT_FALSE(is_version_text("v580"));  // a version starts with a digit
  EXPECT_FALSE(is_version_text("580 159"));
  EXPECT_FALSE(is_version_text(std::string(kMaxVersionText + 1, '1')));
  EXPECT_EQ(version_major("580.159.04"), 580);
  EXPECT_EQ(version_major("13.0"), 13);
  EXPECT_EQ(version_major("1234567.1"), std::nullopt);  // no branch has seven digits
  EXPECT_EQ(version_major(".5"), std::nullopt);
}

// The snapshot keeps every version file it read, and the snapshot reads back the same facts.
TEST(RuntimeVersions, ASnapshotKeepsThem) {
  SysrootDir s;
  s.function("pci0000:00/0000:00:02.0", test::ConfigBytes(0x10de, 0x2330, 0x030200, 0).bytes());  // a snapshot needs a device
  s.write(kNvidiaProcVersionPath, kOpenModuleLine);
  s.write(kNvidiaModuleVersionPath, "580.159.04\n");
  s.write(kAmdgpuModuleVersionPath, "5.0.19.20.6\n");
  s.write(kRocmVersionPath, "6.2.0-66\n");
  for (const char* redact : {"", " --redact"}) {
    const std::string archive = s.str() + "-snapshot.tar.gz";
    auto r = test::run_command(test::tool_file() + " --sysroot " + test::shell_quote(s.str()) + " snapshot" + redact +
                               " --force -o " + test::shell_quote(archive) + " 2>&1");
    ASSERT_EQ(r.status, 0) << r.output;
    Sysroot snapshot = Sysroot::open(archive);
    for (const char* rel : {kNvidiaProcVersionPath, kNvidiaModuleVersionPath, kAmdgpuModuleVersionPath, kRocmVersionPath})
      EXPECT_TRUE(snapshot.read_text(rel)) << rel << redact;
    Read back = read(archive);
    EXPECT_EQ(back.fact("runtime.nvidia_driver_version"), "580.159.04") << redact;
    EXPECT_EQ(back.versions.nvidia_driver_source, "/proc/driver/nvidia/version") << redact;
    EXPECT_EQ(back.fact("runtime.amdgpu_module_version"), "5.0.19.20.6") << redact;
    EXPECT_EQ(back.fact("runtime.rocm_version"), "6.2.0-66") << redact;
    // --redact replaces the builder's user@host; the plain snapshot keeps the file as it was.
    EXPECT_EQ(snapshot.read_text(kNvidiaProcVersionPath)->find("dvs-builder@") == std::string::npos, *redact != '\0');
    std::filesystem::remove(archive);
  }
}

// The runtimes' answers: NVML's driver version and CUDA's, checked like the files.
TEST(RuntimeVersions, FromTheRuntimesAnswers) {
  auto document = [](const std::string& nvml, const std::string& cuda) {
    return json{{"schema_version", probe::kProbeSchemaVersion},
                {"runtimes",
                 {{{"runtime", "nvml"}, {"status", "ok"}, {"driver_version", nvml}, {"devices", json::array()},
                   {"pairs", json::array()}},
                  {{"runtime", "cuda"}, {"status", "ok"}, {"driver_version", cuda}, {"devices", json::array()},
                   {"pairs", json::array()}}}}};
  };
  auto facts = probe::runtime_facts(document("580.159.04", "13.0"), "probe.json");
  EXPECT_TRUE(facts.findings.empty());
  auto text = [&](const char* name) {
    const policy::FactValue* v = facts.facts.all.get(name);
    return v && std::holds_alternative<std::string>(*v) ? std::get<std::string>(*v) : std::string("(unknown)");
  };
  EXPECT_EQ(text("runtime.nvidia_driver_version"), "580.159.04");
  EXPECT_EQ(text("runtime.cuda_driver_version"), "13.0");
  const policy::FactValue* major = facts.facts.all.get("runtime.nvidia_driver_major");
  ASSERT_TRUE(major);
  EXPECT_EQ(std::get<std::int64_t>(*major), 580);

  // Printable text that is no version: not a fact, and said.
  facts = probe::runtime_facts(document("five hundred and eighty", std::string(200, '1')), "probe.json");
  EXPECT_EQ(facts.findings.size(), 2u);
  EXPECT_EQ(text("runtime.nvidia_driver_version"), "(unknown)");
  EXPECT_EQ(text("runtime.cuda_driver_version"), "(unknown)");
  EXPECT_FALSE(facts.facts.all.get("runtime.nvidia_driver_major"));
  // A failed runtime reports no version: nothing is set and nothing is said.
  facts = probe::runtime_facts(document("", ""), "probe.json");
  EXPECT_TRUE(facts.findings.empty());
  EXPECT_EQ(text("runtime.nvidia_driver_version"), "(unknown)");
}

// The advisory keyed on the driver's branch fires on the branches NVIDIA names, and is false (not
// undecided) on every pair that is not an NVIDIA GPU with an RDMA device.
TEST(RuntimeVersions, TheDriverBranchAdvisory) {
  auto rules = policy::RuleSet::load({test::rules_source() + "/advisories/known-problems.yaml"});
  auto pair = [](const std::string& authority, const std::string& importer, std::optional<std::int64_t> major) {
    policy::FactSet f;
    f.set("vendor.authority", authority);
    if (!importer.empty()) f.set("vendor.nvidia_importer", importer);
    if (major) {
      f.set("runtime.nvidia_driver_major", *major);
      f.set("runtime.nvidia_driver_version", std::to_string(*major) + ".1.2");
    }
    return f;
  };
  auto fires = [&](const policy::FactSet& f) {
    auto ids = rules.decide(f).rule_ids();
    return std::find(ids.begin(), ids.end(), "nvidia-driver-grdma-free-callback") != ids.end();
  };
  for (std::int64_t major : {418, 460, 495}) EXPECT_TRUE(fires(pair("nvidia_third_party", "rdma", major))) << major;
  for (std::int64_t major : {470, 510, 535, 580}) EXPECT_FALSE(fires(pair("nvidia_third_party", "rdma", major))) << major;
  EXPECT_FALSE(fires(pair("nvidia_third_party", "storage", 460)));
  EXPECT_FALSE(fires(pair("nvidia", "", 460)));
  // Not its business: false even with the version unknown, so it leaves no open question.
  auto other = rules.decide(pair("kernel", "", std::nullopt));
  for (const auto& id : other.undecided_rules) EXPECT_NE(id, "nvidia-driver-grdma-free-callback");
}

}  // namespace
}  // namespace p2paudit
