// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "p2paudit/archive_library.h"
#include "p2paudit/errors.h"

namespace p2paudit {

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device node";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Length of the UTF-8 sequence starting at s[i], 0 when it is not a valid one.
size_t utf8_sequence(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  uint32_t cp = c & (0x7f >> len);
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;  // overlong, surrogate
  return len;
}

bool is_control(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

// A C1 control (U+0080..U+009F, CSI U+009B among them) is valid UTF-8 that terminals obey as ESC.
bool is_c1(std::string_view s, size_t i, size_t len) {
  return len == 2 && static_cast<unsigned char>(s[i]) == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0;
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

bool is_clean_text(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t len = utf8_sequence(s, i);
    if (len == 0 || (len == 1 && is_control(static_cast<unsigned char>(s[i]))) || is_c1(s, i, len)) return false;
    i += len;
  }
  return true;
}

std::string escape_text(std::string_view s) {
  if (is_clean_text(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 16);
  for (size_t i = 0; i < s.size();) {
    size_t len = utf8_sequence(s, i);
    if (is_c1(s, i, len)) {  // both bytes, so the escaped text reads back as the same code point
      out += fmt::format("\\x{:02x}\\x{:02x}", static_cast<unsigned char>(s[i]), static_cast<unsigned char>(s[i + 1]));
      i += 2;
    } else if (len == 0 || (len == 1 && is_control(static_cast<unsigned char>(s[i])))) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
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
