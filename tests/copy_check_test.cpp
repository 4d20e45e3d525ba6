// SPDX-License-Identifier: GPL-2.0-or-later
// The copy test's shared pieces (probe/src/copy_check.h): the random buffer, the full comparison
// and the per-leg JSON that the policy facts read.
#include <gtest/gtest.h>

#include <vector>

#include "copy_check.h"

namespace p2paudit::probe::detail {
namespace {

TEST(CopyCheck, RandomBuffersDifferBySeedAndRepeatForOne) {
  std::vector<std::uint8_t> a(100003), b(100003), c(100003);
  fill_random(a.data(), a.size(), 7);
  fill_random(b.data(), b.size(), 7);
  fill_random(c.data(), c.size(), 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(compare_buffers(a.data(), c.data(), a.size()).first_offset, 0);
}

TEST(CopyCheck, ComparisonCountsEveryWrongByteAndTheFirst) {
  std::vector<std::uint8_t> expected(300000), actual;
  fill_random(expected.data(), expected.size(), 1);
  actual = expected;
  EXPECT_FALSE(compare_buffers(expected.data(), actual.data(), expected.size()).any());
  actual[70000] ^= 1, actual[70001] ^= 0x80, actual[299999] ^= 0xff;  // across 64 KiB blocks, and the last byte
  auto m = compare_buffers(expected.data(), actual.data(), expected.size());
  EXPECT_EQ(m.bytes, 3u);
  EXPECT_EQ(m.first_offset, 70000);
}

TEST(CopyCheck, LegJsonSaysWhatHappened) {
  CopyLeg verified;
  verified.seconds = {0.4, 0.1, 0.2};
  verified.finish();
  auto j = verified.to_json(std::uint64_t{1} << 30);
  EXPECT_EQ(j["result"], "verified");
  EXPECT_DOUBLE_EQ(j["gbps"].get<double>(), double(std::uint64_t{1} << 30) / 0.2 / 1e9);  // the median

  CopyLeg corrupt;
  corrupt.seconds = {0.1};
  corrupt.mismatch = {4096, 12};
  corrupt.finish();
  j = corrupt.to_json(1 << 20);
  EXPECT_EQ(j["result"], "corrupt");
  EXPECT_TRUE(j["gbps"].is_null()) << "no bandwidth for wrong data";
  EXPECT_EQ(j["mismatched_bytes"], 4096);
  EXPECT_EQ(j["first_mismatch"], 12);

  CopyLeg failed;
  failed.fail("cuCtxEnablePeerAccess", 217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED");
  failed.finish();
  j = failed.to_json(1 << 20);
  EXPECT_EQ(j["result"], "failed");
  EXPECT_EQ(j["error"], "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED");
  EXPECT_EQ(j["code"], 217);
  EXPECT_DOUBLE_EQ(median({}), 0);
  EXPECT_DOUBLE_EQ(median({3, 1, 2, 4}), 2.5);
}

}  // namespace
}  // namespace p2paudit::probe::detail
