// SPDX-License-Identifier: GPL-2.0-or-later
// A device table of a --rules-dir (rules/devices/*.yaml): strict YAML, then the rows, their IDs,
// ranges, lines, sources and sizes.
#include <cstdint>

#include "fuzz_input.h"
#include "p2paudit/errors.h"
#include "p2paudit/policy/device_knowledge.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)p2paudit::policy::parse_device_rows(p2paudit::fuzz::text(data, size), "fuzz.yaml");
  } catch (const p2paudit::InputError&) {
  }
  return 0;
}
