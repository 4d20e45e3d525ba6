// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/dump_topology.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "p2paudit/config_space.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/kernel_rules.h"

namespace p2paudit {

namespace {

std::optional<int> parse_number(std::string_view s) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// x86 vendor_id strings as /proc/cpuinfo prints them (Zhaoxin's is padded with spaces).
const std::array<std::string_view, 5> kX86Vendors = {"AuthenticAMD", "GenuineIntel", "HygonGenuine", "CentaurHauls",
                                                     "  Shanghai  "};
const std::array<std::string_view, 6> kOtherArches = {"arm64", "riscv64", "ppc64le", "ppc64", "s390x", "loongarch64"};

std::string hb_name(uint32_t domain, uint8_t bus) { return fmt::format("pci{:04x}:{:02x}", domain, bus); }
std::string bus_name(uint32_t domain, uint8_t bus) { return fmt::format("{:04x}:{:02x}", domain, bus); }

std::string range_text(uint8_t sec, uint8_t sub) { return fmt::format("{:02x}-{:02x}", sec, sub); }

bool matches(std::string_view line, std::string_view pattern) {
  if (line.size() < pattern.size()) return false;
  for (size_t i = 0; i < pattern.size(); ++i)
    if (pattern[i] == '#' ? !std::isxdigit(static_cast<unsigned char>(line[i])) : pattern[i] != line[i]) return false;
  return true;
}

unsigned hex_value(std::string_view s) {
  unsigned v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v, 16);
  return v;
}

std::optional<Bdf> dump_header(std::string_view line) {
  // "BB:DD.F ", "DDDD:BB:DD.F ", "DDDDD:BB:DD.F "; the function number is read as decimal.
  size_t domain_digits = matches(line, "##:##.# ")          ? 0
                         : matches(line, "####:##:##.# ")   ? 4
                         : matches(line, "#####:##:##.# ")  ? 5
                                                            : std::string_view::npos;
  if (domain_digits == std::string_view::npos) return std::nullopt;
  size_t at = domain_digits ? domain_digits + 1 : 0;
  char fn = line[at + 6];
  if (fn < '0' || fn > '9') return std::nullopt;
  return Bdf{domain_digits ? hex_value(line.substr(0, domain_digits)) : 0u,
             static_cast<uint8_t>(hex_value(line.substr(at, 2))), static_cast<uint8_t>(hex_value(line.substr(at + 3, 2))),
             static_cast<uint8_t>(fn - '0')};
}

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t'; });
}

// Up to 60 characters of a line quoted from the dump, control characters escaped.
std::string quote(std::string_view text) {
  constexpr size_t kQuoted = 60;
  std::string out = escape_text(text.substr(0, kQuoted));
  for (size_t at; (at = out.find('\t')) != std::string::npos;) out.replace(at, 1, "\\t");
  return "'" + out + (text.size() > kQuoted ? "...'" : "'");
}

// "OFF: xx xx ...": 2 to 8 hex digits of offset, ": ", then bytes as libpci's dump reader takes
// them (lib/dump.c): two hex digits followed by one space or the end of the line. Trailing blanks
// are allowed (mail and web pastes add them); anything else is junk from `junk` on.
struct HexRow {
  uint64_t offset = 0;
  std::vector<uint8_t> bytes;
  std::optional<size_t> junk;  // position in the line of what is not a byte
};

std::optional<HexRow> hex_row(std::string_view line) {
  size_t digits = 0;
  while (digits < line.size() && digits <= 8 && std::isxdigit(static_cast<unsigned char>(line[digits]))) ++digits;
  if (digits < 2 || digits > 8 || line.size() < digits + 2 || line[digits] != ':' || line[digits + 1] != ' ')
    return std::nullopt;
  HexRow row;
  std::from_chars(line.data(), line.data() + digits, row.offset, 16);
  auto hex = [&](size_t k) { return k < line.size() && std::isxdigit(static_cast<unsigned char>(line[k])); };
  size_t z = digits + 2;
  while (hex(z) && hex(z + 1) && (z + 2 == line.size() || line[z + 2] == ' ')) {
    row.bytes.push_back(static_cast<uint8_t>(hex_value(line.substr(z, 2))));
    z += z + 2 == line.size() ? 2 : 3;
  }
  if (!is_blank(line.substr(z))) row.junk = z;
  return row;
}

// One function as the dump holds it: its config bytes from offset 0 up to the first damage (a
// stray line spliced into a row, a row cut short, a row missing). Bytes after the damage are not
// trusted, even where later rows look intact: they are unreadable, never zero or guessed.
struct DumpedFunction {
  Bdf bdf;
  size_t header_line = 0;
  size_t rows = 0;  // hex rows read for it; 0: the dump has none
  size_t last_row_line = 0;
  std::vector<uint8_t> bytes;
  std::optional<size_t> cut_at;  // the offset from which its config space is unreadable
  size_t cut_line = 0;
  std::string cut_why;
};

struct ParsedDump {
  std::vector<DumpedFunction> functions;
  std::vector<Finding> findings;  // what was skipped, each naming its line
  size_t hex_rows = 0;            // in the whole file, inside a function or not
};

constexpr size_t kMaxFunctions = size_t{1} << 18;

// The sizes `lspci -x`, `-x` of a CardBus bridge, `-xxx` and `-xxxx` print.
bool whole_dump_size(size_t n) { return n == 64 || n == 128 || n == 256 || n == 4096; }

