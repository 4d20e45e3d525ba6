// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/drivers.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <libkmod.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "p2paudit/kmod_index.h"
#include "p2paudit/platform.h"

namespace p2paudit {

namespace {

// The index files libkmod reads for the lookups below (libkmod.c's index_files[]): modules.dep.bin
// for a module's path, the alias, symbol and built-in indexes for modalias lookups. Nothing else
// of lib/modules is handed to libkmod.
const char* const kIndexFiles[] = {"modules.dep.bin", "modules.alias.bin", "modules.symbols.bin",
                                   "modules.builtin.alias.bin", "modules.builtin.bin"};

// Given NULL, libkmod reads /etc, /run, /usr/local/lib and /lib modprobe.d: the analyst's own
// machine. A context for a sysroot gets an empty list (libkmod's "no configuration") instead.
const char* const kNoConfiguration[] = {nullptr};

bool write_all(int fd, const std::vector<uint8_t>& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Name, and whether the index holds a module file for it. The module file itself is never opened
// (libkmod would decompress a .ko.zst/.ko.xz whole to read its .modinfo): version and srcversion
// come from the running kernel's sys/module (see for_driver).
void fill_from_module(struct kmod_module* mod, ModuleInfo& info) {
  info.name = kmod_module_get_name(mod);
  if (kmod_module_get_path(mod)) info.builtin = Known::kNo;
}

// The two lookups, the same in this process and in the child.
bool lookup_driver(struct kmod_ctx* ctx, const std::string& name, ModuleInfo& info) {
  struct kmod_module* mod = nullptr;
  if (kmod_module_new_from_name(ctx, name.c_str(), &mod) < 0) return false;
  fill_from_module(mod, info);
  kmod_module_unref(mod);
  return true;
}

std::vector<std::string> lookup_alias(struct kmod_ctx* ctx, const std::string& modalias) {
  std::vector<std::string> names;
  struct kmod_list* list = nullptr;
  if (kmod_module_new_from_lookup(ctx, modalias.c_str(), &list) < 0 || !list) return names;
  struct kmod_list* item;
  kmod_list_foreach(item, list) {
    struct kmod_module* mod = kmod_module_get_module(item);
    names.emplace_back(kmod_module_get_name(mod));
    kmod_module_unref(mod);
  }
  kmod_module_unref_list(list);
  return names;
}

// The child's protocol over a socket pair. Parent to child: op ('D' driver, 'A' modalias), a
// 32-bit length, the bytes. Child to parent: first one status byte (see Hello), then per 'D' the
// found and has-path bytes and the module name, per 'A' a 32-bit count and the names; a name is a
// 32-bit length and its bytes. The parent bounds every length and count it reads.
enum Hello : uint8_t { kNoContext = 0, kConfined = 1, kUnconfined = 2 };
constexpr uint32_t kMaxName = 4096;     // a module name or a modalias is far shorter
constexpr uint32_t kMaxMatches = 4096;  // modules matching one modalias

bool write_bytes(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool write_string(int fd, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  return write_bytes(fd, &n, sizeof n) && write_bytes(fd, s.data(), s.size());
}

// Reads exactly size bytes; with a deadline (the parent) polls first. False on EOF, error or time.
bool read_bytes(int fd, void* data, size_t size, std::chrono::steady_clock::time_point* deadline = nullptr) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    if (deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) return false;
      pollfd pfd{fd, POLLIN, 0};
      int r = ::poll(&pfd, 1, static_cast<int>(left));
      if ((r < 0 && errno == EINTR) || r == 0) continue;  // poll's milliseconds may end just short of the deadline
      if (r < 0) return false;
    }
    ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The child confines itself to the private copy: its own user namespace where the kernel allows
// one (no capability of the analyst's user or of root is left outside it), then chroot, which
// that namespace (or root) may do. Inside, "/proc/cmdline" is a path of the private copy, which
// holds none.
bool confine_to(const std::string& dir) {
  (void)::unshare(CLONE_NEWUSER);  // refused: chroot still works for root
  if (::chroot(dir.c_str()) != 0) return false;
  (void)::chdir("/");
  return true;
}

void no_log(void*, int, const char*, int, const char*, const char*, va_list) {}

[[noreturn]] void child_main(int fd, const std::string& dir, std::chrono::milliseconds delay) {
  // Only the socket stays open: nothing of the analysis (an output being written, another
  // child's pipe) is held by this process.
  if (fd != 3) {
    ::dup2(fd, 3);
    fd = 3;
  }
#ifdef SYS_close_range
  ::syscall(SYS_close_range, 4U, ~0U, 0U);
#endif
  rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  ::signal(SIGPIPE, SIG_DFL);
  bool confined = confine_to(dir);
  const char* const no_configuration[] = {nullptr};
  struct kmod_ctx* ctx = kmod_new(confined ? "/" : dir.c_str(), no_configuration);
  if (ctx) {
    kmod_set_log_fn(ctx, no_log, nullptr);  // a stranger's index never reaches the terminal
    kmod_load_resources(ctx);
  }
  uint8_t hello = !ctx ? kNoContext : confined ? kConfined : kUnconfined;
  if (!write_bytes(fd, &hello, 1) || !ctx) ::_exit(0);
  for (;;) {
    char op = 0;
    uint32_t len = 0;
    if (!read_bytes(fd, &op, 1) || !read_bytes(fd, &len, sizeof len) || len > kMaxName) ::_exit(0);
    std::string arg(len, '\0');
    if (!read_bytes(fd, arg.data(), len)) ::_exit(0);
    if (delay.count() > 0) {
      timespec ts{static_cast<time_t>(delay.count() / 1000), static_cast<long>(delay.count() % 1000) * 1'000'000};
      while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
    bool ok = true;
    if (op == 'D') {
      ModuleInfo info;
      uint8_t found = lookup_driver(ctx, arg, info) ? 1 : 0;
      uint8_t has_path = info.builtin == Known::kNo ? 1 : 0;
      ok = write_bytes(fd, &found, 1) && write_bytes(fd, &has_path, 1) && write_string(fd, info.name);
    } else if (op == 'A') {
      auto names = lookup_alias(ctx, arg);
      uint32_t count = static_cast<uint32_t>(names.size());
      ok = write_bytes(fd, &count, sizeof count);
      for (const auto& n : names) ok = ok && write_string(fd, n);
    } else {
      ::_exit(0);
    }
    if (!ok) ::_exit(0);
  }
}

}  // namespace

// Forks the child that answers the lookups; false only when no child can be forked (the caller
// then queries in this process). A child without a context is a finding: module facts unknown. No exec, no thread, no lock: between fork and _exit the
// child only calls libkmod, malloc (which glibc keeps usable after fork) and system calls.
bool ModuleResolver::start_child() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return false;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return false;
  }
  if (pid == 0) {
    ::close(fds[0]);
    child_main(fds[1], copy_.dir, budget_.child_delay);
  }
  ::close(fds[1]);
  child_ = pid;
  sock_ = fds[0];
  uint8_t hello = kNoContext;
  auto deadline = deadline_;
  bool got = read_bytes(sock_, &hello, 1, &deadline);
  if (!got || hello == kNoContext || hello > kUnconfined) {
    stop_child(!got && std::chrono::steady_clock::now() >= deadline_ ? out_of_time()
               : !got                ? "could not start (the child gave no answer)"
               : hello == kNoContext ? "could not start (no libkmod context for the index)"
                                     : "could not start (the child sent a malformed answer)");
    return true;
  }
  confined_ = hello == kConfined;
  return true;
}

// Ends the child (killed: it may be stuck) and reaps it; a reason becomes a finding.
void ModuleResolver::stop_child(const std::string& why) const {
  if (child_ <= 0) return;
  ::close(sock_);
  sock_ = -1;
  ::kill(child_, SIGKILL);
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(child_, &status, 0)) < 0 && errno == EINTR) {}
  child_ = -1;
  if (why.empty()) return;
  std::string how = why;
  if (r > 0 && WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
    how = fmt::format("ended with signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  findings_.push_back({index_rel_, fmt::format("libkmod lookup {}; module facts of the remaining functions stay unknown", how)});
}

// Why lookups stopped when the analysis's one deadline passed (the finding names lib/modules/R).
std::string ModuleResolver::out_of_time() const {
  return fmt::format("ran out of time: all lookups of one analysis together get {:g} s, and they are spent",
                     static_cast<double>(budget_.total.count()) / 1000.0);
}

// For lookups in this process (the fallback where no child can be forked, and tests): the same
// deadline, checked before each lookup; the first one past it adds the finding.
bool ModuleResolver::in_time() const {
  if (timed_out_) return false;
  if (index_rel_.empty() || std::chrono::steady_clock::now() < deadline_) return true;  // the live index is this machine's
  timed_out_ = true;
  findings_.push_back({index_rel_, fmt::format("libkmod lookup {}; module facts of the remaining functions stay unknown",
                                               out_of_time())});
  return false;
}

// One lookup in the child: 'D' fills flag (has a module file) and answer[0] (the name) when found;
// 'A' fills answer with the matching modules. False when the child is gone or misbehaves.
bool ModuleResolver::ask(char op, const std::string& arg, std::vector<std::string>& answer, bool& flag) const {
  if (child_ <= 0) return false;
  if (arg.size() > kMaxName) return false;
  auto deadline = deadline_;
  if (std::chrono::steady_clock::now() >= deadline) {
    stop_child(out_of_time());
    return false;
  }
  uint32_t len = static_cast<uint32_t>(arg.size());
  if (!write_bytes(sock_, &op, 1) || !write_bytes(sock_, &len, sizeof len) || !write_bytes(sock_, arg.data(), arg.size())) {
    stop_child("failed (the child stopped reading)");
    return false;
  }
  auto read_name = [&](std::string& out) {
    uint32_t n = 0;
    if (!read_bytes(sock_, &n, sizeof n, &deadline) || n > kMaxName) return false;
    out.assign(n, '\0');
    return read_bytes(sock_, out.data(), n, &deadline);
  };
  auto fail = [&] {
    stop_child(std::chrono::steady_clock::now() >= deadline ? out_of_time()
                                                            : std::string("failed (the child ended or sent a malformed answer)"));
    return false;
  };
  answer.clear();
  if (op == 'D') {
    uint8_t found = 0, has_path = 0;
    std::string name;
    if (!read_bytes(sock_, &found, 1, &deadline) || !read_bytes(sock_, &has_path, 1, &deadline) || !read_name(name))
      return fail();
    if (!found) return false;
    flag = has_path != 0;
    answer.push_back(std::move(name));
    return true;
  }
  uint32_t count = 0;
  if (!read_bytes(sock_, &count, sizeof count, &deadline) || count > kMaxMatches) return fail();
  for (uint32_t i = 0; i < count; ++i) {
    std::string name;
    if (!read_name(name)) return fail();
    answer.push_back(std::move(name));
  }
  return true;
}

// A sysroot's index files are read through the Sysroot (regular files inside the root, bounded),
// walked by kmod_index_problem(), and copied into a private directory that libkmod is given:
// libkmod opens no path of the sysroot, and every index it reads has been checked with bounds.
// One refused index leaves libkmod out altogether: a lookup missing an index would read as "no
// module", where the answer is unknown.
void ModuleResolver::copy_indexes(const Sysroot& root, const std::string& rel, KmodQueries where) {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> copies;
  const size_t limit = root.limits().max_file_bytes;
  for (const char* name : kIndexFiles) {
    std::string f = rel + "/" + name;
    if (!root.exists(f)) continue;
    auto data = root.read_bytes(f, limit + 1);
    std::optional<std::string> problem;
    if (!data) problem = "not a regular file inside the snapshot";
    else if (data->size() > limit) problem = fmt::format("larger than the {}-byte file limit", limit);
    else if (!data->empty()) problem = kmod_index_problem(data->data(), data->size());
    if (!problem && data->empty()) continue;  // depmod's empty file: libkmod opens none, as if absent
    if (problem) {
      findings_.push_back({f, fmt::format("libkmod index refused: {}; module facts stay unknown", *problem)});
      return;
    }
    copies.emplace_back(name, std::move(*data));
  }
  if (copies.empty() || copies.front().first != "modules.dep.bin") return;  // nothing libkmod could look up
  index_rel_ = rel;

  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/p2paudit-kmod-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) {
    findings_.push_back({rel, fmt::format("no private directory for libkmod's index ({}); module facts stay unknown",
                                          std::strerror(errno))});
    return;
  }
  copy_.dir = buf.data();
  copy_.on_signal.arm(copy_.dir, RemoveOnSignal::Kind::kDirectory);
  for (auto& [name, data] : copies) {
    std::string path = copy_.dir + "/" + name;
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) copy_.files.push_back(path);
    bool ok = fd >= 0 && write_all(fd, data);
    if (fd >= 0 && ::close(fd) != 0) ok = false;
    if (!ok) {
      findings_.push_back({rel + "/" + name, "libkmod index not copied to a private directory; module facts stay unknown"});
      return;
    }
  }
  if (where == KmodQueries::kConfinedChild && start_child()) return;
  ctx_ = kmod_new(copy_.dir.c_str(), kNoConfiguration);  // libkmod 30 reads /proc/cmdline here
}

