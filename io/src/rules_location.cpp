// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/rules_location.h"

#include <dlfcn.h>

#include <cstdlib>
#include <optional>
#include <system_error>

namespace p2paudit {

namespace {

// The file the anchor was loaded from; nullopt when the system will not say.
std::optional<std::filesystem::path> anchor_file(RulesAnchor anchor) {
  std::error_code ec;
  if (anchor == RulesAnchor::kExecutable) {
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return std::nullopt;
    return exe;
  }
  // dladdr names the object that holds this function: the shared library it was linked into.
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&find_rules_dir), &info) == 0 || !info.dli_fname || !*info.dli_fname)
    return std::nullopt;
  auto file = std::filesystem::canonical(info.dli_fname, ec);
  if (ec) return std::nullopt;
  return file;
}

}  // namespace

std::filesystem::path find_rules_dir(const std::string& given, RulesAnchor anchor) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("P2PAUDIT_RULES_DIR"); env && *env) return env;
  if (auto file = anchor_file(anchor)) {
    // Relative paths from the install's bin/ and lib/ directories, computed at configure time:
    // the layout moves with the prefix, the prefix itself is never assumed.
    auto installed = file->parent_path() /
                     (anchor == RulesAnchor::kExecutable ? P2PAUDIT_BINDIR_TO_RULES : P2PAUDIT_LIBDIR_TO_RULES);
    std::error_code ec;
    if (std::filesystem::is_directory(installed, ec)) return installed.lexically_normal();
  }
  return P2PAUDIT_SOURCE_RULES_DIR;
}

}  // namespace p2paudit
