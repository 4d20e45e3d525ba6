// SPDX-License-Identifier: GPL-2.0-or-later
// Probe results are facts: the runtimes' answers (live through the fake libraries, or stored in a
// snapshot) decide the policy, a copy that corrupts overrides every yes, and the probe checks each
// prediction against the answer (docs/probe.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "p2paudit/errors.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/probe/runtime_facts.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* kH200Dir = "machines/h200x2-firecracker-vm";

std::string h200_sysroot() { return test::data_path(std::string(kH200Dir) + "/sysroot.tar.gz"); }
std::string recording(const std::string& file) {
  return test::data_path(std::string(kH200Dir) + "/copy-2026-11-22/" + file);
}
std::string recorded_probe() { return test::data_path(std::string(kH200Dir) + "/probe-2026-11-22/probe.json"); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A temporary directory holding the H200 fixture unpacked (GNU tar), so a test can add files.
class UnpackedH200 {
 public:
  UnpackedH200() {
    char templ[] = "/tmp/p2paudit-probe-policy-XXXXXX";
    dir_ = mkdtemp(templ);
    EXPECT_EQ(test::run_command("tar -xzf " + test::shell_quote(h200_sysroot()) + " -C " + test::shell_quote(dir_)).status, 0);
  }
  ~UnpackedH200() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }
  void write(const std::string& rel, const std::string& text) const { std::ofstream(dir_ + "/" + rel) << text; }

 private:
  std::string dir_;
};

std::string fakes_env(const std::string& scenario) {
  return "env P2PAUDIT_PROBE_ALLOW_SYSROOT=1 FAKE_NVIDIA_SCENARIO=" + scenario +
         " FAKE_NVIDIA_BDFS=0000:00:06.0,0000:00:07.0 P2PAUDIT_NVML_LIBRARY=" + test::shell_quote(FAKE_NVML_LIBRARY) +
         " P2PAUDIT_CUDA_LIBRARY=" + test::shell_quote(FAKE_CUDA_LIBRARY) + " P2PAUDIT_HIP_LIBRARY=/nonexistent ";
}

// `snapshot --probe --copy` of dir with the fake runtimes of env, then `check --format json PAIR`
// on that snapshot (the stored copy deciding), the snapshot removed after. A failed snapshot is a
// test failure, returned with its output.
test::CommandResult check_stored_copy(const std::string& env, const std::string& dir, const std::string& pair) {
  const std::string snap = dir + "-copy-snapshot.tar.gz";
  auto r = test::run_command(env + P2PAUDIT_TOOL + " --sysroot " + test::shell_quote(dir) +
                             " snapshot --probe --copy --size 1MiB --repeat 1 -o " + test::shell_quote(snap) + " 2>&1");
  if (r.status != 0) {
    ADD_FAILURE() << "snapshot --probe --copy: " << r.output;
    return r;
  }
  r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(snap) + " check --format json " + pair);
  fs::remove(snap);
  return r;
}

const json& gpu_pair(const json& policy, const std::string& provider, const std::string& client) {
  for (const auto& p : policy["pairs"])
    if (p["provider"] == provider && p["client"] == client) return p;
  static const json none;
  ADD_FAILURE() << "no pair " << provider << " -> " << client;
  return none;
}

// The answers recorded on the real 2x H200 VM (NVML: NVLink and read/write OK; CUDA: can access
// peer) decide the GPU pair peer by NVLink, with no flags and no hand-written facts.
TEST(ProbeFacts, RecordedH200AnswersDecidePeerByNvlink) {
  auto document = probe::parse_probe_document(read_file(recorded_probe()), recorded_probe());
  auto facts = probe::runtime_facts(document, recorded_probe());
  Bdf gpu0 = *Bdf::parse("0000:00:06.0"), gpu1 = *Bdf::parse("0000:00:07.0");
  ASSERT_TRUE(facts.facts.pairs.count({gpu0, gpu1}));
  const auto& f = facts.facts.pairs.at({gpu0, gpu1});
  EXPECT_EQ(std::get<bool>(*f.get("vendor.nvlink")), true);
  EXPECT_EQ(std::get<bool>(*f.get("vendor.peer_supported")), true);
  EXPECT_EQ(std::get<std::string>(*f.get("vendor.peer_runtime")), "cuda");
  EXPECT_EQ(facts.asked.front(), "nvml ok");

  Sysroot root = Sysroot::open(h200_sysroot());
  Topology topo = read_topology(root);
  KernelRules kernel = load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo.platform, {});
  auto rules = policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  auto p = *resolve_function(topo, "0000:00:06.0"), c = *resolve_function(topo, "0000:00:07.0");
  auto without = policy::decide_pair(topo, kernel, rules, nullptr, p, c);
  EXPECT_EQ(without.decision.rule, "nvidia-driver-unknown");
  auto with = policy::decide_pair(topo, kernel, rules, &facts.facts, p, c);
  EXPECT_EQ(with.decision.action, policy::Action::kPeer);
  EXPECT_EQ(with.decision.rule, "nvlink");
}

