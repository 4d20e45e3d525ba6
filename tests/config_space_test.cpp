// SPDX-License-Identifier: GPL-2.0-or-later
// Config-space decoding on real bytes: pciutils' own dumps, decoded by us through libpci and
// independently by `lspci -F DUMP -vvv` (pciutils' ls-caps.c / ls-ecaps.c), must agree.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>

#include "p2paudit/config_space.h"
#include "p2paudit/errors.h"
#include "test_support.h"

namespace p2paudit {
namespace {

struct LspciFacts {
  std::optional<PcieType> pcie_type;
  std::optional<uint16_t> acs_ctrl;
  std::optional<std::string> serial;
  std::optional<std::pair<int, int>> vfs;  // total, number
  std::vector<std::string> rebar_current;  // "256MB" per resizable BAR entry
};

PcieType type_from_lspci(const std::string& s) {
  static const std::map<std::string, PcieType> kTypes = {
      {"Endpoint", PcieType::kEndpoint},
      {"Legacy Endpoint", PcieType::kLegacyEndpoint},
      {"Root Port", PcieType::kRootPort},
      {"Upstream Port", PcieType::kSwitchUpstream},
      {"Downstream Port", PcieType::kSwitchDownstream},
      {"PCI-Express to PCI/PCI-X Bridge", PcieType::kPcieToPciBridge},
      {"PCI/PCI-X to PCI-Express Bridge", PcieType::kPciToPcieBridge},
      {"Root Complex Integrated Endpoint", PcieType::kRcIntegratedEndpoint},
      {"Root Complex Event Collector", PcieType::kRcEventCollector}};
  auto it = kTypes.find(s);
  return it == kTypes.end() ? PcieType::kOther : it->second;
}

std::map<std::string, LspciFacts> lspci_facts(const std::string& dump) {
  auto r = test::run_command("lspci -F " + test::shell_quote(dump) + " -vvv -D 2>/dev/null");
  EXPECT_EQ(r.status, 0) << "lspci failed on " << dump;
  std::map<std::string, LspciFacts> out;
  static const std::regex kHeader(R"(^([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) )");
  static const std::regex kExpress(R"(Express \(v\d\) ([A-Za-z /-]+?)( \(Slot[+-]\))?(, MSI [0-9a-f]+)?$)");
  static const std::regex kSerial(R"(Device Serial Number ([0-9a-f-]+))");
  static const std::regex kVfs(R"(Total VFs: (\d+), Number of VFs: (\d+))");
  static const std::regex kRebar(R"(BAR \d+: current size: (\S+?),)");
  std::istringstream in(r.output);
  LspciFacts* cur = nullptr;
  bool in_acs = false;
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, kHeader)) {
      cur = &out[m[1]];
      continue;
    }
    if (!cur) continue;
    if (line.find("Capabilities: [") != std::string::npos) in_acs = line.find("Access Control Services") != std::string::npos;
    if (line.find("Capabilities: [") != std::string::npos && std::regex_search(line, m, kExpress))
      cur->pcie_type = type_from_lspci(m[1]);
    if (std::regex_search(line, m, kSerial)) cur->serial = m[1];
    if (std::regex_search(line, m, kVfs)) cur->vfs = {std::stoi(m[1]), std::stoi(m[2])};
    if (std::regex_search(line, m, kRebar)) cur->rebar_current.push_back(m[1]);
    if (in_acs && line.find("ACSCtl:") != std::string::npos) {
      uint16_t ctrl = 0;
      const std::pair<const char*, uint16_t> kBits[] = {{"SrcValid+", kAcsSv}, {"TransBlk+", kAcsTb},
                                                          {"ReqRedir+", kAcsRr}, {"CmpltRedir+", kAcsCr},
                                                          {"UpstreamFwd+", kAcsUf}, {"EgressCtrl+", kAcsEc},
                                                          {"DirectTrans+", kAcsDt}};
      for (const auto& [flag, bit] : kBits)
        if (line.find(flag) != std::string::npos) ctrl |= bit;
      cur->acs_ctrl = ctrl;
    }
  }
  return out;
}

std::string size_name(uint64_t bytes) {
  const char* units[] = {"MB", "GB", "TB"};
  uint64_t v = bytes >> 20;
  int u = 0;
  while (v >= 1024 && u < 2) v >>= 10, ++u;
  return std::to_string(v) + units[u];
}

