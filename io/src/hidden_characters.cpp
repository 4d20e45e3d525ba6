// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/hidden_characters.h"

#include <algorithm>
#include <array>

namespace p2paudit {

namespace {

// The rule: a code point is hidden when a reader cannot see it and it still changes the text, so
// that two strings look alike or text reads in another order than its bytes. That is the union of
//  - Bidi_Control (Unicode PropList.txt; the explicit and implicit controls of UAX #9, "Unicode
//    Bidirectional Algorithm", sections 2.1-2.6): the characters the Trojan Source paper
//    (Boucher and Anderson, 2021, CVE-2021-42574) uses to show a line in another order;
//  - Default_Ignorable_Code_Point (DerivedCoreProperties.txt): what a renderer draws as nothing
//    (zero-width characters, joiners, fillers, variation selectors, tag characters), the paper's
//    "invisible character" attacks, and unassigned code points reserved as such, which a future
//    renderer also draws as nothing;
//  - the line and paragraph separators, which a terminal or editor may break at, so that one
//    value reads as two lines, and the interlinear annotation controls, which hide the text
//    between them.
// Left out, because a reader sees them: spaces of any width (U+00A0, U+2000-U+200A, U+3000 are
// visible as a gap), look-alike letters (a confusable is a visible glyph; UTS #39's concern, not a
// hidden one), combining marks, private-use and unassigned code points outside the ranges below
// (drawn as a glyph or a box), U+FFFC and U+FFFD, and format characters that are drawn, such as
// the prepended concatenation marks (U+0600-U+0605) and the Egyptian hieroglyph format controls.
constexpr std::array kRanges{
    CodePointRange{0x00ad, 0x00ad, "soft hyphen (default ignorable: drawn only at a line break)"},
    CodePointRange{0x034f, 0x034f, "combining grapheme joiner (default ignorable)"},
    CodePointRange{0x061c, 0x061c, "arabic letter mark (bidi control, UAX #9)"},
    CodePointRange{0x115f, 0x1160, "hangul fillers (default ignorable)"},
    CodePointRange{0x17b4, 0x17b5, "khmer inherent vowels (default ignorable)"},
    CodePointRange{0x180b, 0x180f, "mongolian variation selectors and vowel separator (default ignorable)"},
    CodePointRange{0x200b, 0x200d, "zero width space, non-joiner and joiner (default ignorable)"},
    CodePointRange{0x200e, 0x200f, "left-to-right and right-to-left marks (bidi control, UAX #9)"},
    CodePointRange{0x2028, 0x2029, "line and paragraph separators (a line break a terminal may make)"},
    CodePointRange{0x202a, 0x202e, "bidi embeddings, override and pop (bidi control, UAX #9; CVE-2021-42574)"},
    CodePointRange{0x2060, 0x2065, "word joiner, invisible operators (default ignorable)"},
    CodePointRange{0x2066, 0x2069, "bidi isolates (bidi control, UAX #9; CVE-2021-42574)"},
    CodePointRange{0x206a, 0x206f, "deprecated format characters (default ignorable)"},
    CodePointRange{0x3164, 0x3164, "hangul filler (default ignorable)"},
    CodePointRange{0xfe00, 0xfe0f, "variation selectors (default ignorable; can carry hidden data)"},
    CodePointRange{0xfeff, 0xfeff, "zero width no-break space, byte order mark (default ignorable)"},
    CodePointRange{0xffa0, 0xffa0, "halfwidth hangul filler (default ignorable)"},
    CodePointRange{0xfff0, 0xfff8, "reserved default ignorable"},
    CodePointRange{0xfff9, 0xfffb, "interlinear annotation controls (hide the text they enclose)"},
    CodePointRange{0x1bca0, 0x1bca3, "shorthand format controls (default ignorable)"},
    CodePointRange{0x1d173, 0x1d17a, "musical symbol format controls (default ignorable)"},
    CodePointRange{0xe0000, 0xe0fff, "tag characters and variation selectors 17-256 (default ignorable)"},
};

constexpr bool sorted_apart() {
  for (size_t i = 0; i < kRanges.size(); ++i) {
    if (kRanges[i].first > kRanges[i].last) return false;
    if (i > 0 && kRanges[i - 1].last >= kRanges[i].first) return false;
  }
  return true;
}
static_assert(sorted_apart(), "binary search needs the ranges sorted and apart");
static_assert(kRanges.front().first == 0xad, "is_hidden_character's ASCII claim");

}  // namespace

std::span<const CodePointRange> hidden_character_ranges() { return kRanges; }

bool is_hidden_character(char32_t cp) {
  if (cp < kRanges.front().first) return false;
  auto it = std::upper_bound(kRanges.begin(), kRanges.end(), cp,
                             [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != kRanges.begin() && cp <= std::prev(it)->last;
}

}  // namespace p2paudit
