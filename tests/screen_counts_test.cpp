// SPDX-License-Identifier: GPL-2.0-or-later
// The audit's first screen counts every ordered pair through PolicyEvaluator::decide() (the memo,
// the index's outcome, the pair's fact values): its counts must equal those of deciding every pair
// in full (decide_in_full(): the whole verdict, every fact, the rules' texts). Compared on
// generated machines with SR-IOV VFs and ACS redirect set per port by seed (--acs mixed), with the
// audit's devices and with every function: per action (the grouped grid's cells), per note's
// action and rule, and per warning.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <regex>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "kernel_eras.h"
#include "synth.h"
#include "temp_dir.h"
#include "test_support.h"

namespace p2paudit {
namespace {

using policy::Action;

struct Tally {
  std::map<char, size_t> by_action;                  // 'P', 'H', 'D'
  std::map<std::string, size_t> by_note;             // "HOST by rule-id"
  std::map<std::string, size_t> by_warning;          // warn rule id
  bool operator==(const Tally&) const = default;
};

char action_letter(Action a) { return a == Action::kPeer ? 'P' : a == Action::kDeny ? 'D' : 'H'; }
const char* action_code(Action a) { return a == Action::kPeer ? "PEER" : a == Action::kDeny ? "DENY" : "HOST"; }

// Every ordered pair decided in full, counted as the screen counts it.
Tally tally_in_full(policy::PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices) {
  Tally t;
  for (const auto& p : devices)
    for (const auto& c : devices) {
      if (p.index == c.index) continue;
      const policy::Decision d = evaluator.decide_in_full(p.index, c.index).decision;
      // An uncertain decision is its own kind in the grid ("?") and its note says so ("HOST?").
      ++t.by_action[d.certain() ? action_letter(d.action) : '?'];
      ++t.by_note[fmt::format("{}{} by {}", action_code(d.action), d.certain() ? "" : "?", d.rule.empty() ? "no rule" : d.rule)];
      std::set<std::string> warned;  // a rule warns once per pair
      for (const auto& f : d.fired)
        if (f.action == Action::kWarn && warned.insert(f.id).second) ++t.by_warning[f.id];
    }
  return t;
}

// The same counts read back from the screen: the grouped grid's cells ("P12 H4"), each note's
// "[n] HOST by rule (authority): N pairs" and each warning's "(N pairs)" or "(every pair)".
Tally tally_of_screen(const std::string& screen, size_t pairs) {
  Tally t;
  std::istringstream in(screen);
  static const std::regex cell(R"((?:^| )([PHD?])(\d+)(?= |$))");
  static const std::regex note(R"(^\[\d+\] ((?:PEER|HOST|DENY)\??) by (\S+(?: rule)?)(?: \([^)]*\))?: (\d+) pairs?)");
  static const std::regex warning(R"(^warning \[([^\]]+)\]: .* \((?:(\d+) pairs|(every pair))\)$)");
  static const std::regex grid_row(R"(^G\d+  )");  // a row label, padded (the legend has one space)
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, grid_row))
      for (std::sregex_iterator it(line.begin(), line.end(), cell), end; it != end; ++it)
        t.by_action[(*it)[1].str()[0]] += std::stoul((*it)[2].str());
    if (std::regex_search(line, m, note)) t.by_note[m[1].str() + " by " + m[2].str()] += std::stoul(m[3].str());
    if (std::regex_match(line, m, warning)) t.by_warning[m[1].str()] += m[3].matched ? pairs : std::stoul(m[2].str());
  }
  return t;
}

// A generated machine: two switch levels, two-function endpoints, 8 VFs per NIC PF, ACS redirect
// per port by seed; read back from its tarball, with the kernel rules of 6.12.0.
struct GeneratedMachine {
  std::string tarball;
  Topology topo;
  KernelRules kernel;
};
GeneratedMachine generated_machine(const test::TempDir& dir, size_t functions, uint64_t seed) {
  const synth::Options options{.functions = functions, .host_bridges = {}, .root_ports = {}, .depth = 2, .fanout = 2,
                               .endpoints_per_port = {}, .multifunction = 2, .vfs = 8, .acs = synth::AcsMode::kMixed,
                               .seed = seed};
  GeneratedMachine m;
  m.tarball = (dir.path() / fmt::format("machine-{}-{}.tar.gz", functions, seed)).string();
  synth::Machine::plan(options).write_tarball(m.tarball);
  m.topo = read_topology(Sysroot::open(m.tarball));
  m.kernel = test::rules_for(m.topo, "6.12.0");
  return m;
}

