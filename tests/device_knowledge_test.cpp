// SPDX-License-Identifier: GPL-2.0-or-later
// The device table (rules/devices/, policy/src/device_knowledge.cpp): the loader's refusals, the
// facts it gives known IDs and withholds from unknown ones, and the default policy's rules that read
// them (model gaps: AMD Instinct under a translating IOMMU, NVIDIA's predicted answers, the GeForce
// clique in a VM), each decided on a tree.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "p2paudit/errors.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/device_knowledge.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/pair_facts.h"
#include "synthetic_tree.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using policy::parse_device_rows;
using test::Tree;

const std::string kHead = "schema: 1\nsources:\n  a: https://example.org/a\n  b: https://example.org/b\ndevices:\n";

std::string parse_error(const std::string& text) {
  try {
    parse_device_rows(text, "t.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted:\n" << text;
  return "";
}

TEST(DeviceKnowledge, ReadsRowsAndRanges) {
  auto rows = parse_device_rows(kHead +
                                    "  - {vendor: \"10de\", device: \"2335\", product: H200, product_line: datacenter, chip: GH100,"
                                    " fabric: nvlink, driver_pcie_peer: allowed, vm_clique_documented: true, memory_gib: 141,"
                                    " source: [a, b]}\n"
                                    "  - {vendor: \"8086\", device: \"0bd9-0bdb\", product: Max 1100, source: [a]}\n",
                                "t.yaml");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].memory_size, int64_t{141} << 30);
  EXPECT_EQ(rows[0].sources, (std::vector<std::string>{"https://example.org/a", "https://example.org/b"}));
  EXPECT_EQ(rows[0].origin, "t.yaml:6:5");
  policy::DeviceKnowledge known;
  known.add(std::move(rows), "t.yaml");
  ASSERT_NE(known.find(0x10de, 0x2335), nullptr);
  EXPECT_EQ(known.find(0x10de, 0x2335)->chip, "GH100");
  EXPECT_EQ(known.find(0x8086, 0x0bda)->product, "Max 1100");
  EXPECT_EQ(known.find(0x8086, 0x0bd8), nullptr);  // beside a range is not in it
  EXPECT_EQ(known.find(0x8086, 0x0bdc), nullptr);
  EXPECT_EQ(known.find(0x10de, 0x2336), nullptr);  // an ID not in the table is unknown
  EXPECT_TRUE(known.find(0x8086, 0x0bd9)->product_line.empty());  // left out: unknown, not guessed
}

TEST(DeviceKnowledge, RefusesWhatItDoesNotUnderstandWithThePlace) {
  auto row = [](const std::string& fields) { return kHead + "  - {" + fields + "}\n"; };
  const std::string ok = "vendor: \"10de\", device: \"2335\", product: H200";
  EXPECT_NE(parse_error(row(ok)).find("t.yaml:6:5: missing 'source'"), std::string::npos) << parse_error(row(ok));
  EXPECT_NE(parse_error(row(ok + ", source: [c]")).find("unknown source 'c'"), std::string::npos);
  EXPECT_NE(parse_error(row(ok + ", source: []")).find("'source' must be a list"), std::string::npos);
  EXPECT_NE(parse_error(row(ok + ", source: [a], colour: red")).find("unknown key 'colour'"), std::string::npos);
  for (const char* id : {"10d", "0x10de", "zzzz", "10de0", "ffff"})
    EXPECT_NE(parse_error(row(std::string("vendor: \"") + id + "\", device: \"2335\", product: X, source: [a]"))
                  .find("'vendor' must be a PCI vendor ID"),
              std::string::npos)
        << id;
  EXPECT_NE(parse_error(row("vendor: \"10de\", device: \"2336-2335\", product: X, source: [a]")).find("'device' must be"),
            std::string::npos);
  EXPECT_NE(parse_error(row(ok + ", product_line: gaming, source: [a]")).find("'product_line' must be one of"),
            std::string::npos);
  EXPECT_NE(parse_error(row(ok + ", memory_gib: 0, source: [a]")).find("'memory_gib'"), std::string::npos);
  EXPECT_NE(parse_error(row(ok + ", memory_gib: 99999999, source: [a]")).find("'memory_gib'"), std::string::npos);
  EXPECT_NE(parse_error(row(ok + ", chip: \"GH100;rm\", source: [a]")).find("'chip'"), std::string::npos);
  EXPECT_NE(parse_error(row("vendor: \"10de\", device: \"2335\", product: \"a\\e[2Jb\", source: [a]")).find("control"),
            std::string::npos);
  EXPECT_NE(parse_error(row("vendor: \"10de\", device: \"2335\", product: " + std::string(121, 'x') + ", source: [a]"))
                .find("longer than 120"),
            std::string::npos);
  EXPECT_NE(parse_error("schema: 1\nsources: {a: http://example.org}\ndevices: []\n").find("https://"), std::string::npos);
  EXPECT_NE(parse_error("schema: 2\nsources: {}\ndevices: []\n").find("t.yaml:1:9: unsupported schema"), std::string::npos);
  EXPECT_NE(parse_error("devices: [\n").find("t.yaml:"), std::string::npos);  // not YAML
  // Bounds: more rows than a table may hold.
  std::string many = kHead;
  for (size_t i = 0; i <= policy::kMaxDeviceRows; ++i) many += "  - {vendor: \"10de\", device: \"0001\", product: X, source: [a]}\n";
  EXPECT_NE(parse_error(many).find("more than 4096 devices"), std::string::npos);
}

