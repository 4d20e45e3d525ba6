// SPDX-License-Identifier: GPL-2.0-or-later
// The read-only promise (docs/security.md), checked on the real binary under strace: no command
// opens anything for writing except the output it was told to write (and that file's temporary
// twin beside it), renames or removes nothing else, and issues no ioctl on a device node. Runtime
// probes are not part of this promise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <utility>
#include <vector>

#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;

struct Violation {
  std::string line;
};

std::string fixture() { return test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz"); }
std::string oracle() { return test::data_path("kernel-oracle/h-f2b-multifunction-rp-acs/sysroot.tar.gz"); }
std::string dump() { return test::data_path("lspci-dumps/PCI-X-bridges-and-domains"); }

bool have_strace() { return test::run_command("strace -V >/dev/null 2>&1").status == 0; }

// Runs the tool under strace and returns the trace lines that break the promise. `output` is the
// one file the command may create (empty: none).
std::vector<std::string> violations(const std::string& args, const std::string& output = "", const std::string& env = "") {
  std::string dir = ::testing::TempDir();
  static int calls = 0;  // ctest runs cases in parallel processes: one log per process and call
  std::string log = dir + "/guard-strace-" + std::to_string(getpid()) + "-" + std::to_string(++calls) + ".log";
  std::string out_file = log + ".out";
  std::string cmd = env + "ASAN_OPTIONS=detect_leaks=0 timeout 60 strace -f -y -qq -o " + test::shell_quote(log) +
                    " -e trace=open,openat,openat2,creat,ioctl,rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat,"
                    "link,linkat,symlink,symlinkat,truncate,chmod,fchmodat,chown,fchownat,mknod,mknodat " +
                    std::string(P2PAUDIT_TOOL) + " " + args + " >" + test::shell_quote(out_file) + " 2>&1";
  auto r = test::run_command(cmd);
  EXPECT_NE(r.status, 124) << cmd << " timed out";
  std::vector<std::string> bad;
  std::ifstream in(log);
  std::string out_dir = output.empty() ? "" : fs::path(output).parent_path().string();
  auto is_output = [&](const std::string& line) {
    // The output itself, or its temporary twin ".p2paudit-XXXXXX" in the same directory.
    return !output.empty() && (line.find("\"" + output + "\"") != std::string::npos ||
                               line.find("\"" + out_dir + "/.p2paudit-") != std::string::npos);
  };
  const std::regex open_call(R"((open|openat|openat2|creat)\()");
  const std::regex writes(R"(O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|O_APPEND)");
  const std::regex changes(R"(^\d+ +(rename|renameat2?|unlink|unlinkat|mkdir|mkdirat|link|linkat|symlink|symlinkat|truncate|chmod|fchmodat|chown|fchownat|mknod|mknodat)\()");
  const std::regex device_ioctl(R"(ioctl\(\d+</dev/)");
  for (std::string line; std::getline(in, line);) {
    if (line.find("= -1") != std::string::npos && !std::regex_search(line, device_ioctl)) continue;  // failed calls change nothing
    bool opened_for_writing = std::regex_search(line, open_call) &&
                              (std::regex_search(line, writes) || line.find("creat(") != std::string::npos);
    if ((opened_for_writing || std::regex_search(line, changes)) && !is_output(line)) bad.push_back(line);
    if (std::regex_search(line, device_ioctl)) bad.push_back(line);
  }
  fs::remove(log);
  fs::remove(out_file);
  return bad;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

class ReadOnlyGuard : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!have_strace()) GTEST_SKIP() << "strace is not installed (scripts/install-deps --test installs it)";
  }
};

TEST_P(ReadOnlyGuard, CommandOpensNothingForWriting) {
  auto bad = violations(GetParam());
  EXPECT_TRUE(bad.empty()) << GetParam() << "\n" << joined(bad);
}

INSTANTIATE_TEST_SUITE_P(
    EveryCommand, ReadOnlyGuard,
    ::testing::Values("--sysroot " + fixture(), "--sysroot " + fixture() + " --format json",
                      "--sysroot " + fixture() + " topology", "--sysroot " + fixture() + " matrix --all --format json",
                      "--sysroot " + oracle() + " explain 01:00.0 01:00.1",
                      "--sysroot " + oracle() + " --assume-whitelisted 8086:29c0 matrix --all",
                      "--sysroot " + fixture() + " policy --all", "--sysroot " + fixture() + " --format env policy",
                      "--sysroot " + fixture() + " check gpu0 gpu1",
                      "--sysroot " + fixture() + " --kernel 5.15 matrix",
                      "rules lint " + std::string(P2PAUDIT_SOURCE_RULES_DIR) + "/policy/default.yaml", "rules facts",
                      "--lspci-dump " + dump() + " topology", "--lspci-dump " + dump() + " matrix --all",
                      "--lspci-dump " + dump() + " --dump-cpu AuthenticAMD:25:1 policy --all",
                      // the other outputs: pictures, metrics, the whitelist draft, reports on stdout
                      "--sysroot " + fixture() + " --format prom", "--sysroot " + fixture() + " --format html",
                      "--sysroot " + fixture() + " --format dot", "--sysroot " + fixture() + " --format dot topology",
                      "--sysroot " + oracle() + " whitelist --commit-message",
                      "--sysroot " + fixture() + " whitelist --all --format json",
                      "--sysroot " + fixture() + " report", "aggregate " + fixture() + " " + oracle(),
                      "aggregate --format csv " + fixture(), "rules facts --format json",
                      // the live machine, whatever it has
                      // (the first screen with --no-cache: the answer cache is its one write, below)
                      "topology", "--no-cache", "matrix --all", "policy --no-probe --all", "whitelist --no-probe",
                      "report --no-probe", "--format prom --no-probe"),
    [](const auto& info) { return "case" + std::to_string(info.index); });

