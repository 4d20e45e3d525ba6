// SPDX-License-Identifier: GPL-2.0-or-later
// Every command's JSON validates against its schema in docs/schemas (docs/json.md), on machines
// with GPUs, switches, SR-IOV, stored probe answers and an lspci dump; the schemas are valid
// draft 2020-12 schemas, and a document that drifted fails (tests/validate_json.py, python3-jsonschema).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <set>
#include <nlohmann/json.hpp>

#include "synth.h"
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

// Every scenario of the fake runtimes (tests/fakes/, docs/probe.md "Environment"), by the
// variable that selects it; each name must occur in its fake's source, so a renamed scenario fails.
struct FakeRuntime {
  const char* variable;
  const char* source;  // below tests/fakes/
  std::vector<std::string> scenarios;
};
const std::vector<FakeRuntime>& fake_runtimes() {
  static const std::vector<FakeRuntime> all = {
      {"FAKE_NVIDIA_SCENARIO", "fake_scenario.h",
       {"ok", "p2p_not_supported", "init_fails", "hang", "crash", "copy_corrupt", "copy_fails", "copy_hang", "copy_crash",
        "kernel_stores_dropped", "bar_end_zeroed", "atomics_wrong", "kernel_hang", "no_peer_atomics"}},
      {"FAKE_HIP_SCENARIO", "fake_hip.cpp", {"ok", "no_peer", "xgmi", "init_fails", "no_device", "hang", "crash"}},
      {"FAKE_ZE_SCENARIO", "fake_ze_driver.c",
       {"ok", "no_peer", "out_of_device_memory", "hang", "crash", "hang_init", "crash_init", "copy_ok", "copy_corrupt",
        "copy_oodm", "copy_hang", "copy_crash", "mirror"}},
  };
  return all;
}

