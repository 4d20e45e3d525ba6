// SPDX-License-Identifier: GPL-2.0-or-later
// Files named on the command line (rule files, vendor facts, lspci dumps) come from strangers:
// only regular files are read, without blocking on FIFOs, and never more than a stated size.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace p2paudit {

inline constexpr size_t kMaxRuleFileBytes = 4u << 20;     // policy, advisories, kernel rules
inline constexpr size_t kMaxVendorFactsBytes = 16u << 20;
inline constexpr size_t kMaxDumpFileBytes = 64u << 20;    // lspci -xxxx of a very large machine

// The whole file; throws InputError naming `path` when it is missing, not a regular file
// (directory, FIFO, device, socket), unreadable, or larger than max_bytes.
std::string read_input_file(const std::string& path, size_t max_bytes);

// Text from hostile input made safe to print and to put in JSON: invalid UTF-8 bytes and
// control characters (C0 other than tab, DEL, C1 U+0080..U+009F as its two bytes) are shown as
// \xNN; other valid UTF-8 is kept.
std::string escape_text(std::string_view bytes);
bool is_clean_text(std::string_view bytes);  // true when escape_text() would change nothing
// The same for a value that is one line of the output (a field, a template value, a line of a
// commit message): line feed and tab are shown as \x0a and \x09 too, so input never starts a line.
std::string escape_line(std::string_view bytes);
// At most max_bytes of a field whose real size is known (a CPUID brand string, a host name), cut
// at a UTF-8 boundary and marked with "…" when longer; `cut` tells whether it was.
std::string bounded_field(std::string_view bytes, size_t max_bytes, bool* cut = nullptr);

// A gzip stream decompressed in memory (proc/config.gz), through libarchive's raw reader;
// nullopt when it cannot be read whole within max bytes.
std::optional<std::string> gunzip_bounded(std::string_view compressed, size_t max);

}  // namespace p2paudit
