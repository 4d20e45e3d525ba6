// SPDX-License-Identifier: GPL-2.0-or-later
// The seed cases' gaps (issue 17): BAR address limits (XRT's 32 TiB, the CPU's physical address
// width), every deciding problem of a pair reported whatever rule decided, and advisories about
// the machine that apply with one GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/platform.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "synthetic_tree.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

using json = nlohmann::json;
using policy::Action;

const std::string kRules = P2PAUDIT_SOURCE_RULES_DIR;

const policy::RuleSet& default_rules() {
  static const policy::RuleSet rules = policy::RuleSet::load(policy::default_rule_files(kRules));
  return rules;
}

test::CommandResult tool(const std::string& args) {
  return test::run_command(test::tool_file() + " " + args + " 2>/dev/null");
}

// The kernel resource line of one BAR.
std::string resource_line(uint64_t start, uint64_t size, uint64_t flags) {
  char buf[80];
  uint64_t end = size ? start + size - 1 : 0;
  std::snprintf(buf, sizeof buf, "0x%016llx 0x%016llx 0x%016llx\n", static_cast<unsigned long long>(size ? start : 0),
                static_cast<unsigned long long>(end), static_cast<unsigned long long>(size ? flags : 0));
  return buf;
}

// A root port's config space with an enabled 64-bit prefetchable window over [base, limit].
std::string root_port(uint16_t device, uint8_t bus, uint64_t base, uint64_t limit) {
  test::ConfigBytes c(0x8086, device, 0x060400, 4, true);
  c.buses(0, bus, bus);
  c.put16(0x24, static_cast<uint16_t>(((base >> 16) & 0xfff0) | 1));  // 64-bit prefetchable
  c.put16(0x26, static_cast<uint16_t>(((limit >> 16) & 0xfff0) | 1));
  c.put32(0x28, static_cast<uint32_t>(base >> 32));
  c.put32(0x2c, static_cast<uint32_t>(limit >> 32));
  return c.bytes();
}

// An Intel client host (Rocket Lake-S host bridge 8086:4c43, not on the kernel's whitelist) with
// an Alveo-like FPGA (10ee, xocl) on one root port and an NVMe drive on another. The FPGA's BAR 0
// is `bar_size` at `bar_start`; its Resizable BAR control asks for `rebar_size` (1..8 MiB).
struct IntelHostWithAlveo {
  test::SysrootDir s;
  IntelHostWithAlveo(uint64_t bar_start, uint64_t bar_size, uint64_t rebar_size, const std::string& cpuinfo_extra = "") {
    s.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n" + cpuinfo_extra);
    s.function("pci0000:00/0000:00:00.0", test::ConfigBytes(0x8086, 0x4c43, 0x060000, -1).bytes());
    s.function("pci0000:00/0000:00:01.0", root_port(0x4c01, 1, bar_start, bar_start + (uint64_t{1} << 30) - 1));
    s.function("pci0000:00/0000:00:06.0", root_port(0x4c09, 2, uint64_t{1} << 36, (uint64_t{1} << 36) + (1 << 20) - 1));
    uint32_t index = 0;
    while ((uint64_t{1} << (20 + index)) < rebar_size) ++index;
    s.function("pci0000:00/0000:00:01.0/0000:01:00.0",
               test::ConfigBytes(0x10ee, 0x5001, 0x120000, 0).rebar(index << 8 | 1u << 5).bytes());
    const uint64_t pref64 = 0x14220c;
    s.write("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/resource",
            resource_line(bar_start, bar_size, pref64) + resource_line(0, 0, 0) + resource_line(0, 0, 0) +
                resource_line(0, 0, 0) + resource_line(0, 0, 0) + resource_line(0, 0, 0) + resource_line(0, 0, 0));
    s.link("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/driver", "../../../../bus/pci/drivers/xocl");
    s.function("pci0000:00/0000:00:06.0/0000:02:00.0", test::ConfigBytes(0x144d, 0xa80a, 0x010802, 0).bytes());
    s.write("sys/devices/pci0000:00/0000:00:06.0/0000:02:00.0/resource",
            resource_line(0xfc000000, 16384, 0x40200) + resource_line(0, 0, 0));
    s.link("sys/devices/pci0000:00/0000:00:06.0/0000:02:00.0/driver", "../../../../bus/pci/drivers/nvme");
  }
};

