// SPDX-License-Identifier: GPL-2.0-or-later
// libp2paudit through its C header alone: the same answers as the command line on every capture,
// and every failure a status with a message that names the problem.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <thread>
#include <nlohmann/json.hpp>

#include "p2paudit.h"
#include "capi_names.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using p2paudit::test::decision_name;
using p2paudit::test::verdict_name;
using json = nlohmann::json;
using p2paudit::test::data_path;

json tool_json(const std::string& sysroot, const std::string& args) {
  auto r = p2paudit::test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " +
                                       p2paudit::test::shell_quote(sysroot) + " " + args + " 2>/dev/null");
  EXPECT_EQ(r.status, 0) << args;
  return r.status == 0 ? json::parse(r.output) : json();
}

std::string h200x4() { return data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz"); }

struct Closer {
  void operator()(p2paudit_machine* m) const { p2paudit_close(m); }
};
using Machine = std::unique_ptr<p2paudit_machine, Closer>;

struct StringFree {
  void operator()(char* s) const { p2paudit_string_free(s); }
};
using CString = std::unique_ptr<char, StringFree>;

Machine open_or_fail(const std::string& sysroot, const char* rules_dir = nullptr) {
  p2paudit_machine* m = nullptr;
  char* error = nullptr;
  p2paudit_status s = p2paudit_open(sysroot.c_str(), rules_dir, &m, &error);
  CString owned(error);
  EXPECT_EQ(s, P2PAUDIT_OK) << sysroot << ": " << (error ? error : "");
  return Machine(m);
}

// The open's status and message when it is expected to fail.
std::pair<p2paudit_status, std::string> open_error(const char* sysroot, const char* rules_dir = nullptr) {
  p2paudit_machine* m = reinterpret_cast<p2paudit_machine*>(1);  // must be reset to NULL
  char* error = nullptr;
  p2paudit_status s = p2paudit_open(sysroot, rules_dir, &m, &error);
  CString owned(error);
  EXPECT_EQ(m, nullptr);
  p2paudit_close(m);
  return {s, error ? error : ""};
}

// "10de:2335", as the command line's vendor_device.
std::string fmt_ids(const p2paudit_device& d) {
  char text[16];
  snprintf(text, sizeof text, "%04x:%04x", d.vendor_id, d.device_id);
  return text;
}

TEST(CApi, VersionIsTheProjects) { EXPECT_STREQ(p2paudit_version(), P2PAUDIT_EXPECTED_VERSION); }

class CApiAgreesWithCli : public testing::TestWithParam<std::string> {};

TEST_P(CApiAgreesWithCli, DevicesVerdictsAndDecisions) {
  const std::string sysroot = GetParam();
  Machine m = open_or_fail(sysroot);
  ASSERT_TRUE(m);

  json all = tool_json(sysroot, "matrix --all --format json");
  ASSERT_EQ(p2paudit_device_count(m.get()), all["devices"].size());
  for (size_t i = 0; i < all["devices"].size(); ++i) {
    const json& cli = all["devices"][i];
    p2paudit_device d;
    ASSERT_EQ(p2paudit_device_at(m.get(), i, &d), P2PAUDIT_OK);
    EXPECT_EQ(d.bdf, cli["bdf"].get<std::string>());
    EXPECT_EQ(d.name, cli["name"].get<std::string>());
    EXPECT_EQ(fmt_ids(d), cli["vendor_device"].get<std::string>()) << d.bdf;
    size_t found = SIZE_MAX;
    ASSERT_EQ(p2paudit_device_find(m.get(), d.bdf, &found), P2PAUDIT_OK);
    EXPECT_EQ(found, i);
  }

  json matrix = tool_json(sysroot, "matrix --format json");
  for (const json& pair : matrix["pairs"]) {
    auto p = pair["provider"].get<std::string>(), c = pair["client"].get<std::string>();
    p2paudit_verdict v = P2PAUDIT_VERDICT_UNKNOWN;
    ASSERT_EQ(p2paudit_pair(m.get(), p.c_str(), c.c_str(), &v, nullptr, nullptr), P2PAUDIT_OK)
        << p2paudit_last_error(m.get());
    EXPECT_EQ(verdict_name(v), pair["map_type"].get<std::string>()) << p << " -> " << c;
  }

  // The library never asks the runtimes; on a capture without stored answers neither does the tool.
  json policy = tool_json(sysroot, "policy --no-probe --format json");
  ASSERT_EQ(policy["pairs"].size(), matrix["pairs"].size());
  for (const json& pair : policy["pairs"]) {
    auto p = pair["provider"].get<std::string>(), c = pair["client"].get<std::string>();
    p2paudit_decision d = P2PAUDIT_DECISION_UNKNOWN;
    ASSERT_EQ(p2paudit_pair(m.get(), p.c_str(), c.c_str(), nullptr, &d, nullptr), P2PAUDIT_OK);
    EXPECT_EQ(decision_name(d), pair["decision"].get<std::string>()) << p << " -> " << c;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CApiAgreesWithCli, testing::ValuesIn(p2paudit::test::fixture_sysroots()),
                         [](const auto& info) { return p2paudit::test::case_name(info.param); });

TEST(CApi, EveryFixtureIsCompared) { EXPECT_GE(p2paudit::test::fixture_sysroots().size(), 3u); }

TEST(CApi, DetailsAreTheCheckCommandsObjectWithTheKernelsReasoning) {
  Machine m = open_or_fail(h200x4());
  ASSERT_TRUE(m);
  char* raw = nullptr;
  p2paudit_verdict v;
  p2paudit_decision d;
  ASSERT_EQ(p2paudit_pair(m.get(), "gpu0", "gpu1", &v, &d, &raw), P2PAUDIT_OK);
  CString details(raw);
  ASSERT_NE(raw, nullptr);
  json lib = json::parse(raw);
  json cli = tool_json(h200x4(), "check gpu0 gpu1 --no-probe --require host_staged --format json");
  for (const char* key : {"provider", "client", "decision", "rule", "authority", "reason", "remedy", "kernel", "facts"})
    EXPECT_EQ(lib[key], cli[key]) << key;
  EXPECT_EQ(lib["decision"], decision_name(d));
  EXPECT_EQ(lib["kernel"]["map_type"], verdict_name(v));
  EXPECT_EQ(lib["verdict"]["map_type"], verdict_name(v));
  EXPECT_FALSE(lib["verdict"]["reason"].get<std::string>().empty());
}

TEST(CApi, KernelReleaseIsTheCaptures) {
  Machine m = open_or_fail(h200x4());
  ASSERT_TRUE(m);
  json matrix = tool_json(h200x4(), "matrix --format json");
  EXPECT_EQ(p2paudit_kernel_release(m.get()), matrix["kernel"]["release"].get<std::string>());
}

TEST(CApi, MissingAndCorruptSysrootsAreInputErrorsNamingThePath) {
  auto [status, message] = open_error("/nonexistent/p2paudit-capi-test");
  EXPECT_EQ(status, P2PAUDIT_ERROR_INPUT);
  EXPECT_NE(message.find("/nonexistent/p2paudit-capi-test"), std::string::npos) << message;

  fs::path corrupt = fs::path(testing::TempDir()) / "capi-corrupt.tar.gz";
  std::ofstream(corrupt) << "not a gzip stream";
  std::tie(status, message) = open_error(corrupt.c_str());
  EXPECT_EQ(status, P2PAUDIT_ERROR_INPUT);
  EXPECT_NE(message.find(corrupt.string()), std::string::npos) << message;
}

TEST(CApi, ABrokenRulesDirectoryIsAnInputErrorNamingTheFile) {
  fs::path rules = fs::path(testing::TempDir()) / "capi-rules";
  fs::remove_all(rules);
  fs::copy(P2PAUDIT_SOURCE_RULES_DIR, rules, fs::copy_options::recursive);
  fs::path policy = rules / "policy" / "default.yaml";
  ASSERT_TRUE(fs::exists(policy));
  Machine good = open_or_fail(h200x4(), rules.c_str());
  EXPECT_TRUE(good);
  std::ofstream(policy, std::ios::trunc) << "rules: [\n";
  auto [status, message] = open_error(h200x4().c_str(), rules.c_str());
  EXPECT_EQ(status, P2PAUDIT_ERROR_INPUT);
  EXPECT_NE(message.find(policy.string()), std::string::npos) << message;
}

TEST(CApi, RulesDirectoryFromTheEnvironmentWhenNoneIsGiven) {
  fs::path empty = fs::path(testing::TempDir()) / "capi-no-rules";
  fs::create_directories(empty);
  ASSERT_EQ(setenv("P2PAUDIT_RULES_DIR", empty.c_str(), 1), 0);
  auto [status, message] = open_error(h200x4().c_str());
  unsetenv("P2PAUDIT_RULES_DIR");
  EXPECT_EQ(status, P2PAUDIT_ERROR_INPUT);
  EXPECT_NE(message.find(empty.string()), std::string::npos) << message;
  EXPECT_TRUE(open_or_fail(h200x4()));  // without it: the source tree's rules beside the build tree
}

TEST(CApi, NullArgumentsAreArgumentErrors) {
  EXPECT_EQ(open_error(nullptr).first, P2PAUDIT_ERROR_ARGUMENT);
  char* error = nullptr;
  EXPECT_EQ(p2paudit_open(h200x4().c_str(), nullptr, nullptr, &error), P2PAUDIT_ERROR_ARGUMENT);
  CString owned(error);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("NULL"), std::string::npos) << error;
  EXPECT_EQ(p2paudit_open(nullptr, nullptr, nullptr, nullptr), P2PAUDIT_ERROR_ARGUMENT);  // no message wanted

  p2paudit_device d;
  size_t index;
  EXPECT_EQ(p2paudit_device_count(nullptr), 0u);
  EXPECT_EQ(p2paudit_device_at(nullptr, 0, &d), P2PAUDIT_ERROR_ARGUMENT);
  EXPECT_EQ(p2paudit_device_find(nullptr, "gpu0", &index), P2PAUDIT_ERROR_ARGUMENT);
  EXPECT_EQ(p2paudit_pair(nullptr, "gpu0", "gpu1", nullptr, nullptr, nullptr), P2PAUDIT_ERROR_ARGUMENT);
  EXPECT_STRNE(p2paudit_last_error(nullptr), "");
  p2paudit_close(nullptr);
  p2paudit_string_free(nullptr);

  Machine m = open_or_fail(h200x4());
  ASSERT_TRUE(m);
  EXPECT_STREQ(p2paudit_last_error(m.get()), "");
  EXPECT_EQ(p2paudit_device_at(m.get(), 0, nullptr), P2PAUDIT_ERROR_ARGUMENT);
  EXPECT_NE(std::string(p2paudit_last_error(m.get())).find("device pointer is NULL"), std::string::npos);
  EXPECT_EQ(p2paudit_device_find(m.get(), "gpu0", nullptr), P2PAUDIT_ERROR_ARGUMENT);
  EXPECT_EQ(p2paudit_device_find(m.get(), nullptr, &index), P2PAUDIT_ERROR_ARGUMENT);
  EXPECT_EQ(p2paudit_pair(m.get(), nullptr, "gpu1", nullptr, nullptr, nullptr), P2PAUDIT_ERROR_ARGUMENT);
  EXPECT_NE(std::string(p2paudit_last_error(m.get())).find("provider is NULL"), std::string::npos);
  EXPECT_EQ(p2paudit_pair(m.get(), "gpu0", nullptr, nullptr, nullptr, nullptr), P2PAUDIT_ERROR_ARGUMENT);
  EXPECT_NE(std::string(p2paudit_last_error(m.get())).find("client is NULL"), std::string::npos);
}

TEST(CApi, UnknownDevicesAndIndexesNameWhatWasAsked) {
  Machine m = open_or_fail(h200x4());
  ASSERT_TRUE(m);
  p2paudit_verdict v = P2PAUDIT_VERDICT_BUS_ADDR;
  p2paudit_decision d = P2PAUDIT_DECISION_PEER;
  char* details = reinterpret_cast<char*>(1);
  EXPECT_EQ(p2paudit_pair(m.get(), "gpu0", "0000:ee:1f.7", &v, &d, &details), P2PAUDIT_ERROR_NO_DEVICE);
  EXPECT_NE(std::string(p2paudit_last_error(m.get())).find("'0000:ee:1f.7'"), std::string::npos);
  EXPECT_EQ(v, P2PAUDIT_VERDICT_UNKNOWN);
  EXPECT_EQ(d, P2PAUDIT_DECISION_UNKNOWN);
  EXPECT_EQ(details, nullptr);
  size_t index = 0;
  EXPECT_EQ(p2paudit_device_find(m.get(), "not-a-bdf", &index), P2PAUDIT_ERROR_NO_DEVICE);
  EXPECT_NE(std::string(p2paudit_last_error(m.get())).find("'not-a-bdf'"), std::string::npos);

  size_t count = p2paudit_device_count(m.get());
  p2paudit_device dev;
  EXPECT_EQ(p2paudit_device_at(m.get(), count, &dev), P2PAUDIT_ERROR_ARGUMENT);
  EXPECT_NE(std::string(p2paudit_last_error(m.get())).find("index " + std::to_string(count)), std::string::npos);
  EXPECT_EQ(dev.bdf, nullptr);
}

TEST(CApi, EveryStatusHasItsOwnText) {
  std::set<std::string> texts;
  for (auto s : {P2PAUDIT_OK, P2PAUDIT_ERROR_ARGUMENT, P2PAUDIT_ERROR_INPUT, P2PAUDIT_ERROR_NO_DEVICE,
                 P2PAUDIT_ERROR_MEMORY, P2PAUDIT_ERROR_INTERNAL})
    texts.insert(p2paudit_status_string(s));
  EXPECT_EQ(texts.size(), 6u);
}

TEST(CApi, HandlesAreIndependentAcrossThreads) {
  // One answer per thread, each from its own handle, compared with one read alone.
  Machine alone = open_or_fail(h200x4());
  ASSERT_TRUE(alone);
  char* raw = nullptr;
  ASSERT_EQ(p2paudit_pair(alone.get(), "gpu0", "gpu3", nullptr, nullptr, &raw), P2PAUDIT_OK);
  CString expected(raw);
  std::vector<std::string> answers(4);
  std::vector<std::thread> threads;
  for (auto& answer : answers)
    threads.emplace_back([&answer] {
      p2paudit_machine* m = nullptr;
      if (p2paudit_open(h200x4().c_str(), nullptr, &m, nullptr) != P2PAUDIT_OK) return;
      char* details = nullptr;
      if (p2paudit_pair(m, "gpu0", "gpu3", nullptr, nullptr, &details) == P2PAUDIT_OK) answer = details;
      p2paudit_string_free(details);
      p2paudit_close(m);
    });
  for (auto& t : threads) t.join();
  for (const auto& answer : answers) EXPECT_EQ(answer, expected.get());
}

// A verified peer copy slower than the same copy staged through host memory (rule
// copy-slower-than-staged, docs/policy.md): the library does not answer peer either.
TEST(CApi, APeerCopySlowerThanStagingIsNotPeer) {
  const fs::path dir = fs::path(testing::TempDir()) / "capi-slow-peer";
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_EQ(p2paudit::test::run_command("tar -xzf " +
                                        p2paudit::test::shell_quote(data_path("machines/h200x2-firecracker-vm/sysroot.tar.gz")) +
                                        " -C " + p2paudit::test::shell_quote(dir.string()))
                .status,
            0);
  std::ifstream in(data_path("machines/h200x2-firecracker-vm/copy-2026-11-22/probe-copy.json"));
  json doc = json::parse(in);
  for (auto& rt : doc["runtimes"])
    if (rt["runtime"] == "cuda")
      for (auto& p : rt["pairs"]) p["answers"]["copy"]["peer"]["gbps"] = 7.25, p["answers"]["copy"]["host_staged"]["gbps"] = 42.5;
  std::ofstream(dir / "p2paudit-probe.json") << doc.dump();
  Machine m = open_or_fail(dir.string(), P2PAUDIT_SOURCE_RULES_DIR);
  ASSERT_TRUE(m);
  char* raw = nullptr;
  p2paudit_verdict v;
  p2paudit_decision d;
  ASSERT_EQ(p2paudit_pair(m.get(), "gpu0", "gpu1", &v, &d, &raw), P2PAUDIT_OK);
  CString details(raw);
  EXPECT_EQ(d, P2PAUDIT_DECISION_HOST_STAGED);
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(json::parse(raw)["rule"], "copy-slower-than-staged") << raw;
  fs::remove_all(dir);
}

}  // namespace