// Reads the dump as lspci writes it and people paste it: a header line "[DDDD:]BB:DD.F ..." of any
// length, then optionally `lspci -v` decode lines, then hex rows, then a blank line. Unlike
// libpci's reader (which stops at the first line over 254 characters or with junk in a row, and
// turns missing rows into ff bytes), damage costs only the bytes of the function it is in.
ParsedDump parse_dump(const std::string& file, std::string_view text) {
  ParsedDump out;
  std::map<std::string, size_t> noted;  // findings by kind: the first kPerKind are listed
  constexpr size_t kPerKind = 64;
  auto note = [&](const std::string& kind, size_t line, std::string message) {
    if (++noted[kind] <= kPerKind) out.findings.push_back({file, fmt::format("line {}: {}", line, message)});
  };
  auto cut = [&](DumpedFunction& f, size_t offset, size_t line, std::string why) {
    f.cut_at = offset;
    f.cut_line = line;
    f.cut_why = std::move(why);
    f.bytes.resize(std::min(f.bytes.size(), offset));
  };
  constexpr size_t kNone = SIZE_MAX;
  size_t cur = kNone;   // the function whose lines follow
  bool in_rows = false;  // its first hex row was seen
  auto finish = [&] {
    if (cur == kNone) return;
    DumpedFunction& f = out.functions[cur];
    if (in_rows && !f.cut_at && !whole_dump_size(f.bytes.size()))
      cut(f, f.bytes.size(), f.last_row_line,
          fmt::format("its hex rows end at offset {:#x}, short of the 64, 256 or 4096 bytes lspci prints",
                      f.bytes.size()));
    cur = kNone;
    in_rows = false;
  };

  size_t n = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    std::string_view line = text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
    pos = eol == std::string_view::npos ? text.size() : eol + 1;
    ++n;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

    if (auto bdf = dump_header(line)) {
      finish();
      // 64 MiB of bare header lines would be millions of functions; no machine has a quarter million.
      if (out.functions.size() >= kMaxFunctions)
        throw InputError(fmt::format("{}: line {}: more than {} function header lines: not the dump of a machine", file,
                                     n, kMaxFunctions));
      cur = out.functions.size();
      DumpedFunction f;
      f.bdf = *bdf;
      f.header_line = n;
      out.functions.push_back(std::move(f));
      continue;
    }
    if (is_blank(line)) {
      finish();
      continue;
    }
    auto row = hex_row(line);
    if (row) ++out.hex_rows;
    if (cur == kNone) {
      // Mail headers, shell prompts and prose around a paste are ignored; hex rows that follow no
      // header belong to no function (a header line lost in the paste).
      if (row && !row->junk)
        note("hex rows outside functions", n,
             fmt::format("hex row at offset {:#x} follows no function header (\"BB:DD.F ...\" since the last blank "
                         "line): ignored",
                         row->offset));
      continue;
    }
    DumpedFunction& f = out.functions[cur];
    if (f.cut_at) continue;  // the rest of a damaged function is unreadable
    if (!in_rows) {
      if (!row) continue;  // `lspci -v` decode text between the header and the hex rows
      if (row->offset != 0) {
        // A whole row at another offset: the first rows are missing. Anything else is decode text
        // that happens to start with hex digits and ": ".
        if (!row->junk && row->bytes.size() == 16) {
          ++f.rows;
          in_rows = true;
          cut(f, 0, n, fmt::format("its hex rows begin at offset {:#x}, not 0", row->offset));
        }
        continue;
      }
      in_rows = true;
    } else if (!row) {
      note("stray lines", n,
           fmt::format("{}: a line inside its hex rows that is no hex row, {}: skipped", f.bdf.str(), quote(line)));
      continue;
    }
    ++f.rows;
    f.last_row_line = n;
    if (row->offset != f.bytes.size()) {
      cut(f, f.bytes.size(), n,
          fmt::format("a hex row at offset {:#x} where offset {:#x} was due", row->offset, f.bytes.size()));
      continue;
    }
    size_t room = 4096 - f.bytes.size();
    f.bytes.insert(f.bytes.end(), row->bytes.begin(), row->bytes.begin() + static_cast<long>(std::min(room, row->bytes.size())));
    if (row->bytes.size() > room)
      note("bytes beyond 4096", n, fmt::format("{}: bytes beyond offset 0xfff, where config space ends: ignored", f.bdf.str()));
    if (row->junk && f.bytes.size() < 4096)
      cut(f, f.bytes.size(), n,
          fmt::format("hex row {:02x} is broken after {} bytes by {}", row->offset, row->bytes.size(),
                      quote(line.substr(*row->junk))));
  }
  finish();
  for (const auto& [kind, count] : noted)
    if (count > kPerKind) out.findings.push_back({file, fmt::format("{} more findings of this kind: {}", count - kPerKind, kind)});
  return out;
}
// A decoded function and whether the dump's bytes of it stop at damage rather than where lspci
// stops printing.
struct Decoded {
  Function f;
  bool cut_short = false;
  std::optional<std::pair<uint8_t, uint8_t>> card_bus;  // a CardBus bridge's bytes 0x19 and 0x1a
};