TEST(DeviceKnowledge, ADeviceIdCoveredTwiceNamesBothRows) {
  auto rows = parse_device_rows(kHead +
                                    "  - {vendor: \"8086\", device: \"0bd9-0bdb\", product: A, source: [a]}\n"
                                    "  - {vendor: \"8086\", device: \"0bda\", product: B, source: [a]}\n",
                                "t.yaml");
  policy::DeviceKnowledge known;
  try {
    known.add(std::move(rows), "t.yaml");
    FAIL() << "an ID in two rows was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("t.yaml:7:5: device 8086:0bda is already covered by t.yaml:6:5 (8086:0bd9-0bdb)"),
              std::string::npos)
        << e.what();
  }
}

TEST(DeviceKnowledge, ALoadedDirectoryReadsOnlyYamlFilesAndFailsOnABadOne) {
  fs::path dir = fs::path(testing::TempDir()) / "device-knowledge-dir";
  fs::remove_all(dir);
  fs::create_directories(dir / "devices");
  std::ofstream(dir / "devices" / "a.yaml") << kHead << "  - {vendor: \"10de\", device: \"2335\", product: X, source: [a]}\n";
  std::ofstream(dir / "devices" / "README") << "not read";
  EXPECT_EQ(policy::load_device_knowledge(dir).rows().size(), 1u);
  std::ofstream(dir / "devices" / "b.yaml") << kHead << "  - {vendor: \"10de\", device: \"2335\", product: Y, source: [a]}\n";
  try {
    policy::load_device_knowledge(dir);
    FAIL() << "the same ID in two files was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("b.yaml:6:5: device 10de:2335 is already covered by"), std::string::npos) << e.what();
  }
  fs::remove_all(dir / "devices");
  EXPECT_THROW(policy::load_device_knowledge(dir), InputError);
}

// The shipped table: it loads, every row has a source, and the IDs the tests and captures use are
// in it with what their sources say.
TEST(DeviceKnowledge, TheShippedTableLoadsAndHoldsTheCapturedGpus) {
  auto known = policy::load_device_knowledge(P2PAUDIT_SOURCE_RULES_DIR);
  EXPECT_GE(known.rows().size(), 50u);
  for (const auto& r : known.rows()) {
    EXPECT_FALSE(r.sources.empty()) << r.origin;
    for (const auto& s : r.sources) EXPECT_TRUE(s.starts_with("https://")) << r.origin;
  }
  const policy::DeviceRow* h200 = known.find(0x10de, 0x2335);
  ASSERT_NE(h200, nullptr);
  EXPECT_EQ(h200->chip, "GH100");
  EXPECT_EQ(h200->product_line, "datacenter");
  const policy::DeviceRow *rtx4090 = known.find(0x10de, 0x2684), *rtx6000 = known.find(0x10de, 0x26b1);
  ASSERT_TRUE(rtx4090 && rtx6000);
  EXPECT_EQ(rtx4090->chip, rtx6000->chip);  // one chip, two lines (vendor-p2p-gates.md §1.4)
  EXPECT_EQ(rtx4090->driver_pcie_peer, "refused");
  EXPECT_EQ(rtx6000->driver_pcie_peer, "allowed");
  for (uint16_t id : {0x2330, 0x2331, 0x2321, 0x20b0, 0x20b2, 0x27b8, 0x26b9, 0x2901, 0x2bb5, 0x1db4, 0x2b85, 0x1b06})
    EXPECT_NE(known.find(0x10de, id), nullptr) << std::hex << id;
  for (uint16_t id : {0x66a1, 0x66af, 0x738c, 0x740f, 0x740c, 0x74a1, 0x73af, 0x744c, 0x7448, 0x6860})
    EXPECT_NE(known.find(0x1002, id), nullptr) << std::hex << id;
  for (uint16_t id : {0xe212, 0xe211, 0xe223, 0x56a0, 0x0bd5, 0x56c0}) EXPECT_NE(known.find(0x8086, id), nullptr) << std::hex << id;
  EXPECT_FALSE(known.find(0x8086, 0x56a0)->memory_size);  // 8 and 16 GB under one ID
}

