// SPDX-License-Identifier: GPL-2.0-or-later
// Everything a sysroot holds, as text: each path with its kind, link target or bytes. Two
// sysroots read alike exactly when their texts are equal (the archive readers' comparison).
#pragma once

#include <string>

#include <fmt/format.h>

#include "p2paudit/sysroot.h"

namespace p2paudit::test {

inline void append_tree(const Sysroot& root, const std::string& dir, std::string& out, size_t& budget) {
  for (const auto& name : root.list(dir)) {
    if (budget == 0) return;
    --budget;
    const std::string path = dir.empty() ? name : dir + "/" + name;
    if (auto target = root.read_link(path)) {
      out += fmt::format("L {:?} -> {:?}\n", path, *target);
    } else if (auto bytes = root.read_bytes(path, root.limits().max_file_bytes)) {
      out += fmt::format("F {:?} {:?}\n", path, std::string(bytes->begin(), bytes->end()));
    } else {
      out += fmt::format("D {:?}\n", path);
      append_tree(root, path, out, budget);
    }
  }
}

// At most max_entries paths (a fuzzer's archive may hold many). A capture inside one top
// directory lists nothing at its top: its sys/ and proc/ are walked by name.
inline std::string tree_text(const Sysroot& root, size_t max_entries = 1'000'000) {
  std::string out;
  append_tree(root, "", out, max_entries);
  if (out.empty())
    for (const char* top : {"sys", "proc"}) {
      out += fmt::format("D {:?}\n", top);
      append_tree(root, top, out, max_entries);
    }
  return out;
}

}  // namespace p2paudit::test
