// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/yaml_fields.h"

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"

namespace p2paudit {

YamlFields::YamlFields(std::string_view text, std::string origin)
    : origin_(std::move(origin)), document_(read_strict_yaml(text, origin_)), root_(document_.root()) {
  if (!root_.IsMap()) fail(root_, "expected a mapping at the top level");
}

std::string YamlFields::where(const YamlNode& n) const { return format_position(origin_, n.Mark()); }

void YamlFields::fail(const YamlNode& n, std::string_view message) const {
  throw InputError(fmt::format("{}: {}", where(n), message));
}

void YamlFields::check_keys(const YamlNode& map, std::initializer_list<std::string_view> allowed) const {
  if (!map.IsMap()) fail(map, "expected a mapping");
  for (size_t entry = 0; entry < map.size(); ++entry) {
    const YamlNode key = map.key(entry);
    bool ok = key.IsScalar();
    if (ok) {
      ok = false;
      for (auto a : allowed) ok = ok || key.Scalar() == a;
    }
    if (!ok) fail(key, fmt::format("unknown key {}", quoted_input(key.Scalar())));
  }
}

std::string YamlFields::scalar(const YamlNode& map, const char* key, bool required) const {
  const YamlNode n = map[key];
  if (!n || n.IsNull()) {
    if (required) fail(map, fmt::format("missing '{}'", key));
    return {};
  }
  if (!n.IsScalar()) fail(n, fmt::format("'{}' must be a scalar", key));
  // Comments, commits and names are printed by explain, matrix and the device facts' texts.
  if (auto bad = find_control_character(n.Scalar()))
    fail(n, fmt::format("'{}' holds a {}: write plain text", key, bad->description));
  return std::string(n.Scalar());
}

}  // namespace p2paudit
