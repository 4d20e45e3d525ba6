// SPDX-License-Identifier: GPL-2.0-or-later
// Helpers shared by the tests: running a command, listing data files.
#pragma once

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace p2paudit::test {

struct CommandResult {
  int status = -1;
  std::string output;  // stdout only; stderr goes to the test log unless redirected in the command
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string data_path(const std::string& relative) { return std::string(P2PAUDIT_TEST_DATA) + "/" + relative; }

// Every sysroot capture in tests/data: the machines and the kernel-oracle cases.
inline std::vector<std::string> fixture_sysroots() {
  std::vector<std::string> out;
  for (const char* dir : {"machines", "kernel-oracle"}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(data_path(dir), ec))
      if (std::filesystem::exists(e.path() / "sysroot.tar.gz")) out.push_back((e.path() / "sysroot.tar.gz").string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string case_name(const std::string& sysroot_path) {
  std::string name = std::filesystem::path(sysroot_path).parent_path().filename().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

}  // namespace p2paudit::test
