// SPDX-License-Identifier: GPL-2.0-or-later
// An `aggregate` input from another machine: the bounded JSON reader (parse_fleet_json), then the
// same document read as a report and as a partial state (AggregateState's public entries), each
// into a state holding a real report already, and the states merged and rendered (JSON, text,
// CSV) as aggregate does. A malformed input must throw InputError and leave the state as it was.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz_input.h"
#include "p2paudit/errors.h"
#include "p2paudit/fleet/aggregate.h"

namespace {

// A state with one recorded machine's report (tests/data), so that merging meets existing keys.
const p2paudit::fleet::AggregateState& base() {
  static const p2paudit::fleet::AggregateState state = [] {
    p2paudit::fleet::AggregateState s;
    std::ifstream in(P2PAUDIT_FUZZ_REPORT);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    s.add_report(p2paudit::fleet::parse_fleet_json(text, "report.json"), "report.json");
    return s;
  }();
  return state;
}

void render(const p2paudit::fleet::AggregateState& s) {
  (void)s.to_json(true, "fuzz");
  (void)s.to_json(false, "fuzz");
  (void)s.to_text();
  (void)s.to_csv();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json document;
  try {
    document = p2paudit::fleet::parse_fleet_json(p2paudit::fuzz::text(data, size), "fuzz.json");
  } catch (const p2paudit::InputError&) {
    return 0;
  }
  for (bool partial : {false, true}) {
    p2paudit::fleet::AggregateState s = base();
    try {
      if (partial) s.add_partial(document, "fuzz.json");
      else s.add_report(document, "fuzz.json");
    } catch (const p2paudit::InputError&) {
      if (s.machines != base().machines) std::abort();  // a refused input counted nothing
      continue;
    }
    p2paudit::fleet::AggregateState merged = base();
    merged.merge(s);
    render(merged);
  }
  return 0;
}