Function gpu(uint16_t vendor, uint16_t device) {
  Function f;
  f.bdf = *Bdf::parse("0000:01:00.0");
  f.vendor = vendor, f.device = device;
  f.class_code = 0x030200;
  f.driver = vendor == 0x10de ? "nvidia" : "amdgpu";
  return f;
}

TEST(DeviceKnowledge, FactsForKnownIdsAndNoneForUnknownOnes) {
  auto h200 = policy::device_facts(gpu(0x10de, 0x2335), true);
  ASSERT_TRUE(h200.known("provider.chip"));
  EXPECT_EQ(std::get<std::string>(*h200.get("provider.chip")), "GH100");
  EXPECT_EQ(std::get<std::string>(*h200.get("provider.fabric")), "nvlink");
  EXPECT_EQ(std::get<bool>(*h200.get("provider.vm_clique_documented")), true);
  EXPECT_EQ(std::get<int64_t>(*h200.get("provider.memory_size")), int64_t{141} << 30);
  auto unknown = policy::device_facts(gpu(0x10de, 0x1234), false);
  for (const char* name : {"client.product", "client.product_line", "client.chip", "client.fabric",
                           "client.driver_pcie_peer", "client.vm_clique_documented", "client.memory_size"})
    EXPECT_FALSE(unknown.known(name)) << name;
  // The driver's sysfs comes first: amdgpu's VRAM size wins over the table's.
  Function mi300 = gpu(0x1002, 0x74a1);
  mi300.memory_size = uint64_t{100} << 30;
  EXPECT_EQ(std::get<int64_t>(*policy::device_facts(mi300, true).get("provider.memory_size")), int64_t{100} << 30);
}

policy::PairDecision decide(const Tree& tree, const std::string& p, const std::string& c,
                            const policy::VendorFactsDocument* facts = nullptr) {
  Topology t = tree.t;
  t.platform.kernel_release = "6.8.0";
  KernelRules rules = load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", t.platform, {});
  static const auto policy_rules = policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  return policy::decide_pair(t, rules, policy_rules, facts, tree.index(p), tree.index(c));
}

bool has(const std::vector<std::string>& ids, const std::string& id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }
bool found(const std::vector<policy::FiredRule>& rules, const std::string& id) {
  return std::any_of(rules.begin(), rules.end(), [&](const auto& r) { return r.id == id; });
}

// Two GPUs of one vendor on root ports of an AMD Zen host (the kernel allows the pair), or below
// one PLX switch NVIDIA's driver recognises.
// A BAR larger than any table row's memory: the large-BAR setup the rules under test assume.
constexpr uint64_t kLargeBar = uint64_t{256} << 30;

// amdgpu publishes its VRAM size in sysfs (mem_info_vram_total), so a capture of its GPUs holds it.
Tree with_published_vram(Tree tree) {
  for (auto& f : tree.t.functions)
    if (f.driver == "amdgpu") f.memory_size = uint64_t{16} << 30, f.memory_size_source = "mem_info_vram_total";
  return tree;
}

Tree pair_of(uint16_t vendor, uint16_t a, uint16_t b, bool below_switch, const std::string& iommu) {
  Tree tree;
  tree.amd_zen();
  tree.t.platform.iommu_mode = iommu;
  const uint32_t cls = vendor == 0x10de ? 0x030000 : 0x038000;
  const std::string driver = vendor == 0x10de ? "nvidia" : "amdgpu";
  if (below_switch) {
    tree.add("00:01.1", "", 0x1022, 0x1483, PcieType::kRootPort);
    tree.add("01:00.0", "00:01.1", 0x10b5, 0x8796, PcieType::kSwitchUpstream);
    tree.add("02:08.0", "01:00.0", 0x10b5, 0x8796, PcieType::kSwitchDownstream);
    tree.add("02:10.0", "01:00.0", 0x10b5, 0x8796, PcieType::kSwitchDownstream);
    tree.describe(tree.add("03:00.0", "02:08.0", vendor, a, PcieType::kEndpoint), cls, driver, kLargeBar);
    tree.describe(tree.add("04:00.0", "02:10.0", vendor, b, PcieType::kEndpoint), cls, driver, kLargeBar);
    return with_published_vram(tree);
  }
  tree.add("00:01.1", "", 0x1022, 0x1483, PcieType::kRootPort);
  tree.add("00:01.2", "", 0x1022, 0x1483, PcieType::kRootPort);
  tree.describe(tree.add("03:00.0", "00:01.1", vendor, a, PcieType::kEndpoint), cls, driver, kLargeBar);
  tree.describe(tree.add("04:00.0", "00:01.2", vendor, b, PcieType::kEndpoint), cls, driver, kLargeBar);
  return with_published_vram(tree);
}

