// SPDX-License-Identifier: GPL-2.0-or-later
// The kernel-oracle captures (tests/data/kernel-oracle, its SOURCE.md) as the tests read them: the
// case names, each case's meta.txt, and a case name as a GoogleTest parameter name.
#pragma once

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "test_support.h"

namespace p2paudit::test {

inline std::filesystem::path oracle_dir() { return data_path("kernel-oracle"); }

// Every case with the kernel's verdicts, sorted.
inline std::vector<std::string> oracle_cases() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(oracle_dir(), ec))
    if (std::filesystem::exists(e.path() / "verdicts.txt")) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A case's meta.txt as KEY -> value ("whitelist", "cmdline", "extra_whitelist_used", ...).
inline std::map<std::string, std::string> read_oracle_meta(const std::string& name) {
  std::map<std::string, std::string> meta;
  std::ifstream in(oracle_dir() / name / "meta.txt");
  for (std::string line; std::getline(in, line);)
    if (auto eq = line.find('='); eq != std::string::npos) meta[line.substr(0, eq)] = line.substr(eq + 1);
  return meta;
}

// A case name as INSTANTIATE_TEST_SUITE_P wants it: letters, digits and '_'.
inline std::string oracle_param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

}  // namespace p2paudit::test
