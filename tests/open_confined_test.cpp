// SPDX-License-Identifier: GPL-2.0-or-later
// "It stays inside the sysroot" (docs/security.md), seen from outside: every command run on a
// directory sysroot under strace opens nothing but the sysroot, the rules, pci.ids, the output it
// was told to write (and that file's temporary twin), its private libkmod copy, its own in-memory
// copies (memfd) and, while the program is loaded, the dynamic loader's cache and shared objects.
// The host's /etc, /proc, /sys, /dev and /usr/share are the analyst's machine, not the stranger's:
// any open there fails the case with the path. The sysroot is a capture without its capture record
// plus libkmod index files (tests/data/kmod-index), so libkmod is reached as well.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "p2paudit/drivers.h"
#include "p2paudit/sysroot.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;

bool have_strace() { return test::run_command("strace -V >/dev/null 2>&1").status == 0; }

// A sanitizer's runtime, linked into the tool in such builds, reads /proc/self/maps and more of
// its own: the promise is checked on the plain build (the README's test command).
using test::kSanitized;

// One directory per test process (ctest runs each case in its own process): the sysroot, the
// outputs and the private TMPDIR.
struct Work {
  fs::path top, sysroot, out, tmp;
};

const Work& work() {
  static const Work w = [] {
    Work w;
    w.top = fs::weakly_canonical(fs::path(::testing::TempDir())) / ("p2paudit-confined-" + std::to_string(::getpid()));
    fs::remove_all(w.top);
    w.sysroot = w.top / "sysroot";
    w.out = w.top / "out";
    w.tmp = w.top / "tmp";
    for (const auto& d : {w.sysroot, w.out, w.tmp}) fs::create_directories(d);
    test::run_command("tar xzf " + test::shell_quote(test::data_path("machines/h200x2-firecracker-vm/sysroot.tar.gz")) +
                      " -C " + test::shell_quote(w.sysroot.string()));
    // Without the capture record the analysis asks libkmod about the modules.
    fs::remove(w.sysroot / "p2paudit-capture.json");
    std::string release;
    std::ifstream(w.sysroot / "proc/sys/kernel/osrelease") >> release;
    fs::path mods = w.sysroot / "lib/modules" / release;
    fs::create_directories(mods);
    for (const auto& e : fs::directory_iterator(test::data_path("kmod-index")))
      if (e.path().extension() == ".bin") fs::copy_file(e.path(), mods / e.path().filename());
    return w;
  }();
  return w;
}

struct Case {
  std::string name;
  std::string args;    // {S}: the sysroot, {O}: the output directory
  std::string output;  // the file the command may write, relative to the output directory
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.args; }

std::string expand(std::string s) {
  for (auto [key, value] : {std::pair<std::string, std::string>{"{S}", work().sysroot.string()},
                            {"{O}", work().out.string()}, {"{R}", test::rules_source()}})
    for (size_t at; (at = s.find(key)) != std::string::npos;) s.replace(at, key.size(), value);
  return s;
}

bool under(const std::string& path, const fs::path& dir) {
  std::string d = dir.string();
  return path == d || (path.size() > d.size() && path.compare(0, d.size(), d) == 0 && path[d.size()] == '/');
}

struct Traced {
  int status = -1;
  size_t opens = 0;                  // successful opens seen
  std::vector<std::string> outside;  // what breaks the promise
  std::string log;                   // the tool's own output, for messages
  std::vector<std::string> notes;    // allowed, but worth saying
};

// Runs the tool under strace -f -y (every returned descriptor printed with the path it resolves
// to, the way the kernel sees it, also inside a chroot), and sorts each successful open.
// Whether `path`, a system library, is libarchive or one opened after it by the same process (its
// dependencies, which the loader opens next).
bool archive_chain_opened(const std::string& pid, const std::string& path, std::set<std::string>& archive_pids) {
  if (fs::path(path).filename().string().rfind("libarchive.so.", 0) == 0) archive_pids.insert(pid);
  return archive_pids.count(pid) > 0;
}

