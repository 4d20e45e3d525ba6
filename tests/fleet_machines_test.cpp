// SPDX-License-Identifier: GPL-2.0-or-later
// Issue 20 (fleets that name their machines, docs/fleet.md "Machines"): `aggregate` names the
// machines behind every candidate, refusal and rule, counts one machine given twice once (the
// other input listed as a duplicate), writes a wide CSV with one row per machine, and keeps the
// names through --partial / --merge, refusing a partial that names more machines than it counts.
// On the kernel-oracle captures (different trees: several machines) and their reports.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "temp_dir.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;
using test::write_file;
using json = nlohmann::json;
using test::shell_quote;

test::CommandResult tool(const std::string& args) {
  return test::run_command(test::tool_file() + " " + args + " 2>/dev/null");
}

// Four captures with different trees and whitelist candidates on several host-bridge IDs.
std::vector<std::string> captures() {
  return {test::data_path("kernel-oracle/h-a-two-rootports-intel/sysroot.tar.gz"),
          test::data_path("kernel-oracle/h-e1-pxb-rp-at-devfn0/sysroot.tar.gz"),
          test::data_path("kernel-oracle/h-e7-pxb-ioh3420-devfn0-whitelisted/sysroot.tar.gz"),
          test::data_path("kernel-oracle/h-b-two-rootports-epyc/sysroot.tar.gz")};
}

std::string quoted(const std::vector<std::string>& paths) {
  std::string out;
  for (const auto& p : paths) out += " " + shell_quote(p);
  return out;
}

json aggregate_json(const std::string& args) {
  auto r = tool("aggregate" + args + " --format json");
  EXPECT_EQ(r.status, 0) << args;
  return json::parse(r.output);
}

json report_of(const std::string& sysroot) {
  auto r = tool("--sysroot " + shell_quote(sysroot) + " report --no-probe");
  EXPECT_EQ(r.status, 0) << sysroot;
  return json::parse(r.output);
}

// The names of a finding's machine list.
std::set<std::string> names(const json& list) {
  std::set<std::string> out;
  for (const auto& m : list) out.insert(m["name"].get<std::string>());
  return out;
}

// What one input alone makes a candidate, refuses, and which rules decide its pairs.
struct Alone {
  std::set<std::string> candidates, refused, rules;
};
Alone alone(const std::string& input) {
  json j = aggregate_json(" " + shell_quote(input));
  Alone a;
  for (const auto& [id, s] : j["host_bridge_ids"].items()) {
    if (s["candidate_machines"].get<int>() > 0) a.candidates.insert(id);
    if (s["refused_pairs"].get<int>() > 0) a.refused.insert(id);
  }
  for (const auto& [rule, d] : j["decisions"].items()) a.rules.insert(rule);
  return a;
}

// The name the fleet gives the machine read from `input`.
std::string name_of(const json& fleet, const std::string& input) {
  for (const auto& m : fleet["machine_list"])
    if (m["input"] == input) return m["name"];
  ADD_FAILURE() << "no machine read from " << input;
  return "";
}