TEST(DeviceKnowledgeRules, AmdInstinctPeersUnderATranslatingIommuAreHostStaged) {
  // MI25: an Instinct part without xGMI, so no hive can carry the traffic instead.
  auto d = decide(pair_of(0x1002, 0x6860, 0x6860, false, "translated"), "03:00.0", "04:00.0");
  EXPECT_EQ(d.decision.rule, "amdgpu-peer-through-translating-iommu");
  EXPECT_EQ(d.decision.action, policy::Action::kHostStaged);
  EXPECT_NE(d.decision.remedy.find("iommu=pt"), std::string::npos);
  // Passed through, the kernel's verdict stands.
  auto passed = decide(pair_of(0x1002, 0x6860, 0x6860, false, "passthrough"), "03:00.0", "04:00.0");
  EXPECT_EQ(passed.decision.action, policy::Action::kPeer) << passed.decision.rule << ": " << passed.decision.reason;
  // Radeon parts too (AMD's Radeon multi-GPU guide: applications hang with the IOMMU translating).
  auto radeon = decide(pair_of(0x1002, 0x744c, 0x744c, false, "translated"), "03:00.0", "04:00.0");
  EXPECT_EQ(radeon.decision.rule, "amdgpu-peer-through-translating-iommu");
  EXPECT_TRUE(radeon.decision.certain());
  // An ID the table does not hold: whether it has an xGMI link is unknown, so the rule is open.
  auto unknown = decide(pair_of(0x1002, 0x1234, 0x1234, false, "translated"), "03:00.0", "04:00.0");
  EXPECT_TRUE(has(unknown.decision.undecided_rules, "amdgpu-peer-through-translating-iommu"));
  EXPECT_FALSE(unknown.decision.certain());
  // MI210 has xGMI: whether a hive joins them is the runtime's to say; once it says no, the rule holds.
  auto mi210 = decide(pair_of(0x1002, 0x740f, 0x740f, false, "translated"), "03:00.0", "04:00.0");
  EXPECT_TRUE(has(mi210.decision.undecided_rules, "amdgpu-peer-through-translating-iommu"));
  policy::VendorFactsDocument no_hive;
  no_hive.pairs[{*Bdf::parse("0000:03:00.0"), *Bdf::parse("0000:04:00.0")}].set("vendor.xgmi", false);
  EXPECT_EQ(decide(pair_of(0x1002, 0x740f, 0x740f, false, "translated"), "03:00.0", "04:00.0", &no_hive).decision.rule,
            "amdgpu-peer-through-translating-iommu");
}

