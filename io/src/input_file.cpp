// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "p2paudit/archive_library.h"
#include "p2paudit/byte_words.h"
#include "p2paudit/errors.h"
#include "p2paudit/hidden_characters.h"
#include "p2paudit/text_style.h"

namespace p2paudit {

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device node";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The UTF-8 sequence starting at s[i]: its length, 0 when it is not a valid one, and its code point.
struct Sequence {
  size_t len;
  char32_t cp;
};
Sequence utf8_sequence(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return {1, c};
  size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return {0, 0};
  char32_t cp = c & (0x7f >> len);
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return {0, 0};
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  static const char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return {0, 0};  // overlong, surrogate
  return {len, cp};
}

bool is_control(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

// The end of the run of printable ASCII and tabs that starts at i, eight bytes at a time while
// they are all printable (byte_words.h): text is almost all such bytes, and no class below holds
// one of them (every hidden character is above U+00AC, so a byte 0x80 or above leaves the run).
size_t skip_plain_ascii(std::string_view s, size_t i) {
  using namespace byte_words;
  while (i < s.size()) {
    if (i + 8 <= s.size()) {
      const std::uint64_t v = load(s.data() + i);
      if (!any_high(v) && !any_below(v, 0x20) && !any_equal(v, 0x7f)) {
        i += 8;
        continue;
      }
    }
    for (size_t end = std::min(i + 8, s.size()); i < end; ++i) {
      auto c = static_cast<unsigned char>(s[i]);
      if (c >= 0x7f || (c < 0x20 && c != '\t')) return i;
    }
  }
  return i;
}

// How the text at s[i] is shown: kept, each of its `len` bytes as \xNN, or as its code point \u{XXXX}.
enum class Shown { kKept, kBytes, kCodePoint };
struct Judged {
  Shown shown;
  size_t len;
  char32_t cp;
};

// The one judgement every escape and every clean-text test makes. Bytes: invalid UTF-8, C0
// controls but tab, DEL, and C1 controls (U+0080..U+009F, CSI U+009B among them: valid UTF-8 that
// terminals obey as ESC; both bytes, so the escaped text reads back as the same code point).
// With `hidden`, also the characters that change what a reader sees (hidden_characters.h).
Judged judge(std::string_view s, size_t i, bool hidden) {
  auto [len, cp] = utf8_sequence(s, i);
  if (len == 0) return {Shown::kBytes, 1, 0};
  if (len == 1) return {is_control(static_cast<unsigned char>(s[i])) ? Shown::kBytes : Shown::kKept, 1, cp};
  if (cp <= 0x9f) return {Shown::kBytes, len, cp};
  if (hidden && is_hidden_character(cp)) return {Shown::kCodePoint, len, cp};
  return {Shown::kKept, len, cp};
}

bool is_clean(std::string_view s, bool hidden) {
  for (size_t i = skip_plain_ascii(s, 0); i < s.size(); i = skip_plain_ascii(s, i)) {
    Judged j = judge(s, i, hidden);
    if (j.shown != Shown::kKept) return false;
    i += j.len;
  }
  return true;
}

std::string escape(std::string_view s, bool hidden) {
  if (is_clean(s, hidden)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 16);
  for (size_t i = 0; i < s.size();) {
    size_t plain = skip_plain_ascii(s, i);
    out.append(s.substr(i, plain - i));
    if ((i = plain) == s.size()) break;
    Judged j = judge(s, i, hidden);
    if (j.shown == Shown::kBytes)
      for (size_t k = 0; k < j.len; ++k) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i + k]));
    else if (j.shown == Shown::kCodePoint)
      out += fmt::format("\\u{{{:04x}}}", static_cast<std::uint32_t>(j.cp));
    else
      out.append(s.substr(i, j.len));
    i += j.len;
  }
  return out;
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Fd::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::optional<std::string> read_bounded(int fd, size_t max, const BoundedRead& how, int* error) {
  // A small file is read into `first`, on the stack: a string sized for the first read would be
  // cleared first, 8 KiB for every 5-byte sysfs attribute. `data` takes the bytes once they outgrow it.
  char first[8192];
  std::string data;
  size_t capacity = std::min(max + 1, how.first_read);
  char* buf = first;
  if (capacity > sizeof first) {
    data.resize(capacity);
    buf = data.data();
  }
  size_t used = 0;
  while (used <= max && used != how.known_size) {
    if (used == capacity) {
      if (buf == first) data.assign(first, used);
      capacity = std::min(max + 1, capacity * 2 + how.step);
      data.resize(capacity);
      buf = data.data();
    }
    const size_t asked = capacity - used;
    ssize_t n = ::read(fd, buf + used, asked);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (error) *error = errno;
      return std::nullopt;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
    if (how.short_read_ends && static_cast<size_t>(n) < asked) break;
  }
  if (buf == first) return std::string(first, used);
  data.resize(used);
  return data;
}

