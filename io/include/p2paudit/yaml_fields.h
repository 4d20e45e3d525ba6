// SPDX-License-Identifier: GPL-2.0-or-later
// The fields of a rule-data file read strictly (strict_yaml.h): rules/kernel/ and rules/devices/.
// Every problem is "FILE:LINE:COLUMN: message", and a value a message quotes is escaped and cut
// short (quoted_input()), so that a stranger's file cannot rewrite the terminal it is shown on.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "p2paudit/quoted_input.h"
#include "p2paudit/strict_yaml.h"

namespace p2paudit {

class YamlFields {
 public:
  // Throws InputError when the text is no strict YAML or its top level is no mapping.
  YamlFields(std::string_view text, std::string origin);
  YamlFields(const YamlFields&) = delete;  // root_ points into document_
  YamlFields& operator=(const YamlFields&) = delete;

  const YamlNode& root() const { return root_; }
  std::string where(const YamlNode& n) const;
  [[noreturn]] void fail(const YamlNode& n, std::string_view message) const;
  // Fails unless `map` is a mapping whose keys are all among `allowed`.
  void check_keys(const YamlNode& map, std::initializer_list<std::string_view> allowed) const;
  // map[key] as plain text (no control character); "" when absent or null, which fails if required.
  std::string scalar(const YamlNode& map, const char* key, bool required) const;

 private:
  std::string origin_;
  YamlDocument document_;
  YamlNode root_;
};

}  // namespace p2paudit