Traced trace(const Case& c) {
  const Work& w = work();
  std::string log = (w.top / ("strace-" + c.name + ".log")).string();
  std::string out = (w.top / ("stdout-" + c.name)).string();
  std::string cmd = "cd " + test::shell_quote(w.out.string()) + " && TMPDIR=" + test::shell_quote(w.tmp.string()) +
                    " ASAN_OPTIONS=detect_leaks=0 timeout 120 strace -f -y -qq -o " + test::shell_quote(log) +
                    " -e trace=open,openat,openat2,creat,execve,execveat,memfd_create,chroot " + test::shell_quote(test::tool_file()) + " " +
                    expand(c.args) +
                    " >" + test::shell_quote(out) + " 2>&1";
  Traced t;
  t.status = test::run_command(cmd).status;
  {
    std::ifstream in(out);
    t.log.assign(std::istreambuf_iterator<char>(in), {});
    if (t.log.size() > 2000) t.log.resize(2000);
  }
  const fs::path rules = fs::weakly_canonical(test::rules_source());
  const fs::path output = c.output.empty() ? fs::path() : w.out / c.output;
  const std::regex open_call(R"(\b(open|openat|openat2|creat)(\(|\s+resumed>))");
  const std::regex exec_call(R"(\b(execve|execveat)(\(|\s+resumed>))");
  const std::regex returned(R"(\)\s+=\s+(\d+)<(.*)>\s*$)");
  const std::regex loader_file(R"(^(/usr)?/lib(64|32|x32)?/.*\.so(\.[0-9.]+)?$)");
  std::set<std::string> pids_loading;  // a process still in the dynamic loader: before its first other open
  std::set<std::string> pids_unconfined;  // libkmod's child where chroot was refused (see below)
  std::set<std::string> archive_pids;     // processes that have opened libarchive
  const std::regex chroot_call(R"(\bchroot(\(|\s+resumed>))");
  bool first_exec = true;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    std::string pid = line.substr(0, line.find(' '));
    std::smatch m;
    if (std::regex_search(line, exec_call)) {
      if (line.find(" = 0") == std::string::npos) continue;  // a failed exec ran nothing
      if (first_exec) {
        first_exec = false;  // the tool itself
        pids_loading.insert(pid);
      } else {
        t.outside.push_back(line);  // nothing else is run
      }
      continue;
    }
    if (std::regex_search(line, chroot_call)) {
      if (line.find(" = -1 ") != std::string::npos) pids_unconfined.insert(pid);
      continue;
    }
    if (!std::regex_search(line, open_call) || !std::regex_search(line, m, returned)) continue;  // failed, or no open
    ++t.opens;
    std::string path = m[2].str();
    bool loading = pids_loading.count(pid) > 0;
    const bool system_library = path == "/etc/ld.so.cache" || std::regex_match(path, loader_file);
    if (loading && system_library) continue;
    pids_loading.erase(pid);  // from here on, a shared object is a dlopen() of the program's own
    // libarchive, opened with dlopen() at the first archive (io/src/archive_library.cpp), and the
    // libraries it needs: by a fixed soname from the loader's own directories, never a path the
    // input names.
    if (system_library && (path == "/etc/ld.so.cache" || archive_chain_opened(pid, path, archive_pids))) continue;
    if (under(path, w.sysroot) || under(path, rules)) continue;
    if (std::regex_match(path, std::regex(R"(^/usr/share/(misc|hwdata|pci\.ids)(/.*)?/pci\.ids(\.gz)?$)"))) continue;
    if (!output.empty() && (path == output.string() || path.rfind((w.out / ".p2paudit-").string(), 0) == 0)) continue;
    if (path.rfind((w.tmp / "p2paudit-kmod-").string(), 0) == 0) continue;  // the private libkmod copy
    if (path.rfind("/memfd:p2paudit-", 0) == 0) continue;                     // its own in-memory copies
    // libkmod 30 reads /proc/cmdline in kmod_new(), with no option to skip it. Its child chroots
    // into the private copy first, where the path holds nothing; only where this kernel refuses
    // both a user namespace and chroot does the child read the host's (docs/security.md).
    if (path == "/proc/cmdline" && pids_unconfined.count(pid)) {
      t.notes.push_back("confinement refused here; libkmod's child read /proc/cmdline: " + line);
      continue;
    }
    t.outside.push_back(line);
  }
  return t;
}

class OpenConfined : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!have_strace()) GTEST_SKIP() << "strace is not installed (scripts/install-deps --test installs it)";
    if (kSanitized) GTEST_SKIP() << "built with sanitizers, whose runtime opens /proc files itself";
    ASSERT_TRUE(fs::exists(work().sysroot / "sys/bus/pci/devices"));
  }
};

