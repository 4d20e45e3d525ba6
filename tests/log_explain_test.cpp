// SPDX-License-Identifier: GPL-2.0-or-later
// The kernel log's events against the prediction (docs/log.md): every refusal the real 6.1 kernel
// logged on the kernel-oracle machines names the pair it refused and agrees with the tool's
// verdict; an IOMMU fault's address names the provider by its BAR and the rule that should have
// refused the pair; an Xid is paired only where one peer is possible; the kept events are bounded.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "p2paudit/kernel_log.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/log_explain.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "sysroot_builder.h"
#include "oracle_cases.h"
#include "test_support.h"

namespace p2paudit::policy {
namespace {

namespace fs = std::filesystem;

const std::string kRules = P2PAUDIT_SOURCE_RULES_DIR;

const RuleSet& default_rules() {
  static const RuleSet rules = RuleSet::load(default_rule_files(kRules));
  return rules;
}

// A machine read from a sysroot, with its kernel rules and an evaluator over the default policy.
struct Machine {
  Topology topo;
  KernelRules kernel;
  std::unique_ptr<PolicyEvaluator> evaluator;
  Machine(const std::string& sysroot, const KernelRuleOptions& options = {}) {
    topo = read_topology(Sysroot::open(sysroot));
    kernel = load_kernel_rules(fs::path(kRules) / "kernel", topo.platform, options);
    evaluator = std::make_unique<PolicyEvaluator>(topo, kernel, default_rules(), nullptr);
  }
  size_t at(const char* bdf) const { return *topo.index_of(*Bdf::parse(bdf)); }
};

LogEvent event(LogEventKind kind, const std::string& source, const char* device, const char* peer,
               const std::string& text, std::optional<uint64_t> address = std::nullopt, const std::string& detail = "") {
  LogEvent e;
  e.kind = kind;
  e.source = source;
  if (device) e.device = Bdf::parse(device);
  if (peer) e.peer = Bdf::parse(peer);
  e.address = address;
  e.detail = detail;
  e.line.text = text;
  e.line.line_number = 1;
  return e;
}

// ---- The acceptance on the kernel-oracle captures: the log's refusals are the kernel's verdicts.

const fs::path kOracleDir = test::oracle_dir();

class OracleLog : public ::testing::TestWithParam<std::string> {};

TEST_P(OracleLog, EveryLoggedRefusalIsTheKernelsVerdictAndThePrediction) {
  const fs::path dir = kOracleDir / GetParam();
  auto meta = test::read_oracle_meta(GetParam());
  // meta's whitelist= past our table: the entries the oracle's kernel added (as oracle_test.cpp).
  Topology probe_topo = read_topology(Sysroot::open((dir / "sysroot.tar.gz").string()));
  KernelRules base = load_kernel_rules(fs::path(kRules) / "kernel", probe_topo.platform, {});
  std::istringstream wl(meta["whitelist"]);
  std::vector<std::string> table;
  for (std::string item; wl >> item;) table.push_back(item);
  KernelRuleOptions options;
  for (size_t i = base.table_entries; i < table.size(); ++i)
    options.assume_whitelisted.push_back(table[i].substr(0, 9) + (table[i].ends_with("flags=1") ? ":same-host-bridge" : ""));
  Machine m((dir / "sysroot.tar.gz").string(), options);

  // The kernel's own verdicts: every ordered pair with distance_many=-1.
  std::set<std::pair<std::string, std::string>> refused;  // (provider, client)
  std::ifstream verdicts(dir / "verdicts.txt");
  for (std::string line; std::getline(verdicts, line);) {
    std::istringstream in(line);
    std::string tag, provider, client, map, dist, many;
    in >> tag >> provider >> client >> map >> dist >> many;
    if (tag == "P2P" && many == "distance_many=-1") refused.emplace(provider, client);
  }

  LogExplainer explainer(*m.evaluator, m.kernel, {.max_events = 100000});
  std::ifstream log(dir / "dmesg.txt", std::ios::binary);
  read_kernel_log(log, "dmesg.txt", {}, [&](KernelLogLine&& line) {
    if (auto e = recognise_kernel_log_line(line)) explainer.add(*e);
  });
  explainer.finish();

  std::set<std::pair<std::string, std::string>> logged;
  size_t acs = 0;
  for (const auto& e : explainer.events()) {
    ASSERT_TRUE(e.pair || e.event.kind == LogEventKind::kHostBridgeNotWhitelisted)
        << GetParam() << ": " << e.event.line.text << ": " << e.explanation;
    EXPECT_EQ(e.agreement, LogAgreement::kAgrees) << GetParam() << ": " << e.event.line.text << ": " << e.explanation;
    if (e.event.kind == LogEventKind::kAcsRedirect) ++acs;
    if (e.event.kind != LogEventKind::kP2pdmaRefused) continue;
    logged.emplace(m.topo.functions[e.pair->first].bdf.str(), m.topo.functions[e.pair->second].bdf.str());
    EXPECT_EQ(e.kernel_distance, -1) << GetParam();
    EXPECT_NE(e.predicted_by.find("pci_p2pdma_distance"), std::string::npos);
  }
  EXPECT_EQ(logged, refused) << GetParam();
  EXPECT_EQ(explainer.contradictions(), 0u) << GetParam();
  if (std::stoi(meta["acs_warning_pairs"].empty() ? "0" : meta["acs_warning_pairs"]) > 0) EXPECT_GT(acs, 0u) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Cases, OracleLog, ::testing::ValuesIn(test::oracle_cases()), test::oracle_param_name);

// A refusal the tool predicted allowed is a contradiction: the same log line on a machine whose
// kernel the tool thinks whitelists the host bridge.
TEST(LogExplain, ARefusalOfAnAllowedPairContradicts) {
  const fs::path dir = kOracleDir / "h-a-two-rootports-intel";
  KernelRuleOptions options;
  options.assume_whitelisted.push_back("8086:29c0");  // the Q35 host bridge: every pair allowed through it
  Machine m((dir / "sysroot.tar.gz").string(), options);
  LogExplainer explainer(*m.evaluator, m.kernel);
  explainer.add(event(LogEventKind::kP2pdmaRefused, "p2pdma", "0000:02:00.0", "0000:01:00.0",
                      "e1000e 0000:02:00.0: cannot be used for peer-to-peer DMA as the client and provider "
                      "(0000:01:00.0) do not share an upstream bridge or whitelisted host bridge"));
  explainer.finish();
  ASSERT_EQ(explainer.events().size(), 1u);
  const auto& e = explainer.events()[0];
  ASSERT_TRUE(e.pair);
  EXPECT_EQ(e.pair->first, m.at("0000:01:00.0"));   // the provider, named in parentheses
  EXPECT_EQ(e.pair->second, m.at("0000:02:00.0"));  // the client, the line's device
  EXPECT_EQ(e.agreement, LogAgreement::kContradicts);
  EXPECT_EQ(explainer.contradictions(), 1u);
  auto j = log_json(m.topo, explainer, {.name = "test"});
  EXPECT_EQ(j["contradictions"], 1);
  EXPECT_FALSE(j["attach"].is_null());
}

// ---- Faults: an AMD host with the IOMMU translating and two AMD GPUs.

struct TwoGpus {
  test::SysrootDir s;
  explicit TwoGpus(uint16_t vendor, const std::string& driver, const std::string& cpu_vendor) {
    s.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: " + cpu_vendor + "\ncpu family\t: 25\nmodel\t\t: 1\n"
                            "address sizes\t: 48 bits physical, 48 bits virtual\n");
    s.function("pci0000:00/0000:00:00.0", test::ConfigBytes(cpu_vendor == "AuthenticAMD" ? 0x1022 : 0x8086, 0x14d8,
                                                            0x060000, 0).bytes());
    uint16_t device = vendor == 0x1002 ? 0x744c : 0x2684;
    test::gpu_with_bar(s, "pci0000:00/0000:00:02.0", vendor, device, driver, uint64_t{1} << 40, uint64_t{16} << 30);
    test::gpu_with_bar(s, "pci0000:00/0000:00:03.0", vendor, device, driver, uint64_t{2} << 40, uint64_t{16} << 30);
    for (const char* bdf : {"0000:00:02.0", "0000:00:03.0"}) {
      s.write(std::string("sys/devices/pci0000:00/") + bdf + "/mem_info_vram_total", "17179869184\n");
      s.write(std::string("sys/devices/pci0000:00/") + bdf + "/mem_info_vis_vram_total", "17179869184\n");
    }
    // Both in translated IOMMU groups.
    for (int g : {2, 3}) {
      std::string bdf = fmt::format("0000:00:0{}.0", g);
      s.link("sys/devices/pci0000:00/" + bdf + "/iommu_group", "../../../kernel/iommu_groups/" + std::to_string(g));
      s.write("sys/kernel/iommu_groups/" + std::to_string(g) + "/type", "DMA\n");
      s.link("sys/kernel/iommu_groups/" + std::to_string(g) + "/devices/" + bdf, "../../../../devices/pci0000:00/" + bdf);
    }
  }
};

TEST(LogExplain, AnAmdViFaultOnThePeersBarNamesThePairAndTheRule) {
  TwoGpus machine(0x1002, "amdgpu", "AuthenticAMD");
  Machine m(machine.s.str());
  ASSERT_EQ(m.topo.platform.iommu_mode, "translated");
  LogExplainer explainer(*m.evaluator, m.kernel);
  // drivers/iommu/amd/iommu.c, amd_iommu_report_page_fault(): the requester, then domain, address, flags.
  const uint64_t address = (uint64_t{2} << 40) + 0x1234000;  // inside 00:03.0's BAR 0
  explainer.add(event(LogEventKind::kIommuFault, "amd-vi", "0000:00:02.0", nullptr,
                      "amdgpu 0000:00:02.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x000b address=0x20001234000 "
                      "flags=0x0020]", address));
  explainer.finish();
  ASSERT_EQ(explainer.events().size(), 1u);
  const auto& e = explainer.events()[0];
  ASSERT_TRUE(e.pair) << e.explanation;
  EXPECT_EQ(e.pair->first, m.at("0000:00:03.0"));   // the BAR's owner: the provider
  EXPECT_EQ(e.pair->second, m.at("0000:00:02.0"));  // the requester: the client
  EXPECT_NE(e.pair_basis.find("BAR 0 of 0000:00:03.0"), std::string::npos) << e.pair_basis;
  EXPECT_EQ(e.rule, "amdgpu-peer-through-translating-iommu");
  EXPECT_EQ(e.agreement, LogAgreement::kAgrees);
  EXPECT_NE(e.predicted_by.find("amdgpu-peer-through-translating-iommu"), std::string::npos);
  EXPECT_NE(e.remedy.find("iommu=pt"), std::string::npos) << e.remedy;

  // An address in no BAR names no pair, and says so.
  LogExplainer other(*m.evaluator, m.kernel);
  other.add(event(LogEventKind::kIommuFault, "amd-vi", "0000:00:02.0", nullptr, "fault", uint64_t{0x1000}));
  other.finish();
  ASSERT_EQ(other.events().size(), 1u);
  EXPECT_FALSE(other.events()[0].pair);
  EXPECT_EQ(other.events()[0].agreement, LogAgreement::kUnknown);
  EXPECT_NE(other.events()[0].explanation.find("in no device's BAR"), std::string::npos);
}

TEST(LogExplain, ADmarFaultAndAnXidOnNvidiaGpusNameThePairAndTheRule) {
  TwoGpus machine(0x10de, "nvidia", "GenuineIntel");
  Machine m(machine.s.str());
  LogExplainer explainer(*m.evaluator, m.kernel);
  // drivers/iommu/intel/dmar.c, dmar_fault_do_one(): "[DMA Read NO_PASID] Request device [02:00.0]
  // fault addr 0x... [fault reason 0x06] PTE Read access is not set".
  explainer.add(event(LogEventKind::kIommuFault, "dmar", "0000:00:03.0", nullptr,
                      "DMAR: [DMA Read NO_PASID] Request device [00:03.0] fault addr 0x10000002000 [fault reason 0x06] "
                      "PTE Read access is not set", (uint64_t{1} << 40) + 0x2000));
  // NVIDIA's driver: "NVRM: Xid (PCI:0000:00:02): 79, pid=..., GPU has fallen off the bus."
  explainer.add(event(LogEventKind::kNvidiaXid, "nvidia-xid", "0000:00:02.0", nullptr,
                      "NVRM: Xid (PCI:0000:00:02): 79, pid=1234, name=python, GPU has fallen off the bus.", std::nullopt,
                      "79, pid=1234, name=python, GPU has fallen off the bus."));
  explainer.finish();
  ASSERT_EQ(explainer.events().size(), 2u);
  const auto& fault = explainer.events()[0];
  ASSERT_TRUE(fault.pair) << fault.explanation;
  EXPECT_EQ(fault.pair->first, m.at("0000:00:02.0"));
  EXPECT_EQ(fault.pair->second, m.at("0000:00:03.0"));
  ASSERT_TRUE(fault.decision);
  EXPECT_NE(*fault.decision, Action::kPeer);
  EXPECT_FALSE(fault.rule.empty());
  EXPECT_EQ(fault.agreement, LogAgreement::kAgrees);
  const auto& xid = explainer.events()[1];
  ASSERT_TRUE(xid.pair) << xid.explanation;  // the only device the fault pairs it with
  EXPECT_EQ(xid.pair_basis, "the only device this log's other events pair it with");
  EXPECT_EQ(xid.rule, fault.rule);
  EXPECT_EQ(xid.agreement, LogAgreement::kAgrees);
  EXPECT_NE(xid.explanation.find("fallen off the bus"), std::string::npos);

  // Alone, the Xid is paired with the machine's only other GPU, and says why.
  LogExplainer alone(*m.evaluator, m.kernel);
  alone.add(event(LogEventKind::kNvidiaXid, "nvidia-xid", "0000:00:02.0", nullptr, "Xid", std::nullopt, "79, x"));
  alone.finish();
  ASSERT_TRUE(alone.events()[0].pair);
  EXPECT_NE(alone.events()[0].pair_basis.find("the only other GPU"), std::string::npos);
}

// DMAR (and AMD-Vi before PCI segments) print the requester as "BB:DD.F": the segment is the one of
// the machine's segments that has that function, and where two have one, the device is not known
// (never segment 0 guessed). A fault in two overlapping BARs (a hostile capture) names no owner.
TEST(LogExplain, ARequesterPrintedWithoutItsSegmentIsFoundOrSaidUnknown) {
  auto build = [](test::SysrootDir& s, bool second_in_segment_0) {
    s.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n");
    s.function("pci0000:00/0000:00:00.0", test::ConfigBytes(0x8086, 0x09a2, 0x060000, 0).bytes());
    s.function("pci0001:00/0001:00:00.0", test::ConfigBytes(0x8086, 0x09a2, 0x060000, 0).bytes());
    test::gpu_with_bar(s, "pci0000:00/0000:00:02.0", 0x10de, 0x2684, "nvidia", uint64_t{1} << 40, uint64_t{16} << 30);
    test::gpu_with_bar(s, "pci0001:00/0001:00:03.0", 0x10de, 0x2684, "nvidia", uint64_t{2} << 40, uint64_t{16} << 30);
    if (second_in_segment_0)  // 00:03.0 in both segments; its BAR overlaps 0001:00:03.0's
      test::gpu_with_bar(s, "pci0000:00/0000:00:03.0", 0x10de, 0x2684, "nvidia", uint64_t{2} << 40, uint64_t{16} << 30);
  };
  const std::string dmar = "DMAR: [DMA Read NO_PASID] Request device [00:03.0] fault addr 0x10000002000 "
                           "[fault reason 0x06] PTE Read access is not set";
  KernelLogLine line;
  line.text = dmar;
  auto recognised = recognise_kernel_log_line(line);
  ASSERT_TRUE(recognised && recognised->device);
  EXPECT_TRUE(recognised->device_segment_unknown);

  test::SysrootDir one;
  build(one, false);
  Machine m(one.str());
  LogExplainer explainer(*m.evaluator, m.kernel);
  explainer.add(*recognised);
  explainer.finish();
  ASSERT_EQ(explainer.events().size(), 1u);
  const auto& e = explainer.events()[0];
  ASSERT_TRUE(e.pair) << e.explanation;
  EXPECT_EQ(e.pair->second, m.at("0001:00:03.0"));  // the one segment that has 00:03.0
  EXPECT_EQ(e.pair->first, m.at("0000:00:02.0"));   // the BAR the address is in

  test::SysrootDir two;
  build(two, true);
  Machine both(two.str());
  LogExplainer ambiguous(*both.evaluator, both.kernel);
  ambiguous.add(*recognised);
  KernelLogLine overlap_line;  // the requester named with its segment; the address in both BARs
  overlap_line.text = "nvidia 0000:00:02.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x000b address=0x20000001000 "
                      "flags=0x0020]";
  auto overlap = recognise_kernel_log_line(overlap_line);
  ASSERT_TRUE(overlap && overlap->device && overlap->address);
  EXPECT_FALSE(overlap->device_segment_unknown);
  ambiguous.add(*overlap);
  ambiguous.finish();
  ASSERT_EQ(ambiguous.events().size(), 2u);
  EXPECT_FALSE(ambiguous.events()[0].pair);
  EXPECT_NE(ambiguous.events()[0].explanation.find("without its PCI segment, and segments 0000 and 0001 both have one"),
            std::string::npos) << ambiguous.events()[0].explanation;
  EXPECT_FALSE(ambiguous.events()[1].pair) << ambiguous.events()[1].pair_basis;
  EXPECT_NE(ambiguous.events()[1].explanation.find("in no device's BAR"), std::string::npos);
}

TEST(LogExplain, DevicesTheToolDoesNotSeeAreSaidSo) {
  TwoGpus machine(0x1002, "amdgpu", "AuthenticAMD");
  Machine m(machine.s.str());
  LogExplainer explainer(*m.evaluator, m.kernel);
  explainer.add(event(LogEventKind::kP2pdmaRefused, "p2pdma", "0000:41:00.0", "0000:00:02.0", "refused"));
  explainer.finish();
  ASSERT_EQ(explainer.events().size(), 1u);
  const auto& e = explainer.events()[0];
  EXPECT_FALSE(e.pair);
  EXPECT_EQ(e.agreement, LogAgreement::kUnknown);
  EXPECT_NE(e.explanation.find("0000:41:00.0 which the tool does not see"), std::string::npos) << e.explanation;
  std::ostringstream text;
  write_log_text(text, m.topo, explainer, {.name = "x"});
  EXPECT_NE(text.str().find("a device the tool does not see"), std::string::npos) << text.str();
}

TEST(LogExplain, KeptEventsAreBoundedAndRepeatsCounted) {
  TwoGpus machine(0x1002, "amdgpu", "AuthenticAMD");
  Machine m(machine.s.str());
  LogExplainer explainer(*m.evaluator, m.kernel, {.max_events = 3});
  // 10 distinct unseen devices, each twice; and one fault storm on the pair.
  for (int round = 0; round < 2; ++round)
    for (int bus = 0x40; bus < 0x4a; ++bus) {
      std::string bdf = fmt::format("0000:{:02x}:00.0", bus);
      explainer.add(event(LogEventKind::kAer, "aer", bdf.c_str(), nullptr, "aer"));
    }
  explainer.finish();
  EXPECT_EQ(explainer.events().size(), 3u);
  EXPECT_EQ(explainer.events_seen(), 20u);
  EXPECT_EQ(explainer.events()[0].count, 2u);
  EXPECT_EQ(explainer.events_dropped(), 14u);  // 20 lines, 6 of them the 3 kept events
  std::ostringstream text;
  write_log_text(text, m.topo, explainer, {.name = "x"});
  EXPECT_NE(text.str().find("counted, not kept"), std::string::npos);
}

TEST(LogExplain, TextEscapesTheLogsBytesAndSaysNoEvents) {
  TwoGpus machine(0x1002, "amdgpu", "AuthenticAMD");
  Machine m(machine.s.str());
  LogExplainer none(*m.evaluator, m.kernel);
  std::ostringstream empty;
  write_log_text(empty, m.topo, none, {.name = "x"});
  EXPECT_NE(empty.str().find("no events"), std::string::npos);

  LogExplainer explainer(*m.evaluator, m.kernel);
  explainer.add(event(LogEventKind::kAer, "aer", "0000:00:02.0", nullptr, "evil \x1b[31m\n bytes \xff"));
  explainer.finish();
  std::ostringstream text;
  write_log_text(text, m.topo, explainer, {.name = "x"});
  EXPECT_EQ(text.str().find('\x1b'), std::string::npos);
  EXPECT_EQ(text.str().find('\xff'), std::string::npos);
  EXPECT_NE(text.str().find("\\x1b"), std::string::npos) << text.str();

  // Unreadable: never "no events".
  std::ostringstream unread;
  LogSource source{.name = "/dev/kmsg", .readable = false, .unreadable_reason = "permission denied"};
  write_log_text(unread, m.topo, none, source);
  EXPECT_EQ(unread.str().find("no events"), std::string::npos);
  EXPECT_NE(unread.str().find("could not be checked"), std::string::npos);
}

}  // namespace
}  // namespace p2paudit::policy