std::string serial_name(uint64_t serial) {
  std::string out;
  for (int b = 7; b >= 0; --b) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>((serial >> (8 * b)) & 0xff));
    out += std::string(out.empty() ? "" : "-") + buf;
  }
  return out;
}

std::vector<std::string> dump_files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(test::data_path("lspci-dumps")))
    if (e.is_regular_file() && e.path().extension() != ".md") out.push_back(e.path().string());  // pasted/: dump_topology_test
  std::sort(out.begin(), out.end());
  return out;
}

class DumpDecode : public ::testing::TestWithParam<std::string> {};

TEST_P(DumpDecode, AgreesWithLspci) {
  std::vector<Finding> findings;
  auto functions = read_config_dump(GetParam(), findings);
  auto facts = lspci_facts(GetParam());
  ASSERT_FALSE(functions.empty());
  ASSERT_EQ(functions.size(), facts.size());
  for (const auto& f : functions) {
    SCOPED_TRACE(f.bdf.str());
    ASSERT_TRUE(facts.count(f.bdf.str()));
    const LspciFacts& want = facts[f.bdf.str()];
    if (want.pcie_type) {
      EXPECT_EQ(f.pcie_type, *want.pcie_type);
    } else if (f.config_readable >= 256) {
      EXPECT_EQ(f.pcie_type, PcieType::kNotPcie);
    }
    bool malformed = false;
    for (const auto& finding : findings) malformed |= finding.message.find("malformed") != std::string::npos;
    if (want.acs_ctrl && !malformed) {
      ASSERT_EQ(f.acs.state, CapState::kPresent);
      EXPECT_EQ(f.acs.ctrl & 0x7f, *want.acs_ctrl);
    }
    if (!want.acs_ctrl) {
      EXPECT_NE(f.acs.state, CapState::kPresent);
    }
    if (want.serial) {
      ASSERT_TRUE(f.serial_number.has_value());
      EXPECT_EQ(serial_name(*f.serial_number), *want.serial);
    } else if (f.config_readable == 4096) {
      EXPECT_FALSE(f.serial_number.has_value());
    }
    if (want.vfs) {
      ASSERT_TRUE(f.sriov.has_value());
      EXPECT_EQ(f.sriov->total_vfs, want.vfs->first);
      EXPECT_EQ(f.sriov->num_vfs, want.vfs->second);
    }
    ASSERT_EQ(f.rebar.size(), want.rebar_current.size());
    for (size_t i = 0; i < f.rebar.size(); ++i) EXPECT_EQ(size_name(f.rebar[i].current_size), want.rebar_current[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(PciutilsDumps, DumpDecode, ::testing::ValuesIn(dump_files()),
                         [](const auto& info) {
                           std::string n = std::filesystem::path(info.param).filename().string();
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(DumpDecode, UnprivilegedLengthDumpLeavesAcsUnknown) {
  // `lspci -x` shows only the 64-byte header, as an unprivileged reader would see it.
  std::string dump = ::testing::TempDir() + "/short-dump";
  FILE* f = std::fopen(dump.c_str(), "w");
  std::fputs("00:01.0 PCI bridge: Intel Corporation Device 1901\n"
             "00: 86 80 01 19 07 04 10 00 07 00 04 06 10 00 81 00\n"
             "10: 00 00 00 00 00 00 00 00 00 01 01 00 f0 00 00 20\n"
             "20: 00 f0 00 f0 f1 ff 01 00 00 00 00 00 00 00 00 00\n"
             "30: 00 00 00 00 88 00 00 00 00 00 00 00 ff 01 10 00\n",
             f);
  std::fclose(f);
  std::vector<Finding> findings;
  auto fns = read_config_dump(dump, findings);
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(fns[0].config_readable, 64u);
  EXPECT_EQ(fns[0].acs.state, CapState::kUnknown);
  EXPECT_EQ(fns[0].pcie_type, PcieType::kUnknown);  // the capability list starts beyond 64 bytes
  EXPECT_EQ(fns[0].header_type, 1);
  EXPECT_EQ(fns[0].secondary_bus, 1);
}

// A 256-byte dump of an NVIDIA GPU whose only capability is the hypervisor's peer-clique
// capability at 0xc8: dword0 0x50000009 (vendor cap, next 0), dword1 0x00185032 ("P2P", clique 3).
std::string nvidia_dump(bool with_clique) {
  std::string dump = ::testing::TempDir() + (with_clique ? "/clique-dump" : "/no-clique-dump");
  std::vector<uint8_t> cfg(256, 0);
  const uint8_t header[] = {0xde, 0x10, 0x35, 0x23, 0x06, 0x00, 0x10, 0x00, 0xa1, 0x00, 0x02, 0x03};
  std::copy(std::begin(header), std::end(header), cfg.begin());
  if (with_clique) {
    cfg[0x34] = 0xc8;
    const uint8_t cap[] = {0x09, 0x00, 0x00, 0x50, 0x32, 0x50, 0x18, 0x00};
    std::copy(std::begin(cap), std::end(cap), cfg.begin() + 0xc8);
  } else {
    cfg[0x06] = 0x00;  // no capability list
  }
  FILE* f = std::fopen(dump.c_str(), "w");
  std::fputs("00:06.0 3D controller: NVIDIA Corporation Device 2335\n", f);
  for (size_t row = 0; row < cfg.size(); row += 16) {
    std::fprintf(f, "%02zx:", row);
    for (size_t i = 0; i < 16; ++i) std::fprintf(f, " %02x", cfg[row + i]);
    std::fputs("\n", f);
  }
  std::fclose(f);
  return dump;
}

TEST(DumpDecode, NvidiaPeerCliqueCapability) {
  std::vector<Finding> findings;
  auto with = read_config_dump(nvidia_dump(true), findings);
  ASSERT_EQ(with.size(), 1u);
  EXPECT_EQ(with[0].nvidia_clique_state, CapState::kPresent);
  EXPECT_EQ(with[0].nvidia_clique, 3);
  auto without = read_config_dump(nvidia_dump(false), findings);
  ASSERT_EQ(without.size(), 1u);
  EXPECT_EQ(without[0].nvidia_clique_state, CapState::kAbsent);
}

TEST(DumpDecode, MissingDumpIsAnInputError) {
  std::vector<Finding> findings;
  EXPECT_THROW(read_config_dump("/nonexistent/dump", findings), InputError);
}

// pci_find_ext_capability() on synthetic config space, for the cases the kernel's walk defines.
struct FakeConfig {
  std::map<int, uint32_t> dwords;
  static uint32_t read(const void* ctx, int pos) {
    const auto& d = static_cast<const FakeConfig*>(ctx)->dwords;
    auto it = d.find(pos);
    return it == d.end() ? 0xffffffff : it->second;
  }
};

uint32_t ext_header(int id, int next) { return static_cast<uint32_t>(id) | (1u << 16) | (static_cast<uint32_t>(next) << 20); }

TEST(FindExtCapability, FollowsTheChain) {
  FakeConfig c{{{0x100, ext_header(0x01, 0x140)}, {0x140, ext_header(0x0d, 0)}}};
  EXPECT_EQ(pci_find_ext_capability(&c, FakeConfig::read, 4096, 0x0d), 0x140);
  EXPECT_EQ(pci_find_ext_capability(&c, FakeConfig::read, 4096, 0x10), 0);
}

TEST(FindExtCapability, NoExtendedSpaceMeansNone) {
  FakeConfig c{{{0x100, ext_header(0x0d, 0)}}};
  EXPECT_EQ(pci_find_ext_capability(&c, FakeConfig::read, 256, 0x0d), 0);
}

TEST(FindExtCapability, ZeroHeaderMeansNone) {
  FakeConfig c{{{0x100, 0}}};
  EXPECT_EQ(pci_find_ext_capability(&c, FakeConfig::read, 4096, 0x0d), 0);
}

TEST(FindExtCapability, NextPointerIntoLegacySpaceStops) {
  // libpci would follow 0x40; the kernel stops, so ACS placed there is not seen by P2PDMA.
  FakeConfig c{{{0x100, ext_header(0x01, 0x40)}, {0x40, ext_header(0x0d, 0)}}};
  EXPECT_EQ(pci_find_ext_capability(&c, FakeConfig::read, 4096, 0x0d), 0);
}

TEST(FindExtCapability, LoopEndsAfterTtl) {
  FakeConfig c{{{0x100, ext_header(0x01, 0x100)}}};
  EXPECT_EQ(pci_find_ext_capability(&c, FakeConfig::read, 4096, 0x0d), 0);
}

}  // namespace
}  // namespace p2paudit