TEST(ProbeFacts, LivePolicyAsksTheRuntimesUnlessNoProbe) {
  std::string tool = std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(h200_sysroot());
  auto r = test::run_command(fakes_env("ok") + tool + " policy --details --format json 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  auto j = json::parse(r.output);
  EXPECT_EQ(j["runtime_probe"]["source"], "live");
  EXPECT_EQ(gpu_pair(j, "0000:00:06.0", "0000:00:07.0")["decision"], "peer");
  EXPECT_EQ(gpu_pair(j, "0000:00:06.0", "0000:00:07.0")["rule"], "nvlink");

  r = test::run_command(fakes_env("ok") + tool + " policy --no-probe --details --format json 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  j = json::parse(r.output);
  EXPECT_EQ(j["runtime_probe"]["source"], "none");
  EXPECT_EQ(gpu_pair(j, "0000:00:06.0", "0000:00:07.0")["rule"], "nvidia-driver-unknown");

  // check: the exit status follows.
  EXPECT_EQ(test::run_command(fakes_env("ok") + tool + " check gpu0 gpu1 >/dev/null 2>&1").status, 0);
  // Unasked, the driver's answer is unknown: staged for now, but it may allow peer.
  EXPECT_EQ(test::run_command(fakes_env("ok") + tool + " check --no-probe gpu0 gpu1 >/dev/null 2>&1").status, 3);
  // A driver that refuses: host-staged by the driver's own answer.
  r = test::run_command(fakes_env("p2p_not_supported") + tool + " policy --details --format json 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(gpu_pair(json::parse(r.output), "0000:00:06.0", "0000:00:07.0")["rule"], "nvidia-driver-refuses");
}

// Without the test switch a sysroot is not this machine: nothing is asked.
TEST(ProbeFacts, ASysrootIsNotProbed) {
  std::string env = fakes_env("ok");
  env.replace(env.find("P2PAUDIT_PROBE_ALLOW_SYSROOT=1"), 30, "P2PAUDIT_PROBE_ALLOW_SYSROOT=0");
  auto r = test::run_command(env + P2PAUDIT_TOOL + " --sysroot " + test::shell_quote(h200_sysroot()) +
                             " policy --details --format json 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  auto j = json::parse(r.output);
  EXPECT_EQ(j["runtime_probe"]["source"], "none");
  EXPECT_NE(j["runtime_probe"]["note"].get<std::string>().find("snapshot --probe"), std::string::npos);
}

// A snapshot taken with --probe keeps the answers; analysing it elsewhere uses them.
TEST(ProbeFacts, SnapshotWithProbeCarriesTheAnswers) {
  UnpackedH200 source;
  std::string out = source.dir() + "/../" + fs::path(source.dir()).filename().string() + "-snap.tar.gz";
  auto r = test::run_command(fakes_env("ok") + P2PAUDIT_TOOL + " --sysroot " + test::shell_quote(source.dir()) +
                             " snapshot --probe -o " + test::shell_quote(out) + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("with the runtimes' answers"), std::string::npos) << r.output;
  // No fakes now: the stored answers decide.
  r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(out) + " policy --details --format json");
  fs::remove(out);
  ASSERT_EQ(r.status, 0) << r.output;
  auto j = json::parse(r.output);
  EXPECT_EQ(j["runtime_probe"]["source"], "snapshot");
  EXPECT_EQ(gpu_pair(j, "0000:00:06.0", "0000:00:07.0")["rule"], "nvlink");
}

// A hand-written file is laid over the runtimes' answers.
TEST(ProbeFacts, VendorFactsFileOverridesTheProbe) {
  UnpackedH200 dir;
  dir.write("p2paudit-probe.json", read_file(recorded_probe()));
  std::string facts = dir.dir() + "/facts.json";
  std::ofstream(facts) << R"({"schema_version": 1, "pairs": [{"provider": "0000:00:06.0", "client": "0000:00:07.0",
    "facts": {"vendor.nvlink": false, "vendor.peer_supported": false}}]})";
  auto r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(dir.dir()) +
                             " policy --details --format json --vendor-facts " + test::shell_quote(facts));
  ASSERT_EQ(r.status, 0) << r.output;
  auto j = json::parse(r.output);
  EXPECT_EQ(gpu_pair(j, "0000:00:06.0", "0000:00:07.0")["rule"], "nvidia-driver-refuses");
  EXPECT_EQ(gpu_pair(j, "0000:00:07.0", "0000:00:06.0")["rule"], "nvlink");  // the file named one direction
}