// ---------------------------------------------------------------------------------------------
// Seed case 2 (Alveo/XRT): where the provider's BAR sits against the limits on addresses.
// ---------------------------------------------------------------------------------------------

std::optional<int> address_bits_of(const std::string& cpuinfo) {
  test::SysrootDir s;
  s.write("proc/cpuinfo", cpuinfo);
  std::vector<Finding> findings;
  return read_platform(Sysroot::open(s.str()), findings).cpu_physical_address_bits;
}

TEST(SeedCases, CpuPhysicalAddressWidthIsReadFromCpuinfo) {
  const std::string head = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 106\n";
  EXPECT_EQ(address_bits_of(head + "address sizes\t: 46 bits physical, 57 bits virtual\n"), 46);
  EXPECT_EQ(address_bits_of(head + "address sizes\t: 39 bits physical, 48 bits virtual\n"), 39);
  // Only the boot CPU's block counts, as for the other CPU facts.
  EXPECT_EQ(address_bits_of(head + "address sizes\t: 52 bits physical, 57 bits virtual\n\nprocessor\t: 1\n"
                                   "address sizes\t: 40 bits physical, 48 bits virtual\n"), 52);
  // Hostile or foreign text is unknown, never a guess.
  EXPECT_EQ(address_bits_of(head), std::nullopt);
  for (const char* junk : {"address sizes\t: 4600 bits physical, 48 bits virtual\n", "address sizes\t: 99 bits physical\n",
                           "address sizes\t: 16 bits physical, 48 bits virtual\n", "address sizes\t: 48 bits virtual\n",
                           "address sizes\t: -46 bits physical, 48 bits virtual\n", "address sizes\t: forty bits physical\n",
                           "address sizes\t:\n", "address sizes\t: 46\n"})
    EXPECT_EQ(address_bits_of(head + junk), std::nullopt) << junk;
}

constexpr uint64_t kTiB = uint64_t{1} << 40, kGiB = uint64_t{1} << 30;

// An Alveo-like FPGA (10ee, class 1200, xocl) and an NVMe drive, each on its own root port of one
// host bridge: an AMD Zen host, whose kernel allows the path, unless `intel` (a Rocket Lake-S
// client host bridge, 8086:4c43, which the kernel refuses).
struct AlveoTree {
  test::Tree tree;
  size_t fpga = 0, nvme = 0;
  AlveoTree(uint64_t bar_start, uint64_t bar_size, std::optional<int> address_bits, bool intel = false) {
    if (intel) {
      tree.host_dev(0x8086, 0x4c43);
      tree.t.platform.cpu_model = 167;
    } else {
      tree.host_dev(0x1022, 0x1480);
      tree.amd_zen();
    }
    tree.t.platform.cpu_physical_address_bits = address_bits;
    tree.rp("00:01.0");
    tree.rp("00:02.0");
    Function& f = tree.describe(tree.ep("01:00.0", "00:01.0"), 0x120000, "xocl", bar_size, bar_start);
    f.vendor = 0x10ee;
    f.device = 0x5001;
    fpga = tree.index("01:00.0");
    tree.describe(tree.ep("02:00.0", "00:02.0"), 0x010802, "nvme", 16384, 0xfc000000);
    nvme = tree.index("02:00.0");
  }
  policy::PairDecision decide(size_t provider, size_t client) const {
    Platform platform = tree.t.platform;
    platform.kernel_release = "6.8.0";
    KernelRules kernel = load_kernel_rules(std::filesystem::path(kRules) / "kernel", platform, {});
    return policy::decide_pair(tree.t, kernel, default_rules(), nullptr, provider, client);
  }
};

std::string fact(const policy::FactSet& f, const std::string& name) {
  const policy::FactValue* v = f.get(name);
  return v ? policy::render_fact_value(*v) : "unknown";
}

bool found(const std::vector<policy::FiredRule>& rules, const std::string& id) {
  return std::any_of(rules.begin(), rules.end(), [&](const policy::FiredRule& r) { return r.id == id; });
}

