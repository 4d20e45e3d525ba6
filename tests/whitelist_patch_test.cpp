// SPDX-License-Identifier: GPL-2.0-or-later
// Whitelist patches in upstream shape (docs/whitelist.md, "The patch"): `whitelist --patch` on a
// real kernel tree applies with `git am` and adds exactly the table line; the subject and body
// carry the platform, the booted kernel, `lspci -tv`, ACS, the kernel's log and URL-only Link:
// trailers; Signed-off-by comes from the git identity (environment or config file), else a
// placeholder.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <optional>
#include <random>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "p2paudit/dump_topology.h"
#include "p2paudit/fleet/git_text.h"
#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/input_file.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "synthetic_tree.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit::fleet {
namespace {

namespace fs = std::filesystem;

const std::string kTree = test::data_path("kernel-tree/pci-p2pdma-e7b44579a6b4");
const std::string kQ35 = test::data_path("kernel-oracle/h-a-two-rootports-intel/sysroot.tar.gz");

bool have_git() { return test::run_command("git --version >/dev/null 2>&1").status == 0; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// A fresh directory of this test's own, and an environment without the caller's git identity.
struct Sandbox {
  std::string dir;
  Sandbox() {
    dir = ::testing::TempDir() + "/wlpatch-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir);
    fs::create_directories(dir + "/home");
  }
  ~Sandbox() { fs::remove_all(dir); }
  // The tool under an empty HOME and no GIT_* identity, plus `env` (NAME=value ...).
  std::string tool(const std::string& env = "") const {
    return "env -u GIT_AUTHOR_NAME -u GIT_AUTHOR_EMAIL -u GIT_COMMITTER_NAME -u GIT_COMMITTER_EMAIL -u EMAIL HOME=" +
           test::shell_quote(dir + "/home") + " XDG_CONFIG_HOME=" + test::shell_quote(dir + "/home/.config") + " " + env +
           " " + std::string(P2PAUDIT_TOOL);
  }
};

// The kernel tree as a git repository of its own, committed.
std::string kernel_repo(const Sandbox& box) {
  std::string repo = box.dir + "/linux";
  fs::create_directories(repo);
  fs::copy(kTree, repo, fs::copy_options::recursive);
  auto r = test::run_command("cd " + test::shell_quote(repo) +
                             " && git init -q && git -c user.name=t -c user.email=t@example.org add -A && "
                             "git -c user.name=t -c user.email=t@example.org commit -qm base 2>&1");
  EXPECT_EQ(r.status, 0) << r.output;
  return repo;
}

// The booted release the capture recorded, as the topology reader reads it.
std::string booted_release() {
  Sysroot root = Sysroot::open(kQ35);
  return read_topology(root).platform.kernel_release;
}

TEST(WhitelistPatch, GitAmAppliesItAndTheDiffAddsExactlyTheTableLine) {
  if (!have_git()) GTEST_SKIP() << "git is not installed (scripts/install-deps --test installs it)";
  Sandbox box;
  std::string repo = kernel_repo(box);
  std::string before = slurp(repo + "/drivers/pci/p2pdma.c");
  std::string patch = box.dir + "/q35.patch";
  auto r = test::run_command(box.tool("GIT_AUTHOR_NAME='Jane Developer' GIT_AUTHOR_EMAIL=jane@example.org") + " --sysroot " +
                             test::shell_quote(kQ35) + " whitelist --candidate 8086:29c0 --kernel-source " +
                             test::shell_quote(repo) + " --patch " + test::shell_quote(patch) + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  r = test::run_command("cd " + test::shell_quote(repo) + " && git -c user.name=t -c user.email=t@example.org am -q " +
                        test::shell_quote(patch) + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output << slurp(patch);
  r = test::run_command("cd " + test::shell_quote(repo) + " && git diff --numstat HEAD~1 HEAD");
  EXPECT_EQ(r.output, "2\t0\tdrivers/pci/p2pdma.c\n");
  // The added lines are exactly the candidate's table line in the table's style, before the sentinel.
  std::vector<std::string> old_lines = lines_of(before), new_lines = lines_of(slurp(repo + "/drivers/pci/p2pdma.c"));
  ASSERT_EQ(new_lines.size(), old_lines.size() + 2);
  size_t at = 0;
  while (at < old_lines.size() && old_lines[at] == new_lines[at]) ++at;
  EXPECT_TRUE(std::equal(old_lines.begin() + static_cast<long>(at), old_lines.end(), new_lines.begin() + static_cast<long>(at) + 2));
  EXPECT_TRUE(std::regex_match(new_lines[at], std::regex(R"(\t/\* Intel [^*]+ \*/)"))) << new_lines[at];
  // q35 has one host bridge: REQ_SAME_HOST_BRIDGE; Intel's lines of this table put a tab after the vendor.
  EXPECT_EQ(new_lines[at + 1], "\t{PCI_VENDOR_ID_INTEL,\t0x29c0, REQ_SAME_HOST_BRIDGE},");
  EXPECT_EQ(new_lines[at + 2], "\t{}");
  // Author and Signed-off-by from the environment's identity.
  r = test::run_command("cd " + test::shell_quote(repo) + " && git log -1 --format='%an <%ae>%n%B'");
  auto log = lines_of(r.output);
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log[0], "Jane Developer <jane@example.org>");
  EXPECT_EQ(log[1], "PCI/P2PDMA: Add Intel 82G33/G31/P35/P31 Express host bridge to allowlist");
  EXPECT_NE(r.output.find("\nSigned-off-by: Jane Developer <jane@example.org>\n"), std::string::npos) << r.output;
}

TEST(WhitelistPatch, SubjectAndBodyFollowTheUpstreamShape) {
  Sandbox box;
  std::string patch = box.dir + "/message.patch";
  // --kernel names another release: the body still says the kernel the capture booted.
  auto r = test::run_command(box.tool() + " --sysroot " + test::shell_quote(kQ35) +
                             " --kernel 7.0.0 whitelist --candidate 8086:29c0 --patch " + test::shell_quote(patch) + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("the message alone"), std::string::npos) << r.output;
  std::string mbox = slurp(patch);
  auto lines = lines_of(mbox);
  ASSERT_GT(lines.size(), 10u);
  EXPECT_EQ(lines[0].rfind("From ", 0), 0u);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(mbox, m, std::regex("\nSubject: \\[PATCH\\] PCI/P2PDMA: Add (.+) host bridge to allowlist\n")))
      << mbox;
  EXPECT_EQ(m[1].str().find("29c0"), std::string::npos) << "the platform, not the raw ID";
  EXPECT_EQ(m[1].str().rfind("Intel ", 0), 0u) << m[1];
  std::string release = booted_release();
  ASSERT_FALSE(release.empty());
  EXPECT_NE(mbox.find("Tested on: Linux " + release + ", "), std::string::npos) << mbox;
  EXPECT_EQ(mbox.find("Linux 7.0.0"), std::string::npos);
  EXPECT_NE(mbox.find("as `lspci -tv` draws them:\n\n  -[0000:00]-+-00.0  "), std::string::npos) << mbox;
  EXPECT_TRUE(std::regex_search(mbox, std::regex(R"(\n  0000:00:0[0-9a-f]\.0 Root Port: ACS RR[-+] CR[-+] EC[-+]\n)"))) << mbox;
  EXPECT_NE(mbox.find("do not share an upstream bridge or whitelisted host bridge"), std::string::npos) << mbox;
  EXPECT_NE(mbox.find("map as THRU_HOST_BRIDGE"), std::string::npos);
  EXPECT_NE(mbox.find("virtual machine"), std::string::npos) << "q35 is QEMU's emulated host bridge";
  EXPECT_NE(mbox.find("\nSigned-off-by: FIXME "), std::string::npos) << "no identity in the sandbox";
  EXPECT_NE(mbox.find("FIXME: no git identity"), std::string::npos);
  // Only the tool's own words start a trailer-like line in the message.
  size_t end = mbox.find("\n---\n");
  ASSERT_NE(end, std::string::npos);
  for (const auto& l : lines_of(mbox.substr(0, end))) {
    if (l.rfind("Link:", 0) == 0) {
      EXPECT_TRUE(std::regex_match(l, std::regex(R"(Link: https://\S+)"))) << l;
    }
  }
}

// The excerpt is drawn as pciutils draws `lspci -tv`: the whole tree of the ASUS P6T6 dump against
// the `lspci -tv` pasted from that machine (pciutils' test data; names compared without, as pci.ids
// versions differ).
TEST(WhitelistPatch, TheTreeIsDrawnAsLspciTvDrawsIt) {
  Topology t = read_dump_topology(test::data_path("lspci-dumps/tree-asus-p6t6"), {});
  std::set<size_t> all;
  for (size_t i = 0; i < t.functions.size(); ++i) all.insert(i);
  const std::regex name(R"(([0-9a-f]{2}\.[0-9a-f])  .*$)");
  auto shape = [&](const std::string& text) {
    std::string out;
    for (const auto& l : lines_of(text)) out += std::regex_replace(l, name, "$1") + "\n";
    return out;
  };
  std::string expected = shape(slurp(test::data_path("lspci-dumps/pasted/asus-tv")));
  ASSERT_GT(expected.size(), 100u);
  EXPECT_EQ(shape(lspci_tree(t, all)), expected);
  // Leaves carry vendor and device name, two spaces after the address.
  EXPECT_NE(lspci_tree(t, all).find("+-00.0  Intel Corporation "), std::string::npos);
}

// Link: trailers carry the URL of each public report and nothing else (8086:4c43, compute-runtime#935).
TEST(WhitelistPatch, LinkTrailersAreUrlsOnly) {
  test::Tree tree;
  tree.host_dev(0x8086, 0x4c43);
  tree.t.functions.back().device_name = "Rocket Lake-S 8c Host Bridge/DRAM Registers";
  tree.t.functions.back().vendor_name = "Intel Corporation";
  tree.t.functions.back().class_code = 0x060000;
  tree.rp("00:01.0");
  tree.rp("00:06.0");
  tree.describe(tree.add("01:00.0", "00:01.0", 0x8086, 0xe223, PcieType::kEndpoint), 0x030000, "xe");
  tree.describe(tree.add("02:00.0", "00:06.0", 0x8086, 0xe223, PcieType::kEndpoint), 0x030000, "xe");
  Platform platform = tree.t.platform;
  platform.kernel_release = "7.0.0";
  KernelRules rules = load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", platform, {});
  auto candidates = whitelist_candidates(tree.t, rules, nullptr);
  ASSERT_EQ(candidates.size(), 1u);
  ASSERT_FALSE(candidates[0].reports.empty());
  GitIdentity id;
  id.name = "A", id.email = "a@example.org";
  std::string message = commit_message(PatchInput{tree.t, rules, candidate_context(tree.t, rules), nullptr, id}, candidates[0]);
  EXPECT_EQ(message.rfind("PCI/P2PDMA: Add Intel Rocket Lake-S 8c host bridge to allowlist\n\n", 0), 0u) << message;
  size_t links = 0;
  for (const auto& l : lines_of(message))
    if (l.rfind("Link:", 0) == 0) {
      ++links;
      EXPECT_TRUE(std::regex_match(l, std::regex(R"(Link: https://\S+)"))) << l;
    }
  EXPECT_EQ(links, candidates[0].reports.size());
  EXPECT_NE(message.find("Link: https://github.com/intel/compute-runtime/issues/935\n"), std::string::npos) << message;
  // A measured copy in the evidence is listed with how it was run and what carried it: CUDA's peer
  // path does not go through the kernel's P2PDMA, so it counts under a kernel that refuses the pair.
  policy::VendorFactsDocument evidence;
  auto& f = evidence.pairs[{*Bdf::parse("0000:01:00.0"), *Bdf::parse("0000:02:00.0")}];
  f.set("vendor.copy_result", std::string("verified"));
  f.set("vendor.copy_runtime", std::string("cuda"));
  f.set("vendor.copy_gbps", 21.5);
  auto with_copy = whitelist_candidates(tree.t, rules, &evidence);
  ASSERT_EQ(with_copy.size(), 1u);
  std::string copied = commit_message(PatchInput{tree.t, rules, candidate_context(tree.t, rules), &evidence, id}, with_copy[0]);
  EXPECT_NE(copied.find("  0000:01:00.0 -> 0000:02:00.0: verified, 21.5 GB/s\n    runtime cuda, size and repeats not "
                        "recorded in the evidence; the runtime's own peer path carried it, not P2PDMA"),
            std::string::npos) << copied;
  EXPECT_EQ(message.find("runtime cuda"), std::string::npos);
  const std::string tail = "\nLink: https://github.com/intel/compute-runtime/issues/935\nSigned-off-by: A <a@example.org>\n";
  ASSERT_GT(message.size(), tail.size());
  EXPECT_EQ(message.substr(message.size() - tail.size()), tail) << "one trailer block at the end";
}

// The identity without running git: ~/.gitconfig's [user], the XDG file, the environment over both.
class GitIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"HOME", "XDG_CONFIG_HOME", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME",
                          "GIT_COMMITTER_EMAIL", "EMAIL"})
      if (const char* old = std::getenv(v)) saved_.emplace_back(v, old);
    for (const char* v : {"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"}) unsetenv(v);
    home_ = ::testing::TempDir() + "/wlpatch-home-" + std::to_string(getpid());
    fs::remove_all(home_);
    fs::create_directories(home_);
    setenv("HOME", home_.c_str(), 1);
    setenv("XDG_CONFIG_HOME", (home_ + "/xdg").c_str(), 1);
  }
  void TearDown() override {
    for (const char* v : {"HOME", "XDG_CONFIG_HOME", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME",
                          "GIT_COMMITTER_EMAIL", "EMAIL"})
      unsetenv(v);
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
    fs::remove_all(home_);
  }
  void write(const std::string& relative, const std::string& text) {
    fs::create_directories(fs::path(home_ + "/" + relative).parent_path());
    std::ofstream(home_ + "/" + relative) << text;
  }
  std::string home_;
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(GitIdentityTest, PlaceholderWithoutAnyIdentity) {
  GitIdentity id = git_identity();
  EXPECT_FALSE(id.known());
  EXPECT_EQ(id.source, "");
  EXPECT_NE(id.signed_off_by().find("FIXME"), std::string::npos);
}