// One copy of each address: lspci lists every header of the dump, duplicates included.
std::vector<Decoded> drop_duplicates(std::vector<Decoded> fns, const std::string& file, std::vector<Finding>& findings) {
  std::stable_sort(fns.begin(), fns.end(), [](const Decoded& x, const Decoded& y) { return x.f.bdf < y.f.bdf; });
  std::vector<Decoded> kept;
  for (size_t i = 0; i < fns.size();) {
    size_t j = i;
    while (j < fns.size() && fns[j].f.bdf == fns[i].f.bdf) ++j;
    if (j - i > 1) {
      // Deterministic whatever order the copies came in: the most config bytes, then the lowest IDs.
      auto key = [](const Decoded& d) {
        const Function& f = d.f;
        return std::make_tuple(~f.config_readable, d.cut_short, f.vendor, f.device, f.class_code, f.revision);
      };
      std::sort(fns.begin() + static_cast<long>(i), fns.begin() + static_cast<long>(j),
                [&](const Decoded& a, const Decoded& b) { return key(a) < key(b); });
      std::string copies;
      for (size_t k = i; k < j; ++k)
        copies += fmt::format("{}[{:04x}:{:04x}, {} bytes]", k == i ? "" : ", ", fns[k].f.vendor, fns[k].f.device,
                              fns[k].f.config_readable);
      findings.push_back({file, fmt::format("{} appears {} times in the dump ({}): the first of these is used, "
                                            "the others are ignored",
                                            fns[i].f.bdf.str(), j - i, copies)});
    }
    kept.push_back(std::move(fns[i]));
    i = j;
  }
  return kept;
}

struct BridgeRange {
  size_t index;
  uint8_t sec, sub;
  int width() const { return sub - sec; }
};

class TreeBuilder {
  static constexpr size_t kListed = 8;  // functions named in one finding; the rest are counted

 public:
  TreeBuilder(Topology& t, const std::string& file) : t_(t), file_(file) {}

  void build(const DumpAssumptions& a) {
    collect_bridges();
    assign_parents();
    check_overlaps();
    check_acyclic();
    assign_host_bridges(a);
    place();
    for (const auto& [kind, n] : noted_)
      if (n > kPerKind) t_.findings.push_back({file_, fmt::format("{} more findings of this kind: {}", n - kPerKind, kind)});
  }

 private:
  // A hostile dump can hold tens of thousands of broken bridges: the first kPerKind findings of a
  // kind are listed, the rest counted.
  static constexpr size_t kPerKind = 64;
  void note(const char* kind, std::string message) {
    if (++noted_[kind] <= kPerKind) t_.findings.push_back({file_, std::move(message)});
  }
  // Comparisons the checks that name partners may spend, so that no dump makes them quadratic.
  size_t budget_ = size_t{1} << 24;
  const Function& fn(size_t i) const { return t_.functions[i]; }
  std::string who(size_t i) const { return fn(i).bdf.str(); }

  // Bridges as `lspci -t` takes them (class 06, header type 1 or 2) whose bus numbers can hold
  // devices below them: the secondary bus above the bridge's own bus, the range not empty.
  void collect_bridges() {
    std::vector<BridgeRange> rejected;
    for (size_t i = 0; i < t_.functions.size(); ++i) {
      const Function& f = fn(i);
      if (!f.is_bridge()) continue;
      if ((f.class_code >> 16) != 0x06) {
        note("bridge headers without a bridge class", fmt::format("{}: header type {} but class {:06x} is no bridge class: like `lspci -t`, nothing is "
                         "placed below it", who(i), f.header_type, f.class_code));
        continue;
      }
      if (!f.secondary_bus || !f.subordinate_bus) {
        note("bridges without bus numbers in the dump", fmt::format("{}: a bridge whose bus numbers are not in the dump ({} bytes of config space): nothing "
                         "is placed below it", who(i), f.config_readable));
        continue;
      }
      uint8_t sec = *f.secondary_bus, sub = *f.subordinate_bus, bus = f.bdf.bus;
      if (sec == 0 && sub == 0) {
        note("bridges without bus numbers", fmt::format("{}: bridge without bus numbers (secondary and subordinate bus 00): nothing is placed "
                         "below it", who(i)));
      } else if (sub < sec) {
        note("empty bridge ranges", fmt::format("{}: bridge bus range {} is empty (subordinate below secondary): nothing is placed below it",
                         who(i), range_text(sec, sub)));
      } else if (sec <= bus) {
        rejected.push_back({i, sec, sub});
      } else {
        valid_.push_back({i, sec, sub});
        continue;
      }
    }
    // A secondary bus at or below the bridge's own bus would make the bridge its own ancestor, or
    // the ancestor of a bridge upstream of it: the kernel reconfigures such a bridge ("bridge
    // configuration invalid"); here it holds nothing.
    std::map<std::pair<uint32_t, uint8_t>, std::vector<BridgeRange>> on_bus;  // valid bridges by their own bus
    for (const auto& v : valid_) on_bus[{fn(v.index).bdf.domain, fn(v.index).bdf.bus}].push_back(v);
    for (const auto& r : rejected) {
      const Function& x = fn(r.index);
      uint8_t bus = x.bdf.bus;
      if (bus <= r.sub) {
        note("bridge ranges holding their own bus", fmt::format("{}: bridge bus range {} includes its own bus {:02x}: ignored, nothing is placed below it",
                         who(r.index), range_text(r.sec, r.sub), bus));
        continue;
      }
      // Partners: bridges on a bus of the rejected range whose own range holds its bus again.
      std::vector<std::string> partners;
      bool more = false;
      for (unsigned b = r.sec; b <= r.sub && !more && budget_; ++b) {
        auto it = on_bus.find({x.bdf.domain, static_cast<uint8_t>(b)});
        if (it == on_bus.end()) continue;
        for (const auto& v : it->second) {
          if (!budget_ || (more = partners.size() == kListed)) break;
          --budget_;
          if (bus >= v.sec && bus <= v.sub)
            partners.push_back(fmt::format("{} (on bus {:02x}, range {})", who(v.index), b, range_text(v.sec, v.sub)));
        }
      }
      if (more) partners.push_back("others");
      if (!partners.empty())
        note("bus-range cycles", fmt::format("bus-range cycle: {} (on bus {:02x}) claims buses {}, which hold {}, whose range holds bus "
                         "{:02x} again; {}'s range is ignored, nothing is placed below it",
                         who(r.index), bus, range_text(r.sec, r.sub), fmt::join(partners, ", "), bus, who(r.index)));
      else
        note("bridge ranges below their own bus", fmt::format("{}: bridge bus range {} lies below its own bus {:02x}: ignored, nothing is placed below it",
                         who(r.index), range_text(r.sec, r.sub), bus));
    }
    for (const auto& v : valid_) by_domain_[fn(v.index).bdf.domain].push_back(v);
  }

