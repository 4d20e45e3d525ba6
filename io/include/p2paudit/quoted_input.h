// SPDX-License-Identifier: GPL-2.0-or-later
// A value from a stranger's file as an error message quotes it. Rule files, device tables, vendor
// facts and reports may hold a value as long as the file itself (megabytes), and with controls that
// would rewrite the terminal: every loader's message that quotes its input goes through this one
// function, so that no message line is longer than a person reads nor carries a control.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace p2paudit {

// The most bytes of a value a message quotes (before escaping).
inline constexpr size_t kQuotedInputBytes = 100;

// `value` between `quote`s, escaped on one line (escape_line(): invalid UTF-8, controls, line feeds
// and tabs as \xNN) and cut after kQuotedInputBytes at a UTF-8 boundary, the cut marked with "…"
// and the value's whole length: 'abc…' (3145728 bytes). A value that fits is quoted whole.
// quote '\0': no quotes, for a value that a message sets off otherwise (a path's key, a {placeholder}).
std::string quoted_input(std::string_view value, char quote = '\'');

}  // namespace p2paudit
