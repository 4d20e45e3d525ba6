// SPDX-License-Identifier: GPL-2.0-or-later
// The one dlopen() mechanism (shared_library.h): which library loaded, why none did, and which
// required function a library lacks.
#include <gtest/gtest.h>

#include <cstring>

#include "p2paudit/shared_library.h"

namespace p2paudit {
namespace {

TEST(SharedLibrary, TheFirstThatLoadsIsUsed) {
  auto lib = SharedLibrary::open({"libp2paudit-does-not-exist.so.9", "libc.so.6"});
  ASSERT_TRUE(lib);
  EXPECT_EQ(lib.name(), "libc.so.6");
  EXPECT_EQ(lib.error(), "");
  size_t (*length)(const char*) = nullptr;
  ASSERT_TRUE(lib.get(length, "strlen"));
  EXPECT_EQ(length("p2paudit"), 8u);
  EXPECT_EQ(lib.missing(), "");
}

TEST(SharedLibrary, NoneLoadsAndTheFirstOnesReasonIsKept) {
  auto lib = SharedLibrary::open({"libp2paudit-first.so.1", "libp2paudit-second.so.2"});
  EXPECT_FALSE(lib);
  EXPECT_NE(lib.error().find("libp2paudit-first.so.1"), std::string::npos) << lib.error();
  void (*f)() = reinterpret_cast<void (*)()>(1);
  EXPECT_FALSE(lib.get(f, "anything"));
  EXPECT_EQ(f, nullptr);
  EXPECT_FALSE(SharedLibrary::open({}));
}

TEST(SharedLibrary, ARequiredFunctionMissingIsNamedAnOptionalOneIsNot) {
  auto lib = SharedLibrary::open({"libc.so.6"});
  ASSERT_TRUE(lib);
  int (*f)() = nullptr;
  EXPECT_FALSE(lib.get(f, "p2paudit_optional_symbol", SharedLibrary::kOptional));
  EXPECT_EQ(lib.missing(), "");
  EXPECT_FALSE(lib.get(f, "p2paudit_first_missing"));
  EXPECT_FALSE(lib.get(f, "p2paudit_second_missing"));
  EXPECT_EQ(lib.missing(), "p2paudit_first_missing");
  size_t (*length)(const char*) = nullptr;
  EXPECT_TRUE(lib.get(length, "strlen"));  // what was found still is
}

}  // namespace
}  // namespace p2paudit