  // Parent of every function on (domain, bus): the bridge whose secondary bus it is, else (a bus
  // no bridge names as secondary, e.g. behind a bridge the dump does not hold) the narrowest
  // bridge whose range holds it, as lspci's insert_dev() descends; else none: a root bus.
  void assign_parents() {
    std::map<std::pair<uint32_t, uint8_t>, std::optional<size_t>> parent_of_bus;
    for (const Function& f : t_.functions) {
      auto key = std::make_pair(f.bdf.domain, f.bdf.bus);
      if (parent_of_bus.count(key)) continue;
      parent_of_bus[key] = parent_for_bus(key.first, key.second);
    }
    for (size_t i = 0; i < t_.functions.size(); ++i)
      t_.functions[i].parent = parent_of_bus[{fn(i).bdf.domain, fn(i).bdf.bus}];
  }

  std::optional<size_t> parent_for_bus(uint32_t domain, uint8_t bus) {
    auto it = by_domain_.find(domain);
    if (it == by_domain_.end()) return std::nullopt;
    std::vector<BridgeRange> exact, holding;
    for (const auto& b : it->second) {
      if (b.sec == bus) exact.push_back(b);
      else if (b.sec < bus && bus <= b.sub) holding.push_back(b);
    }
    auto narrowest = [&](std::vector<BridgeRange>& v) {
      std::sort(v.begin(), v.end(), [](const BridgeRange& x, const BridgeRange& y) {
        return std::make_pair(x.width(), x.index) < std::make_pair(y.width(), y.index);
      });
      return v.front().index;
    };
    auto list = [&](std::vector<BridgeRange> v) {
      std::sort(v.begin(), v.end(), [](const BridgeRange& x, const BridgeRange& y) { return x.index < y.index; });
      std::vector<std::string> parts;
      for (size_t k = 0; k < v.size() && k < kListed; ++k)
        parts.push_back(fmt::format("{} (range {})", who(v[k].index), range_text(v[k].sec, v[k].sub)));
      if (v.size() > kListed) parts.push_back(fmt::format("{} more", v.size() - kListed));
      return fmt::format("{}", fmt::join(parts, ", "));
    };
    if (!exact.empty()) {
      // The kernel keeps the bus of the first bridge its scan reaches (pci_scan_bridge_extend():
      // "we already got to this bus through a different bridge"): here the lowest address.
      size_t chosen = std::min_element(exact.begin(), exact.end(), [](const BridgeRange& x, const BridgeRange& y) {
                        return x.index < y.index;
                      })->index;
      if (exact.size() > 1)
        note("buses shared by bridges", fmt::format("bus {} is the secondary bus of {} bridges: {}; its functions are placed below {}, the "
                         "lowest address, as the kernel keeps the first bridge that reaches a bus",
                         bus_name(domain, bus), exact.size(), list(exact), who(chosen)));
      return chosen;
    }
    if (!holding.empty()) {
      size_t chosen = narrowest(holding);
      note("buses behind bridges missing from the dump", fmt::format("bus {} is no bridge's secondary bus but lies in the range of {}: its functions are placed "
                       "below {}, as `lspci -t` does (the bridge above them is not in the dump)",
                       bus_name(domain, bus), list(holding), who(chosen)));
      return chosen;
    }
    return std::nullopt;
  }

