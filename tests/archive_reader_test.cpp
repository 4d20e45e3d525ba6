// SPDX-License-Identifier: GPL-2.0-or-later
// The tar walk, the default reader of snapshot archives, against libarchive's tar reader, which it
// stands in for (issue 21): the same tree from every capture and generated machine, read by the
// walk itself; and for damaged, unusual and hostile archives the same tree or the same error,
// whether the walk reads them or gives them to libarchive.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "archive_tree.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/sysroot.h"
#include "synth.h"

namespace fs = std::filesystem;

namespace p2paudit {
namespace {

struct Outcome {
  std::string error;  // InputError's text, empty when the archive was read
  std::string tree;
  ArchiveReader reader = ArchiveReader::kLibarchive;
};

Outcome read_with(const std::string& path, ArchiveReader reader, const SysrootLimits& limits = {}) {
  try {
    Sysroot root = Sysroot::open(path, limits, reader);
    return {"", test::tree_text(root), root.archive_reader()};
  } catch (const InputError& e) {
    return {e.what(), "", reader};
  }
}

// The walk's outcome, after checking that libarchive alone has the same.
Outcome expect_alike(const std::string& path, const SysrootLimits& limits = {}) {
  Outcome walk = read_with(path, ArchiveReader::kTarWalk, limits);  // the default reader
  Outcome reference = read_with(path, ArchiveReader::kLibarchive, limits);
  EXPECT_EQ(walk.error, reference.error) << path;
  EXPECT_EQ(walk.tree, reference.tree) << path;
  EXPECT_EQ(reference.reader, ArchiveReader::kLibarchive);
  return walk;
}

class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/p2paudit-archive-reader-XXXXXX";
    path_ = mkdtemp(name);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::vector<std::string> captured_archives() {
  std::vector<std::string> paths;
  for (const auto& e : fs::recursive_directory_iterator(P2PAUDIT_TEST_DATA))
    if (e.is_regular_file() && e.path().string().ends_with(".tar.gz")) paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

TEST(ArchiveReader, TheWalkReadsEveryCaptureAsLibarchiveDoes) {
  const auto paths = captured_archives();
  ASSERT_GE(paths.size(), 30u);  // GNU tar with long names and links, and POSIX ustar
  for (const auto& path : paths) {
    Outcome walk = expect_alike(path);
    EXPECT_EQ(walk.error, "") << path;
    EXPECT_EQ(walk.reader, ArchiveReader::kTarWalk) << path << ": the walk gave up";
    EXPECT_NE(walk.tree.find("F \"sys/"), std::string::npos) << path;
  }
}

TEST(ArchiveReader, TheWalkReadsGeneratedMachinesAsLibarchiveDoes) {
  TempDir dir;
  for (int vfs : {0, 8}) {
    synth::Options options;
    options.functions = 300;
    options.depth = 3;  // long sysfs paths: past ustar's 100-byte name field
    options.fanout = 2;
    options.vfs = vfs;
    const std::string tarball = dir.file(fmt::format("machine-{}.tar.gz", vfs));
    synth::Machine::plan(options).write_tarball(tarball);
    Outcome walk = expect_alike(tarball);
    EXPECT_EQ(walk.error, "");
    EXPECT_EQ(walk.reader, ArchiveReader::kTarWalk);
  }
}

// A tar header as writers make them; the checksum is filled in by seal().
struct Header {
  std::string block = std::string(512, '\0');
  Header(std::string_view name, char type, size_t size, std::string_view link = "", bool gnu = false) {
    put(0, name.substr(0, 100));
    put(100, "0000644");
    put(108, "0000000");
    put(116, "0000000");
    put(124, fmt::format("{:011o}", size));
    put(136, "00000000000");
    block[156] = type;
    put(157, link.substr(0, 100));
    put(257, gnu ? std::string_view("ustar  \0", 8) : std::string_view("ustar\0" "00", 8));
  }
  Header& put(size_t at, std::string_view bytes) {
    block.replace(at, bytes.size(), bytes);
    return *this;
  }
  std::string seal() {
    block.replace(148, 8, "        ");
    unsigned sum = 0;
    for (unsigned char c : block) sum += c;
    put(148, fmt::format("{:06o}", sum)).block[154] = '\0';
    return block;
  }
};

std::string padded(std::string body) {
  body.resize((body.size() + 511) / 512 * 512, '\0');
  return body;
}

std::string pax_record(std::string_view key, std::string_view value) {
  const size_t rest = key.size() + value.size() + 3;  // ' ', '=', '\n'
  size_t length = rest + 1;
  while (fmt::format("{}", length).size() + rest != length) ++length;
  return fmt::format("{} {}={}\n", length, key, value);
}

// The top of a sysroot, then the entries under test, then the end.
std::string archive(const std::vector<std::string>& entries) {
  std::string tar = Header("sys/", '5', 0).seal() + Header("sys/a", '0', 3).seal() + padded("abc");
  for (const auto& e : entries) tar += e;
  return tar + std::string(1024, '\0');
}

TEST(ArchiveReader, UnusualHeadersReadAlikeWhoeverReadsThem) {
  TempDir dir;
  const std::string long_name = "sys/" + std::string(150, 'n');
  const std::string long_link = std::string(120, 'l');
  auto base256 = Header("sys/b", '0', 0);
  base256.put(124, std::string("\x80\0\0\0\0\0\0\0\0\0\0\x03", 12));
  struct Case {
    const char* what;
    std::string tar;
    ArchiveReader reader;  // who is expected to read it
  } cases[] = {
      {"ustar prefix", archive({Header("b", '0', 1).put(345, "sys").seal() + padded("x")}), ArchiveReader::kTarWalk},
      {"GNU long name and link",
       archive({Header("././@LongLink", 'L', long_name.size() + 1, "", true).seal() + padded(long_name + '\0'),
                Header("././@LongLink", 'K', long_link.size() + 1, "", true).seal() + padded(long_link + '\0'),
                Header("sys/short", '2', 0, "cut", true).seal()}),
       ArchiveReader::kTarWalk},
      {"pax path and linkpath",
       archive({Header("PaxHeader", 'x', 0).put(124, fmt::format("{:011o}", pax_record("path", long_name).size() +
                                                                              pax_record("linkpath", long_link).size()))
                    .seal() +
                    padded(pax_record("path", long_name) + pax_record("linkpath", long_link)),
                Header("sys/short", '2', 0, "cut").seal()}),
       ArchiveReader::kTarWalk},
      {"hard link", archive({Header("sys/h", '1', 0, "sys/a").seal()}), ArchiveReader::kTarWalk},
      {"pax key the walk does not know",
       archive({Header("PaxHeader", 'x', pax_record("SCHILY.xattr.user.x", "1").size()).seal() +
                    padded(pax_record("SCHILY.xattr.user.x", "1")),
                Header("sys/c", '0', 0).seal()}),
       ArchiveReader::kLibarchive},
      {"base-256 size", archive({base256.seal() + padded("xyz")}), ArchiveReader::kLibarchive},
      {"regular file named like a directory", archive({Header("sys/d/", '0', 0).seal()}), ArchiveReader::kLibarchive},
      {"hard link with data", archive({Header("sys/h", '1', 3, "sys/a").seal() + padded("abc")}),
       ArchiveReader::kLibarchive},
      {"symlink with a size", archive({Header("sys/s", '2', 512, "a").seal() + padded("junk")}),
       ArchiveReader::kLibarchive},
      {"directory with a size", archive({Header("sys/e/", '5', 3).seal() + padded("abc")}), ArchiveReader::kLibarchive},
      {"old tar without magic", archive({Header("sys/f", '0', 0).put(257, std::string(8, '\0')).seal()}),
       ArchiveReader::kLibarchive},
      {"name not ASCII", archive({Header("sys/\xc3\xa9", '0', 0).seal()}), ArchiveReader::kLibarchive},
      {"GNU sparse fields", archive({Header("sys/g", '0', 0, "", true).put(386, "1").seal()}),
       ArchiveReader::kLibarchive},
      {"character device", archive({Header("sys/dev", '3', 0).seal()}), ArchiveReader::kLibarchive},
      {"bad checksum", archive({Header("sys/h", '0', 0).seal().replace(148, 1, "7")}), ArchiveReader::kLibarchive},
      {"truncated data", Header("sys/", '5', 0).seal() + Header("sys/a", '0', 4096).seal() + "abc",
       ArchiveReader::kLibarchive},
      {"no end marker", Header("sys/", '5', 0).seal() + Header("sys/a", '0', 1).seal() + padded("a"),
       ArchiveReader::kTarWalk},
      {"long name at the end", archive({Header("././@LongLink", 'L', 9, "", true).seal() + padded("sys/long")}),
       ArchiveReader::kLibarchive},
  };
  for (const auto& c : cases) {
    const std::string path = dir.file("case.tar");
    write_file(path, c.tar);
    Outcome walk = expect_alike(path);
    if (walk.error.empty()) {  // an error does not say who gave it
      EXPECT_EQ(walk.reader, c.reader) << c.what;
    }
  }
}

// Every header field of real captures changed, with its checksum made right again (or not):
// whatever the walk makes of it, libarchive alone makes the same (tree or error).
TEST(ArchiveReader, DamagedHeadersReadAlikeWhoeverReadsThem) {
  TempDir dir;
  const auto paths = captured_archives();
  std::mt19937 random(21);
  const char interesting[] = {'\0', ' ', '/', '.', '0', '1', '2', '5', '7', 'L', 'K', 'x', 'g', 'S', 'V', '\x80', '\xff', '\n', '='};
  size_t walked = 0, rounds = 0;
  for (size_t p = 0; p < paths.size(); p += 9) {
    const std::string compressed = read_input_file(paths[p], 64u << 20);
    const auto tar = gunzip_bounded(compressed, 64u << 20);
    ASSERT_TRUE(tar) << paths[p];
    std::vector<size_t> headers;  // where each header block starts
    for (size_t at = 0; at + 512 <= tar->size() && (*tar)[at] != '\0';) {
      headers.push_back(at);
      const size_t size = std::stoul(tar->substr(at + 124, 12), nullptr, 8);
      at += 512 + (size + 511) / 512 * 512;
    }
    ASSERT_GT(headers.size(), 50u);
    for (int round = 0; round < 120; ++round, ++rounds) {
      std::string damaged = *tar;
      const size_t header = headers[random() % headers.size()];
      const int changes = 1 + static_cast<int>(random() % 3);
      for (int i = 0; i < changes; ++i) {
        const size_t at = header + (random() % 2 ? random() % 512 : 100 + random() % 60);  // often the numbers
        damaged[at] = random() % 2 ? interesting[random() % sizeof interesting] : static_cast<char>(random());
      }
      if (random() % 5 != 0) {  // most keep a right checksum, to reach what lies behind it
        std::string block = damaged.substr(header, 512);
        block.replace(148, 8, "        ");
        unsigned sum = 0;
        for (unsigned char c : block) sum += c;
        damaged.replace(header + 148, 8, fmt::format("{:06o}", sum) + '\0' + ' ');
      }
      if (random() % 4 == 0) damaged.resize(random() % damaged.size());
      const std::string path = dir.file("damaged.tar");
      write_file(path, damaged);
      SysrootLimits limits;
      if (random() % 4 == 0) limits.max_file_bytes = 1000;
      if (random() % 4 == 0) limits.max_archive_entries = 100;
      if (expect_alike(path, limits).reader == ArchiveReader::kTarWalk) ++walked;
      if (HasFailure()) {
        ADD_FAILURE() << "round " << round << " of " << paths[p];
        return;
      }
    }
  }
  EXPECT_GT(walked, rounds / 4);  // the walk itself read (or refused) many of them
}

}  // namespace
}  // namespace p2paudit
