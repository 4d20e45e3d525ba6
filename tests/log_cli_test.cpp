// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit log` and `p2paudit watch` as scripts use them (docs/log.md): exit codes, the command's
// status kept, signals passed on, an unreadable log said so, the log's bytes escaped. The live
// /dev/kmsg is used only where it can be read; P2PAUDIT_KMSG_FILE stands in for it elsewhere.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fcntl.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;

std::string oracle(const std::string& name) { return test::data_path("kernel-oracle/" + name); }

struct Split {
  int status = -1;
  std::string out, err;
};

Split run(const std::string& env, const std::string& args) {
  static int calls = 0;
  std::string err_file = ::testing::TempDir() + "/log_cli_err." + std::to_string(getpid()) + "." + std::to_string(++calls);
  auto r = test::run_command(env + " " + test::tool_file() + " " + args + " 2>" + test::shell_quote(err_file));
  std::ifstream in(err_file);
  std::stringstream err;
  err << in.rdbuf();
  fs::remove(err_file);
  return {r.status, r.output, err.str()};
}

class LogCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("log-cli-" + std::to_string(getpid()) + "-" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    kmsg_ = (dir_ / "kmsg").string();
    std::ofstream(kmsg_) << "6,1,100,-;Linux version 6.1.0\n";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string kmsg_env() const { return "env P2PAUDIT_KMSG_FILE=" + test::shell_quote(kmsg_); }
  std::string machine() const { return "--sysroot " + oracle("h-a-two-rootports-intel") + "/sysroot.tar.gz"; }
  fs::path dir_;
  std::string kmsg_;
};

// A capture's kernel log is its own: the one `snapshot --with-log` stored, read where no --from is
// given, and never this machine's /dev/kmsg against another machine's tree.
TEST_F(LogCli, ACaptureIsExplainedByItsOwnLogNeverThisMachines) {
  const std::string d = oracle("h-d1-rp-acs-rr-cr-mf-switch");
  const fs::path root = dir_ / "capture";
  fs::create_directories(root);
  ASSERT_EQ(test::run_command("tar -xzf " + test::shell_quote(d + "/sysroot.tar.gz") + " -C " +
                              test::shell_quote(root.string())).status, 0);
  // Without a stored log: refused, naming the capture and the way out.
  auto none = run("", "--sysroot " + test::shell_quote(root.string()) + " log");
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("this capture holds no kernel log"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("--from FILE"), std::string::npos) << none.err;
  auto dump = run("", "--lspci-dump " + test::shell_quote(test::data_path("lspci-dumps/SOURCE.md")) + " log");
  EXPECT_EQ(dump.status, 2);
  // watch reads this machine's log: it refuses another machine's tree, before running anything.
  auto watch = run("", "--sysroot " + test::shell_quote(root.string()) + " watch -- touch " +
                           test::shell_quote((dir_ / "ran").string()));
  EXPECT_EQ(watch.status, 2);
  EXPECT_NE(watch.err.find("watch reads this machine's kernel log"), std::string::npos) << watch.err;
  EXPECT_FALSE(fs::exists(dir_ / "ran"));
  // With the log stored as snapshot --with-log stores it: the same events as --from the saved file.
  fs::copy_file(d + "/dmesg.txt", root / "p2paudit-kernel-log.txt");
  auto stored = run("", "--sysroot " + test::shell_quote(root.string()) + " --format json log");
  auto saved = run("", "--sysroot " + test::shell_quote(root.string()) + " --format json log --from " + d + "/dmesg.txt");
  ASSERT_EQ(stored.status, 0) << stored.err;
  ASSERT_EQ(saved.status, 0) << saved.err;
  auto a = nlohmann::json::parse(stored.out), b = nlohmann::json::parse(saved.out);
  ASSERT_TRUE(a.contains("events")) << stored.out.substr(0, 500);
  EXPECT_FALSE(a["events"].empty());
  EXPECT_EQ(a["events"], b["events"]);
}

