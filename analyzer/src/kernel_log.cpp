// SPDX-License-Identifier: GPL-2.0-or-later
// The kernel log as lines: a saved log in any of the forms dmesg and journalctl print, detected
// line by line (a pasted log is often several captures glued together), and the live /dev/kmsg.
// The bytes are kept as they are (a driver may print anything); escaping is the printer's job.
#include "p2paudit/kernel_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "kernel_log_record.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"

namespace p2paudit {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_lower(char c) { return c >= 'a' && c <= 'z'; }

// Decimal digits at s[i...] (at most max_digits of them), advancing i; nullopt when there are none
// or the value does not fit.
std::optional<uint64_t> take_decimal(std::string_view s, size_t& i, size_t max_digits = 19) {
  size_t start = i;
  uint64_t v = 0;
  while (i < s.size() && is_digit(s[i]) && i - start < max_digits) v = v * 10 + static_cast<uint64_t>(s[i++] - '0');
  if (i == start || (i < s.size() && is_digit(s[i]))) return std::nullopt;
  return v;
}

size_t skip_spaces(std::string_view s, size_t i) {
  while (i < s.size() && s[i] == ' ') ++i;
  return i;
}

// "SECONDS.FRACTION" as dmesg prints the monotonic stamp ("%5lu.%06lu").
std::optional<double> take_seconds(std::string_view s, size_t& i) {
  size_t save = i;
  auto whole = take_decimal(s, i, 12);
  if (!whole || i >= s.size() || s[i] != '.') {
    i = save;
    return std::nullopt;
  }
  ++i;
  size_t frac_at = i;
  auto frac = take_decimal(s, i, 9);
  if (!frac) {
    i = save;
    return std::nullopt;
  }
  double scale = 1;
  for (size_t k = frac_at; k < i; ++k) scale *= 10;
  return static_cast<double>(*whole) + static_cast<double>(*frac) / scale;
}

template <typename Words>
bool one_of(std::string_view word, const Words& words) {
  for (auto w : words)
    if (word == w) return true;
  return false;
}

constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
constexpr std::array<std::string_view, 7> kWeekdays = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
constexpr std::array<std::string_view, 20> kFacilities = {
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
    "authpriv", "ftp", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"};

bool month_at(std::string_view s, size_t i) { return i + 3 <= s.size() && one_of(s.substr(i, 3), kMonths); }
bool weekday_at(std::string_view s, size_t i) { return i + 3 <= s.size() && one_of(s.substr(i, 3), kWeekdays); }

// "hh:mm:ss" (or "hh:mm" when !with_seconds) at s[i], advancing i.
bool take_clock(std::string_view s, size_t& i, bool with_seconds = true) {
  size_t n = with_seconds ? 8 : 5;
  if (i + n > s.size()) return false;
  for (size_t k = 0; k < n; ++k) {
    bool colon = k % 3 == 2;
    if (colon ? s[i + k] != ':' : !is_digit(s[i + k])) return false;
  }
  i += n;
  return true;
}

// " <    0.000123>" (dmesg -d's delta next to another stamp), optional.
void skip_delta(std::string_view s, size_t& i) {
  size_t j = skip_spaces(s, i);
  if (j < s.size() && s[j] == '<') {
    size_t k = skip_spaces(s, j + 1);
    if (take_seconds(s, k) && k < s.size() && s[k] == '>') i = k + 1;
  }
}

// The inside of "[...]": dmesg's monotonic stamp "    1.234567" (with -d: "    1.234567 <    0.000123>"),
// -T/ctime "Sat Nov 28 08:53:22 2026", reltime "Nov28 08:53" and "  +0.000123", delta "<    0.000123>".
bool bracket_inside(std::string_view in, std::optional<double>* seconds) {
  size_t i = skip_spaces(in, 0);
  if (i < in.size() && is_digit(in[i])) {
    auto secs = take_seconds(in, i);
    if (!secs) return false;
    skip_delta(in, i);
    if (skip_spaces(in, i) != in.size()) return false;
    *seconds = secs;
    return true;
  }
  if (i < in.size() && in[i] == '+') {  // reltime within a minute
    ++i;
    return take_seconds(in, i) && skip_spaces(in, i) == in.size();
  }
  if (i < in.size() && in[i] == '<') {  // --time-format delta
    size_t k = skip_spaces(in, i + 1);
    return take_seconds(in, k) && k < in.size() && in[k] == '>' && skip_spaces(in, k + 1) == in.size();
  }
  if (weekday_at(in, i)) {  // ctime: "%a %b %e %H:%M:%S %Y"
    i += 3;
    if (i >= in.size() || in[i] != ' ' || !month_at(in, i + 1)) return false;
    i += 4;
    if (i + 3 > in.size() || in[i] != ' ' || !(in[i + 1] == ' ' || is_digit(in[i + 1])) || !is_digit(in[i + 2]))
      return false;
    i += 3;
    if (i >= in.size() || in[i] != ' ') return false;
    ++i;
    if (!take_clock(in, i) || i + 5 > in.size() || in[i] != ' ') return false;
    ++i;
    if (!take_decimal(in, i, 4)) return false;
    skip_delta(in, i);
    return skip_spaces(in, i) == in.size();
  }
  if (month_at(in, i)) {  // reltime's minute line: "%b%d %H:%M"
    i += 3;
    if (i + 2 > in.size() || !is_digit(in[i]) || !is_digit(in[i + 1])) return false;
    i += 2;
    if (i >= in.size() || in[i] != ' ') return false;
    ++i;
    return take_clock(in, i, false) && skip_spaces(in, i) == in.size();
  }
  return false;
}

// "[...] " at the start of s; returns the length taken (with one following space), 0 when none.
size_t bracket_stamp(std::string_view s, std::optional<double>* seconds) {
  if (s.empty() || s[0] != '[') return 0;
  size_t close = s.substr(0, 64).find(']');
  if (close == std::string_view::npos) return 0;
  std::optional<double> secs;
  if (!bracket_inside(s.substr(1, close - 1), &secs)) return 0;
  *seconds = secs;
  size_t n = close + 1;
  if (n < s.size() && s[n] == ' ') ++n;
  return n;
}

// ISO 8601 as dmesg --time-format iso ("2026-11-28T08:53:22,123456+00:00") and journalctl
// -o short-iso / short-iso-precise ("2026-11-28T08:53:22+0000", "...22.123456+00:00") print it.
size_t iso_stamp(std::string_view s) {
  size_t i = 0;
  auto digits = [&](size_t n) {
    if (i + n > s.size()) return false;
    for (size_t k = 0; k < n; ++k)
      if (!is_digit(s[i + k])) return false;
    i += n;
    return true;
  };
  auto ch = [&](char c) {
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  };
  if (!(digits(4) && ch('-') && digits(2) && ch('-') && digits(2) && ch('T') && take_clock(s, i))) return 0;
  if (i < s.size() && (s[i] == ',' || s[i] == '.')) {
    ++i;
    if (!take_decimal(s, i, 9)) return 0;
  }
  if (ch('Z')) {
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    ++i;
    if (!digits(2)) return 0;
    ch(':');
    if (!digits(2)) return 0;
  }
  if (!ch(' ')) return 0;
  return i;
}

// journalctl -o short / short-precise ("Nov 28 08:53:22[.123456] ") and short-full
// ("Sat 2026-11-28 08:53:22 UTC ").
size_t syslog_stamp(std::string_view s) {
  size_t i = 0;
  if (weekday_at(s, 0) && s.size() > 4 && s[3] == ' ') {
    i = 4;
    auto digits = [&](size_t n) {
      for (size_t k = 0; k < n; ++k)
        if (i >= s.size() || !is_digit(s[i++])) return false;
      return true;
    };
    auto ch = [&](char c) { return i < s.size() && s[i++] == c; };
    if (!(digits(4) && ch('-') && digits(2) && ch('-') && digits(2) && ch(' ') && take_clock(s, i))) return 0;
    if (i < s.size() && s[i] == '.') {
      ++i;
      if (!take_decimal(s, i, 9)) return 0;
    }
    if (i >= s.size() || s[i] != ' ') return 0;
    size_t zone_end = s.find(' ', i + 1);  // the time zone's name
    if (zone_end == std::string_view::npos || zone_end - i > 33) return 0;
    return zone_end + 1;
  }
  if (!month_at(s, 0) || s.size() < 16 || s[3] != ' ') return 0;
  i = 4;
  if (!(s[i] == ' ' || is_digit(s[i])) || !is_digit(s[i + 1]) || s[i + 2] != ' ') return 0;
  i += 3;
  if (!take_clock(s, i)) return 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!take_decimal(s, i, 9)) return 0;
  }
  if (i >= s.size() || s[i] != ' ') return 0;
  return i + 1;
}