// The live first screen writes the per-boot answer cache (declared in docs/security.md) and nothing
// else: the cache file and its temporary twin in the cache directory.
TEST(ReadOnlyGuardOutput, TheAnswerCacheIsTheOnlyWrite) {
  if (!have_strace()) GTEST_SKIP() << "strace is not installed";
  std::string cache = ::testing::TempDir() + "/guard-cache-" + std::to_string(getpid());
  fs::remove_all(cache);
  std::string env = "P2PAUDIT_ANSWER_CACHE_DIR=" + test::shell_quote(cache) + " ";
  // Without the directory declared the writes are caught (whenever the runtimes were asked at all).
  auto bad = violations("", "", env);
  const bool wrote = fs::exists(cache + "/answers.json");
  if (wrote) EXPECT_FALSE(bad.empty()) << "an undeclared cache write must be caught";
  fs::remove_all(cache);
  // Declared: the directory, the file and its temporary twin are all it writes.
  bad = violations("", cache + "/answers.json", env);
  std::erase_if(bad, [&](const std::string& line) { return line.find("mkdir(\"" + cache + "\"") != std::string::npos; });
  std::erase_if(bad, [&](const std::string& line) { return line.find("\".answers.json-") != std::string::npos; });
  EXPECT_TRUE(bad.empty()) << joined(bad);
  // --no-cache: nothing at all.
  fs::remove_all(cache);
  EXPECT_TRUE(violations("--no-cache", "", env).empty());
  EXPECT_FALSE(fs::exists(cache));
  fs::remove_all(cache);
}

TEST(ReadOnlyGuardSnapshot, WritesOnlyTheNamedOutput) {
  if (!have_strace()) GTEST_SKIP() << "strace is not installed";
  std::string out = ::testing::TempDir() + "/guarded-snapshot.tar.gz";
  fs::remove(out);
  auto bad = violations("--sysroot " + fixture() + " snapshot -o " + out, out);
  EXPECT_TRUE(bad.empty()) << joined(bad);
  EXPECT_TRUE(fs::exists(out));
  fs::remove(out);
  bad = violations("snapshot -o " + out, out);  // the live machine
  EXPECT_TRUE(bad.empty()) << joined(bad);
}

// report -o and aggregate -o (and --partial) write their declared output and nothing else.
TEST(ReadOnlyGuardOutput, ReportAndAggregateWriteOnlyTheNamedOutput) {
  if (!have_strace()) GTEST_SKIP() << "strace is not installed";
  const std::string dir = ::testing::TempDir();
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"--sysroot " + fixture() + " report -o ", "guarded-report.json"},
      {"aggregate " + fixture() + " " + oracle() + " -o ", "guarded-aggregate.txt"},
      {"aggregate --format json " + fixture() + " -o ", "guarded-aggregate.json"},
      {"aggregate --partial " + fixture() + " -o ", "guarded-partial.json"},
      {"--sysroot " + test::data_path("kernel-oracle/h-a-two-rootports-intel/sysroot.tar.gz") +
           " whitelist --candidate 8086:29c0 --patch ",
       "guarded-whitelist.patch"},
  };
  for (const auto& [args, name] : runs) {
    std::string out = dir + "/" + name;
    fs::remove(out);
    auto bad = violations(args + out, out);
    EXPECT_TRUE(bad.empty()) << args << "\n" << joined(bad);
    EXPECT_TRUE(fs::exists(out)) << args;
    fs::remove(out);
    EXPECT_FALSE(violations(args + out).empty()) << args << ": an undeclared output must be caught";
    fs::remove(out);
  }
}

TEST(ReadOnlyGuardSnapshot, TheGuardSeesAWrite) {
  // The check itself must be able to fail: a snapshot whose output was not declared is flagged.
  if (!have_strace()) GTEST_SKIP() << "strace is not installed";
  std::string out = ::testing::TempDir() + "/undeclared.tar.gz";
  fs::remove(out);
  EXPECT_FALSE(violations("--sysroot " + fixture() + " snapshot -o " + out).empty());
  fs::remove(out);
}

}  // namespace
}  // namespace p2paudit