// A stored document comes from a stranger: every malformation is an error naming the file.
TEST(ProbeFacts, MalformedStoredProbeIsAnErrorNamingTheFile) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "not the probe's JSON"},
      {R"({"schema_version": 2, "runtimes": []})", "schema_version"},
      {R"({"schema_version": 1})", "\"runtimes\" is missing"},
      {R"({"schema_version": 1, "runtimes": [{"runtime": "cuda", "devices": [{"bdf": 7}], "pairs": []}]})",
       "runtimes[0].devices[0].bdf"},
      {R"({"schema_version": 1, "runtimes": [{"runtime": "cuda", "devices": [], "pairs": [{"provider": 0, "client": 1, "answers": {}}]}]})",
       "runtimes[0].pairs[0].provider"},
      {R"({"schema_version": 1, "runtimes": [{"runtime": "cuda", "devices": [{"bdf": "0000:00:06.0"}, {"bdf": "0000:00:07.0"}],
          "pairs": [{"provider": 0, "client": 1, "answers": {"copy": {"peer": {"result": "fine"}}}}]}]})",
       "answers.copy.peer.result"},
      {R"({"schema_version": 1, "runtimes": [{"runtime": "cuda", "devices": [{"bdf": "0000:00:06.0"}, {"bdf": "0000:00:07.0"}],
          "pairs": [{"provider": 0, "client": 1, "answers": {"copy": {"peer": {"result": "verified"},
          "peer_paths": {"kernel_stores": {"result": "fine", "windows": []}}}}}]}]})",
       "answers.copy.peer_paths.kernel_stores.result"},
      {R"({"schema_version": 1, "runtimes": [{"runtime": "cuda", "devices": [{"bdf": "0000:00:06.0"}, {"bdf": "0000:00:07.0"}],
          "pairs": [{"provider": 0, "client": 1, "answers": {"copy": {"peer": {"result": "verified"},
          "peer_paths": {"atomics": {"result": "wrong", "windows": [{"result": "wrong", "offset": "far"}]}}}}}]}]})",
       "answers.copy.peer_paths.atomics.windows[].offset"},
      {std::string(100, '[') + std::string(100, ']'), "nested deeper"},
  };
  UnpackedH200 dir;
  for (const auto& [text, expected] : cases) {
    dir.write("p2paudit-probe.json", text);
    auto r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(dir.dir()) + " policy 2>&1");
    EXPECT_EQ(r.status, 2) << text;
    EXPECT_NE(r.output.find("p2paudit-probe.json"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << text << "\n" << r.output;
  }
  // A directory where the file should be is refused too.
  fs::remove(dir.dir() + "/p2paudit-probe.json");
  fs::create_directory(dir.dir() + "/p2paudit-probe.json");
  auto r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(dir.dir()) + " policy 2>&1");
  EXPECT_EQ(r.status, 2) << r.output;
}

