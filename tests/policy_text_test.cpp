// SPDX-License-Identifier: GPL-2.0-or-later
// What a person reads: `policy` text is the grid, each distinct reason once with the pairs it
// covers, machine-wide warnings once; --verbose is every pair's detail; colour only on request or
// on a terminal without NO_COLOR.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace p2paudit {
namespace {

std::string h200x2() { return test::data_path("machines/h200x2-firecracker-vm/sysroot.tar.gz"); }
std::string h200x4() { return test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz"); }
// The 2xH200 VM captured with `snapshot --probe`: NVML's and CUDA's answers are stored in it.
std::string h200x2_probed() {
  return test::data_path("machines/h200x2-firecracker-vm/live-2026-11-23/snapshot-probe.tar.gz");
}

test::CommandResult tool(const std::string& args) {
  return test::run_command("env -u NO_COLOR " + std::string(P2PAUDIT_TOOL) + " " + args + " 2>/dev/null");
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Columns a line takes: every UTF-8 code point one.
size_t columns(const std::string& line) {
  size_t n = 0;
  for (unsigned char c : line) n += (c & 0xc0) != 0x80;
  return n;
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
  // Each note's text once, however many pairs it covers; the grid points at the notes. The GPUs'
  // driver was not asked (this sysroot holds no runtime answers): uncertain, staged until it is.
  EXPECT_NE(r.output.find("HOST?[1]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[1] host_staged, uncertain"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("settled by: vendor.nvlink, vendor.peer_supported (run p2paudit on the machine"),
            std::string::npos) << r.output;
  // Unknown facts only where they could change the decision: rebar_at_max changes none here.
  EXPECT_EQ(r.output.find("rebar_at_max"), std::string::npos) << r.output;
}

TEST(PolicyText, NotesCountThePairsTheyCover) {
  auto r = tool("--sysroot " + h200x4() + " policy");
  ASSERT_EQ(r.status, 0);
  // Five devices: 20 ordered pairs, each cell naming one note; the notes' counts add up to 20.
  std::regex note(R"(\n\[([0-9]+)\] [a-z_]+(, uncertain)? \([^)]*\): ([0-9]+) pairs? )");
  int total = 0;
  std::map<std::string, int> cells;
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), note), end; it != end; ++it) {
    total += std::stoi((*it)[3]);
    cells[(*it)[1]] = std::stoi((*it)[3]);
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
  EXPECT_NE(verbose.output.find("unknown: "), std::string::npos);
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

// A pair's other problems: each later refusal that holds, up to a later peer rule that holds, is
// an "also" line with its fix in text, and a finding in JSON (policy --details, check).
TEST(PolicyText, OtherProblemsOfAPairAreToldWithTheirFixes) {
  std::string rules = ::testing::TempDir() + "/findings-" + std::to_string(::getpid()) + ".yaml";
  {
    std::ofstream f(rules);
    f << "version: 1\nrules:\n"
         "  - {id: first-problem, when: {platform.vm_guest: true}, action: host_staged, reason: the first problem, remedy: fix the first}\n"
         "  - {id: second-problem, when: {platform.vm_guest: true}, action: deny, reason: the second problem, remedy: fix the second}\n"
         "  - {id: not-here, when: {platform.vm_guest: false}, action: deny, reason: no problem here, remedy: nothing}\n"
         "  - {id: fine-after-all, when: {platform.vm_guest: true}, action: peer, reason: fine}\n"
         "  - {id: past-the-peer-rule, when: {platform.vm_guest: true}, action: deny, reason: never told, remedy: never}\n";
  }
  const std::string args = "--sysroot " + h200x2() + " policy --no-default-rules --rules " + rules;
  auto r = tool(args);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("    why: the first problem\n    fix: fix the first\n"
                          "    also [second-problem]: the second problem\n      fix: fix the second\n"),
            std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("not-here"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("past-the-peer-rule"), std::string::npos) << r.output;
  auto details = nlohmann::json::parse(tool(args + " --details --format json").output);
  const auto& pair = details["pairs"][1];
  ASSERT_EQ(pair["findings"].size(), 1u) << pair.dump();
  EXPECT_EQ(pair["findings"][0]["id"], "second-problem");
  EXPECT_EQ(pair["findings"][0]["remedy"], "fix the second");
  EXPECT_EQ(details["groups"][0]["findings"], nlohmann::json::array({"second-problem"}));
  auto check = nlohmann::json::parse(
      tool("--sysroot " + h200x2() + " check gpu0 gpu1 --format json --no-default-rules --rules " + rules).output);
  EXPECT_EQ(check["findings"][0]["id"], "second-problem") << check.dump();
  std::remove(rules.c_str());
}

// The audit with no command: the decision first, every line within 80 columns, one screen.
TEST(AuditScreen, TwoGpuVmFirstScreenIsTheDecision) {
  auto r = tool("--sysroot " + h200x2_probed());
  ASSERT_EQ(r.status, 0) << r.output;
  auto lines = lines_of(r.output);
  EXPECT_LE(lines.size(), 30u) << r.output;
  for (const auto& l : lines) EXPECT_LE(columns(l), 80u) << l;
  // The header: the kernel and its P2PDMA config, the IOMMU, the VM, the runtimes' stored answers.
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(^kernel: +6\.18\.44-fc-v657-gpu, CONFIG_PCI_P2PDMA n\n)"))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\nIOMMU: +\S)"))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\nVM: +yes)"))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\nruntimes: +answers stored in the snapshot: nvml ok, cuda ok)"))) << r.output;
  // The grid: the GPUs peer by NVLink; the NIC's pairs are NVIDIA's third-party paths (the kernel's
  // P2PDMA, built out here, does not govern them), staged: the guest's NIC is virtio-net, which no
  // GPUDirect path can use.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(\ngpu0 +X +PEER\[([0-9])\] +HOST\[([0-9])\]\n)"))) << r.output;
  const std::string peer = m[1], host = m[2];
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\\n\\[" + peer + "\\] PEER by nvlink \\(vendor-fabric\\): 2 pairs: gpu0 -> gpu1, gpu1 -> gpu0\\n")))
      << r.output;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("\\n\\[" + host + "\\] HOST by nvidia-third-party-no-importer \\(vendor-driver\\): 4 pairs: [^\\n]*\\n"
                                                        " +why: ([^\\n]*)\\n +fix: ([^\\n]*)\\n")))
      << r.output;
  EXPECT_NE(m[1].str().find("NVIDIA GPU cannot map GPU memory"), std::string::npos) << m[1];
  EXPECT_EQ(m[1].str().find("CONFIG_PCI_P2PDMA"), std::string::npos) << m[1];
  EXPECT_NE(m[2].str().find("RDMA-capable NIC"), std::string::npos) << m[2];
  EXPECT_NE(r.output.find("HOST[" + host + "]\n"), std::string::npos) << "the NIC's column";
  // Every note: one line of why, and a fix where it stages or refuses.
  std::regex note(R"(\n\[[0-9]+\] (PEER|HOST|DENY) by [^\n]*\n +why: [^\n]+\n( +fix: [^\n]+\n)?)");
  size_t notes = 0;
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), note), end; it != end; ++it, ++notes)
    if ((*it)[1] != "PEER") EXPECT_TRUE((*it)[2].matched) << (*it)[0];
  EXPECT_EQ(notes, 2u) << r.output;
  // No fabric question where no fabric can be.
  EXPECT_EQ(r.output.find("vendor.xgmi"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("vendor.nvlink"), std::string::npos) << r.output;
  // And where the rest is.
  for (const char* where : {"`p2paudit matrix`", "`p2paudit topology`", "--verbose"})
    EXPECT_NE(r.output.find(where), std::string::npos) << where;
  // The kernel-only matrix is no longer the first screen.
  EXPECT_EQ(r.output.find(" NO "), std::string::npos) << r.output;
  // --verbose: every pair's own decision.
  auto verbose = tool("--sysroot " + h200x2_probed() + " --verbose");
  for (const char* pair : {"gpu0 -> gpu1: peer", "gpu1 -> gpu0: peer", "nic0 -> gpu1: host_staged"})
    EXPECT_NE(verbose.output.find(pair), std::string::npos) << pair << "\n" << verbose.output;
}