  // In a tree the ranges holding a bridge's secondary bus are its own and its ancestors'; any
  // other is an overlap the kernel would not have left.
  void check_overlaps() {
    std::set<std::pair<uint32_t, uint8_t>> occupied;
    for (const Function& f : t_.functions) occupied.insert({f.bdf.domain, f.bdf.bus});
    for (const auto& [domain, bridges] : by_domain_) {
      for (const auto& b : bridges) {
        std::set<size_t> ancestors;
        std::optional<size_t> p = fn(b.index).parent;
        for (size_t steps = 0; p && steps <= t_.functions.size(); ++steps, p = fn(*p).parent) ancestors.insert(*p);
        for (const auto& o : bridges) {
          if (!budget_) {
            note("unchecked overlaps", "the dump holds too many bridges to check every pair of bus ranges for "
                                       "overlaps: the check stopped early");
            return;
          }
          --budget_;
          if (o.index == b.index || ancestors.count(o.index) || b.sec < o.sec || b.sec > o.sub) continue;
          if (o.sec == b.sec) {
            // Two bridges naming one secondary bus: reported with the placement when a function sits on it.
            if (b.index < o.index && !occupied.count({domain, b.sec}))
              note("buses shared by bridges",
                   fmt::format("bus {} is the secondary bus of both {} (range {}) and {} (range {})",
                               bus_name(domain, b.sec), who(b.index), range_text(b.sec, b.sub), who(o.index),
                               range_text(o.sec, o.sub)));
            continue;
          }
          if (noted_["overlapping bridge ranges"] >= kPerKind) {  // counted without formatting a message
            ++noted_["overlapping bridge ranges"];
            continue;
          }
          note("overlapping bridge ranges",
               fmt::format("bridge bus ranges overlap: {}'s secondary bus {:02x} also lies in the range {} of {}, "
                           "which is not upstream of it",
                           who(b.index), b.sec, range_text(o.sec, o.sub), who(o.index)));
        }
      }
    }
  }

  // Parents lie on lower bus numbers (a bridge's secondary bus is above its own), so there is no
  // cycle; checked anyway, bounded, so that no later walk can loop.
  void check_acyclic() {
    size_t n = t_.functions.size();
    for (size_t i = 0; i < n; ++i) {
      std::optional<size_t> p = fn(i).parent;
      size_t steps = 0;
      while (p && steps <= n) p = fn(*p).parent, ++steps;
      if (p) {
        note("endless parent chains", fmt::format("{}: its chain of parents does not end: placed on a root bus", who(i)));
        t_.functions[i].parent.reset();
      }
    }
  }

  static std::optional<std::pair<uint32_t, uint8_t>> parse_root_bus(std::string_view s) {
    if (s.starts_with("pci")) s.remove_prefix(3);
    auto colon = s.find(':');
    if (colon == std::string_view::npos || colon < 4 || colon > 8 || s.size() - colon - 1 != 2) return std::nullopt;
    auto hex = [](std::string_view h, uint32_t& v) {
      auto [end, ec] = std::from_chars(h.data(), h.data() + h.size(), v, 16);
      return ec == std::errc() && end == h.data() + h.size();
    };
    uint32_t domain = 0, bus = 0;
    if (!hex(s.substr(0, colon), domain) || !hex(s.substr(colon + 1), bus)) return std::nullopt;
    return std::make_pair(domain, static_cast<uint8_t>(bus));
  }

  // Root buses to host bridges: each its own (the default), or, with --dump-host-bridge, the
  // named host bridge of the domain at or below the root bus.
  void assign_host_bridges(const DumpAssumptions& a) {
    std::set<std::pair<uint32_t, uint8_t>> roots, hosts;
    for (const Function& f : t_.functions)
      if (!f.parent) roots.insert({f.bdf.domain, f.bdf.bus});
    for (const auto& spec : a.host_bridges) {
      auto rb = parse_root_bus(spec);
      if (!rb)
        throw InputError(fmt::format("--dump-host-bridge '{}': expected DDDD:BB, a root bus as in pci0000:00", spec));
      auto it = by_domain_.find(rb->first);
      bool behind = false;
      if (it != by_domain_.end())
        for (const auto& b : it->second)
          if (rb->second >= b.sec && rb->second <= b.sub) {
            note("--dump-host-bridge buses behind bridges", fmt::format("--dump-host-bridge {}: bus {:02x} lies below bridge {} (range {}), so it is no root "
                             "bus: ignored", spec, rb->second, who(b.index), range_text(b.sec, b.sub)));
            behind = true;
            break;
          }
      if (!behind) hosts.insert(*rb);
    }
    const auto listed = hosts;
    for (const auto& rb : roots) {
      std::optional<std::pair<uint32_t, uint8_t>> host;
      for (const auto& h : listed)
        if (h.first == rb.first && h.second <= rb.second) host = h;
      if (!host) {
        if (!a.host_bridges.empty())
          note("root buses below every --dump-host-bridge", fmt::format("root bus {} lies below every --dump-host-bridge of domain {:04x}: taken as its own host "
                           "bridge {}", bus_name(rb.first, rb.second), rb.first, hb_name(rb.first, rb.second)));
        host = rb;
        hosts.insert(rb);
      }
      host_of_root_[rb] = *host;
    }
    for (const auto& h : hosts) {
      HostBridge hb;
      hb.name = hb_name(h.first, h.second);
      hb.domain = h.first;
      hb.bus = h.second;
      t_.host_bridges.push_back(std::move(hb));
    }
  }

