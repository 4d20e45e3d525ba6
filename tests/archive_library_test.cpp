// SPDX-License-Identifier: GPL-2.0-or-later
// libarchive is opened with dlopen() the first time an archive is read or written (issue 21):
// the tool does not link it, a directory is read without loading it, and a machine without it
// gets a message that names the archive and the package, never a crash. This binary points the
// loader at a library that does not exist before any archive is touched; the real library is
// loaded only in child processes.
#include <dlfcn.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "p2paudit/archive_library.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/platform.h"
#include "p2paudit/snapshot.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "synth.h"
#include "temp_dir.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace p2paudit {
namespace {

constexpr const char* kAbsentSoname = "libp2paudit-test-absent-archive.so.0";

class AbsentLibarchive : public ::testing::Environment {
 public:
  void SetUp() override { set_archive_library_soname_for_tests(kAbsentSoname); }
};
const auto* const kAbsent = ::testing::AddGlobalTestEnvironment(new AbsentLibarchive);

const std::string kCapture = std::string(P2PAUDIT_TEST_DATA) + "/machines/epyc-firecracker-vm/sysroot.tar.gz";
const std::string kNotInstalled =
    fmt::format("{} is not installed (apt install {})", kAbsentSoname, P2PAUDIT_LIBARCHIVE_PACKAGE);

bool libarchive_loaded() {
  void* handle = ::dlopen(P2PAUDIT_LIBARCHIVE_SONAME, RTLD_NOW | RTLD_NOLOAD);
  if (handle) ::dlclose(handle);
  return handle != nullptr;
}

std::string input_error(auto&& action) {
  try {
    action();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

std::string synth_directory(const test::TempDir& tmp) {
  synth::Options options;
  options.functions = 64;
  const std::string dir = (tmp / "machine").string();
  fs::create_directory(dir);
  synth::Machine::plan(options).write_directory(dir);
  return dir;
}

bool has_every_function(const ArchiveLibraryLoad& load) {
  bool all = load.error.empty();
#define P2PAUDIT_EXPECT_FUNCTION(name) all = all && load.functions.name != nullptr;
  P2PAUDIT_ARCHIVE_FUNCTIONS(P2PAUDIT_EXPECT_FUNCTION)
#undef P2PAUDIT_EXPECT_FUNCTION
  return all;
}

TEST(ArchiveLibrary, TheLibraryFoundGivesEveryFunction) {
  // In a child that runs this test alone from the start ("threadsafe"), so that archive_library()
  // has not been called there yet, and this process never holds the real library
  // (DirectoryReadLoadsNoLibarchive).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const bool all = has_every_function(load_archive_library(P2PAUDIT_LIBARCHIVE_SONAME));
        set_archive_library_soname_for_tests(P2PAUDIT_LIBARCHIVE_SONAME);
        const Sysroot root = Sysroot::open(kCapture);
        std::_Exit(all && root.is_archive() && !read_topology(root).functions.empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(ArchiveLibrary, AbsentLibraryIsNamedWithItsPackage) {
  ArchiveLibraryLoad load = load_archive_library(kAbsentSoname);
  EXPECT_EQ(load.error, kNotInstalled);
  EXPECT_EQ(load.functions.archive_read_new, nullptr);
}

TEST(ArchiveLibrary, LibraryWithoutTheFunctionsIsRefused) {
  // The C library loads but holds none of libarchive's functions.
  ArchiveLibraryLoad load = load_archive_library("libc.so.6");
  EXPECT_EQ(load.error, "libc.so.6 lacks archive_error_string: it is not the libarchive 3 p2paudit needs");
  EXPECT_EQ(load.functions.archive_read_new, nullptr);
  EXPECT_EQ(load.functions.archive_error_string, nullptr);
}

TEST(ArchiveLibrary, ReadingAnArchiveWithoutItNamesTheArchive) {
  for (ArchiveReader reader : {ArchiveReader::kTarWalk, ArchiveReader::kLibarchive})
    EXPECT_EQ(input_error([&] { Sysroot::open(kCapture, {}, reader); }),
              fmt::format("cannot read {}: {}", kCapture, kNotInstalled));
  EXPECT_EQ(input_error([] { gunzip_bounded("\x1f\x8b", 100, "proc/config.gz"); }),
            "cannot decompress proc/config.gz: " + kNotInstalled);
}

TEST(ArchiveLibrary, CompressedKernelConfigWithoutItIsAFindingNotAStop) {
  // A machine without /boot/config-RELEASE keeps its config in /proc/config.gz: without
  // libarchive that config is unknown, and the rest of the machine is still read.
  test::TempDir tmp;
  const std::string dir = synth_directory(tmp);
  for (const auto& e : fs::directory_iterator(fs::path(dir) / "boot")) fs::remove(e.path());
  {
    std::ofstream gz(fs::path(dir) / "proc/config.gz", std::ios::binary);
    gz << "\x1f\x8b";
  }
  std::vector<Finding> findings;
  const Platform platform = read_platform(Sysroot::open(dir), findings);
  EXPECT_EQ(platform.config_p2pdma, Known::kUnknown);
  bool told = false;
  for (const auto& f : findings)
    told = told || (f.path == "proc/config.gz" &&
                    f.message == "cannot decompress proc/config.gz: " + kNotInstalled + ": kernel config unknown");
  EXPECT_TRUE(told);
}

TEST(ArchiveLibrary, WritingAnArchiveWithoutItCreatesNoFile) {
  test::TempDir tmp;
  const std::string dir = synth_directory(tmp);
  const Sysroot root = Sysroot::open(dir);
  const std::string out = (tmp / "snapshot.tar.gz").string();
  EXPECT_EQ(input_error([&] { write_snapshot(root, read_topology(root), out, {}); }),
            fmt::format("cannot write {}: {}", out, kNotInstalled));
  EXPECT_FALSE(fs::exists(out));
  synth::Options options;
  options.functions = 64;
  EXPECT_EQ(input_error([&] { synth::Machine::plan(options).write_tarball(out); }),
            fmt::format("cannot write {}: {}", out, kNotInstalled));
}

TEST(ArchiveLibrary, DirectoryReadLoadsNoLibarchive) {
  test::TempDir tmp;
  const Sysroot root = Sysroot::open(synth_directory(tmp));
  const Topology topo = read_topology(root);
  EXPECT_FALSE(topo.functions.empty());
  EXPECT_FALSE(libarchive_loaded());
}

// The tool names no libarchive in its dynamic section and loads it for a tarball, not for a
// directory (LD_DEBUG=files: glibc's loader tells each object it opens).
TEST(ArchiveLibrary, ToolLoadsItForTarballsOnly) {
  auto needed = test::run_command(fmt::format("readelf -d '{}'", P2PAUDIT_TOOL));
  ASSERT_EQ(needed.status, 0);
  EXPECT_NE(needed.output.find("(NEEDED)"), std::string::npos) << needed.output;
  EXPECT_EQ(needed.output.find("libarchive"), std::string::npos) << needed.output;
  test::TempDir tmp;
  const std::string dir = synth_directory(tmp);
  auto loads = [&](const std::string& sysroot) {
    return test::run_command(fmt::format("LD_DEBUG=files '{}' --sysroot '{}' 2>&1 >/dev/null | "
                                         "grep -c 'file={} .*dynamically loaded'",
                                         P2PAUDIT_TOOL, sysroot, P2PAUDIT_LIBARCHIVE_SONAME))
        .output;
  };
  EXPECT_EQ(loads(dir), "0\n");
  EXPECT_EQ(loads(kCapture), "1\n");
}

}  // namespace
}  // namespace p2paudit