TEST_P(OpenConfined, OpensNothingOutsideTheSysroot) {
  const Case& c = GetParam();
  if (!c.output.empty()) fs::remove(work().out / c.output);
  Traced t = trace(c);
  if (t.opens == 0) GTEST_SKIP() << "strace recorded nothing (ptrace not permitted here?)";
  EXPECT_TRUE(t.status == 0 || t.status == 1 || t.status == 3) << expand(c.args) << " exited " << t.status << "\n" << t.log;
  std::string listed;
  for (const auto& l : t.outside) listed += "  " + l + "\n";
  EXPECT_TRUE(t.outside.empty()) << expand(c.args) << " opened outside the sysroot:\n" << listed;
  for (const auto& n : t.notes) std::cerr << "note: " << n << "\n";
  if (!c.output.empty()) {
    EXPECT_TRUE(fs::exists(work().out / c.output)) << expand(c.args) << "\n" << t.log;
  }
}

// The analysis reached libkmod: the private index copy was opened (by the tool or its child).
TEST(OpenConfinedKmod, TheDirectorySysrootReachesLibkmod) {
  if (!have_strace()) GTEST_SKIP() << "strace is not installed";
  if (kSanitized) GTEST_SKIP() << "built with sanitizers, whose runtime opens /proc files itself";
  Traced t = trace({"kmod", "--sysroot {S} topology", ""});
  if (t.opens == 0) GTEST_SKIP() << "strace recorded nothing (ptrace not permitted here?)";
  std::ifstream in(work().top / "strace-kmod.log");
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(all.find((work().tmp / "p2paudit-kmod-").string()), std::string::npos) << "libkmod was not reached";
}

// libkmod's lookups for a directory sysroot run in a child confined to the private index copy.
class KmodChild : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream(work().sysroot / "proc/sys/kernel/osrelease") >> release_;
    ASSERT_FALSE(release_.empty());
  }
  static std::string answers(const ModuleResolver& r) {
    std::string out;
    for (const char* alias : {"pci:v000010DEd00002335sv000010DEsd000018BEbc03sc02i00",
                              "pci:v00001B36d00000010sv00001AF4sd00001100bc01sc08i02", "pci:v00008086d00001234sv*"}) {
      auto m = r.for_modalias(alias);
      out += std::string(alias) + " ->";
      for (const auto& n : m.alias_matches) out += " " + n;
      out += "\n";
    }
    auto d = r.for_driver("nvme");
    out += "driver nvme -> " + d.name + " builtin=" + std::to_string(static_cast<int>(d.builtin)) + "\n";
    return out;
  }
  // The children of this process (every thread's), from /proc: empty where the kernel lacks
  // CONFIG_PROC_CHILDREN.
  static std::vector<pid_t> children() {
    std::vector<pid_t> out;
    std::error_code ec;
    for (const auto& task : fs::directory_iterator("/proc/self/task", ec)) {
      std::ifstream in(task.path() / "children");
      for (pid_t p; in >> p;) out.push_back(p);
    }
    return out;
  }
  std::string release_;
};

TEST_F(KmodChild, AnswersAsLibkmodInThisProcessDoes) {
  Sysroot root = Sysroot::open(work().sysroot.string());
  ModuleResolver in_child(root, release_);
  ModuleResolver here(root, release_, KmodQueries::kInProcess);
  ASSERT_TRUE(in_child.available());
  ASSERT_TRUE(here.available());
  EXPECT_EQ(in_child.context(), nullptr) << "no child: the lookups ran in this process";
  std::string expected = answers(here);
  EXPECT_NE(expected.find("-> nvidia\n"), std::string::npos) << expected;
  EXPECT_NE(expected.find("sd00001100bc01sc08i02 -> nvme\n"), std::string::npos) << expected;
  EXPECT_EQ(answers(in_child), expected);
  EXPECT_TRUE(in_child.findings().empty());
}