// The environment that makes VARIABLE=SCENARIO the only answering runtime (the others point at
// nothing), its GPUs at BDFS, as the probe tests run them.
std::string fake_scenario_env(const std::string& variable, const std::string& scenario, const std::string& bdfs) {
  const bool nvidia = variable == "FAKE_NVIDIA_SCENARIO", hip = variable == "FAKE_HIP_SCENARIO";
  const bool ze = variable == "FAKE_ZE_SCENARIO";
  return std::string("env -u ZE_AFFINITY_MASK P2PAUDIT_PROBE_ALLOW_SYSROOT=1 ") + variable + "=" + scenario +
         " FAKE_NVIDIA_BDFS=" + bdfs + " FAKE_HIP_BDFS=" + bdfs + " FAKE_ZE_BDFS=" + bdfs +
         " P2PAUDIT_NVML_LIBRARY=" + (nvidia ? test::shell_quote(FAKE_NVML_LIBRARY) : "/nonexistent") +
         " P2PAUDIT_CUDA_LIBRARY=" + (nvidia ? test::shell_quote(FAKE_CUDA_LIBRARY) : "/nonexistent") +
         " P2PAUDIT_HIP_LIBRARY=" + (hip ? test::shell_quote(FAKE_HIP_LIBRARY) : "/nonexistent") +
         " ZE_ENABLE_ALT_DRIVERS=" + (ze ? test::shell_quote(FAKE_ZE_DRIVER) : "/nonexistent") + " ";
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
  // docs/json.md's table states each kind's schema_version ("1", or "1 or 2" where a document's
  // content decides it): every document kept has one of those.
  void expect_documented_versions() {
    std::map<std::string, std::set<int>> documented;  // kind -> the table's schema_versions
    const std::regex row(R"(^\| .*\| (\d+)(?: or (\d+))? \| \[[a-z-]+\]\(schemas/([a-z-]+)\.schema\.json\))");
    std::istringstream table(read_file(fs::path(P2PAUDIT_SOURCE_DIR) / "docs" / "json.md"));
    for (std::string line; std::getline(table, line);)
      if (std::smatch m; std::regex_search(line, m, row)) {
        documented[m[3]].insert(std::stoi(m[1]));
        if (m[2].matched) documented[m[3]].insert(std::stoi(m[2]));
      }
    for (const auto& kind : kinds_) EXPECT_TRUE(documented.count(kind)) << "docs/json.md has no row for " << kind;
    for (const auto& d : documents_) {
      const std::string kind = d.substr(0, d.find('=')), file = d.substr(d.find('=') + 1);
      json j = json::parse(read_file(file), nullptr, false);
      if (j.is_discarded() || !documented.count(kind)) continue;
      const json version = j.value("schema_version", json());
      EXPECT_TRUE(version.is_number_integer() && documented[kind].count(version.get<int>()))
          << file << ": docs/json.md gives " << kind << " documents other schema_versions than " << version;
    }
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
                                "machines/h200x2-firecracker-vm/copy-2026-11-22/probe-copy.json",
                                "machines/h200x4-firecracker-vm/peer-copy-bench-2026-11-28/probe-copy.json",
                                "machines/h200x4-firecracker-vm/peer-copy-bench-2026-11-28/probe-copy-thorough.json"})
    keep("probe", test::data_path(recording), recording);
  // The live two-H100 NVLink VM's policy with the runtimes asked: certain decisions (issue 29).
  keep("policy", test::data_path("machines/h100x2-firecracker-vm/live-2026-11-28/policy.json"), "live 2x H100 policy");
  // The 4x H100 and 4x H200 first-screen runs (issue 31): NVML first, and a full probe's snapshot.
  for (const char* gpus : {"h100x4", "h200x4"})
    for (const char* kind : {"nvml-first", "full-probe"}) {
      const std::string file =
          std::string("machines/") + gpus + "-firecracker-vm/first-screen-2026-11-28/policy-" + kind + ".json";
      keep("policy", test::data_path(file), file);
    }
  // Every command's JSON as the tool wrote it on the real machine (tests/data/SOURCE.md): KIND.json.
  for (const auto& e : fs::directory_iterator(test::data_path("machines/h200x2-firecracker-vm/live-2026-11-23/json")))
    keep(e.path().stem().string(), e.path(), "live 2x H200 " + e.path().filename().string());

  // A machine past kMostListedPairs (320 devices, 102,080 pairs): its report and prom group the
  // pairs by kind (issue 31), and aggregate folds that report with the others.
  {
    synth::Options o;
    o.host_bridges = 1, o.root_ports = 5, o.depth = 1, o.fanout = 16, o.endpoints_per_port = 4, o.vfs = 0;
    const fs::path big = dir_ / "machine-320";
    fs::create_directories(big);
    synth::Machine::plan(o).write_directory(big.string());
    reports_.push_back(dir_ / "report-grouped.json");
    ASSERT_EQ(test::run_command(tool() + " --sysroot " + test::shell_quote(big.string()) + " report --redact -o " +
                                test::shell_quote(reports_.back().string()))
                  .status,
              0);
    json grouped = keep("report", reports_.back(), "report of 320 devices");
    EXPECT_FALSE(grouped["pairs"]["listed"].get<bool>());
    // The audit's JSON groups its matrix the same way: one element per kind, every pair counted.
    json audit = run("audit", "--sysroot " + test::shell_quote(big.string()) + " --format json");
    const size_t devices = audit["matrix"]["devices"].size();
    size_t counted = 0;
    for (const auto& kind : audit["matrix"]["pairs"]) counted += kind.value("pairs", size_t{0});
    EXPECT_EQ(counted, devices * devices);
    EXPECT_EQ(audit["matrix"]["grouped_pairs"]["count"], devices * devices);
    EXPECT_LT(audit["matrix"]["pairs"].size(), 100u);
    // policy: one element per decision group, counted.
    json policy = run("policy", "--sysroot " + test::shell_quote(big.string()) + " policy --no-probe --format json");
    counted = 0;
    for (const auto& group : policy["pairs"]) counted += group.value("pairs", size_t{0});
    EXPECT_EQ(counted, devices * devices);
    EXPECT_EQ(policy["pairs"].size(), policy["groups"].size());
    EXPECT_EQ(policy["grouped_pairs"]["count"], devices * devices);
  }

  // Fleets: the reports written above, folded.
  std::string reports;
  for (const auto& r : reports_) reports += " " + test::shell_quote(r.string());
  run("aggregate", "aggregate" + reports + " --format json");
  fs::path partial = dir_ / "partial.json";
  ASSERT_EQ(test::run_command(tool() + " aggregate" + reports + " --partial -o " + test::shell_quote(partial.string())).status, 0);
  keep("aggregate-partial", partial, "aggregate --partial");
  run("aggregate", "aggregate --merge " + test::shell_quote(partial.string()) + " --format json");

  // The kernel log against a kernel-oracle machine (LogAndWatchValidate below has the rest).
  const std::string oracle = test::data_path("kernel-oracle/h-d1-rp-acs-rr-cr-mf-switch");
  run("log", "--sysroot " + oracle + "/sysroot.tar.gz log --from " + oracle + "/dmesg.txt --format json");

  // Rule files: valid ones, broken ones, one that is not there (exit 2 with diagnostics).
  run("rules-lint", "rules lint " + test::data_path("policy/valid.yaml") + " " + test::data_path("policy/advisory.yaml") +
                        " --format json");
  run("rules-lint", "rules lint " + test::data_path("policy/valid.yaml") + " " + test::data_path("policy/broken.yaml") +
                        " " + (dir_ / "missing.yaml").string() + " --format json", {2});
  run("rules-lint", "rules lint " + test::data_path("policy/site-deny-shadowed.yaml") + " --format json");  // a warning
  run("rules-facts", "rules facts --format json");

  expect_all_valid();
  expect_documented_versions();

  // Every schema in docs/schemas was used, and every kind has one.
  std::set<std::string> schemas;
  for (const auto& e : fs::directory_iterator(kSchemaDir)) {
    std::string name = e.path().filename().string();
    if (name.ends_with(".schema.json")) schemas.insert(name.substr(0, name.size() - 12));
  }
  EXPECT_EQ(schemas, kinds_);
}

