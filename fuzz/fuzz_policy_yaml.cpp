// SPDX-License-Identifier: GPL-2.0-or-later
// A policy or advisories file: strict YAML (aliases, duplicates, documents), then the rule language.
#include <cstdint>

#include "fuzz_input.h"
#include "p2paudit/errors.h"
#include "p2paudit/policy/rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)p2paudit::policy::parse_rule_file(p2paudit::fuzz::text(data, size), "fuzz.yaml");
  } catch (const p2paudit::InputError&) {
  }
  return 0;
}
