// SPDX-License-Identifier: GPL-2.0-or-later
// A directory sysroot finds a read's directory by its text, walks known directories in one step
// and looks names up in a listing ordered by their first bytes (issue 21). What it answers must
// not depend on any of that: every spelling of a path, warm or cold, reads as the archive of the
// same tree does, and a known directory on the way never lets a link out of the sysroot.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "p2paudit/sysroot.h"
#include "sysroot_builder.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using test::SysrootDir;

// Every answer a Sysroot gives about one path, as text, so that two sysroots can be compared.
std::string answers(const Sysroot& root, const std::string& path) {
  auto show = [](const std::optional<std::string>& v) { return v ? "'" + *v + "'" : std::string("none"); };
  std::string out = "line=" + show(root.read_line(path)) + " link=" + show(root.read_link(path)) +
                    " resolve=" + show(root.resolve(path)) + " exists=" + (root.exists(path) ? "1" : "0");
  const auto names = root.list(path);
  out += " list=" + std::to_string(names.size());
  return out;
}

// The tree of `s` packed beside it and opened as an archive; the tarball goes with it.
struct PackedTree {
  explicit PackedTree(const SysrootDir& s) : tarball(s.str() + ".tar.gz") { s.pack(tarball); }
  ~PackedTree() { fs::remove(tarball); }
  Sysroot open() const { return Sysroot::open(tarball); }
  std::string tarball;
};

// A tree with plain files, directories, links inside, links to the top, links out and a loop.
void write_tree(SysrootDir& s) {
  s.write("sys/a/b/c/attr", "deep\n");
  s.write("sys/a/b/attr", "middle\n");
  s.write("sys/a/file", "top file\n");
  s.link("sys/a/b/up", "..");                          // a directory through a link
  s.link("sys/a/b/c/top", "/");                        // the sysroot's top
  s.link("sys/a/b/c/above", "../../../../..");         // one step above the top
  s.link("sys/a/b/c/out", "../../../../../../etc");    // far above the top
  s.link("sys/a/b/c/loop", "loop");
  s.link("sys/a/b/c/twice", "../../b/c/attr");
  s.link("sys/l", "a/b/c");                            // into a known directory
  s.link("sys/m", "a/b/c/out");                        // through it and out
  s.link("sys/n", "a/b/../b/c/../../b/c");             // ".." between known directories
  s.link("sys/abs", "/sys/a/b");
}

const std::vector<std::string> kPaths = {
    "sys/a/b/c/attr", "sys//a/b/./c/attr", "./sys/a/b/c/attr", "sys/a/b/c/../c/attr", "sys/a/b/up/file",
    "sys/a/b/up/b/up/b/attr", "sys/a/b/c/top/sys/a/file", "sys/a/b/c/above/sys/a/file", "sys/a/b/c/out",
    "sys/a/b/c/out/passwd", "sys/a/b/c/loop", "sys/a/b/c/loop/x", "sys/a/b/c/twice", "sys/l/attr", "sys/l",
    "sys/m", "sys/m/passwd", "sys/n/attr", "sys/abs/c/attr", "sys/abs/attr", "sys/a/b/c", "sys/a/b/c/",
    "sys/a/b/c/.", "sys/a/b/c/..", "sys/a/file/x", "sys/absent/attr", "sys/a/absent", "sys/..", "..", "/",
    "", ".", "sys", "/sys/a/file", "sys/a/b/c/attr/", std::string(300, 'x'), "sys/a/" + std::string(256, 'y'),
    "sys/../sys/a/b/c/attr", "sys/a/b/c/../../../../sys/a/file"};

TEST(SysrootPaths, EverySpellingWarmOrColdAnswersAsTheArchive) {
  SysrootDir s;
  write_tree(s);
  PackedTree packed(s);
  Sysroot warm = Sysroot::open(s.str());
  Sysroot archive = packed.open();
  // The warm sysroot knows the deep directories before any link leads through them.
  ASSERT_EQ(warm.read_line("sys/a/b/c/attr"), "deep");
  ASSERT_EQ(warm.read_line("sys/a/b/attr"), "middle");
  for (const auto& path : kPaths) {
    Sysroot cold = Sysroot::open(s.str());
    const std::string expected = answers(archive, path);
    EXPECT_EQ(answers(cold, path), expected) << path;
    EXPECT_EQ(answers(warm, path), expected) << path;
  }
}

TEST(SysrootPaths, AKnownDirectoryOnTheWayLetsNoLinkOut) {
  SysrootDir s;
  write_tree(s);
  Sysroot root = Sysroot::open(s.str());
  ASSERT_EQ(root.read_line("sys/l/attr"), "deep");
  EXPECT_EQ(root.resolve("sys/l"), "sys/a/b/c");
  EXPECT_EQ(root.resolve("sys/n"), "sys/a/b/c");
  EXPECT_FALSE(root.resolve("sys/m")) << "a link out of the sysroot, reached through known directories";
  EXPECT_FALSE(root.read_line("sys/m/passwd"));
  EXPECT_FALSE(root.resolve("sys/a/b/c/above/sys")) << "a step above the top is refused, not clamped";
  EXPECT_EQ(root.read_line("sys/a/b/c/top/sys/a/file"), "top file") << "an absolute link means the sysroot's top";
  EXPECT_FALSE(root.resolve("sys/a/b/c/loop"));
}

TEST(SysrootPaths, NamesSharingTheirFirstBytesAreFoundAndListedInOrder) {
  SysrootDir s;
  const std::vector<std::string> names = {"a", "ab", "abcdefg", "abcdefgh", "abcdefghi", "current_", "current_link_speed",
                                          "current_link_width", "current_link_widtg", "z", "\xc3\xa9t\xc3\xa9",
                                          std::string(255, 'n'), std::string(254, 'n') + "o"};
  for (const auto& name : names) s.write("sys/d/" + name, name + "\n");
  Sysroot root = Sysroot::open(s.str());
  for (const auto& name : names) EXPECT_EQ(root.read_line("sys/d/" + name), name) << name;
  for (const std::string& absent : std::vector<std::string>{"abcdef", "abcdefgh0", "current", "current_link",
                                                             "current_link_widt", "zz", std::string(256, 'n'),
                                                             std::string(255, 'm')})
    EXPECT_FALSE(root.exists("sys/d/" + absent)) << absent;
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(root.list("sys/d"), sorted);
}

TEST(SysrootPaths, ACaptureInsideOneDirectoryReadsThroughALinkToItsTop) {
  SysrootDir s;
  s.write("capture/sys/x/attr", "one\n");
  s.write("capture/proc/cmdline", "quiet\n");
  s.link("capture/sys/x/top", "/");
  fs::remove_all(s.dir() / "sys");
  fs::remove_all(s.dir() / "proc");
  fs::remove_all(s.dir() / "boot");
  PackedTree packed(s);
  Sysroot dir = Sysroot::open(s.str());
  Sysroot archive = packed.open();
  EXPECT_EQ(dir.read_line("sys/x/top/sys/x/attr"), "one");
  EXPECT_EQ(dir.read_line("sys/x/top/proc/cmdline"), "quiet");
  for (const char* path : {"sys/x/top/sys/x/attr", "sys/x/top/proc/cmdline", "sys/x/top", "sys/x/top/capture",
                           "sys/x/attr", "proc/cmdline"})
    EXPECT_EQ(answers(dir, path), answers(archive, path)) << path;
}

}  // namespace
}  // namespace p2paudit