// "HOST kernel: " after a journal or syslog stamp (the host name is one word); returns the length.
size_t journal_ident(std::string_view s) {
  constexpr std::string_view kKernel = "kernel: ";
  if (s.substr(0, kKernel.size()) == kKernel) return kKernel.size();
  size_t sp = s.substr(0, 256).find(' ');
  if (sp == std::string_view::npos || sp == 0) return 0;
  if (s.substr(sp + 1, kKernel.size()) == kKernel) return sp + 1 + kKernel.size();
  return 0;
}

// dmesg -x: "%-6s:%-6s: " facility and level names (util-linux sys-utils/dmesg.c, print_record()).
size_t facility_level(std::string_view s, int* level) {
  static constexpr std::array<std::string_view, 8> kLevels = {"emerg", "alert", "crit", "err",
                                                             "warn", "notice", "info", "debug"};
  size_t i = 0;
  while (i < s.size() && i < 10 && (is_lower(s[i]) || is_digit(s[i]))) ++i;
  if (i == 0 || !one_of(s.substr(0, i), kFacilities)) return 0;
  i = skip_spaces(s, i);
  if (i >= s.size() || s[i] != ':') return 0;
  size_t at = ++i;
  while (i < s.size() && is_lower(s[i])) ++i;
  std::string_view name = s.substr(at, i - at);
  int found = -1;
  for (size_t k = 0; k < kLevels.size(); ++k)
    if (kLevels[k] == name) found = static_cast<int>(k);
  if (found < 0) return 0;
  i = skip_spaces(s, i);
  if (i + 1 >= s.size() || s[i] != ':' || s[i + 1] != ' ') return 0;
  *level = found;
  return i + 2;
}

