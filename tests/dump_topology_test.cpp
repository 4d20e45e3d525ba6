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

#include "p2paudit/config_space.h"
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

// Everything the config decoder gives a function, as text: two readings of the same bytes must
// give the same text.
std::string decoded_text(const Function& f) {
  std::string s = fmt::format("{} {:04x}:{:04x} {:04x}:{:04x} class {:06x} rev {:02x} hdr {} mf {} [{}|{}|{}] readable {} "
                              "size {} pcix2 {} pcie {} type {} acs {} {:#x} {:#x} {:#x} ari {} rebar {} serial {} "
                              "clique {} {} link {} {} {} {}",
                              f.bdf.str(), f.vendor, f.device, f.subsystem_vendor, f.subsystem_device, f.class_code,
                              f.revision, f.header_type, f.multifunction, f.vendor_name, f.device_name, f.class_name,
                              f.config_readable, f.config_size, f.pcix_mode2, f.is_pcie, static_cast<int>(f.pcie_type),
                              to_string(f.acs.state), f.acs.offset, f.acs.cap, f.acs.ctrl, to_string(f.ari),
                              to_string(f.rebar_state), f.serial_number.value_or(0), to_string(f.nvidia_clique_state),
                              f.nvidia_clique, f.link.current_speed, f.link.current_width, f.link.max_speed,
                              f.link.max_width);
  if (f.sriov) s += fmt::format(" sriov {} {} {:04x}", f.sriov->total_vfs, f.sriov->num_vfs, f.sriov->vf_device);
  for (const auto& r : f.rebar) s += fmt::format(" rebar{} {} {}", r.bar, r.current_size, r.supported_sizes.size());
  for (const auto& b : f.bars)
    s += fmt::format(" bar{} {:#x} {} {}{}{}", b.index, b.start, b.size, b.io, b.is_64bit, b.prefetchable);
  for (const auto& w : f.windows) s += fmt::format(" {} {:#x}-{:#x} {}{}", w.kind, w.base, w.limit, w.is_64bit, w.enabled);
  if (f.header_type == 1)  // a CardBus bridge's bus numbers come from the dump reader, not the decoder
    s += fmt::format(" buses {}-{}", f.secondary_bus.value_or(0), f.subordinate_bus.value_or(0));
  return s;
}

