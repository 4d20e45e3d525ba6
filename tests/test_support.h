// SPDX-License-Identifier: GPL-2.0-or-later
// Helpers shared by the tests: running a command, listing data files.
#pragma once

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace p2paudit::test {

// Built with ASan or UBSan (scripts/ci-sanitizers): the tool under test carries their runtime,
// which opens files and holds freed memory of its own.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define P2PAUDIT_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define P2PAUDIT_SANITIZED 1
#endif
#ifdef P2PAUDIT_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

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

// The test data, the rules and the tool this suite was built with, unless the environment names
// copies: tests/run_unprivileged copies them where the user nobody can read them (a clone in a
// 0700 home directory is out of its reach) and sets P2PAUDIT_TEST_DATA_DIR, P2PAUDIT_TEST_RULES_DIR
// and P2PAUDIT_TEST_TOOL_PATH.
inline std::string built_or_copied(const char* variable, const char* built_in) {
  const char* copy = std::getenv(variable);
  return copy && *copy ? copy : built_in;
}
inline std::string data_dir() { return built_or_copied("P2PAUDIT_TEST_DATA_DIR", P2PAUDIT_TEST_DATA); }
#ifdef P2PAUDIT_SOURCE_RULES_DIR
inline std::string rules_source() { return built_or_copied("P2PAUDIT_TEST_RULES_DIR", P2PAUDIT_SOURCE_RULES_DIR); }
#endif
#ifdef P2PAUDIT_TOOL
inline std::string tool_file() { return built_or_copied("P2PAUDIT_TEST_TOOL_PATH", P2PAUDIT_TOOL); }
#endif

inline std::string data_path(const std::string& relative) { return data_dir() + "/" + relative; }

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