std::string read_input_file(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) throw InputError(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw InputError(fmt::format("{}: {}, not a regular file", path, file_kind(st.st_mode)));
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    throw InputError(fmt::format("{}: {} bytes, more than the limit of {} bytes", path, st.st_size, max_bytes));
  // procfs and sysfs files report size 0 or less than they hold: read to EOF, bounded.
  int error = 0;
  auto data = read_bounded(fd.get(), max_bytes, {.first_read = size_t(st.st_size) + 1, .step = 4096}, &error);
  if (!data) throw InputError(fmt::format("{}: read error: {}", path, std::strerror(error)));
  if (data->size() > max_bytes) throw InputError(fmt::format("{}: more than the limit of {} bytes", path, max_bytes));
  return std::move(*data);
}

bool is_clean_text(std::string_view s) { return is_clean(s, true); }
std::string escape_text(std::string_view s) { return escape(s, true); }
bool is_clean_bytes(std::string_view s) { return is_clean(s, false); }
std::string escape_bytes(std::string_view s) { return escape(s, false); }

// text_style.h: what the gate shows, since it escapes whatever is written through it.
size_t text_columns(std::string_view s) {
  size_t columns = 0;
  for (size_t i = 0; i < s.size();) {
    size_t plain = skip_plain_ascii(s, i);
    columns += plain - i;
    if ((i = plain) == s.size()) break;
    Judged j = judge(s, i, true);
    if (s[i] == '\n') columns += 1;  // a line feed ends the line the gate shows; it is not escaped there
    else if (j.shown == Shown::kBytes) columns += 4 * j.len;
    else if (j.shown == Shown::kCodePoint)
      columns += fmt::formatted_size("\\u{{{:04x}}}", static_cast<std::uint32_t>(j.cp));
    else columns += 1;
    i += j.len;
  }
  return columns;
}

std::string escape_line(std::string_view s) {
  std::string out = escape_text(s);
  if (out.find_first_of("\n\t") == std::string::npos) return out;
  std::string line;
  for (char c : out) line += c == '\n' ? std::string("\\x0a") : c == '\t' ? std::string("\\x09") : std::string(1, c);
  return line;
}

std::string bounded_field(std::string_view s, size_t max_bytes, bool* cut) {
  if (cut) *cut = s.size() > max_bytes;
  if (s.size() <= max_bytes) return std::string(s);
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xc0) == 0x80) --end;  // not inside a sequence
  return std::string(s.substr(0, end)) + "\u2026";
}

// A gzip stream in memory, through libarchive's raw reader and writer (no zlib of our own);
// nullopt when it cannot be read whole within max bytes.
std::optional<std::string> gunzip_bounded(std::string_view compressed, size_t max, std::string_view name) {
  const ArchiveLibrary& la = archive_library("decompress", name);
  struct archive* a = la.archive_read_new();
  la.archive_read_support_filter_gzip(a);
  la.archive_read_support_format_raw(a);
  std::optional<std::string> out;
  struct archive_entry* entry;
  if (la.archive_read_open_memory(a, compressed.data(), compressed.size()) == ARCHIVE_OK &&
      la.archive_read_next_header(a, &entry) == ARCHIVE_OK) {
    std::string data;
    char buf[1 << 16];
    la_ssize_t n;
    while ((n = la.archive_read_data(a, buf, sizeof buf)) > 0 && data.size() <= max)
      data.append(buf, static_cast<size_t>(n));
    if (n == 0 && data.size() <= max) out = std::move(data);
  }
  la.archive_read_free(a);
  return out;
}

}  // namespace p2paudit
