// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit report` and `p2paudit aggregate` (docs/fleet.md): the report's fields on every fixture,
// 1,000 machines aggregated at once and in two merged halves, bad inputs named and counted, CSV,
// worker counts, and the Ansible playbook against localhost.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

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

test::CommandResult tool(const std::string& args, const std::string& stderr_file = "/dev/null") {
  return test::run_command(std::string(P2PAUDIT_TOOL) + " " + args + " 2>" + shell_quote(stderr_file));
}

std::string fixture(const std::string& name) { return test::data_path(name + "/sysroot.tar.gz"); }
std::string stored_probe_snapshot() {
  return test::data_path("machines/h200x2-firecracker-vm/copy-2026-11-22/snapshot-probe.tar.gz");
}

json report_of(const std::string& sysroot, const std::string& extra = "") {
  auto r = tool("--sysroot " + shell_quote(sysroot) + " report --no-probe " + extra);
  EXPECT_EQ(r.status, 0) << sysroot;
  return json::parse(r.output);
}

TEST(FleetReport, EveryFixtureHasTheFields) {
  for (const auto& sysroot : test::fixture_sysroots()) {
    SCOPED_TRACE(sysroot);
    json j = report_of(sysroot);
    EXPECT_EQ(j["schema_version"], 1);
    EXPECT_EQ(j["kind"], "p2paudit-report");
    EXPECT_TRUE(j["tool_version"].is_string());
    for (const char* key : {"hostname", "cpu_vendor", "cpu_family", "cpu_model", "cpu_model_name", "kernel_release",
                            "iommu_mode", "vm"})
      EXPECT_TRUE(j["machine"].contains(key)) << key;
    EXPECT_TRUE(j["machine"]["vm"].is_boolean());
    EXPECT_TRUE(std::regex_match(j["topology_digest"].get<std::string>(), std::regex("fnv1a64:[0-9a-f]{16}")));
    EXPECT_TRUE(j["kernel_rules"]["release"].is_string());
    ASSERT_FALSE(j["host_bridges"].empty());
    for (const auto& hb : j["host_bridges"]) {
      EXPECT_TRUE(hb["name"].get<std::string>().starts_with("pci"));
      EXPECT_TRUE(hb["id"].is_null() || std::regex_match(hb["id"].get<std::string>(), std::regex("[0-9a-f]{4}:[0-9a-f]{4}")));
      EXPECT_TRUE(hb.contains("root_device") && hb.contains("device_name"));
    }
    size_t n = j["devices"].size();
    ASSERT_EQ(j["kernel_verdicts"].size(), n * (n - (n ? 1 : 0)));  // ordered pairs of distinct devices
    ASSERT_EQ(j["decisions"].size(), j["kernel_verdicts"].size());
    for (size_t i = 0; i < j["decisions"].size(); ++i) {
      const auto& v = j["kernel_verdicts"][i];
      const auto& d = j["decisions"][i];
      EXPECT_EQ(v["provider"], d["provider"]);
      EXPECT_NE(v["provider"], v["client"]);
      EXPECT_TRUE(v["verdict"] == "allowed" || v["verdict"] == "refused" || v["verdict"] == "unknown");
      EXPECT_TRUE(v["refused_at"].is_array());
      if (v["verdict"] != "refused") {
        EXPECT_TRUE(v["refused_at"].empty());
      }
      EXPECT_TRUE(d["decision"] == "peer" || d["decision"] == "host_staged" || d["decision"] == "deny");
      EXPECT_TRUE(d["rule"].is_string() || d["rule"].is_null());
    }
    for (const auto& c : j["candidates"]) {
      for (const char* key : {"id", "name", "status", "fixed_in", "pairs", "kernel_table_line"})
        EXPECT_TRUE(c.contains(key)) << key;
      EXPECT_FALSE(c["pairs"].empty());
    }
    for (const char* key : {"source", "note", "asked", "copies"}) EXPECT_TRUE(j["probe"].contains(key)) << key;
  }
}

