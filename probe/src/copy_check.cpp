// SPDX-License-Identifier: GPL-2.0-or-later
#include "copy_check.h"

#include <algorithm>
#include <cstring>

namespace p2paudit::probe::detail {

void fill_random(std::uint8_t* data, std::size_t size, std::uint64_t seed) {
  std::uint64_t x = seed ? seed : 0x9e3779b97f4a7c15ull;
  for (std::size_t i = 0; i < size; i += 8) {
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    std::uint64_t v = x * 0x2545f4914f6cdd1dull;
    std::memcpy(data + i, &v, std::min<std::size_t>(8, size - i));
  }
}

Mismatch compare_buffers(const std::uint8_t* expected, const std::uint8_t* actual, std::size_t size) {
  // memcmp per 64 KiB block keeps a multi-GiB compare within the time limit; only a differing
  // block is walked byte by byte.
  constexpr std::size_t kBlock = 64 * 1024;
  Mismatch m;
  for (std::size_t start = 0; start < size; start += kBlock) {
    std::size_t n = std::min(kBlock, size - start);
    if (std::memcmp(expected + start, actual + start, n) == 0) continue;
    for (std::size_t i = start; i < start + n; ++i)
      if (expected[i] != actual[i]) {
        if (m.first_offset < 0) m.first_offset = static_cast<std::int64_t>(i);
        ++m.bytes;
      }
  }
  return m;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

nlohmann::json CopyLeg::to_json(std::uint64_t size_bytes) const {
  nlohmann::json j = {{"result", result}};
  double m = median(seconds);
  j["gbps"] = result == "verified" && m > 0 ? nlohmann::json(static_cast<double>(size_bytes) / m / 1e9) : nlohmann::json(nullptr);
  j["seconds"] = seconds;
  if (result == "failed") j["phase"] = phase, j["error"] = error, j["code"] = code;
  if (result == "not_run" && !error.empty()) j["note"] = error;
  if (mismatch.any()) j["mismatched_bytes"] = mismatch.bytes, j["first_mismatch"] = mismatch.first_offset;
  return j;
}

nlohmann::json copy_answer(const CopyOptions& options, const CopyLeg& peer, const CopyLeg& host_staged) {
  return {{"size_bytes", options.size_bytes},
          {"repeat", options.repeat},
          {"peer", peer.to_json(options.size_bytes)},
          {"host_staged", host_staged.to_json(options.size_bytes)}};
}

}  // namespace p2paudit::probe::detail