// XRT: "the highest P2P BAR physical address has to be less than 32T". An Alveo's 64 GiB BAR at
// 56 TiB, on a CPU with 46-bit physical addresses (64 TiB): within the CPU's reach, beyond XRT's.
TEST(SeedCases, AlveoBarAt56TiBIsDecidedByXrtsLimit) {
  AlveoTree m(56 * kTiB, 64 * kGiB, 46);
  auto d = m.decide(m.fpga, m.nvme);
  EXPECT_EQ(fact(d.facts, "provider.bar_end"), std::to_string(56 * kTiB + 64 * kGiB));
  EXPECT_EQ(fact(d.facts, "provider.bar_above_32t"), "true");
  EXPECT_EQ(fact(d.facts, "provider.bar_beyond_address_width"), "false");
  EXPECT_EQ(fact(d.facts, "platform.cpu_physical_address_bits"), "46");
  EXPECT_EQ(d.decision.action, Action::kHostStaged);
  EXPECT_EQ(d.decision.rule, "xrt-p2p-bar-above-32t");
  EXPECT_NE(d.decision.reason.find("above 32 TiB"), std::string::npos) << d.decision.reason;
  EXPECT_NE(d.decision.remedy.find("12 TiB"), std::string::npos) << d.decision.remedy;
  // The limit is the provider's BAR: with the drive providing, the FPGA's BAR is not the target.
  EXPECT_NE(m.decide(m.nvme, m.fpga).decision.rule, "xrt-p2p-bar-above-32t");
  // Below 32 TiB (XRT recommends a 12 TiB base) the pair is the kernel's.
  AlveoTree low(12 * kTiB, 64 * kGiB, 46);
  auto ok = low.decide(low.fpga, low.nvme);
  EXPECT_EQ(fact(ok.facts, "provider.bar_above_32t"), "false");
  EXPECT_NE(ok.decision.rule, "xrt-p2p-bar-above-32t");
  // Whether XRT takes the BAR then rests on the card's memory, which this capture does not hold:
  // staged until it is known, and said so.
  EXPECT_FALSE(ok.decision.certain()) << ok.decision.rule;
  EXPECT_NE(std::find(ok.decision.decisive_unknown_facts.begin(), ok.decision.decisive_unknown_facts.end(),
                      "provider.memory_size"), ok.decision.decisive_unknown_facts.end());
  // Ending exactly at 32 TiB: its highest address is below 32 TiB.
  AlveoTree edge(32 * kTiB - 64 * kGiB, 64 * kGiB, 46);
  EXPECT_EQ(fact(edge.decide(edge.fpga, edge.nvme).facts, "provider.bar_above_32t"), "false");
}

// The same BAR under an Intel host that refuses the pair: the kernel decides, and XRT's limit is
// still told as a problem of the pair with its own fix.
TEST(SeedCases, AlveoBarAbove32TiBIsAFindingWhereTheKernelRefuses) {
  AlveoTree m(56 * kTiB, 64 * kGiB, 46, /*intel=*/true);
  auto d = m.decide(m.fpga, m.nvme);
  EXPECT_EQ(d.decision.rule, "kernel-refuses");
  EXPECT_TRUE(found(d.decision.findings, "xrt-p2p-bar-above-32t"));
}

