// SPDX-License-Identifier: GPL-2.0-or-later
// A --vendor-facts JSON file: types, ranges, and facts a vendor tool may not set.
#include <cstdint>

#include "fuzz_input.h"
#include "p2paudit/errors.h"
#include "p2paudit/policy/facts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)p2paudit::policy::VendorFactsDocument::parse(p2paudit::fuzz::text(data, size), "fuzz.json");
  } catch (const p2paudit::InputError&) {
  }
  return 0;
}
