// SPDX-License-Identifier: GPL-2.0-or-later
// libkmod's index files (modules.*.bin, written by depmod) checked before libkmod sees them:
// libkmod maps them and follows their offsets without bounds (a stranger's index can crash the
// process or loop it), so a sysroot's index is handed over only when every node lies inside the
// file and the nodes form a tree of bounded depth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace p2paudit {

// Deepest node path accepted: depmod's trie consumes at least one key byte per level, and keys are
// module aliases and symbols (KSYM_NAME_LEN is 512), so real indexes stay far below this.
inline constexpr size_t kKmodIndexMaxDepth = 1024;

// Mirrors index_mm_open() and index_mm_read_node() of libkmod's libkmod/libkmod-index.c
// (kmod v30; source: https://git.kernel.org/pub/scm/utils/kernel/kmod/kmod.git/tree/libkmod/libkmod-index.c),
// with the bounds libkmod does not check: header (magic 0xB007F457, major version 2, root
// offset), then every node reached from the root: its offset inside the file, its prefix and
// values NUL-terminated inside the file, children `first <= last < 128` with their offsets inside
// the file, each node reached once and below its parent (depmod writes children first), depth at
// most kKmodIndexMaxDepth. nullopt when libkmod can read it safely, else what is wrong.
std::optional<std::string> kmod_index_problem(const uint8_t* data, size_t size);

}  // namespace p2paudit
