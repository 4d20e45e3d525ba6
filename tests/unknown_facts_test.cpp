// SPDX-License-Identifier: GPL-2.0-or-later
// No spurious unknowns: a fact is unknown only where the capture could have shown it and did not.
// Machines are written to disk as sysroots and read the way `--sysroot` reads them, so the config
// space reader decides what is absent (a capability not in a readable extended space) and what is
// unknown (an unprivileged 64-byte read).
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <filesystem>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"
#include "p2paudit/topology_reader.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using test::ConfigBytes;
using test::SysrootDir;

using test::kEndpoint;
using test::kRootPort;
using test::kSwitchDown;
using test::kSwitchUp;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kWindowBase = uint64_t{0x40} << 32;  // 256 GiB: above 4 GiB, below any CPU width

// A bridge's header with buses and an enabled 64-bit prefetchable window over 256..320 GiB.
std::string bridge(uint16_t vendor, uint16_t device, int type, uint8_t primary, uint8_t secondary, uint8_t subordinate) {
  ConfigBytes c(vendor, device, 0x060400, type, true);
  c.buses(primary, secondary, subordinate);
  c.put16(0x20, 0xfc00);  // memory window 0xfc000000..0xfcffffff
  c.put16(0x22, 0xfcf0);
  c.put16(0x24, 0x0001);  // prefetchable, 64-bit
  c.put16(0x26, 0xfff1);
  c.put32(0x28, 0x40);
  c.put32(0x2c, 0x4f);
  return c.bytes();
}

// The kernel's `resource` line for each BAR (start, size, flags); the rest of the 7 lines empty.
struct BarLine {
  int index;
  uint64_t start, size, flags;
};
std::string resource(const std::vector<BarLine>& bars) {
  std::string out;
  for (int i = 0; i < 7; ++i) {
    uint64_t start = 0, end = 0, flags = 0;
    for (const auto& b : bars)
      if (b.index == i) start = b.start, end = b.start + b.size - 1, flags = b.flags;
    char line[64];
    std::snprintf(line, sizeof line, "0x%016llx 0x%016llx 0x%016llx\n", static_cast<unsigned long long>(start),
                  static_cast<unsigned long long>(end), static_cast<unsigned long long>(flags));
    out += line;
  }
  return out;
}
constexpr uint64_t kMem32 = 0x40200, kPref64 = 0x14220c;

void bound(SysrootDir& s, const std::string& sysfs_dir, const std::string& driver) {
  s.link("sys/devices/" + sysfs_dir + "/driver", "../../../bus/pci/drivers/" + driver);
}

// An AMD Zen 5 host (family 0x1a, 48-bit physical addresses) whose root bus starts with 1022:14d8.
void am5_host(SysrootDir& s) {
  s.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 68\n"
                          "address sizes\t: 48 bits physical, 48 bits virtual\n");
  s.function("pci0000:00/0000:00:00.0", ConfigBytes(0x1022, 0x14d8, 0x060000, -1).bytes());
}

// Two NVMe drives below one PCIe switch (no ACS anywhere, so nothing redirects), on an AM5 host.
// With `cmb`, each drive has a 64 MiB controller memory buffer in BAR 2 that the nvme driver
// publishes as a P2PDMA provider (p2pmem/).
void nvme_pair(SysrootDir& s, bool cmb) {
  am5_host(s);
  const std::string rp = "pci0000:00/0000:00:01.1", up = rp + "/0000:01:00.0";
  s.function(rp, bridge(0x1022, 0x14db, kRootPort, 0, 1, 4));
  s.function(up, bridge(0x10b5, 0x8747, kSwitchUp, 1, 2, 4));
  const char* ports[] = {"0000:02:01.0", "0000:02:02.0"};
  const char* drives[] = {"0000:03:00.0", "0000:04:00.0"};
  for (int i = 0; i < 2; ++i) {
    const uint8_t bus = static_cast<uint8_t>(3 + i);
    const std::string port = up + "/" + ports[i], drive = port + "/" + drives[i];
    s.function(port, bridge(0x10b5, 0x8747, kSwitchDown, 2, bus, bus));
    s.function(drive, ConfigBytes(0x144d, 0xa80a, 0x010802, kEndpoint).bytes());
    std::vector<BarLine> bars = {{0, 0xfc000000 + 0x100000 * uint64_t(i), 16 << 10, kMem32}};
    if (cmb) {
      bars.push_back({2, kWindowBase + (uint64_t(i) << 26), 64 << 20, kPref64});
      s.write("sys/devices/" + drive + "/p2pmem/size", "67108864\n");
    }
    s.write("sys/devices/" + drive + "/resource", resource(bars));
    bound(s, drive, "nvme");
  }
}

