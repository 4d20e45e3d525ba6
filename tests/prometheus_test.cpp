// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit --format prom` (docs/prometheus.md): the output is the exposition format read strictly,
// and its gauges say what the policy, matrix, topology and whitelist JSON say on the same machine.
#include <gtest/gtest.h>
#include <gtest/gtest-spi.h>

#include <ctime>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>

#include "p2paudit/fleet/prometheus.h"
#include "test_support.h"

namespace p2paudit {
namespace {

using json = nlohmann::json;
using Labels = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  Labels labels;
  std::string value;
};

// The text format as node_exporter's parser takes it, strictly: # HELP and # TYPE once per metric
// and before its samples, a metric's samples together, label values quoted with only \\, \" and
// \n escapes, no label set twice. Failures are reported; the samples are returned.
std::vector<Sample> parse_exposition(const std::string& text) {
  static const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) \S.*)");
  static const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter|untyped))");
  static const std::regex name_re(R"([a-zA-Z_:][a-zA-Z0-9_:]*)");
  static const std::regex label_name(R"([a-zA-Z_][a-zA-Z0-9_]*)");
  static const std::regex value_re(R"(-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|NaN|[-+]Inf)");
  std::vector<Sample> samples;
  std::map<std::string, int> helps, types;
  std::set<std::string> finished, series;
  std::string current;
  EXPECT_TRUE(text.empty() || text.back() == '\n') << "the last line is not terminated";
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.starts_with("#")) {
      if (std::regex_match(line, m, help)) ++helps[m[1]];
      else if (std::regex_match(line, m, type)) ++types[m[1]];
      else ADD_FAILURE() << "comment that is neither HELP nor TYPE: " << line;
      continue;
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    EXPECT_TRUE(std::regex_match(s.name, name_re)) << line;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          ADD_FAILURE() << "label without =\"...\": " << line;
          return samples;
        }
        std::string label = line.substr(i, eq - i), value;
        EXPECT_TRUE(std::regex_match(label, label_name)) << line;
        for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] != '\\') {
            value += line[i];
            continue;
          }
          char next = i + 1 < line.size() ? line[++i] : '\0';
          if (next == 'n') value += '\n';
          else if (next == '\\' || next == '"') value += next;
          else ADD_FAILURE() << "escape \\" << next << " in " << line;
        }
        if (i >= line.size()) {
          ADD_FAILURE() << "unterminated label value: " << line;
          return samples;
        }
        EXPECT_TRUE(s.labels.emplace(label, value).second) << "label twice: " << line;
        ++i;  // the closing quote
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // the closing brace
    }
    EXPECT_TRUE(i < line.size() && line[i] == ' ') << line;
    s.value = i < line.size() ? line.substr(i + 1) : "";
    EXPECT_TRUE(std::regex_match(s.value, value_re)) << "value: " << line;
    EXPECT_EQ(helps[s.name], 1) << "HELP before " << line;
    EXPECT_EQ(types[s.name], 1) << "TYPE before " << line;
    if (s.name != current) {
      EXPECT_FALSE(finished.count(s.name)) << s.name << "'s samples are not together";
      finished.insert(current);
      current = s.name;
    }
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) key += "\x01" + k + "=" + v;
    EXPECT_TRUE(series.insert(key).second) << "the same series twice: " << line;
    samples.push_back(std::move(s));
  }
  for (const auto& [name, n] : helps) EXPECT_EQ(n, 1) << "HELP of " << name;
  for (const auto& [name, n] : types) EXPECT_EQ(n, 1) << "TYPE of " << name;
  return samples;
}

std::vector<Sample> of(const std::vector<Sample>& samples, const std::string& name) {
  std::vector<Sample> out;
  for (const auto& s : samples)
    if (s.name == name) out.push_back(s);
  return out;
}

std::string text_of(const json& j) { return j.is_string() ? j.get<std::string>() : ""; }

std::string tool(const std::string& args) {
  return test::run_command(std::string(P2PAUDIT_TOOL) + " " + args + " 2>/dev/null").output;
}