TEST(FleetReport, StoredProbeCandidatesRedactionAndDigest) {
  // The H200 pair captured with `snapshot --probe --copy`: the answers come from the snapshot.
  json h200x2 = report_of(stored_probe_snapshot());
  EXPECT_EQ(h200x2["probe"]["source"], "snapshot");
  EXPECT_FALSE(h200x2["probe"]["asked"].empty());
  EXPECT_EQ(h200x2["probe"]["copies"]["verified"], 2);  // both directions over NVLink
  EXPECT_EQ(report_of(fixture("machines/h200x2-firecracker-vm"))["probe"]["source"], "none");
  // Four GPUs and a NIC on a host bridge missing from the whitelist: one candidate, 20 pairs.
  json h200x4 = report_of(fixture("machines/h200x4-firecracker-vm"), "--redact");
  EXPECT_FALSE(h200x4["machine"].contains("hostname"));
  ASSERT_EQ(h200x4["candidates"].size(), 1u);
  EXPECT_EQ(h200x4["candidates"][0]["id"], h200x4["host_bridges"][0]["id"]);
  EXPECT_EQ(h200x4["candidates"][0]["pairs"].size(), 20u);
  EXPECT_EQ(h200x4["candidates"][0]["status"], "needs evidence");
  // The digest follows the tree: the same for the same capture, different for another.
  EXPECT_EQ(report_of(fixture("machines/h200x4-firecracker-vm"))["topology_digest"], h200x4["topology_digest"]);
  EXPECT_NE(h200x2["topology_digest"], h200x4["topology_digest"]);
}

TEST(FleetReport, OutputFileIsWrittenLikeASnapshot) {
  TempDir dir;
  fs::path out = dir.path() / "r.json";
  std::string sysroot = shell_quote(fixture("machines/epyc-firecracker-vm"));
  ASSERT_EQ(tool("--sysroot " + sysroot + " report --no-probe -o " + shell_quote(out.string())).status, 0);
  EXPECT_EQ(json::parse(read_file(out)), report_of(fixture("machines/epyc-firecracker-vm")));
  write_file(out, "keep");
  EXPECT_EQ(tool("--sysroot " + sysroot + " report -o " + shell_quote(out.string())).status, 2);
  EXPECT_EQ(read_file(out), "keep");
  EXPECT_EQ(tool("--sysroot " + sysroot + " report --force -o " + shell_quote(out.string())).status, 0);
  EXPECT_EQ(json::parse(read_file(out))["kind"], "p2paudit-report");
  fs::create_symlink(out, dir.path() / "link.json");
  EXPECT_EQ(tool("--sysroot " + sysroot + " report --force -o " + shell_quote((dir.path() / "link.json").string())).status, 2);
  for (const auto& e : fs::directory_iterator(dir.path()))  // no temporary file left behind
    EXPECT_FALSE(e.path().filename().string().starts_with(".")) << e.path();
}

// RFC 4180: quoted cells may hold commas, doubled quotes and line breaks.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string cell;
  bool quoted = false, was_quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') cell += '"', ++i;
      else if (c == '"') quoted = false;
      else cell += c;
    } else if (c == '"') {
      EXPECT_TRUE(cell.empty() && !was_quoted) << "a quote inside an unquoted cell";
      quoted = was_quoted = true;
    } else if (c == ',') {
      row.push_back(std::move(cell)), cell.clear(), was_quoted = false;
    } else if (c == '\n') {
      row.push_back(std::move(cell)), cell.clear(), was_quoted = false;
      rows.push_back(std::move(row)), row.clear();
    } else {
      cell += c;
    }
  }
  EXPECT_FALSE(quoted) << "unterminated quoted cell";
  EXPECT_TRUE(cell.empty() && row.empty()) << "the last row has no line break";
  return rows;
}

