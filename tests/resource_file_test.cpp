// SPDX-License-Identifier: GPL-2.0-or-later
// The sysfs `resource` file as the reader takes it: three "0x" words of 1 to 16 hex digits per
// line, C-locale white space between and after them, at most 17 lines looked at; anything else is
// a finding and leaves the BAR sizes to config space. BAR 0's size shows what was taken.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "sysroot_builder.h"

namespace p2paudit {
namespace {

constexpr const char* kDir = "pci0000:00/0000:00:02.0";

struct Read {
  bool malformed = false;
  uint64_t bar0_size = 0;  // 0: no BAR 0
};

Read read_with_resource(const std::string& resource) {
  test::SysrootDir s;
  s.function(kDir, test::ConfigBytes(0x10de, 0x2335, 0x030200, 0).bytes());
  s.write(std::string("sys/devices/") + kDir + "/resource", resource);
  Topology t = read_topology(Sysroot::open(s.str()));
  Read r;
  for (const auto& f : t.findings)
    if (f.path.ends_with("/resource") && f.message.starts_with("malformed")) r.malformed = true;
  for (const auto& b : t.functions.at(0).bars)
    if (b.index == 0) r.bar0_size = b.size;
  return r;
}

// The line of a 64-bit prefetchable BAR 0 of `size` bytes at 1 TiB, words joined by `gap`.
std::string bar0(uint64_t size, const std::string& gap = " ", const std::string& eol = "\n") {
  char line[128];
  const unsigned long long start = 1ull << 40;
  std::snprintf(line, sizeof line, "0x%016llx%s0x%016llx%s0x%016llx%s", start, gap.c_str(),
                start + size - 1, gap.c_str(), 0x14220cull, eol.c_str());
  return line;
}
const std::string kEmptyLine = "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";

TEST(ResourceFile, KernelLinesGiveTheBarSize) {
  std::string text = bar0(1 << 20);
  for (int i = 0; i < 12; ++i) text += kEmptyLine;
  Read r = read_with_resource(text);
  EXPECT_FALSE(r.malformed);
  EXPECT_EQ(r.bar0_size, 1u << 20);
}

TEST(ResourceFile, WhiteSpaceOfTheCLocaleSeparatesAndEndsWords) {
  for (const std::string& gap : {std::string("\t"), std::string("  "), std::string(" \v\f ")}) {
    Read r = read_with_resource(bar0(4096, gap, " \r\n") + kEmptyLine);
    EXPECT_FALSE(r.malformed) << "gap '" << gap << "'";
    EXPECT_EQ(r.bar0_size, 4096u) << "gap '" << gap << "'";
  }
  Read no_newline = read_with_resource(bar0(8192, " ", ""));
  EXPECT_FALSE(no_newline.malformed);
  EXPECT_EQ(no_newline.bar0_size, 8192u);
}

TEST(ResourceFile, UpperCaseDigitsAndShortWordsAreNumbers) {
  Read r = read_with_resource("0x10000000000 0x100000FFFFF 0xC\n");
  EXPECT_FALSE(r.malformed);
  EXPECT_EQ(r.bar0_size, 0x100000u);
}

TEST(ResourceFile, MalformedLinesAreFindings) {
  const std::string cases[] = {
      "0X10000000000 0x100000fffff 0x0\n",                 // "0X" is not "0x"
      "0x 0x100000fffff 0x0\n",                            // no digits
      "0x10000000000 0x100000fffff\n",                     // two words
      "0x10000000000 0x100000fffff 0x0 0x0\n",             // four words
      "0x10000000000 0x100000fffff 0x0g\n",                // not a hex digit
      "0x10000000000 0x100000fffff 0x00000000000000000\n",  // 17 digits
      bar0(4096) + "\n" + kEmptyLine,                      // an empty line between
  };
  for (const auto& text : cases) EXPECT_TRUE(read_with_resource(text).malformed) << text;
  // 16 digits are a number.
  EXPECT_FALSE(read_with_resource("0x0000010000000000 0x00000100000fffff 0x0000000000000000\n").malformed);
}

TEST(ResourceFile, OnlySeventeenLinesAreLookedAt) {
  std::string text = bar0(65536);
  for (int i = 1; i < 17; ++i) text += kEmptyLine;
  Read past = read_with_resource(text + "not a resource line\n");
  EXPECT_FALSE(past.malformed);
  EXPECT_EQ(past.bar0_size, 65536u);
  std::string sixteen = bar0(65536);
  for (int i = 1; i < 16; ++i) sixteen += kEmptyLine;
  EXPECT_TRUE(read_with_resource(sixteen + "not a resource line\n").malformed);
}

}  // namespace
}  // namespace p2paudit
