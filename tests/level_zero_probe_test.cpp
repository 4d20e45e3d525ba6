// The Level Zero probe against the real loader (libze_loader.so.1) with the fake driver of
// tests/fakes/fake_ze_driver.c loaded through ZE_ENABLE_ALT_DRIVERS: one scenario per test.
#include <chrono>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "p2paudit/probe/probe.h"

namespace p2paudit::probe {
namespace {

class LevelZeroProbe : public ::testing::Test {
 protected:
  // The children probe_level_zero() forks inherit this process's environment.
  static void use_fake_driver(const char* scenario, const char* bdfs = "0000:03:00.0,0000:04:00.0") {
    setenv("ZE_ENABLE_ALT_DRIVERS", FAKE_ZE_DRIVER, 1);
    setenv("FAKE_ZE_SCENARIO", scenario, 1);
    setenv("FAKE_ZE_BDFS", bdfs, 1);
  }
  void TearDown() override {
    unsetenv("ZE_ENABLE_ALT_DRIVERS");
    unsetenv("FAKE_ZE_SCENARIO");
    unsetenv("FAKE_ZE_BDFS");
  }
  static ProbeOptions quick() {
    ProbeOptions o;
    o.timeout_seconds = 3;
    return o;
  }
  static const PairAnswer* pair(const RuntimeReport& r, int provider, int client) {
    for (const auto& p : r.pairs) {
      if (p.provider == provider && p.client == client) return &p;
    }
    return nullptr;
  }
};

TEST_F(LevelZeroProbe, OkTwoDevicesAtTheirBdfsAndPeerBothWays) {
  use_fake_driver("ok");
  const RuntimeReport r = probe_level_zero(quick());
  ASSERT_EQ(r.status, "ok") << r.error;
  EXPECT_EQ(r.runtime, "level_zero");
  EXPECT_EQ(r.library, "libze_loader.so.1");
  EXPECT_EQ(r.driver_version, "26.09.37435.1");  // zeIntelGetDriverVersionString
  ASSERT_EQ(r.devices.size(), 2u);
  ASSERT_TRUE(r.devices[0].bdf && r.devices[1].bdf);
  EXPECT_EQ(r.devices[0].bdf->str(), "0000:03:00.0");
  EXPECT_EQ(r.devices[1].bdf->str(), "0000:04:00.0");
  EXPECT_EQ(r.devices[0].name, "Fake Level Zero GPU 0");
  EXPECT_EQ(r.devices[0].extra["pci_id"], "8086:e211");
  EXPECT_EQ(r.devices[0].extra["driver_version"], "1.6.32567");
  // zelLoaderGetVersions: Debian's 1.8.12 package says "1.8.0".
  ASSERT_TRUE(r.devices[0].extra.contains("loader_version"));
  EXPECT_EQ(r.devices[0].extra["loader_version"].get<std::string>().rfind("1.", 0), 0u);
  EXPECT_EQ(r.devices[0].extra["fabric_vertices"], 2);
  ASSERT_EQ(r.pairs.size(), 2u);
  for (auto [a, b] : {std::pair{0, 1}, std::pair{1, 0}}) {
    const PairAnswer* p = pair(r, a, b);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->answers["can_access_peer"], "ok") << p->answers.dump();
    EXPECT_EQ(p->answers["access"], "ok");
    EXPECT_EQ(p->answers["atomics"], "ok");
    EXPECT_EQ(p->answers["bandwidth"]["logical"], 28);
    EXPECT_EQ(p->answers["bandwidth"]["unit"], "bytes/ns");
  }
}

TEST_F(LevelZeroProbe, ChosenBdfsAreReported) {
  use_fake_driver("ok", "0001:81:00.0,0001:c1:00.0,0001:c2:00.0");
  const RuntimeReport r = probe_level_zero(quick());
  ASSERT_EQ(r.status, "ok") << r.error;
  ASSERT_EQ(r.devices.size(), 3u);
  EXPECT_EQ(r.devices[2].bdf->str(), "0001:c2:00.0");
  EXPECT_EQ(r.pairs.size(), 6u);
}

TEST_F(LevelZeroProbe, NoPeerIsNotSupported) {
  use_fake_driver("no_peer");
  const RuntimeReport r = probe_level_zero(quick());
  ASSERT_EQ(r.status, "ok") << r.error;
  ASSERT_EQ(r.pairs.size(), 2u);
  for (const auto& p : r.pairs) {
    EXPECT_EQ(p.answers["can_access_peer"], "not_supported");
    EXPECT_EQ(p.answers["access"], "not_supported");
    EXPECT_EQ(p.answers["atomics"], "not_supported");
  }
}

TEST_F(LevelZeroProbe, OutOfDeviceMemoryGivesTheRawCodeAndItsName) {
  use_fake_driver("out_of_device_memory");
  const RuntimeReport r = probe_level_zero(quick());
  ASSERT_EQ(r.status, "ok") << r.error;
  ASSERT_EQ(r.devices.size(), 2u);
  ASSERT_EQ(r.pairs.size(), 2u);
  for (const auto& p : r.pairs) {
    EXPECT_EQ(p.answers["can_access_peer"], "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY") << p.answers.dump();
    EXPECT_EQ(p.answers["can_access_peer_code"], "0x70000003");
    EXPECT_EQ(p.answers["access"], "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY");
    EXPECT_EQ(p.answers["access_code"], "0x70000003");
  }
}

TEST_F(LevelZeroProbe, HangIsReportedWithinTheTimeLimit) {
  use_fake_driver("hang");
  const auto start = std::chrono::steady_clock::now();
  const RuntimeReport r = probe_level_zero(quick());
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, "hung") << r.error;
  EXPECT_EQ(r.phase, "zeDeviceCanAccessPeer(0 -> 1)");
  ASSERT_EQ(r.devices.size(), 2u);  // the enumeration survived
  ASSERT_EQ(r.pairs.size(), 2u);    // and both pairs were asked, each within its limit
  for (const auto& p : r.pairs) {
    EXPECT_EQ(p.answers["status"], "hung");
    EXPECT_EQ(p.answers["can_access_peer"], "hung");
  }
  EXPECT_LT(seconds, 2 * 3 + 5);
}