TEST(FleetMachines, DuplicateCountedOnceAndMachinesNamedBehindEachFinding) {
  TempDir dir;
  auto inputs = captures();
  std::string copy = (dir / "copy-of-first.tar.gz").string();
  fs::copy_file(inputs[0], copy);
  json fleet = aggregate_json(quoted(inputs) + " " + shell_quote(copy) + " --jobs 3");
  EXPECT_EQ(fleet["machines"], inputs.size());
  ASSERT_EQ(fleet["skipped"].size(), 1u) << fleet["skipped"].dump();
  EXPECT_EQ(fleet["skipped"][0]["input"], copy);
  EXPECT_NE(fleet["skipped"][0]["reason"].get<std::string>().find("the same machine as " + inputs[0]), std::string::npos)
      << fleet["skipped"][0]["reason"];
  ASSERT_EQ(fleet["machine_list"].size(), inputs.size());

  // Each machine is named behind exactly the findings it has alone.
  std::map<std::string, Alone> by_name;
  for (const auto& input : inputs) by_name[name_of(fleet, input)] = alone(input);
  EXPECT_EQ(by_name.size(), inputs.size());  // distinct names
  bool some_candidate = false;
  for (const auto& [id, s] : fleet["host_bridge_ids"].items()) {
    EXPECT_EQ(s["candidate_on"].size(), s["candidate_machines"].get<size_t>()) << id;
    auto candidate_on = names(s["candidate_on"]), refused_on = names(s["refused_on"]);
    for (const auto& [name, a] : by_name) {
      EXPECT_EQ(candidate_on.count(name), a.candidates.count(id)) << id << " " << name;
      EXPECT_EQ(refused_on.count(name), a.refused.count(id)) << id << " " << name;
    }
    some_candidate |= !candidate_on.empty();
  }
  EXPECT_TRUE(some_candidate);
  for (const auto& [rule, d] : fleet["decisions"].items())
    for (const auto& [name, a] : by_name) EXPECT_EQ(names(d["on"]).count(name), a.rules.count(rule)) << rule << " " << name;

  // The order of the inputs decides which of the two is counted, not --jobs.
  EXPECT_EQ(tool("aggregate" + quoted(inputs) + " " + shell_quote(copy) + " --format json --jobs 1").output,
            tool("aggregate" + quoted(inputs) + " " + shell_quote(copy) + " --format json --jobs 4").output);
}

TEST(FleetMachines, HostNamePlusDigestIsTheIdentity) {
  TempDir dir;
  auto inputs = captures();
  json a = report_of(inputs[0]), b = report_of(inputs[1]);
  ASSERT_NE(a["topology_digest"], b["topology_digest"]);
  a["machine"]["hostname"] = "node-a";
  json a_later = a;  // the same machine reported again, under another kernel
  a_later["kernel_rules"]["release"] = "6.12.9";
  b["machine"]["hostname"] = "node-a";  // the same host name on another tree: another machine
  json redacted = report_of(inputs[2]);
  redacted["machine"].erase("hostname");
  write_file(dir / "1-a.json", a.dump());
  write_file(dir / "2-b.json", b.dump());
  write_file(dir / "3-a-again.json", a_later.dump());
  write_file(dir / "4-redacted.json", redacted.dump());
  write_file(dir / "5-redacted-copy.json", redacted.dump());
  std::string d = " " + shell_quote((dir / "").string());
  json fleet = aggregate_json(d);
  EXPECT_EQ(fleet["machines"], 3);
  std::set<std::string> skipped;
  for (const auto& s : fleet["skipped"]) skipped.insert(fs::path(s["input"].get<std::string>()).filename());
  EXPECT_EQ(skipped, (std::set<std::string>{"3-a-again.json", "5-redacted-copy.json"}));
  // The first found was counted: its kernel, not the later one's.
  EXPECT_FALSE(fleet["kernels"].contains("6.12.9"));
  std::multiset<std::string> list;
  for (const auto& m : fleet["machine_list"]) list.insert(m["name"]);
  EXPECT_EQ(list.count("node-a"), 2u);
  // The redacted one is named by its input's own id.
  std::string redacted_name = name_of(fleet, (dir / "4-redacted.json").string());
  EXPECT_TRUE(redacted_name.starts_with("input:")) << redacted_name;
  // The text names them behind the findings.
  auto text = tool("aggregate" + d).output;
  EXPECT_NE(text.find("node-a"), std::string::npos) << text;
  EXPECT_NE(text.find("3 machine(s), 2 input(s) skipped"), std::string::npos) << text;
}