TEST_F(GitIdentityTest, FromTheHomeGitconfig) {
  write(".gitconfig",
        "# a comment\n[core]\n\tname = not this\n[user \"work\"]\n\tname = Not This Either\n"
        "[User]\n\tName = \"Ada Lovelace\"  ; trailing comment\n\temail = ada@example.org\n");
  GitIdentity id = git_identity();
  ASSERT_TRUE(id.known());
  EXPECT_EQ(id.signed_off_by(), "Signed-off-by: Ada Lovelace <ada@example.org>");
  EXPECT_EQ(id.source, home_ + "/.gitconfig");
}

TEST_F(GitIdentityTest, XdgFileAndTheHomeFileOverIt) {
  write("xdg/git/config", "[user]\n\tname = Xdg Person\n\temail = xdg@example.org\n");
  EXPECT_EQ(git_identity().signed_off_by(), "Signed-off-by: Xdg Person <xdg@example.org>");
  write(".gitconfig", "[user]\n\temail = home@example.org\n");
  EXPECT_EQ(git_identity().signed_off_by(), "Signed-off-by: Xdg Person <home@example.org>");
}

TEST_F(GitIdentityTest, EnvironmentOverTheFiles) {
  write(".gitconfig", "[user]\n\tname = File Person\n\temail = file@example.org\n");
  setenv("GIT_AUTHOR_NAME", "Env Person", 1);
  setenv("GIT_AUTHOR_EMAIL", "env@example.org", 1);
  GitIdentity id = git_identity();
  EXPECT_EQ(id.signed_off_by(), "Signed-off-by: Env Person <env@example.org>");
  EXPECT_EQ(id.source, "GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL");
}