TEST_F(LogCli, ASavedLogAgreesWithThePredictionAndExitsZero) {
  const std::string d = oracle("h-d1-rp-acs-rr-cr-mf-switch");
  auto r = run("", "--sysroot " + d + "/sysroot.tar.gz log --from " + d + "/dmesg.txt");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("agrees: the kernel refused"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 contradict it"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("contradicts:"), std::string::npos) << r.out;
  // The same from standard input.
  auto piped = run("", "--sysroot " + d + "/sysroot.tar.gz log --from - < " + d + "/dmesg.txt");
  EXPECT_EQ(piped.status, 0);
  EXPECT_EQ(piped.out.substr(piped.out.find('\n')), r.out.substr(r.out.find('\n')));  // the same but the source
}

TEST_F(LogCli, AContradictionExitsFourAndSaysWhatToAttach) {
  const std::string d = oracle("h-a-two-rootports-intel");
  auto r = run("", machine() + " --assume-whitelisted 8086:29c0 log --from " + d + "/dmesg.txt");
  EXPECT_EQ(r.status, 4) << r.err;
  EXPECT_NE(r.out.find("contradicts:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("p2paudit bug"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("p2paudit snapshot"), std::string::npos) << r.out;
}

// whitelist --log: the log's refusals through a candidate's host bridge are its evidence.
TEST_F(LogCli, WhitelistCountsTheLogsRefusalsAsEvidence) {
  const std::string d = oracle("h-d1-rp-acs-rr-cr-mf-switch");
  auto r = run("", "--sysroot " + d + "/sysroot.tar.gz --format json whitelist --log " + d + "/dmesg.txt");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["candidates"].size(), 1u);
  const auto& log = j["candidates"][0]["evidence"]["kernel_log"];
  EXPECT_GT(log["refusals"].get<int>(), 0);
  EXPECT_EQ(log["faults"], 0);
  EXPECT_EQ(log["contradictions"], 0);
  auto without = nlohmann::json::parse(run("", "--sysroot " + d + "/sysroot.tar.gz --format json whitelist").out);
  EXPECT_FALSE(without["candidates"][0]["evidence"].contains("kernel_log"));
}

TEST_F(LogCli, BadInputIsOneLineAndExitTwo) {
  for (const std::string args : {"log --from /nonexistent/dmesg.txt", "log --from /", "watch", "watch --seconds -1",
                                 "--format prom log --from /dev/null"}) {
    auto r = run(kmsg_env(), machine() + " " + args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
  // A log that cannot be read: never "no events".
  auto unread = run("env P2PAUDIT_KMSG_FILE=/nonexistent/kmsg", machine() + " log");
  EXPECT_EQ(unread.status, 2);
  EXPECT_NE(unread.err.find("could not be checked"), std::string::npos) << unread.err;
  EXPECT_EQ(unread.out.find("no events"), std::string::npos);
}

TEST_F(LogCli, WatchKeepsTheCommandsExitStatus) {
  auto r = run(kmsg_env(), machine() + " watch -- /bin/sh -c 'echo workload; exit 7'");
  EXPECT_EQ(r.status, 7);
  EXPECT_EQ(r.out, "workload\n");  // the command's stdout is its own; the report is on stderr
  EXPECT_NE(r.err.find("no events"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited with status 7"), std::string::npos) << r.err;
  auto missing = run(kmsg_env(), machine() + " watch -- /nonexistent/command");
  EXPECT_EQ(missing.status, 127);  // as a shell says a command was not found
  auto killed = run(kmsg_env(), machine() + " watch -- /bin/sh -c 'kill -TERM $$'");
  EXPECT_EQ(killed.status, 128 + 15);
  EXPECT_NE(killed.err.find("ended by signal 15"), std::string::npos) << killed.err;
}

TEST_F(LogCli, WatchReportsOnlyTheEventsOfTheRun) {
  // A refusal logged before the run is not the run's; the one the command appends is.
  std::ofstream(kmsg_, std::ios::app)
      << "4,2,150,-;e1000e 0000:02:00.0: cannot be used for peer-to-peer DMA as the client and provider "
         "(0000:01:00.0) do not share an upstream bridge or whitelisted host bridge\n";
  const std::string line = "4,3,200,-;nvme 0000:01:00.0: cannot be used for peer-to-peer DMA as the client and provider "
                           "(0000:02:00.0) do not share an upstream bridge or whitelisted host bridge\\033[31m";
  auto r = run(kmsg_env(), machine() + " watch -- /bin/sh -c " +
                               test::shell_quote("printf '" + line + "\\n' >> " + test::shell_quote(kmsg_)));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("0000:02:00.0 -> 0000:01:00.0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("0000:01:00.0 -> 0000:02:00.0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);  // the log's bytes are escaped
  EXPECT_NE(r.err.find("\\x1b"), std::string::npos) << r.err;
  auto j = nlohmann::json::parse(run(kmsg_env(), machine() + " --format json watch --seconds 0").out);
  EXPECT_EQ(j["events"].size(), 0u);
  EXPECT_EQ(j["readable"], true);
}

TEST_F(LogCli, WatchSaysWhenTheLogCannotBeRead) {
  auto r = run("env P2PAUDIT_KMSG_FILE=/nonexistent/kmsg", machine() + " watch -- true");
  EXPECT_EQ(r.status, 0);  // the command's status
  EXPECT_NE(r.err.find("could not be checked"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no events"), std::string::npos) << r.err;
  auto timed = run("env P2PAUDIT_KMSG_FILE=/nonexistent/kmsg", machine() + " watch --seconds 0");
  EXPECT_EQ(timed.status, 2);  // nothing was checked: no command status to keep
}

TEST_F(LogCli, WatchPassesSignalsOnToTheCommand) {
  // The command says when it is ready, then exits 42 on SIGTERM: a TERM sent to p2paudit alone
  // must reach it (p2paudit itself would have died with 143).
  const std::string ready = (dir_ / "ready").string();
  const std::string script = "trap 'exit 42' TERM; touch " + test::shell_quote(ready) + "; i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; exit 9";
  auto r = test::run_command(kmsg_env() + " " + test::tool_file() + " " + machine() + " watch -- /bin/sh -c " +
                             test::shell_quote(script) + " 2>/dev/null & pid=$!; while [ ! -e " +
                             test::shell_quote(ready) + " ]; do sleep 0.05; done; kill -TERM $pid; wait $pid; echo $?");
  EXPECT_EQ(r.output, "42\n");
}

TEST_F(LogCli, WatchOnTheLiveKernelLog) {
  int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
  if (fd < 0) GTEST_SKIP() << "/dev/kmsg cannot be read here";
  ::close(fd);
  // This machine's log against this machine (the runtimes not asked: no GPU is needed).
  auto r = run("", "--no-probe watch --seconds 0");
  EXPECT_TRUE(r.status == 0 || r.status == 4) << r.err;
  EXPECT_NE(r.err.find("Kernel log: /dev/kmsg"), std::string::npos) << r.err;
  auto cmd = run("", "--no-probe watch -- /bin/sh -c 'exit 7'");
  EXPECT_EQ(cmd.status, 7);
}

}  // namespace
}  // namespace p2paudit
