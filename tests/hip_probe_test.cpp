// SPDX-License-Identifier: GPL-2.0-or-later
// probe_hip() against a fake libamdhip64.so (tests/fakes/fake_hip.cpp): one scenario each.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "p2paudit/probe/probe.h"

namespace p2paudit::probe {
namespace {

RuntimeReport run(const std::string& scenario, int timeout_seconds = 20, const std::string& library = FAKE_HIP_LIBRARY) {
  setenv("P2PAUDIT_HIP_LIBRARY", library.c_str(), 1);
  setenv("FAKE_HIP_SCENARIO", scenario.c_str(), 1);
  unsetenv("FAKE_HIP_BDFS");
  ProbeOptions options;
  options.timeout_seconds = timeout_seconds;
  return probe_hip(options);
}

const PairAnswer& pair(const RuntimeReport& r, int provider, int client) {
  for (const auto& p : r.pairs)
    if (p.provider == provider && p.client == client) return p;
  static const PairAnswer none;
  ADD_FAILURE() << "no pair " << provider << "->" << client;
  return none;
}

TEST(HipProbe, NoRuntimeIsAbsent) {
  auto r = run("ok", 20, "/nonexistent/libamdhip64.so");
  EXPECT_EQ(r.runtime, "hip");
  EXPECT_EQ(r.status, "absent");
  EXPECT_EQ(r.library, "/nonexistent/libamdhip64.so");
  EXPECT_EQ(r.error.rfind("not available: ", 0), 0u) << r.error;
  EXPECT_TRUE(r.devices.empty());
  EXPECT_TRUE(r.pairs.empty());
}

TEST(HipProbe, WithoutOverrideTheRocmNamesAreTried) {
  unsetenv("P2PAUDIT_HIP_LIBRARY");
  auto r = probe_hip(ProbeOptions{});
  if (r.status != "absent") GTEST_SKIP() << "this machine has HIP: " << r.library;
  EXPECT_EQ(r.library, "libamdhip64.so, libamdhip64.so.6, libamdhip64.so.5");
}

TEST(HipProbe, OkGivesDevicesAndPairs) {
  auto r = run("ok");
  EXPECT_EQ(r.status, "ok") << r.error;
  EXPECT_EQ(r.library, FAKE_HIP_LIBRARY);
  EXPECT_EQ(r.driver_version, "6.3.42131");
  ASSERT_EQ(r.devices.size(), 2u);
  ASSERT_TRUE(r.devices[1].bdf);
  EXPECT_EQ(r.devices[1].bdf->str(), "0000:83:00.0");
  EXPECT_EQ(r.devices[0].name, "AMD Instinct MI300X");
  EXPECT_EQ(r.devices[0].extra["bus_id"], "0000:03:00.0");
  ASSERT_EQ(r.pairs.size(), 2u);
  for (auto [a, b] : {std::pair{0, 1}, std::pair{1, 0}}) {
    const auto& answers = pair(r, a, b).answers;
    EXPECT_EQ(answers["can_access_peer"], "ok");
    EXPECT_EQ(answers["link_type"], "HSA_AMD_LINK_INFO_TYPE_PCIE");
    EXPECT_EQ(answers["hop_count"], 2);
  }
  auto j = r.to_json();
  EXPECT_EQ(j["pairs"][0]["answers"].begin().key(), "can_access_peer");  // the runtime's own order
}

TEST(HipProbe, NoPeerIsNotSupported) {
  auto r = run("no_peer");
  EXPECT_EQ(r.status, "ok");
  EXPECT_EQ(pair(r, 0, 1).answers["can_access_peer"], "not_supported");
}

TEST(HipProbe, XgmiLinkType) {
  auto r = run("xgmi");
  EXPECT_EQ(pair(r, 1, 0).answers["link_type"], "HSA_AMD_LINK_INFO_TYPE_XGMI");
  EXPECT_EQ(pair(r, 1, 0).answers["hop_count"], 1);
}

TEST(HipProbe, InitFailureGivesTheCodeName) {
  auto r = run("init_fails");
  EXPECT_EQ(r.status, "failed");
  EXPECT_EQ(r.phase, "hipInit");
  EXPECT_EQ(r.extra["error_name"], "hipErrorInsufficientDriver");
  EXPECT_EQ(r.error, "hipErrorInsufficientDriver (35): driver version is insufficient for runtime version");
}

// ROCm installed where there is no AMD GPU (seen on the lent NVIDIA H200 machine): absent.
TEST(HipProbe, NoAmdGpuIsAbsentNotAFailure) {
  auto r = run("no_device");
  EXPECT_EQ(r.status, "absent");
  EXPECT_EQ(r.error, "no AMD GPU (hipInit returned hipErrorInvalidDevice (101))");
}

TEST(HipProbe, HangIsSurvivedWithinTheTimeLimit) {
  auto start = std::chrono::steady_clock::now();
  auto r = run("hang", 1);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  EXPECT_EQ(r.status, "hung");
  EXPECT_EQ(r.phase, "hipDeviceCanAccessPeer(0, 1)");
  EXPECT_EQ(r.devices.size(), 2u);  // learnt before the hang
  EXPECT_EQ(pair(r, 0, 1).answers["can_access_peer"], "hung");
  EXPECT_EQ(pair(r, 1, 0).answers["phase"], "hipDeviceCanAccessPeer(1, 0)");  // asked in a new child
}

TEST(HipProbe, CrashIsSurvived) {
  auto r = run("crash");
  EXPECT_EQ(r.status, "crashed");
  EXPECT_EQ(r.error, "SIGSEGV");
  EXPECT_EQ(pair(r, 0, 1).answers["link_type"], "crashed");
  EXPECT_EQ(pair(r, 1, 0).answers["can_access_peer"], "crashed");
}

}  // namespace
}  // namespace p2paudit::probe