TEST_F(LevelZeroProbe, CrashIsReportedWithThePhase) {
  use_fake_driver("crash");
  const RuntimeReport r = probe_level_zero(quick());
  EXPECT_EQ(r.status, "crashed");
  EXPECT_EQ(r.phase, "zeDeviceCanAccessPeer(0 -> 1)");
  EXPECT_EQ(r.error, "SIGSEGV");
  ASSERT_EQ(r.devices.size(), 2u);
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[1].answers["status"], "crashed");
  EXPECT_EQ(r.pairs[1].answers["phase"], "zeDeviceCanAccessPeer(1 -> 0)");
}

TEST_F(LevelZeroProbe, HangInZeInitIsReported) {
  use_fake_driver("hang_init");
  const RuntimeReport r = probe_level_zero(quick());
  EXPECT_EQ(r.status, "hung");
  EXPECT_EQ(r.phase, "zeInit");
  EXPECT_TRUE(r.devices.empty());
}

TEST_F(LevelZeroProbe, CrashInZeInitIsReported) {
  use_fake_driver("crash_init");
  const RuntimeReport r = probe_level_zero(quick());
  EXPECT_EQ(r.status, "crashed");
  EXPECT_EQ(r.phase, "zeInit");
}

TEST_F(LevelZeroProbe, NoDriverIsAbsentNotAFailure) {
  // No alternative driver, and no real one on a CI machine: the loader's zeInit finds nothing.
  // Where a real driver is installed the probe may well find devices; it must not fail either way.
  unsetenv("ZE_ENABLE_ALT_DRIVERS");
  const RuntimeReport r = probe_level_zero(quick());
  EXPECT_TRUE(r.status == "absent" || r.status == "ok") << r.status << ": " << r.error;
  if (r.status == "absent") {
    EXPECT_TRUE(r.devices.empty());
  }
}

TEST_F(LevelZeroProbe, AMissingDriverLibraryIsAbsent) {
  setenv("ZE_ENABLE_ALT_DRIVERS", "/nonexistent/libfake_ze_driver.so", 1);
  const RuntimeReport r = probe_level_zero(quick());
  EXPECT_EQ(r.status, "absent") << r.error;
  EXPECT_NE(r.error.find("no Level Zero driver"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace p2paudit::probe
