// SPDX-License-Identifier: GPL-2.0-or-later
// libkmod on a directory sysroot from a stranger (issue 18): a crafted index (offsets beyond the
// file, truncated, a FIFO), a compressed module that inflates to hundreds of MB, and the analyst's
// own modprobe.d must neither crash, hang nor bloat the analysis, nor leak into it. Each analysis
// runs in a forked child with an alarm, so a crash or a hang fails the test instead of ending it.
#include <gtest/gtest.h>
#include <libkmod.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "p2paudit/drivers.h"
#include "p2paudit/kmod_index.h"
#include "p2paudit/output_file.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "module_fixture.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
const std::string kRelease = "6.1.192";  // the fixture's osrelease

struct ChildResult {
  bool exited = false;   // false: killed (crash, or the alarm of a hang)
  int signal = 0;
  std::string output;    // what the child wrote
  long max_rss_kb = 0;
};

// Runs fn in a child with a 30 s alarm; fn's string comes back through a pipe.
template <typename Fn>
ChildResult in_child(Fn fn) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(30);
    std::string out = fn();
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildResult r;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) r.output.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  r.exited = WIFEXITED(status);
  r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r.max_rss_kb = ru.ru_maxrss;
  return r;
}

// The analysis as lines: one per finding ("finding PATH: MESSAGE") and one per function.
std::string analyse(const fs::path& dir) {
  std::ostringstream out;
  try {
    Topology t = read_topology(Sysroot::open(dir.string()));
    for (const auto& f : t.findings) out << "finding " << f.path << ": " << f.message << "\n";
    for (const auto& f : t.functions) {
      std::vector<std::string> m = f.module.alias_matches;
      std::sort(m.begin(), m.end());
      out << "function " << f.bdf.str() << " module=" << f.module.name << " version=" << f.module.version << " aliases=";
      for (const auto& a : m) out << a << ",";
      out << "\n";
    }
  } catch (const std::exception& e) {
    out << "error " << e.what() << "\n";
  }
  return out.str();
}

