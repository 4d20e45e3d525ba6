// SPDX-License-Identifier: GPL-2.0-or-later
// Every command's JSON validates against its schema in docs/schemas (docs/json.md), on machines
// with GPUs, switches, SR-IOV, stored probe answers and an lspci dump; the schemas are valid
// draft 2020-12 schemas, and a document that drifted fails (tests/validate_json.py, python3-jsonschema).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <set>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

const fs::path kSchemaDir = fs::path(P2PAUDIT_SOURCE_DIR) / "docs" / "schemas";
const std::string kValidator = "/usr/bin/python3 " + test::shell_quote(P2PAUDIT_SOURCE_DIR "/tests/validate_json.py") +
                               " " + test::shell_quote(kSchemaDir.string());

std::string tool() { return P2PAUDIT_TOOL; }

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The fake NVML and CUDA answering for the 2x H200 machine's GPUs, as probe_policy_test runs them.
std::string fake_runtimes_env() {
  return "env P2PAUDIT_PROBE_ALLOW_SYSROOT=1 FAKE_NVIDIA_SCENARIO=ok FAKE_NVIDIA_BDFS=0000:00:06.0,0000:00:07.0"
         " P2PAUDIT_NVML_LIBRARY=" + test::shell_quote(FAKE_NVML_LIBRARY) +
         " P2PAUDIT_CUDA_LIBRARY=" + test::shell_quote(FAKE_CUDA_LIBRARY) +
         " P2PAUDIT_HIP_LIBRARY=/nonexistent ZE_ENABLE_ALT_DRIVERS=/nonexistent ";
}

class JsonSchema : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("p2paudit-schema-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!HasFailure()) fs::remove_all(dir_, ec);
  }

  // Runs `p2paudit ARGS`, keeps its stdout as a document of `kind`, and returns it parsed.
  json run(const std::string& kind, const std::string& args, std::set<int> statuses = {0}, const std::string& env = "") {
    fs::path out = dir_ / (std::to_string(documents_.size()) + "-" + kind + ".json");
    auto r = test::run_command(env + tool() + " " + args + " > " + test::shell_quote(out.string()) + " 2>/dev/null; echo $?");
    int status = std::stoi(r.output);
    EXPECT_TRUE(statuses.count(status)) << args << ": exit " << status;
    return keep(kind, out, args);
  }
  json keep(const std::string& kind, const fs::path& file, const std::string& what) {
    documents_.push_back(kind + "=" + file.string());
    kinds_.insert(kind);
    json j = json::parse(read_file(file), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << what << ": not JSON";
    // The version first, so a reader can dispatch before reading the rest.
    if (!j.is_discarded()) {
      EXPECT_TRUE(j.is_object() && !j.empty() && j.begin().key() == "schema_version") << what;
      EXPECT_TRUE(j.value("schema_version", json()).is_number_integer()) << what;
    }
    return j;
  }
  // Validates every document kept so far; the validator's problems are the failure message.
  void expect_all_valid() {
    std::string args;
    for (const auto& d : documents_) args += " " + test::shell_quote(d);
    auto r = test::run_command(kValidator + args + " 2>&1");
    EXPECT_EQ(r.status, 0) << r.output;
  }

  // The commands that describe one machine (`sysroot_args`: --sysroot X or --lspci-dump X).
  void run_machine_commands(const std::string& sysroot_args, bool from_dump = false) {
    const std::string m = sysroot_args + " ";
    run("audit", m + "--format json");
    run("topology", m + "topology --format json");
    json all = run("matrix", m + "matrix --all --format json");
    run("matrix", m + "matrix --format json");
    run("matrix", m + "matrix --details --format json");
    run("policy", m + "policy --format json");
    run("policy", m + "policy --all --details --format json");
    run("whitelist", m + "whitelist --all --format json");
    run("what-if", m + "--assume-acs-off all matrix --diff --format json");
    run("what-if", m + "--kernel 5.10 policy --diff --format json");
    run("report", m + "report");
    ASSERT_GE(all["devices"].size(), 2u) << sysroot_args;
    const std::string provider = all["devices"][0]["bdf"], client = all["devices"][1]["bdf"];
    const std::string other = all["devices"].back()["bdf"];
    run("explain", m + "explain " + provider + " " + client + " " + other + " --format json");
    run("check", m + "check " + provider + " " + client + " --format json", {0, 1, 3});
    run("check", m + "check " + provider + " " + client + " --require host_staged --format json", {0, 1, 3});
    run("check", m + "--assume-acs-off all check " + provider + " " + client + " --diff --format json", {0, 1, 3});
    if (!from_dump) {
      fs::path snapshot = dir_ / ("snapshot-" + std::to_string(documents_.size()) + ".tar.gz");
      run("snapshot", m + "snapshot --redact -o " + test::shell_quote(snapshot.string()) + " --format json");
      // Written with -o and --redact (no host name) for aggregate below.
      reports_.push_back(dir_ / ("report-" + std::to_string(documents_.size()) + ".json"));
      ASSERT_EQ(test::run_command(tool() + " " + m + "report --redact -o " + test::shell_quote(reports_.back().string())).status, 0);
      keep("report", reports_.back(), "report --redact -o");
    }
  }

  fs::path dir_;
  std::vector<std::string> documents_;  // KIND=FILE
  std::set<std::string> kinds_;
  std::vector<fs::path> reports_;
};