  // Host bridge, sysfs path and children, parents first (functions are sorted by BDF, but a
  // parent may sort after its child in a hostile dump).
  void place() {
    size_t n = t_.functions.size();
    std::vector<bool> done(n, false);
    for (size_t i = 0; i < n; ++i) {
      std::vector<size_t> chain;  // i, its parent, ... up to the first one already placed or a root
      for (std::optional<size_t> k = i; k && !done[*k] && chain.size() <= n; k = fn(*k).parent) chain.push_back(*k);
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        Function& f = t_.functions[*it];
        if (f.parent) {
          const Function& p = fn(*f.parent);
          f.host_bridge = p.host_bridge;
          f.sysfs_path = p.sysfs_path + "/" + f.bdf.str();
        } else {
          auto h = host_of_root_.at({f.bdf.domain, f.bdf.bus});
          f.host_bridge = hb_name(h.first, h.second);
          f.sysfs_path = "sys/devices/" + f.host_bridge + "/" + f.bdf.str();
        }
        done[*it] = true;
      }
    }
    for (size_t i = 0; i < n; ++i)
      if (auto p = fn(i).parent) t_.functions[*p].children.push_back(i);
    // The kernel's root bus list is in devfn order; root buses joined to a named host bridge follow.
    std::map<std::string, size_t> host_index;
    for (size_t h = 0; h < t_.host_bridges.size(); ++h) host_index[t_.host_bridges[h].name] = h;
    std::vector<std::vector<size_t>> joined(t_.host_bridges.size());
    for (size_t i = 0; i < n; ++i) {
      if (fn(i).parent) continue;
      HostBridge& hb = t_.host_bridges[host_index.at(fn(i).host_bridge)];
      if (fn(i).bdf.bus == hb.bus && fn(i).bdf.domain == hb.domain) hb.root_bus_devices.push_back(i);
      else joined[host_index.at(fn(i).host_bridge)].push_back(i);
    }
    for (size_t h = 0; h < t_.host_bridges.size(); ++h) {
      auto& devs = t_.host_bridges[h].root_bus_devices;
      devs.insert(devs.end(), joined[h].begin(), joined[h].end());
    }
  }

  Topology& t_;
  const std::string& file_;
  std::vector<BridgeRange> valid_;
  std::map<uint32_t, std::vector<BridgeRange>> by_domain_;
  std::map<std::pair<uint32_t, uint8_t>, std::pair<uint32_t, uint8_t>> host_of_root_;
  std::map<std::string, size_t> noted_;  // findings by kind
};

// `lspci -xxxx` prints what the kernel exposes: 4096 bytes for a function with extended config
// space, 256 for one without (pci_cfg_space_size()). In such a dump a 256-byte function has no
// extended capabilities, so no ACS, rather than unknown ones; one whose bytes were cut short by
// damage in the dump says nothing about its size, and its ACS stays unknown.
void infer_config_sizes(Topology& t, const std::vector<bool>& cut_short) {
  bool extended_dump = std::any_of(t.functions.begin(), t.functions.end(),
                                   [](const Function& f) { return f.config_readable == 4096; });
  if (!extended_dump) return;
  for (size_t i = 0; i < t.functions.size(); ++i) {
    Function& f = t.functions[i];
    if (f.config_readable != 256 || f.config_size != 0 || cut_short[i]) continue;
    f.config_size = 256;
    f.acs = Acs{CapState::kAbsent};
    f.ari = f.rebar_state = CapState::kAbsent;
  }
}

// Each function of the parsed dump decoded by libpci from the bytes it has intact; functions
// without the 64 bytes that identify them are left out, each with a finding naming its line.
std::vector<Decoded> decode_dump(const std::string& file, const ParsedDump& dump, std::vector<Finding>& findings) {
  std::vector<Decoded> out;
  size_t left_out = 0;
  constexpr size_t kListed = 64;
  auto leave_out = [&](std::string message) {
    if (++left_out <= kListed) findings.push_back({file, std::move(message)});
  };
  // A mail often holds `lspci -vvv` and, further down, `lspci -xxxx` of the same function: a
  // header without rows is worth a finding only when no other copy brings the bytes.
  std::set<Bdf> with_rows;
  for (const DumpedFunction& d : dump.functions)
    if (d.rows) with_rows.insert(d.bdf);
  for (const DumpedFunction& d : dump.functions) {
    std::string who = d.bdf.str();
    size_t readable = whole_config_regions(d.bytes.size());
    if (d.rows == 0 && with_rows.count(d.bdf)) continue;
    if (d.rows == 0) {
      leave_out(fmt::format("line {}: {}: no hex rows follow its header line: left out (the dump has no config "
                            "space of it)",
                            d.header_line, who));
      continue;
    }
    if (readable < 64) {
      leave_out(fmt::format("line {}: {}: {}, so only {} bytes of its config space are intact, fewer than the 64 "
                            "that identify a function: left out",
                            d.cut_line, who, d.cut_why, d.bytes.size()));
      continue;
    }
    std::vector<Finding> decoded_findings;
    Decoded x;
    try {
      x.f = decode_config_bytes(d.bdf, d.bytes, decoded_findings);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: line {}: {}", file, d.header_line, e.what()));
    }
    for (auto& finding : decoded_findings)
      findings.push_back({file, fmt::format("line {}: {}: {}", d.header_line, who, finding.message)});
    if (x.f.header_type == 2 && d.bytes.size() > 0x1a) x.card_bus = {d.bytes[0x19], d.bytes[0x1a]};
    if (d.cut_at) {
      x.cut_short = true;
      findings.push_back({file, fmt::format("line {}: {}: {}: its config space from offset {:#x} on is unreadable, "
                                            "so the first {} bytes are used{}",
                                            d.cut_line, who, d.cut_why, *d.cut_at, readable,
                                            readable < 4096 ? " (what lies beyond them is unknown)" : "")});
    }
    out.push_back(std::move(x));
  }
  if (left_out > kListed)
    findings.push_back({file, fmt::format("{} more functions left out for want of config bytes", left_out - kListed)});
  return out;
}