// What an unprivileged reader of the same machine gets: 64 bytes of each config space.
void cut_config_spaces(SysrootDir& s) {
  for (const auto& e : fs::recursive_directory_iterator(s.dir() / "sys/devices"))
    if (e.path().filename() == "config" && e.is_regular_file()) fs::resize_file(e.path(), 64);
}

// An Arc Pro B70 (8086:e223) with its card's own switch, below a root port, on xe: BAR 0 16 MiB,
// BAR 2 (LMEMBAR) of bar2 bytes with a Resizable BAR capability set to it (256 MiB..32 GiB), and
// its tile's physical_vram_size_bytes when vram is given.
void b70(SysrootDir& s, const std::string& rp, uint8_t first_bus, uint64_t bar2, std::optional<uint64_t> vram,
         uint64_t base) {
  const std::string usp = rp + fmt::format("/0000:{:02x}:00.0", first_bus);
  const std::string dsp = usp + fmt::format("/0000:{:02x}:01.0", first_bus + 1);
  const std::string gpu = dsp + fmt::format("/0000:{:02x}:00.0", first_bus + 2);
  s.function(usp, bridge(0x8086, 0xe2ff, kSwitchUp, first_bus, first_bus + 1, first_bus + 2));
  s.function(dsp, bridge(0x8086, 0xe2f0, kSwitchDown, first_bus + 1, first_bus + 2, first_bus + 2));
  ConfigBytes g(0x8086, 0xe223, 0x030000, kEndpoint);
  g.put32(0x100, 0x00010015);  // Resizable BAR, version 1, last
  g.put32(0x104, 0x000ff000);  // 256 MiB (bit 12) .. 32 GiB (bit 19)
  const unsigned encoded = static_cast<unsigned>(std::countr_zero(bar2)) - 20;
  g.put32(0x108, 2u | (1u << 5) | (encoded << 8));  // BAR 2, one resizable BAR, its current size
  s.function(gpu, g.bytes());
  s.write("sys/devices/" + gpu + "/resource", resource({{0, 0xfb000000 + (uint64_t(first_bus) << 20), 16 << 20, kMem32},
                                                        {2, base, bar2, kPref64}}));
  if (vram) s.write("sys/devices/" + gpu + "/tile0/" + "physical_vram_size_bytes", std::to_string(*vram) + "\n");
  bound(s, gpu, "xe");
}

// Two B70 on separate root ports of the host bridge already written.
void b70_pair(SysrootDir& s, uint64_t bar2, std::optional<uint64_t> vram) {
  s.function("pci0000:00/0000:00:01.1", bridge(0x1022, 0x14db, kRootPort, 0, 1, 4));
  s.function("pci0000:00/0000:00:01.3", bridge(0x1022, 0x14db, kRootPort, 0, 6, 9));
  b70(s, "pci0000:00/0000:00:01.1", 1, bar2, vram, kWindowBase);
  b70(s, "pci0000:00/0000:00:01.3", 6, bar2, vram, kWindowBase + 32 * kGiB);
}