std::map<std::string, std::string> decoded(const Topology& t) {
  std::map<std::string, std::string> out;
  for (const auto& f : t.functions)
    out[f.bdf.str()] = decoded_text(f) + " parent " + (f.parent ? t.functions[*f.parent].bdf.str() : "-");
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string write_text(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Findings naming a line of the dump ("line N: ..."): what the reader skipped or found damaged.
std::vector<std::string> line_findings(const Topology& t) {
  std::vector<std::string> out;
  for (const auto& f : t.findings)
    if (f.message.starts_with("line ")) out.push_back(f.message);
  return out;
}

TEST(DumpReader, CorpusReadsAsLibpciDumpMethodDoes) {
  // The reader hands libpci each function's bytes; libpci's own dump method, reading the file, must
  // decode every well-formed dump of the corpus to the same functions.
  for (const auto& dump : corpus()) {
    SCOPED_TRACE(dump);
    std::vector<Finding> libpci_findings;
    auto libpci = read_config_dump(dump, libpci_findings);
    Topology t = read_dump_topology(dump, {});
    EXPECT_EQ(line_findings(t), std::vector<std::string>{}) << dump;
    ASSERT_EQ(t.functions.size(), libpci.size());
    for (size_t i = 0; i < libpci.size(); ++i) {
      Function want = libpci[i];
      const Function& got = t.functions[i];
      if (got.config_size == 256 && want.config_size == 0) {  // what a -xxxx dump implies (FullDumpsKnowAcs...)
        want.config_size = 256;
        want.acs = Acs{CapState::kAbsent};
        want.ari = want.rebar_state = CapState::kAbsent;
      }
      EXPECT_EQ(decoded_text(got), decoded_text(want));
    }
  }
}

TEST(DumpReader, HeaderLinesOfAnyLength) {
  // libpci's reader stops at the first line of 255 characters or more ("line too long").
  std::string path = test::data_path("lspci-dumps/pasted/asus-long-headers");
  std::string text = read_text(path);
  size_t longest = 0;
  for (size_t at = 0, eol; at < text.size(); at = eol + 1) {
    eol = text.find('\n', at);
    if (eol == std::string::npos) eol = text.size();
    longest = std::max(longest, eol - at);
  }
  ASSERT_GT(longest, 300u);
  Topology t = read_dump_topology(path, {});
  EXPECT_EQ(decoded(t), decoded(read_dump_topology(asus(), {})));
  EXPECT_EQ(line_findings(t), std::vector<std::string>{});
}

TEST(DumpReader, VerboseDecodeLinesAreSkipped) {
  // lspci's own -nnvvvxxxx output of the ASUS dump, with the spliced line taken out again, reads
  // as the dump itself. A decode line longer than libpci's 255 characters, and one that starts with
  // hex digits and ": ", are skipped too.
  std::string text = read_text(test::data_path("lspci-dumps/pasted/asus-nnvvvxxxx-vpd-error"));
  const std::string stray = "pcilib: sysfs_read_vpd: read failed: Input/output error\n";
  size_t at = text.find(stray);
  ASSERT_NE(at, std::string::npos);
  text.erase(at, stray.size());
  size_t second = text.find("\n0000:00:01.0 ");
  ASSERT_NE(second, std::string::npos);
  text.insert(second + 1 + text.substr(second + 1).find('\n') + 1,
              "\tCapabilities: [40] " + std::string(300, 'x') + "\nab: cd ef\n");
  Topology t = read_dump_topology(write_text("nnvvvxxxx.txt", text), {});
  EXPECT_EQ(decoded(t), decoded(read_dump_topology(asus(), {})));
  EXPECT_EQ(line_findings(t), std::vector<std::string>{});
}

// The line number (1-based) of the first line holding needle.
size_t line_of(const std::string& text, const std::string& needle) {
  size_t at = text.find(needle);
  return at == std::string::npos ? 0 : 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
}

TEST(DumpReader, StrayLineInAHexRowCostsOnlyThatFunctionsBytesFromThere) {
  std::string path = test::data_path("lspci-dumps/pasted/asus-nnvvvxxxx-vpd-error");
  std::string text = read_text(path);
  // The message sits after the fifth byte of row f20 of the first function, 0000:00:00.0.
  size_t line = line_of(text, "pcilib: sysfs_read_vpd");
  ASSERT_EQ(line, 299u);
  ASSERT_TRUE(text.find("\nf20: 00 00 00 00 00 pcilib: sysfs_read_vpd") != std::string::npos);
  Topology t = read_dump_topology(path, {});
  Topology clean = read_dump_topology(asus(), {});
  auto got = decoded(t), want = decoded(clean);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [bdf, text_of] : want)
    if (bdf != "0000:00:00.0") EXPECT_EQ(got[bdf], text_of) << bdf;
  const Function* hb = t.find(*Bdf::parse("00:00.0"));
  ASSERT_NE(hb, nullptr);
  // Unreadable from 0xf25: the whole 256-byte region before it is used; its extended capabilities
  // (ACS) are unknown, not absent: nothing says the function has only 256 bytes.
  EXPECT_EQ(hb->config_readable, 256u);
  EXPECT_EQ(hb->acs.state, CapState::kUnknown);
  EXPECT_EQ(hb->vendor, 0x8086);
  EXPECT_FALSE(t.config_fully_readable);
  EXPECT_TRUE(has_finding(t, "line 299: 0000:00:00.0: hex row f20 is broken after 5 bytes by 'pcilib: "
                             "sysfs_read_vpd: read failed: Input/output error': its config space from offset "
                             "0xf25 on is unreadable, so the first 256 bytes are used"))
      << all_findings(t);
}

TEST(DumpReader, DamageEarlyInAFunctionAndControlCharactersInTheStrayText) {
  std::string text = read_text(asus());
  // Row 50 of 00:07.0 (a root port) cut after two bytes and a half by a message with an escape
  // sequence; row 00 of 00:1a.0 broken after its vendor ID; the dump's last row cut short.
  size_t port = text.find("\n00:07.0 ");
  ASSERT_NE(port, std::string::npos);
  size_t row50 = text.find("\n50: ", port) + 1;
  char half = text[row50 + 4 + 3 * 2];
  text.insert(row50 + 4 + 3 * 2 + 1, "pcilib: \x1b[31mread failed\x1b[0m\n");  // after "50: xx xx x"
  size_t uhci = text.find("\n00:1a.0 ");
  ASSERT_NE(uhci, std::string::npos);
  size_t row00 = text.find("\n00: ", uhci) + 1;
  text.insert(row00 + 4 + 3 * 2, "lspci: Unable to load libkmod resources: error -2\n");
  while (text.back() == '\n') text.pop_back();
  text.pop_back();  // the last row ends "xx x", without a newline
  char last_half = text.back();
  size_t last_header = text.rfind("\n\n") + 2;
  auto last_bdf = Bdf::parse(text.substr(last_header, text.find(' ', last_header) - last_header));
  ASSERT_TRUE(last_bdf);
  std::string path = write_text("damaged.txt", text);
  size_t port_line = line_of(text, "pcilib: ");
  size_t uhci_line = line_of(text, "lspci: Unable");
  size_t last_line = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;

  Topology t = read_dump_topology(path, {});
  const Function* p = t.find(*Bdf::parse("00:07.0"));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->config_readable, 64u);
  EXPECT_EQ(p->pcie_type, PcieType::kUnknown);
  EXPECT_EQ(p->acs.state, CapState::kUnknown);
  EXPECT_TRUE(p->secondary_bus);  // the header survived: what is below it stays below it
  EXPECT_TRUE(has_finding(t, fmt::format("line {}: 0000:00:07.0: hex row 50 is broken after 2 bytes by "
                                         "'{}pcilib: \\x1b[31mread failed\\x1b[0m': its config space from offset "
                                         "0x52 on is unreadable, so the first 64 bytes are used",
                                         port_line, half)))
      << all_findings(t);
  EXPECT_EQ(t.find(*Bdf::parse("00:1a.0")), nullptr);
  EXPECT_TRUE(has_finding(t, fmt::format("line {}: 0000:00:1a.0: hex row 00 is broken after 2 bytes", uhci_line)))
      << all_findings(t);
  EXPECT_TRUE(has_finding(t, "fewer than the 64 that identify a function: left out")) << all_findings(t);
  const Function* last = t.find(*last_bdf);
  ASSERT_NE(last, nullptr);
  // The last row holds 15 whole bytes: unreadable from its offset + 15; the whole regions before.
  std::string last_row = text.substr(text.rfind('\n') + 1);
  unsigned last_offset = std::stoul(last_row.substr(0, last_row.find(':')), nullptr, 16);
  ASSERT_GE(last_offset + 15, 64u);
  EXPECT_EQ(last->config_readable, last_offset + 15 >= 256 ? 256u : 64u);
  EXPECT_EQ(last->acs.state, CapState::kUnknown);
  EXPECT_TRUE(has_finding(t, fmt::format("line {}: {}: hex row {:02x} is broken after 15 bytes by '{}': its config "
                                         "space from offset {:#x} on is unreadable",
                                         last_line, last->bdf.str(), last_offset, last_half, last_offset + 15)))
      << all_findings(t);
  // Everything else reads as before.
  auto got = decoded(t), want = decoded(read_dump_topology(asus(), {}));
  for (const auto& [bdf, text_of] : want)
    if (bdf != "0000:00:07.0" && bdf != "0000:00:1a.0" && bdf != last->bdf.str()) EXPECT_EQ(got[bdf], text_of) << bdf;
  EXPECT_EQ(got.size(), want.size() - 1);
}