class KmodConfined : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::depmod_available())
      GTEST_SKIP() << "depmod (Debian package kmod) is not installed";
    dir_ = fs::path(::testing::TempDir()) / ("p2paudit-kmodconf-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_EQ(test::run_command("tar xzf " + test::data_path("kernel-oracle/h-f6-sriov-nvme/sysroot.tar.gz") + " -C " +
                                dir_.string()).status, 0);
    mods_ = dir_ / "lib/modules" / kRelease;
    fs::create_directories(mods_ / "kernel/drivers");
    make_module(mods_ / "kernel/drivers/nvme.ko", {"alias=pci:v*d*sv*sd*bc01sc08i02*", "version=1.0-from-ko", "license=GPL"});
    make_module(mods_ / "kernel/drivers/fakenvme.ko", {"alias=pci:v00001B36d00000010sv*sd*bc*sc*i*", "license=GPL"});
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void make_module(const fs::path& ko, const std::vector<std::string>& modinfo) { test::make_module(ko, modinfo); }
  void depmod() { test::run_depmod(dir_, kRelease); }
  std::vector<uint8_t> bytes(const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  void write(const fs::path& f, const std::vector<uint8_t>& data) {
    fs::remove(f);
    std::ofstream out(f, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  }
  // The analysis completes (no crash, no hang), names the refused file, keeps every function,
  // and gives no module answer from the refused index.
  void expect_refused(const std::string& file) {
    ChildResult r = in_child([&] { return analyse(dir_); });
    ASSERT_TRUE(r.exited) << "analysis killed by signal " << r.signal << " (" << strsignal(r.signal) << ")";
    EXPECT_NE(r.output.find("finding lib/modules/" + kRelease + "/" + file + ": libkmod index refused"), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("function 0000:01:00.0 "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("function 0000:01:00.1 "), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("aliases=fakenvme"), std::string::npos) << r.output;
  }
  fs::path dir_, mods_;
};

TEST_F(KmodConfined, TheIndexDepmodWritesIsAcceptedAndAnswers) {
  // A module with 1,500 aliases of the shapes real modules carry, for a trie of some size.
  std::vector<std::string> aliases;
  for (unsigned i = 0; i < 500; ++i) {
    aliases.push_back(fmt::format("alias=pci:v{:08X}d{:08X}sv*sd*bc*sc*i*", 0x1000 + i * 37 % 4096, i * 7919 % 65536));
    aliases.push_back(fmt::format("alias=usb:v{:04X}p{:04X}d*dc*dsc*dp*ic{:02X}isc*ip*in*", i * 31 % 65536, i, i % 256));
    aliases.push_back(fmt::format("alias=of:N*T*Cvendor,part-{}C*", i));
  }
  make_module(mods_ / "kernel/drivers/many.ko", aliases);
  depmod();
  for (const char* f : {"modules.dep.bin", "modules.alias.bin", "modules.symbols.bin", "modules.builtin.bin"})
    if (fs::exists(mods_ / f) && fs::file_size(mods_ / f) > 0) {
      auto data = bytes(mods_ / f);
      EXPECT_EQ(kmod_index_problem(data.data(), data.size()), std::nullopt) << f;
    }
  ChildResult r = in_child([&] { return analyse(dir_); });
  ASSERT_TRUE(r.exited) << r.signal;
  EXPECT_EQ(r.output.find("finding "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("function 0000:01:00.1 module= version= aliases=fakenvme,nvme,"), std::string::npos) << r.output;
}

TEST_F(KmodConfined, NodeOffsetBeyondTheFileIsRefusedNotFollowed) {
  depmod();
  auto data = bytes(mods_ / "modules.alias.bin");
  ASSERT_GE(data.size(), 12u);
  // Root: a node with children, at an offset 256 MB past the end of the mapping.
  data[8] = 0x2F, data[9] = 0xFF, data[10] = 0xFF, data[11] = 0xF0;
  write(mods_ / "modules.alias.bin", data);
  expect_refused("modules.alias.bin");
}

TEST_F(KmodConfined, ChildOffsetBeyondTheFileIsRefused) {
  // A child pointing past the end, below a root that is itself in bounds.
  depmod();
  std::vector<uint8_t> data = {0xB0, 0x07, 0xF4, 0x57, 0x00, 0x02, 0x00, 0x01, 0x20, 0x00, 0x00, 0x0C,
                               'p',  'p',  0x20, 0x7F, 0xFF, 0xF0};
  write(mods_ / "modules.alias.bin", data);
  expect_refused("modules.alias.bin");
}

// A page-sized index whose root prefix has no terminating NUL: libkmod's strlen() runs off the
// mapping.
TEST_F(KmodConfined, APrefixRunningPastTheEndIsRefused) {
  depmod();
  std::vector<uint8_t> data(4096 * 4, 'a');
  const uint8_t header[] = {0xB0, 0x07, 0xF4, 0x57, 0x00, 0x02, 0x00, 0x01, 0x80, 0x00, 0x00, 0x0C};
  std::copy(std::begin(header), std::end(header), data.begin());
  write(mods_ / "modules.alias.bin", data);
  expect_refused("modules.alias.bin");
}

// A root whose values claim 2^32-1 entries at the end of the file.
TEST_F(KmodConfined, MoreValuesThanTheFileHoldsAreRefused) {
  depmod();
  std::vector<uint8_t> data = {0xB0, 0x07, 0xF4, 0x57, 0x00, 0x02, 0x00, 0x01, 0x40, 0x00, 0x00, 0x0C, 0xFF, 0xFF, 0xFF, 0xFF};
  write(mods_ / "modules.dep.bin", data);
  expect_refused("modules.dep.bin");
}

TEST_F(KmodConfined, TruncatedIndexIsRefused) {
  depmod();
  auto data = bytes(mods_ / "modules.dep.bin");
  data.resize(data.size() / 2);
  write(mods_ / "modules.dep.bin", data);
  expect_refused("modules.dep.bin");
}

TEST_F(KmodConfined, AFifoAsIndexNeitherHangsNorIsOpenedByLibkmod) {
  depmod();
  fs::remove(mods_ / "modules.symbols.bin");
  ASSERT_EQ(::mkfifo((mods_ / "modules.symbols.bin").c_str(), 0600), 0);
  expect_refused("modules.symbols.bin");
}

TEST_F(KmodConfined, ACompressedModuleIsNotInflated) {
  if (test::run_command("command -v zstd >/dev/null").status != 0) GTEST_SKIP() << "zstd is not installed";
  fs::path ko = mods_ / "kernel/drivers/nvme.ko";
  ASSERT_EQ(test::run_command("zstd -q --rm " + ko.string()).status, 0);
  depmod();
  // After depmod: the module file becomes 512 MB of zeros with a few KB compressed.
  ASSERT_EQ(test::run_command("head -c 512M /dev/zero | zstd -q -19 -o " + ko.string() + ".zst.new && mv " + ko.string() +
                              ".zst.new " + ko.string() + ".zst").status, 0);
  fs::create_directories(dir_ / "sys/module/nvme");
  std::ofstream(dir_ / "sys/module/nvme/version") << "2.0-from-sysfs\n";
  ChildResult r = in_child([&] { return analyse(dir_); });
  ASSERT_TRUE(r.exited) << r.signal;
  EXPECT_LT(r.max_rss_kb, 256 * 1024) << "the analysis inflated the module";
  EXPECT_NE(r.output.find("function 0000:01:00.0 module=nvme version=2.0-from-sysfs "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("1.0-from-ko"), std::string::npos) << r.output;
}

// libkmod's default configuration is the analyst's /etc and /lib modprobe.d (Debian ships
// /lib/modprobe.d/aliases.conf): none of it may be in a sysroot's context.
TEST_F(KmodConfined, TheContextHoldsNoHostConfiguration) {
  depmod();
  Sysroot root = Sysroot::open(dir_.string());
  ModuleResolver resolver(root, kRelease, KmodQueries::kInProcess);  // the context, in this process
  ASSERT_TRUE(resolver.available());
  using Iter = struct kmod_config_iter* (*)(const struct kmod_ctx*);
  for (Iter get : {Iter(kmod_config_get_aliases), Iter(kmod_config_get_options), Iter(kmod_config_get_blacklists),
                   Iter(kmod_config_get_install_commands), Iter(kmod_config_get_softdeps)}) {
    struct kmod_config_iter* it = get(resolver.context());
    ASSERT_NE(it, nullptr);
    std::string first;
    if (kmod_config_iter_next(it)) {
      const char* value = kmod_config_iter_get_value(it);
      first = std::string(kmod_config_iter_get_key(it)) + " " + (value ? value : "");
    }
    kmod_config_iter_free_iter(it);
    // /proc/cmdline is still read by libkmod 30 (no option to skip it): only its `modname.opt=`
    // options and `modprobe.blacklist=` can come from there, never aliases or commands.
    if (get == Iter(kmod_config_get_options) || get == Iter(kmod_config_get_blacklists)) continue;
    EXPECT_EQ(first, "") << "host configuration in a sysroot's libkmod context";
  }
}

// What the tool opens, seen from outside: nothing of the analyst's module configuration or tree,
// no module file, no index in the sysroot (libkmod reads checked private copies).
TEST_F(KmodConfined, TheToolOpensNoHostModuleConfiguration) {
  if (test::run_command("command -v strace >/dev/null").status != 0) GTEST_SKIP() << "strace is not installed";
  depmod();
  fs::path trace = dir_.string() + ".strace";
  auto r = test::run_command("strace -f -qq -e trace=open,openat,openat2 -o " + trace.string() + " " P2PAUDIT_TOOL
                             " --sysroot " + dir_.string() + " topology >/dev/null 2>&1");
  std::ifstream in(trace);
  std::string line, opened;
  size_t lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    for (const char* bad : {"modprobe.d", "\"/lib/modules", "\"/usr/lib/modules", ".ko\"", ".ko."})
      if (line.find(bad) != std::string::npos && line.find(dir_.string() + "/lib/modules") == std::string::npos)
        opened += line + "\n";
    if (line.find(dir_.string() + "/lib/modules") != std::string::npos) opened += line + "\n";
  }
  fs::remove(trace);
  if (lines == 0) GTEST_SKIP() << "strace recorded nothing (ptrace not permitted here?)";
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(opened, "");
}

// The private copies of libkmod's index in a temporary directory.
std::vector<std::string> kmod_copies(const fs::path& tmpdir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(tmpdir, ec))
    if (e.path().filename().string().rfind("p2paudit-kmod-", 0) == 0) out.push_back(e.path().string());
  return out;
}

// Issue 30: a stranger's index can make every lookup slow (each modalias is matched against every
// wildcard alias of up to 16 MiB); the child here waits before each answer instead. All lookups of one analysis share one
// deadline: the run ends near it, not after lookups x delay, and says so once.
TEST_F(KmodConfined, ASlowChildStopsAtTheOneDeadlineWithOneFinding) {
  depmod();
  fs::path tmpdir = dir_.string() + ".tmp";
  fs::create_directories(tmpdir);
  const char* old = std::getenv("TMPDIR");
  std::string saved = old ? old : "";
  ::setenv("TMPDIR", tmpdir.c_str(), 1);
  Sysroot root = Sysroot::open(dir_.string());
  KmodBudget budget;
  budget.total = std::chrono::milliseconds(1000);
  budget.child_delay = std::chrono::milliseconds(200);
  std::vector<Finding> findings;
  size_t answered = 0;
  auto start = std::chrono::steady_clock::now();
  {
    ModuleResolver r(root, kRelease, KmodQueries::kConfinedChild, budget);
    if (old) ::setenv("TMPDIR", saved.c_str(), 1);
    else ::unsetenv("TMPDIR");
    ASSERT_TRUE(r.available());
    if (r.context()) GTEST_SKIP() << "no child could be started here";
    EXPECT_EQ(kmod_copies(tmpdir).size(), 1u);
    // 60 functions: 12 s at 200 ms each under a limit per lookup.
    for (int i = 0; i < 30; ++i) {
      if (!r.for_modalias("pci:v00001B36d00000010sv00001AF4sd00001100bc01sc08i02").alias_matches.empty()) ++answered;
      (void)r.for_driver("nvme");
    }
    findings = r.findings();
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 3.0) << "the lookups ran past three times the 1 s deadline";
  EXPECT_GE(answered, 1u) << "lookups before the deadline are answered";
  EXPECT_LT(answered, 30u);
  ASSERT_EQ(findings.size(), 1u) << "one finding for the whole run, not one per function";
  EXPECT_EQ(findings[0].path, "lib/modules/" + kRelease);
  EXPECT_NE(findings[0].message.find("ran out of time"), std::string::npos) << findings[0].message;
  EXPECT_NE(findings[0].message.find("1 s"), std::string::npos) << findings[0].message;
  EXPECT_EQ(kmod_copies(tmpdir), std::vector<std::string>{}) << "the private copy outlived the resolver";
  fs::remove_all(tmpdir);
}

// The same deadline where the lookups run in this process (no fork): spent before the first one,
// every lookup leaves the facts unknown, with one finding.
TEST_F(KmodConfined, TheDeadlineHoldsInThisProcessToo) {
  depmod();
  Sysroot root = Sysroot::open(dir_.string());
  KmodBudget none;
  none.total = std::chrono::milliseconds(0);
  ModuleResolver r(root, kRelease, KmodQueries::kInProcess, none);
  ASSERT_NE(r.context(), nullptr);
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(r.for_modalias("pci:v00001B36d00000010sv00001AF4sd00001100bc01sc08i02").alias_matches.empty());
    EXPECT_EQ(r.for_driver("nvme").builtin, Known::kUnknown);
  }
  ASSERT_EQ(r.findings().size(), 1u);
  EXPECT_NE(r.findings()[0].message.find("ran out of time"), std::string::npos) << r.findings()[0].message;
}

// SIGINT, SIGTERM or SIGHUP while the private copy exists: the process dies of the signal and
// leaves no p2paudit-kmod-* in its TMPDIR (the destructor never runs then), nor the twin of an
// output being written at the same time (one table holds both).
TEST_F(KmodConfined, ASignalLeavesNoPrivateCopy) {
  depmod();
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    fs::path tmpdir = dir_.string() + ".tmp" + std::to_string(sig);
    fs::create_directories(tmpdir);
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      ::alarm(30);
      ::setenv("TMPDIR", tmpdir.c_str(), 1);
      Sysroot root = Sysroot::open(dir_.string());
      ModuleResolver r(root, kRelease);
      OutputFile out((tmpdir / "capture.tar.gz").string(), false);
      out.write("half a capture");
      char c = r.available() ? 'y' : 'n';
      (void)!::write(ready[1], &c, 1);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    ::close(ready[0]);
    EXPECT_EQ(c, 'y');
    EXPECT_EQ(kmod_copies(tmpdir).size(), 1u) << "no private copy to remove";
    ASSERT_EQ(::kill(pid, sig), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status << " for signal " << sig;
    EXPECT_EQ(kmod_copies(tmpdir), std::vector<std::string>{}) << "signal " << sig;
    EXPECT_TRUE(fs::is_empty(tmpdir)) << "the output's twin is left after signal " << sig;
    fs::remove_all(tmpdir);
  }
}

}  // namespace
}  // namespace p2paudit
