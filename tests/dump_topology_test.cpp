// SPDX-License-Identifier: GPL-2.0-or-later
// lspci dumps as input: the tree equals what `lspci -PP` draws for pciutils' own test dumps,
// hostile bus ranges end in findings rather than loops, and the --dump-* flags reach the platform.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "p2paudit/dump_topology.h"
#include "p2paudit/errors.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<std::string> corpus() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(test::data_path("lspci-dumps")))
    if (e.is_regular_file() && e.path().extension() != ".md") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string asus() { return test::data_path("lspci-dumps/tree-asus-p6t6"); }

test::CommandResult tool(const std::string& args, bool with_stderr = false) {
  return test::run_command("timeout 60 " + test::tool_file() + " " + args +
                           (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

// stderr only, stdout dropped.
test::CommandResult tool_stderr(const std::string& args) {
  return test::run_command("timeout 60 " + test::tool_file() + " " + args + " 2>&1 >/dev/null");
}

bool have_lspci() { return test::run_command("timeout 10 lspci --version >/dev/null 2>&1").status == 0; }

// `lspci -F FILE -PP -D` prints each function's path from its root bus, "DDDD:BB:DD.F/BB:DD.F/...":
// the parent is the element before the last.
std::map<std::string, std::string> lspci_parents(const std::string& dump) {
  auto r = test::run_command("timeout 10 lspci -F " + test::shell_quote(dump) + " -PP -D 2>/dev/null");
  EXPECT_EQ(r.status, 0) << dump;
  std::map<std::string, std::string> out;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    std::string path = line.substr(0, line.find(' '));
    std::vector<std::string> parts;
    for (size_t start = 0;;) {
      size_t slash = path.find('/', start);
      parts.push_back(path.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    std::string domain = parts[0].substr(0, parts[0].rfind(':', parts[0].rfind(':') - 1));
    for (size_t k = 1; k < parts.size(); ++k) parts[k] = domain + ":" + parts[k];
    out[parts.back()] = parts.size() > 1 ? parts[parts.size() - 2] : "";
  }
  return out;
}

bool has_finding(const Topology& t, const std::string& needle) {
  return std::any_of(t.findings.begin(), t.findings.end(),
                     [&](const Finding& f) { return f.message.find(needle) != std::string::npos; });
}

std::string all_findings(const Topology& t) {
  std::string out;
  for (const auto& f : t.findings) out += f.message + "\n";
  return out;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(DumpTopology, CorpusTreesEqualLspciPaths) {
  if (!have_lspci()) GTEST_SKIP() << "pciutils' lspci is not installed";
  auto dumps = corpus();
  ASSERT_GE(dumps.size(), 40u);
  for (const auto& dump : dumps) {
    SCOPED_TRACE(dump);
    Topology t = read_dump_topology(dump, {});
    auto want = lspci_parents(dump);
    std::map<std::string, std::string> got;
    for (const auto& f : t.functions) got[f.bdf.str()] = f.parent ? t.functions[*f.parent].bdf.str() : "";
    EXPECT_EQ(got, want);
    for (const auto& f : t.functions) {
      // Every function hangs below a host bridge named after its root bus, under a sysfs-like path.
      const Function* root = &f;
      for (size_t steps = 0; root->parent && steps < t.functions.size(); ++steps) root = &t.functions[*root->parent];
      EXPECT_EQ(f.host_bridge, fmt::format("pci{:04x}:{:02x}", root->bdf.domain, root->bdf.bus));
      EXPECT_TRUE(f.sysfs_path.starts_with("sys/devices/" + f.host_bridge + "/")) << f.sysfs_path;
      EXPECT_TRUE(f.sysfs_path.ends_with("/" + f.bdf.str())) << f.sysfs_path;
      ASSERT_NE(t.host_bridge_of(f), nullptr) << f.bdf.str();
      if (!f.parent) {
        const auto& devs = t.host_bridge_of(f)->root_bus_devices;
        EXPECT_NE(std::find(devs.begin(), devs.end(), static_cast<size_t>(&f - t.functions.data())), devs.end());
      }
    }
  }
}

TEST(DumpTopology, CardBusBridgeHoldsItsCard) {
  // 1d:00.0 sits on the card bus of the CardBus bridge 1c:03.0, not on the PCI bridge above it.
  Topology t = read_dump_topology(test::data_path("lspci-dumps/tree-fujitsu-p8010"), {});
  const Function* card = t.find(*Bdf::parse("1d:00.0"));
  ASSERT_NE(card, nullptr);
  ASSERT_TRUE(card->parent);
  EXPECT_EQ(t.functions[*card->parent].bdf.str(), "0000:1c:03.0");
  EXPECT_EQ(card->sysfs_path, "sys/devices/pci0000:00/0000:00:1e.0/0000:1c:03.0/0000:1d:00.0");
}

TEST(DumpTopology, FullDumpsKnowAcsOfConventionalFunctions) {
  // In `lspci -xxxx` output a 256-byte function has no extended space: no ACS, not unknown.
  Topology t = read_dump_topology(asus(), {});
  EXPECT_TRUE(t.config_fully_readable) << all_findings(t);
  const Function* uhci = t.find(*Bdf::parse("00:1a.0"));
  ASSERT_NE(uhci, nullptr);
  EXPECT_EQ(uhci->config_readable, 256u);
  EXPECT_EQ(uhci->acs.state, CapState::kAbsent);
  // A 64- or 256-byte dump leaves ACS unknown, and says how to get it.
  Topology short_dump = read_dump_topology(test::data_path("lspci-dumps/PCI-X-bridges-and-domains"), {});
  EXPECT_FALSE(short_dump.config_fully_readable);
  EXPECT_TRUE(has_finding(short_dump, "sudo lspci -xxxx")) << all_findings(short_dump);
}

TEST(DumpTopology, StatesWhatADumpCannotTell) {
  Topology t = read_dump_topology(asus(), {});
  ASSERT_GE(t.findings.size(), 5u);
  EXPECT_EQ(t.findings[0].path, asus());
  for (const char* needle : {"input is an lspci dump", "each root bus is taken as its own host bridge (pci0000:00, "
                             "pci0000:ff)", "CPU: unknown", "--dump-cpu", "IOMMU mode: unknown", "--dump-iommu",
                             "kernel release and CONFIG_PCI_P2PDMA: unknown", "--kernel"})
    EXPECT_TRUE(has_finding(t, needle)) << needle << "\n" << all_findings(t);
  EXPECT_EQ(t.platform.iommu_mode, "unknown");
  EXPECT_EQ(t.platform.config_p2pdma, Known::kUnknown);
  EXPECT_TRUE(t.platform.kernel_release.empty());
  EXPECT_TRUE(t.platform.cpu_vendor.empty());
  ASSERT_EQ(t.host_bridges.size(), 2u);
  EXPECT_EQ(t.host_bridges[1].name, "pci0000:ff");
}

TEST(DumpTopology, AssumptionsReachThePlatform) {
  DumpAssumptions a;
  a.cpu = DumpCpu::parse("AuthenticAMD:25:1");
  a.iommu = "translated";
  a.kernel = "6.1.192";
  Topology t = read_dump_topology(asus(), a);
  EXPECT_EQ(t.platform.arch, "x86");
  EXPECT_EQ(t.platform.cpu_vendor, "AuthenticAMD");
  EXPECT_EQ(t.platform.cpu_family, 25);
  EXPECT_EQ(t.platform.cpu_model, 1);
  EXPECT_EQ(t.platform.iommu_mode, "translated");
  EXPECT_TRUE(t.platform.iommu_groups_present);
  EXPECT_EQ(t.platform.kernel_release, "6.1.192");
  EXPECT_EQ(t.platform.config_p2pdma, Known::kYes);
  EXPECT_TRUE(has_finding(t, "CPU: AuthenticAMD family 25 (0x19) model 1 (0x1) (--dump-cpu)")) << all_findings(t);
  EXPECT_TRUE(has_finding(t, "IOMMU mode: translated (--dump-iommu)"));
  EXPECT_TRUE(has_finding(t, "kernel: 6.1.192 (--kernel)"));
  EXPECT_FALSE(has_finding(t, "CPU: unknown"));

  a.kernel = "not-a-release";
  EXPECT_THROW(read_dump_topology(asus(), a), InputError);
}

TEST(DumpTopology, HostBridgeSplitFromFlags) {
  DumpAssumptions a;
  a.host_bridges = {"0000:00"};
  Topology t = read_dump_topology(asus(), a);
  ASSERT_EQ(t.host_bridges.size(), 1u);
  EXPECT_EQ(t.host_bridges[0].name, "pci0000:00");
  EXPECT_EQ(t.functions[t.host_bridges[0].root_bus_devices.front()].bdf.str(), "0000:00:00.0");
  const Function* uncore = t.find(*Bdf::parse("ff:00.0"));
  ASSERT_NE(uncore, nullptr);
  EXPECT_EQ(uncore->host_bridge, "pci0000:00");
  EXPECT_FALSE(uncore->parent);
  EXPECT_TRUE(has_finding(t, "pci0000:00 (also root bus ff")) << all_findings(t);

  // A bus behind a bridge is no root bus; a malformed one is an error.
  a.host_bridges = {"pci0000:00", "0000:04"};
  t = read_dump_topology(asus(), a);
  EXPECT_TRUE(has_finding(t, "--dump-host-bridge 0000:04: bus 04 lies below bridge")) << all_findings(t);
  a.host_bridges = {"0:0:0"};
  EXPECT_THROW(read_dump_topology(asus(), a), InputError);
}

TEST(DumpCpu, Parses) {
  auto amd = DumpCpu::parse("AuthenticAMD:25:1");
  EXPECT_EQ(amd.arch, "x86");
  EXPECT_EQ(amd.vendor, "AuthenticAMD");
  EXPECT_EQ(amd.family, 25);
  EXPECT_EQ(amd.model, 1);
  auto intel = DumpCpu::parse("genuineintel:0x6");
  EXPECT_EQ(intel.vendor, "GenuineIntel");
  EXPECT_EQ(intel.family, 6);
  EXPECT_FALSE(intel.model);
  EXPECT_EQ(DumpCpu::parse("arm64").arch, "arm64");
  EXPECT_TRUE(DumpCpu::parse("arm64").vendor.empty());
  for (const char* bad : {"", "AuthenticAMD", "AMD:25:1", "AuthenticAMD:x:1", "AuthenticAMD:25:1:2", "AuthenticAMD:-1",
                          "vax"})
    EXPECT_THROW(DumpCpu::parse(bad), InputError) << bad;
}

// A hand-made dump: one function per entry, 64 bytes (`lspci -x`), type 1 headers for bridges.
struct Fn {
  std::string bdf;
  uint16_t vendor, device;
  uint32_t class_code;
  int secondary = -1, subordinate = -1;
};

std::string write_dump(const std::string& name, const std::vector<Fn>& fns) {
  std::string text;
  for (const auto& f : fns) {
    std::array<uint8_t, 64> b{};
    b[0] = f.vendor & 0xff, b[1] = f.vendor >> 8, b[2] = f.device & 0xff, b[3] = f.device >> 8;
    b[9] = f.class_code & 0xff, b[10] = (f.class_code >> 8) & 0xff, b[11] = (f.class_code >> 16) & 0xff;
    if (f.secondary >= 0) {
      b[0x0e] = 1;
      b[0x19] = static_cast<uint8_t>(f.secondary);
      b[0x1a] = static_cast<uint8_t>(f.subordinate);
    }
    text += f.bdf + " Device\n";
    for (size_t off = 0; off < b.size(); off += 16) {
      text += fmt::format("{:02x}:", off);
      for (size_t k = off; k < off + 16; ++k) text += fmt::format(" {:02x}", b[k]);
      text += "\n";
    }
    text += "\n";
  }
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

constexpr uint32_t kBridge = 0x060400, kNic = 0x020000, kGpu = 0x030200, kNvme = 0x010802;

// Read with a deadline: a walk that loops would hang the test instead of failing it.
Topology read_bounded(const std::string& path) {
  auto start = std::chrono::steady_clock::now();
  Topology t = read_dump_topology(path, {});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  return t;
}

TEST(DumpTopology, BusRangeCycleIsReportedAndEnds) {
  // 01:00.0's secondary bus 02 holds 02:00.0, whose secondary bus 01 holds 01:00.0 again.
  auto path = write_dump("cycle.txt", {{"01:00.0", 0x10b5, 0x8796, kBridge, 2, 2},
                                       {"01:00.1", 0x8086, 0x1572, kNic},
                                       {"02:00.0", 0x10b5, 0x8796, kBridge, 1, 1},
                                       {"02:00.1", 0x8086, 0x1572, kNic}});
  Topology t = read_bounded(path);
  ASSERT_EQ(t.functions.size(), 4u);
  EXPECT_TRUE(has_finding(t, "bus-range cycle: 0000:02:00.0 (on bus 02) claims buses 01-01, which hold 0000:01:00.0"))
      << all_findings(t);
  // The bridge whose secondary bus lies below its own holds nothing; the other one stays.
  EXPECT_FALSE(t.find(*Bdf::parse("01:00.0"))->parent);
  EXPECT_EQ(t.functions[*t.find(*Bdf::parse("02:00.1"))->parent].bdf.str(), "0000:01:00.0");
  EXPECT_EQ(t.functions[*t.find(*Bdf::parse("02:00.0"))->parent].bdf.str(), "0000:01:00.0");

  // Three bridges in a ring.
  path = write_dump("cycle3.txt", {{"01:00.0", 0x10b5, 0x8796, kBridge, 2, 3},
                                   {"02:00.0", 0x10b5, 0x8796, kBridge, 3, 3},
                                   {"03:00.0", 0x10b5, 0x8796, kBridge, 1, 1}});
  t = read_bounded(path);
  ASSERT_EQ(t.functions.size(), 3u);
  EXPECT_TRUE(has_finding(t, "bus-range cycle: 0000:03:00.0")) << all_findings(t);
  for (const auto& f : t.functions) EXPECT_FALSE(f.sysfs_path.empty());
}

TEST(DumpTopology, DuplicateSecondaryClaimsAreReported) {
  auto path = write_dump("dupclaim.txt", {{"00:01.0", 0x8086, 0x3408, kBridge, 1, 1},
                                          {"00:02.0", 0x8086, 0x3409, kBridge, 1, 1},
                                          {"00:03.0", 0x8086, 0x340a, kBridge, 2, 2},
                                          {"00:04.0", 0x8086, 0x340b, kBridge, 2, 2},
                                          {"01:00.0", 0x10de, 0x2330, kGpu}});
  Topology t = read_bounded(path);
  ASSERT_EQ(t.functions.size(), 5u);
  EXPECT_TRUE(has_finding(t, "bus 0000:01 is the secondary bus of 2 bridges: 0000:00:01.0 (range 01-01), "
                             "0000:00:02.0 (range 01-01)"))
      << all_findings(t);
  // A shared bus with nothing on it is reported too.
  EXPECT_TRUE(has_finding(t, "bus 0000:02 is the secondary bus of both 0000:00:03.0")) << all_findings(t);
  EXPECT_EQ(t.functions[*t.find(*Bdf::parse("01:00.0"))->parent].bdf.str(), "0000:00:01.0");
}

TEST(DumpTopology, HostileBridgesAndDuplicatesLoseNoFunction) {
  auto path = write_dump("hostile.txt", {{"00:03.0", 0x8086, 0x340a, kBridge, 0, 5},   // range holds its own bus
                                         {"00:04.0", 0x8086, 0x340b, kBridge, 0, 0},   // no bus numbers
                                         {"00:05.0", 0x10de, 0x2330, kGpu},
                                         {"00:05.0", 0x15b3, 0x1021, kNic},            // the same address twice
                                         {"00:06.0", 0x8086, 0x340c, kBridge, 0x10, 0x12},
                                         {"11:00.0", 0x144d, 0xa80a, kNvme},           // behind a hidden bridge
                                         {"03:00.0", 0x8086, 0x1572, kNic},
                                         {"00:07.0", 0x8086, 0x340d, kBridge, 0x20, 0x28},
                                         {"00:08.0", 0x8086, 0x340e, kBridge, 0x24, 0x30},  // overlaps 00:07.0
                                         {"0001:00:01.0", 0x1022, 0x1483, kBridge, 0, 0}});
  Topology t = read_bounded(path);
  EXPECT_EQ(t.functions.size(), 9u);
  for (const char* needle :
       {"0000:00:03.0: bridge bus range 00-05 includes its own bus 00", "0000:00:04.0: bridge without bus numbers",
        "0001:00:01.0: bridge without bus numbers", "0000:00:05.0 appears 2 times in the dump",
        "bus 0000:11 is no bridge's secondary bus but lies in the range of 0000:00:06.0",
        "bridge bus ranges overlap: 0000:00:08.0's secondary bus 24 also lies in the range 20-28 of 0000:00:07.0"})
    EXPECT_TRUE(has_finding(t, needle)) << needle << "\n" << all_findings(t);
  EXPECT_EQ(t.functions[*t.find(*Bdf::parse("11:00.0"))->parent].bdf.str(), "0000:00:06.0");
  // Functions whose parent cannot be determined sit on a root bus of their own host bridge.
  EXPECT_EQ(t.find(*Bdf::parse("03:00.0"))->host_bridge, "pci0000:03");
  size_t drawn = 0;
  for (const auto& hb : t.host_bridges) drawn += hb.root_bus_devices.size();
  for (const auto& f : t.functions) drawn += f.children.size();
  EXPECT_EQ(drawn, t.functions.size());
}

TEST(DumpTopology, ManyOverlappingBridgesFinish) {
  std::vector<Fn> fns;
  for (int i = 0; i < 3000; ++i)
    fns.push_back({fmt::format("{:02x}:{:02x}.{}", i / 256, (i / 8) % 32, i % 8), 0x10b5, 0x8796, kBridge,
                   1 + i % 200, 255});
  Topology t = read_bounded(write_dump("many.txt", fns));
  EXPECT_EQ(t.functions.size(), 3000u);
  // The first findings of each kind are listed, the rest counted.
  EXPECT_LT(t.findings.size(), 1000u);
  EXPECT_TRUE(has_finding(t, "more findings of this kind: bridge ranges holding their own bus")) << all_findings(t);
}

TEST(DumpTopology, EmptyOrMissingDumpIsAnError) {
  std::string empty = ::testing::TempDir() + "/empty.txt";
  std::ofstream(empty) << "not a dump\n";
  EXPECT_THROW(read_dump_topology(empty, {}), InputError);
  EXPECT_THROW(read_dump_topology(::testing::TempDir() + "/no-such-dump.txt", {}), InputError);
}

// The command line.

TEST(DumpCli, EveryCorpusDumpRunsMatrixAndTopologyJson) {
  for (const auto& dump : corpus()) {
    SCOPED_TRACE(dump);
    auto matrix = tool("--lspci-dump " + test::shell_quote(dump) + " matrix");
    EXPECT_EQ(matrix.status, 0);
    EXPECT_NE(matrix.output.find("Kernel"), std::string::npos);
    auto topo = tool("--lspci-dump " + test::shell_quote(dump) + " topology --format json");
    ASSERT_EQ(topo.status, 0);
    json j = json::parse(topo.output);
    EXPECT_FALSE(j["functions"].empty());
    EXPECT_EQ(j["platform"]["iommu_mode"], "unknown");
  }
}

TEST(DumpCli, AmdZenRuleFollowsDumpCpu) {
  // gpu0 (06:00.0 below root port 00:07.0) and nic0 (07:00.0 below 00:1c.2) share no bridge; the
  // X58 host bridge is in no whitelist, so only the CPU rule can allow the pair.
  auto verdict = [](const std::string& flags) {
    auto r = tool("--lspci-dump " + asus() + " " + flags + " explain gpu0 nic0 --format json");
    EXPECT_EQ(r.status, 0) << flags;
    return json::parse(r.output)["pairs"][0]["map_type"].get<std::string>();
  };
  EXPECT_EQ(verdict("--dump-cpu GenuineIntel:6:26"), "NOT_SUPPORTED");
  EXPECT_EQ(verdict("--dump-cpu AuthenticAMD:25:1"), "THRU_HOST_BRIDGE");
  EXPECT_EQ(verdict(""), "UNKNOWN");
  EXPECT_EQ(verdict("--dump-cpu arm64"), "NOT_SUPPORTED");
  // Before 5.9 the kernel had no CPU rule.
  EXPECT_EQ(verdict("--dump-cpu AuthenticAMD:25:1 --kernel 5.4"), "NOT_SUPPORTED");
}

TEST(DumpCli, FlagsReachTopologyJson) {
  auto r = tool("--lspci-dump " + asus() +
                " --dump-cpu GenuineIntel:6:26 --dump-iommu passthrough --dump-host-bridge 0000:00 --kernel 6.1 "
                "topology --format json");
  ASSERT_EQ(r.status, 0);
  json j = json::parse(r.output);
  EXPECT_EQ(j["platform"]["cpu_vendor"], "GenuineIntel");
  EXPECT_EQ(j["platform"]["cpu_family"], 6);
  EXPECT_EQ(j["platform"]["iommu_mode"], "passthrough");
  EXPECT_EQ(j["platform"]["kernel_release"], "6.1");
  EXPECT_EQ(j["platform"]["config_pci_p2pdma"], "yes");
  ASSERT_EQ(j["host_bridges"].size(), 1u);
}

TEST(DumpCli, AssumptionsAreStatedOnceInEveryOutput) {
  std::string dump = "--lspci-dump " + asus() + " ";
  for (const char* cmd : {"", "topology", "matrix", "explain gpu0 nic0", "policy --format json", "matrix --format json",
                          "topology --format json", "--format json"}) {
    auto r = tool(dump + cmd);
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_EQ(count(r.output, "CPU: unknown"), 1u) << cmd << "\n" << r.output;
    EXPECT_EQ(count(r.output, "each root bus is taken as its own host bridge"), 1u) << cmd;
    EXPECT_EQ(count(r.output, "no proc/sys/kernel/osrelease"), 0u) << cmd;  // a sysroot's wording, not a dump's
  }
  // policy's table and check's answer carry no notes: the assumptions go to stderr.
  for (const char* cmd : {"policy", "check gpu0 nic0"}) {
    auto out = tool(dump + cmd);
    EXPECT_EQ(count(out.output, "CPU: unknown"), 0u) << cmd;
    auto both = tool(dump + cmd, true);
    EXPECT_EQ(count(both.output, "p2paudit: note: CPU: unknown"), 1u) << cmd << "\n" << both.output;
  }
  auto named = tool(dump + "--dump-cpu AuthenticAMD:25:1 --kernel 6.1 matrix");
  EXPECT_EQ(count(named.output, "CPU: AuthenticAMD family 25"), 1u) << named.output;
  EXPECT_EQ(count(named.output, "kernel: 6.1 (--kernel), CONFIG_PCI_P2PDMA=y assumed"), 1u) << named.output;
  EXPECT_NE(named.output.find("Kernel 6.1 (--kernel)"), std::string::npos);
}

TEST(DumpCli, UsageErrorsAreOneLineExitTwo) {
  std::string dump = asus();
  for (const std::string& args :
       {"--lspci-dump " + dump + " --sysroot / topology", "--lspci-dump " + dump + " snapshot -o /tmp/never.tar.gz",
        std::string("--dump-cpu AuthenticAMD:25:1 topology"), std::string("--dump-host-bridge 0000:00 topology"),
        "--lspci-dump " + dump + " --dump-cpu vax topology", "--lspci-dump " + dump + " --dump-host-bridge 00 topology",
        "--lspci-dump " + dump + " --kernel banana topology",
        "--lspci-dump " + ::testing::TempDir() + "/no-such-dump.txt topology",
        "--lspci-dump " + ::testing::TempDir() + " topology"}) {
    auto r = tool_stderr(args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(count(r.output, "\n"), 1u) << args << "\n" << r.output;
    EXPECT_TRUE(r.output.starts_with("p2paudit: ")) << args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists("/tmp/never.tar.gz"));
  EXPECT_EQ(tool("--lspci-dump " + dump + " --dump-iommu sometimes topology").status, 2);
}

TEST(DumpCli, UnknownDeviceNamesTheDump) {
  auto r = tool_stderr("--lspci-dump " + asus() + " explain gpu0 gpu7");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("no PCI function 'gpu7' in " + asus()), std::string::npos) << r.output;
}

}  // namespace
}  // namespace p2paudit
