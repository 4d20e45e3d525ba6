// SPDX-License-Identifier: GPL-2.0-or-later
// An `aggregate` JSON input (docs/fleet.md): the bounded parse, then the document as a report or,
// as `--merge` reads it, as a partial state; the first byte's low bit picks which. What is counted
// must render, and its own partial must read back and merge to the same state: the tool never
// writes a partial that it would refuse.
#include <cstdint>
#include <cstdlib>

#include "fuzz_input.h"
#include "p2paudit/errors.h"
#include "p2paudit/fleet/aggregate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  bool as_partial = data[0] & 1;
  p2paudit::fleet::AggregateState state;
  try {
    auto doc = p2paudit::fleet::parse_fleet_json(p2paudit::fuzz::text(data + 1, size - 1), "fuzz.json");
    state.add_document(doc, "fuzz.json", as_partial);
  } catch (const p2paudit::InputError&) {
    return 0;
  }
  (void)state.to_text();
  (void)state.to_csv();
  std::string partial = state.to_json(true, "fuzz").dump();
  (void)state.to_json(false, "fuzz").dump();
  p2paudit::fleet::AggregateState again;
  try {
    again.add_document(p2paudit::fleet::parse_fleet_json(partial, "again.json"), "again.json", true);
  } catch (const p2paudit::InputError&) {
    std::abort();  // the tool's own partial refused
  }
  if (again.to_json(true, "fuzz").dump() != partial) std::abort();  // read back differently
  return 0;
}