// 1,000 machines: copies of the fixture snapshots (real archives, analysed in full) and reports
// varied from a few fixtures' reports (other kernels, CPUs, copy results), in two halves; one
// snapshot in the second half is cut short.
class FleetOfAThousand : public ::testing::Test {
 protected:
  // 999 distinct machines: each fixture snapshot once (a copy would be the same machine, counted
  // once: docs/fleet.md "Machines"), and reports with host names of their own for the rest.
  static constexpr int kMachines = 999;
  static inline int snapshots_ = 0;

  static void SetUpTestSuite() {
    dir_ = new TempDir;
    auto fixtures = test::fixture_sysroots();
    fixtures.push_back(stored_probe_snapshot());
    snapshots_ = static_cast<int>(fixtures.size());
    const int reports = kMachines - snapshots_;
    for (int i = 0; i < snapshots_; ++i) {
      const std::string& from = fixtures[i];
      fs::path to = half(i < snapshots_ / 2) / "snapshots" / ("s" + std::to_string(i) + "-" + test::case_name(from) + ".tar.gz");
      fs::create_directories(to.parent_path());
      fs::copy_file(from, to);
    }
    std::string whole = read_file(fixtures.front());
    write_file(half(false) / "snapshots" / "corrupt.tar.gz", whole.substr(0, whole.size() / 2));

    std::vector<json> bases;
    for (const char* name : {"machines/h200x2-firecracker-vm", "machines/h200x4-firecracker-vm", "machines/epyc-firecracker-vm",
                             "kernel-oracle/h-a-two-rootports-intel", "kernel-oracle/h-e5-pxb-whitelist-req-same-host",
                             "kernel-oracle/h-f1-nested-switches", "kernel-oracle/h-d4-intel-iommu-on"})
      bases.push_back(report_of(fixture(name)));
    const char* kernels[] = {"6.1.0-18-amd64", "6.8.0-31-generic", "5.15.0-25-generic", "6.12.9"};
    const char* cpus[] = {"Intel(R) Xeon(R) Gold 6430", "AMD EPYC 9654 96-Core Processor", "=HYPERLINK(\"x\"), \"quoted\"",
                          "Intel(R) Xeon(R) Platinum 8480+"};
    for (int i = 0; i < reports; ++i) {
      json r = bases[i % bases.size()];
      r["machine"]["hostname"] = "host-" + std::to_string(i);
      if (i % 5) r["kernel_rules"]["release"] = kernels[i % 4];
      r["machine"]["cpu_model_name"] = cpus[(i / 7) % 4];
      for (auto& c : r["candidates"]) {
        auto& pair = c["pairs"][0];
        if (i % 10 == 3) pair["copy_result"] = "verified";
        if (i % 13 == 0) pair["copy_result"] = "failed";
        if (i == 500) pair["copy_result"] = "corrupt";
      }
      write_file(half(i < reports / 2) / "reports" / ("r" + std::to_string(i) + ".json"), r.dump());
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static fs::path half(bool first) { return dir_->path() / (first ? "half1" : "half2"); }
  static std::string halves() { return shell_quote(half(true).string()) + " " + shell_quote(half(false).string()); }
  static fs::path file(const std::string& name) { return dir_->path() / name; }

  static inline TempDir* dir_ = nullptr;
};

TEST_F(FleetOfAThousand, HalvesMergedEqualOneRunAndWorkersDoNotMatter) {
  auto all = tool("aggregate " + halves() + " --format json --jobs 4", file("all.err").string());
  ASSERT_EQ(all.status, 0);
  json j = json::parse(all.output);
  EXPECT_EQ(j["machines"], kMachines);
  EXPECT_EQ(tool("aggregate " + halves() + " --format json --jobs 1").output, all.output);

  std::string p1 = file("half1.partial.json").string(), p2 = file("half2.partial.json").string();
  ASSERT_EQ(tool("aggregate " + shell_quote(half(true).string()) + " --partial -o " + shell_quote(p1)).status, 0);
  ASSERT_EQ(tool("aggregate " + shell_quote(half(false).string()) + " --partial --jobs 3 > " + shell_quote(p2)).status, 0);
  EXPECT_EQ(json::parse(read_file(p1))["kind"], "p2paudit-aggregate-partial");
  auto merged = tool("aggregate --merge " + shell_quote(p1) + " --merge " + shell_quote(p2) + " --format json");
  ASSERT_EQ(merged.status, 0);
  EXPECT_EQ(merged.output, all.output);
  // A partial output mixed with raw inputs, given in the other order.
  EXPECT_EQ(tool("aggregate " + shell_quote(half(false).string()) + " --merge " + shell_quote(p1) + " --format json --jobs 2").output,
            all.output);

  // The counts follow the inputs: the corrupt copy result of machine 500 rejects its host bridge.
  bool rejected = false, ready = false;
  for (const auto& [id, s] : j["host_bridge_ids"].items()) {
    EXPECT_GT(s["machines"].get<int>(), 0) << id;
    rejected |= s["status"] == "rejected";
    ready |= s["status"] == "ready to submit";
  }
  EXPECT_TRUE(rejected);
  EXPECT_TRUE(ready);
  EXPECT_GT(j["kernels"]["6.12.9"]["machines"].get<int>(), 0);
  EXPECT_FALSE(j["decisions"].empty());
}

TEST_F(FleetOfAThousand, CorruptSnapshotIsNamedAndCounted) {
  std::string err = file("corrupt.err").string();
  auto r = tool("aggregate " + halves() + " --format json --jobs 2", err);
  ASSERT_EQ(r.status, 0);
  json j = json::parse(r.output);
  ASSERT_EQ(j["skipped"].size(), 1u);
  std::string corrupt = (half(false) / "snapshots" / "corrupt.tar.gz").string();
  EXPECT_EQ(j["skipped"][0]["input"], corrupt);
  EXPECT_FALSE(j["skipped"][0]["reason"].get<std::string>().empty());
  EXPECT_NE(read_file(err).find("skipped " + corrupt + ": "), std::string::npos) << read_file(err);
  auto text = tool("aggregate " + halves() + " --jobs 2");
  EXPECT_NE(text.output.find("999 machine(s), 1 input(s) skipped"), std::string::npos) << text.output.substr(0, 200);
  EXPECT_NE(text.output.find("Skipped inputs:\n  " + corrupt + ": "), std::string::npos);
}

TEST_F(FleetOfAThousand, CsvParsesAndAgreesWithJson) {
  std::string p1 = file("csv1.partial.json").string(), p2 = file("csv2.partial.json").string();
  ASSERT_EQ(tool("aggregate " + shell_quote(half(true).string()) + " --partial -o " + shell_quote(p1)).status, 0);
  ASSERT_EQ(tool("aggregate " + shell_quote(half(false).string()) + " --partial -o " + shell_quote(p2)).status, 0);
  std::string inputs = "--merge " + shell_quote(p1) + " --merge " + shell_quote(p2);
  json j = json::parse(tool("aggregate " + inputs + " --format json").output);
  auto csv = tool("aggregate " + inputs + " --format csv --jobs 1");
  ASSERT_EQ(csv.status, 0);
  EXPECT_EQ(tool("aggregate " + inputs + " --format csv --jobs 4").output, csv.output);
  auto rows = parse_csv(csv.output);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0], (std::vector<std::string>{"section", "key", "field", "item", "value"}));
  std::map<std::string, std::string> cell;  // "section|key|field|item" -> value
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 5u);
    cell[row[0] + "|" + row[1] + "|" + row[2] + "|" + row[3]] = row[4];
  }
  EXPECT_EQ(cell["summary||machines|"], "999");
  EXPECT_EQ(cell["summary||skipped|"], "1");
  for (const auto& [id, s] : j["host_bridge_ids"].items()) {
    EXPECT_EQ(cell["host_bridge_id|" + id + "|machines|"], std::to_string(s["machines"].get<int>()));
    EXPECT_EQ(cell["host_bridge_id|" + id + "|status|"], s["status"]);
    for (const auto& [cpu, n] : s["cpu_models"].items()) {
      // A cell a spreadsheet would take for a formula keeps a leading quote.
      std::string item = cpu.starts_with("=") ? "'" + cpu : cpu;
      EXPECT_EQ(cell["host_bridge_id|" + id + "|cpu_models|" + item], std::to_string(n.get<int>())) << cpu;
    }
  }
  for (const auto& [release, k] : j["kernels"].items())
    EXPECT_EQ(cell["kernel|" + release + "|refused_pairs|"], std::to_string(k["refused_pairs"].get<int>()));
  for (const auto& [rule, d] : j["decisions"].items())
    EXPECT_EQ(cell["decision|" + rule + "|host_staged|"], std::to_string(d["host_staged"].get<int>()));
}