// b70-dual-amd-am5-allowed (shared/fixtures/public-cases): two B70 on separate root ports of a
// Ryzen 9 9950X host (family 0x1a), as its lspci -tv excerpt shows them.
void b70_pair_on_am5(SysrootDir& s, uint64_t bar2, std::optional<uint64_t> vram) {
  am5_host(s);
  b70_pair(s, bar2, vram);
}

struct Read {
  Topology topo;
  KernelRules kernel;
};

Read read(const SysrootDir& s, const KernelRuleOptions& options = {}) {
  Read r;
  r.topo = read_topology(Sysroot::open(s.str()));
  r.kernel = load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", r.topo.platform, options);
  return r;
}

policy::PairDecision decide(const Read& r, const std::string& p, const std::string& c) {
  static const auto rules = policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  policy::PolicyEvaluator evaluator(r.topo, r.kernel, rules, nullptr);
  return evaluator.decide_in_full(*r.topo.index_of(*Bdf::parse(p)), *r.topo.index_of(*Bdf::parse(c)));
}

bool known(const policy::PairDecision& d, const std::string& fact) {
  const policy::FactValue* v = d.facts.get(fact);
  return v != nullptr;
}

template <typename T>
T value(const policy::PairDecision& d, const std::string& fact) {
  const policy::FactValue* v = d.facts.get(fact);
  if (!v) {
    ADD_FAILURE() << fact << " is unknown";
    return T{};
  }
  return std::get<T>(*v);
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + " ";
  return out;
}

// The defect of issue 29: `check nvme0 nvme1` exited 3 on rebar_no_room and whitelist_assumed.
TEST(UnknownFacts, NvmePairBelowOneSwitchIsCertainPeer) {
  for (bool cmb : {false, true}) {
    SCOPED_TRACE(cmb ? "with CMB" : "without CMB");
    SysrootDir s;
    nvme_pair(s, cmb);
    Read r = read(s);
    ASSERT_EQ(r.topo.functions.size(), 7u);
    EXPECT_EQ(r.topo.functions[*r.topo.index_of(*Bdf::parse("03:00.0"))].has_p2pmem, cmb);
    auto d = decide(r, "03:00.0", "04:00.0");
    for (const char* role : {"provider.", "client."}) {
      const std::string p = role;
      EXPECT_FALSE(value<bool>(d, p + "rebar_no_room"));
      EXPECT_TRUE(value<bool>(d, p + "rebar_at_max"));  // no capability: no BAR below its largest size
      EXPECT_TRUE(value<bool>(d, p + "bar_covers_memory"));
      EXPECT_FALSE(value<bool>(d, p + "bar_unassigned"));
      EXPECT_FALSE(value<bool>(d, p + "bar_beyond_address_width"));
      EXPECT_FALSE(value<bool>(d, p + "bar_above_32t"));
      EXPECT_EQ(value<bool>(d, p + "bar_above_4g"), cmb);
    }
    EXPECT_FALSE(value<bool>(d, "kernel.whitelist_assumed"));
    EXPECT_FALSE(value<bool>(d, "kernel.acs_redirect"));
    EXPECT_EQ(value<std::string>(d, "kernel.map_type"), "BUS_ADDR");
    EXPECT_TRUE(d.decision.decisive_unknown_facts.empty()) << joined(d.decision.decisive_unknown_facts);
    EXPECT_EQ(d.decision.action, policy::Action::kPeer) << d.decision.rule << ": " << d.decision.reason;
    EXPECT_EQ(d.decision.rule, "same-switch");
  }
}

