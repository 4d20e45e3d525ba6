// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/fleet/pretty_writer.h"

#include <charconv>
#include <cstdint>
#include <cstring>

#include "p2paudit/byte_words.h"
#include "p2paudit/input_file.h"
#include "p2paudit/json_output.h"

namespace p2paudit::fleet {

namespace {

// Whether dump() prints `s` as it is between its quotes: printable ASCII without '"' and '\\'.
// Eight bytes at a time: a report is mostly such strings, hundreds of megabytes of them.
bool prints_as_is(std::string_view s) {
  using namespace byte_words;
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    const std::uint64_t v = load(s.data() + i);
    if (any_high(v) || any_below(v, 0x20) || any_equal(v, 0x7f) || any_equal(v, '"') || any_equal(v, '\\'))
      return false;
  }
  for (; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return false;
  }
  return true;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  if (prints_as_is(s)) {
    out += '"';
    out += s;
    out += '"';
    return;
  }
  std::string text(s);
  if (!is_clean_bytes(text)) text = escape_json_text(text);
  out += nlohmann::json(std::move(text)).dump();
}

void PrettyWriter::open_element_object() {
  item();
  open('{');
}

void PrettyWriter::key(std::string_view name) {
  item();
  buf_ += nlohmann::json(std::string(name)).dump();
  buf_ += ": ";
}

void PrettyWriter::member(std::string_view name, nlohmann::ordered_json value) {
  key(name);
  value_text(std::move(value));
}

void PrettyWriter::element(nlohmann::ordered_json value) {
  item();
  value_text(std::move(value));
}

void PrettyWriter::finish() {
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  buf_.clear();
}

void PrettyWriter::open(char c) {
  buf_ += c;
  first_.push_back(true);
}

void PrettyWriter::close(char c) {
  bool empty = first_.back();
  first_.pop_back();
  if (!empty) newline();
  buf_ += c;
  if (first_.empty()) finish();
  else flush_if_full();
}

// Before a member or element: the separator and the indentation of its depth.
void PrettyWriter::item() {
  if (!first_.back()) buf_ += ',';
  first_.back() = false;
  newline();
}

void PrettyWriter::newline() {
  buf_ += '\n';
  buf_.append(2 * first_.size(), ' ');
}

void PrettyWriter::value_text(nlohmann::ordered_json value) {
  escape_json_strings(value);
  std::string text = value.dump(2);
  for (char c : text) {
    buf_ += c;
    if (c == '\n') buf_.append(2 * first_.size(), ' ');
  }
  flush_if_full();
}

ObjectLayout::ObjectLayout(std::initializer_list<std::string_view> keys, size_t indent) {
  const std::string members(indent + 2, ' ');
  for (std::string_view key : keys) {
    std::string before = before_.empty() ? "\n" : ",\n";
    before += members;
    append_json_string(before, key);
    before += ": ";
    before_.push_back(std::move(before));
  }
  // A newline, then that many spaces, then `end`.
  auto line = [](size_t spaces, std::string_view end) {
    std::string text = "\n";
    text.append(spaces, ' ');
    text += end;
    return text;
  };
  element_before_ = line(indent + 4, "");
  array_close_ = line(indent + 2, "]");
  close_ = before_.empty() ? "}" : line(indent, "}");
}

void ObjectText::number(std::optional<int> value) {
  if (!value) return null();
  next();
  char digits[16];
  out_.append(digits, std::to_chars(digits, digits + sizeof digits, *value).ptr);
}

void ObjectText::close_array() {
  out_ += empty_array_ ? std::string_view("]") : std::string_view(layout_.array_close_);
}

void ObjectText::strings(const std::vector<std::string>& values) {
  open_array();
  for (const auto& v : values) array_string(v);
  close_array();
}

void ObjectText::close() { out_ += layout_.close_; }

}  // namespace p2paudit::fleet