TEST(FleetAggregate, BadInputsAreNamedCountedAndNeverFatal) {
  TempDir dir;
  fs::path in = dir.path() / "in";
  json good = report_of(fixture("machines/h200x4-firecracker-vm"));
  write_file(in / "good.json", good.dump());
  write_file(in / "not-json.json", "{oops");
  write_file(in / "other.json", R"({"schema_version": 1, "kind": "something else"})");
  json bad_field = good;
  bad_field["decisions"][0]["decision"] = "maybe";
  write_file(in / "bad-field.json", bad_field.dump());
  write_file(in / "deep.json", std::string(100, '[') + std::string(100, ']'));
  write_file(in / "bad-partial.json",
             R"({"schema_version": 1, "kind": "p2paudit-aggregate-partial", "machines": -1, "host_bridge_ids": {},
                 "kernels": {}, "decisions": {}, "skipped": []})");
  write_file(in / "notes.txt", "not an input: ignored");
  fs::create_symlink(in / "good.json", in / "link.json");
  ASSERT_EQ(::mkfifo((in / "fifo.json").c_str(), 0600), 0);

  std::string err = (dir.path() / "err").string();
  auto r = tool("aggregate " + shell_quote(in.string()) + " " + shell_quote((dir.path() / "missing.json").string()) +
                " --format json", err);
  ASSERT_EQ(r.status, 0);
  json j = json::parse(r.output);
  EXPECT_EQ(j["machines"], 1);
  std::map<std::string, std::string> reasons;
  for (const auto& s : j["skipped"]) reasons[fs::path(s["input"].get<std::string>()).filename()] = s["reason"];
  EXPECT_EQ(reasons.size(), 8u);
  EXPECT_NE(reasons["not-json.json"].find("not JSON"), std::string::npos);
  EXPECT_NE(reasons["other.json"].find("neither a p2paudit report"), std::string::npos);
  EXPECT_NE(reasons["bad-field.json"].find("decisions[0].decision"), std::string::npos);
  EXPECT_NE(reasons["deep.json"].find("nested deeper"), std::string::npos);
  EXPECT_NE(reasons["bad-partial.json"].find("--merge"), std::string::npos);  // a partial only where asked
  EXPECT_NE(reasons["link.json"].find("not a regular file"), std::string::npos);
  EXPECT_NE(reasons["fifo.json"].find("not a regular file"), std::string::npos);
  EXPECT_TRUE(reasons.count("missing.json"));
  EXPECT_FALSE(reasons.count("notes.txt"));
  std::string stderr_text = read_file(err);
  for (const auto& [name, reason] : reasons) EXPECT_NE(stderr_text.find(name), std::string::npos) << name;

  // Nothing readable: the output still lists what was skipped, and the exit status says so.
  auto none = tool("aggregate " + shell_quote((in / "not-json.json").string()) + " --format json");
  EXPECT_EQ(none.status, 2);
  EXPECT_EQ(json::parse(none.output)["skipped"].size(), 1u);
  EXPECT_EQ(tool("aggregate").status, 2);  // no INPUT: usage error
  EXPECT_EQ(tool("aggregate " + shell_quote(in.string()) + " --partial --format csv").status, 2);
}

