// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/runtime_versions.h"

#include <algorithm>

#include <fmt/format.h>

#include "p2paudit/input_file.h"

namespace p2paudit {

namespace {

// A version file is one short line; more than this is not one (and is not read further).
constexpr size_t kMaxVersionFile = 4096;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_version_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-' || c == '_' ||
         c == '+' || c == '~' || c == ':';
}

// The file's bytes when it is present and no larger than a version file; a larger one is a finding.
std::optional<std::string> read_version_file(const Sysroot& root, const char* rel, std::vector<Finding>& findings) {
  auto bytes = root.read_bytes(rel, kMaxVersionFile + 1);
  if (!bytes) return std::nullopt;
  if (bytes->size() > kMaxVersionFile) {
    findings.push_back({rel, fmt::format("larger than the {} bytes of a version file: the version is unknown", kMaxVersionFile)});
    return std::nullopt;
  }
  return std::string(bytes->begin(), bytes->end());
}

// A file holding just a version and its newline (sysfs `version`, ROCm's .info/version).
std::string one_line_version(const Sysroot& root, const char* rel, std::vector<Finding>& findings) {
  auto text = read_version_file(root, rel, findings);
  if (!text) return "";
  std::string_view v = *text;
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  if (is_version_text(v)) return std::string(v);
  const std::string shown = escape_text(v.substr(0, kMaxVersionText));
  findings.push_back({rel, fmt::format("'{}'{} is not a version (at most {} letters, digits and . - _ + ~ :, starting "
                                       "with a digit, on one line): the version is unknown",
                                       shown, v.size() > kMaxVersionText ? "..." : "", kMaxVersionText)});
  return "";
}

}  // namespace

bool is_version_text(std::string_view text) {
  return !text.empty() && text.size() <= kMaxVersionText && is_digit(text.front()) &&
         std::all_of(text.begin(), text.end(), is_version_char);
}

std::optional<std::int64_t> version_major(std::string_view version) {
  size_t digits = 0;
  while (digits < version.size() && is_digit(version[digits])) ++digits;
  if (digits == 0 || digits > 6) return std::nullopt;
  std::int64_t major = 0;
  for (size_t i = 0; i < digits; ++i) major = major * 10 + (version[i] - '0');
  return major;
}

std::optional<std::string> nvidia_proc_version(std::string_view text) {
  constexpr std::string_view kPrefix = "NVRM version:";
  std::string_view line = text.substr(0, text.find('\n'));
  // The driver writes printable ASCII; a line with anything else is not its line.
  if (!line.starts_with(kPrefix) ||
      !std::all_of(line.begin(), line.end(), [](char c) { return c == '\t' || (c >= 0x20 && c < 0x7f); }))
    return std::nullopt;
  line.remove_prefix(kPrefix.size());
  while (!line.empty()) {
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string_view::npos) break;
    line.remove_prefix(start);
    std::string_view word = line.substr(0, line.find_first_of(" \t"));
    line.remove_prefix(word.size());
    bool dotted = word.find('.') != std::string_view::npos && is_digit(word.front()) &&
                  std::all_of(word.begin(), word.end(), [](char c) { return is_digit(c) || c == '.'; });
    if (dotted) return is_version_text(word) ? std::optional<std::string>(word) : std::nullopt;
  }
  return std::nullopt;
}

RuntimeVersions read_runtime_versions(const Sysroot& root, std::vector<Finding>& findings) {
  RuntimeVersions v;
  // The running driver's own statement first; the module's sysfs version is the same string.
  if (auto text = read_version_file(root, kNvidiaProcVersionPath, findings)) {
    if (auto version = nvidia_proc_version(*text)) {
      v.nvidia_driver = *version;
      v.nvidia_driver_source = std::string("/") + kNvidiaProcVersionPath;
    } else {
      findings.push_back({kNvidiaProcVersionPath,
                          fmt::format("the first line is not \"NVRM version: ... <version> ...\" ('{}'): the driver "
                                      "version is read from {} if present",
                                      escape_text(std::string_view(*text).substr(0, std::min(text->find('\n'), size_t{80}))),
                                      kNvidiaModuleVersionPath)});
    }
  }
  if (v.nvidia_driver.empty()) {
    v.nvidia_driver = one_line_version(root, kNvidiaModuleVersionPath, findings);
    if (!v.nvidia_driver.empty()) v.nvidia_driver_source = std::string("/") + kNvidiaModuleVersionPath;
  }
  v.amdgpu_module = one_line_version(root, kAmdgpuModuleVersionPath, findings);
  v.rocm = one_line_version(root, kRocmVersionPath, findings);
  return v;
}

}  // namespace p2paudit
