// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/remove_on_signal.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace p2paudit {

namespace {

// A slot is free, being written (its owner thread fills path and kind), or armed. The handler
// reads only armed slots; atomics of int are lock-free, so reading them in a handler is safe.
enum State : int { kFree = 0, kWriting = 1, kArmed = 2 };
std::atomic<int> g_state[RemoveOnSignal::kSlots];
pid_t g_owner[RemoveOnSignal::kSlots];
bool g_directory[RemoveOnSignal::kSlots];
char g_path[RemoveOnSignal::kSlots][PATH_MAX];

// The files directly in an open directory, unlinked through getdents64 (opendir and readdir may
// allocate, so they are not safe in a handler).
void remove_files_in(int dir) {
  alignas(8) char buf[4096];
  for (;;) {
    long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) return;
    for (long at = 0; at < n;) {
      struct Dirent64 {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const auto* d = reinterpret_cast<const Dirent64*>(buf + at);
      at += d->reclen;
      if (std::strcmp(d->name, ".") != 0 && std::strcmp(d->name, "..") != 0) ::unlinkat(dir, d->name, 0);
    }
  }
}

void on_signal(int sig) {
  const int saved = errno;
  const pid_t self = ::getpid();  // a forked child (libkmod's, a probe's) inherits the table: not its to remove
  for (int i = 0; i < RemoveOnSignal::kSlots; ++i) {
    if (g_state[i].load(std::memory_order_acquire) != kArmed || g_owner[i] != self) continue;
    if (!g_directory[i]) {
      ::unlink(g_path[i]);
      continue;
    }
    int dir = ::open(g_path[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir >= 0) {
      remove_files_in(dir);
      ::close(dir);
    }
    ::rmdir(g_path[i]);
  }
  errno = saved;
  ::signal(sig, SIG_DFL);
  ::raise(sig);  // delivered once the handler returns: the process ends as the signal says
}

// Installed once, the first time anything is armed. A signal the process was started with
// ignored (nohup, a background job of a non-interactive shell) stays ignored.
void install_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old{};
      if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
      struct sigaction sa{};
      sa.sa_handler = on_signal;
      sigemptyset(&sa.sa_mask);
      for (int other : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&sa.sa_mask, other);  // one cleanup at a time
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

}  // namespace

bool RemoveOnSignal::arm(const std::string& path, Kind kind) {
  disarm();
  if (path.empty() || path.size() >= PATH_MAX) return false;
  install_handler();
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!g_state[i].compare_exchange_strong(expected, kWriting, std::memory_order_acq_rel)) continue;
    std::memcpy(g_path[i], path.c_str(), path.size() + 1);
    g_directory[i] = kind == Kind::kDirectory;
    g_owner[i] = ::getpid();
    g_state[i].store(kArmed, std::memory_order_release);
    slot_ = i;
    return true;
  }
  return false;
}

void RemoveOnSignal::disarm() {
  if (slot_ < 0) return;
  g_state[slot_].store(kFree, std::memory_order_release);
  slot_ = -1;
}

}  // namespace p2paudit
