// SPDX-License-Identifier: GPL-2.0-or-later
// Where the rules/ data (kernel whitelist, default policy, advisories) is found when nobody names
// it, so that an installed tree works wherever it was moved to and the build tree keeps working.
#pragma once

#include <filesystem>
#include <string>

namespace p2paudit {

// Whose installed copy to look for: the running program's (bin/../share/p2paudit/rules) or the
// shared library's that holds this code (lib/../share/p2paudit/rules).
enum class RulesAnchor { kExecutable, kSharedLibrary };

// The first of: `given` when not empty (--rules-dir, the library's argument); $P2PAUDIT_RULES_DIR
// when set; the installed copy at the install layout's place relative to the anchor's own file,
// when it is a directory; else the source tree's rules/ (the build tree's binaries and tests).
std::filesystem::path find_rules_dir(const std::string& given, RulesAnchor anchor);

}  // namespace p2paudit