TEST(DeviceKnowledgeRules, NvidiaAnswersArePredictedWithoutARuntime) {
  // L40S below a PLX switch, bare metal: the driver's common-switch path approves one chip.
  auto l40s = decide(pair_of(0x10de, 0x26b9, 0x26b9, true, "passthrough"), "03:00.0", "04:00.0");
  EXPECT_EQ(l40s.decision.rule, "nvidia-common-switch-peer-predicted");
  EXPECT_EQ(l40s.decision.action, policy::Action::kPeer);
  EXPECT_NE(l40s.decision.reason.find("predicted"), std::string::npos);
  EXPECT_EQ(std::get<bool>(*l40s.facts.get("vendor.nvlink")), false);  // L40S has no NVLink
  EXPECT_EQ(std::get<bool>(*l40s.facts.get("path.same_chip")), true);
  // The same GPUs on two root ports: no recognised switch, the firmware's chipset table decides.
  EXPECT_EQ(decide(pair_of(0x10de, 0x26b9, 0x26b9, false, "passthrough"), "03:00.0", "04:00.0").decision.rule,
            "nvidia-driver-unknown");
  // GeForce RTX 4090 below the same switch: the driver refuses PCIe peers on the line.
  auto geforce = decide(pair_of(0x10de, 0x2684, 0x2684, true, "passthrough"), "03:00.0", "04:00.0");
  EXPECT_EQ(geforce.decision.rule, "nvidia-geforce-pcie-peer-refused");
  EXPECT_EQ(geforce.decision.action, policy::Action::kHostStaged);
  // L40S (AD102) with L4 (AD104): different chips are refused before the firmware is asked.
  auto chips = decide(pair_of(0x10de, 0x26b9, 0x27b8, true, "passthrough"), "03:00.0", "04:00.0");
  EXPECT_EQ(chips.decision.rule, "nvidia-pcie-peer-between-chips-refused");
  EXPECT_EQ(std::get<bool>(*chips.facts.get("path.same_chip")), false);
  // RTX 4090 with RTX 6000 Ada: one chip, but the GeForce part refuses.
  EXPECT_EQ(decide(pair_of(0x10de, 0x2684, 0x26b1, true, "passthrough"), "03:00.0", "04:00.0").decision.rule,
            "nvidia-geforce-pcie-peer-refused");
  // The driver's own answer outranks every prediction, and nvidia-driver-unknown is then no finding.
  policy::VendorFactsDocument yes;
  for (auto [p, c] : {std::pair{"0000:03:00.0", "0000:04:00.0"}, std::pair{"0000:04:00.0", "0000:03:00.0"}})
    yes.pairs[{*Bdf::parse(p), *Bdf::parse(c)}].set("vendor.peer_supported", true);
  auto asked = decide(pair_of(0x10de, 0x2684, 0x2684, true, "passthrough"), "03:00.0", "04:00.0", &yes);
  EXPECT_EQ(asked.decision.rule, "nvidia-driver-allows");
  EXPECT_FALSE(found(asked.decision.findings, "nvidia-driver-unknown"));
  EXPECT_FALSE(found(asked.decision.fired, "nvidia-driver-unknown"));
  EXPECT_FALSE(has(asked.decision.undecided_rules, "nvidia-driver-unknown"));
  // A runtime's NVLink answer is laid over the table's "no NVLink on this pair".
  policy::VendorFactsDocument link;
  link.pairs[{*Bdf::parse("0000:03:00.0"), *Bdf::parse("0000:04:00.0")}].set("vendor.nvlink", true);
  auto linked = decide(pair_of(0x10de, 0x26b9, 0x2330, true, "passthrough"), "03:00.0", "04:00.0", &link);
  EXPECT_EQ(std::get<bool>(*linked.facts.get("vendor.nvlink")), true);
  EXPECT_EQ(linked.decision.rule, "nvlink");
}

Tree vm_pair(uint16_t device, uint8_t clique) {
  Tree tree;
  tree.t.platform.hypervisor = true;
  tree.rp("00:02.0");
  tree.rp("00:03.0");
  const char* gpus[] = {"01:00.0", "02:00.0"};
  const char* ports[] = {"00:02.0", "00:03.0"};
  for (int i = 0; i < 2; ++i) {
    Function& g = tree.describe(tree.add(gpus[i], ports[i], 0x10de, device, PcieType::kEndpoint), 0x030000, "nvidia");
    g.nvidia_clique_state = CapState::kPresent;
    g.nvidia_clique = clique;
  }
  return tree;
}

TEST(DeviceKnowledgeRules, AGeForceCliqueInAVmIsHostStagedDespiteTheDriversYes) {
  policy::VendorFactsDocument yes;
  for (auto [p, c] : {std::pair{"0000:01:00.0", "0000:02:00.0"}, std::pair{"0000:02:00.0", "0000:01:00.0"}}) {
    auto& f = yes.pairs[{*Bdf::parse(p), *Bdf::parse(c)}];
    f.set("vendor.peer_supported", true);
    f.set("vendor.nvlink", false);
  }
  auto geforce = decide(vm_pair(0x2204, 1), "01:00.0", "02:00.0", &yes);
  EXPECT_EQ(geforce.decision.rule, "nvidia-vm-clique-on-geforce");
  EXPECT_EQ(geforce.decision.action, policy::Action::kHostStaged);
  // Unasked, too: the clique's predicted yes does not win either (RTX 4090: no NVLink by the table).
  EXPECT_EQ(decide(vm_pair(0x2684, 1), "01:00.0", "02:00.0").decision.rule, "nvidia-vm-clique-on-geforce");
  // Data-centre parts keep the clique's yes.
  EXPECT_EQ(decide(vm_pair(0x2330, 1), "01:00.0", "02:00.0", &yes).decision.rule, "nvidia-driver-allows");
  // A verified copy passes it.
  for (auto& [pair, f] : yes.pairs) f.set("vendor.copy_verified", true), f.set("vendor.copy_result", std::string("verified"));
  EXPECT_EQ(decide(vm_pair(0x2204, 1), "01:00.0", "02:00.0", &yes).decision.action, policy::Action::kPeer);
}

}  // namespace
}  // namespace p2paudit