// "<N>" of dmesg -r (the syslog priority: facility * 8 + level).
size_t raw_level(std::string_view s, int* level) {
  if (s.empty() || s[0] != '<') return 0;
  size_t i = 1;
  auto prio = take_decimal(s, i, 4);
  if (!prio || i >= s.size() || s[i] != '>') return 0;
  *level = static_cast<int>(*prio & 7);
  return i + 1;
}

// The message of one line of a saved log, its prefixes taken off into `line`.
void parse_prefixes(std::string_view s, KernelLogLine& line) {
  if (size_t n = raw_level(s, &line.level)) s.remove_prefix(n);
  if (size_t n = facility_level(s, &line.level)) s.remove_prefix(n);
  std::optional<double> seconds;
  size_t stamp = bracket_stamp(s, &seconds);
  bool journal = false;
  if (stamp == 0 && (stamp = iso_stamp(s)) == 0 && (stamp = syslog_stamp(s)) != 0) journal = true;
  if (stamp == 0) {
    // journalctl -o short-unix: "1764320002.123456 HOST kernel: ", taken only with the identifier.
    size_t i = 0;
    if (take_seconds(s, i) && i < s.size() && s[i] == ' ' && journal_ident(s.substr(i + 1))) stamp = i + 1;
  }
  if (stamp != 0) {
    std::string_view written = s.substr(0, stamp);
    while (!written.empty() && written.back() == ' ') written.remove_suffix(1);
    line.stamp = std::string(written);
    line.seconds_since_boot = seconds;
    s.remove_prefix(stamp);
    if (size_t n = journal_ident(s)) {
      s.remove_prefix(n);
      // A syslog file (kern.log) keeps the kernel's own stamp after "kernel: ".
      std::optional<double> inner;
      if (size_t m = bracket_stamp(s, &inner)) {
        if (inner) line.seconds_since_boot = inner;
        s.remove_prefix(m);
      }
    } else if (journal) {
      // Another program's line in a journal: the host name goes, the identifier stays in the text.
      size_t sp = s.substr(0, 256).find(' ');
      if (sp != std::string_view::npos) s.remove_prefix(sp + 1);
    }
  }
  line.text.assign(s.data(), s.size());
}

// A UTF-8 sequence cut by the length bound is dropped whole, so the cut never makes a bad byte.
void trim_cut_sequence(std::string& s) {
  size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xc0) == 0x80) continue;  // a continuation byte: look further back
    size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if (need > back) s.erase(s.begin() + static_cast<std::ptrdiff_t>(n - back), s.end());
    return;
  }
}

std::string quoted_name(const std::string& name) { return escape_text(name); }

}  // namespace