// The probe's JSON in every scenario of every fake runtime: queries only, then with the copy test
// and the host-mirror measurement (hung, crashed and failed children, corrupt and failed copies,
// nulls), GPUs inside and outside the topology; and the document `snapshot --probe` stores.
TEST_F(JsonSchema, EveryFakeRuntimeScenarioValidates) {
  const std::string h200x2 = test::shell_quote(test::data_path("machines/h200x2-firecracker-vm/sysroot.tar.gz"));
  const std::string in_topology = "0000:00:06.0,0000:00:07.0";
  size_t runs = 0;
  for (const auto& fake : fake_runtimes()) {
    const std::string source = read_file(fs::path(P2PAUDIT_SOURCE_DIR) / "tests" / "fakes" / fake.source);
    for (const auto& scenario : fake.scenarios) {
      EXPECT_NE(source.find(scenario), std::string::npos) << fake.source << " has no scenario " << scenario;
      const std::string env = fake_scenario_env(fake.variable, scenario, in_topology);
      json plain = run("probe", "--sysroot " + h200x2 + " probe --timeout 2 --format json", {0}, env);
      json copied = run("probe", "--sysroot " + h200x2 + " probe --copy --size 64KiB --repeat 2 --mirror --timeout 2 --format json",
                        {0, 1}, env);
      runs += 2;
      // The fake answered (or failed, hung, crashed) as its runtime: the document is about it.
      for (const json* doc : {&plain, &copied}) {
        ASSERT_TRUE(doc->contains("runtimes") && (*doc)["runtimes"].is_array()) << fake.variable << "=" << scenario;
        bool answered = false;
        for (const auto& rt : (*doc)["runtimes"]) answered |= rt.value("status", "") != "absent";
        // hipInit's hipErrorNoDevice is HIP's way of saying "absent" (docs/probe.md).
        if (scenario != "no_device") {
          EXPECT_TRUE(answered) << fake.variable << "=" << scenario << ": every runtime absent";
        }
      }
    }
    // GPUs the topology does not have: in_topology false, function null.
    json outside = run("probe", "--sysroot " + h200x2 + " probe --format json", {0},
                       fake_scenario_env(fake.variable, "ok", "0000:03:00.0,0000:04:00.0"));
    ++runs;
    bool saw_outside = false;
    for (const auto& rt : outside["runtimes"])
      for (const auto& d : rt["devices"]) saw_outside |= d.value("in_topology", true) == false && d["function"].is_null();
    EXPECT_TRUE(saw_outside) << fake.variable << ": no device outside the topology";
  }
  // NVML without BAR1 figures: bar1_error instead of bar1_total_bytes.
  run("probe", "--sysroot " + h200x2 + " probe --format json", {0},
      "FAKE_NVIDIA_BAR1_BYTES=not_supported " + fake_scenario_env("FAKE_NVIDIA_SCENARIO", "ok", in_topology));

  // What `snapshot --probe` stores (p2paudit-probe.json), with the copy test and the mirror.
  for (const auto& [variable, scenario] : std::vector<std::pair<std::string, std::string>>{
           {"FAKE_NVIDIA_SCENARIO", "copy_corrupt"}, {"FAKE_ZE_SCENARIO", "copy_oodm"}, {"FAKE_ZE_SCENARIO", "mirror"},
           {"FAKE_HIP_SCENARIO", "xgmi"}}) {
    const fs::path snapshot = dir_ / ("probe-snapshot-" + std::to_string(documents_.size()) + ".tar.gz");
    run("snapshot", "--sysroot " + h200x2 + " snapshot --probe --copy --size 64KiB --repeat 1 --mirror --timeout 2 -o " +
                        test::shell_quote(snapshot.string()) + " --format json",
        {0}, fake_scenario_env(variable, scenario, in_topology));
    const fs::path stored = dir_ / ("stored-" + std::to_string(documents_.size()));
    fs::create_directories(stored);
    ASSERT_EQ(test::run_command("tar -xzf " + test::shell_quote(snapshot.string()) + " -C " +
                                test::shell_quote(stored.string()) + " p2paudit-probe.json").status, 0) << snapshot;
    keep("probe", stored / "p2paudit-probe.json", "snapshot --probe " + variable + "=" + scenario);
  }
  EXPECT_GE(runs, 2u * (9 + 7 + 13));
  expect_all_valid();
}