TEST(DumpReader, MissingOrOutOfPlaceRowsEndTheReadableBytes) {
  std::string text = read_text(asus());
  size_t port = text.find("\n00:07.0 ");
  size_t row60 = text.find("\n60: ", port) + 1;
  text.erase(row60, text.find('\n', row60) + 1 - row60);  // row 60 lost
  Topology t = read_dump_topology(write_text("gap.txt", text), {});
  const Function* p = t.find(*Bdf::parse("00:07.0"));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->config_readable, 64u);
  EXPECT_TRUE(has_finding(t, "0000:00:07.0: a hex row at offset 0x70 where offset 0x60 was due: its config space "
                             "from offset 0x60 on is unreadable"))
      << all_findings(t);
}

TEST(DumpReader, TextWithoutHexIsRefusedWithTheCommandToRun) {
  for (const char* name : {"vga16-vvv", "asus-tv"}) {
    std::string path = test::data_path(std::string("lspci-dumps/pasted/") + name);
    try {
      read_dump_topology(path, {});
      ADD_FAILURE() << name << " was read";
    } catch (const InputError& e) {
      std::string what = e.what();
      EXPECT_TRUE(what.starts_with(path + ": no config space in it")) << what;
      EXPECT_NE(what.find("run `sudo lspci -xxxx > dump.txt`"), std::string::npos) << what;
    }
    auto r = tool_stderr("--lspci-dump " + test::shell_quote(path) + " topology");
    EXPECT_EQ(r.status, 2) << name;
    EXPECT_EQ(count(r.output, "\n"), 1u) << r.output;
    EXPECT_NE(r.output.find(path), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("sudo lspci -xxxx"), std::string::npos) << r.output;
  }
}