namespace {

// p2paudit_explain_log() gives `p2paudit log --format json`'s document (docs/log.md), byte for byte.
TEST(CApi, ExplainLogIsTheLogCommandsDocument) {
  const std::string dir = data_path("kernel-oracle/h-d1-rp-acs-rr-cr-mf-switch");
  const std::string sysroot = dir + "/sysroot.tar.gz", log = dir + "/dmesg.txt";
  Machine m = open_or_fail(sysroot, P2PAUDIT_SOURCE_RULES_DIR);
  char* text = nullptr;
  uint64_t contradictions = 99;
  ASSERT_EQ(p2paudit_explain_log(m.get(), log.c_str(), &text, &contradictions), P2PAUDIT_OK)
      << p2paudit_last_error(m.get());
  CString owned(text);
  json lib = json::parse(text);
  json tool = tool_json(sysroot, "--rules-dir " + std::string(P2PAUDIT_SOURCE_RULES_DIR) + " log --from " + log +
                                     " --format json");
  EXPECT_EQ(lib, tool);
  EXPECT_EQ(contradictions, 0u);
  EXPECT_GT(lib["events"].size(), 0u);

  // A missing log is an input error naming it; NULL json an argument error.
  char* none = reinterpret_cast<char*>(1);
  EXPECT_EQ(p2paudit_explain_log(m.get(), "/nonexistent/dmesg.txt", &none, nullptr), P2PAUDIT_ERROR_INPUT);
  EXPECT_EQ(none, nullptr);
  EXPECT_NE(std::string(p2paudit_last_error(m.get())).find("/nonexistent/dmesg.txt"), std::string::npos);
  EXPECT_EQ(p2paudit_explain_log(m.get(), log.c_str(), nullptr, nullptr), P2PAUDIT_ERROR_ARGUMENT);
  EXPECT_EQ(p2paudit_explain_log(nullptr, log.c_str(), &none, nullptr), P2PAUDIT_ERROR_ARGUMENT);
}

// The machine's own log (log_path NULL): a capture's is the one it holds (`snapshot --with-log`),
// never this machine's /dev/kmsg; a capture without one, or a position in this machine's log
// asked of a capture, is an input error. `watch` for programs: a position, then what came since.
TEST(CApi, TheMachinesOwnLogAndWhatCameSinceAPosition) {
  const std::string dir = data_path("kernel-oracle/h-d1-rp-acs-rr-cr-mf-switch");
  const fs::path root = fs::path(::testing::TempDir()) / ("capi-log-" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  ASSERT_EQ(std::system(("tar -xzf '" + dir + "/sysroot.tar.gz' -C '" + root.string() + "'").c_str()), 0);
  {
    Machine m = open_or_fail(root.string(), P2PAUDIT_SOURCE_RULES_DIR);
    char* none = reinterpret_cast<char*>(1);
    EXPECT_EQ(p2paudit_explain_log(m.get(), nullptr, &none, nullptr), P2PAUDIT_ERROR_INPUT);
    EXPECT_EQ(none, nullptr);
    EXPECT_NE(std::string(p2paudit_last_error(m.get())).find("this capture holds no kernel log"), std::string::npos)
        << p2paudit_last_error(m.get());
    EXPECT_EQ(p2paudit_explain_log_since(m.get(), 0, &none, nullptr), P2PAUDIT_ERROR_INPUT);
  }
  fs::copy_file(dir + "/dmesg.txt", root / "p2paudit-kernel-log.txt");
  {
    Machine m = open_or_fail(root.string(), P2PAUDIT_SOURCE_RULES_DIR);
    char *own = nullptr, *saved = nullptr;
    ASSERT_EQ(p2paudit_explain_log(m.get(), nullptr, &own, nullptr), P2PAUDIT_OK) << p2paudit_last_error(m.get());
    CString own_owned(own);
    ASSERT_EQ(p2paudit_explain_log(m.get(), (dir + "/dmesg.txt").c_str(), &saved, nullptr), P2PAUDIT_OK);
    CString saved_owned(saved);
    json a = json::parse(own), b = json::parse(saved);
    EXPECT_FALSE(a["events"].empty());
    EXPECT_EQ(a["events"], b["events"]);
    EXPECT_EQ(p2paudit_explain_log_since(m.get(), 0, &own, nullptr), P2PAUDIT_ERROR_INPUT);
  }
  fs::remove_all(root);

  EXPECT_EQ(p2paudit_log_position(nullptr, nullptr), P2PAUDIT_ERROR_ARGUMENT);
  uint64_t position = 0;
  char* why = nullptr;
  p2paudit_status at = p2paudit_log_position(&position, &why);
  CString why_owned(why);
  if (at != P2PAUDIT_OK) {
    EXPECT_EQ(at, P2PAUDIT_ERROR_INPUT);
    ASSERT_NE(why, nullptr);  // why the prediction cannot be checked here, never a silent zero
    GTEST_SKIP() << "/dev/kmsg cannot be read here: " << why;
  }
  Machine live = open_or_fail("/", P2PAUDIT_SOURCE_RULES_DIR);
  char* text = nullptr;
  ASSERT_EQ(p2paudit_explain_log_since(live.get(), position, &text, nullptr), P2PAUDIT_OK) << p2paudit_last_error(live.get());
  CString owned(text);
  json j = json::parse(text);
  EXPECT_EQ(j["source"], "/dev/kmsg");
  EXPECT_TRUE(j["readable"].get<bool>());
}

}  // namespace