TEST(FleetAggregate, SnapshotAndItsReportCountTheSame) {
  TempDir dir;
  std::string sysroot = fixture("kernel-oracle/h-e5-pxb-whitelist-req-same-host");
  write_file(dir.path() / "r.json", report_of(sysroot).dump());
  auto from_report = tool("aggregate " + shell_quote((dir.path() / "r.json").string()) + " --format json");
  auto from_snapshot = tool("aggregate " + shell_quote(sysroot) + " --format json");
  ASSERT_EQ(from_report.status, 0);
  // The same counts; the machine is named by each input's own id (the capture has no host name:
  // docs/fleet.md "Machines"), with the same topology digest.
  auto unnamed = [](const std::string& output) {
    json j = json::parse(output);
    EXPECT_EQ(j["machine_list"].size(), 1u);
    for (auto& m : j["machine_list"]) m.erase("name"), m.erase("input");
    for (auto& [id, s] : j["host_bridge_ids"].items())
      for (const char* list : {"refused_on", "candidate_on", "corrupt_on", "failed_on"})
        for (auto& m : s[list]) m.erase("name");
    for (auto& [rule, d] : j["decisions"].items())
      for (auto& m : d["on"]) m.erase("name");
    return j;
  };
  EXPECT_EQ(unnamed(from_report.output), unnamed(from_snapshot.output));
}

