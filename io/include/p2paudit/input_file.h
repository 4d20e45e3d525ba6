// SPDX-License-Identifier: GPL-2.0-or-later
// Files named on the command line (rule files, vendor facts, lspci dumps) come from strangers:
// only regular files are read, without blocking on FIFOs, and never more than a stated size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace p2paudit {

inline constexpr size_t kMaxRuleFileBytes = 4u << 20;     // policy, advisories, kernel rules
inline constexpr size_t kMaxVendorFactsBytes = 16u << 20;
inline constexpr size_t kMaxDumpFileBytes = 64u << 20;    // lspci -xxxx of a very large machine

// A file descriptor that is closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) noexcept : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  void reset() noexcept;
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

// How read_bounded() reads a file whose end it cannot know in advance.
struct BoundedRead {
  size_t first_read = 8192;  // the first read's size (a file's size + 1 where fstat gave one)
  size_t step = 8192;        // the buffer then grows to twice its size plus this
  // Where a plain file system's file ends (its fstat size): reached, no read is made to see 0.
  uint64_t known_size = UINT64_MAX;
  // A read returning less than asked is the end (regular files on disk; never sysfs or procfs,
  // whose seq_file stops short).
  bool short_read_ends = false;
};

// An open file read to its end, keeping at most max + 1 bytes (one more than allowed, so that the
// caller can tell a file that is too large). nullopt when a read fails; *error then holds errno
// (EAGAIN: a FIFO that has a writer).
std::optional<std::string> read_bounded(int fd, size_t max, const BoundedRead& how = {}, int* error = nullptr);

// The whole file; throws InputError naming `path` when it is missing, not a regular file
// (directory, FIFO, device, socket), unreadable, or larger than max_bytes.
std::string read_input_file(const std::string& path, size_t max_bytes);

// Text from hostile input made safe for a reader, the one gate every text output uses
// (TextGate, text_style.h): invalid UTF-8 bytes and control characters (C0 other than tab, DEL,
// C1 U+0080..U+009F as its two bytes) are shown as \xNN, and the characters that change what a
// reader sees without being seen (bidi controls, zero-width characters: hidden_characters.h) as
// \u{XXXX}, at least four lowercase hex digits; other valid UTF-8 is kept.
std::string escape_text(std::string_view bytes);
bool is_clean_text(std::string_view bytes);  // true when escape_text() would change nothing
// Only what breaks the encoding or a terminal: invalid UTF-8 and control characters as \xNN, the
// hidden characters kept. For JSON (json_output.h), whose readers are programs that must get the
// value, and for values the readers store, which reach text through the gate.
std::string escape_bytes(std::string_view bytes);
bool is_clean_bytes(std::string_view bytes);  // true when escape_bytes() would change nothing
// The same for a value that is one line of the output (a field, a template value, a line of a
// commit message): line feed and tab are shown as \x0a and \x09 too, so input never starts a line.
std::string escape_line(std::string_view bytes);
// At most max_bytes of a field whose real size is known (a CPUID brand string, a host name), cut
// at a UTF-8 boundary and marked with "…" when longer; `cut` tells whether it was.
std::string bounded_field(std::string_view bytes, size_t max_bytes, bool* cut = nullptr);

// A gzip stream decompressed in memory (proc/config.gz), through libarchive's raw reader;
// nullopt when it cannot be read whole within max bytes. Throws InputError naming `name` when
// libarchive cannot be loaded (archive_library.h).
std::optional<std::string> gunzip_bounded(std::string_view compressed, size_t max,
                                          std::string_view name = "a gzip stream");

}  // namespace p2paudit