// x86 Linux ends the I/O memory tree at the CPU's physical address width: a BAR beyond it cannot
// be mapped, whatever the device.
TEST(SeedCases, BarBeyondTheCpusPhysicalAddressWidth) {
  AlveoTree m(56 * kTiB, 64 * kGiB, 45);  // 32 TiB of physical addresses
  auto d = m.decide(m.fpga, m.nvme);
  EXPECT_EQ(fact(d.facts, "provider.bar_beyond_address_width"), "true");
  EXPECT_EQ(d.decision.rule, "bar-beyond-address-width");
  EXPECT_EQ(d.decision.authority, policy::Authority::kPlatform);
  EXPECT_NE(d.decision.reason.find("45-bit"), std::string::npos) << d.decision.reason;
  EXPECT_TRUE(found(d.decision.findings, "xrt-p2p-bar-above-32t"));  // both problems, each with its fix
  // Not only FPGAs: a GPU's 32 GiB BAR at 1 TiB on a CPU with 39-bit addresses (512 GiB).
  AlveoTree gpu(1 * kTiB, 32 * kGiB, 39);
  Function& g = gpu.tree.t.functions[gpu.fpga];
  g.vendor = 0x1002, g.device = 0x744c, g.class_code = 0x030000, g.driver = "amdgpu";
  auto dg = gpu.decide(gpu.fpga, gpu.nvme);
  EXPECT_EQ(dg.decision.rule, "bar-beyond-address-width");
  EXPECT_FALSE(found(dg.decision.findings, "xrt-p2p-bar-above-32t"));
  // The width unknown (an lspci dump, a CPU without the line): the fact is unknown, no rule fires.
  AlveoTree unknown(56 * kTiB, 64 * kGiB, std::nullopt);
  auto du = unknown.decide(unknown.fpga, unknown.nvme);
  EXPECT_EQ(fact(du.facts, "provider.bar_beyond_address_width"), "unknown");
  EXPECT_EQ(du.decision.rule, "xrt-p2p-bar-above-32t");
  EXPECT_FALSE(found(du.decision.fired, "bar-beyond-address-width"));
  // Within the width: false.
  AlveoTree fits(12 * kTiB, 64 * kGiB, 46);
  EXPECT_EQ(fact(fits.decide(fits.fpga, fits.nvme).facts, "provider.bar_beyond_address_width"), "false");
}

// ---------------------------------------------------------------------------------------------
// Every deciding problem of a pair is told, whatever rule decided: XRT's "no iomem" on an Intel
// host that refuses the pair.
// ---------------------------------------------------------------------------------------------

TEST(SeedCases, NoIomemShowsWhereTheKernelRefuses) {
  // The FPGA's Resizable BAR control asks for 8 MiB; the BAR got 2 MiB (resized, no room found).
  IntelHostWithAlveo m(uint64_t{0x4000000000}, uint64_t{2} << 20, uint64_t{8} << 20,
                       "address sizes\t: 39 bits physical, 48 bits virtual\n");
  const std::string root = "--sysroot " + m.s.str() + " ";
  auto check = tool(root + "check 01:00.0 02:00.0");
  EXPECT_EQ(check.status, 1) << check.output;
  EXPECT_NE(check.output.find("host_staged (the kernel (6.8.0) refuses"), std::string::npos) << check.output;
  EXPECT_NE(check.output.find("also [resized-bar-without-room]: a Resizable BAR was resized but got no address space"),
            std::string::npos) << check.output;
  EXPECT_NE(check.output.find("  fix: warm reboot"), std::string::npos) << check.output;

  auto j = json::parse(tool(root + "--format json check 01:00.0 02:00.0").output);
  EXPECT_EQ(j["rule"], "kernel-refuses");
  ASSERT_FALSE(j["findings"].empty()) << j.dump();
  EXPECT_EQ(j["findings"][0]["id"], "resized-bar-without-room");

  auto explain = tool(root + "explain 01:00.0 02:00.0");
  EXPECT_NE(explain.output.find("do not share an upstream bridge or whitelisted host bridge"), std::string::npos) << explain.output;
  EXPECT_NE(explain.output.find("Besides the kernel's verdict, the platform keeps peers out"), std::string::npos) << explain.output;
  EXPECT_NE(explain.output.find("0000:01:00.0 -> 0000:02:00.0 [resized-bar-without-room]: "), std::string::npos) << explain.output;
  auto details = tool(root + "policy --details");
  EXPECT_NE(details.output.find("fpga0 -> nvme0: host_staged (rule kernel-refuses"), std::string::npos) << details.output;
  EXPECT_NE(details.output.find("also [resized-bar-without-room]"), std::string::npos) << details.output;
  auto notes = tool(root + "policy");
  EXPECT_NE(notes.output.find("also [resized-bar-without-room]"), std::string::npos) << notes.output;
  auto screen = tool(root);
  EXPECT_NE(screen.output.find("also [resized-bar-without-room]"), std::string::npos) << screen.output;
  // The compact JSON: the group names the finding and its example gives its text and fix.
  auto policy = json::parse(tool(root + "policy --format json").output);
  bool told = false;
  for (const auto& g : policy["groups"])
    for (const auto& f : g["example"]["findings"])
      told |= f["id"] == "resized-bar-without-room" && f["remedy"].get<std::string>().starts_with("warm reboot");
  EXPECT_TRUE(told) << policy["groups"].dump();

  // With the BAR given its full size, no such problem is told.
  IntelHostWithAlveo sized(uint64_t{0x4000000000}, uint64_t{8} << 20, uint64_t{8} << 20);
  auto fine = tool("--sysroot " + sized.s.str() + " check 01:00.0 02:00.0");
  EXPECT_EQ(fine.output.find("resized-bar-without-room"), std::string::npos) << fine.output;
  EXPECT_NE(fine.output.find("refuses"), std::string::npos) << fine.output;
  auto fine_explain = tool("--sysroot " + sized.s.str() + " explain 01:00.0 02:00.0");
  EXPECT_EQ(fine_explain.output.find("Besides the kernel's verdict"), std::string::npos) << fine_explain.output;
}