// log and watch (docs/log.md): the kernel-oracle logs against their machines, a log that
// contradicts the prediction (exit 4), watch with a command and without, and an unreadable log.
TEST_F(JsonSchema, LogAndWatchValidate) {
  for (const char* name : {"h-a-two-rootports-intel", "h-d1-rp-acs-rr-cr-mf-switch", "h-d7-amd-iommu-epyc"}) {
    const std::string dir = test::data_path(std::string("kernel-oracle/") + name);
    json j = run("log", "--sysroot " + dir + "/sysroot.tar.gz log --from " + dir + "/dmesg.txt --format json");
    EXPECT_EQ(j["contradictions"], 0) << name;
  }
  const std::string dir = test::data_path("kernel-oracle/h-a-two-rootports-intel");
  json wrong = run("log", "--sysroot " + dir + "/sysroot.tar.gz --assume-whitelisted 8086:29c0 log --from " + dir +
                              "/dmesg.txt --format json", {4});
  EXPECT_GT(wrong["contradictions"].get<int>(), 0);
  const std::string d1 = test::data_path("kernel-oracle/h-d1-rp-acs-rr-cr-mf-switch");
  run("whitelist", "--sysroot " + d1 + "/sysroot.tar.gz whitelist --log " + d1 + "/dmesg.txt --format json");
  fs::path kmsg = dir_ / "kmsg";
  std::ofstream(kmsg) << "6,1,100,-;hello\n";
  const std::string env = "env P2PAUDIT_KMSG_FILE=" + test::shell_quote(kmsg.string()) + " ";
  json watched = run("log", "--sysroot " + dir + "/sysroot.tar.gz watch --format json -- /bin/sh -c " +
                                test::shell_quote("printf '4,2,200,-;nvme 0000:01:00.0: cannot be used for peer-to-peer "
                                                  "DMA as the client and provider (0000:02:00.0) do not share an upstream "
                                                  "bridge or whitelisted host bridge\\n' >> " + kmsg.string() + "; exit 3"),
                     {3}, env);
  EXPECT_EQ(watched["watch"]["exit_status"], 3);
  EXPECT_EQ(watched["events"].size(), 1u);  // the line the command appended, not the one before
  run("log", "--sysroot " + dir + "/sysroot.tar.gz watch --seconds 0 --format json", {0}, env);
  json unread = run("log", "--sysroot " + dir + "/sysroot.tar.gz watch --format json -- true", {0},
                    "env P2PAUDIT_KMSG_FILE=/nonexistent/kmsg ");
  EXPECT_EQ(unread["readable"], false);
  // watch around a real torch peer copy on a lent 2x H200 machine (tests/data/SOURCE.md).
  keep("log", test::data_path("machines/h200x2-firecracker-vm/watch-2026-11-28/watch-torch.json"), "live 2x H200 watch");
  expect_all_valid();
}

