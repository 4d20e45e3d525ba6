// SPDX-License-Identifier: GPL-2.0-or-later
// Every ordered pair of every kernel-oracle case (QEMU machines under a real 6.1.192 kernel, see
// data/kernel-oracle/SOURCE.md) must get the kernel's own answer: map type, distance,
// pci_p2pdma_distance_many() and the verbose log lines byte for byte.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <sstream>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"

#include "oracle_cases.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;

const fs::path kOracleDir = test::oracle_dir();

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct Expected {
  std::string map;
  int dist = 0;
  int distance_many = 0;
  std::vector<std::string> log;
  std::optional<int> verbose_ret;
};

// "P2P <provider> <client> map=<type> dist=<n> distance_many=<ret>"
std::vector<std::pair<std::string, std::string>> read_verdicts(const fs::path& p,
                                                               std::map<std::string, Expected>& expected) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& line : read_lines(p)) {
    std::istringstream in(line);
    std::string tag, provider, client, map, dist, many;
    in >> tag >> provider >> client >> map >> dist >> many;
    if (tag != "P2P") continue;
    Expected& e = expected[provider + " " + client];
    e.map = map.substr(4);
    e.dist = std::stoi(dist.substr(5));
    e.distance_many = std::stoi(many.substr(14));
    pairs.emplace_back(provider, client);
  }
  return pairs;
}

// The lines between "p2poracle: pair P C verbose-begin" and "... verbose-end ret=N", timestamps cut.
void read_verbose_logs(const fs::path& p, std::map<std::string, Expected>& expected) {
  const std::string begin = "p2poracle: pair ";
  Expected* current = nullptr;
  for (const auto& raw : read_lines(p)) {
    std::string line = raw;
    if (line.starts_with("[")) line = line.substr(line.find("] ") + 2);
    auto at = line.find(begin);
    if (at == std::string::npos) {
      if (current) current->log.push_back(line);
      continue;
    }
    std::istringstream in(line.substr(at + begin.size()));
    std::string provider, client, what;
    in >> provider >> client >> what;
    if (what == "verbose-begin") {
      current = &expected[provider + " " + client];
    } else if (what.starts_with("verbose-end") && current) {
      std::string ret;
      in >> ret;
      current->verbose_ret = std::stoi(ret.substr(4));
      current = nullptr;
    }
  }
}

class KernelOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(KernelOracle, EveryPairMatchesTheKernel) {
  const std::string name = GetParam();
  const fs::path dir = kOracleDir / name;
  auto meta = test::read_oracle_meta(name);
  Sysroot root = Sysroot::open((dir / "sysroot.tar.gz").string());
  Topology topo = read_topology(root);

  KernelRules rules = load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo.platform, {});
  ASSERT_EQ(rules.release.version(), meta["kernel_release"]) << name;

  // meta's whitelist= is the table the kernel used: ours first, then the case's extra entries.
  std::istringstream wl(meta["whitelist"]);
  std::vector<std::string> kernel_table;
  for (std::string item; wl >> item;) kernel_table.push_back(item);
  ASSERT_GE(kernel_table.size(), rules.table_entries) << name;
  for (size_t i = 0; i < rules.table_entries; ++i)
    EXPECT_EQ(kernel_table[i], fmt::format("{}/flags={}", rules.whitelist[i].id(), rules.whitelist[i].same_host_bridge ? 1 : 0))
        << name << ": whitelist entry " << i;
  KernelRuleOptions options;
  EXPECT_EQ(meta["extra_whitelist_used"] == "yes", kernel_table.size() > rules.table_entries) << name;
  for (size_t i = rules.table_entries; i < kernel_table.size(); ++i) {
    const std::string& item = kernel_table[i];  // "VVVV:DDDD/flags=N"
    options.assume_whitelisted.push_back(item.substr(0, 9) + (item.ends_with("flags=1") ? ":same-host-bridge" : ""));
  }
  rules = load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo.platform, options);
  EXPECT_EQ(cpu_supports_p2pdma(topo.platform, rules), meta["cpu_supports_p2pdma"] == "1") << name;

  std::map<std::string, Expected> expected;
  auto pairs = read_verdicts(dir / "verdicts.txt", expected);
  read_verbose_logs(dir / "dmesg.txt", expected);
  ASSERT_EQ(pairs.size(), static_cast<size_t>(std::stoi(meta["pairs"]))) << name;

  size_t agree = 0;
  for (const auto& [p, c] : pairs) {
    const Expected& e = expected[p + " " + c];
    const std::string what = name + " pair " + p + " -> " + c;
    auto provider = topo.index_of(*Bdf::parse(p));
    auto client = topo.index_of(*Bdf::parse(c));
    if (!provider || !client) {
      ADD_FAILURE() << what << ": function missing from the topology";
      continue;
    }
    PairVerdict v = pci_p2pdma_distance(topo, rules, *provider, *client);
    ASSERT_TRUE(e.verbose_ret) << what << ": no verbose markers in dmesg.txt";
    bool ok = true;
    auto check = [&](bool same) { ok = ok && same; return same; };
    EXPECT_TRUE(check(to_string(v.map_type) == e.map)) << what << ": map " << to_string(v.map_type) << " vs " << e.map;
    EXPECT_TRUE(check(v.distance == e.dist)) << what << ": distance " << v.distance << " vs " << e.dist;
    EXPECT_TRUE(check(v.p2pdma_distance == e.distance_many))
        << what << ": distance_many " << v.p2pdma_distance.value_or(-999) << " vs " << e.distance_many;
    EXPECT_TRUE(check(v.p2pdma_distance == e.verbose_ret)) << what << ": verbose ret";
    EXPECT_TRUE(check(v.kernel_log == e.log))
        << what << ": log\n  ours:\n    " << fmt::format("{}", fmt::join(v.kernel_log, "\n    "))
        << "\n  kernel:\n    " << fmt::format("{}", fmt::join(e.log, "\n    "));
    EXPECT_TRUE(check(v.kernel_log_complete)) << what;
    agree += ok;
  }
  RecordProperty("pairs", static_cast<int>(pairs.size()));
  RecordProperty("pairs_agreeing", static_cast<int>(agree));
  std::cout << "[ oracle   ] " << name << ": " << agree << "/" << pairs.size() << " pairs agree\n";
}

INSTANTIATE_TEST_SUITE_P(Cases, KernelOracle, ::testing::ValuesIn(test::oracle_cases()), test::oracle_param_name);

}  // namespace
}  // namespace p2paudit
