// SPDX-License-Identifier: GPL-2.0-or-later
// Eight bytes of text tested at once: the scans over rule files and report strings, which are
// almost all printable ASCII, take a word at a time and look at single bytes only around the rest.
// Each answer is exact for the word as a whole (whether some byte is so), not per byte.
#pragma once

#include <cstdint>
#include <cstring>

namespace p2paudit::byte_words {

inline constexpr std::uint64_t kOnes = 0x0101010101010101u, kHighs = 0x8080808080808080u;

// The eight bytes at p, in memory order.
inline std::uint64_t load(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// Whether some byte has its high bit set: is not ASCII.
inline bool any_high(std::uint64_t v) { return (v & kHighs) != 0; }
// Whether some byte is zero.
inline bool any_zero(std::uint64_t v) { return ((v - kOnes) & ~v & kHighs) != 0; }
// Whether some byte is c.
inline bool any_equal(std::uint64_t v, unsigned char c) { return any_zero(v ^ (c * kOnes)); }
// Of v, whose bytes are all ASCII (!any_high(v)): whether some byte is below n (n at most 0x80).
inline bool any_below(std::uint64_t v, std::uint64_t n) { return ((v - n * kOnes) & ~v & kHighs) != 0; }

}  // namespace p2paudit::byte_words
