// SPDX-License-Identifier: GPL-2.0-or-later
// The peak memory of one run of the tool, for tests that check it stays flat in the pairs.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "test_support.h"

namespace p2paudit::test {

// The tool's peak RSS in KiB for `args`, its output thrown away; -1 when it did not exit 0.
inline long peak_rss_kib(const std::vector<std::string>& args) {
  std::string tool = tool_file();
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1), ::dup2(null, 2);
    std::vector<char*> argv{tool.data()};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(tool.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  if (pid < 0 || ::wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return usage.ru_maxrss;
}

}  // namespace p2paudit::test