// The findings come from the facts the rules' conditions read, so a remembered decision (pairs
// whose facts agree) tells the same problems as one decided afresh.
TEST(SeedCases, FindingsAreTheSameRememberedOrDecidedAfresh) {
  AlveoTree m(56 * kTiB, 64 * kGiB, 46, /*intel=*/true);
  Platform platform = m.tree.t.platform;
  platform.kernel_release = "6.8.0";
  KernelRules kernel = load_kernel_rules(std::filesystem::path(kRules) / "kernel", platform, {});
  policy::PolicyEvaluator evaluator(m.tree.t, kernel, default_rules(), nullptr);
  size_t g1 = evaluator.decide(m.fpga, m.nvme);
  size_t g2 = evaluator.decide(m.nvme, m.fpga);
  EXPECT_NE(g1, g2);  // only the FPGA's BAR is above 32 TiB
  const auto& groups = evaluator.groups();
  EXPECT_NE(std::find(groups[g1].findings.begin(), groups[g1].findings.end(), "xrt-p2p-bar-above-32t"), groups[g1].findings.end());
  EXPECT_EQ(std::find(groups[g2].findings.begin(), groups[g2].findings.end(), "xrt-p2p-bar-above-32t"), groups[g2].findings.end());
  EXPECT_EQ(evaluator.decide(m.fpga, m.nvme), g1);
}

// ---------------------------------------------------------------------------------------------
// Seed case 3: advisories about the machine (a runtime's version, a measurement) are told once,
// and on a one-GPU machine too.
// ---------------------------------------------------------------------------------------------

// One Arc GPU (xe) on an Intel host, and the runtime facts a probe of it stores.
struct OneGpuMachine {
  test::SysrootDir s;
  std::string facts_file;
  explicit OneGpuMachine(const json& all, int gpus = 1) {
    s.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n");
    s.function("pci0000:00/0000:00:00.0", test::ConfigBytes(0x8086, 0x4c43, 0x060000, -1).bytes());
    for (int i = 0; i < gpus; ++i) {
      std::string port = fmt::format("0000:00:{:02x}.0", 1 + i), gpu = fmt::format("0000:{:02x}:00.0", 3 + i);
      s.function("pci0000:00/" + port,
                 root_port(static_cast<uint16_t>(0x4c01 + i), static_cast<uint8_t>(3 + i), uint64_t{1} << 36, (uint64_t{1} << 37) - 1));
      test::gpu_with_bar(s, "pci0000:00/" + port + "/" + gpu, 0x8086, 0xe223, "xe", (uint64_t{1} << 36) + i * (uint64_t{1} << 34),
                         uint64_t{16} << 30);
    }
    facts_file = s.str() + "/vendor-facts.json";
    std::ofstream(facts_file) << json{{"schema_version", 1}, {"all", all}}.dump();
  }
  test::CommandResult run(const std::string& args) const {
    return tool("--sysroot " + s.str() + " " + args + " --vendor-facts " + facts_file);
  }
};

const json kRuntime2631 = {{"runtime.compute_runtime_version", "26.31.39395.13"}};