// Copy results as facts: the worst result of any runtime wins, and a corrupt copy overrides the
// NVLink "yes".
TEST(ProbeFacts, CorruptCopyOverridesEveryYes) {
  json doc = json::parse(read_file(recorded_probe()));
  for (auto& rt : doc["runtimes"])
    if (rt["runtime"] == "cuda")
      for (auto& p : rt["pairs"])
        p["answers"]["copy"] = {{"size_bytes", 1 << 20}, {"repeat", 2},
                                {"peer", {{"result", "corrupt"}, {"gbps", nullptr}, {"seconds", {0.1, 0.1}},
                                          {"mismatched_bytes", 4096}, {"first_mismatch", 0}}},
                                {"host_staged", {{"result", "verified"}, {"gbps", 20.5}, {"seconds", {0.1, 0.1}}}}};
  UnpackedH200 dir;
  dir.write("p2paudit-probe.json", doc.dump());
  auto r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(dir.dir()) + " policy --details --format json");
  ASSERT_EQ(r.status, 0) << r.output;
  const json corrupt = json::parse(r.output);
  const auto& pair = gpu_pair(corrupt, "0000:00:06.0", "0000:00:07.0");
  EXPECT_EQ(pair["decision"], "host_staged");
  EXPECT_EQ(pair["rule"], "copy-corrupt");
  EXPECT_NE(pair["reason"].get<std::string>().find("DATA CORRUPTION"), std::string::npos);
  EXPECT_NE(pair["reason"].get<std::string>().find("4096 bytes differed"), std::string::npos);

  // Verified: peer, saying it was measured (NVLink would say so too, so take NVLink away).
  for (auto& rt : doc["runtimes"])
    for (auto& p : rt["pairs"]) {
      if (rt["runtime"] == "nvml") p["answers"]["nvlink"] = "not_supported";
      if (rt["runtime"] == "cuda") {
        p["answers"]["can_access_peer"] = "not_supported";
        p["answers"]["copy"]["peer"] = {{"result", "verified"}, {"gbps", 391.5}, {"seconds", {0.1}}};
      }
    }
  dir.write("p2paudit-probe.json", doc.dump());
  r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(dir.dir()) + " policy --details --format json");
  ASSERT_EQ(r.status, 0) << r.output;
  const json after = json::parse(r.output);
  const auto& verified = gpu_pair(after, "0000:00:06.0", "0000:00:07.0");
  // The driver's own "no" outranks a passing copy for NVIDIA (its rules come first).
  EXPECT_EQ(verified["rule"], "nvidia-driver-refuses");
}

// Seed case 1: two Arc Pro B70, each with its card's switch, on separate root ports of a Rocket
// Lake-S client host (host bridge 8086:4c43, not whitelisted), kernel 7.0. Level Zero offers peer
// access and the peer copy fails with ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY (0x70000003).
class B70SeedMachine {
 public:
  B70SeedMachine() {
    s_.write("proc/sys/kernel/osrelease", "7.0.0-22-generic\n");
    s_.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n");
    s_.write("boot/config-7.0.0-22-generic", "CONFIG_PCI_P2PDMA=y\n");
    s_.function("pci0000:00/0000:00:00.0", test::ConfigBytes(0x8086, 0x4c43, 0x060000, 9).bytes());
    card("0000:00:01.0", 1);
    card("0000:00:06.0", 5);
  }
  std::string dir() const { return s_.str(); }

 private:
  // Root port -> card upstream port -> card downstream port -> GPU on buses first..first+2.
  void card(const std::string& port, uint8_t first) {
    auto bdf = [](uint8_t bus, const char* devfn) { return fmt::format("0000:{:02x}:{}", bus, devfn); };
    std::string rp = "pci0000:00/" + port, usp = rp + "/" + bdf(first, "00.0"), dsp = usp + "/" + bdf(first + 1, "01.0");
    s_.function(rp, test::ConfigBytes(0x8086, 0x4c01, 0x060400, 4, true).buses(0, first, first + 2).bytes());
    s_.function(usp, test::ConfigBytes(0x8086, 0xe2ff, 0x060400, 5, true).buses(first, first + 1, first + 2).bytes());
    s_.function(dsp, test::ConfigBytes(0x8086, 0xe2f0, 0x060400, 6, true).buses(first + 1, first + 2, first + 2).bytes());
    test::gpu_with_bar(s_, dsp + "/" + bdf(first + 2, "00.0"), 0x8086, 0xe223, "xe", uint64_t{first} << 36, 16ull << 30);
  }
  test::SysrootDir s_;
};