// A schema that accepted anything would pass the test above: each of these drifts must fail.
TEST_F(JsonSchema, DriftedDocumentsFail) {
  const std::string h200 = test::shell_quote(test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz"));
  json policy = run("policy", "--sysroot " + h200 + " policy --format json");
  json check = run("check", "--sysroot " + h200 + " check gpu0 gpu1 --format json", {3});
  json lint = run("rules-lint", "rules lint " + test::data_path("policy/broken.yaml") + " --format json", {2});
  json topology = run("topology", "--sysroot " + h200 + " topology --format json");
  // Level Zero with a failed copy and the mirror measured: the probe's most varied document.
  json probe = run("probe", "--sysroot " + test::shell_quote(test::data_path("machines/h200x2-firecracker-vm/sysroot.tar.gz")) +
                                " probe --copy --size 64KiB --repeat 1 --mirror --timeout 5 --format json",
                   {1}, fake_scenario_env("FAKE_ZE_SCENARIO", "copy_oodm", "0000:00:06.0,0000:00:07.0"));
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
  size_t ze = 0;
  while (ze < probe["runtimes"].size() && probe["runtimes"][ze]["runtime"] != "level_zero") ++ze;
  ASSERT_LT(ze, probe["runtimes"].size());
  ASSERT_FALSE(probe["runtimes"][ze]["pairs"].empty());
  ASSERT_TRUE(probe["runtimes"][ze]["pairs"][0]["answers"]["copy"].is_object());
  ASSERT_TRUE(probe["runtimes"][ze].contains("mirror"));
  drift("probe", probe, [ze](json& j) { j["runtimes"][ze]["status"] = "fine"; });
  drift("probe", probe, [ze](json& j) { j["runtimes"][ze]["runtime"] = "opencl"; });
  drift("probe", probe, [ze](json& j) { j["runtimes"][ze]["devices"][0]["surprise"] = 1; });
  drift("probe", probe, [ze](json& j) { j["runtimes"][ze]["devices"][0]["bdf"] = "0:6.0"; });
  drift("probe", probe, [ze](json& j) { j["runtimes"][ze]["pairs"][0]["answers"]["copy"]["peer"]["result"] = "fine"; });
  drift("probe", probe, [ze](json& j) { j["runtimes"][ze]["pairs"][0]["answers"]["copy"]["host_staged"].erase("gbps"); });
  drift("probe", probe, [ze](json& j) { j["runtimes"][ze]["pairs"][0]["answers"]["copy"] = "exploded"; });
  drift("probe", probe, [ze](json& j) { j["runtimes"][ze]["pairs"][0]["answers"]["access"] = true; });
  drift("probe", probe, [ze](json& j) { j["runtimes"][ze]["mirror"]["runs"][0]["source"] = "guess"; });
  drift("probe", probe, [](json& j) { j["mirror"] = false; });

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
