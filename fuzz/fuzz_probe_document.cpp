// SPDX-License-Identifier: GPL-2.0-or-later
// A snapshot's stored probe document (p2paudit-probe.json): the bounded parse, then the facts and
// the prediction checks drawn from it.
#include <cstdint>

#include "fuzz_input.h"
#include "p2paudit/errors.h"
#include "p2paudit/probe/runtime_facts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto document = p2paudit::probe::parse_probe_document(p2paudit::fuzz::text(data, size), "fuzz.json");
    (void)p2paudit::probe::runtime_facts(document, "fuzz.json");
  } catch (const p2paudit::InputError&) {
  }
  return 0;
}