Platform dump_platform(const DumpAssumptions& a) {
  Platform p;
  if (a.cpu) {
    p.arch = a.cpu->arch;
    p.cpu_vendor = a.cpu->vendor;
    p.cpu_family = a.cpu->family;
    p.cpu_model = a.cpu->model;
  }
  if (!a.kernel.empty()) {
    if (!KernelRelease::parse(a.kernel))
      throw InputError(fmt::format("--kernel '{}': expected a release like 6.1 or 6.1.192", a.kernel));
    // The rules are those of --kernel; a kernel named for a dump is taken to have P2PDMA built in.
    p.kernel_release = a.kernel;
    p.config_p2pdma = Known::kYes;
    p.kernel_config_source = "assumed with --kernel (an lspci dump has no kernel config)";
  }
  if (a.iommu.empty() || a.iommu == "unknown") {
    p.iommu_mode = "unknown";
    p.iommu_mode_source = "an lspci dump does not say (--dump-iommu)";
  } else if (a.iommu == "off" || a.iommu == "passthrough" || a.iommu == "translated") {
    p.iommu_mode = a.iommu;
    p.iommu_mode_source = "--dump-iommu";
    p.iommu_groups_present = a.iommu != "off";
  } else {
    throw InputError(fmt::format("--dump-iommu '{}': expected off, passthrough or translated", a.iommu));
  }
  return p;
}

}  // namespace

DumpCpu DumpCpu::parse(std::string_view text) {
  auto bad = [&] {
    return InputError(fmt::format(
        "--dump-cpu '{}': expected VENDOR:FAMILY[:MODEL] as /proc/cpuinfo gives vendor_id, cpu family and model "
        "(e.g. AuthenticAMD:25:1, GenuineIntel:6:207), or an architecture ({})",
        text, fmt::join(kOtherArches, ", ")));
  };
  DumpCpu cpu;
  if (text.find(':') == std::string_view::npos) {
    for (auto arch : kOtherArches)
      if (lower(text) == arch) {
        cpu.arch = arch;
        return cpu;
      }
    throw bad();
  }
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) throw bad();
  std::string vendor = lower(parts[0]);
  vendor.erase(std::remove(vendor.begin(), vendor.end(), ' '), vendor.end());
  for (auto v : kX86Vendors) {
    std::string canonical = lower(v);
    canonical.erase(std::remove(canonical.begin(), canonical.end(), ' '), canonical.end());
    if (vendor == canonical) cpu.vendor = v;
  }
  if (cpu.vendor.empty()) throw bad();
  cpu.arch = "x86";
  cpu.family = parse_number(parts[1]);
  if (!cpu.family) throw bad();
  if (parts.size() == 3) {
    cpu.model = parse_number(parts[2]);
    if (!cpu.model) throw bad();
  }
  return cpu;
}

std::string DumpCpu::str() const {
  if (vendor.empty()) return arch;
  std::string name = vendor;
  name.erase(std::remove(name.begin(), name.end(), ' '), name.end());
  std::string s = fmt::format("{} family {} ({:#x})", name, family.value_or(0), family.value_or(0));
  if (model) s += fmt::format(" model {} ({:#x})", *model, *model);
  return s;
}

Topology read_dump_topology(const std::string& dump_file, const DumpAssumptions& assumptions) {
  Topology t;
  t.lspci_dump = dump_file;
  t.platform = dump_platform(assumptions);
  ParsedDump dump = parse_dump(dump_file, read_input_file(dump_file, kMaxDumpFileBytes));
  if (dump.hex_rows == 0)
    throw InputError(fmt::format(
        "{}: no config space in it (no hex rows such as \"00: 86 80 ...\"){}: p2paudit reads the bytes of "
        "`lspci -xxxx`, not lspci's decoded text or tree; on the machine run `sudo lspci -xxxx > dump.txt` and "
        "pass that file",
        dump_file,
        dump.functions.empty() ? "" : fmt::format(", only {} function header line(s), as `lspci` or `lspci -v` print",
                                                  dump.functions.size())));
  std::vector<Finding> decode_findings = std::move(dump.findings);
  auto decoded = decode_dump(dump_file, dump, decode_findings);
  if (decoded.empty())
    throw InputError(fmt::format("{}: no PCI function in it with its first 64 config bytes intact: expected "
                                 "`sudo lspci -xxxx` output (a line such as \"00:00.0 Host bridge: ...\" followed by "
                                 "lines of hex bytes){}",
                                 dump_file, decode_findings.empty() ? "" : " (" + decode_findings.front().message + ")"));
  decoded = drop_duplicates(std::move(decoded), dump_file, t.findings);
  std::vector<bool> cut_short;
  for (auto& d : decoded) {
    // The config decoder leaves a CardBus bridge's bus numbers out; `lspci -t` draws its card bus
    // like a bridge's secondary bus (PCI_CB_CARD_BUS, PCI_CB_SUBORDINATE_BUS).
    if (d.f.header_type == 2 && !d.f.secondary_bus && d.card_bus) {
      d.f.secondary_bus = d.card_bus->first;
      d.f.subordinate_bus = d.card_bus->second;
    }
    cut_short.push_back(d.cut_short);
    t.functions.push_back(std::move(d.f));
  }
  infer_config_sizes(t, cut_short);
  for (const auto& f : t.functions)
    if (f.acs.state == CapState::kUnknown || f.pcie_type == PcieType::kUnknown) t.config_fully_readable = false;
  TreeBuilder(t, dump_file).build(assumptions);

  // What the dump cannot tell first, then what the tree builder and the decoder noticed.
  std::vector<Finding> findings;
  for (auto& note : dump_assumption_notes("", assumptions, t)) findings.push_back({dump_file, std::move(note)});
  findings.insert(findings.end(), t.findings.begin(), t.findings.end());
  findings.insert(findings.end(), decode_findings.begin(), decode_findings.end());
  t.findings = std::move(findings);
  return t;
}