TEST(FleetAnsible, PlaybookCollectsAndAggregatesOnLocalhost) {
  if (test::run_command("command -v ansible-playbook >/dev/null 2>&1").status != 0)
    GTEST_SKIP() << "ansible-playbook is not installed (scripts/install-deps --test installs ansible-core)";
  TempDir dir;
  fs::path fleet = dir.path() / "fleet";
  std::string playbook = std::string(P2PAUDIT_SOURCE_DIR) + "/docs/ansible/collect-reports.yml";
  std::string env = "LC_ALL=C.UTF-8 ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=0 HOME=" + shell_quote(dir.path().string()) +
                    " ANSIBLE_LOCAL_TEMP=" + shell_quote((dir.path() / "tmp").string()) +
                    " ANSIBLE_REMOTE_TEMP=" + shell_quote((dir.path() / "rtmp").string());
  json extra = {{"p2paudit_bin", P2PAUDIT_TOOL},
                {"p2paudit_sysroot", fixture("machines/h200x4-firecracker-vm")},
                {"p2paudit_report_args", {"--no-probe"}},
                {"p2paudit_become", ::geteuid() == 0},  // root already; elsewhere sudo would ask
                {"fleet_dir", fleet.string()}};
  auto r = test::run_command(env + " ansible-playbook -i localhost, -c local " + shell_quote(playbook) + " -e " +
                             shell_quote(extra.dump()) + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  json report = json::parse(read_file(fleet / "reports" / "localhost.json"));
  EXPECT_EQ(report["kind"], "p2paudit-report");
  json aggregate = json::parse(read_file(fleet / "aggregate.json"));
  EXPECT_EQ(aggregate["machines"], 1);
  EXPECT_TRUE(aggregate["host_bridge_ids"].contains(report["host_bridges"][0]["id"].get<std::string>()));
  EXPECT_EQ(json::parse(read_file(fleet / "aggregate.partial.json"))["kind"], "p2paudit-aggregate-partial");
  EXPECT_NE(read_file(fleet / "aggregate.txt").find("Fleet: 1 machine(s)"), std::string::npos);
}

}  // namespace
}  // namespace p2paudit