TEST(Prometheus, LabelValuesAreEscapedAsTheExpositionFormatSays) {
  EXPECT_EQ(fleet::prometheus_label_value("plain 0000:00:01.0"), "plain 0000:00:01.0");
  EXPECT_EQ(fleet::prometheus_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  // Bytes that are not UTF-8 are shown as \xNN first, and that backslash is escaped in turn.
  EXPECT_EQ(fleet::prometheus_label_value("x\xffy"), "x\\\\xffy");
  EXPECT_EQ(fleet::prometheus_label_value("tab\tand \x01"), "tab\tand \\\\x01");
  auto parsed = parse_exposition("# HELP m h\n# TYPE m gauge\nm{l=\"" + fleet::prometheus_label_value("a\"b\\c\nd") +
                                 "\"} 1\n");
  ASSERT_EQ(parsed.size(), 1u);
  EXPECT_EQ(parsed[0].labels["l"], "a\"b\\c\nd");
}

// The strict reader rejects what the format forbids, so the checks below can fail.
TEST(Prometheus, TheReaderRefusesBrokenExposition) {
  for (const char* broken : {"m 1\n", "# HELP m h\n# TYPE m gauge\nm{l=\"a\\tb\"} 1\n",
                             "# HELP m h\n# TYPE m gauge\nm{l=\"unterminated} 1\n", "# HELP m h\n# TYPE m gauge\nm one\n",
                             "# HELP m h\n# TYPE m gauge\nm 1\nm 1\n"}) {
    ::testing::TestPartResultArray failures;
    {
      ::testing::ScopedFakeTestPartResultReporter reporter(::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
      parse_exposition(broken);
    }
    EXPECT_GT(failures.size(), 0) << broken;
  }
}

class PrometheusOnMachine : public ::testing::TestWithParam<std::string> {};

TEST_P(PrometheusOnMachine, GaugesMatchTheJsonOfTheSameMachine) {
  const std::string machine = "--sysroot " + test::shell_quote(test::data_path(GetParam())) + " ";
  std::time_t before = std::time(nullptr);
  auto prom = test::run_command(std::string(P2PAUDIT_TOOL) + " " + machine + "--format prom 2>/dev/null");
  std::time_t after = std::time(nullptr);
  ASSERT_EQ(prom.status, 0);
  auto samples = parse_exposition(prom.output);
  for (const auto& s : samples) EXPECT_TRUE(s.name.starts_with("p2paudit_")) << s.name;

  auto info = of(samples, "p2paudit_info");
  ASSERT_EQ(info.size(), 1u);
  EXPECT_NE(tool("--version").find(info[0].labels["version"]), std::string::npos);
  json topology = json::parse(tool(machine + "topology --format json"));
  json policy = json::parse(tool(machine + "policy --format json"));
  EXPECT_EQ(info[0].labels["kernel_release"], policy["kernel"]["release"]);
  auto stamp = of(samples, "p2paudit_last_run_timestamp_seconds");
  ASSERT_EQ(stamp.size(), 1u);
  EXPECT_GE(std::stoll(stamp[0].value), before);
  EXPECT_LE(std::stoll(stamp[0].value), after);
  ASSERT_EQ(of(samples, "p2paudit_audit_success").size(), 1u);

  // One decision gauge per ordered pair of distinct devices, as the policy decided it.
  std::map<std::string, std::string> names;
  for (const auto& d : policy["devices"]) names[d["bdf"]] = d["name"];
  std::map<std::pair<std::string, std::string>, Labels> decisions;
  for (const auto& s : of(samples, "p2paudit_pair_decision")) {
    EXPECT_EQ(s.value, "1");
    EXPECT_TRUE(decisions.emplace(std::pair{s.labels.at("provider"), s.labels.at("client")}, s.labels).second);
  }
  std::map<std::string, int> per_decision;
  for (const auto& p : policy["pairs"]) {
    if (p["provider"] == p["client"]) continue;
    auto it = decisions.find({p["provider"], p["client"]});
    ASSERT_NE(it, decisions.end()) << p.dump();
    EXPECT_EQ(it->second["decision"], p["decision"]);
    EXPECT_EQ(it->second["rule"], text_of(p["rule"]));
    EXPECT_EQ(it->second["authority"], text_of(p["authority"]));
    EXPECT_EQ(it->second["provider_name"], names[p["provider"]]);
    EXPECT_EQ(it->second["client_name"], names[p["client"]]);
    ++per_decision[p["decision"]];
    decisions.erase(it);
  }
  EXPECT_TRUE(decisions.empty()) << decisions.size() << " decision gauges the policy does not have";
  auto counts = of(samples, "p2paudit_pairs");
  EXPECT_EQ(counts.size(), 3u);  // peer, host_staged, deny: a zero is written, not left out
  for (const auto& s : counts) EXPECT_EQ(std::stoi(s.value), per_decision[s.labels.at("decision")]) << s.labels.at("decision");

  // The kernel's verdict per pair, with the matrix's map type.
  json matrix = json::parse(tool(machine + "matrix --format json"));
  std::map<std::pair<std::string, std::string>, std::string> map_types;
  for (const auto& p : matrix["pairs"])
    if (p["provider"] != p["client"]) map_types[{p["provider"], p["client"]}] = p["map_type"];
  auto verdicts = of(samples, "p2paudit_pair_kernel_verdict");
  EXPECT_EQ(verdicts.size(), map_types.size());
  for (const auto& s : verdicts) {
    std::pair<std::string, std::string> pair{s.labels.at("provider"), s.labels.at("client")};
    EXPECT_EQ(s.labels.at("map_type"), map_types[pair]);
    EXPECT_EQ(s.labels.at("verdict") == "refused", s.labels.at("map_type") == "NOT_SUPPORTED");
  }

  // ACS redirect: exactly the functions whose ACS Control has RR, CR or EC set.
  std::map<std::string, std::string> redirecting;
  for (const auto& f : topology["functions"]) {
    if (f["acs"] != "present") continue;
    int ctrl = f["acs_ctrl"];
    std::string bits;
    for (auto [bit, name] : {std::pair{0x04, "RR"}, std::pair{0x08, "CR"}, std::pair{0x20, "EC"}})
      if (ctrl & bit) bits.append(bits.empty() ? "" : ",").append(name);
    if (!bits.empty()) redirecting[f["bdf"]] = bits;
  }
  std::map<std::string, std::string> gauged;
  for (const auto& s : of(samples, "p2paudit_acs_redirect")) gauged[s.labels.at("bdf")] = s.labels.at("bits");
  EXPECT_EQ(gauged, redirecting);

  // Whitelist candidates as `whitelist` lists them, valued by the pairs each would unlock.
  json whitelist = json::parse(tool(machine + "whitelist --format json"));
  std::map<std::string, std::pair<std::string, std::string>> expected, candidates;
  for (const auto& c : whitelist["candidates"])
    expected[c["id"]] = {c["status"], std::to_string(c["pairs"].size())};
  for (const auto& s : of(samples, "p2paudit_whitelist_candidate"))
    candidates[s.labels.at("id")] = {s.labels.at("status"), s.value};
  EXPECT_EQ(candidates, expected);
}

// Four GPUs and a NIC refused at a host bridge missing from the whitelist; ACS redirect on root
// ports; a whitelisted host bridge; no device pairs at all.
INSTANTIATE_TEST_SUITE_P(Fixtures, PrometheusOnMachine,
                         ::testing::Values("machines/h200x4-firecracker-vm/sysroot.tar.gz",
                                           "kernel-oracle/h-d1-rp-acs-rr-cr-mf-switch/sysroot.tar.gz",
                                           "kernel-oracle/h-g1-whitelist-q35/sysroot.tar.gz",
                                           "kernel-oracle/h-f6-sriov-nvme/sysroot.tar.gz"),
                         [](const auto& info) { return test::case_name(info.param); });

TEST(Prometheus, OnlyTheAuditWritesIt) {
  auto r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " +
                             test::shell_quote(test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz")) +
                             " policy --format prom 2>&1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--format prom"), std::string::npos);
}

}  // namespace
}  // namespace p2paudit
