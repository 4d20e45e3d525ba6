// SPDX-License-Identifier: GPL-2.0-or-later
// What every backend's copy test shares (`probe --copy`, probe.h describes the JSON): the random
// buffer, the full comparison, the median and the per-leg result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/probe/probe.h"

namespace p2paudit::probe::detail {

// Deterministic pseudo-random bytes (xorshift64*), so a stale buffer or a copy of the wrong
// region never compares equal by chance.
void fill_random(std::uint8_t* data, std::size_t size, std::uint64_t seed);

struct Mismatch {
  std::uint64_t bytes = 0;          // bytes that differ
  std::int64_t first_offset = -1;   // -1: none
  bool any() const { return bytes != 0; }
};
Mismatch compare_buffers(const std::uint8_t* expected, const std::uint8_t* actual, std::size_t size);

double median(std::vector<double> values);  // 0 when empty

// One leg of a copy test: the peer copy, or the copy staged through host memory.
struct CopyLeg {
  std::string result = "not_run";   // verified | corrupt | failed | not_run
  std::string phase;                // failed: the call that failed
  std::string error;                // failed: its code name; not_run: why (kept as "note")
  long long code = 0;
  std::vector<double> seconds;      // one per timed repeat
  Mismatch mismatch;                // corrupt: the first repeat that differed

  void fail(std::string call, long long raw_code, std::string code_name) {
    result = "failed", phase = std::move(call), code = raw_code, error = std::move(code_name);
  }
  // After the repeats: "corrupt" when any compare differed, else "verified".
  void finish() { if (result == "not_run") result = mismatch.any() ? "corrupt" : "verified"; }
  nlohmann::json to_json(std::uint64_t size_bytes) const;
};

// answers["copy"] for one pair.
nlohmann::json copy_answer(const CopyOptions& options, const CopyLeg& peer, const CopyLeg& host_staged);

}  // namespace p2paudit::probe::detail