std::string ze_env(const std::string& scenario) {
  return "env P2PAUDIT_PROBE_ALLOW_SYSROOT=1 ZE_ENABLE_ALT_DRIVERS=" + test::shell_quote(FAKE_ZE_DRIVER) +
         " FAKE_ZE_SCENARIO=" + scenario + " FAKE_ZE_BDFS=0000:03:00.0,0000:07:00.0 FAKE_ZE_DEVICE_ID=e223"
         " P2PAUDIT_NVML_LIBRARY=/nonexistent"
         " P2PAUDIT_CUDA_LIBRARY=/nonexistent P2PAUDIT_HIP_LIBRARY=/nonexistent ";
}

TEST(ProbeReality, OutOfDeviceMemoryOnTheB70SeedIsTheKernelsRefusal) {
  B70SeedMachine machine;
  auto r = test::run_command(ze_env("copy_oodm") + P2PAUDIT_TOOL + " --sysroot " + test::shell_quote(machine.dir()) +
                             " probe --copy --size 1MiB --repeat 1 --format json 2>/dev/null");
  EXPECT_EQ(r.status, 1) << "a copy that failed is not verified";
  auto j = json::parse(r.output);
  const json* check = nullptr;
  for (const auto& c : j["reality"])
    if (c["provider"] == "0000:03:00.0" && c["client"] == "0000:07:00.0") check = &c;
  ASSERT_TRUE(check) << j["reality"].dump(2);
  EXPECT_EQ((*check)["kernel"], "NOT_SUPPORTED");
  EXPECT_EQ((*check)["runtime_says"], "yes");
  EXPECT_TRUE((*check)["disagreement"].get<bool>());
  std::string why = (*check)["explanation"];
  EXPECT_NE(why.find("the kernel refused the peer mapping"), std::string::npos) << why;
  EXPECT_NE(why.find("8086:4c43"), std::string::npos) << why;
  EXPECT_NE(why.find("0x70000003"), std::string::npos) << why;
  ASSERT_EQ((*check)["kernel_log"].size(), 1u);
  EXPECT_EQ((*check)["kernel_log"][0],
            "xe 0000:07:00.0: cannot be used for peer-to-peer DMA as the client and provider (0000:03:00.0) do not "
            "share an upstream bridge or whitelisted host bridge");

  // The policy that follows: host-staged, by the kernel's refusal (the copy failure agrees).
  r = test::run_command(ze_env("copy_oodm") + P2PAUDIT_TOOL + " --sysroot " + test::shell_quote(machine.dir()) +
                        " check --format json 0000:03:00.0 0000:07:00.0 2>/dev/null");
  // A plain no (exit 1): NVLink and XGMI join only NVIDIA or AMD GPUs, so no unknown fabric fact
  // can turn this Intel pair's refusal into peer.
  EXPECT_EQ(r.status, 1);
  auto d = json::parse(r.output);
  EXPECT_EQ(d["answer"], "no");
  EXPECT_EQ(d["decision"], "host_staged");
  EXPECT_EQ(d["rule"], "kernel-refuses");
  EXPECT_EQ(d["runtime_probe"]["source"], "live");
}

