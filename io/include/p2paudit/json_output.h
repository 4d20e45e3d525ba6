// SPDX-License-Identifier: GPL-2.0-or-later
// JSON printed by every command. Strings from a sysroot or a rule file may hold any bytes; JSON
// must be UTF-8, so invalid bytes and control characters are shown escaped (\xNN) instead of
// making the serializer throw. The characters that change what a reader sees (bidi controls,
// zero-width characters: hidden_characters.h) stay literal: a program reading the document gets
// the value as the input had it; only text for a reader escapes them (escape_text()).
#pragma once

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "p2paudit/input_file.h"

namespace p2paudit {

// escape_bytes() except for newlines and tabs, which JSON escapes itself: a multi-line text of our
// own (a commit message) stays readable.
inline std::string escape_json_text(const std::string& s) {
  std::string out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == '\n' || s[i] == '\t') {
      out += escape_bytes(std::string_view(s).substr(start, i - start));
      if (i < s.size()) out += s[i];
      start = i + 1;
    }
  return out;
}

template <typename Json>
void escape_json_strings(Json& j) {
  if (j.is_string()) {
    auto& s = j.template get_ref<std::string&>();
    if (!is_clean_bytes(s)) s = escape_json_text(s);
  } else if (j.is_array()) {
    for (auto& v : j) escape_json_strings(v);
  } else if (j.is_object()) {
    bool dirty_key = false;
    for (auto it = j.begin(); it != j.end(); ++it) {
      dirty_key |= !is_clean_bytes(it.key());
      escape_json_strings(it.value());
    }
    if (dirty_key) {
      Json fixed = Json::object();
      for (auto it = j.begin(); it != j.end(); ++it) fixed[escape_bytes(it.key())] = std::move(it.value());
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