// The same machine read without root: ACS and the Resizable BAR capability live in the extended
// config space, which the reader did not see, so they stay unknown, and the answer with them.
TEST(UnknownFacts, NvmePairReadUnprivilegedKeepsAcsAndRebarUnknown) {
  SysrootDir s;
  nvme_pair(s, true);
  cut_config_spaces(s);
  Read r = read(s);
  auto d = decide(r, "03:00.0", "04:00.0");
  for (const char* fact : {"provider.rebar_no_room", "client.rebar_no_room", "provider.rebar_at_max",
                           "client.rebar_at_max", "kernel.acs_redirect"})
    EXPECT_FALSE(known(d, fact)) << fact << " is known from 64 bytes of config space";
  EXPECT_EQ(value<std::string>(d, "kernel.map_type"), "UNKNOWN");
  // What 64 bytes and sysfs do show stays known.
  EXPECT_TRUE(value<bool>(d, "provider.bar_covers_memory"));
  EXPECT_FALSE(value<bool>(d, "kernel.whitelist_assumed"));
  // Which way the kernel routes is what is unknown (below the switch or through the Zen host
  // bridge, allowed either way): the policy does not answer peer on it.
  EXPECT_NE(d.decision.action, policy::Action::kPeer) << d.decision.rule;
}

// whitelist_assumed is the tool's own option: an entry added for this run that lets the pair
// through makes it true; without one it is false, never unknown.
TEST(UnknownFacts, WhitelistAssumedIsKnownEitherWay) {
  SysrootDir nvme;
  nvme_pair(nvme, false);
  EXPECT_FALSE(value<bool>(decide(read(nvme), "03:00.0", "04:00.0"), "kernel.whitelist_assumed"));
  // Two B70 across the root ports of a Rocket Lake-S host (8086:4c43, on no kernel's whitelist).
  SysrootDir intel;
  intel.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n"
                              "address sizes\t: 39 bits physical, 48 bits virtual\n");
  intel.function("pci0000:00/0000:00:00.0", ConfigBytes(0x8086, 0x4c43, 0x060000, -1).bytes());
  b70_pair(intel, 32 * kGiB, 32 * kGiB);
  auto refused = decide(read(intel), "03:00.0", "08:00.0");
  EXPECT_EQ(value<std::string>(refused, "kernel.whitelist"), "not_whitelisted");
  EXPECT_FALSE(value<bool>(refused, "kernel.whitelist_assumed"));
  KernelRuleOptions assumed;
  assumed.assume_whitelisted = {"8086:4c43"};
  auto let_through = decide(read(intel, assumed), "03:00.0", "08:00.0");
  EXPECT_EQ(value<std::string>(let_through, "kernel.whitelist"), "whitelisted");
  EXPECT_TRUE(value<bool>(let_through, "kernel.whitelist_assumed"));
  // An added entry for another host bridge lets nothing through here: false, still known.
  KernelRuleOptions elsewhere;
  elsewhere.assume_whitelisted = {"8086:7d1a"};
  EXPECT_FALSE(value<bool>(decide(read(intel, elsewhere), "03:00.0", "08:00.0"), "kernel.whitelist_assumed"));
}

// b70-dual-amd-am5-allowed: with xe's per-tile VRAM size in sysfs the memory is known, the BAR
// covers it, and the pair the report saw working is a certain peer.
TEST(UnknownFacts, B70PairWithXeTileVramIsCertainPeer) {
  SysrootDir s;
  b70_pair_on_am5(s, 32 * kGiB, 32 * kGiB);
  Read r = read(s);
  const Function& gpu = r.topo.functions[*r.topo.index_of(*Bdf::parse("03:00.0"))];
  ASSERT_TRUE(gpu.memory_size.has_value());
  EXPECT_EQ(*gpu.memory_size, 32 * kGiB);
  EXPECT_NE(gpu.memory_size_source.find("tile0/physical_vram_size_bytes"), std::string::npos);
  auto d = decide(r, "03:00.0", "08:00.0");
  EXPECT_TRUE(value<bool>(d, "provider.bar_covers_memory"));
  EXPECT_TRUE(value<bool>(d, "provider.rebar_at_max"));
  EXPECT_FALSE(value<bool>(d, "provider.rebar_no_room"));
  EXPECT_EQ(value<std::string>(d, "kernel.map_type"), "THRU_HOST_BRIDGE");
  EXPECT_TRUE(d.decision.decisive_unknown_facts.empty()) << joined(d.decision.decisive_unknown_facts);
  EXPECT_EQ(d.decision.action, policy::Action::kPeer) << d.decision.rule << ": " << d.decision.reason;
}