ModuleResolver::ModuleResolver(const Sysroot& root, const std::string& kernel_release, KmodQueries where,
                               KmodBudget budget)
    : root_(root), budget_(budget), deadline_(std::chrono::steady_clock::now() + budget.total) {
  if (root.is_live()) {
    ctx_ = kmod_new(nullptr, nullptr);
  } else if (!root.is_archive() && is_safe_kernel_release(kernel_release)) {
    std::string rel = "lib/modules/" + kernel_release;
    if (auto resolved = root.resolve(rel)) copy_indexes(root, *resolved, where);
  }
  // Preloading the indexes only saves time; a tree without some of them (modules.builtin.bin,
  // say) still answers lookups from the ones it has.
  if (ctx_) kmod_load_resources(ctx_);
}

ModuleResolver::~ModuleResolver() {
  stop_child("");
  if (ctx_) kmod_unref(ctx_);
}

ModuleResolver::PrivateCopy::~PrivateCopy() {
  for (const auto& f : files) ::unlink(f.c_str());
  if (!dir.empty()) ::rmdir(dir.c_str());
}

ModuleInfo ModuleResolver::for_driver(const std::string& driver) const {
  ModuleInfo info;
  if (driver.empty()) return info;
  // The kernel links a driver to its module's sysfs entry (built-in drivers with a module name
  // too); only a loaded module has an initstate there.
  std::string name;
  if (auto link = root_.read_link("sys/bus/pci/drivers/" + driver + "/module")) name = link->substr(link->rfind('/') + 1);
  info.name = name;
  const std::string& module = name.empty() ? driver : name;
  std::vector<std::string> answer;
  bool has_path = false;
  if (ctx_) {
    if (in_time()) lookup_driver(ctx_, module, info);
  } else if (ask('D', module, answer, has_path)) {
    info.name = answer.front();
    if (has_path) info.builtin = Known::kNo;
  }
  if (root_.is_live() && root_.exists("sys/bus/pci/drivers/" + driver)) {
    bool loaded = !name.empty() && root_.exists("sys/module/" + name + "/initstate");
    info.builtin = loaded ? Known::kNo : Known::kYes;
  }
  if (!info.name.empty()) {
    if (auto v = root_.read_line("sys/module/" + info.name + "/version")) info.version = *v;
    if (auto v = root_.read_line("sys/module/" + info.name + "/srcversion")) info.srcversion = *v;
  }
  return info;
}
ModuleInfo ModuleResolver::for_modalias(const std::string& modalias) const {
  ModuleInfo info;
  if (modalias.empty()) return info;
  bool unused = false;
  if (ctx_) {
    if (in_time()) info.alias_matches = lookup_alias(ctx_, modalias);
  } else {
    ask('A', modalias, info.alias_matches, unused);
  }
  return info;
}

}  // namespace p2paudit
