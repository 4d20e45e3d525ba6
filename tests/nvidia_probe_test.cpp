// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit probe` against fake NVML and CUDA libraries (tests/fakes) emulating the two H200 of
// tests/data/machines/h200x2-firecracker-vm at 0000:00:06.0 and 0000:00:07.0: one scenario each.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>

#include "p2paudit/probe/probe.h"
#include "test_support.h"

namespace p2paudit {
namespace {

using json = nlohmann::json;

std::string fixture() { return test::data_path("machines/h200x2-firecracker-vm/sysroot.tar.gz"); }

struct Run {
  int status = -1;
  std::string output;
  double seconds = 0;
};

Run probe(const std::string& scenario, const std::string& extra_args = "", const std::string& nvml = FAKE_NVML_LIBRARY,
          const std::string& cuda = FAKE_CUDA_LIBRARY, const std::string& extra_env = "") {
  std::string cmd = "env P2PAUDIT_PROBE_ALLOW_SYSROOT=1 " + extra_env + " FAKE_NVIDIA_SCENARIO=" + scenario +
                    " FAKE_NVIDIA_BDFS=0000:00:06.0,0000:00:07.0 P2PAUDIT_NVML_LIBRARY=" + test::shell_quote(nvml) +
                    " P2PAUDIT_CUDA_LIBRARY=" + test::shell_quote(cuda) + " " + P2PAUDIT_TOOL + " --sysroot " +
                    test::shell_quote(fixture()) + " " + extra_args + " 2>/dev/null";
  auto start = std::chrono::steady_clock::now();
  auto r = test::run_command(cmd);
  Run out{r.status, r.output, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  return out;
}

json probe_json(const std::string& scenario, const std::string& extra = "", double* seconds = nullptr,
                const std::string& extra_env = "") {
  auto r = probe(scenario, "probe --format json " + extra, FAKE_NVML_LIBRARY, FAKE_CUDA_LIBRARY, extra_env);
  EXPECT_EQ(r.status, 0) << r.output;
  if (seconds) *seconds = r.seconds;
  return json::parse(r.output);
}

const json& runtime(const json& j, const std::string& name) {
  for (const auto& r : j["runtimes"])
    if (r["runtime"] == name) return r;
  static const json none;
  ADD_FAILURE() << "no runtime " << name;
  return none;
}

const json& pair(const json& rt, int provider, int client) {
  for (const auto& p : rt["pairs"])
    if (p["provider"] == provider && p["client"] == client) return p["answers"];
  static const json none;
  ADD_FAILURE() << "no pair " << provider << "->" << client;
  return none;
}

TEST(NvidiaProbe, NoLibraryIsAbsentAndExitsZero) {
  auto r = probe("ok", "probe --format json", "/nonexistent/libnvidia-ml.so.1", "/nonexistent/libcuda.so.1");
  ASSERT_EQ(r.status, 0);
  auto j = json::parse(r.output);
  EXPECT_EQ(j["schema_version"], 1);
  for (const char* name : {"nvml", "cuda"}) {
    const auto& rt = runtime(j, name);
    EXPECT_EQ(rt["status"], "absent") << name;
    EXPECT_NE(rt["library"].get<std::string>().find("/nonexistent/"), std::string::npos);
    EXPECT_TRUE(rt["devices"].empty());
  }
  auto text = probe("ok", "probe", "/nonexistent/libnvidia-ml.so.1", "/nonexistent/libcuda.so.1");
  EXPECT_EQ(text.status, 0);
  EXPECT_NE(text.output.find("nvml: absent"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("cuda: absent"), std::string::npos) << text.output;
}

TEST(NvidiaProbe, AllOkMapsBdfsToTopologyNames) {
  auto j = probe_json("ok");
  const auto& nvml = runtime(j, "nvml");
  EXPECT_EQ(nvml["status"], "ok");
  EXPECT_EQ(nvml["driver_version"], "580.159.04");
  ASSERT_EQ(nvml["devices"].size(), 2u);
  EXPECT_EQ(nvml["devices"][0]["bdf"], "0000:00:06.0");  // NVML's "00000000:00:06.0"
  EXPECT_EQ(nvml["devices"][0]["bus_id"], "00000000:00:06.0");
  EXPECT_EQ(nvml["devices"][0]["function"], "gpu0");
  EXPECT_EQ(nvml["devices"][1]["function"], "gpu1");
  EXPECT_EQ(nvml["devices"][0]["name"], "NVIDIA H200");
  ASSERT_EQ(nvml["devices"][0]["nvlink"].size(), 18u);
  EXPECT_EQ(nvml["devices"][0]["nvlink"][17]["state"], "active");
  EXPECT_EQ(nvml["devices"][0]["nvlink"][17]["remote_bdf"], "0000:00:07.0");
  ASSERT_EQ(nvml["pairs"].size(), 2u);
  for (auto [a, b] : {std::pair{0, 1}, std::pair{1, 0}})
    for (const char* cap : {"read", "write", "nvlink", "atomics", "prop"}) EXPECT_EQ(pair(nvml, a, b)[cap], "ok") << cap;

  const auto& cuda = runtime(j, "cuda");
  EXPECT_EQ(cuda["status"], "ok");
  EXPECT_EQ(cuda["driver_version"], "13.0");
  EXPECT_EQ(cuda["devices"][1]["bdf"], "0000:00:07.0");
  EXPECT_EQ(cuda["devices"][1]["function"], "gpu1");
  EXPECT_EQ(pair(cuda, 0, 1)["can_access_peer"], "ok");
  EXPECT_EQ(pair(cuda, 1, 0)["access_supported"], "ok");
  EXPECT_EQ(pair(cuda, 1, 0)["performance_rank"], 0);

  auto text = probe("ok", "probe");
  EXPECT_EQ(text.status, 0);
  EXPECT_NE(text.output.find("0000:00:06.0 gpu0"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("NVLink: 18 of 18 links active (to gpu1 x18)"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("    gpu0   X      OK   \n    gpu1   OK     X    \n"), std::string::npos) << text.output;
}

TEST(NvidiaProbe, P2pNotSupportedIsNS) {
  auto j = probe_json("p2p_not_supported");
  const auto& nvml = runtime(j, "nvml");
  EXPECT_EQ(nvml["status"], "ok");
  EXPECT_EQ(pair(nvml, 0, 1)["read"], "not_supported");
  EXPECT_EQ(pair(nvml, 1, 0)["nvlink"], "not_supported");
  EXPECT_TRUE(nvml["devices"][0]["nvlink"].empty());
  EXPECT_EQ(pair(runtime(j, "cuda"), 0, 1)["can_access_peer"], "not_supported");
  auto text = probe("p2p_not_supported", "probe");
  EXPECT_NE(text.output.find("    gpu0   X      NS   \n    gpu1   NS     X    \n"), std::string::npos) << text.output;
}

TEST(NvidiaProbe, InitFailureGivesRawCodeAndName) {
  auto j = probe_json("init_fails");
  const auto& nvml = runtime(j, "nvml");
  EXPECT_EQ(nvml["status"], "failed");
  EXPECT_EQ(nvml["phase"], "nvmlInit_v2");
  EXPECT_EQ(nvml["error_code"], 9);
  EXPECT_EQ(nvml["error_name"], "NVML_ERROR_DRIVER_NOT_LOADED");
  EXPECT_EQ(nvml["error"], "NVML_ERROR_DRIVER_NOT_LOADED (9): Driver Not Loaded");
  const auto& cuda = runtime(j, "cuda");
  EXPECT_EQ(cuda["status"], "failed");
  EXPECT_EQ(cuda["phase"], "cuInit");
  EXPECT_EQ(cuda["error_code"], 100);
  EXPECT_EQ(cuda["error_name"], "CUDA_ERROR_NO_DEVICE");
  auto text = probe("init_fails", "probe");
  EXPECT_EQ(text.status, 0);
  EXPECT_NE(text.output.find("nvml: failed in nvmlInit_v2: NVML_ERROR_DRIVER_NOT_LOADED (9)"), std::string::npos)
      << text.output;
}

TEST(NvidiaProbe, HangIsReportedWithPhaseWithinTheTimeLimit) {
  double seconds = 0;
  auto j = probe_json("hang", "--timeout 1", &seconds);
  // Every ordered pair hangs: two per runtime, one second each, and the command still answers.
  EXPECT_LT(seconds, 15.0);
  const auto& nvml = runtime(j, "nvml");
  EXPECT_EQ(nvml["status"], "hung");
  EXPECT_EQ(nvml["phase"], "nvmlDeviceGetP2PStatus(0, 1, read)");
  EXPECT_EQ(nvml["devices"].size(), 2u);  // what was learnt before the hang is kept
  EXPECT_EQ(pair(nvml, 0, 1)["read"], "hung");
  EXPECT_EQ(pair(nvml, 1, 0)["read"], "hung");  // the next pair was asked in a new child
  EXPECT_EQ(pair(nvml, 1, 0)["phase"], "nvmlDeviceGetP2PStatus(1, 0, read)");
  const auto& cuda = runtime(j, "cuda");
  EXPECT_EQ(cuda["status"], "hung");
  EXPECT_EQ(cuda["phase"], "cuDeviceCanAccessPeer(0, 1)");
}

TEST(NvidiaProbe, CrashIsReportedWithSignal) {
  auto j = probe_json("crash");
  const auto& nvml = runtime(j, "nvml");
  EXPECT_EQ(nvml["status"], "crashed");
  EXPECT_EQ(nvml["error"], "SIGSEGV");
  EXPECT_EQ(nvml["phase"], "nvmlDeviceGetP2PStatus(0, 1, read)");
  EXPECT_EQ(pair(nvml, 1, 0)["write"], "crashed");
  const auto& cuda = runtime(j, "cuda");
  EXPECT_EQ(cuda["status"], "crashed");
  EXPECT_EQ(cuda["error"], "SIGABRT");
  auto text = probe("crash", "probe");
  EXPECT_EQ(text.status, 0);
  EXPECT_NE(text.output.find("nvml: crashed in nvmlDeviceGetP2PStatus(0, 1, read): SIGSEGV"), std::string::npos)
      << text.output;
  EXPECT_NE(text.output.find("CRASH"), std::string::npos);
}

TEST(NvidiaProbe, NvmlMemoryAndBar1) {
  auto j = probe_json("ok");
  const auto& dev = runtime(j, "nvml")["devices"][1];
  EXPECT_EQ(dev["memory_total_bytes"], 143771ull << 20);
  EXPECT_EQ(dev["bar1_total_bytes"], 256ull << 30);
  // A BAR1 smaller than the memory (a peer reaches only part of it at a time), and none at all.
  auto small = probe_json("ok", "", nullptr, "FAKE_NVIDIA_BAR1_BYTES=268435456");
  EXPECT_EQ(runtime(small, "nvml")["devices"][0]["bar1_total_bytes"], 268435456);
  auto none = probe_json("ok", "", nullptr, "FAKE_NVIDIA_BAR1_BYTES=not_supported");
  const auto& d0 = runtime(none, "nvml")["devices"][0];
  EXPECT_FALSE(d0.contains("bar1_total_bytes"));
  EXPECT_EQ(d0["bar1_error"], "NVML_ERROR_NOT_SUPPORTED");
  EXPECT_TRUE(d0.contains("memory_total_bytes"));
}

// `probe --copy` (CUDA): 1 MiB, 2 timed repeats per leg. The JSON is what these tests check; the
// exit status (1 when a copy did not verify) is the command's business, tested with it.
json copy_json(const std::string& scenario, const std::string& extra = "", double* seconds = nullptr) {
  auto r = probe(scenario, "probe --format json --copy --size 1048576 --repeat 2 " + extra);
  if (scenario == "ok") EXPECT_EQ(r.status, 0) << r.output;
  else EXPECT_TRUE(r.status == 0 || r.status == 1) << r.status << "\n" << r.output;
  if (seconds) *seconds = r.seconds;
  return json::parse(r.output);
}

TEST(NvidiaProbeCopy, NotRunWithoutCopy) {
  auto j = probe_json("ok");
  EXPECT_FALSE(pair(runtime(j, "cuda"), 0, 1).contains("copy"));
}

TEST(NvidiaProbeCopy, OkVerifiesBothLegs) {
  auto j = copy_json("ok");
  const auto& cuda = runtime(j, "cuda");
  EXPECT_EQ(cuda["status"], "ok");
  for (auto [a, b] : {std::pair{0, 1}, std::pair{1, 0}}) {
    const auto& copy = pair(cuda, a, b)["copy"];
    EXPECT_EQ(copy["size_bytes"], 1048576);
    EXPECT_EQ(copy["repeat"], 2);
    for (const char* leg : {"peer", "host_staged"}) {
      EXPECT_EQ(copy[leg]["result"], "verified") << leg << " " << copy.dump();
      EXPECT_GT(copy[leg]["gbps"].get<double>(), 0.0) << leg;
      EXPECT_EQ(copy[leg]["seconds"].size(), 2u) << leg;
    }
  }
  EXPECT_FALSE(pair(runtime(j, "nvml"), 0, 1).contains("copy"));  // NVML moves no data
}

TEST(NvidiaProbeCopy, CorruptPeerCopyIsCaught) {
  auto j = copy_json("copy_corrupt");
  const auto& copy = pair(runtime(j, "cuda"), 0, 1)["copy"];
  EXPECT_EQ(copy["peer"]["result"], "corrupt");
  EXPECT_EQ(copy["peer"]["mismatched_bytes"], 1048576 / 4096);  // the fake flips one byte in 4096
  EXPECT_EQ(copy["peer"]["first_mismatch"], 0);
  EXPECT_TRUE(copy["peer"]["gbps"].is_null());
  EXPECT_EQ(copy["host_staged"]["result"], "verified");
}

TEST(NvidiaProbeCopy, PeerAccessRefusedFailsThePeerLegOnly) {
  auto j = copy_json("copy_fails");
  const auto& copy = pair(runtime(j, "cuda"), 1, 0)["copy"];
  EXPECT_EQ(copy["peer"]["result"], "failed");
  EXPECT_EQ(copy["peer"]["phase"], "cuCtxEnablePeerAccess");
  EXPECT_EQ(copy["peer"]["error"], "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED");
  EXPECT_EQ(copy["peer"]["code"], 217);
  EXPECT_TRUE(copy["peer"]["seconds"].empty());  // never measured behind a host-staged fallback
  EXPECT_EQ(copy["host_staged"]["result"], "verified");
}

TEST(NvidiaProbeCopy, HangInOnePairIsBounded) {
  double seconds = 0;
  auto j = copy_json("copy_hang", "--timeout 2", &seconds);
  EXPECT_LT(seconds, 15.0);
  const auto& cuda = runtime(j, "cuda");
  EXPECT_EQ(cuda["status"], "hung");
  const auto& hung = pair(cuda, 0, 1);
  EXPECT_EQ(hung["copy"], "hung");
  EXPECT_EQ(hung["phase"], "copy 0->1: cuMemcpyPeer, repeat 1 of 2");
  EXPECT_EQ(hung["can_access_peer"], "ok");  // the questions' answers stay
  EXPECT_EQ(pair(cuda, 1, 0)["copy"]["peer"]["result"], "verified");  // asked in a new child
}

TEST(NvidiaProbeCopy, CrashInOnePairIsSurvived) {
  auto j = copy_json("copy_crash");
  const auto& cuda = runtime(j, "cuda");
  EXPECT_EQ(cuda["status"], "crashed");
  EXPECT_EQ(cuda["error"], "SIGSEGV");
  EXPECT_EQ(pair(cuda, 0, 1)["copy"], "crashed");
  EXPECT_EQ(pair(cuda, 0, 1)["error"], "SIGSEGV");
  EXPECT_EQ(pair(cuda, 1, 0)["copy"]["host_staged"]["result"], "verified");
}

// `probe --copy`'s peer paths of kernels (docs/probe.md "Peer paths"): stores, loads and atomics of
// a kernel on the client GPU on the provider's memory, which the fake CUDA runs by their names.
struct PathsRun {
  int status = -1;
  json doc;
};
PathsRun paths_run(const std::string& scenario, const std::string& extra_env = "") {
  auto r = probe(scenario, "probe --format json --copy --size 1048576 --repeat 1 --timeout 2", FAKE_NVML_LIBRARY,
                 FAKE_CUDA_LIBRARY, extra_env);
  return {r.status, json::parse(r.output)};
}

const json& peer_paths(const json& doc, int provider, int client) { return pair(runtime(doc, "cuda"), provider, client)["copy"]["peer_paths"]; }

// The decision the probe reports for the CUDA pair (its "reality" list): "host_staged (rule)".
std::string decided(const json& doc, const std::string& provider, const std::string& client) {
  for (const auto& c : doc["reality"])
    if (c["runtime"] == "cuda" && c["provider"] == provider && c["client"] == client) return c["decided"];
  ADD_FAILURE() << "no cuda reality entry " << provider << " -> " << client;
  return "";
}

constexpr std::uint64_t kWindowWords = (16u << 20) / 4;  // the default window, 16 MiB

TEST(NvidiaProbePeerPaths, OkVerifiesEveryPathInEveryWindowBothWays) {
  auto run = paths_run("ok");
  EXPECT_EQ(run.status, 0);
  for (auto [a, b] : {std::pair{0, 1}, std::pair{1, 0}}) {
    const auto& pp = peer_paths(run.doc, a, b);
    ASSERT_TRUE(pp.is_object()) << pp.dump();
    // The fake NVML's BAR1 (256 GiB) exceeds the fake's 1 GiB of memory: the memory is the span.
    EXPECT_EQ(pp["span_source"], "device_memory");
    EXPECT_EQ(pp["span_bytes"], 1ull << 30);
    EXPECT_EQ(pp["window_bytes"], 16u << 20);
    const auto& offsets = pp["offsets"];
    ASSERT_EQ(offsets.size(), 3u) << pp.dump();
    EXPECT_EQ(offsets[0], 0);
    EXPECT_GT(offsets[1].get<std::uint64_t>(), 0u);
    // The last window ends where the block does: the end of what was reached.
    EXPECT_EQ(offsets[2].get<std::uint64_t>() + pp["window_bytes"].get<std::uint64_t>(), pp["block_bytes"].get<std::uint64_t>());
    for (const char* path : {"kernel_stores", "kernel_loads", "atomics"}) {
      EXPECT_EQ(pp[path]["result"], "verified") << path << " " << pp.dump();
      ASSERT_EQ(pp[path]["windows"].size(), 3u) << path;
      for (size_t w = 0; w < 3; ++w) EXPECT_EQ(pp[path]["windows"][w]["offset"], offsets[w]) << path;
    }
  }
  // The fake's copy timings may stage the pair (copy-slower-than-staged); the paths never do here.
  EXPECT_EQ(decided(run.doc, "0000:00:06.0", "0000:00:07.0").find("kernel-peer-path-failed"), std::string::npos);
}

TEST(NvidiaProbePeerPaths, WindowsFollowNvmlBar1WhereItIsSmallerThanTheMemory) {
  auto run = paths_run("ok", "FAKE_NVIDIA_BAR1_BYTES=268435456");
  const auto& pp = peer_paths(run.doc, 0, 1);
  EXPECT_EQ(pp["span_source"], "bar1");
  EXPECT_EQ(pp["span_bytes"], 256u << 20);
  EXPECT_EQ(pp["block_bytes"], 256u << 20);
  EXPECT_EQ(pp["offsets"].back(), (256u - 16u) << 20);
}

TEST(NvidiaProbePeerPaths, KernelStoresDroppedWhileTheCopyEngineVerifies) {
  auto run = paths_run("kernel_stores_dropped");
  EXPECT_EQ(run.status, 1) << "a peer path that did not verify";
  const auto& copy = pair(runtime(run.doc, "cuda"), 0, 1)["copy"];
  EXPECT_EQ(copy["peer"]["result"], "verified") << "the copy engine delivers";
  const auto& stores = copy["peer_paths"]["kernel_stores"];
  EXPECT_EQ(stores["result"], "dropped");
  const auto& w = stores["windows"][0];
  EXPECT_EQ(w["result"], "dropped");
  EXPECT_EQ(w["bad_words"], kWindowWords);
  EXPECT_EQ(w["sentinel_words"], kWindowWords) << "the sentinel was left in every word";
  EXPECT_EQ(w["first_bad_offset"], 0);
  EXPECT_EQ(copy["peer_paths"]["kernel_loads"]["result"], "verified");
  EXPECT_EQ(copy["peer_paths"]["atomics"]["result"], "verified");
  EXPECT_EQ(decided(run.doc, "0000:00:06.0", "0000:00:07.0"), "host_staged (kernel-peer-path-failed)")
      << "NVLink and a verified copy do not vouch for kernel stores";
  ASSERT_FALSE(run.doc["data_corruption"].empty());
  EXPECT_NE(run.doc["data_corruption"][0].get<std::string>().find("kernel stores"), std::string::npos);
}

TEST(NvidiaProbePeerPaths, AZeroedWindowAtTheEndOfBar1Only) {
  auto run = paths_run("bar_end_zeroed", "FAKE_NVIDIA_BAR1_BYTES=268435456");
  const auto& pp = peer_paths(run.doc, 1, 0);
  for (const char* path : {"kernel_stores", "kernel_loads", "atomics"}) {
    EXPECT_EQ(pp[path]["result"], "zeroed") << path;
    const auto& windows = pp[path]["windows"];
    ASSERT_EQ(windows.size(), 3u) << path;
    EXPECT_EQ(windows[0]["result"], "verified") << path << ": the start is fine";
    EXPECT_EQ(windows[1]["result"], "verified") << path << ": the middle is fine";
    EXPECT_EQ(windows[2]["result"], "zeroed") << path;
    EXPECT_EQ(windows[2]["offset"], (256u - 16u) << 20) << path;
    EXPECT_EQ(windows[2]["zero_words"], kWindowWords) << path;
  }
  EXPECT_EQ(decided(run.doc, "0000:00:07.0", "0000:00:06.0"), "host_staged (kernel-peer-path-failed)");
}

TEST(NvidiaProbePeerPaths, WrongAtomicsAreCaught) {
  auto run = paths_run("atomics_wrong");
  const auto& pp = peer_paths(run.doc, 0, 1);
  EXPECT_EQ(pp["atomics"]["result"], "wrong");
  EXPECT_EQ(pp["atomics"]["windows"][0]["bad_words"], kWindowWords);
  EXPECT_EQ(pp["atomics"]["windows"][0]["sentinel_words"], 0) << "the adds landed, not all of them";
  EXPECT_EQ(pp["kernel_stores"]["result"], "verified");
  EXPECT_EQ(pp["kernel_loads"]["result"], "verified");
  EXPECT_EQ(decided(run.doc, "0000:00:06.0", "0000:00:07.0"), "host_staged (kernel-peer-path-failed)");
}

TEST(NvidiaProbePeerPaths, AtomicsNotAskedWhereTheDriverReportsNoNativePeerAtomics) {
  auto run = paths_run("no_peer_atomics");
  EXPECT_EQ(run.status, 0) << "not supported is no failure";
  const auto& pp = peer_paths(run.doc, 0, 1);
  EXPECT_EQ(pp["atomics"]["result"], "not_supported");
  EXPECT_TRUE(pp["atomics"]["windows"].empty());
  EXPECT_NE(pp["atomics"]["note"].get<std::string>().find("native peer atomics"), std::string::npos);
  EXPECT_EQ(pp["kernel_stores"]["result"], "verified");
  EXPECT_EQ(decided(run.doc, "0000:00:06.0", "0000:00:07.0").find("kernel-peer-path-failed"), std::string::npos);
}

TEST(NvidiaProbePeerPaths, AHungKernelIsThePathsAnswerAndTheOtherPairsGoOn) {
  auto run = paths_run("kernel_hang");
  const auto& cuda = runtime(run.doc, "cuda");
  const auto& copy = pair(cuda, 0, 1)["copy"];
  ASSERT_TRUE(copy.is_object()) << "the child answered the pair itself: " << copy.dump();
  EXPECT_EQ(copy["peer"]["result"], "verified");
  EXPECT_EQ(copy["host_staged"]["result"], "verified");
  const auto& stores = copy["peer_paths"]["kernel_stores"];
  EXPECT_EQ(stores["result"], "hung");
  EXPECT_EQ(stores["phase"], "p2paudit_peer_store at offset 0x0");
  // The context is lost behind the kernel: nothing more is asked of it.
  EXPECT_EQ(copy["peer_paths"]["kernel_loads"]["result"], "not_run");
  // A fresh child asked the other direction, whose peer (GPU 1) does not hang.
  EXPECT_EQ(peer_paths(run.doc, 1, 0)["kernel_stores"]["result"], "verified");
  EXPECT_EQ(decided(run.doc, "0000:00:06.0", "0000:00:07.0"), "host_staged (kernel-peer-path-failed)");
  EXPECT_EQ(decided(run.doc, "0000:00:07.0", "0000:00:06.0").find("kernel-peer-path-failed"), std::string::npos);
}

// Every ordered pair of four GPUs, both directions of each, gets its paths checked.
TEST(NvidiaProbePeerPaths, EveryOrderedPairOfFourGpus) {
  auto r = test::run_command("env P2PAUDIT_PROBE_ALLOW_SYSROOT=1 FAKE_NVIDIA_SCENARIO=kernel_hang "
                             "FAKE_NVIDIA_BDFS=0000:00:06.0,0000:00:07.0,0000:00:08.0,0000:00:09.0 P2PAUDIT_NVML_LIBRARY=" +
                             test::shell_quote(FAKE_NVML_LIBRARY) + " P2PAUDIT_CUDA_LIBRARY=" + test::shell_quote(FAKE_CUDA_LIBRARY) +
                             " " + P2PAUDIT_TOOL + " --sysroot " + test::shell_quote(fixture()) +
                             " probe --format json --copy --size 1048576 --repeat 1 --timeout 2 2>/dev/null");
  auto doc = json::parse(r.output);
  const auto& cuda = runtime(doc, "cuda");
  ASSERT_EQ(cuda["pairs"].size(), 12u);
  for (const auto& p : cuda["pairs"]) {
    const auto& stores = p["answers"]["copy"]["peer_paths"]["kernel_stores"];
    // GPU 0's memory hangs a peer's kernel; every other provider's works.
    EXPECT_EQ(stores["result"], p["provider"] == 0 ? "hung" : "verified") << p.dump();
  }
}

#ifdef CUDA_PEER_COPY_TOOL
// The plain CUDA peer copy (tools/cuda-peer-copy) runs against the fake too.
TEST(CudaPeerCopy, PrintsMedianBandwidthPerDirection) {
  auto r = test::run_command("env P2PAUDIT_CUDA_LIBRARY=" + test::shell_quote(FAKE_CUDA_LIBRARY) + " " +
                             CUDA_PEER_COPY_TOOL + " 1048576 3 2>&1");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* line : {"peer        0->1: ", "peer        1->0: ", "host-staged 0->1: ", "host-staged 1->0: "})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  EXPECT_NE(r.output.find("GB/s (median of 3, 1048576 bytes)"), std::string::npos) << r.output;
  auto bad = test::run_command(std::string(CUDA_PEER_COPY_TOOL) + " 0 2>&1");
  EXPECT_EQ(bad.status, 2) << bad.output;
}
#endif

TEST(NvidiaProbe, ANonLiveSysrootIsRefused) {
  auto r = test::run_command("env -u P2PAUDIT_PROBE_ALLOW_SYSROOT " + std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(fixture()) +
                             " probe 2>&1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("the runtimes describe this machine"), std::string::npos) << r.output;
}

TEST(NvidiaProbe, RuntimeBusIds) {
  EXPECT_EQ(probe::parse_runtime_bus_id("00000000:06:00.0")->str(), "0000:06:00.0");
  EXPECT_EQ(probe::parse_runtime_bus_id("0001:C1:00.1")->str(), "0001:c1:00.1");
  EXPECT_EQ(probe::parse_runtime_bus_id("06:1f.7")->str(), "0000:06:1f.7");
  EXPECT_EQ(probe::parse_runtime_bus_id("00010000:06:00.0")->str(), "10000:06:00.0");
  EXPECT_FALSE(probe::parse_runtime_bus_id("0000:06:20.0"));
  EXPECT_FALSE(probe::parse_runtime_bus_id("garbage"));
}

}  // namespace
}  // namespace p2paudit

namespace p2paudit {
namespace {

// nvidia-smi topo -p2p K as a map (row GPU, column GPU) -> "OK"/"NS"/...; "X" on the diagonal.
std::map<std::pair<int, int>, std::string> nvidia_smi_p2p(const std::string& text, char kind) {
  std::map<std::pair<int, int>, std::string> out;
  auto start = text.find(std::string("== topo -p2p ") + kind);
  EXPECT_NE(start, std::string::npos) << kind;
  std::istringstream in(text.substr(start));
  std::string line;
  std::getline(in, line);  // the "== topo" header
  std::getline(in, line);  // the column header
  for (int row = 0; std::getline(in, line) && line.rfind(" GPU", 0) == 0; ++row) {
    std::istringstream cells(line);
    std::string gpu, cell;
    cells >> gpu;
    for (int col = 0; cells >> cell; ++col) out[{row, col}] = cell;
  }
  return out;
}

// Recorded on a lent 2x H200 VM (NVLink NV18) in one run: `p2paudit probe --format json` and
// `nvidia-smi topo -p2p r/w/n/a`. The probe's NVML matrix must say what nvidia-smi says. Two
// recordings: the first probe, and the run with the copy test (copy-2026-11-22).
class NvidiaProbeRecording : public ::testing::TestWithParam<std::string> {};

TEST_P(NvidiaProbeRecording, H200PairMatrixEqualsNvidiaSmi) {
  std::string dir = test::data_path("machines/h200x2-firecracker-vm/");
  std::string probe_file = GetParam() == "probe-2026-11-22" ? "probe.json" : "probe-copy.json";
  std::ifstream pj(dir + GetParam() + "/" + probe_file), topo(dir + GetParam() + "/nvidia-smi-topo.txt");
  ASSERT_TRUE(pj && topo);
  nlohmann::json probe = nlohmann::json::parse(pj);
  std::string smi((std::istreambuf_iterator<char>(topo)), std::istreambuf_iterator<char>());
  const nlohmann::json* nvml = nullptr;
  for (const auto& r : probe["runtimes"])
    if (r["runtime"] == "nvml") nvml = &r;
  ASSERT_NE(nvml, nullptr);
  ASSERT_EQ((*nvml)["status"], "ok");
  ASSERT_EQ((*nvml)["devices"].size(), 2u);
  const std::map<std::string, std::string> smi_word = {{"ok", "OK"}, {"not_supported", "NS"}};
  int compared = 0;
  for (auto [kind, answer] : {std::pair{'r', "read"}, {'w', "write"}, {'n', "nvlink"}, {'a', "atomics"}}) {
    auto expected = nvidia_smi_p2p(smi, kind);
    for (const auto& pair : (*nvml)["pairs"]) {
      int p = pair["provider"], c = pair["client"];
      std::string ours = pair["answers"][answer];
      ASSERT_TRUE(smi_word.count(ours)) << ours;
      std::string theirs = expected[std::make_pair(p, c)];
      EXPECT_EQ(smi_word.at(ours), theirs) << answer << " " << p << "->" << c;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 8);
}

INSTANTIATE_TEST_SUITE_P(H200, NvidiaProbeRecording, ::testing::Values("probe-2026-11-22", "copy-2026-11-22"),
                         [](const auto& info) { return info.param.substr(0, info.param.find('-')); });

}  // namespace
}  // namespace p2paudit