TEST(DumpReader, HostileLinesAreBounded) {
  // Hex rows without a header, a header without rows, offsets beyond config space, a row of 5000
  // bytes, 10000 stray lines: findings are counted past the first 64 of a kind, nothing loops.
  std::string text = "10: 00 11 22\n\n";
  text += "00:01.0 Orphan header\n\n";
  text += "00:02.0 Device\n00:";
  for (int i = 0; i < 64; ++i) text += " 86";
  text += "\n";
  for (int i = 0; i < 10000; ++i) text += "stray\n";
  text += "ffffffff: 00\n";
  text += "\n00:03.0 Device\n00:";
  for (int i = 0; i < 5000; ++i) text += " 11";
  text += "\n";
  Topology t = read_bounded(write_text("hostile-lines.txt", text));
  EXPECT_EQ(t.functions.size(), 2u) << all_findings(t);
  EXPECT_LT(t.findings.size(), 200u);
  EXPECT_TRUE(has_finding(t, "line 1: hex row at offset 0x10 follows no function header")) << all_findings(t);
  EXPECT_TRUE(has_finding(t, "line 3: 0000:00:01.0: no hex rows follow its header line: left out")) << all_findings(t);
  EXPECT_TRUE(has_finding(t, "more findings of this kind: stray lines")) << all_findings(t);
  EXPECT_TRUE(has_finding(t, "bytes beyond offset 0xfff")) << all_findings(t);
  EXPECT_EQ(t.find(*Bdf::parse("00:03.0"))->config_readable, 4096u);
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

TEST(DumpCli, MessagesSpeakOfTheDump) {
  // A dump of 256 bytes a function: every ACS is unknown. What the dump lacks is said, with the
  // command to rerun; nothing tells the reader to run p2paudit as root or speaks of a sysroot.
  std::string dump = "--lspci-dump " + test::data_path("lspci-dumps/PCI-X-bridges-and-domains") + " ";
  for (const char* cmd : {"", "topology", "matrix --all", "explain 0000:00:01.0 0000:00:01.0", "--format json",
                          "topology --format json", "matrix --all --format json", "--assume-acs-off all matrix --all",
                          "--assume-acs-off all explain 0000:00:01.0 0000:00:01.0"}) {
    auto r = tool(dump + cmd, true);
    EXPECT_EQ(r.status, 0) << cmd;
    // (The JSON "source" names the dump: {"lspci_dump": FILE}.)
    for (const char* wrong : {"as root", "this sysroot", "unprivileged"})
      EXPECT_EQ(r.output.find(wrong), std::string::npos) << cmd << ": " << wrong << "\n" << r.output;
    EXPECT_NE(r.output.find("rerun `sudo lspci -xxxx`"), std::string::npos) << cmd << "\n" << r.output;
  }
  // An unknown verdict's fix is the action that reads what was missing: here the boot CPU.
  json check = json::parse(tool(dump + "--format json check gpu0 accel0").output);
  EXPECT_EQ(check["rule"], "kernel-verdict-unknown");
  EXPECT_EQ(check["remedy"].get<std::string>().rfind("pass --dump-cpu VENDOR:FAMILY:MODEL", 0), 0u) << check["remedy"];
  for (const char* cmd : {"--format json", "topology --format json"}) {
    json source = json::parse(tool(dump + cmd).output)["source"];
    EXPECT_EQ(source, json({{"lspci_dump", test::data_path("lspci-dumps/PCI-X-bridges-and-domains")}})) << cmd;
  }
  auto explain = tool(dump + "explain 0000:00:01.0 0000:00:01.0");
  EXPECT_NE(explain.output.find("Why: cannot be known from this dump: the ACS control register of 0000:00:01.0 is not "
                                "in the dump: it has 256 bytes of config space for 0000:00:01.0; rerun `sudo lspci "
                                "-xxxx`"),
            std::string::npos)
      << explain.output;
  EXPECT_NE(explain.output.find("0000:00:01.0  provider  ACS not in the dump (256 bytes of config space)"),
            std::string::npos)
      << explain.output;
  auto acs_off = tool(dump + "--assume-acs-off 0000:00:01.0 topology");
  EXPECT_NE(acs_off.output.find("the ACS control register of 0000:00:01.0 is not in the dump (it has 256 bytes of "
                                "config space for 0000:00:01.0): left unknown; rerun `sudo lspci -xxxx`"),
            std::string::npos)
      << acs_off.output;
}

TEST(DumpCli, UnknownDeviceNamesTheDump) {
  auto r = tool_stderr("--lspci-dump " + asus() + " explain gpu0 gpu7");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("no PCI function 'gpu7' in " + asus()), std::string::npos) << r.output;
}

}  // namespace
}  // namespace p2paudit