namespace kernel_log_detail {

std::optional<KmsgRecord> parse_kmsg_record(std::string_view s) {
  // Documentation/ABI/testing/dev-kmsg: "PRIO,SEQ,USEC,FLAGS[,...];MESSAGE"; kernels before 3.6
  // wrote no flags field ("5,0,0;Linux version ...").
  size_t i = 0;
  auto prio = take_decimal(s, i, 4);
  if (!prio || i >= s.size() || s[i] != ',') return std::nullopt;
  ++i;
  auto seq = take_decimal(s, i);
  if (!seq || i >= s.size() || s[i] != ',') return std::nullopt;
  ++i;
  auto usec = take_decimal(s, i);
  if (!usec || i >= s.size() || (s[i] != ',' && s[i] != ';')) return std::nullopt;
  size_t semi = s.substr(0, 256).find(';', i);
  if (semi == std::string_view::npos) return std::nullopt;
  for (size_t k = i; k < semi; ++k)
    if (s[k] == ' ' || s[k] == '\n') return std::nullopt;
  KmsgRecord r;
  r.level = static_cast<int>(*prio & 7);
  r.sequence = *seq;
  r.usec = *usec;
  r.header = s.substr(0, semi);
  r.text = s.substr(semi + 1);
  return r;
}

bool is_kmsg_continuation(std::string_view s) {
  // " KEY=value": the record's dictionary (SUBSYSTEM=pci, DEVICE=+pci:0000:01:00.0). The device
  // is in the dev_printk prefix of the text already, so the dictionary is not kept.
  if (s.size() < 3 || s[0] != ' ') return false;
  size_t i = 1;
  while (i < s.size() && ((s[i] >= 'A' && s[i] <= 'Z') || is_digit(s[i]) || s[i] == '_')) ++i;
  return i > 1 && i < s.size() && s[i] == '=';
}

void fill_from_record(const KmsgRecord& r, KernelLogLine& line) {
  line.level = r.level;
  line.sequence = r.sequence;
  line.seconds_since_boot = static_cast<double>(r.usec) / 1e6;
  line.stamp = std::string(r.header);
  line.text = std::string(r.text);
}

}  // namespace kernel_log_detail

using namespace kernel_log_detail;

std::vector<std::string> read_kernel_log(std::istream& in, const std::string& name, const KernelLogLimits& limits,
                                         const std::function<void(KernelLogLine&&)>& sink) {
  std::vector<std::string> notes;
  if (!in.good() && !in.eof()) throw InputError(fmt::format("{}: cannot be read", quoted_name(name)));

  uint64_t consumed = 0, lines = 0;
  std::string current;
  bool overflow = false;     // the current line passed max_line_bytes
  bool previous_record = false;  // the line before was a /dev/kmsg record (its dictionary may follow)

  auto finish_line = [&](bool ended_inside) {
    ++lines;
    std::string raw = std::move(current);
    current.clear();
    bool overflow_cut = overflow;
    bool truncated = overflow || ended_inside;
    overflow = false;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();  // CR LF line ends
    if (overflow_cut) trim_cut_sequence(raw);
    std::string_view s = raw;
    if (previous_record && is_kmsg_continuation(s)) return;
    KernelLogLine line;
    line.line_number = lines;
    line.truncated = truncated;
    if (auto rec = parse_kmsg_record(s)) {
      fill_from_record(*rec, line);
      previous_record = true;
    } else {
      previous_record = false;
      parse_prefixes(s, line);
    }
    if (line.text.empty() && line.stamp.empty()) return;  // a blank line
    sink(std::move(line));
  };

  std::array<char, 65536> buf{};
  bool stopped = false;
  while (!stopped) {
    if (consumed >= limits.max_bytes) {
      if (in.peek() != std::char_traits<char>::eof()) {
        notes.push_back(fmt::format("{}: stopped after {} bytes (the bound on a log); the rest was not read",
                                    quoted_name(name), limits.max_bytes));
        if (!current.empty() || overflow) finish_line(true);
      }
      break;
    }
    size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), limits.max_bytes - consumed));
    in.read(buf.data(), static_cast<std::streamsize>(want));
    auto got = static_cast<size_t>(in.gcount());
    if (got == 0) {
      if (in.bad()) notes.push_back(fmt::format("{}: a read failed after {} bytes; the rest was not read",
                                                quoted_name(name), consumed));
      break;
    }
    consumed += got;
    std::string_view chunk(buf.data(), got);
    while (!chunk.empty()) {
      size_t nl = chunk.find('\n');
      std::string_view piece = chunk.substr(0, nl);
      if (!overflow) {
        size_t room = limits.max_line_bytes - std::min(limits.max_line_bytes, current.size());
        if (piece.size() > room) {
          current.append(piece.substr(0, room));
          overflow = true;
        } else {
          current.append(piece);
        }
      }
      if (nl == std::string_view::npos) break;
      chunk.remove_prefix(nl + 1);
      finish_line(false);
      if (lines >= limits.max_lines) {
        if (!chunk.empty() || in.peek() != std::char_traits<char>::eof())
          notes.push_back(fmt::format("{}: stopped after {} lines (the bound on a log); the rest was not read",
                                      quoted_name(name), limits.max_lines));
        stopped = true;
        break;
      }
    }
  }
  if (!stopped && (!current.empty() || overflow)) finish_line(true);  // the input ended inside a line
  return notes;
}

