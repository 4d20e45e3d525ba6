// JSON printed by every command. Strings from a sysroot or a rule file may hold any bytes; JSON
// must be UTF-8, so invalid bytes and control characters are shown escaped (\xNN) instead of
// making the serializer throw.
#pragma once

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "p2paudit/input_file.h"

namespace p2paudit {

template <typename Json>
void escape_json_strings(Json& j) {
  if (j.is_string()) {
    auto& s = j.template get_ref<std::string&>();
    if (!is_clean_text(s)) s = escape_text(s);
  } else if (j.is_array()) {
    for (auto& v : j) escape_json_strings(v);
  } else if (j.is_object()) {
    bool dirty_key = false;
    for (auto it = j.begin(); it != j.end(); ++it) {
      dirty_key |= !is_clean_text(it.key());
      escape_json_strings(it.value());
    }
    if (dirty_key) {
      Json fixed = Json::object();
      for (auto it = j.begin(); it != j.end(); ++it) fixed[escape_text(it.key())] = std::move(it.value());
      j = std::move(fixed);
    }
  }
}

// j.dump(2) with hostile strings escaped.
template <typename Json>
std::string json_text(Json j) {
  escape_json_strings(j);
  return j.dump(2);
}

}  // namespace p2paudit
