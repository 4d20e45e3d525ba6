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

// Who reads the strings: a program (JSON documents: the characters that change what a reader sees
// stay literal, the value as the input had it) or a person (a page that shows them, such as
// --format html: they are escaped as in text, escape_text()).
enum class JsonReader { kProgram, kPerson };

// escape_bytes() (or escape_text() for a person) except for newlines and tabs, which JSON escapes
// itself: a multi-line text of our own (a commit message) stays readable.
inline std::string escape_json_text(const std::string& s, JsonReader reader = JsonReader::kProgram) {
  std::string out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == '\n' || s[i] == '\t') {
      std::string_view piece = std::string_view(s).substr(start, i - start);
      out += reader == JsonReader::kProgram ? escape_bytes(piece) : escape_text(piece);
      if (i < s.size()) out += s[i];
      start = i + 1;
    }
  return out;
}

template <typename Json>
void escape_json_strings(Json& j, JsonReader reader = JsonReader::kProgram) {
  auto clean = [reader](const std::string& s) {
    return reader == JsonReader::kProgram ? is_clean_bytes(s) : is_clean_text(s);
  };
  if (j.is_string()) {
    auto& s = j.template get_ref<std::string&>();
    if (!clean(s)) s = escape_json_text(s, reader);
  } else if (j.is_array()) {
    for (auto& v : j) escape_json_strings(v, reader);
  } else if (j.is_object()) {
    bool dirty_key = false;
    for (auto it = j.begin(); it != j.end(); ++it) {
      dirty_key |= !clean(it.key());
      escape_json_strings(it.value(), reader);
    }
    if (dirty_key) {
      Json fixed = Json::object();
      for (auto it = j.begin(); it != j.end(); ++it)
        fixed[reader == JsonReader::kProgram ? escape_bytes(it.key()) : escape_text(it.key())] = std::move(it.value());
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
