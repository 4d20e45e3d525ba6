// SPDX-License-Identifier: GPL-2.0-or-later
// Colour for the text outputs (grids, headings): ANSI escapes when the tool decided the reader is a
// terminal that wants them (--color, NO_COLOR), nothing otherwise, so pipes and files stay plain.
#pragma once

#include <string>
#include <string_view>

namespace p2paudit {

enum class Tone { kGood, kCaution, kBad, kUnknown, kEmphasis };

struct TextStyle {
  bool colour = false;

  // The text wrapped in the tone's escape and a reset; the text alone without colour. Pad before
  // painting: escapes have no width on a terminal.
  std::string paint(std::string_view text, Tone tone) const;
};

}  // namespace p2paudit