TEST(FleetMachines, TextCapsTheNamesJsonListsThemAll) {
  TempDir dir;
  json base = report_of(captures()[0]);
  const int kMachines = 20;
  for (int i = 0; i < kMachines; ++i) {
    json r = base;
    r["machine"]["hostname"] = "gpu-" + std::to_string(100 + i);
    write_file(dir / ("r" + std::to_string(i) + ".json"), r.dump());
  }
  std::string d = " " + shell_quote((dir / "").string());
  json fleet = aggregate_json(d);
  EXPECT_EQ(fleet["machines"], kMachines);
  EXPECT_EQ(fleet["machine_list"].size(), static_cast<size_t>(kMachines));
  bool listed = false;
  for (const auto& [id, s] : fleet["host_bridge_ids"].items())
    if (s["candidate_machines"].get<int>() > 0) {
      EXPECT_EQ(s["candidate_on"].size(), static_cast<size_t>(kMachines)) << id;
      listed = true;
    }
  EXPECT_TRUE(listed);
  auto text = tool("aggregate" + d).output;
  // Sorted, the first eight named, then a count of the rest.
  EXPECT_NE(text.find("candidate on: gpu-100, gpu-101, gpu-102, gpu-103, gpu-104, gpu-105, gpu-106, gpu-107 and " +
                      std::to_string(kMachines - 8) + " more\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("gpu-119"), std::string::npos);
}

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string cell;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (quoted) {
      if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"') cell += '"', ++i;
      else if (ch == '"') quoted = false;
      else cell += ch;
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      rows.back().push_back(cell), cell.clear();
    } else if (ch == '\n') {
      rows.back().push_back(cell), cell.clear();
      rows.emplace_back();
    } else {
      cell += ch;
    }
  }
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

TEST(FleetMachines, WideCsvHasOneRowPerMachine) {
  TempDir dir;
  auto inputs = captures();
  std::string copy = (dir / "copy.tar.gz").string();
  fs::copy_file(inputs[1], copy);
  std::string args = quoted(inputs) + " " + shell_quote(copy);
  json fleet = aggregate_json(args);
  auto r = tool("aggregate" + args + " --format csv-wide");
  ASSERT_EQ(r.status, 0);
  auto rows = parse_csv(r.output);
  ASSERT_EQ(rows.size(), 1 + fleet["machines"].get<size_t>()) << r.output;
  const auto& header = rows[0];
  ASSERT_GE(header.size(), 3u);
  EXPECT_EQ((std::vector<std::string>(header.begin(), header.begin() + 3)),
            (std::vector<std::string>{"machine", "topology_digest", "input"}));
  std::set<std::string> machines;
  size_t findings = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), header.size()) << i;
    const std::string& name = rows[i][0];
    EXPECT_TRUE(machines.insert(name).second) << name;
    for (size_t c = 3; c < header.size(); ++c) {
      const std::string& column = header[c];
      size_t colon = column.find(':');
      ASSERT_NE(colon, std::string::npos) << column;
      std::string kind = column.substr(0, colon), key = column.substr(colon + 1);
      const json* list = nullptr;
      if (kind == "candidate") list = &fleet["host_bridge_ids"][key]["candidate_on"];
      else if (kind == "refused_at") list = &fleet["host_bridge_ids"][key]["refused_on"];
      else if (kind == "corrupt_copy") list = &fleet["host_bridge_ids"][key]["corrupt_on"];
      else if (kind == "failed_copy") list = &fleet["host_bridge_ids"][key]["failed_on"];
      else if (kind == "rule") list = &fleet["decisions"][key]["on"];
      ASSERT_NE(list, nullptr) << column;
      EXPECT_EQ(rows[i][c] == "1", names(*list).count(name) == 1) << column << " " << name;
      EXPECT_TRUE(rows[i][c] == "1" || rows[i][c].empty());
      findings += rows[i][c] == "1";
    }
  }
  EXPECT_GT(findings, 0u);
}

