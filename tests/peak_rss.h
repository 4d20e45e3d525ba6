// SPDX-License-Identifier: GPL-2.0-or-later
// For tests that check the tool's memory stays flat in the pairs: its peak in one run, and a
// machine whose pairs are mostly whitelist candidates' pairs.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <cstdlib>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "synth.h"
#include "test_support.h"

namespace p2paudit::test {

// The tool's exit status (-1 when it did not exit) and peak RSS in KiB for `args`, its standard
// error kept in `err_file`, its address space capped at `cap_bytes` so that a regression that would
// take the machine's memory runs out of it instead (not under a sanitizer: it reserves terabytes of
// address space and keeps its own limit, hard_rss_limit_mb, added to the suite's ASAN_OPTIONS).
struct MeasuredRun {
  int status = -1;
  long peak_rss_kib = -1;
};
inline MeasuredRun run_measured(const std::vector<std::string>& args, const std::string& err_file,
                                rlim_t cap_bytes = RLIM_INFINITY) {
  std::string tool = tool_file();
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (null < 0 || err < 0) ::_exit(126);
    ::dup2(null, 1), ::dup2(err, 2);
    if (!kSanitized) {
      struct rlimit cap {cap_bytes, cap_bytes};
      if (cap_bytes != RLIM_INFINITY) ::setrlimit(RLIMIT_AS, &cap);
    } else if (cap_bytes != RLIM_INFINITY) {
      const char* given = std::getenv("ASAN_OPTIONS");
      std::string options = std::string(given && *given ? given : "") + (given && *given ? ":" : "") +
                            "hard_rss_limit_mb=2000";
      ::setenv("ASAN_OPTIONS", options.c_str(), 1);
    }
    std::vector<char*> argv{tool.data()};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(tool.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  MeasuredRun run;
  if (pid < 0 || ::wait4(pid, &status, 0, &usage) != pid) return run;
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.peak_rss_kib = usage.ru_maxrss;
  return run;
}

// The tool's peak RSS in KiB for `args`, its output thrown away; -1 when it did not exit 0.
inline long peak_rss_kib(const std::vector<std::string>& args) {
  MeasuredRun run = run_measured(args, "/dev/null");
  return run.status == 0 ? run.peak_rss_kib : -1;
}

// Switches of 16 x 4 endpoints under each of `root_ports` root ports of one Intel host bridge,
// under 5.4.0, whose whitelist lacks it: every pair across two root ports is a candidate's pair.
inline void write_candidate_machine(const std::filesystem::path& dir, int root_ports) {
  synth::Options o;
  o.host_bridges = 1;
  o.root_ports = root_ports;
  o.depth = 1;
  o.fanout = 16;
  o.endpoints_per_port = 4;
  o.vfs = 0;
  o.cpu = synth::CpuVendor::kIntel;
  o.kernel = "5.4.0";
  std::filesystem::create_directories(dir);
  synth::Machine::plan(o).write_directory(dir.string());
}

}  // namespace p2paudit::test
