// SPDX-License-Identifier: GPL-2.0-or-later
// The Level Zero probe's opt-in steps, each in its own file and its own children:
// `probe --copy` (level_zero_copy.cpp) and `probe --mirror` (level_zero_mirror.cpp).
// docs/probe-level-zero.md describes what they ask and the JSON they give.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/probe/probe.h"

namespace p2paudit::probe::level_zero {

// Where a device is in every child's walk (level_zero_api.h), and what the report calls it.
struct DeviceSlot {
  int index = 0;         // RuntimeReport::devices
  size_t driver = 0;     // position in Walk::drivers
  size_t position = 0;   // position in Walk::devices[driver]: the driver's own device index
  std::string bdf;       // "0000:03:00.0", "" when the driver did not say
};

// --copy: per pair whose queries were answered, in a child of its own (session.h's loop), stored
// in the pair's answers["copy"] (probe.h); the other pairs' copies are "not_asked".
void copy_pairs(RuntimeReport& report, const std::vector<DeviceSlot>& slots, const ProbeOptions& options);

// --mirror: sets report.extra["mirror"], or adds a note when there is nothing to measure.
void measure_mirror(RuntimeReport& report, const std::vector<DeviceSlot>& devices, const ProbeOptions& options);

// json (keys sorted, as it crossed a child's pipe) as ordered_json with the documented keys first.
nlohmann::ordered_json in_order(const nlohmann::json& j, std::initializer_list<const char*> first);

// Bounds for the buffers --copy and --mirror allocate and the repeats they time, whatever a
// library caller passes (the command line checks its own).
inline constexpr int kMaxCopyRepeat = 1000;

}  // namespace p2paudit::probe::level_zero
