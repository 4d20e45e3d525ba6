// SPDX-License-Identifier: GPL-2.0-or-later
// The eight-bytes-at-once tests (p2paudit/byte_words.h) that the rule files' strict reader and the
// report's JSON writer skip text with: each answers as a loop over the bytes would, for every pair
// of positions holding every pair of byte values (the rest printable), where a borrow from one byte
// into the next could mislead a word-wide test.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "p2paudit/byte_words.h"

namespace p2paudit {
namespace {

TEST(ByteWords, AnswerAsALoopOverTheBytes) {
  using namespace byte_words;
  size_t words = 0;
  for (size_t first = 0; first < 8; ++first)
    for (size_t second = first + 1; second < 8; ++second)
      for (unsigned a = 0; a < 256; ++a)
        for (unsigned b = 0; b < 256; ++b) {
          std::array<char, 8> text;
          text.fill('a');
          text[first] = static_cast<char>(a);
          text[second] = static_cast<char>(b);
          const std::uint64_t v = load(text.data());
          bool high = false, zero = false, line_feed = false, del = false, quote = false, below_space = false;
          for (char c : text) {
            const auto u = static_cast<unsigned char>(c);
            high |= u >= 0x80;
            zero |= u == 0;
            line_feed |= u == '\n';
            del |= u == 0x7f;
            quote |= u == '"';
            below_space |= u < 0x20;
          }
          ASSERT_EQ(any_high(v), high) << a << " " << b;
          ASSERT_EQ(any_zero(v), zero) << a << " " << b;
          ASSERT_EQ(any_equal(v, '\n'), line_feed) << a << " " << b;
          ASSERT_EQ(any_equal(v, 0x7f), del) << a << " " << b;
          ASSERT_EQ(any_equal(v, '"'), quote) << a << " " << b;
          if (!high) {  // defined for ASCII words
            ASSERT_EQ(any_below(v, 0x20), below_space) << a << " " << b;
          }
          ++words;
        }
  EXPECT_EQ(words, 28u * 256 * 256);
}

}  // namespace
}  // namespace p2paudit
