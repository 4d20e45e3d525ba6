// SPDX-License-Identifier: GPL-2.0-or-later
// run_isolated(): a value comes back; a crash, a hang and oversized output are reported, and no
// child is left behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "p2paudit/probe/isolate.h"

namespace p2paudit::probe {
namespace {

bool no_children_left() {
  int status = 0;
  return waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD;
}

TEST(Isolate, ReturnsTheBodysValueAndPartials) {
  auto r = run_isolated("compute", 5, [] {
    isolated_phase("step one");
    isolated_partial({{"piece", 1}});
    isolated_phase("step two");
    return nlohmann::json{{"answer", 42}, {"text", std::string(100000, 'x')}};
  });
  ASSERT_TRUE(r.ok()) << r.status << " " << r.error;
  EXPECT_EQ(r.value["answer"], 42);
  EXPECT_EQ(r.value["text"].get<std::string>().size(), 100000u);
  ASSERT_EQ(r.partial.size(), 1u);
  EXPECT_EQ(r.partial[0]["piece"], 1);
  EXPECT_EQ(r.phase, "step two");
  EXPECT_TRUE(no_children_left());
}

TEST(Isolate, ChildStdoutDoesNotReachTheParentsStdout) {
  testing::internal::CaptureStdout();
  auto r = run_isolated("print", 5, [] {
    std::printf("chatter\n");
    std::fflush(stdout);
    return nlohmann::json(1);
  });
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(out.find("chatter"), std::string::npos);
}

TEST(Isolate, CrashIsReportedWithSignalAndPhase) {
  auto segv = run_isolated("start", 5, []() -> nlohmann::json {
    isolated_phase("touching memory");
    signal(SIGSEGV, SIG_DFL);  // sanitizers install their own handler
    raise(SIGSEGV);
    return 0;
  });
  EXPECT_EQ(segv.status, "crashed");
  EXPECT_EQ(segv.error, "SIGSEGV");
  EXPECT_EQ(segv.phase, "touching memory");
  auto abrt = run_isolated("start", 5, []() -> nlohmann::json { std::abort(); });
  EXPECT_EQ(abrt.status, "crashed");
  EXPECT_EQ(abrt.error, "SIGABRT");
  EXPECT_EQ(abrt.phase, "start");
  EXPECT_TRUE(no_children_left());
}

TEST(Isolate, HangIsKilledAtTheDeadline) {
  auto start = std::chrono::steady_clock::now();
  auto r = run_isolated("start", 1, []() -> nlohmann::json {
    isolated_phase("waiting forever");
    for (;;) pause();
  });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, "hung");
  EXPECT_EQ(r.phase, "waiting forever");
  EXPECT_NE(r.error.find("1 s"), std::string::npos) << r.error;
  EXPECT_LT(seconds, 4.0);
  EXPECT_GE(seconds, 0.9);
  EXPECT_TRUE(no_children_left());
}

TEST(Isolate, OversizedOutputIsRefused) {
  auto r = run_isolated("big", 10, [] { return nlohmann::json(std::string(2 << 20, 'y')); }, 1 << 20);
  EXPECT_EQ(r.status, "failed");
  EXPECT_NE(r.error.find("exceeded"), std::string::npos) << r.error;
  EXPECT_TRUE(r.value.is_null());
  EXPECT_TRUE(no_children_left());
}

TEST(Isolate, ExceptionAndSilentExitAreFailures) {
  auto thrown = run_isolated("throw", 5, []() -> nlohmann::json { throw std::runtime_error("no driver"); });
  EXPECT_EQ(thrown.status, "failed");
  EXPECT_EQ(thrown.error, "no driver");
  auto silent = run_isolated("exit", 5, []() -> nlohmann::json { _exit(7); });
  EXPECT_EQ(silent.status, "failed");
  EXPECT_NE(silent.error.find("status 7"), std::string::npos) << silent.error;
  EXPECT_TRUE(no_children_left());
}

TEST(Isolate, PhaseAndPartialOutsideAChildDoNothing) {
  isolated_phase("nothing");
  isolated_partial({{"x", 1}});
  EXPECT_EQ(signal_name(SIGBUS), "SIGBUS");
  EXPECT_EQ(signal_name(64), "signal 64");
}

}  // namespace
}  // namespace p2paudit::probe
