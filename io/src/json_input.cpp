// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/json_input.h"

#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/quoted_input.h"

namespace p2paudit {

namespace {

using json = nlohmann::json;

// Builds the document as nlohmann's DOM parser does, with the bounds and the duplicate-key check
// done in O(log n) per event (the open object's own map answers whether a key is already there).
class BoundedBuilder {
 public:
  BoundedBuilder(json& root, const std::string& origin, const JsonInputLimits& limits)
      : root_(root), origin_(escape_text(origin)), limits_(limits) {}

  bool null() { return scalar(nullptr); }
  bool boolean(bool v) { return scalar(v); }
  bool number_integer(json::number_integer_t v) { return scalar(v); }
  bool number_unsigned(json::number_unsigned_t v) { return scalar(v); }
  bool number_float(json::number_float_t v, const std::string&) { return scalar(v); }
  bool string(json::string_t& v) { return scalar(std::move(v)); }
  bool binary(json::binary_t& v) { return scalar(json::binary(std::move(v))); }

  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& k) {
    Open& top = stack_.back();
    if (top.value->contains(k))
      throw InputError(fmt::format("{}: {}: duplicate key {} in one object: which one is meant?", origin_, place(),
                                   quoted_input(k, '"')));
    top.key = std::move(k);
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    if (e.id == 406)  // out_of_range: a number beyond a double
      throw InputError(fmt::format("{}: not JSON this reader takes: {}", origin_, detail(e)));
    throw InputError(fmt::format("{}: byte {}: not {}: {}", origin_, position, limits_.kind, detail(e)));
  }

 private:
  struct Open {
    json* value;
    std::string key;     // the member being read, in an object
  };

  json& root_;
  std::string origin_;
  JsonInputLimits limits_;
  std::vector<Open> stack_;
  std::size_t values_ = 0;

  // nlohmann's message quotes the last token read, which may be as long as the file.
  static std::string detail(const nlohmann::detail::exception& e) {
    constexpr std::size_t kShown = 240;
    std::string_view what = e.what();
    return escape_text(what.substr(0, kShown)) + (what.size() > kShown ? "..." : "");
  }

  // A key of the path place() names: escaped, and cut (a key may be as long as the file).
  static std::string shown(std::string_view key) {
    constexpr std::size_t kShown = 64;
    return escape_text(key.substr(0, kShown)) + (key.size() > kShown ? "..." : "");
  }

  // The open object's place ("pairs[0].facts"), built only for a message: each open container is
  // its parent's last element (an array) or its parent's current member (an object).
  std::string place() const {
    std::string out;
    for (std::size_t i = 1; i < stack_.size(); ++i) {
      const Open& parent = stack_[i - 1];
      if (parent.value->is_array()) out += fmt::format("[{}]", parent.value->size() - 1);
      else out += (out.empty() ? "" : ".") + shown(parent.key);
    }
    return out.empty() ? "the document" : out;
  }

  void count() {
    if (static_cast<int>(stack_.size()) > limits_.max_depth)
      throw InputError(fmt::format("{}: nested deeper than {} levels", origin_, limits_.max_depth));
    if (++values_ > limits_.max_values) throw InputError(fmt::format("{}: more than {} values", origin_, limits_.max_values));
  }

  // Where a new value goes: the root, the open array's end or the open object's current key.
  json* slot(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Open& top = stack_.back();
    if (top.value->is_array()) {
      top.value->get_ref<json::array_t&>().push_back(std::move(v));
      return &top.value->back();
    }
    // The key stays in the frame: place() names it while a container under it is open.
    return &top.value->get_ref<json::object_t&>().emplace(top.key, std::move(v)).first->second;
  }

  template <typename T>
  bool scalar(T&& v) {
    count();
    slot(json(std::forward<T>(v)));
    return true;
  }

  bool open(json&& container) {
    count();
    json* at = slot(std::move(container));
    stack_.push_back({at, ""});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }
};

}  // namespace

json parse_input_json(std::string_view text, const std::string& origin, const JsonInputLimits& limits) {
  json root;
  BoundedBuilder builder(root, origin, limits);
  try {
    json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const nlohmann::json::exception& e) {  // none expected: the handler reports errors itself
    throw InputError(fmt::format("{}: not {}: {}", escape_text(origin), limits.kind, escape_text(e.what())));
  }
  return root;
}

}  // namespace p2paudit