// Root, or a user allowed a user namespace, can chroot: then the child must be confined.
TEST_F(KmodChild, IsConfinedWhereTheKernelAllowsIt) {
  pid_t probe = ::fork();
  if (probe == 0) {
    (void)::unshare(CLONE_NEWUSER);
    ::_exit(::chroot("/") == 0 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(probe, &status, 0);
  Sysroot root = Sysroot::open(work().sysroot.string());
  ModuleResolver r(root, release_);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    EXPECT_FALSE(r.confined());
    GTEST_SKIP() << "neither a user namespace nor chroot is allowed here: libkmod reads the host's /proc/cmdline";
  }
  EXPECT_TRUE(r.confined());
}

// A crash inside libkmod ends its child: the analysis goes on, the facts it could not get are
// unknown, and a finding says why.
TEST_F(KmodChild, ACrashInTheChildLeavesFactsUnknownWithAFinding) {
  Sysroot root = Sysroot::open(work().sysroot.string());
  auto before = children();
  ModuleResolver r(root, release_);
  ASSERT_TRUE(r.available());
  if (r.context()) GTEST_SKIP() << "no child could be started here";
  std::vector<pid_t> started;
  for (pid_t p : children())
    if (std::find(before.begin(), before.end(), p) == before.end()) started.push_back(p);
  if (started.size() != 1) GTEST_SKIP() << "the child is not visible in /proc/self/task/*/children";
  EXPECT_NE(r.for_modalias("pci:v000010DEd00002335sv000010DEsd000018BEbc03sc02i00").alias_matches.size(), 0u);
  ASSERT_EQ(::kill(started.front(), SIGSEGV), 0);
  auto m = r.for_modalias("pci:v000010DEd00002335sv000010DEsd000018BEbc03sc02i00");
  EXPECT_TRUE(m.alias_matches.empty());
  EXPECT_EQ(r.for_driver("nvme").builtin, Known::kUnknown);
  ASSERT_EQ(r.findings().size(), 1u);
  EXPECT_NE(r.findings()[0].message.find("signal 11"), std::string::npos) << r.findings()[0].message;
  EXPECT_EQ(r.findings()[0].path, "lib/modules/" + release_);
}

// The work directory goes when the process ends.
class RemoveWork : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::weakly_canonical(fs::path(::testing::TempDir())) / ("p2paudit-confined-" + std::to_string(::getpid())), ec);
  }
};
const auto* const kRemoveWork = ::testing::AddGlobalTestEnvironment(new RemoveWork);

INSTANTIATE_TEST_SUITE_P(
    EveryCommand, OpenConfined,
    ::testing::Values(
        Case{"audit", "--sysroot {S}", ""}, Case{"audit_json", "--sysroot {S} --format json", ""},
        Case{"audit_prom", "--sysroot {S} --format prom", ""}, Case{"audit_html", "--sysroot {S} --format html", ""},
        Case{"audit_dot", "--sysroot {S} --format dot", ""}, Case{"topology", "--sysroot {S} topology", ""},
        Case{"topology_json", "--sysroot {S} --format json topology", ""},
        Case{"topology_dot", "--sysroot {S} --format dot topology", ""},
        Case{"check", "--sysroot {S} check gpu0 gpu1", ""}, Case{"check_json", "--sysroot {S} --format json check gpu0 gpu1", ""},
        Case{"matrix", "--sysroot {S} matrix --all", ""}, Case{"matrix_json", "--sysroot {S} --format json matrix --all --details", ""},
        Case{"policy", "--sysroot {S} policy --all", ""}, Case{"policy_json", "--sysroot {S} --format json policy --all", ""},
        Case{"policy_env", "--sysroot {S} --format env policy", ""},
        Case{"explain", "--sysroot {S} explain gpu0 gpu1", ""},
        Case{"explain_json", "--sysroot {S} --format json explain gpu0 gpu1", ""},
        Case{"whitelist", "--sysroot {S} whitelist --all --commit-message", ""},
        Case{"whitelist_json", "--sysroot {S} --format json whitelist --all", ""},
        Case{"report", "--sysroot {S} report", ""}, Case{"report_out", "--sysroot {S} report -o {O}/report.json", "report.json"},
        Case{"aggregate", "aggregate {S}", ""}, Case{"aggregate_csv", "aggregate --format csv {S}", ""},
        Case{"aggregate_csv_wide", "aggregate --format csv-wide {S}", ""},
        Case{"aggregate_out", "aggregate --format json -o {O}/fleet.json {S}", "fleet.json"},
        Case{"rules_lint", "rules lint {R}/policy/default.yaml", ""}, Case{"rules_facts", "rules facts", ""},
        Case{"rules_facts_json", "rules facts --format json", ""},
        Case{"snapshot", "--sysroot {S} snapshot -o {O}/snap.tar.gz", "snap.tar.gz"},
        Case{"snapshot_redact", "--sysroot {S} snapshot --redact -o {O}/redacted.tar.gz", "redacted.tar.gz"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace p2paudit