TEST(ScreenCounts, EqualDecidingEveryPairInFull) {
  static const policy::RuleSet rules =
      policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  test::TempDir dir;
  size_t machines = 0, pairs_checked = 0;
  for (uint64_t seed : {1u, 7u}) {
    const GeneratedMachine m = generated_machine(dir, 200, seed);
    const std::string& tarball = m.tarball;
    const Topology& t = m.topo;
    const KernelRules& kernel = m.kernel;
    for (bool all : {false, true}) {
      auto devices = matrix_devices(t, all);
      ASSERT_GE(devices.size(), 8u) << tarball;
      const size_t pairs = devices.size() * (devices.size() - 1);
      policy::PolicyEvaluator screen_evaluator(t, kernel, rules, nullptr);
      std::ostringstream out;
      // Every note and warning told, each line wide enough to keep its count; a grouped grid.
      policy::write_decision_screen(out, screen_evaluator, devices, {},
                                    {.width = 400, .max_columns = 4, .max_groups = 8, .max_notes = 1000, .max_warnings = 1000});
      policy::PolicyEvaluator full_evaluator(t, kernel, rules, nullptr);
      const Tally expected = tally_in_full(full_evaluator, devices);
      const Tally told = tally_of_screen(out.str(), pairs);
      size_t counted = 0;
      for (const auto& [letter, n] : told.by_action) counted += n;
      EXPECT_EQ(counted, pairs) << tarball << (all ? " --all" : "") << "\n" << out.str();
      EXPECT_EQ(told.by_action, expected.by_action) << tarball << (all ? " --all" : "");
      EXPECT_EQ(told.by_note, expected.by_note) << tarball << (all ? " --all" : "") << "\n" << out.str();
      EXPECT_EQ(told.by_warning, expected.by_warning) << tarball << (all ? " --all" : "") << "\n" << out.str();
      EXPECT_GT(expected.by_note.size(), 2u);  // the machine gives several decisions to tell apart
      pairs_checked += pairs;
      ++machines;
    }
  }
  EXPECT_EQ(machines, 4u);
  EXPECT_GT(pairs_checked, 10000u);
}

// decide_all_pairs() works out the pairs' keys on a second core, two blocks of rows at a time: the
// groups it hands out, in order, and their counts are decide()'s one pair at a time.
TEST(ScreenCounts, AllPairsOnTwoCoresDecideAsOneAtATime) {
  static const policy::RuleSet rules =
      policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  test::TempDir dir;
  for (uint64_t seed : {3u, 11u}) {
    const GeneratedMachine m = generated_machine(dir, 300, seed);
    const std::string& tarball = m.tarball;
    const Topology& t = m.topo;
    const KernelRules& kernel = m.kernel;
    std::vector<size_t> devices;
    for (const auto& d : matrix_devices(t, true)) devices.push_back(d.index);
    // More pairs than two blocks, so that the rows are shared between the cores.
    ASSERT_GT(devices.size() * devices.size(), 4 * 8192u) << tarball;
    policy::PolicyEvaluator one_at_a_time(t, kernel, rules, nullptr), shared(t, kernel, rules, nullptr);
    std::vector<size_t> expected, got;
    std::vector<std::pair<size_t, size_t>> order;
    for (size_t r = 0; r < devices.size(); ++r)
      for (size_t c = 0; c < devices.size(); ++c)
        if (r != c) expected.push_back(one_at_a_time.decide(devices[r], devices[c]));
    shared.decide_all_pairs(devices, [&](size_t r, size_t c, size_t group) {
      order.emplace_back(r, c);
      got.push_back(group);
    });
    ASSERT_EQ(got.size(), expected.size()) << tarball;
    EXPECT_EQ(got, expected) << tarball;
    for (size_t i = 1; i < order.size(); ++i) ASSERT_LT(order[i - 1], order[i]) << tarball;  // row order
    ASSERT_EQ(shared.groups().size(), one_at_a_time.groups().size()) << tarball;
    for (size_t g = 0; g < shared.groups().size(); ++g) {
      EXPECT_EQ(shared.groups()[g].pairs, one_at_a_time.groups()[g].pairs) << tarball << " group " << g;
      EXPECT_EQ(shared.groups()[g].example, one_at_a_time.groups()[g].example) << tarball << " group " << g;
      EXPECT_EQ(shared.groups()[g].rule, one_at_a_time.groups()[g].rule) << tarball << " group " << g;
    }
    EXPECT_GT(shared.groups().size(), 2u) << tarball;
  }
}

}  // namespace
}  // namespace p2paudit