TEST(SeedCases, OneGpuMachineGetsTheRuntimeVersionsAdvisory) {
  OneGpuMachine m(kRuntime2631);
  auto text = m.run("policy");
  EXPECT_NE(text.output.find("Fewer than two devices"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("This machine (whatever the pairs):\n  [xe-runtime-pins-peer-mirror] compute-runtime "
                             "26.31.39395.13 (26.09 and later)"),
            std::string::npos) << text.output;
  EXPECT_NE(text.output.find("    fix: run `p2paudit probe --mirror`"), std::string::npos) << text.output;
  auto j = json::parse(m.run("policy --format json").output);
  ASSERT_EQ(j["advisories"].size(), 1u) << j.dump();
  EXPECT_EQ(j["advisories"][0]["id"], "xe-runtime-pins-peer-mirror");
  EXPECT_EQ(j["advisories"][0]["source"], "https://github.com/intel/compute-runtime/issues/953");
  // An older runtime: nothing to tell.
  OneGpuMachine old(json{{"runtime.compute_runtime_version", "26.05.37020.3"}});
  EXPECT_EQ(old.run("policy").output.find("This machine"), std::string::npos);
  EXPECT_TRUE(json::parse(old.run("policy --format json").output)["advisories"].empty());
}

// The first screen tells it too, once, under the line that says there is no pair.
TEST(SeedCases, FirstScreenTellsTheMachineAdvisory) {
  test::Tree tree;
  tree.host_dev(0x8086, 0x4c43);
  tree.t.platform.cpu_model = 167;
  tree.rp("00:01.0");
  tree.describe(tree.ep("03:00.0", "00:01.0"), 0x030000, "xe", uint64_t{16} << 30).vendor = 0x8086;
  Platform platform = tree.t.platform;
  platform.kernel_release = "7.1.0";
  KernelRules kernel = load_kernel_rules(std::filesystem::path(kRules) / "kernel", platform, {});
  auto vendor = policy::VendorFactsDocument::parse(json{{"schema_version", 1}, {"all", kRuntime2631}}.dump(), "test");
  policy::PolicyEvaluator evaluator(tree.t, kernel, default_rules(), &vendor);
  std::vector<NamedFunction> devices = {{tree.index("03:00.0"), "gpu0"}};
  std::ostringstream out;
  policy::write_decision_screen(out, evaluator, devices, {}, {.width = 80});
  const std::string text = out.str();
  EXPECT_NE(text.find("Fewer than two devices"), std::string::npos) << text;
  EXPECT_NE(text.find("\nadvisory [xe-runtime-pins-peer-mirror]: compute-runtime 26.31.39395.13"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  fix: run `p2paudit probe --mirror`"), std::string::npos) << text;
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);)
    if (!l.starts_with("Fewer than two devices")) EXPECT_LE(std::count_if(l.begin(), l.end(), [](char c) { return (c & 0xc0) != 0x80; }), 80) << l;
  // Without the runtime's version: nothing to tell.
  policy::PolicyEvaluator bare(tree.t, kernel, default_rules(), nullptr);
  std::ostringstream none;
  policy::write_decision_screen(none, bare, devices, {}, {.width = 80});
  EXPECT_EQ(none.str().find("advisory ["), std::string::npos) << none.str();
}

// `probe --mirror` measured: the measurement is told, with its number, instead of the version's
// guess; a measurement below the threshold silences both.
TEST(SeedCases, TheMeasurementSpeaksInsteadOfTheVersion) {
  json measured = kRuntime2631;
  measured["runtime.host_mirror_per_byte"] = 1.02;
  OneGpuMachine m(measured);
  auto j = json::parse(m.run("policy --format json").output);
  ASSERT_EQ(j["advisories"].size(), 1u) << j.dump();
  EXPECT_EQ(j["advisories"][0]["id"], "measured-host-mirror");
  EXPECT_NE(j["advisories"][0]["reason"].get<std::string>().find("1.02"), std::string::npos) << j["advisories"];
  json small = kRuntime2631;
  small["runtime.host_mirror_per_byte"] = 0.01;
  EXPECT_TRUE(json::parse(OneGpuMachine(small).run("policy --format json").output)["advisories"].empty());
}

// With two GPUs the advisory still fires on every pair (the pairs' JSON keeps it), but the text
// tells it once for the machine, not as a warning of every pair.
TEST(SeedCases, TwoGpusTellTheMachineAdvisoryOnce) {
  OneGpuMachine m(kRuntime2631, 2);
  auto text = m.run("policy").output;
  size_t at = text.find("[xe-runtime-pins-peer-mirror]");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(text.find("[xe-runtime-pins-peer-mirror]", at + 1), std::string::npos) << text;
  EXPECT_NE(text.find("This machine (whatever the pairs):"), std::string::npos) << text;
  auto check = json::parse(m.run("--format json check gpu0 gpu1").output);
  EXPECT_NE(std::find(check["rules"].begin(), check["rules"].end(), "xe-runtime-pins-peer-mirror"), check["rules"].end());
  // Pair-level advisories stay the pairs' warnings.
  EXPECT_NE(text.find("Warnings:\n  [intel-client-peer-reads]"), std::string::npos) << text;
}

// The rule set says which advisories are about the machine: warn rules of advisories files that
// read machine facts only.
TEST(SeedCases, MachineAdvisoriesAreThoseReadingOnlyMachineFacts) {
  std::set<std::string> machine;
  for (const auto& rule : default_rules().rules())
    if (policy::RuleSet::is_machine_advisory(rule)) machine.insert(rule.id);
  EXPECT_TRUE(machine.count("xe-runtime-pins-peer-mirror"));
  EXPECT_TRUE(machine.count("measured-host-mirror"));
  EXPECT_FALSE(machine.count("intel-client-peer-reads"));      // reads path.relation
  EXPECT_FALSE(machine.count("xe-peer-usm-on-old-kernel"));    // two xe GPUs in one context
  EXPECT_FALSE(machine.count("vm-guest"));                     // the default policy's warnings stay the pairs'
  EXPECT_FALSE(machine.count("kernel-without-p2pdma"));        // deciding rules decide pairs
  // A site's advisories file: the machine's when `when` and texts read machine facts only; the same
  // rule in a policy file stays the pairs' warning.
  const std::string rules =
      "version: 1\nkind: advisories\nrules:\n"
      "  - {id: old-kernel, when: {kernel.release: {regex: '^5\\.'}}, action: warn, reason: 'kernel {kernel.release}',"
      " source: 'https://example.org/a'}\n"
      "  - {id: names-a-pair, when: {kernel.release: {regex: '^5\\.'}}, action: warn, reason: 'on {provider.bdf}',"
      " source: 'https://example.org/b'}\n"
      "  - {id: reads-a-pair, when: {kernel.release: {regex: '^5\\.'}, path.same_model: true}, action: warn,"
      " reason: x, source: 'https://example.org/c'}\n";
  policy::RuleSet site;
  site.add(policy::parse_rule_file(rules, "site.yaml"));
  ASSERT_EQ(site.rules().size(), 3u);
  EXPECT_TRUE(policy::RuleSet::is_machine_advisory(site.rules()[0]));
  EXPECT_FALSE(policy::RuleSet::is_machine_advisory(site.rules()[1]));
  EXPECT_FALSE(policy::RuleSet::is_machine_advisory(site.rules()[2]));
  policy::FactSet facts;
  facts.set("kernel.release", std::string("5.15.0"));
  auto told = site.machine_advisories(facts);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].reason, "kernel 5.15.0");
  facts.set("kernel.release", std::string("6.8.0"));
  EXPECT_TRUE(site.machine_advisories(facts).empty());
  policy::RuleSet as_policy;
  std::string policy_text = rules;
  policy_text.replace(policy_text.find("kind: advisories\n"), 17, "");
  as_policy.add(policy::parse_rule_file(policy_text, "site.yaml"));
  EXPECT_FALSE(policy::RuleSet::is_machine_advisory(as_policy.rules()[0]));
  EXPECT_TRUE(policy::is_machine_fact("platform.cpu_physical_address_bits"));
  EXPECT_FALSE(policy::is_machine_fact("provider.bar_end"));
}

}  // namespace
}  // namespace p2paudit
