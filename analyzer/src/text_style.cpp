// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/text_style.h"

namespace p2paudit {

std::string TextStyle::paint(std::string_view text, Tone tone) const {
  if (!colour) return std::string(text);
  const char* start = "";
  switch (tone) {
    case Tone::kGood: start = "\033[32m"; break;     // green
    case Tone::kCaution: start = "\033[33m"; break;  // yellow
    case Tone::kBad: start = "\033[31m"; break;      // red
    case Tone::kUnknown: start = "\033[35m"; break;  // magenta
    case Tone::kEmphasis: start = "\033[1m"; break;  // bold
  }
  return std::string(start).append(text).append("\033[0m");
}

}  // namespace p2paudit
