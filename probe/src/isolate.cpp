// SPDX-License-Identifier: GPL-2.0-or-later
// run_isolated(): fork, a pipe of newline-delimited JSON messages, poll() with a deadline.
#include "p2paudit/probe/isolate.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace p2paudit::probe {

namespace {

int g_child_fd = -1;  // the message pipe, set in the child only

void write_all(int fd, const std::string& data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(3);  // the parent is gone or stopped reading
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void send(const nlohmann::json& message) {
  if (g_child_fd < 0) return;
  write_all(g_child_fd, message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

[[noreturn]] void child_main(int fd, const std::function<nlohmann::json()>& body) {
  g_child_fd = fd;
  setpgid(0, 0);
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  dup2(STDERR_FILENO, STDOUT_FILENO);  // a runtime's prints never reach the tool's output
  signal(SIGPIPE, SIG_DFL);
  int code = 0;
  try {
    nlohmann::json value = body();
    send({{"result", std::move(value)}});
  } catch (const std::exception& e) {
    send({{"error", e.what()}});
    code = 1;
  } catch (...) {
    send({{"error", "unknown exception"}});
    code = 1;
  }
  _exit(code);
}

using Clock = std::chrono::steady_clock;

}  // namespace

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGPIPE: return "SIGPIPE";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGALRM: return "SIGALRM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return "signal " + std::to_string(sig);
  }
}

void isolated_phase(const std::string& phase) { send({{"phase", phase}}); }

void isolated_partial(const nlohmann::json& piece) { send({{"partial", piece}}); }

IsolatedResult run_isolated(const std::string& phase, int timeout_seconds,
                            const std::function<nlohmann::json()>& body, size_t max_bytes) {
  IsolatedResult r;
  r.phase = phase;
  if (timeout_seconds < 1) timeout_seconds = 1;

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.status = "failed";
    r.error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);  // no buffered output duplicated in the child
  pid_t pid = fork();
  if (pid < 0) {
    r.status = "failed";
    r.error = std::string("fork: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return r;
  }
  if (pid == 0) {
    close(fds[0]);
    child_main(fds[1], body);
  }
  close(fds[1]);
  setpgid(pid, pid);  // also set by the child; whichever runs first

  std::string buffer;       // bytes not yet split into lines
  size_t total = 0;
  bool got_result = false;
  std::string failure;      // a protocol failure found by the parent
  bool killed_for_time = false;
  auto deadline = Clock::now() + std::chrono::seconds(timeout_seconds);

  auto handle_line = [&](const std::string& line) {
    auto message = nlohmann::json::parse(line, nullptr, false);
    if (message.is_discarded() || !message.is_object()) {
      failure = "the child sent a message that is not JSON";
      return;
    }
    if (message.contains("phase") && message["phase"].is_string()) {
      r.phase = message["phase"].get<std::string>();
      deadline = Clock::now() + std::chrono::seconds(timeout_seconds);
    } else if (message.contains("partial")) {
      r.partial.push_back(std::move(message["partial"]));
    } else if (message.contains("result")) {
      r.value = std::move(message["result"]);
      got_result = true;
    } else if (message.contains("error") && message["error"].is_string()) {
      failure = message["error"].get<std::string>();
    }
  };

  char chunk[65536];
  for (;;) {
    auto now = Clock::now();
    if (now >= deadline) {
      killed_for_time = true;
      break;
    }
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    pollfd p{fds[0], POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(std::min<long long>(ms + 1, 60000)));
    if (n < 0) {
      if (errno == EINTR) continue;
      failure = std::string("poll: ") + std::strerror(errno);
      break;
    }
    if (n == 0) continue;
    ssize_t got = read(fds[0], chunk, sizeof chunk);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      failure = std::string("read: ") + std::strerror(errno);
      break;
    }
    if (got == 0) break;  // EOF: the child (and anything it started) closed the pipe
    total += static_cast<size_t>(got);
    if (total > max_bytes) {
      failure = "the child's output exceeded " + std::to_string(max_bytes) + " bytes";
      break;
    }
    buffer.append(chunk, static_cast<size_t>(got));
    size_t start = 0;
    for (size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1)
      handle_line(buffer.substr(start, nl - start));
    buffer.erase(0, start);
  }
  close(fds[0]);

  // Reap the child. After EOF it is exiting: wait for that (still within the deadline) without
  // reaping, so that its process group id stays reserved while whatever it left behind is killed.
  if (!killed_for_time && failure.empty()) {
    siginfo_t info{};
    for (;;) {
      info.si_pid = 0;
      if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 && errno != EINTR) break;
      if (info.si_pid == pid) break;
      if (Clock::now() >= deadline) {
        killed_for_time = true;
        break;
      }
      usleep(1000);
    }
  }
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);  // no effect on a child that already exited (its status stays)
  int raw = 0;
  while (waitpid(pid, &raw, 0) < 0 && errno == EINTR) {}

  if (killed_for_time) {
    r.status = "hung";
    r.error = "no answer within " + std::to_string(timeout_seconds) + " s (child killed)";
  } else if (!failure.empty()) {
    r.status = "failed";
    r.error = failure;
  } else if (WIFSIGNALED(raw)) {
    r.status = "crashed";
    r.error = signal_name(WTERMSIG(raw));
  } else if (got_result) {
    r.status = "ok";
  } else {
    r.status = "failed";
    r.error = WIFEXITED(raw) ? "the child exited with status " + std::to_string(WEXITSTATUS(raw)) + " without a result"
                             : "the child ended without a result";
  }
  if (!r.ok()) r.value = nullptr;
  return r;
}

}  // namespace p2paudit::probe
