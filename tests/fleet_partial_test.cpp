// SPDX-License-Identifier: GPL-2.0-or-later
// Issue 18 (fleet inputs): a partial state (`aggregate --partial`) is read only where the user
// asks for one (`aggregate --merge FILE`), never because an input says it is one; what a partial
// claims is bounded by what reports could have made (machines, sums, pairs per machine); a report's
// candidates are checked the same way; and the one JSON reader stays linear.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/errors.h"
#include "p2paudit/fleet/aggregate.h"
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

test::CommandResult tool(const std::string& args, const std::string& stderr_file = "/dev/null") {
  return test::run_command(test::tool_file() + " " + args + " 2>" + shell_quote(stderr_file));
}

// Four captures with whitelist candidates on three host-bridge IDs.
const std::vector<std::string>& captures() {
  static const std::vector<std::string> names = {
      test::data_path("kernel-oracle/h-a-two-rootports-intel/sysroot.tar.gz"),
      test::data_path("kernel-oracle/h-e1-pxb-rp-at-devfn0/sysroot.tar.gz"),
      test::data_path("kernel-oracle/h-e7-pxb-ioh3420-devfn0-whitelisted/sysroot.tar.gz"),
      test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz")};
  return names;
}

std::string quoted(const std::vector<std::string>& paths) {
  std::string out;
  for (const auto& p : paths) {
    out += ' ';
    out += shell_quote(p);
  }
  return out;
}

json partial_of(const std::vector<std::string>& inputs) {
  auto r = tool("aggregate" + quoted(inputs) + " --partial");
  EXPECT_EQ(r.status, 0);
  return json::parse(r.output);
}

json report_of(const std::string& sysroot) {
  auto r = tool("--sysroot " + shell_quote(sysroot) + " report --no-probe");
  EXPECT_EQ(r.status, 0);
  return json::parse(r.output);
}

// The message a refused document gives ("" when it is counted); a refused one leaves the state as it was.
std::string refusal(const json& doc, bool partial) {
  fleet::AggregateState state;
  try {
    partial ? state.add_partial(doc, "p.json") : state.add_report(doc, "r.json");
  } catch (const InputError& e) {
    EXPECT_EQ(state.machines, 0u);
    EXPECT_TRUE(state.host_bridge_ids.empty());
    return e.what();
  }
  EXPECT_GT(state.machines, 0u);
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The first host-bridge ID that is a whitelist candidate somewhere in `partial`.
std::string candidate_id(const json& partial) {
  for (const auto& [id, s] : partial["host_bridge_ids"].items())
    if (s["candidate_machines"].get<std::uint64_t>() > 0) return id;
  ADD_FAILURE() << "no candidate in " << partial.dump();
  return "";
}

TEST(FleetPartial, MachineClaimsAreBounded) {
  // The smallest partial there is: N machines, all on one kernel.
  auto of = [](json machines) {
    return json{{"schema_version", 1}, {"kind", "p2paudit-aggregate-partial"}, {"tool_version", "x"},
                {"machines", machines}, {"host_bridge_ids", json::object()},
                {"kernels", {{"6.1", {{"machines", machines}, {"refused_pairs", 0}}}}},
                {"decisions", json::object()}, {"skipped", json::array()}};
  };
  EXPECT_EQ(refusal(of(fleet::kMaxPartialMachines), true), "");
  for (json claim : {json(std::uint64_t{1} << 48), json(fleet::kMaxPartialMachines + 1), json(-1), json(1.5),
                     json(std::numeric_limits<std::uint64_t>::max())}) {
    std::string e = refusal(of(claim), true);
    EXPECT_TRUE(contains(e, "p.json: machines: ")) << claim << ": " << e;
  }
}

TEST(FleetPartial, InconsistentCountsAreRefusedNamingTheField) {
  json honest = partial_of(captures());
  ASSERT_EQ(refusal(honest, true), "");
  std::string id = candidate_id(honest);
  ASSERT_FALSE(id.empty());
  std::string hb = "host_bridge_ids." + id;
  std::uint64_t machines = honest["machines"];
  std::string kernel = honest["kernels"].begin().key();
  std::string rule = honest["decisions"].begin().key();
  std::string cpu = honest["host_bridge_ids"][id]["cpu_models"].begin().key();

  struct Case {
    std::string field;  // where the message must point
    std::function<void(json&, json&)> change;  // (document, the candidate's entry)
  };
  std::vector<Case> cases = {
      {hb + ".machines", [&](json&, json& s) { s["machines"] = machines + 1; }},
      {hb + ".candidate_machines", [&](json&, json& s) { s["candidate_machines"] = s["machines"].get<std::uint64_t>() + 1; }},
      // Every candidate machine "fixed in", many times over: the status "fixed in" by one file.
      {hb + ".statuses", [&](json&, json& s) { s["statuses"]["fixed in"] = std::uint64_t{1} << 40; }},
      {hb + ".statuses", [&](json&, json& s) {
         s["statuses"] = {{"ready to submit", s["candidate_machines"]}};  // ready without a verified copy
       }},
      {hb + ".fixed_in", [&](json&, json& s) { s["fixed_in"]["6.2"] = 1; }},
      {hb + ".verified_copies", [&](json&, json& s) { s["verified_copies"] = s["unlockable_pairs"].get<std::uint64_t>() + 1; }},
      // Copies on pairs of no candidate machine: "ready to submit" once merged with a real candidate.
      {hb + ".unlockable_pairs", [&](json&, json& s) {
         s["candidate_machines"] = 0, s["statuses"] = json::object(), s["verified_copies"] = 1;
       }},
      {hb + ".refused_pairs", [&](json&, json& s) {
         s["refused_pairs"] = s["machines"].get<std::uint64_t>() * fleet::kMaxPairsPerMachine + 1;
       }},
      {hb + ".cpu_models", [&](json&, json& s) { s["cpu_models"][cpu] = s["cpu_models"][cpu].get<std::uint64_t>() + 1; }},
      {hb + ".kernels", [&](json&, json& s) { s["kernels"]["9.9-not-in-kernels"] = 0; }},
      {hb + ".statuses", [&](json&, json& s) { s["statuses"]["needs evidence"] = -1; }},
      {"kernels", [&](json& d, json&) { d["kernels"][kernel]["machines"] = d["kernels"][kernel]["machines"].get<std::uint64_t>() + 1; }},
      {"decisions." + rule + ".deny",
       [&](json& d, json&) { d["decisions"][rule]["deny"] = machines * fleet::kMaxPairsPerMachine + 1; }},
      {"decisions." + rule + ".peer", [&](json& d, json&) { d["decisions"][rule]["peer"] = 2.0; }},
  };
  for (const auto& c : cases) {
    json doc = honest;
    c.change(doc, doc["host_bridge_ids"][id]);
    std::string e = refusal(doc, true);
    EXPECT_TRUE(contains(e, "p.json: " + c.field)) << c.field << ": " << e;
  }
}

TEST(FleetPartial, ReportCandidatesAreCheckedTheSameWay) {
  json honest = report_of(captures()[0]);
  ASSERT_EQ(refusal(honest, false), "");
  ASSERT_FALSE(honest["candidates"].empty());
  struct Case {
    std::string field;
    std::function<void(json&)> change;
  };
  std::vector<Case> cases = {
      // The same host bridge listed twice: two statuses for one candidate machine.
      {"candidates[1].id", [](json& r) {
         json again = r["candidates"][0];
         again["status"] = "fixed in", again["fixed_in"] = "6.2";
         r["candidates"].push_back(again);
       }},
      {"candidates[0].fixed_in", [](json& r) { r["candidates"][0]["status"] = "fixed in"; }},
      {"candidates[0].fixed_in", [](json& r) { r["candidates"][0]["fixed_in"] = "6.2"; }},
      {"candidates[0].status", [](json& r) { r["candidates"][0]["status"] = "ready to submit"; }},
      {"candidates[0].status", [](json& r) { r["candidates"][0]["status"] = "rejected"; }},
      {"machine.cpu_family", [](json& r) { r["machine"]["cpu_family"] = std::numeric_limits<std::uint64_t>::max(); }},
  };
  for (const auto& c : cases) {
    json doc = honest;
    c.change(doc);
    std::string e = refusal(doc, false);
    EXPECT_TRUE(contains(e, "r.json: " + c.field)) << c.field << ": " << e;
  }
  // A verified copy makes the machine ready to submit: consistent, counted.
  json ready = honest;
  ready["candidates"][0]["status"] = "ready to submit";
  ready["candidates"][0]["pairs"][0]["copy_result"] = "verified";
  EXPECT_EQ(refusal(ready, false), "");
}

TEST(FleetPartial, APartialGivenAsAnOrdinaryInputIsRefusedByName) {
  TempDir dir;
  std::string partial = dir / "in/a.partial.json", report = dir / "in/r.json", err = dir / "err";
  write_file(partial, partial_of({captures()[0], captures()[1]}).dump());
  write_file(report, report_of(captures()[2]).dump());

  auto r = tool("aggregate " + shell_quote(partial) + " --format json", err);
  EXPECT_EQ(r.status, 2);  // nothing was read
  json j = json::parse(r.output);
  EXPECT_EQ(j["machines"], 0);
  ASSERT_EQ(j["skipped"].size(), 1u);
  EXPECT_EQ(j["skipped"][0]["input"], partial);
  EXPECT_TRUE(contains(j["skipped"][0]["reason"], "--merge")) << j["skipped"][0]["reason"];
  EXPECT_TRUE(contains(read_file(err), "skipped " + partial + ": ")) << read_file(err);

  // Beside a report, and found in a directory: the report counts, the partial is skipped.
  for (const std::string& inputs : {shell_quote(report) + " " + shell_quote(partial), shell_quote(dir / "in")}) {
    json both = json::parse(tool("aggregate " + inputs + " --format json").output);
    EXPECT_EQ(both["machines"], 1) << inputs;
    ASSERT_EQ(both["skipped"].size(), 1u) << inputs;
    EXPECT_EQ(both["skipped"][0]["input"], partial);
  }
  // And --merge takes only partials.
  auto wrong = tool("aggregate --merge " + shell_quote(report) + " --format json");
  EXPECT_EQ(wrong.status, 2);
  json w = json::parse(wrong.output);
  ASSERT_EQ(w["skipped"].size(), 1u);
  EXPECT_EQ(w["skipped"][0]["input"], report);
  EXPECT_TRUE(contains(w["skipped"][0]["reason"], "not an `aggregate --partial` output")) << w["skipped"][0]["reason"];
}

TEST(FleetPartial, MergedPartialsEqualOneRunOverTheOriginals) {
  TempDir dir;
  std::string a = dir / "a.json", b = dir / "b.json";
  const auto& c = captures();
  ASSERT_EQ(tool("aggregate" + quoted({c[0], c[1]}) + " --partial -o " + shell_quote(a)).status, 0);
  ASSERT_EQ(tool("aggregate" + quoted({c[2], c[3]}) + " --partial --jobs 1 -o " + shell_quote(b)).status, 0);

  auto direct = tool("aggregate" + quoted(c) + " --format json");
  ASSERT_EQ(direct.status, 0);
  EXPECT_EQ(json::parse(direct.output)["machines"], 4);
  auto merged = tool("aggregate --merge " + shell_quote(a) + " --merge " + shell_quote(b) + " --format json");
  ASSERT_EQ(merged.status, 0);
  EXPECT_EQ(merged.output, direct.output);
  // A partial with raw inputs, and the text and partial outputs too.
  EXPECT_EQ(tool("aggregate" + quoted({c[2], c[3]}) + " --merge " + shell_quote(a) + " --format json").output, direct.output);
  EXPECT_EQ(tool("aggregate --merge " + shell_quote(b) + " --merge " + shell_quote(a)).output, tool("aggregate" + quoted(c)).output);
  EXPECT_EQ(tool("aggregate --merge " + shell_quote(a) + " --merge " + shell_quote(b) + " --partial").output,
            tool("aggregate" + quoted(c) + " --partial").output);
}

TEST(FleetPartial, APartialCannotMakeAHostBridgeReadyByItself) {
  TempDir dir;
  std::string report = dir / "r.json", hostile = dir / "h.json";
  write_file(report, report_of(captures()[0]).dump());
  json h = partial_of({captures()[0]});
  std::string id = candidate_id(h);
  ASSERT_FALSE(id.empty());
  // One machine's worth of verified copies, on a host bridge it is not a candidate on.
  json& s = h["host_bridge_ids"][id];
  s["candidate_machines"] = 0, s["statuses"] = json::object(), s["unlockable_pairs"] = 5, s["verified_copies"] = 5;
  write_file(hostile, h.dump());
  auto r = tool("aggregate " + shell_quote(report) + " --merge " + shell_quote(hostile) + " --format json");
  ASSERT_EQ(r.status, 0);
  json j = json::parse(r.output);
  EXPECT_EQ(j["machines"], 1);
  // The report's own status (QEMU q35's entry is proposed upstream, rules/kernel/upstream.yaml), not ready.
  EXPECT_EQ(j["host_bridge_ids"][id]["status"], "proposed upstream");
  ASSERT_EQ(j["skipped"].size(), 1u);
  EXPECT_TRUE(contains(j["skipped"][0]["reason"], "host_bridge_ids." + id + ".")) << j["skipped"][0]["reason"];
}

TEST(FleetPartial, DuplicateKeysAndDepthAreRefused) {
  TempDir dir;
  std::string good = partial_of({captures()[0]}).dump();
  std::string dup = dir / "dup.json", deep = dir / "deep.json";
  ASSERT_EQ(good.front(), '{');
  write_file(dup, "{\"machines\": 0, " + good.substr(1));  // "machines" twice at the top
  write_file(deep, "{\"skipped\": " + std::string(40, '[') + std::string(40, ']') + "}");
  auto r = tool("aggregate --merge " + shell_quote(dup) + " --merge " + shell_quote(deep) + " --format json");
  EXPECT_EQ(r.status, 2);
  json j = json::parse(r.output);
  std::map<std::string, std::string> reasons;
  for (const auto& s : j["skipped"]) reasons[s["input"]] = s["reason"];
  ASSERT_EQ(reasons.size(), 2u) << j["skipped"];
  EXPECT_TRUE(contains(reasons[dup], "the document: duplicate key \"machines\"")) << reasons[dup];
  EXPECT_TRUE(contains(reasons[deep], "nested deeper than 16 levels")) << reasons[deep];
}

// Whatever a report may hold, the partial written from it reads back: text is bounded once escaped
// (a control byte becomes four), and a CPU vendor is short enough for "VENDOR family F model M".
TEST(FleetPartial, ThePartialOfAnyCountedReportReadsBack) {
  TempDir dir;
  json base = report_of(captures()[0]);
  ASSERT_FALSE(base["host_bridges"].empty());
  std::vector<std::function<void(json&)>> changes = {
      [](json& r) { r["machine"]["cpu_model_name"] = "", r["machine"]["cpu_vendor"] = std::string(250, 'V'); },
      [](json& r) { r["machine"]["cpu_model_name"] = std::string(200, '\x01'); },
      [](json& r) { r["machine"]["cpu_model_name"] = "Xeon\x1b[31m"; },
      [](json& r) { r["host_bridges"][0]["device_name"] = std::string(120, '\x7f'); },
      [](json& r) { r["kernel_rules"]["release"] = std::string(40, '\x1b'); },
      [](json& r) { r["decisions"][0]["rule"] = nullptr; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    SCOPED_TRACE(i);
    json r = base;
    changes[i](r);
    std::string n = std::to_string(i), report = dir / ("r" + n + ".json"), partial = dir / ("p" + n + ".json");
    write_file(report, r.dump());
    auto direct = tool("aggregate " + shell_quote(report) + " --format json");
    if (json::parse(direct.output)["machines"] == 0) continue;  // refused as a report: nothing to merge
    ASSERT_EQ(tool("aggregate " + shell_quote(report) + " --partial -o " + shell_quote(partial)).status, 0);
    auto merged = tool("aggregate --merge " + shell_quote(partial) + " --format json");
    EXPECT_EQ(merged.status, 0);
    EXPECT_EQ(merged.output, direct.output);
  }
}

// 400k empty objects (1.2 MB) took 90 s when each object's end rescanned its parent; read linearly
// they take a fraction of a second. This test runs under a CTest TIMEOUT (tests/CMakeLists.txt).
TEST(FleetPartial, LargeFlatDocumentsReadInLinearTime) {
  std::string objects = "[";
  for (int i = 0; i < 400000; ++i) objects += i ? ",{}" : "{}";
  objects += "]";
  EXPECT_EQ(fleet::parse_fleet_json(objects, "objects.json").size(), 400000u);
  std::string keys = "{";
  for (int i = 0; i < 400000; ++i) keys += (i ? ",\"" : "\"") + std::to_string(i) + "\":0";
  keys += "}";
  EXPECT_EQ(fleet::parse_fleet_json(keys, "keys.json").size(), 400000u);
  std::string arrays = "[";
  for (int i = 0; i < 400000; ++i) arrays += i ? ",[]" : "[]";
  arrays += "]";
  EXPECT_EQ(fleet::parse_fleet_json(arrays, "arrays.json").size(), 400000u);
}

}  // namespace
}  // namespace p2paudit