// The reality check reads the answers runtime_facts() bound to the tree: a runtime device whose
// PCI IDs are not those of the function at its address is a finding, and its answers are checked
// against no prediction.
TEST(ProbeReality, AnswersOfADeviceThatIsNotTheFunctionThereAreNotChecked) {
  B70SeedMachine machine;
  auto r = test::run_command(ze_env("ok") + "FAKE_ZE_DEVICE_ID=0bad " + P2PAUDIT_TOOL + " --sysroot " +
                             test::shell_quote(machine.dir()) + " probe --format json 2>/dev/null");
  auto j = json::parse(r.output, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.output;
  size_t answered = 0;
  for (const auto& rt : j["runtimes"])
    if (rt["runtime"] == "level_zero") answered = rt["pairs"].size();
  EXPECT_EQ(answered, 2u) << "the runtime answered both pairs";
  EXPECT_TRUE(j["reality"].empty()) << j["reality"].dump(2);
}

TEST(ProbeReality, CorruptLevelZeroCopyIsTheLoudestLineAndDecidesHostStaged) {
  B70SeedMachine machine;
  std::string dir = machine.dir();
  auto r = test::run_command(ze_env("copy_corrupt") + P2PAUDIT_TOOL + " --sysroot " + test::shell_quote(dir) +
                             " probe --copy --size 1MiB --repeat 1 2>/dev/null");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output.rfind("!!! DATA CORRUPTION: level_zero peer copy", 0), 0u) << r.output;
  // Stored in a snapshot, the corrupt copy decides every analysis of it, with that reason.
  r = check_stored_copy(ze_env("copy_corrupt"), dir, "0000:03:00.0 0000:07:00.0");
  EXPECT_EQ(r.status, 1);
  auto d = json::parse(r.output);
  // Ahead of every other rule, the kernel's refusal included.
  EXPECT_EQ(d["rule"], "copy-corrupt");
  EXPECT_EQ(d["decision"], "host_staged");
  EXPECT_EQ(d["runtime_probe"]["source"], "snapshot");
  EXPECT_EQ(d["reason"].get<std::string>().rfind("DATA CORRUPTION", 0), 0u) << d["reason"];
}

TEST(ProbeReality, HangAndCrashInTheCopyAreSurvivedAndDecideHostStaged) {
  B70SeedMachine machine;
  for (const char* scenario : {"copy_hang", "copy_crash"}) {
    auto start = std::chrono::steady_clock::now();
    auto r = test::run_command(ze_env(scenario) + P2PAUDIT_TOOL + " --sysroot " + test::shell_quote(machine.dir()) +
                               " probe --copy --size 1MiB --repeat 1 --timeout 2 --format json 2>/dev/null");
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.status, 1) << scenario;
    EXPECT_LT(seconds, 60) << scenario;
    auto j = json::parse(r.output);
    auto facts = probe::runtime_facts(j, scenario);
    const auto& f = facts.facts.pairs.at({*Bdf::parse("0000:03:00.0"), *Bdf::parse("0000:07:00.0")});
    EXPECT_EQ(std::get<std::string>(*f.get("vendor.copy_result")), "failed") << scenario;
    EXPECT_NE(std::get<std::string>(*f.get("vendor.copy_error")).find(std::string(scenario) == "copy_hang" ? "hung" : "crashed"),
              std::string::npos);
    // The decision that follows: the failed copy, ahead of every other rule.
    Sysroot root = Sysroot::open(machine.dir());
    Topology topo = read_topology(root);
    KernelRules kernel = load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo.platform, {});
    auto rules = policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
    auto d = policy::decide_pair(topo, kernel, rules, &facts.facts, *resolve_function(topo, "0000:03:00.0"),
                                 *resolve_function(topo, "0000:07:00.0"));
    EXPECT_EQ(d.decision.rule, "copy-failed") << scenario;
    EXPECT_EQ(d.decision.action, policy::Action::kHostStaged);
  }
}

// The NVIDIA fakes: a corrupt CUDA peer copy stored by snapshot --probe --copy overrides NVLink.
TEST(ProbeReality, CorruptCudaCopyOverridesNvlinkInTheSnapshot) {
  UnpackedH200 source;
  auto r = check_stored_copy(fakes_env("copy_corrupt"), source.dir(), "gpu0 gpu1");
  EXPECT_EQ(r.status, 1);
  auto d = json::parse(r.output);
  EXPECT_EQ(d["rule"], "copy-corrupt");
  EXPECT_EQ(d["facts"]["vendor.nvlink"], true) << "NVLink said yes, and lost";
  EXPECT_EQ(d["facts"]["vendor.copy_runtime"], "cuda");
}