// Without stored answers and with the runtimes not asked, the header says so.
TEST(AuditScreen, HeaderSaysTheRuntimesWereNotAsked) {
  auto r = tool("--sysroot " + h200x4());
  ASSERT_EQ(r.status, 0);
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\nruntimes: +the runtimes were not asked)"))) << r.output;
  for (const auto& l : lines_of(r.output)) EXPECT_LE(columns(l), 80u) << l;
}

// A machine past a screenful of devices: rows and columns are groups of devices, each cell the
// count of its pairs by decision; the counts add up to every ordered pair, and the text stays
// within 80 columns and a bounded number of lines. --verbose still gives every pair.
TEST(AuditScreen, LargeMachineIsGroupedAndCountsAddUp) {
  std::string dir = ::testing::TempDir() + "/audit-screen-synth-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ASSERT_EQ(test::run_command(test::shell_quote(P2PAUDIT_SYNTH_TOOL) + " --functions 300 -o " + dir).status, 0);
  auto devices = nlohmann::json::parse(tool("--sysroot " + dir + " policy --format json").output)["devices"].size();
  ASSERT_GT(devices, 16u) << "the machine must need grouping";
  auto r = tool("--sysroot " + dir);
  ASSERT_EQ(r.status, 0);
  auto lines = lines_of(r.output);
  EXPECT_LE(lines.size(), 70u) << r.output;
  for (const auto& l : lines) EXPECT_LE(columns(l), 80u) << l;
  // Grid rows: "G<n>" then one cell per group; the cells count the pairs.
  size_t counted = 0, rows = 0, groups = 0;
  const std::regex group_name("G[0-9]+"), cell_count("[PHD?]([0-9]+)");
  for (const auto& l : lines) {
    std::istringstream words(l);
    std::string word;
    if (!(words >> word) || !std::regex_match(word, group_name)) continue;
    size_t in_row = 0, cells = 0;
    bool only_cells = true;
    std::smatch m;
    while (words >> word) {
      if (std::regex_match(word, m, cell_count)) in_row += std::stoul(m[1]), ++cells;
      else if (word == "-") ++cells;
      else only_cells = false;
    }
    if (!only_cells || cells == 0) continue;
    ++rows;
    counted += in_row;
  }
  const std::regex legend(R"(^G[0-9]+ (switch|root port|host bridge) .*)");
  for (const auto& l : lines) groups += std::regex_match(l, legend);
  EXPECT_GT(rows, 0u) << r.output;
  EXPECT_EQ(rows, groups) << "each group in the legend once\n" << r.output;
  EXPECT_EQ(counted, devices * (devices - 1)) << r.output;
  EXPECT_NE(r.output.find(std::to_string(devices * (devices - 1)) + " ordered pairs"), std::string::npos) << r.output;
  // --verbose: every pair's own decision.
  auto verbose = tool("--sysroot " + dir + " --verbose");
  size_t pairs = 0;
  const std::regex pair_line(R"(^\S+ -> \S+: (peer|host_staged|deny)[ ,])");
  for (const auto& l : lines_of(verbose.output)) pairs += std::regex_search(l, pair_line);
  EXPECT_EQ(pairs, devices * (devices - 1));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace p2paudit
