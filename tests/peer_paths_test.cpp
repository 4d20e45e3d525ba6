// SPDX-License-Identifier: GPL-2.0-or-later
// The peer paths' shared pieces (probe/src/peer_paths.h): where the windows go, the word patterns
// and how a window's words are judged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "cuda_peer_kernels.h"
#include "peer_paths.h"
#include "test_support.h"

namespace p2paudit::probe::detail {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30;

TEST(PeerPaths, TheSpanIsBar1WhereItIsSmallerThanTheMemory) {
  auto small_bar = plan_windows(256 * kMiB, 24 * kGiB, 23 * kGiB, false, 20);
  EXPECT_EQ(small_bar.span_source, "bar1");
  EXPECT_EQ(small_bar.span_bytes, 256 * kMiB);
  EXPECT_EQ(small_bar.block_bytes, 256 * kMiB);
  auto large_bar = plan_windows(256 * kGiB, 80 * kGiB, 79 * kGiB, false, 20);
  EXPECT_EQ(large_bar.span_source, "device_memory");
  // An eighth of the free memory stays free for the GPU's other jobs.
  EXPECT_LE(large_bar.block_bytes, 79 * kGiB - 79 * kGiB / 8);
  EXPECT_EQ(large_bar.block_bytes % (2 * kMiB), 0u);
  auto unknown_bar = plan_windows(0, 80 * kGiB, 79 * kGiB, false, 20);
  EXPECT_EQ(unknown_bar.span_source, "device_memory");
}

TEST(PeerPaths, ThoroughMeansMoreAndLargerWindowsAndKernelsStayUnderThePhaseLimit) {
  auto quick = plan_windows(0, 80 * kGiB, 79 * kGiB, false, 20), thorough = plan_windows(0, 80 * kGiB, 79 * kGiB, true, 20);
  EXPECT_EQ(quick.windows, 3);
  EXPECT_EQ(quick.window_bytes, 16 * kMiB);
  EXPECT_EQ(thorough.windows, 9);
  EXPECT_EQ(thorough.window_bytes, 256 * kMiB);
  EXPECT_GT(thorough.seconds_per_pair, quick.seconds_per_pair);
  EXPECT_LT(plan_windows(0, kGiB, kGiB, false, 2).seconds_per_kernel, 2.0) << "a hung kernel is the path's answer";
}

TEST(PeerPaths, WindowsAtTheStartMiddleAndEnd) {
  auto offsets = window_offsets(1000 * kMiB, 16 * kMiB, 3);
  ASSERT_EQ(offsets.size(), 3u);
  EXPECT_EQ(offsets[0], 0u);
  EXPECT_EQ(offsets[2], 984 * kMiB) << "the last window ends at the block's end";
  EXPECT_GT(offsets[1], offsets[0]);
  EXPECT_LT(offsets[1], offsets[2]);
  for (auto o : offsets) EXPECT_EQ(o % 4096, 0u);
  EXPECT_EQ(window_offsets(16 * kMiB, 16 * kMiB, 3), std::vector<std::uint64_t>{0}) << "one window fits: one offset";
  EXPECT_TRUE(window_offsets(kMiB, 16 * kMiB, 3).empty());
}

TEST(PeerPaths, PatternWordsAreUniqueAndNeverTheSentinelOrZero) {
  std::vector<std::uint32_t> words(1 << 20);
  fill_pattern(words.data(), words.size(), 42);
  std::set<std::uint32_t> distinct(words.begin(), words.end());
  EXPECT_GT(distinct.size(), words.size() - 4) << "at most a flipped bit's collision";
  EXPECT_EQ(distinct.count(kSentinel), 0u);
  EXPECT_EQ(distinct.count(0u), 0u);
  std::vector<std::uint32_t> other(words.size());
  fill_pattern(other.data(), other.size(), 43);
  EXPECT_NE(words, other) << "another seed, other words";
  std::vector<std::uint32_t> inc(1 << 20), expected(inc.size());
  fill_increments(inc.data(), expected.data(), inc.size(), 42);
  EXPECT_EQ(std::set<std::uint32_t>(inc.begin(), inc.end()).size(), inc.size());
  for (size_t i = 0; i < inc.size(); ++i) {
    ASSERT_EQ(expected[i], kSentinel + kAtomicAddsPerWord * inc[i]);
    ASSERT_NE(expected[i], kSentinel);
    ASSERT_NE(expected[i], 0u);
  }
}

TEST(PeerPaths, AWindowIsJudgedByWhatItsBadWordsHold) {
  std::vector<std::uint32_t> expected(1000);
  fill_pattern(expected.data(), expected.size(), 1);
  auto actual = expected;
  EXPECT_EQ(judge_window(expected.data(), actual.data(), 1000, 0).result, "verified");
  for (size_t i = 500; i < 1000; ++i) actual[i] = kSentinel;
  auto dropped = judge_window(expected.data(), actual.data(), 1000, 4096);
  EXPECT_EQ(dropped.result, "dropped");
  EXPECT_EQ(dropped.bad_words, 500u);
  EXPECT_EQ(dropped.first_bad_offset, 2000);
  EXPECT_EQ(dropped.offset, 4096u);
  for (size_t i = 500; i < 1000; ++i) actual[i] = 0;
  EXPECT_EQ(judge_window(expected.data(), actual.data(), 1000, 0).result, "zeroed");
  actual[999] = expected[998];  // a misplaced word
  EXPECT_EQ(judge_window(expected.data(), actual.data(), 1000, 0).result, "wrong");
}

TEST(PeerPaths, APathIsItsWorstWindowAndRefusalsDoNotHideWrongData) {
  PathResult p;
  WindowResult ok, zeroed;
  ok.result = "verified", zeroed.result = "zeroed";
  p.add(ok);
  EXPECT_EQ(p.result, "verified");
  p.add(zeroed);
  p.add(ok);
  EXPECT_EQ(p.result, "zeroed");
  p.refuse("cuLaunchKernel", 719, "CUDA_ERROR_LAUNCH_FAILED");
  EXPECT_EQ(p.result, "zeroed");
  EXPECT_TRUE(path_failed("zeroed"));
  EXPECT_TRUE(path_failed("refused"));
  EXPECT_FALSE(path_failed("not_supported"));
  EXPECT_FALSE(path_failed("not_run"));
  EXPECT_FALSE(path_failed("verified"));
}

// The PTX names every kernel the probe asks cuModuleGetFunction for, at a target every driver JITs;
// where CUDA's ptxas is installed, it assembles for Hopper (the driver does the same at run time).
TEST(PeerPaths, ThePtxHasEveryKernelAndAssembles) {
  const std::string ptx = kPeerKernelsPtx;
  EXPECT_EQ(ptx.rfind(".version 6.0\n.target sm_50\n.address_size 64\n", 0), 0u);
  for (const char* name : {kPeerStoreKernel, kPeerLoadKernel, kPeerAtomicKernel})
    EXPECT_NE(ptx.find(std::string(".visible .entry ") + name + "("), std::string::npos) << name;
  EXPECT_NE(ptx.find("atom.global.add.u32"), std::string::npos);
  const char* ptxas = "/usr/local/cuda/bin/ptxas";
  if (!std::filesystem::exists(ptxas)) GTEST_SKIP() << "no " << ptxas << " to assemble the PTX with";
  const std::string dir = std::filesystem::temp_directory_path() / ("p2paudit-ptx-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/peer.ptx") << ptx;
  auto r = test::run_command(std::string(ptxas) + " -arch=sm_90 " + dir + "/peer.ptx -o " + dir + "/peer.cubin 2>&1");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.status, 0) << r.output;
}

}  // namespace
}  // namespace p2paudit::probe::detail
