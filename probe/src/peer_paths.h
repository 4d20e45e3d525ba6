// SPDX-License-Identifier: GPL-2.0-or-later
// The peer paths a workload uses besides the copy engine (`probe --copy`, docs/probe.md "Peer
// paths"): a kernel on the client GPU storing into the provider's memory, loading from it, and
// adding to it atomically. Copy engines can deliver intact while the same pair's kernel stores are
// silently lost (https://github.com/tinygrad/open-gpu-kernel-modules/issues/44), so each path is
// checked on its own. What every backend shares lives here: where the test windows go, the word
// pattern, how a window's words are judged, and the JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace p2paudit::probe::detail {

// The destination's words before a path writes them: a word still holding it was never written.
inline constexpr std::uint32_t kSentinel = 0xDEADBEEFu;
// Atomic adds per word, from neighbouring threads of one warp at once (contention, not just an
// add that a plain read-modify-write would also get right).
inline constexpr std::uint32_t kAtomicAddsPerWord = 4;

enum class PeerPath { kKernelStores, kKernelLoads, kAtomics };
inline constexpr PeerPath kPeerPaths[] = {PeerPath::kKernelStores, PeerPath::kKernelLoads, PeerPath::kAtomics};
const char* path_name(PeerPath path);        // "kernel_stores", "kernel_loads", "atomics"
const char* path_words(PeerPath path);       // "kernel stores", "kernel loads", "atomics"

// Where the test windows go in the provider's memory: a block as large as the span that peers
// reach (BAR1 where NVML said, else the device memory), bounded by free memory, with windows at its
// start, middle and end (more with --thorough).
struct WindowPlan {
  std::uint64_t span_bytes = 0;           // what a peer can reach: min(BAR1, memory)
  std::string span_source;                // "bar1" or "device_memory"
  std::uint64_t block_bytes = 0;          // the block asked for (the backend may get less)
  std::uint64_t window_bytes = 0;         // each window
  int windows = 3;                        // how many windows
  double seconds_per_pair = 0;            // the time bound for all paths of one pair
  double seconds_per_kernel = 0;          // one kernel's time limit before it is "hung"
};
// bar1_bytes 0: unknown. free_bytes: cuMemGetInfo's free memory of the provider.
WindowPlan plan_windows(std::uint64_t bar1_bytes, std::uint64_t memory_bytes, std::uint64_t free_bytes, bool thorough,
                        int timeout_seconds);
// The windows' offsets in a block of block_bytes: evenly from 0 to its last window, distinct,
// 4 KiB-aligned. Empty when not one window fits.
std::vector<std::uint64_t> window_offsets(std::uint64_t block_bytes, std::uint64_t window_bytes, int windows);

// Unique words (a hash of the word's index and the seed), never the sentinel and never 0, so a
// dropped, zeroed or misplaced write never compares equal by chance.
void fill_pattern(std::uint32_t* words, std::size_t count, std::uint64_t seed);
// Atomic increments: unique for a window of up to 2^28 words, small enough that kAtomicAddsPerWord
// of them never wrap to the sentinel; expected[i] = kSentinel + kAtomicAddsPerWord * inc[i].
void fill_increments(std::uint32_t* inc, std::uint32_t* expected, std::size_t count, std::uint64_t seed);

// One window of one path after it ran.
struct WindowResult {
  std::uint64_t offset = 0;               // in the provider's block
  std::string result = "not_run";         // verified | dropped | zeroed | wrong | not_run
  std::uint64_t bad_words = 0;
  std::int64_t first_bad_offset = -1;     // bytes into the window
  std::uint64_t sentinel_words = 0, zero_words = 0;  // of the bad words
  nlohmann::json to_json() const;
};
// Every word compared: verified; the bad ones all the sentinel: dropped; all zero: zeroed;
// otherwise wrong (misplaced, stale or mixed).
WindowResult judge_window(const std::uint32_t* expected, const std::uint32_t* actual, std::size_t count,
                          std::uint64_t offset);

// One path of one pair.
struct PathResult {
  // verified | dropped | zeroed | wrong | hung | refused | not_supported | not_run
  std::string result = "not_run";
  std::vector<WindowResult> windows;
  std::string phase, error, note;         // refused/hung: the call; not_supported/not_run: why
  long long code = 0;
  void add(const WindowResult& w);        // the worst window decides
  void refuse(std::string call, long long raw_code, std::string code_name);
  void hang(std::string call, double seconds);
  nlohmann::json to_json() const;
};
// Worst first: wrong, zeroed, dropped, hung, refused, verified, not_supported, not_run.
int path_rank(const std::string& result);
// True for the results that mean the path does not carry data: what the policy stages for.
bool path_failed(const std::string& result);

// copy["peer_paths"]: the plan, the offsets reached, and each path.
nlohmann::json peer_paths_answer(const WindowPlan& plan, std::uint64_t block_bytes,
                                 const std::vector<std::uint64_t>& offsets, std::uint64_t seed, double seconds,
                                 const PathResult (&paths)[3], const std::string& note);

}  // namespace p2paudit::probe::detail
