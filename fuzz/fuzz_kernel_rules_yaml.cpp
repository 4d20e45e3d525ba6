// SPDX-License-Identifier: GPL-2.0-or-later
// A --kernel-rules whitelist file: strict YAML, then the entries and their releases.
#include <cstdint>

#include "fuzz_input.h"
#include "p2paudit/errors.h"
#include "p2paudit/kernel_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)p2paudit::parse_whitelist_file(p2paudit::fuzz::text(data, size), "fuzz.yaml");
  } catch (const p2paudit::InputError&) {
  }
  return 0;
}
