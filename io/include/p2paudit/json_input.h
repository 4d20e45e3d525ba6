// SPDX-License-Identifier: GPL-2.0-or-later
// The one reader of JSON that comes from outside (a stored probe document, a vendor facts file, a
// fleet report, a snapshot's capture record): bounded in nesting and in the number of values while
// it is read, duplicate keys refused (which of the two would be meant?), and linear in the input
// (a SAX handler that builds the document itself: nlohmann's callback parser rescans each parent
// object at every object's end, which made 400k empty objects take minutes).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace p2paudit {

struct JsonInputLimits {
  int max_depth = 16;               // containers nested deeper than this are refused
  std::size_t max_values = 4u << 20;  // scalars, objects and arrays together
  // What the text was expected to be, for a syntax error: "ORIGIN: byte N: not KIND: detail".
  std::string_view kind = "JSON";
};

// Throws InputError (errors.h), every message starting with escape_text(origin):
//   "ORIGIN: byte N: not KIND: ..."                        not JSON
//   "ORIGIN: not JSON this reader takes: ..."             a number beyond a double (1e999)
//   "ORIGIN: nested deeper than N levels"
//   "ORIGIN: more than N values"
//   "ORIGIN: PLACE: duplicate key \"K\" in one object: which one is meant?"
// PLACE is the path of the object holding the key ("the document", "pairs[0].facts").
nlohmann::json parse_input_json(std::string_view text, const std::string& origin, const JsonInputLimits& limits = {});

}  // namespace p2paudit
