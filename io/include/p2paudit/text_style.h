// SPDX-License-Identifier: GPL-2.0-or-later
// Colour for the text outputs (grids, headings): ANSI escapes when the tool decided the reader is a
// terminal that wants them (--color, NO_COLOR), nothing otherwise, so pipes and files stay plain.
// The text gate: what reaches a terminal is the tool's own layout and input shown as text.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <memory>
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

// The one gate for text output. Installed on a stream (the CLI installs it on standard output for
// text and on standard error), it shows every byte that is not text as \xNN, whoever wrote it:
// C0 controls other than line feed and tab, DEL, C1 controls (U+0080..U+009F) and invalid UTF-8;
// and every character that changes what a reader sees without being seen (bidi overrides and
// isolates, zero-width characters: hidden_characters.h) as \u{XXXX} (escape_text()). Only the
// tool's own controls pass (colours, a progress line's carriage return): written through
// own_controls(), they carry a secret chosen per process, which no input can know. Line feeds
// pass: a value from input that must stay on one line is escaped where it is rendered
// (escape_line()).
class TextGate {
 public:
  explicit TextGate(std::ostream& stream);
  ~TextGate();  // writes what is held, and gives the stream its own buffer back
  TextGate(const TextGate&) = delete;
  TextGate& operator=(const TextGate&) = delete;

  class Buffer;

 private:
  std::ostream& stream_;
  std::streambuf* original_;
  std::unique_ptr<Buffer> buffer_;
};

// Terminal columns of text as the gate shows it: every code point of escape_text()'s output one
// column (an ESC four, "\x1b"; a bidi override eight, "\u{202e}"), a line feed one. Measure
// before painting, as for padding.
size_t text_columns(std::string_view s);

// The tool's own control bytes ("\033[31m", "\r") in the form an installed gate lets through;
// unchanged while no gate is installed (library callers writing to their own streams).
std::string own_controls(std::string_view controls);

}  // namespace p2paudit
