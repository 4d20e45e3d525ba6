// SPDX-License-Identifier: GPL-2.0-or-later
#include "peer_paths.h"

#include <algorithm>

#include <fmt/format.h>

namespace p2paudit::probe::detail {

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kPage = 4096;

// murmur3's finaliser over (index, seed): cheap, and distinct indices give distinct words for
// a fixed seed (it is a bijection of the 32-bit input).
std::uint32_t mix(std::uint64_t index, std::uint64_t seed) {
  auto x = static_cast<std::uint32_t>(index ^ (seed * 0x9e3779b97f4a7c15ull >> 32));
  x ^= x >> 16, x *= 0x85ebca6bu, x ^= x >> 13, x *= 0xc2b2ae35u, x ^= x >> 16;
  return x;
}

}  // namespace

const char* path_name(PeerPath path) {
  switch (path) {
    case PeerPath::kKernelStores: return "kernel_stores";
    case PeerPath::kKernelLoads: return "kernel_loads";
    case PeerPath::kAtomics: return "atomics";
  }
  return "?";
}

const char* path_words(PeerPath path) {
  switch (path) {
    case PeerPath::kKernelStores: return "kernel stores";
    case PeerPath::kKernelLoads: return "kernel loads";
    case PeerPath::kAtomics: return "atomics";
  }
  return "?";
}

WindowPlan plan_windows(std::uint64_t bar1_bytes, std::uint64_t memory_bytes, std::uint64_t free_bytes, bool thorough,
                        int timeout_seconds) {
  WindowPlan plan;
  plan.span_bytes = memory_bytes ? memory_bytes : free_bytes;
  plan.span_source = "device_memory";
  if (bar1_bytes && bar1_bytes < plan.span_bytes) plan.span_bytes = bar1_bytes, plan.span_source = "bar1";
  // An eighth of the free memory stays free: a shared GPU's other jobs keep room to allocate.
  const std::uint64_t usable = free_bytes - free_bytes / 8;
  plan.block_bytes = std::min(plan.span_bytes, usable) / (2 * kMiB) * (2 * kMiB);
  if (plan.block_bytes == 0) plan.block_bytes = usable / kPage * kPage;
  plan.window_bytes = std::min<std::uint64_t>(thorough ? 256 * kMiB : 16 * kMiB, plan.block_bytes) / kPage * kPage;
  plan.windows = thorough ? 9 : 3;
  plan.seconds_per_pair = thorough ? 120.0 : 4.0;
  // Below the parent's limit for one phase, so that a hung kernel is this path's answer and not
  // the whole copy child's death.
  plan.seconds_per_kernel = std::max(0.25, std::min(thorough ? 10.0 : 2.0, timeout_seconds / 2.0));
  return plan;
}

std::vector<std::uint64_t> window_offsets(std::uint64_t block_bytes, std::uint64_t window_bytes, int windows) {
  std::vector<std::uint64_t> offsets;
  if (window_bytes == 0 || block_bytes < window_bytes || windows < 1) return offsets;
  const std::uint64_t last = (block_bytes - window_bytes) / kPage * kPage;
  for (int i = 0; i < windows; ++i) {
    std::uint64_t at = windows == 1 ? 0 : last / static_cast<std::uint64_t>(windows - 1) * static_cast<std::uint64_t>(i);
    if (i == windows - 1) at = last;  // the very end, whatever the division left
    at = at / kPage * kPage;
    if (offsets.empty() || at > offsets.back()) offsets.push_back(at);
  }
  return offsets;
}

void fill_pattern(std::uint32_t* words, std::size_t count, std::uint64_t seed) {
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t w = mix(i, seed);
    // The two values that mean "never written" and "zeroed" are never sent; flipping the low bit
    // may meet another index's word, which costs nothing: the index is what is checked.
    if (w == kSentinel || w == 0) w ^= 1;
    words[i] = w;
  }
}