// Kernel peer stores lost while the copy engine delivers (tinygrad/open-gpu-kernel-modules#44): the
// snapshot's stored probe makes the pair host-staged by kernel-peer-path-failed, ahead of NVLink and
// the verified copy, naming the path; where the paths verify (or atomics are not supported) the
// rule stays out of it.
TEST(ProbeReality, KernelPeerPathFailureStagesThePairDespiteAVerifiedCopy) {
  UnpackedH200 source;
  for (const char* scenario : {"kernel_stores_dropped", "no_peer_atomics"}) {
    auto r = check_stored_copy(fakes_env(scenario), source.dir(), "gpu0 gpu1");
    auto d = json::parse(r.output);
    const auto& facts = d["facts"];
    EXPECT_EQ(facts["vendor.copy_result"], "verified") << scenario << ": the copy engine delivered";
    if (std::string(scenario) == "kernel_stores_dropped") {
      EXPECT_EQ(r.status, 1);
      EXPECT_EQ(d["rule"], "kernel-peer-path-failed");
      EXPECT_EQ(d["decision"], "host_staged");
      EXPECT_EQ(facts["vendor.kernel_store_result"], "dropped");
      EXPECT_EQ(facts["vendor.kernel_load_result"], "verified");
      EXPECT_EQ(facts["vendor.peer_paths_failed"], json::array({"kernel_stores"}));
      EXPECT_NE(facts["vendor.peer_path_error"].get<std::string>().find("still the sentinel"), std::string::npos)
          << facts["vendor.peer_path_error"];
      EXPECT_NE(d["remedy"].get<std::string>().find("NCCL_P2P_DISABLE=1"), std::string::npos) << d["remedy"];
    } else {
      EXPECT_EQ(facts["vendor.atomic_result"], "not_supported");
      EXPECT_EQ(facts["vendor.kernel_store_result"], "verified");
      EXPECT_EQ(facts["vendor.peer_paths_failed"], json::array());
      EXPECT_NE(d["rule"], "kernel-peer-path-failed");
    }
  }
}

// A slow peer path from the fake runtime itself (not a written document): the verified peer copy
// slower than staging through host memory stages the pair, with both numbers.
TEST(ProbeReality, APeerCopySlowerThanStagingStagesThePair) {
  UnpackedH200 source;
  auto r = check_stored_copy(fakes_env("peer_copy_slow"), source.dir(), "gpu0 gpu1");
  auto d = json::parse(r.output);
  const auto& facts = d["facts"];
  EXPECT_EQ(facts["vendor.copy_result"], "verified");
  ASSERT_TRUE(facts["vendor.copy_gbps"].is_number() && facts["vendor.copy_staged_gbps"].is_number()) << facts.dump();
  EXPECT_LT(facts["vendor.copy_gbps"].get<double>(), facts["vendor.copy_staged_gbps"].get<double>());
  EXPECT_EQ(d["rule"], "copy-slower-than-staged");
  EXPECT_EQ(d["decision"], "host_staged");
  EXPECT_EQ(r.status, 1);
}

// NVML's memory size is a device fact: the BAR comparison of the vendor gates can be made.
TEST(ProbeFacts, NvmlMemorySizeMeetsTheSysfsBar) {
  json doc = json::parse(read_file(recording("probe-copy.json")));
  auto facts = probe::runtime_facts(doc, "recording");
  Sysroot root = Sysroot::open(h200_sysroot());
  Topology topo = read_topology(root);
  KernelRules kernel = load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo.platform, {});
  auto rules = policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  size_t gpu0 = *resolve_function(topo, "gpu0"), nic0 = *resolve_function(topo, "nic0");
  auto d = policy::decide_pair(topo, kernel, rules, &facts.facts, gpu0, nic0);
  EXPECT_EQ(std::get<std::int64_t>(*d.facts.get("provider.memory_size")), std::int64_t{143771} << 20);
  EXPECT_EQ(std::get<bool>(*d.facts.get("provider.bar_covers_memory")), true) << "a 256 GiB BAR1";
  // A GPU whose memory outgrows its BAR (as NVML would report it) is caught.
  for (auto& rt : doc["runtimes"])
    if (rt["runtime"] == "nvml") rt["devices"][0]["memory_total_bytes"] = std::int64_t{512} << 30;
  facts = probe::runtime_facts(doc, "recording");
  d = policy::decide_pair(topo, kernel, rules, &facts.facts, gpu0, nic0);
  EXPECT_EQ(std::get<bool>(*d.facts.get("provider.bar_covers_memory")), false);
}

// The real 2x H200 run (copy-2026-11-22/SOURCE.md): policy with no flags decides the GPU pair peer
// by NVLink, the copy test is verified both ways, and its peer bandwidth is within 10% of the plain
// CUDA peer copy measured in the same run.

