// SPDX-License-Identifier: GPL-2.0-or-later
// What a person reads: `policy` text is the grid, each distinct reason once with the pairs it
// covers, machine-wide warnings once; --verbose is every pair's detail; colour only on request or
// on a terminal without NO_COLOR.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>

#include "test_support.h"

namespace p2paudit {
namespace {

std::string h200x2() { return test::data_path("machines/h200x2-firecracker-vm/sysroot.tar.gz"); }
std::string h200x4() { return test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz"); }

test::CommandResult tool(const std::string& args) {
  return test::run_command("env -u NO_COLOR " + std::string(P2PAUDIT_TOOL) + " " + args + " 2>/dev/null");
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Lines on an 80-column terminal.
size_t screen_lines(const std::string& text) {
  size_t n = 0;
  for (const auto& l : lines_of(text)) n += l.empty() ? 1 : (l.size() + 79) / 80;
  return n;
}

TEST(PolicyText, TwoGpuVmFitsOneScreenAndSaysEachThingOnce) {
  auto r = tool("--sysroot " + h200x2() + " policy");
  ASSERT_EQ(r.status, 0);
  EXPECT_LE(lines_of(r.output).size(), 50u) << r.output;
  EXPECT_LE(screen_lines(r.output), 50u) << r.output;
  // Every line but the grid's rows and blank lines is said once.
  std::map<std::string, int> seen;
  for (const auto& l : lines_of(r.output))
    if (!l.empty() && !std::regex_search(l, std::regex("^(gpu|nic)[0-9]+ |^ +gpu0 "))) ++seen[l];
  for (const auto& [line, n] : seen) EXPECT_EQ(n, 1) << "said " << n << " times: " << line;
  // The VM warning, which fires on every pair, once and marked so.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(\[vm-guest\] [^\n]*\(every pair\))"))) << r.output;
  EXPECT_EQ(r.output.find("[vm-guest]", size_t(m.position()) + 1), std::string::npos);
  // Each note's text once, however many pairs it covers; the grid points at the notes.
  EXPECT_NE(r.output.find("HOST[1]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[1] host_staged"), std::string::npos) << r.output;
  // Unknown facts only where they could change the decision: rebar_at_max changes none here.
  EXPECT_EQ(r.output.find("rebar_at_max"), std::string::npos) << r.output;
}

TEST(PolicyText, NotesCountThePairsTheyCover) {
  auto r = tool("--sysroot " + h200x4() + " policy");
  ASSERT_EQ(r.status, 0);
  // Five devices: 20 ordered pairs, each cell naming one note; the notes' counts add up to 20.
  std::regex note(R"(\n\[([0-9]+)\] [a-z_]+ \([^)]*\): ([0-9]+) pairs? )");
  int total = 0;
  std::map<std::string, int> cells;
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), note), end; it != end; ++it) {
    total += std::stoi((*it)[2]);
    cells[(*it)[1]] = std::stoi((*it)[2]);
  }
  EXPECT_EQ(total, 20) << r.output;
  for (const auto& [n, pairs] : cells) {
    size_t count = 0;
    for (size_t at = r.output.find("[" + n + "]"); at != std::string::npos; at = r.output.find("[" + n + "]", at + 1))
      ++count;
    EXPECT_EQ(count, size_t(pairs) + 1) << "note " << n << " cells + its heading";
  }
}

TEST(PolicyText, VerboseGivesEveryPairsDetail) {
  auto concise = tool("--sysroot " + h200x2() + " policy");
  auto verbose = tool("--sysroot " + h200x2() + " --verbose policy");
  ASSERT_EQ(verbose.status, 0);
  for (const char* pair : {"gpu0 -> gpu1: host_staged", "gpu1 -> gpu0: host_staged", "nic0 -> gpu1: host_staged"})
    EXPECT_NE(verbose.output.find(pair), std::string::npos) << pair << "\n" << verbose.output;
  // The VM warning under each of the six pairs, and every unknown fact.
  size_t warnings = 0;
  for (size_t at = verbose.output.find("warning [vm-guest]"); at != std::string::npos;
       at = verbose.output.find("warning [vm-guest]", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 6u);
  EXPECT_NE(verbose.output.find("rebar_at_max"), std::string::npos);
  EXPECT_EQ(tool("--sysroot " + h200x2() + " policy --details").output, verbose.output);
  EXPECT_GT(verbose.output.size(), concise.output.size());
}

TEST(PolicyText, ColourOnlyWhenAskedOrOnATerminalWithoutNoColor) {
  const std::string args = "--sysroot " + h200x2() + " policy";
  EXPECT_EQ(tool(args).output.find('\033'), std::string::npos);  // a pipe
  EXPECT_NE(tool("--color always " + args).output.find("\033["), std::string::npos);
  EXPECT_EQ(tool("--color never " + args).output.find('\033'), std::string::npos);
  // On a terminal (script(1) gives the tool a pty): colour, unless NO_COLOR is set or TERM is dumb.
  auto on_tty = [&](const std::string& env) {
    return test::run_command("env -u NO_COLOR TERM=xterm " + env + " script -qec " +
                             test::shell_quote(std::string(P2PAUDIT_TOOL) + " " + args) + " /dev/null")
        .output;
  };
  EXPECT_NE(on_tty("").find("\033["), std::string::npos);
  EXPECT_EQ(on_tty("NO_COLOR=1").find("\033["), std::string::npos);
  EXPECT_EQ(on_tty("TERM=dumb").find("\033["), std::string::npos);
  EXPECT_NE(tool("--color always matrix --sysroot " + h200x2()).output.find("\033[31mNO"), std::string::npos);
}

}  // namespace
}  // namespace p2paudit