void fill_increments(std::uint32_t* inc, std::uint32_t* expected, std::size_t count, std::uint64_t seed) {
  const std::uint32_t salt = mix(0, seed);
  for (std::size_t i = 0; i < count; ++i) {
    // 1 .. 2^28, distinct for the first 2^28 words (an xor with a constant is a bijection): an add
    // that lands on another word shows. kAtomicAddsPerWord * inc < 2^30 + 4 never wraps the
    // sentinel round to itself or to 0 (0 - kSentinel is odd).
    inc[i] = ((static_cast<std::uint32_t>(i) ^ salt) & 0x0fffffffu) + 1;
    expected[i] = kSentinel + kAtomicAddsPerWord * inc[i];
  }
}

WindowResult judge_window(const std::uint32_t* expected, const std::uint32_t* actual, std::size_t count,
                          std::uint64_t offset) {
  WindowResult w;
  w.offset = offset;
  for (std::size_t i = 0; i < count; ++i) {
    if (expected[i] == actual[i]) continue;
    if (w.first_bad_offset < 0) w.first_bad_offset = static_cast<std::int64_t>(i * 4);
    ++w.bad_words;
    if (actual[i] == kSentinel) ++w.sentinel_words;
    else if (actual[i] == 0) ++w.zero_words;
  }
  w.result = w.bad_words == 0 ? "verified" : w.sentinel_words == w.bad_words ? "dropped"
           : w.zero_words == w.bad_words ? "zeroed" : "wrong";
  return w;
}

nlohmann::json WindowResult::to_json() const {
  nlohmann::json j = {{"offset", offset}, {"result", result}};
  if (bad_words) {
    j["bad_words"] = bad_words;
    j["first_bad_offset"] = first_bad_offset;
    j["sentinel_words"] = sentinel_words;
    j["zero_words"] = zero_words;
  }
  return j;
}

int path_rank(const std::string& result) {
  static const char* const order[] = {"not_run", "not_supported", "verified", "refused", "hung", "dropped", "zeroed", "wrong"};
  for (int i = 0; i < 8; ++i)
    if (result == order[i]) return i;
  return 0;
}

bool path_failed(const std::string& result) { return path_rank(result) >= path_rank("refused"); }

void PathResult::add(const WindowResult& w) {
  windows.push_back(w);
  if (path_rank(w.result) > path_rank(result)) result = w.result;
}

void PathResult::refuse(std::string call, long long raw_code, std::string code_name) {
  if (path_rank(result) > path_rank("refused")) return;  // wrong data already seen stays the answer
  result = "refused", phase = std::move(call), code = raw_code, error = std::move(code_name);
}

void PathResult::hang(std::string call, double seconds) {
  if (path_rank(result) > path_rank("hung")) return;
  result = "hung", phase = std::move(call), code = 0, error = fmt::format("not done within {:g} s", seconds);
}

nlohmann::json PathResult::to_json() const {
  nlohmann::json j = {{"result", result}};
  if (result == "refused" || result == "hung") j["phase"] = phase, j["error"] = error;
  if (result == "refused") j["code"] = code;
  if (!note.empty()) j["note"] = note;
  auto w = nlohmann::json::array();
  for (const auto& window : windows) w.push_back(window.to_json());
  j["windows"] = std::move(w);
  return j;
}

nlohmann::json peer_paths_answer(const WindowPlan& plan, std::uint64_t block_bytes,
                                 const std::vector<std::uint64_t>& offsets, std::uint64_t seed, double seconds,
                                 const PathResult (&paths)[3], const std::string& note) {
  nlohmann::json j = {{"span_bytes", plan.span_bytes},
                      {"span_source", plan.span_source},
                      {"block_bytes", block_bytes},
                      {"window_bytes", plan.window_bytes},
                      {"offsets", offsets},
                      {"seed", seed},
                      {"seconds", seconds},
                      {"time_limit_seconds", plan.seconds_per_pair}};
  if (!note.empty()) j["note"] = note;
  for (PeerPath p : kPeerPaths) j[path_name(p)] = paths[static_cast<int>(p)].to_json();
  return j;
}

}  // namespace p2paudit::probe::detail