TEST(FleetMachines, PartialRoundTripKeepsTheNames) {
  TempDir dir;
  auto in = captures();
  std::string p1 = (dir / "ab.json").string(), p2 = (dir / "cd.json").string();
  ASSERT_EQ(tool("aggregate" + quoted({in[0], in[1]}) + " --partial -o " + shell_quote(p1)).status, 0);
  ASSERT_EQ(tool("aggregate" + quoted({in[2], in[3]}) + " --partial -o " + shell_quote(p2)).status, 0);
  EXPECT_EQ(json::parse(read_file(p1))["machine_list"].size(), 2u);
  auto merged = tool("aggregate --merge " + shell_quote(p1) + " --merge " + shell_quote(p2) + " --format json");
  auto all = tool("aggregate" + quoted(in) + " --format json");
  ASSERT_EQ(merged.status, 0);
  EXPECT_EQ(merged.output, all.output);
  json j = json::parse(all.output);
  EXPECT_EQ(j["machine_list"].size(), in.size());
  EXPECT_EQ(tool("aggregate --merge " + shell_quote(p1) + " --merge " + shell_quote(p2)).output,
            tool("aggregate" + quoted(in)).output);

  // A partial naming a machine already counted is not merged: its counts cannot be split.
  json twice = aggregate_json(" --merge " + shell_quote(p1) + " --merge " + shell_quote(p1));
  EXPECT_EQ(twice["machines"], 2);
  ASSERT_EQ(twice["skipped"].size(), 1u);
  EXPECT_NE(twice["skipped"][0]["reason"].get<std::string>().find("cannot be split"), std::string::npos);
}

// A partial changed by `edit` is refused with --merge, naming the place.
void expect_refused(const json& partial, const std::function<void(json&)>& edit, const std::string& place) {
  TempDir dir;
  json bad = partial;
  edit(bad);
  std::string path = (dir / "bad.json").string();
  write_file(path, bad.dump());
  auto run = tool("aggregate --merge " + shell_quote(path) + " --format json");
  EXPECT_EQ(run.status, 2) << place;  // nothing could be read
  json r = json::parse(run.output);
  EXPECT_EQ(r["machines"], 0) << place;
  ASSERT_EQ(r["skipped"].size(), 1u) << place;
  EXPECT_NE(r["skipped"][0]["reason"].get<std::string>().find(place), std::string::npos) << r["skipped"][0]["reason"];
}

TEST(FleetMachines, PartialNamingMoreThanItCountsIsRefused) {
  TempDir dir;
  auto in = captures();
  std::string p = (dir / "p.json").string();
  ASSERT_EQ(tool("aggregate" + quoted({in[0], in[1]}) + " --partial -o " + shell_quote(p)).status, 0);
  json partial = json::parse(read_file(p));
  ASSERT_EQ(partial["machine_list"].size(), 2u);
  // As written, it reads back.
  EXPECT_EQ(aggregate_json(" --merge " + shell_quote(p))["machines"], 2);

  expect_refused(partial, [](json& j) {
    json extra = j["machine_list"][0];
    extra["name"] = "one-more";
    j["machine_list"].push_back(extra);
  }, "machine_list");
  expect_refused(partial, [](json& j) { j["machine_list"].push_back(j["machine_list"][0]); }, "machine_list");
  std::string id;
  for (const auto& [key, s] : partial["host_bridge_ids"].items())
    if (s["candidate_machines"].get<int>() > 0) id = key;
  ASSERT_FALSE(id.empty());
  // A candidate named on more machines than it is a candidate on, or on one machine_list lacks.
  expect_refused(partial, [&](json& j) {
    auto& on = j["host_bridge_ids"][id]["candidate_on"];
    for (const auto& m : j["machine_list"])
      if (on.size() <= j["host_bridge_ids"][id]["candidate_machines"].get<size_t>())
        on.push_back({{"name", m["name"]}, {"topology_digest", m["topology_digest"]}});
  }, "candidate_on");
  expect_refused(partial, [&](json& j) {
    j["host_bridge_ids"][id]["candidate_on"][0]["name"] = "nobody";
  }, "candidate_on[0]");
  expect_refused(partial, [&](json& j) {
    j["machine_list"][0]["name"] = std::string(300, 'x');
  }, "machine_list[0].name");
  expect_refused(partial, [&](json& j) { j["machine_list"][0]["topology_digest"] = "fnv1a64:XYZ"; },
                 "machine_list[0].topology_digest");
}

}  // namespace
}  // namespace p2paudit
