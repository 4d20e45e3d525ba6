// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/quoted_input.h"

#include <fmt/format.h>

#include "p2paudit/input_file.h"

namespace p2paudit {

std::string quoted_input(std::string_view value, char quote_character) {
  const std::string_view quote(&quote_character, quote_character ? 1 : 0);
  if (value.size() <= kQuotedInputBytes) return fmt::format("{0}{1}{0}", quote, escape_line(value));
  // Back to the start of the UTF-8 sequence the cut falls in (at most three continuation bytes:
  // further back they are invalid bytes, which escape_line() shows one by one).
  size_t end = kQuotedInputBytes;
  for (int back = 0; back < 3 && end > 0 && (static_cast<unsigned char>(value[end]) & 0xc0) == 0x80; ++back) --end;
  if ((static_cast<unsigned char>(value[end]) & 0xc0) == 0x80) end = kQuotedInputBytes;
  return fmt::format("{0}{1}\u2026{0} ({2} bytes)", quote, escape_line(value.substr(0, end)), value.size());
}

}  // namespace p2paudit