TEST_F(GitIdentityTest, AHostileValueStaysOneLine) {
  setenv("GIT_AUTHOR_NAME", "Eve\nSigned-off-by: Mallory <m@example.org>", 1);
  setenv("GIT_AUTHOR_EMAIL", "eve@example.org>", 1);
  std::string line = git_identity().signed_off_by();
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_EQ(line.rfind("Signed-off-by: Eve", 0), 0u) << line;
  EXPECT_EQ(line.substr(line.size() - 17), "<eve@example.org>") << line;
}

TEST_F(GitIdentityTest, ADirectoryOrAHugeFileIsNoIdentity) {
  fs::create_directories(home_ + "/.gitconfig");
  EXPECT_FALSE(git_identity().known());
  fs::remove_all(home_ + "/.gitconfig");
  write(".gitconfig", "[user]\n\tname = Big\n\temail = big@example.org\n" + std::string(2u << 20, '#'));
  EXPECT_FALSE(git_identity().known());
}

// A tree whose table already has the entry, or that has no table, gives no patch.
TEST(WhitelistPatch, RefusesATreeThatHasTheEntryOrNoTable) {
  Sandbox box;
  std::string repo = box.dir + "/linux";
  fs::create_directories(repo);
  fs::copy(kTree, repo, fs::copy_options::recursive);
  std::string file = repo + "/drivers/pci/p2pdma.c";
  std::string text = slurp(file);
  size_t sentinel = text.find("\t{}\n};");
  ASSERT_NE(sentinel, std::string::npos);
  fs::permissions(file, fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(file) << text.substr(0, sentinel) + "\t{PCI_VENDOR_ID_INTEL,\t0x29c0, 0},\n" + text.substr(sentinel);
  std::string patch = box.dir + "/x.patch";
  auto r = test::run_command(box.tool() + " --sysroot " + test::shell_quote(kQ35) + " whitelist --candidate 8086:29c0 --kernel-source " +
                             test::shell_quote(repo) + " --patch " + test::shell_quote(patch) + " 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("already in the table"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(patch));
  std::ofstream(file) << "int main(void) { return 0; }\n";
  r = test::run_command(box.tool() + " --sysroot " + test::shell_quote(kQ35) + " whitelist --candidate 8086:29c0 --kernel-source " +
                        test::shell_quote(repo) + " --patch " + test::shell_quote(patch) + " 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("no pci_p2pdma_whitelist[] table"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(patch));
}

// Without --candidate the only ready candidate is taken; q35 has none ready.
TEST(WhitelistPatch, WithoutACandidateOnlyAReadyOneIsTaken) {
  Sandbox box;
  std::string patch = box.dir + "/y.patch";
  auto r = test::run_command(box.tool() + " --sysroot " + test::shell_quote(kQ35) + " whitelist --patch " +
                             test::shell_quote(patch) + " 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("no candidate is ready to submit"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("8086:29c0 (proposed upstream)"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(patch));
}


// A do-not-submit candidate (8086:4c43: a public report of wrong data when forced onto the table,
// intel/compute-runtime#935) gets no patch unless --force: the refusal names the status and its
// reason, exits 2 (a refused request, as for a fixed-in one) and writes nothing.
TEST(WhitelistPatch, DoNotSubmitNeedsForce) {
  Sandbox box;
  test::SysrootDir s;
  s.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n");
  s.write("proc/sys/kernel/osrelease", "7.0.0\n");
  s.write("boot/config-7.0.0", "CONFIG_PCI_P2PDMA=y\n");
  s.function("pci0000:00/0000:00:00.0", test::ConfigBytes(0x8086, 0x4c43, 0x060000, 0).bytes(256));
  for (int port : {1, 6}) {
    std::string rp = fmt::format("pci0000:00/0000:00:{:02x}.0", port);
    s.function(rp, test::ConfigBytes(0x8086, 0x4c01, 0x060400, 4, true).buses(0, port, port).bytes());
    s.function(fmt::format("{}/0000:{:02x}:00.0", rp, port), test::ConfigBytes(0x8086, 0xe223, 0x030000, 0).bytes());
  }
  std::string patch = box.dir + "/rkl.patch";
  std::string cmd = box.tool() + " --sysroot " + test::shell_quote(s.str()) + " whitelist --no-probe --patch " +
                    test::shell_quote(patch) + " --candidate 8086:4c43";
  auto refused = test::run_command(cmd + " 2>&1");
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("8086:4c43 is do not submit (rejected: public report of wrong data "
                                "(https://github.com/intel/compute-runtime/issues/935)"),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("--force"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(patch));

  auto forced = test::run_command(cmd + " --force 2>&1");
  EXPECT_EQ(forced.status, 0) << forced.output;
  EXPECT_NE(forced.output.find("status do not submit: do not send it"), std::string::npos) << forced.output;
  ASSERT_TRUE(fs::exists(patch));
  EXPECT_NE(slurp(patch).find("0x4c43"), std::string::npos);
}

// ---- Patch text is git's text (docs/security.md): whatever a snapshot or an evidence file holds,
// `git am` records the whole message the tool wrote, evidence and Signed-off-by included.

// What git am, git mailsplit and git mailinfo read as structure, as input could hold it.
const std::vector<std::string> kGitStructure = {
    "---",
    "--- cut here",
    "---\t",  // a tab: escape_line shows it as \x09, and the line still starts with ---
    "--- a/drivers/pci/p2pdma.c",
    "diff --git a/drivers/pci/p2pdma.c b/drivers/pci/p2pdma.c",
    "diff -u a b",
    "Index: drivers/pci/p2pdma.c",
    "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001",
    "From mallory@evil Sat Jan 1 00:00:00 2000",
    ">From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001",
    ">>From mallory@evil Sat Jan 1 00:00:00 2000",
    "From: Mallory <m@evil>",
    "subject: [PATCH] something else",
    "Date: Sat, 1 Jan 2000 00:00:00 +0000",
    "[PATCH] something else",
    "Signed-off-by: Mallory <m@evil>",
    "Link : https://evil.example/",
    "-- >8 --",
    "--8<-- cut here --8<--",
    "%<%<%<%<%<%<%<%<",
    "=?UTF-8?q?Evil=0ASigned-off-by:=20Mallory?=",
};

// The same check as git_line_form(), written out again for the forms whose miss costs the message.
std::string direct_structure(const std::string& line) {
  std::string unquoted = line.substr(std::min(line.find_first_not_of('>'), line.size()));
  for (const char* start : {"---", "diff -", "Index: "})
    if (line.rfind(start, 0) == 0) return "patch break";
  if (unquoted.rfind("From ", 0) == 0) return "mbox From line";
  return "";
}

// Every line of the message git would read as text: the body's lines (all but the last paragraph,
// the trailer block) are text, and the trailer block only trailers.
void expect_git_text(const std::string& message, const std::string& label) {
  auto lines = lines_of(message);
  ASSERT_GT(lines.size(), 3u) << label;
  size_t trailers = lines.size();
  while (trailers > 0 && !lines[trailers - 1].empty()) --trailers;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(direct_structure(lines[i]), "") << label << ", line " << i + 1 << ": " << lines[i];
    GitLineForm form = git_line_form(lines[i]);
    if (i < trailers || i == 0)
      EXPECT_EQ(form, GitLineForm::kText) << label << ", line " << i + 1 << " is " << to_string(form) << ": " << lines[i];
    else
      EXPECT_EQ(form, GitLineForm::kTrailer) << label << ", line " << i + 1 << ": " << lines[i];
  }
  EXPECT_EQ(lines.back().rfind("Signed-off-by: ", 0), 0u) << label;
}

std::string without_space(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ' && c != '\n') out += c;
  return out;
}

// A machine with an unlisted Intel host bridge, two Root Ports and a GPU under each, and the
// candidate with a verified copy: every text field of it is set by the caller.
struct PatchCase {
  test::Tree tree;
  KernelRules rules;
  WhitelistCandidate candidate;
  GitIdentity id;

  PatchCase() {
    tree.t.functions[tree.host_dev(0x8086, 0x1234)].class_code = 0x060000;
    for (const char* port : {"00:01.0", "00:06.0"}) {
      Function& rp = tree.t.functions[tree.rp(port)];
      rp.secondary_bus = rp.subordinate_bus = port[4] == '1' ? 1 : 2;
    }
    tree.describe(tree.add("01:00.0", "00:01.0", 0x10de, 0x2330, PcieType::kEndpoint), 0x030200, "nvidia");
    tree.describe(tree.add("02:00.0", "00:06.0", 0x10de, 0x2330, PcieType::kEndpoint), 0x030200, "nvidia");
    Platform platform = tree.t.platform;
    platform.kernel_release = "7.0.0";
    rules = load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", platform, {});
    auto candidates = whitelist_candidates(tree.t, rules, nullptr);
    EXPECT_EQ(candidates.size(), 1u);
    if (!candidates.empty()) candidate = candidates[0];
    EXPECT_FALSE(candidate.pairs.empty());
    tree.t.platform.kernel_release = "6.1.0";
    tree.t.platform.cpu_model_name = "Intel Xeon Gold 6430";
    for (auto& p : candidate.pairs) p.copy_result = "verified", p.copy_gbps = 21.5, p.copy_runtime = "cuda";
    id.name = "Jane Developer", id.email = "jane@example.org";
  }
  PatchInput input() { return PatchInput{tree.t, rules, candidate_context(tree.t, rules), nullptr, id}; }
};

// A kernel repository to apply patches to, reset to its base commit after each.
struct AmRepo {
  const Sandbox& box;
  std::string repo;
  explicit AmRepo(const Sandbox& b) : box(b), repo(kernel_repo(b)) {}
  // The message git recorded after `git am` of the mbox (with --scissors, and as format), or why not.
  std::string apply(const std::string& mbox, const std::string& format, bool& applied) {
    std::string file = box.dir + "/case.patch";
    std::ofstream(file, std::ios::binary | std::ios::trunc) << mbox;
    std::string cd = "cd " + test::shell_quote(repo) + " && ";
    auto r = test::run_command(cd + "git -c user.name=t -c user.email=t@example.org am -q --scissors --patch-format=" + format +
                               " " + test::shell_quote(file) + " 2>&1");
    applied = r.status == 0;
    if (!applied) {
      test::run_command(cd + "git am --abort 2>&1");
      return r.output;
    }
    auto log = test::run_command(cd + "git log -1 --format=%B");
    test::run_command(cd + "git reset -q --hard HEAD~1 2>&1");
    std::string message = log.output;
    while (!message.empty() && message.back() == '\n') message.pop_back();
    return message + "\n";
  }
};

// Each structure form in each text field that reaches the message, at a wrap point (after a word
// longer than the line, so the greedy wrap must break before it), after random words (wherever
// the wrap puts it), in the first paragraph through the host bridge's name, and in the indented
// evidence and tree lines; then git am of the mbox records exactly the message the tool meant.
TEST(WhitelistPatch, GitAmRecordsTheWholeMessageWhateverTheSnapshotHolds) {
  const bool git = have_git();
  Sandbox box;
  std::optional<AmRepo> repo;
  if (git) repo.emplace(box);
  const std::string wide(80, 'w');
  std::mt19937 random(30);
  size_t cases = 0, applied_cases = 0;
  for (const auto& form : kGitStructure) {
    std::vector<std::pair<std::string, std::function<void(PatchCase&)>>> placements = {
        {"model name at a wrap point", [&](PatchCase& p) { p.tree.t.platform.cpu_model_name = "Xeon " + wide + " " + form + " tail"; }},
        {"host bridge name at a wrap point", [&](PatchCase& p) { p.candidate.name = "Host " + wide + " " + form + " Host Bridge"; }},
        // The subject: the host bridge's name is the platform it names (a fuzzed case: six scissors
        // marks made the subject itself a scissors line).
        {"host bridge name six times, the subject", [&](PatchCase& p) {
           p.candidate.name = form;
           for (int i = 0; i < 5; ++i) p.candidate.name += " " + form;
         }},
        {"kernel release at a wrap point",
         [&](PatchCase& p) { p.tree.t.platform.kernel_release = "6.1.0-" + wide + " " + form; }},
        {"evidence and tree lines", [&](PatchCase& p) {
           for (auto& pair : p.candidate.pairs) pair.copy_result = form, pair.copy_runtime = form + " " + form;
           p.candidate.copy_run = form;
           p.tree.t.functions.back().device_name = form;
           p.tree.t.functions.back().vendor_name = form;
         }},
    };
    for (int k = 0; k < 2; ++k) {
      std::string words;
      for (size_t n = random() % 12 + 1; n > 0; --n) words += std::string(random() % 9 + 1, static_cast<char>('a' + random() % 26)) + " ";
      placements.push_back({"model name after random words", [words, &form](PatchCase& p) {
                              p.tree.t.platform.cpu_model_name = words + form + " " + words;
                            }});
    }
    for (auto& [where, set] : placements) {
      PatchCase p;
      set(p);
      std::string label = "'" + form + "' in the " + where;
      PatchInput in = p.input();
      std::string meant = commit_message(in, p.candidate);
      ++cases;
      expect_git_text(meant, label);
      EXPECT_NE(without_space(meant).find(without_space(escape_line(form))), std::string::npos) << label << ": the words are kept\n" << meant;
      for (const char* evidence : {"\nTested on: Linux", "\nPeer copies (random data, compared in full):\n", "\nSigned-off-by: Jane"})
        EXPECT_NE(meant.find(evidence), std::string::npos) << label << "\n" << meant;
      // A form read at a line's start stays on the wide word's line, where git reads it as text.
      if (where.find("at a wrap point") != std::string::npos && !may_start_git_line(form)) {
        EXPECT_NE(meant.find(wide + " "), std::string::npos) << label << "\n" << meant;
      }
      if (!git) continue;
      KernelPatch patch = kernel_patch(in, p.candidate, repo->repo);
      ASSERT_TRUE(patch.applies);
      // mboxrd unquotes ">From " lines (git mailsplit --mboxrd): tried where a form holds "From ".
      for (std::string format : {"mbox", "mboxrd"}) {
        if (format == "mboxrd" && form.find("From ") == std::string::npos) continue;
        bool applied = false;
        std::string recorded = repo->apply(patch.mbox, format, applied);
        EXPECT_TRUE(applied) << label << " (" << format << "): git am refused it:\n" << recorded << "\n" << patch.mbox;
        if (!applied) continue;
        ++applied_cases;
        EXPECT_EQ(recorded, meant) << label << " (" << format << ")\n" << patch.mbox;
      }
    }
  }
  EXPECT_EQ(cases, kGitStructure.size() * 7);
  if (!git) GTEST_SKIP() << "git is not installed (scripts/install-deps --test installs it): the messages were checked, git am was not run";
  EXPECT_GT(applied_cases, cases);
}

// The trailers: a public report's URL and the sender's name are input too; neither makes a
// scissors line, and an encoded word in the name stays text in the From: header.
TEST(WhitelistPatch, TrailersFromInputAreNoScissorsLine) {
  PatchCase p;
  std::string marks;
  for (int i = 0; i < 20; ++i) marks += ">8";
  p.candidate.reports = {"https://evil.example/" + marks};
  p.id.name = "Jane " + marks + " =?UTF-8?q?M=0Ab?=";
  PatchInput in = p.input();
  std::string meant = commit_message(in, p.candidate);
  expect_git_text(meant, "marks in the trailers");
  EXPECT_NE(meant.find("\nLink: https://evil.example/> 8> 8"), std::string::npos) << meant;
  KernelPatch patch = kernel_patch(in, p.candidate, "");
  EXPECT_NE(patch.mbox.find("\nFrom: Jane "), std::string::npos);
  std::smatch from;
  ASSERT_TRUE(std::regex_search(patch.mbox, from, std::regex("\nFrom: ([^\n]*)\n"))) << patch.mbox;
  EXPECT_EQ(from[1].str().find("=?"), std::string::npos) << from[1];
  EXPECT_NE(from[1].str().find("= ?UTF-8?q?M=0Ab?="), std::string::npos) << from[1];
}

// The rule itself: each form is named, and the text it makes keeps the words and is no form.
TEST(GitText, EachFormIsNamedAndItsTextIsNone) {
  EXPECT_EQ(git_line_form("--- a/x"), GitLineForm::kPatchBreak);
  EXPECT_EQ(git_line_form("---"), GitLineForm::kPatchBreak);
  EXPECT_EQ(git_line_form("diff --git a/x b/x"), GitLineForm::kPatchBreak);
  EXPECT_EQ(git_line_form("Index: x"), GitLineForm::kPatchBreak);
  EXPECT_EQ(git_line_form("From x Mon Sep 17 00:00:00 2001"), GitLineForm::kMboxFrom);
  EXPECT_EQ(git_line_form(">>From x"), GitLineForm::kMboxFrom);
  EXPECT_EQ(git_line_form("-- >8 --"), GitLineForm::kScissors);
  EXPECT_EQ(git_line_form("  8<------8<---- cut"), GitLineForm::kScissors);
  EXPECT_EQ(git_line_form("[PATCH] x"), GitLineForm::kInBodyHeader);
  EXPECT_EQ(git_line_form("Subject: x"), GitLineForm::kTrailer);
  EXPECT_EQ(git_line_form("Bug-Id : 1"), GitLineForm::kTrailer);
  // Text: what git keeps as written.
  for (const char* text : {"The host bridge", "  --- indented", "From", "Fromage", "--", "-- ", "a -- >8", "x y: z",
                           "Tested on: Linux", "  Signed-off-by: quoted", "diff", "[PATCH]x", "1 >8 2"})
    EXPECT_EQ(git_line_form(text), GitLineForm::kText) << text;
  for (const auto& form : kGitStructure) {
    std::string line = git_text_line(form);
    EXPECT_EQ(git_line_form(line), GitLineForm::kText) << form << " -> " << line;
    EXPECT_EQ(direct_structure(line), "") << line;
    EXPECT_EQ(without_space(line), without_space(form));
  }
  EXPECT_EQ(git_text_line("--- x"), "  --- x");
  EXPECT_EQ(git_text_line("-- >8 --"), "-- > 8 --");
  EXPECT_EQ(git_text_line("plain"), "plain");
  // As git am records a body: no trailing blanks, one blank line between paragraphs.
  EXPECT_EQ(git_text_body("\na  \n\n\n  \nb\n---\n\n"), "a\n\nb\n  ---\n");
  EXPECT_EQ(git_header_text("a =?utf-8?q?b?= c"), "a = ?utf-8?q?b?= c");
}

// The same through the command line, from a snapshot: a CPU model name that puts "--- cut here" at
// the start of the "Tested on:" paragraph's second line (56 columns before the name, a 16-letter
// word, then the 72-column break). The tool says git am applies the patch; git am records the
// message --commit-message drafts, whole.
TEST(WhitelistPatch, FromASnapshotGitAmRecordsTheDraftedMessage) {
  if (!have_git()) GTEST_SKIP() << "git is not installed (scripts/install-deps --test installs it)";
  Sandbox box;
  std::string repo = kernel_repo(box);
  test::SysrootDir s;
  s.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n"
                          "model name\t: Xeon-Gold-6430-v --- cut here\n");
  s.write("proc/sys/kernel/osrelease", "6.1.0\n");
  s.write("boot/config-6.1.0", "CONFIG_PCI_P2PDMA=y\n");
  s.function("pci0000:00/0000:00:00.0", test::ConfigBytes(0x8086, 0x29c0, 0x060000, 0).bytes(256));
  for (int port : {1, 6}) {
    std::string rp = fmt::format("pci0000:00/0000:00:{:02x}.0", port);
    s.function(rp, test::ConfigBytes(0x8086, 0x4c01, 0x060400, 4, true).buses(0, port, port).bytes());
    s.function(fmt::format("{}/0000:{:02x}:00.0", rp, port), test::ConfigBytes(0x10de, 0x2330, 0x030200, 0).bytes());
  }
  const std::string tool = box.tool("GIT_AUTHOR_NAME='Jane Developer' GIT_AUTHOR_EMAIL=jane@example.org") + " --sysroot " +
                           test::shell_quote(s.str()) + " whitelist --no-probe";
  auto draft = test::run_command(tool + " --commit-message 2>&1");
  ASSERT_EQ(draft.status, 0) << draft.output;
  const std::string start = "draft commit message:\n\n", sign = "\nSigned-off-by: Jane Developer <jane@example.org>\n";
  size_t from = draft.output.find(start), to = draft.output.find(sign);
  ASSERT_NE(from, std::string::npos) << draft.output;
  ASSERT_NE(to, std::string::npos) << draft.output;
  std::string meant = draft.output.substr(from + start.size(), to + sign.size() - from - start.size());
  // The name is kept whole, and "---" does not start a line.
  EXPECT_NE(meant.find("(Xeon-Gold-6430-v ---\ncut here)"), std::string::npos) << meant;
  std::string patch = box.dir + "/snapshot.patch";
  auto r = test::run_command(tool + " --candidate 8086:29c0 --kernel-source " + test::shell_quote(repo) + " --patch " +
                             test::shell_quote(patch) + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("git am applies it"), std::string::npos) << r.output;
  r = test::run_command("cd " + test::shell_quote(repo) + " && git -c user.name=t -c user.email=t@example.org am -q --scissors " +
                        test::shell_quote(patch) + " 2>&1 && git log -1 --format=%B");
  ASSERT_EQ(r.status, 0) << r.output << slurp(patch);
  std::string recorded = r.output;
  while (recorded.size() > 1 && recorded.substr(recorded.size() - 2) == "\n\n") recorded.pop_back();
  EXPECT_EQ(recorded, meant) << slurp(patch);
}

}  // namespace
}  // namespace p2paudit::fleet