std::vector<std::string> dump_assumption_notes(const std::string& dump_file, const DumpAssumptions& a,
                                               const Topology& t) {
  std::vector<std::string> out;
  size_t most = 0;
  std::map<size_t, std::vector<std::string>> short_of_it;  // functions by the config bytes the dump has
  for (const auto& f : t.functions) most = std::max(most, f.config_readable);
  for (const auto& f : t.functions)
    if (f.config_readable < 256 || (f.config_readable < 4096 && f.acs.state == CapState::kUnknown))
      short_of_it[f.config_readable].push_back(f.bdf.str());
  std::string kind = most >= 4096 ? "`lspci -xxxx`, extended config space included"
                     : most >= 256 ? "`lspci -xxx`: 256 bytes a function, no extended capabilities"
                                   : "`lspci -x`: 64 bytes a function, no capabilities";
  out.push_back(fmt::format(
      "input is an lspci dump{}, {} ({} functions): the tree is rebuilt from bridge bus ranges as `lspci -t` draws "
      "it; drivers, IOMMU groups, NUMA nodes, BAR sizes and whether the machine is a virtual machine are not in "
      "a dump",
      dump_file.empty() ? "" : " (" + dump_file + ")", kind, t.functions.size()));
  if (!short_of_it.empty()) {
    constexpr size_t kNamed = 4;
    std::vector<std::string> parts;
    for (const auto& [bytes, who] : short_of_it) {
      std::vector<std::string> named(who.begin(), who.begin() + static_cast<long>(std::min(who.size(), kNamed)));
      if (who.size() > kNamed) named.push_back(fmt::format("and {} more", who.size() - kNamed));
      parts.push_back(fmt::format("{} bytes of config space for {}", bytes, fmt::join(named, ", ")));
    }
    out.push_back(fmt::format("the dump has {}: their extended capabilities (ACS) are unknown: rerun `sudo lspci "
                              "-xxxx` (`-xxxx` prints all 4096 bytes; without sudo lspci prints 64)",
                              fmt::join(parts, ", and ")));
  }

  std::vector<std::string> hbs;
  for (const auto& hb : t.host_bridges) {
    std::set<uint8_t> buses;
    for (size_t i : hb.root_bus_devices)
      if (t.functions[i].bdf.bus != hb.bus) buses.insert(t.functions[i].bdf.bus);
    std::string joined;
    for (uint8_t b : buses) joined += fmt::format("{}{:02x}", joined.empty() ? " (also root bus " : ", ", b);
    hbs.push_back(hb.name + joined + (joined.empty() ? "" : ", through bridges the dump does not show)"));
  }
  if (hbs.size() > 16) {
    size_t more = hbs.size() - 16;
    hbs.resize(16);
    hbs.push_back(fmt::format("{} more", more));
  }
  if (a.host_bridges.empty())
    out.push_back(fmt::format("host bridges: a dump does not show them; each root bus is taken as its own host "
                              "bridge ({}); where root buses share one, pass --dump-host-bridge DDDD:BB for each "
                              "real host bridge",
                              fmt::join(hbs, ", ")));
  else
    out.push_back(fmt::format("host bridges as --dump-host-bridge gives them: {}", fmt::join(hbs, "; ")));

  if (a.cpu)
    out.push_back(fmt::format("CPU: {} (--dump-cpu)", a.cpu->str()));
  else
    out.push_back("CPU: unknown, a dump does not record it, so the kernel's AMD Zen rule (cpu_supports_p2pdma) "
                  "cannot be decided: pass --dump-cpu VENDOR:FAMILY:MODEL from /proc/cpuinfo (e.g. "
                  "AuthenticAMD:25:1)");
  if (a.iommu.empty() || a.iommu == "unknown")
    out.push_back("IOMMU mode: unknown, a dump does not record it (the 5.2-5.3 AMD root-complex rule takes the "
                  "IOMMU as absent): pass --dump-iommu off|passthrough|translated");
  else
    out.push_back(fmt::format("IOMMU mode: {} (--dump-iommu)", a.iommu));
  if (a.kernel.empty())
    out.push_back("kernel release and CONFIG_PCI_P2PDMA: unknown, a dump does not record them: the newest rules "
                  "known are applied, with CONFIG_PCI_P2PDMA=y assumed; pass --kernel X.Y[.Z] for another release");
  else
    out.push_back(fmt::format("kernel: {} (--kernel), CONFIG_PCI_P2PDMA=y assumed", a.kernel));
  return out;
}

}  // namespace p2paudit
