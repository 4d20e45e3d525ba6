// SPDX-License-Identifier: GPL-2.0-or-later
// An `aggregate` JSON input (docs/fleet.md): the bounded parse, then the document as a report or,
// as `--merge` reads it, as a partial state; the first byte's low bit picks which. A refused input
// leaves a state that already holds a recorded report as it was; what is counted must render and
// merge into that state; and its own partial must read back to the same state: the tool never
// writes a partial that it would refuse.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz_input.h"
#include "p2paudit/errors.h"
#include "p2paudit/fleet/aggregate.h"

namespace {

using p2paudit::fleet::AggregateState;

// One recorded machine's report (tests/data), so that merging meets existing keys.
const AggregateState& base() {
  static const AggregateState state = [] {
    AggregateState s;
    std::ifstream in(P2PAUDIT_FUZZ_REPORT);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    s.add_document(p2paudit::fleet::parse_fleet_json(text, "report.json"), "report.json", false);
    return s;
  }();
  return state;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  bool as_partial = data[0] & 1;
  nlohmann::json doc;
  try {
    doc = p2paudit::fleet::parse_fleet_json(p2paudit::fuzz::text(data + 1, size - 1), "fuzz.json");
  } catch (const p2paudit::InputError&) {
    return 0;
  }
  AggregateState onto_base = base();
  try {
    onto_base.add_document(doc, "fuzz.json", as_partial);
  } catch (const p2paudit::InputError&) {
    if (onto_base.to_json(true, "fuzz") != base().to_json(true, "fuzz")) std::abort();  // a refused input counted
    return 0;
  }
  AggregateState state;
  state.add_document(doc, "fuzz.json", as_partial);  // accepted onto a state, so accepted alone
  (void)state.to_text();
  (void)state.to_csv();
  (void)onto_base.to_text();
  std::string partial = state.to_json(true, "fuzz").dump();
  (void)state.to_json(false, "fuzz").dump();
  AggregateState again;
  try {
    again.add_document(p2paudit::fleet::parse_fleet_json(partial, "again.json"), "again.json", true);
  } catch (const p2paudit::InputError&) {
    std::abort();  // the tool's own partial refused
  }
  if (again.to_json(true, "fuzz").dump() != partial) std::abort();  // read back differently
  AggregateState merged = base();
  merged.merge(again);
  (void)merged.to_csv();
  return 0;
}
