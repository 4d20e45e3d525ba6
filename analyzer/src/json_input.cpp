// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/json_input.h"

#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"

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
      throw InputError(fmt::format("{}: {}: duplicate key \"{}\" in one object: which one is meant?", origin_, place(),
                                   escape_text(k)));
    top.key = std::move(k);
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    if (e.id == 406)  // out_of_range: a number beyond a double
      throw InputError(fmt::format("{}: not JSON this reader takes: {}", origin_, escape_text(e.what())));
    throw InputError(fmt::format("{}: byte {}: not {}: {}", origin_, position, limits_.kind, escape_text(e.what())));
  }

 private:
  struct Open {
    json* value;
    std::string key;     // the member being read, in an object
    std::string where;   // this container's own place
  };

  json& root_;
  std::string origin_;
  JsonInputLimits limits_;
  std::vector<Open> stack_;
  std::size_t values_ = 0;
  bool done_ = false;

  std::string place() const { return stack_.back().where; }

  void count() {
    if (static_cast<int>(stack_.size()) > limits_.max_depth)
      throw InputError(fmt::format("{}: nested deeper than {} levels", origin_, limits_.max_depth));
    if (++values_ > limits_.max_values) throw InputError(fmt::format("{}: more than {} values", origin_, limits_.max_values));
  }

  // Where a new value goes: the root, the open array's end or the open object's current key.
  std::pair<json*, std::string> slot(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return {&root_, "the document"};
    }
    Open& top = stack_.back();
    std::string parent = top.where == "the document" ? "" : top.where;
    if (top.value->is_array()) {
      std::string where = fmt::format("{}[{}]", parent, top.value->size());
      top.value->get_ref<json::array_t&>().push_back(std::move(v));
      return {&top.value->back(), std::move(where)};
    }
    std::string where = parent.empty() ? escape_text(top.key) : parent + "." + escape_text(top.key);
    auto [it, inserted] = top.value->get_ref<json::object_t&>().emplace(std::move(top.key), std::move(v));
    return {&it->second, std::move(where)};
  }

  template <typename T>
  bool scalar(T&& v) {
    count();
    slot(json(std::forward<T>(v)));
    return true;
  }

  bool open(json&& container) {
    count();
    auto [at, where] = slot(std::move(container));
    stack_.push_back({at, "", std::move(where)});
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
