// SPDX-License-Identifier: GPL-2.0-or-later
// The code points that change what a reader sees without being seen themselves: bidirectional
// controls that reorder the text around them (the "Trojan Source" attack, CVE-2021-42574), and
// characters of no width that hide, join or split what is shown. Valid UTF-8 all of them, so
// they pass an encoding check; the text gate (escape_text(), input_file.h) shows them as
// \u{XXXX}, while JSON keeps them literal (its readers are programs, which must get the value).
#pragma once

#include <cstdint>
#include <span>

namespace p2paudit {

struct CodePointRange {
  char32_t first, last;
  const char* why;  // the class, for tests and documentation
};

// The table itself, sorted and without overlap (hidden_characters.cpp justifies each entry).
std::span<const CodePointRange> hidden_character_ranges();

// Whether the code point is one of them. Every one is at U+00AD or above: ASCII never is.
bool is_hidden_character(char32_t cp);

}  // namespace p2paudit