namespace {

constexpr const char* kKmsg = "/dev/kmsg";

Fd open_kmsg(int* error) {
  Fd fd(::open(kKmsg, O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  *error = fd.get() < 0 ? errno : 0;
  return fd;
}

std::string open_failure(int error) {
  if (error == EPERM || error == EACCES)
    return fmt::format("{} cannot be opened: {} (kernel.dmesg_restrict lets only root read the kernel log; run as root)",
                       kKmsg, std::strerror(error));
  return fmt::format("{} cannot be opened: {}", kKmsg, std::strerror(error));
}

// Every record from the oldest kept on; one record per read() (dev-kmsg ABI). Calls `each` with
// the record; stops at EAGAIN (the end), at the bounds, or at a failing read (noted).
template <typename Each>
void read_records(int fd, const KernelLogLimits& limits, std::vector<std::string>& notes, Each&& each) {
  // The largest record is CONSOLE_EXT_LOG_MAX (8 KiB) with its dictionary; a smaller buffer is EINVAL.
  std::string buf(16384, '\0');
  (void)::lseek(fd, 0, SEEK_SET);  // SEEK_SET 0: the oldest record still in the buffer
  uint64_t records = 0, bytes = 0;
  bool overwritten = false;
  for (;;) {
    if (records >= limits.max_lines || bytes >= limits.max_bytes) {
      notes.push_back(fmt::format("{}: stopped after {} records, {} bytes (the bounds on a log)", kKmsg, records, bytes));
      return;
    }
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      if (errno == EPIPE) {
        // Records were overwritten while they were being read; the position moved to the oldest kept.
        if (!overwritten)
          notes.push_back(fmt::format("{}: records were overwritten while it was read (the log buffer wrapped); "
                                      "those records are lost",
                                      kKmsg));
        overwritten = true;
        continue;
      }
      notes.push_back(fmt::format("{}: a read failed: {}", kKmsg, std::strerror(errno)));
      return;
    }
    if (n == 0) return;
    ++records;
    bytes += static_cast<uint64_t>(n);
    std::string_view rec(buf.data(), static_cast<size_t>(n));
    rec = rec.substr(0, rec.find('\n'));  // the dictionary lines follow the first line
    each(rec);
  }
}

}  // namespace

std::optional<uint64_t> kmsg_position(std::string* why) {
  int error = 0;
  Fd fd = open_kmsg(&error);
  if (fd.get() < 0) {
    if (why) *why = open_failure(error);
    return std::nullopt;
  }
  // SEEK_END would put the reader after the last record, but no read then tells its number: read
  // to the end once and take the number after the last record.
  std::optional<uint64_t> last;
  std::vector<std::string> notes;
  KernelLogLimits limits;
  read_records(fd.get(), limits, notes, [&](std::string_view rec) {
    if (auto r = parse_kmsg_record(rec)) last = r->sequence;
  });
  return last ? *last + 1 : 0;
}

std::vector<std::string> read_kmsg(std::optional<uint64_t> from, const KernelLogLimits& limits,
                                   const std::function<void(KernelLogLine&&)>& sink) {
  int error = 0;
  Fd fd = open_kmsg(&error);
  if (fd.get() < 0) throw InputError(open_failure(error));
  std::vector<std::string> notes;
  uint64_t line_number = 0;
  bool first = true;
  read_records(fd.get(), limits, notes, [&](std::string_view rec) {
    auto r = parse_kmsg_record(rec);
    if (!r) return;
    if (first && from && r->sequence > *from)
      notes.push_back(fmt::format("{}: records {} to {} were overwritten before they could be read (the log buffer "
                                  "wrapped); events in them are lost",
                                  kKmsg, *from, r->sequence - 1));
    first = false;
    if (from && r->sequence < *from) return;
    KernelLogLine line;
    fill_from_record(*r, line);
    if (line.text.size() > limits.max_line_bytes) {
      line.text.resize(limits.max_line_bytes);
      trim_cut_sequence(line.text);
      line.truncated = true;
    }
    line.line_number = ++line_number;
    sink(std::move(line));
  });
  return notes;
}

}  // namespace p2paudit