TEST_F(JsonSchema, EverySchemaIsAValidDraft202012Schema) {
  auto r = test::run_command(kValidator + " --check-schemas 2>&1");
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(JsonSchema, EveryCommandOnEveryKindOfMachineValidates) {
  for (const char* machine : {"machines/h200x4-firecracker-vm/sysroot.tar.gz", "machines/h200x2-firecracker-vm/sysroot.tar.gz",
                              "machines/h200x2-firecracker-vm/copy-2026-11-22/snapshot-probe.tar.gz",
                              "machines/epyc-firecracker-vm/sysroot.tar.gz",
                              "kernel-oracle/h-d1-rp-acs-rr-cr-mf-switch/sysroot.tar.gz",
                              "kernel-oracle/h-e5-pxb-whitelist-req-same-host/sysroot.tar.gz",
                              "kernel-oracle/h-f6-sriov-nvme/sysroot.tar.gz"})
    run_machine_commands("--sysroot " + test::shell_quote(test::data_path(machine)));
  run_machine_commands("--lspci-dump " + test::shell_quote(test::data_path("lspci-dumps/tree-asus-p6t6")), true);
  run("policy", "--sysroot " + test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz") +
                    " policy --details --vendor-facts " + test::data_path("machines/h200x4-firecracker-vm/vendor-facts.json") +
                    " --format json");

  // The runtimes: answering (fake NVML and CUDA), absent, and the recordings of the real 2x H200.
  const std::string h200x2 = test::shell_quote(test::data_path("machines/h200x2-firecracker-vm/sysroot.tar.gz"));
  run("probe", "--sysroot " + h200x2 + " probe --format json", {0}, fake_runtimes_env());
  run("probe", "--sysroot " + h200x2 + " probe --mirror --format json", {0}, fake_runtimes_env());
  run("probe", "--sysroot " + h200x2 + " probe --format json", {0},
      "env P2PAUDIT_PROBE_ALLOW_SYSROOT=1 P2PAUDIT_NVML_LIBRARY=/nonexistent P2PAUDIT_CUDA_LIBRARY=/nonexistent "
      "P2PAUDIT_HIP_LIBRARY=/nonexistent ZE_ENABLE_ALT_DRIVERS=/nonexistent ");
  run("policy", "--sysroot " + h200x2 + " policy --details --format json", {0}, fake_runtimes_env());
  for (const char* recording : {"machines/h200x2-firecracker-vm/probe-2026-11-22/probe.json",
                                "machines/h200x2-firecracker-vm/copy-2026-11-22/probe-copy.json"})
    keep("probe", test::data_path(recording), recording);
  // Every command's JSON as the tool wrote it on the real machine (tests/data/SOURCE.md): KIND.json.
  for (const auto& e : fs::directory_iterator(test::data_path("machines/h200x2-firecracker-vm/live-2026-11-23/json")))
    keep(e.path().stem().string(), e.path(), "live 2x H200 " + e.path().filename().string());

  // Fleets: the reports written above, folded.
  std::string reports;
  for (const auto& r : reports_) reports += " " + test::shell_quote(r.string());
  run("aggregate", "aggregate" + reports + " --format json");
  fs::path partial = dir_ / "partial.json";
  ASSERT_EQ(test::run_command(tool() + " aggregate" + reports + " --partial -o " + test::shell_quote(partial.string())).status, 0);
  keep("aggregate-partial", partial, "aggregate --partial");
  run("aggregate", "aggregate " + test::shell_quote(partial.string()) + " --format json");

  // Rule files: valid ones, broken ones, one that is not there (exit 2 with diagnostics).
  run("rules-lint", "rules lint " + test::data_path("policy/valid.yaml") + " " + test::data_path("policy/advisory.yaml") +
                        " --format json");
  run("rules-lint", "rules lint " + test::data_path("policy/valid.yaml") + " " + test::data_path("policy/broken.yaml") +
                        " " + (dir_ / "missing.yaml").string() + " --format json", {2});
  run("rules-lint", "rules lint " + test::data_path("policy/site-deny-shadowed.yaml") + " --format json");  // a warning
  run("rules-facts", "rules facts --format json");

  expect_all_valid();

  // Every schema in docs/schemas was used, and every kind has one.
  std::set<std::string> schemas;
  for (const auto& e : fs::directory_iterator(kSchemaDir)) {
    std::string name = e.path().filename().string();
    if (name.ends_with(".schema.json")) schemas.insert(name.substr(0, name.size() - 12));
  }
  EXPECT_EQ(schemas, kinds_);
}

// A schema that accepted anything would pass the test above: each of these drifts must fail.
TEST_F(JsonSchema, DriftedDocumentsFail) {
  const std::string h200 = test::shell_quote(test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz"));
  json policy = run("policy", "--sysroot " + h200 + " policy --format json");
  json check = run("check", "--sysroot " + h200 + " check gpu0 gpu1 --format json", {3});
  json lint = run("rules-lint", "rules lint " + test::data_path("policy/broken.yaml") + " --format json", {2});
  json topology = run("topology", "--sysroot " + h200 + " topology --format json");
  expect_all_valid();  // as written they pass
  ASSERT_FALSE(policy["pairs"].empty());
  ASSERT_FALSE(lint["diagnostics"].empty());

  std::vector<std::pair<std::string, json>> drifted;
  auto drift = [&](const std::string& kind, json doc, const std::function<void(json&)>& change) {
    change(doc);
    drifted.emplace_back(kind, std::move(doc));
  };
  drift("policy", policy, [](json& j) { j["pairs"][0]["decision"] = "maybe"; });
  drift("policy", policy, [](json& j) { j.erase("schema_version"); });
  drift("policy", policy, [](json& j) { j["schema_version"] = 1; });
  drift("policy", policy, [](json& j) { j["unexpected"] = true; });
  drift("policy", policy, [](json& j) { j["pairs"][0]["provider"] = 6; });
  drift("check", check, [](json& j) { j["satisfied"] = "no"; });
  drift("check", check, [](json& j) { j.erase("require"); });
  drift("rules-lint", lint, [](json& j) { j["diagnostics"][0]["line"] = "4"; });
  drift("topology", topology, [](json& j) { j["functions"][0]["acs"] = "off"; });
  drift("topology", topology, [](json& j) { j["functions"][0]["bdf"] = "00:01.0"; });

  std::string args;
  std::vector<std::string> files;
  for (size_t i = 0; i < drifted.size(); ++i) {
    fs::path file = dir_ / ("drifted-" + std::to_string(i) + ".json");
    std::ofstream(file) << drifted[i].second.dump(2);
    files.push_back(file.string());
    args += " " + test::shell_quote(drifted[i].first + "=" + file.string());
  }
  auto r = test::run_command(kValidator + args + " 2>&1");
  EXPECT_EQ(r.status, 1) << r.output;
  for (size_t i = 0; i < files.size(); ++i)  // each one named among the problems
    EXPECT_NE(r.output.find(files[i] + ": "), std::string::npos) << drifted[i].first << " drift " << i << " passed:\n"
                                                                 << r.output;
}

}  // namespace
}  // namespace p2paudit