TEST(ProbeRecording, H200PolicyWithNoFlagsIsPeerByNvlink) {
  json policy = json::parse(read_file(recording("policy.json")));
  EXPECT_EQ(policy["runtime_probe"]["source"], "live");
  for (const auto& [p, c] : {std::pair{"0000:00:06.0", "0000:00:07.0"}, std::pair{"0000:00:07.0", "0000:00:06.0"}}) {
    const auto& pair = gpu_pair(policy, p, c);
    EXPECT_EQ(pair["decision"], "peer");
    EXPECT_EQ(pair["rule"], "nvlink");
  }
  EXPECT_EQ(read_file(recording("check.txt")).rfind("yes: 0000:00:06.0 -> 0000:00:07.0: peer", 0), 0u);
}

// "peer        0->1: 389.02 GB/s ..." lines of cuda-peer-copy: direction -> GB/s (the first run).
std::map<std::string, double> reference_bandwidth(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    char direction[8] = {};
    double gbps = 0;
    if (std::sscanf(line.c_str(), "peer %7s %lf GB/s", direction, &gbps) == 2) out.emplace(direction, gbps);
  }
  return out;
}

TEST(ProbeRecording, H200CopyIsVerifiedAtThePlainCudaPeerBandwidth) {
  json probe = json::parse(read_file(recording("probe-copy.json")));
  auto reference = reference_bandwidth(read_file(recording("cuda-peer-copy.txt")));
  ASSERT_EQ(reference.size(), 2u);
  int checked = 0;
  for (const auto& rt : probe["runtimes"]) {
    if (rt["runtime"] != "cuda") continue;
    for (const auto& p : rt["pairs"]) {
      const auto& copy = p["answers"]["copy"];
      EXPECT_EQ(copy["peer"]["result"], "verified");
      EXPECT_EQ(copy["host_staged"]["result"], "verified");
      std::string direction = fmt::format("{}->{}:", p["provider"].get<int>(), p["client"].get<int>());
      ASSERT_TRUE(reference.count(direction)) << direction;
      double ours = copy["peer"]["gbps"], plain = reference[direction];
      EXPECT_NEAR(ours, plain, 0.10 * plain) << direction;
      EXPECT_GT(ours, 5 * copy["host_staged"]["gbps"].get<double>()) << "NVLink, not host memory";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2);
  EXPECT_TRUE(probe["data_corruption"].empty());
}

// The snapshot taken there, analysed here: the stored answers and the verified copy are facts.
TEST(ProbeRecording, H200SnapshotWithProbeDecidesTheSameHere) {
  auto r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " +
                             test::shell_quote(recording("snapshot-probe.tar.gz")) + " policy --details --format json");
  ASSERT_EQ(r.status, 0) << r.output;
  json j = json::parse(r.output);
  EXPECT_EQ(j["runtime_probe"]["source"], "snapshot");
  const auto& pair = gpu_pair(j, "0000:00:06.0", "0000:00:07.0");
  EXPECT_EQ(pair["rule"], "nvlink");
  EXPECT_EQ(pair["facts"]["vendor.copy_result"], "verified");
  EXPECT_EQ(pair["facts"]["vendor.copy_runtime"], "cuda");
  EXPECT_GT(pair["facts"]["vendor.copy_gbps"].get<double>(), 300);
}

// probe --mirror stored by snapshot --probe: the measured host mirror is what the advisory reads.
TEST(ProbeReality, MeasuredHostMirrorWarnsFromTheSnapshot) {
  B70SeedMachine machine;
  std::string dir = machine.dir(), snap = dir + "-mirror.tar.gz";
  auto r = test::run_command(ze_env("mirror") + P2PAUDIT_TOOL + " --sysroot " + test::shell_quote(dir) +
                             " snapshot --probe --mirror --size 16MiB -o " + test::shell_quote(snap) + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(snap) +
                        " check --format json 0000:03:00.0 0000:07:00.0");
  fs::remove(snap);
  auto d = json::parse(r.output);
  EXPECT_GE(d["facts"]["runtime.host_mirror_per_byte"].get<double>(), 0.8);
  EXPECT_NE(std::find(d["rules"].begin(), d["rules"].end(), "measured-host-mirror"), d["rules"].end()) << d["rules"];
}

}  // namespace
}  // namespace p2paudit
