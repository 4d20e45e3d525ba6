// SPDX-License-Identifier: GPL-2.0-or-later
// JSON written exactly as json_text(document) prints it (dump(2), hostile strings escaped), one
// element at a time: `report` and `whitelist --format json` stream their pairs through it, so
// memory does not grow with their number.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace p2paudit::fleet {

// `s` as escape_json_strings() and dump() print a string value, quotes included.
void append_json_string(std::string& out, std::string_view s);

// The JSON text of the value asked last, kept while the same value is asked again: a report's
// reasons repeat from pair to pair (every pair across two host bridges may share one), and
// comparing costs less than scanning them again for what needs escaping.
class RepeatedString {
 public:
  const std::string& json(std::string_view value) {
    if (quoted_.empty() || value != value_) {
      value_.assign(value);
      quoted_.clear();
      append_json_string(quoted_, value);
    }
    return quoted_;
  }

 private:
  std::string value_, quoted_;
};

// The document around the streamed arrays is written member by member; a pretty-printed value is
// re-indented to its depth (no JSON string holds a raw newline). Flushes every 64 KiB.
class PrettyWriter {
 public:
  explicit PrettyWriter(std::ostream& out) : out_(out) {}

  void open_object() { open('{'); }
  void close_object() { close('}'); }
  void open_array() { open('['); }
  void close_array() { close(']'); }
  // An object as the next element of the array being written, its members written one by one.
  void open_element_object();
  // A member of the object being written: its key, then a value or an opened object/array.
  void key(std::string_view name);
  void member(std::string_view name, nlohmann::ordered_json value);
  // An element of the array being written.
  void element(nlohmann::ordered_json value);
  // An element of the array being written, appended by write(std::string&) as dump(2) prints it
  // at element_indent() (ObjectText writes flat objects so): nothing is copied on the way.
  template <typename Write>
  void element_with(Write&& write) {
    item();
    write(buf_);
    flush_if_full();
  }
  size_t element_indent() const { return 2 * first_.size(); }
  // Writes what is buffered (the writer flushes by itself when the outermost container closes).
  void finish();

 private:
  void open(char c);
  void close(char c);
  void item();
  void newline();
  void value_text(nlohmann::ordered_json value);
  void flush_if_full() {
    if (buf_.size() >= kFlushBytes) finish();
  }
  static constexpr size_t kFlushBytes = 64 * 1024;

  std::ostream& out_;
  std::string buf_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
};

// The members of a flat object written many times at one indentation (a report's pair), each
// with the text dump(2) puts before its value: worked out once, not per object.
class ObjectLayout {
 public:
  ObjectLayout(std::initializer_list<std::string_view> keys, size_t indent);

 private:
  friend class ObjectText;
  std::vector<std::string> before_;  // "\n" or ",\n", the member's indentation, the key, ": "
  std::string element_before_;       // "\n" and an array element's indentation
  std::string array_close_;          // "\n", the member's indentation, "]"
  std::string close_;                // "\n", the object's indentation, "}"
};

// One object of a layout, as dump(2) prints it: the members' values in the layout's order.
class ObjectText {
 public:
  ObjectText(std::string& out, const ObjectLayout& layout) : out_(out), layout_(layout) { out_ += '{'; }
  void string(std::string_view value) {
    next();
    append_json_string(out_, value);
  }
  void string_or_null(std::string_view value) {  // "" is null
    if (value.empty()) null();
    else string(value);
  }
  void null() {
    next();
    out_ += "null";
  }
  void number(std::optional<int> value);  // null when none
  // A value already as JSON (a string append_json_string() quoted once for many objects).
  void json(std::string_view text) {
    next();
    out_ += text;
  }
  // An array of strings: open_array(), array_string() per element, close_array().
  void open_array() {
    next();
    out_ += '[';
    empty_array_ = true;
  }
  void array_string(std::string_view value) {
    array_separator();
    append_json_string(out_, value);
  }
  void array_json(std::string_view text) {  // an element already as JSON
    array_separator();
    out_ += text;
  }
  void close_array();
  void strings(const std::vector<std::string>& values);
  void close();

 private:
  void next() { out_ += layout_.before_.at(member_++); }
  void array_separator() {
    if (!empty_array_) out_ += ',';
    empty_array_ = false;
    out_ += layout_.element_before_;
  }

  std::string& out_;
  const ObjectLayout& layout_;
  size_t member_ = 0;
  bool empty_array_ = true;
};

}  // namespace p2paudit::fleet