// The same cards with a 256 MiB BAR 2: the VRAM sysfs shows is larger than the BAR, and the
// rule that needs the whole memory mapped decides, on a known fact.
TEST(UnknownFacts, B70WithSmallBarIsHostStagedOnAKnownFact) {
  SysrootDir s;
  b70_pair_on_am5(s, 256 << 20, 32 * kGiB);
  auto d = decide(read(s), "03:00.0", "08:00.0");
  EXPECT_FALSE(value<bool>(d, "provider.bar_covers_memory"));
  EXPECT_FALSE(value<bool>(d, "provider.rebar_at_max"));  // 256 MiB of up to 32 GiB
  EXPECT_EQ(d.decision.action, policy::Action::kHostStaged);
  EXPECT_EQ(d.decision.rule, "bar-smaller-than-memory");
  EXPECT_TRUE(d.decision.decisive_unknown_facts.empty()) << joined(d.decision.decisive_unknown_facts);
}

// Without the sysfs file (mainline xe publishes none) the memory size is not in the capture: the
// fact stays unknown, and the largest size the Resizable BAR supports does not stand in for it
// (it bounds what the device can expose, not what it holds).
// Mainline xe publishes no memory size: the device table's (rules/devices/, one size per ID) makes
// it known, so the pair people report working is a plain peer, as `check` answers with exit 0.
TEST(UnknownFacts, B70WithoutVramFileTakesTheMemoryFromTheDeviceTable) {
  SysrootDir s;
  b70_pair_on_am5(s, 32 * kGiB, std::nullopt);
  auto d = decide(read(s), "03:00.0", "08:00.0");
  EXPECT_EQ(value<int64_t>(d, "provider.memory_size"), int64_t(32 * kGiB));
  EXPECT_TRUE(value<bool>(d, "provider.bar_covers_memory"));
  EXPECT_TRUE(value<bool>(d, "provider.rebar_at_max"));
  EXPECT_TRUE(d.decision.certain()) << joined(d.decision.decisive_unknown_facts);
  EXPECT_EQ(d.decision.action, policy::Action::kPeer) << d.decision.rule << ": " << d.decision.reason;
  auto r = test::run_command(test::tool_file() + " --rules-dir " + P2PAUDIT_SOURCE_RULES_DIR + " --sysroot " + s.str() +
                             " check gpu0 gpu1 --no-probe 2>&1");
  EXPECT_EQ(r.status, 0) << r.output;
}

// A snapshot of the machine carries the tile file, so it decides as the machine does.
TEST(UnknownFacts, SnapshotCarriesXeTileVram) {
  SysrootDir s;
  b70_pair_on_am5(s, 32 * kGiB, 32 * kGiB);
  const std::string out = ::testing::TempDir() + "/unknown-facts-snap-" + std::to_string(::getpid()) + ".tar.gz";
  auto r = test::run_command(test::tool_file() + " --sysroot " + s.str() + " snapshot -o " + out + " --force 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  Read snap;
  snap.topo = read_topology(Sysroot::open(out));
  const Function& gpu = snap.topo.functions[*snap.topo.index_of(*Bdf::parse("08:00.0"))];
  ASSERT_TRUE(gpu.memory_size.has_value());
  EXPECT_EQ(*gpu.memory_size, 32 * kGiB);
  fs::remove(out);
}

// The command line: `check nvme0 nvme1` on the NVMe pair answers yes (exit 0), not unknown (3).
TEST(UnknownFacts, CheckNvmePairExitsZero) {
  SysrootDir s;
  nvme_pair(s, false);
  auto r = test::run_command(test::tool_file() + " --sysroot " + s.str() + " check nvme0 nvme1 2>&1");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("unknown"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace p2paudit
