// SPDX-License-Identifier: GPL-2.0-or-later
// The text gate (escape_text, is_clean_text, escape_bytes, text_columns, TextGate) on any bytes.
// Aborts unless what escape_text() gives is valid UTF-8 holding no control but tab, no C1 control
// and no hidden character (checked here by a decoder of its own), is clean and escapes to itself;
// clean text passes unchanged; escape_bytes() keeps exactly the hidden characters, so the text
// escape of it is the text escape of the input; text_columns() counts what is shown; and the
// stream gate writes each line as escape_text() does.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "fuzz_input.h"
#include "p2paudit/hidden_characters.h"
#include "p2paudit/input_file.h"
#include "p2paudit/text_style.h"

namespace {

// Code points of valid UTF-8 (strict: no overlong form, surrogate or value past U+10FFFF), or
// aborts at the first byte that is not.
template <typename Each>
void decode_or_abort(std::string_view s, Each each) {
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || i + len > s.size()) std::abort();
    char32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (size_t k = 1; k < len; ++k) {
      auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xc0) != 0x80) std::abort();
      cp = (cp << 6) | (b & 0x3f);
    }
    static const char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) std::abort();
    each(cp);
    i += len;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace p2paudit;
  const std::string_view in = fuzz::text(data, size);
  const std::string out = escape_text(in);
  size_t shown = 0;
  decode_or_abort(out, [&](char32_t cp) {
    if ((cp < 0x20 && cp != '\t') || (cp >= 0x7f && cp <= 0x9f) || is_hidden_character(cp)) std::abort();
    ++shown;
  });
  if (!is_clean_text(out) || escape_text(out) != out) std::abort();
  if (is_clean_text(in) != (out == in)) std::abort();
  // The listed ones by number too, should the table lose one (hidden_characters.cpp).
  for (char32_t cp : {0x202eu, 0x2066u, 0x2069u, 0x200bu, 0x200fu, 0xfeffu, 0x061cu})
    if (!is_hidden_character(cp)) std::abort();

  const std::string bytes = escape_bytes(in);
  if (!is_clean_bytes(bytes) || escape_text(bytes) != out) std::abort();
  decode_or_abort(bytes, [](char32_t cp) {
    if ((cp < 0x20 && cp != '\t') || (cp >= 0x7f && cp <= 0x9f)) std::abort();
  });

  // text_columns: each code point shown one column, a line feed one where escape_text shows \x0a.
  size_t feeds = 0;
  for (char c : in) feeds += c == '\n';
  if (text_columns(in) != shown - 3 * feeds) std::abort();

  // The stream gate: each line of the input as escape_text() shows it, the line feeds kept.
  // An input holding the gate's secret marker is the one thing it lets through (the tool's own
  // controls): a stranger cannot know it, but this process can, and libFuzzer learns it from the
  // gate's own comparisons. Such an input is not judged here.
  std::ostringstream stream;
  {
    TextGate gate(stream);
    const std::string marker = own_controls("\x1b");
    if (in.find(std::string_view(marker).substr(0, marker.size() - 1)) != std::string_view::npos) return 0;
    stream << in << std::flush;
  }
  std::string expected;
  for (size_t start = 0; start <= in.size();) {
    size_t end = in.find('\n', start);
    expected += escape_text(in.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    expected += '\n';
    start = end + 1;
  }
  if (stream.str() != expected) std::abort();
  return 0;
}
