// SPDX-License-Identifier: GPL-2.0-or-later
// Whitelist patches in upstream shape (docs/whitelist.md, "The patch"): the table line, the commit
// message, the sender's git identity and the mbox a kernel tree takes with `git am`. Every value
// that comes from a snapshot, an evidence file, a git config file or a kernel tree is one escaped
// line here (escape_line), and every line of the message passes one rule (git_text.h): input can
// start no line that git am reads as structure (an mbox From line, a patch break, a scissors line,
// an in-body header, a trailer), and cannot end a C comment.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "p2paudit/errors.h"
#include "p2paudit/fleet/git_text.h"
#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/input_file.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/topology_report.h"

namespace p2paudit::fleet {

namespace {

constexpr size_t kMaxGitConfigBytes = 1u << 20;
constexpr size_t kMaxKernelSourceBytes = 4u << 20;  // drivers/pci/p2pdma.c is ~40 KiB
constexpr size_t kMaxLogLines = 8;

const char* vendor_macro(uint16_t vendor) {
  switch (vendor) {
    case 0x8086: return "PCI_VENDOR_ID_INTEL";
    case 0x1022: return "PCI_VENDOR_ID_AMD";
    case 0x1b36: return "PCI_VENDOR_ID_REDHAT";
    case 0x1ae0: return "PCI_VENDOR_ID_GOOGLE";
    case 0x1d0f: return "PCI_VENDOR_ID_AMAZON";
    case 0x19e5: return "PCI_VENDOR_ID_HUAWEI";
    case 0x10de: return "PCI_VENDOR_ID_NVIDIA";
    case 0x1d17: return "PCI_VENDOR_ID_ZHAOXIN";
    case 0x1ded: return "PCI_VENDOR_ID_ALIBABA";
    default: return nullptr;
  }
}

// Paragraphs wrapped at 72 columns. A break is made only where the next line would not start
// with what git reads as structure (git_text.h: "---", "From ", "diff -", "Link:"...): such a
// word from input stays on the line before, however long that makes it.
std::string wrapped(const std::string& text) {
  std::string out, line;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(' ', start);
    std::string word = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!line.empty() && line.size() + 1 + word.size() > 72 && may_start_git_line(std::string_view(text).substr(start)))
      out += line + "\n", line.clear();
    line += (line.empty() ? "" : " ") + word;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out + line + "\n";
}

std::string trim(std::string s) {
  auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!s.empty() && space(s.back())) s.pop_back();
  size_t i = 0;
  while (i < s.size() && space(s[i])) ++i;
  return s.substr(i);
}

void erase_all(std::string& s, const std::string& what) {
  for (size_t at; (at = s.find(what)) != std::string::npos;) s.erase(at, what.size());
}

std::string collapse_spaces(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ' || (!out.empty() && out.back() != ' ')) out += c;
  return trim(out);
}

bool ends_with_ci(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), s.end() - static_cast<long>(suffix.size()), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
}

// "Intel Corporation" -> "Intel", "Advanced Micro Devices, Inc. [AMD]" -> "AMD": the short vendor
// name pci.ids gives in brackets, else the name without its company form.
std::string short_vendor(const std::string& vendor_name) {
  std::string v = vendor_name;
  if (auto open = v.rfind('['); open != std::string::npos && v.back() == ']') return trim(v.substr(open + 1, v.size() - open - 2));
  if (auto comma = v.find(','); comma != std::string::npos) v.resize(comma);
  for (const char* form : {" Corporation", " Corp.", " Corp", " Inc.", " Inc", " Ltd.", " Ltd", " Co.", " GmbH", " Limited"})
    if (ends_with_ci(v, form)) v.resize(v.size() - std::string(form).size());
  return trim(v);
}

// The device's name without the words that say which function of the platform it is.
std::string platform_of_device(const std::string& device_name) {
  std::string d = trim(device_name);
  bool cut = true;
  while (cut) {
    cut = false;
    for (const char* tail : {"Host Bridge/DRAM Registers", "Host Bridge/DRAM Controller", "DRAM Controller", "Host Bridge",
                             "Host bridge", "Root Complex", "Root Port", "Registers", "DMI2", "DMI", "Memory Controller"})
      if (ends_with_ci(d, tail) && d.size() > std::string(tail).size()) {
        d = trim(d.substr(0, d.size() - std::string(tail).size()));
        while (!d.empty() && (d.back() == '-' || d.back() == ',' || d.back() == '/')) d = trim(d.substr(0, d.size() - 1));
        cut = true;
      }
  }
  return d;
}

// "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz" -> "Intel Xeon E5-2680 v4".
std::string platform_of_cpu(std::string model) {
  for (const char* mark : {"(R)", "(r)", "(TM)", "(tm)", "®", "™"}) erase_all(model, mark);
  std::string out;
  size_t start = 0;
  while (start < model.size()) {
    size_t end = model.find(' ', start);
    if (end == std::string::npos) end = model.size();
    std::string word = model.substr(start, end - start);
    start = end + 1;
    if (word == "@") break;
    if (word.empty() || word == "CPU" || word == "Processor" || word == "processor") continue;
    if (!out.empty()) out += ' ';
    out += word;
  }
  return out;
}

// What may stand inside the C comment: one line, no comment end.
std::string comment_safe(std::string text) {
  for (size_t at; (at = text.find("*/")) != std::string::npos;) text.replace(at, 2, "* /");
  for (size_t at; (at = text.find("/*")) != std::string::npos;) text.replace(at, 2, "/ *");
  return text;
}

KernelRules with_entry(const KernelRules& kernel, uint16_t vendor, uint16_t device) {
  KernelRules r = kernel;
  WhitelistEntry e;
  e.vendor = vendor;
  e.device = device;
  e.origin = "whitelist candidate";
  r.whitelist.push_back(e);
  return r;
}

// ---- `lspci -tv` of the devices of the pairs and the bridges above them (pciutils ls-tree.c).

struct TreeDraw {
  const Topology& topo;
  const std::set<size_t>& keep;
  std::string line, out;

  size_t put(size_t p, const std::string& s) {
    line.resize(p);
    line += s;
    return line.size();
  }
  // print_it(): the line is printed, then every '+' and '|' of it becomes '|' and the rest blank.
  void print_it(size_t p) {
    line.resize(p);
    out += line + "\n";
    for (char& c : line) c = (c == '+' || c == '|') ? '|' : ' ';
  }
  std::vector<size_t> kept_children(size_t i) const {
    std::vector<size_t> kids;
    for (size_t k : topo.functions[i].children)
      if (keep.count(k)) kids.push_back(k);
    sort_devfn(kids);
    return kids;
  }
  void sort_devfn(std::vector<size_t>& v) const {
    std::sort(v.begin(), v.end(), [&](size_t a, size_t b) { return topo.functions[a].bdf < topo.functions[b].bdf; });
  }
  std::string lookup_name(const Function& f) const {
    if (f.vendor_name.empty()) return fmt::format("Device {:04x}:{:04x}", f.vendor, f.device);
    return escape_line(f.vendor_name) + " " +
           (f.device_name.empty() ? fmt::format("Device {:04x}", f.device) : escape_line(f.device_name));
  }
  void dev(size_t i, size_t p) {
    const Function& f = topo.functions[i];
    p = put(p, fmt::format("{:02x}.{:x}", f.bdf.dev, f.bdf.fn));
    if (f.secondary_bus) {
      uint8_t sec = *f.secondary_bus, sub = f.subordinate_bus.value_or(sec);
      p = put(p, sec == sub ? fmt::format("-[{:02x}]--", sec) : fmt::format("-[{:02x}-{:02x}]--", sec, sub));
      bus(kept_children(i), p);
      return;
    }
    p = put(p, "  " + lookup_name(f));
    print_it(p);
  }
  void bus(const std::vector<size_t>& devs, size_t p) {
    if (devs.empty()) return print_it(p);
    if (devs.size() == 1) return dev(devs[0], put(p, "--"));
    for (size_t k = 0; k + 1 < devs.size(); ++k) dev(devs[k], put(p, "+-"));
    dev(devs.back(), put(p, "\\-"));
  }
};

}  // namespace

std::string lspci_tree(const Topology& topo, const std::set<size_t>& keep) {
  std::vector<const HostBridge*> roots;
  for (const auto& hb : topo.host_bridges)
    if (std::any_of(hb.root_bus_devices.begin(), hb.root_bus_devices.end(), [&](size_t i) { return keep.count(i) > 0; }))
      roots.push_back(&hb);
  std::sort(roots.begin(), roots.end(), [](const HostBridge* a, const HostBridge* b) {
    return std::tie(a->domain, a->bus) < std::tie(b->domain, b->bus);
  });
  TreeDraw d{topo, keep, "", ""};
  auto root_devs = [&](const HostBridge& hb) {
    std::vector<size_t> v;
    for (size_t i : hb.root_bus_devices)
      if (keep.count(i)) v.push_back(i);
    d.sort_devfn(v);
    return v;
  };
  size_t p = d.put(0, "-");
  if (roots.size() == 1) {
    d.bus(root_devs(*roots[0]), d.put(p, fmt::format("[{:04x}:{:02x}]-", roots[0]->domain, roots[0]->bus)));
  } else {
    for (size_t k = 0; k < roots.size(); ++k)
      d.bus(root_devs(*roots[k]), d.put(p, fmt::format("{}-[{:04x}:{:02x}]-", k + 1 < roots.size() ? "+" : "\\",
                                                       roots[k]->domain, roots[k]->bus)));
  }
  return d.out;
}

namespace {

// ---- git identity: a [user] section of a git config file, without running git.

// The value of a config line "key = value", with git's quoting: "..." keeps spaces and # ;,
// backslash escapes \" \\ \n \t; an unquoted # or ; starts a comment.
std::string config_value(const std::string& raw) {
  std::string out;
  bool quoted = false;
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '"') { quoted = !quoted; continue; }
    if (!quoted && (c == '#' || c == ';')) break;
    if (c == '\\' && i + 1 < raw.size()) {
      char n = raw[++i];
      out += n == 'n' ? '\n' : n == 't' ? '\t' : n;
      continue;
    }
    out += c;
  }
  return quoted ? out : trim(out);
}

void read_git_config(const std::string& path, GitIdentity& id, std::string& name_source, std::string& email_source) {
  std::string text;
  try {
    text = read_input_file(path, kMaxGitConfigBytes);
  } catch (const InputError&) {
    return;  // absent, not a regular file, or too large: no identity from it
  }
  bool in_user = false;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    std::string line = trim(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    start = end == std::string::npos ? text.size() : end + 1;
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      auto close = line.find(']');
      std::string section = trim(line.substr(1, close == std::string::npos ? std::string::npos : close - 1));
      std::transform(section.begin(), section.end(), section.begin(), [](unsigned char c) { return std::tolower(c); });
      in_user = section == "user";  // [user "x"] is a subsection: not the identity
      line = close == std::string::npos ? "" : trim(line.substr(close + 1));
      if (line.empty()) continue;
    }
    if (!in_user) continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = trim(line.substr(0, eq));
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string value = config_value(line.substr(eq + 1));
    if (key == "name" && !value.empty()) id.name = value, name_source = path;
    if (key == "email" && !value.empty()) id.email = value, email_source = path;
  }
}

// One line, without the brackets that delimit the address.
std::string ident_part(const std::string& s) {
  std::string out = escape_line(trim(s));
  out.erase(std::remove_if(out.begin(), out.end(), [](char c) { return c == '<' || c == '>'; }), out.end());
  return trim(out);
}

// ---- the kernel tree's table

struct TableEntry {
  size_t line = 0;                  // index into the file's lines
  std::string vendor, device;       // as written: "PCI_VENDOR_ID_INTEL", "0x3c00"
  std::string vendor_sep, device_sep;
};

struct Table {
  size_t end_line = 0;              // the "{}" sentinel (or "};" when there is none)
  std::vector<TableEntry> entries;
  std::string vendor_sep = " ";     // what follows "VENDOR," in the table's last entry
  std::string device_sep = " ";     // what follows "DEVICE,"
  bool bool_flags = false;          // 5.2 era: `bool req_same_host_bridge` (true/false)
};

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::optional<Table> find_table(const std::vector<std::string>& lines) {
  size_t open = lines.size();
  for (size_t i = 0; i < lines.size(); ++i)
    if ((lines[i].find("whitelist[] = {") != std::string::npos || lines[i].find("allowlist[] = {") != std::string::npos) &&
        lines[i].find("p2pdma") != std::string::npos) {
      open = i;
      break;
    }
  if (open == lines.size()) return std::nullopt;
  Table t;
  for (size_t i = open; i-- > 0 && i + 12 > open;)
    if (lines[i].find("req_same_host_bridge") != std::string::npos) t.bool_flags = true;
  for (size_t i = open + 1; i < lines.size(); ++i) {
    std::string s = trim(lines[i]);
    if (s == "{}," || s == "{}" || s.rfind("};", 0) == 0) {
      t.end_line = i;
      return t;
    }
    if (s.size() < 2 || s[0] != '{') continue;
    auto c1 = s.find(',');
    if (c1 == std::string::npos) continue;
    size_t d0 = s.find_first_not_of(" \t", c1 + 1);
    auto c2 = s.find(',', c1 + 1);
    if (d0 == std::string::npos || c2 == std::string::npos) continue;
    TableEntry e{i, trim(s.substr(1, c1 - 1)), trim(s.substr(d0, c2 - d0)), s.substr(c1 + 1, d0 - c1 - 1), " "};
    size_t f0 = s.find_first_not_of(" \t", c2 + 1);
    if (f0 != std::string::npos) e.device_sep = s.substr(c2 + 1, f0 - c2 - 1);
    t.vendor_sep = e.vendor_sep, t.device_sep = e.device_sep;
    t.entries.push_back(std::move(e));
  }
  return std::nullopt;  // no end of the table: not a table this code understands
}

std::optional<unsigned long> hex_value(const std::string& s) {
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return std::nullopt;
  char* end = nullptr;
  unsigned long v = std::strtoul(s.c_str() + 2, &end, 16);
  if (*end != 0) return std::nullopt;
  return v;
}

// git's default hunk header context: the last line above the hunk that starts with a letter, _ or $.
std::string funcname(const std::vector<std::string>& lines, size_t before) {
  for (size_t i = before; i-- > 0;) {
    const std::string& l = lines[i];
    if (!l.empty() && (std::isalpha(static_cast<unsigned char>(l[0])) || l[0] == '_' || l[0] == '$'))
      return " " + (l.size() > 80 ? l.substr(0, 80) : l);
  }
  return "";
}

std::string rfc2822_date() {
  std::time_t now = std::time(nullptr);
  if (const char* epoch = std::getenv("SOURCE_DATE_EPOCH"); epoch && *epoch) {
    char* end = nullptr;
    long long v = std::strtoll(epoch, &end, 10);
    if (*end == 0 && v >= 0) now = static_cast<std::time_t>(v);
  }
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S +0000", &tm);
  return buf;
}

}  // namespace

std::string platform_name(const Topology& topo, const CandidateContext& context, const WhitelistCandidate& c) {
  const Function* root = nullptr;
  for (const auto& f : topo.functions)
    if (f.vendor == c.vendor && f.device == c.device && !f.parent) {
      root = &f;
      break;
    }
  std::string device = escape_line(c.name.empty() && root ? root->device_name : c.name);
  std::string vendor = root ? short_vendor(escape_line(root->vendor_name)) : "";
  if (!device.empty()) {
    std::string platform = platform_of_device(device);
    if (!vendor.empty() && platform.rfind(vendor + " ", 0) != 0 && platform != vendor) platform = vendor + " " + platform;
    return collapse_spaces(platform);
  }
  if (!context.cpu_model_name.empty()) return platform_of_cpu(escape_line(context.cpu_model_name));
  return fmt::format("{:04x}:{:04x}", c.vendor, c.device);  // neither pci.ids nor the CPU name it
}

GitIdentity git_identity(bool config_files) {
  GitIdentity id;
  std::string name_source, email_source;
  // git's own order for `git commit -s`: the environment over ~/.gitconfig over the XDG file.
  std::string xdg;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) xdg = std::string(x) + "/git/config";
  else if (const char* h = std::getenv("HOME"); h && *h) xdg = std::string(h) + "/.config/git/config";
  if (config_files && !xdg.empty()) read_git_config(xdg, id, name_source, email_source);
  if (const char* h = std::getenv("HOME"); config_files && h && *h) read_git_config(std::string(h) + "/.gitconfig", id, name_source, email_source);
  if (const char* e = std::getenv("EMAIL"); e && *e && id.email.empty()) id.email = e, email_source = "EMAIL";
  for (const char* var : {"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"})
    if (const char* v = std::getenv(var); v && *v) id.name = v, name_source = var;
  for (const char* var : {"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"})
    if (const char* v = std::getenv(var); v && *v) id.email = v, email_source = var;
  id.name = ident_part(id.name);
  id.email = ident_part(id.email);
  if (id.email.find(' ') != std::string::npos) id.email.clear();
  if (id.name.empty() || id.email.empty()) {
    id.source.clear();
    return id;
  }
  id.source = name_source == email_source ? name_source : name_source + ", " + email_source;
  return id;
}

std::string GitIdentity::signed_off_by() const {
  if (!known()) return "Signed-off-by: FIXME Your Name <fixme@example.invalid>";
  return fmt::format("Signed-off-by: {} <{}>", name, email);
}

std::string kernel_table_line(const WhitelistCandidate& c) { return kernel_table_line(c, "", nullptr); }

std::string kernel_table_line(const WhitelistCandidate& c, const std::string& platform, const TableStyle* style) {
  const char* macro = vendor_macro(c.vendor);
  std::string vendor = macro ? macro : fmt::format("0x{:04x}", c.vendor);
  std::string comment = platform.empty() ? (c.name.empty() ? c.id() : escape_line(c.name)) : escape_line(platform);
  TableStyle s = style ? *style : TableStyle{};
  std::string flags = s.bool_flags ? (c.needs_same_host_bridge ? "true" : "false")
                                   : (c.needs_same_host_bridge ? "REQ_SAME_HOST_BRIDGE" : "0");
  return fmt::format("\t/* {} */\n\t{{{},{}0x{:04x},{}{}}},", comment_safe(comment), vendor, s.vendor_sep, c.device,
                     s.device_sep, flags);
}

std::string commit_message(const PatchInput& in, const WhitelistCandidate& c) {
  const Topology& topo = in.topo;
  std::string platform = platform_name(topo, in.context, c);
  // The subject is a mail header in the patch (git_header_text); the body is built in `out` and
  // made git's text as a whole at the end, before the trailers.
  const std::string subject = git_header_text(fmt::format("PCI/P2PDMA: Add {} host bridge to allowlist", platform));
  std::string out;

  // The pairs again, with the kernel's verdict before and after the entry.
  KernelRules after_rules = with_entry(in.kernel, c.vendor, c.device);
  std::vector<std::string> before_log;
  std::set<std::string> after_kinds;
  std::set<size_t> keep;
  // Each copy line is written as its pair comes by: one pass over the pairs, nothing kept per pair.
  std::string copy_lines;
  // After the entry only the map type and distance are read: the index gives them in O(depth)
  // without texts (the same as the verdict's, p2pdma_index.h); the log before is read until full.
  const P2pdmaIndex after_index(topo, after_rules);
  std::set<std::pair<MapType, int>> allowed_after;
  auto visit = [&](const UnlockedPair& p) {
    if (before_log.size() < kMaxLogLines) {
      PairVerdict before = pci_p2pdma_distance(topo, in.kernel, p.provider, p.client);
      for (const auto& l : before.kernel_log)
        if (before_log.size() < kMaxLogLines && std::find(before_log.begin(), before_log.end(), l) == before_log.end())
          before_log.push_back(l);
    }
    PairOutcome after = after_index.outcome(p.provider, p.client);
    if (after.p2pdma_distance && *after.p2pdma_distance >= 0) allowed_after.insert({after.map_type, *after.p2pdma_distance});
    for (size_t end : {p.provider, p.client})
      for (std::optional<size_t> up = end; up; up = topo.functions[*up].parent) keep.insert(*up);
    if (p.copy_result.empty()) return;
    // How it was run and what carried it, from the evidence's provenance (candidate_evidence.cpp):
    // a counted copy is measured and crossed the host bridge as peer traffic.
    std::string how = p.copy_runtime.empty() ? "runtime not recorded" : "runtime " + escape_line(p.copy_runtime);
    how += c.copy_run.empty() ? ", size and repeats not recorded in the evidence" : ", " + escape_line(c.copy_run);
    copy_lines += fmt::format("  {} -> {}: {}{}{}\n    {}; {}\n", topo.functions[p.provider].bdf.str(),
                              topo.functions[p.client].bdf.str(), escape_line(p.copy_result),
                              p.copy_gbps ? fmt::format(", {:.1f} GB/s{}", *p.copy_gbps,
                                                        p.ceiling_gbps ? fmt::format(" of the path's {:.1f} GB/s", *p.ceiling_gbps) : "")
                                          : "",
                              p.staged_gbps ? fmt::format(" (through host memory {:.1f} GB/s)", *p.staged_gbps) : "", how,
                              p.run_kernel_allowed ? "P2PDMA carried it: the kernel of that run had the entry"
                                                   : "the runtime's own peer path carried it, not P2PDMA");
  };
  if (in.pairs) {
    in.pairs(visit);
  } else {
    for (const auto& p : c.pairs) visit(p);
  }
  for (const auto& [type, distance] : allowed_after)
    after_kinds.insert(fmt::format("{} at distance {}", to_string(type), distance));
  for (const auto& hb : topo.host_bridges)
    if (!hb.root_bus_devices.empty() && std::any_of(hb.root_bus_devices.begin(), hb.root_bus_devices.end(),
                                                    [&](size_t i) { return keep.count(i) > 0; }))
      if (bool unknown = false; auto root = pci_host_bridge_dev(topo, in.kernel, hb, false, unknown)) keep.insert(*root);

  out += wrapped(fmt::format(
      "The {} host bridge (root device [{}] {}) is not in pci_p2pdma_whitelist[], so pci_p2pdma_distance() "
      "refuses peer-to-peer DMA between devices below different Root Ports of it.{}",
      platform, c.id(), c.name.empty() ? "without a pci.ids name" : escape_line(c.name),
      topo.platform.hypervisor ? " This machine is a virtual machine: the host bridge is the one the hypervisor "
                                 "emulates, not a physical platform's."
                               : ""));
  out += "\n";
  // The kernel the capture booted (proc/sys/kernel/osrelease), not the release whose rules were asked for.
  out += wrapped(fmt::format("Tested on: Linux {}, {} family {} model {} ({}), IOMMU {}.",
                             topo.platform.kernel_release.empty() ? "(release not in the capture)"
                                                                  : escape_line(topo.platform.kernel_release),
                             topo.platform.cpu_vendor.empty() ? "CPU vendor unknown" : escape_line(topo.platform.cpu_vendor),
                             topo.platform.cpu_family ? std::to_string(*topo.platform.cpu_family) : "?",
                             topo.platform.cpu_model ? std::to_string(*topo.platform.cpu_model) : "?",
                             topo.platform.cpu_model_name.empty() ? "model name unknown"
                                                                  : escape_line(topo.platform.cpu_model_name),
                             escape_line(in.context.iommu_mode)));
  out += "\nThe devices and the bridges above them, as `lspci -tv` draws them:\n\n";
  for (const auto& l : split_lines(lspci_tree(topo, keep))) out += "  " + l + "\n";
  out += "\nACS on the ports of the paths (pci_bridge_has_acs_redir()):\n\n";
  for (size_t i : keep) {
    const Function& f = topo.functions[i];
    if (!f.secondary_bus) continue;
    out += fmt::format("  {} {}: {}\n", f.bdf.str(), to_string(f.pcie_type), acs_summary(f.acs));
  }
  out += "\nBefore, the kernel logs for these pairs:\n\n";
  if (before_log.empty()) out += "  (nothing: the clients' drivers call it without verbose)\n";
  for (const auto& l : before_log) out += "  " + escape_line(l) + "\n";
  out += "\n" + wrapped(fmt::format(
      "With the entry{}, {} pair(s) map as {} and the refusal is no longer logged.",
      c.needs_same_host_bridge ? " (REQ_SAME_HOST_BRIDGE: every pair here is under one host bridge)" : "",
      in.pairs ? c.pair_count : c.pairs.size(), after_kinds.empty() ? std::string("THRU_HOST_BRIDGE") : fmt::format("{}", fmt::join(after_kinds, ", "))));

  out += "\nPeer copies (random data, compared in full):\n\n";
  out += copy_lines;
  if (copy_lines.empty()) out += "  none yet (needs evidence: do not submit without a verified copy)\n";

  std::vector<std::string> links;
  for (const auto& r : c.reports) {
    auto at = r.find("https://");
    if (at == std::string::npos) continue;
    auto end = r.find_first_of(" \t\n:,;)", at + 8);
    std::string url = escape_line(r.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (std::find(links.begin(), links.end(), url) == links.end()) links.push_back(url);
  }
  std::vector<std::string> trailers;
  for (const auto& l : links) trailers.push_back("Link: " + l);
  trailers.push_back(in.identity.signed_off_by());
  // One rule for every line git is handed (git_text.h): whatever a field from input holds, no
  // line of the body is structure to git am, and the message git records is this one.
  return subject + "\n\n" + git_text_body(out) + "\n" + git_trailer_block(trailers);
}

std::string commit_message(const Topology& topo, const KernelRules& kernel, const CandidateContext& context,
                           const WhitelistCandidate& c) {
  return commit_message(PatchInput{topo, kernel, context, nullptr, git_identity(false)}, c);
}

KernelPatch kernel_patch(const PatchInput& in, const WhitelistCandidate& c, const std::string& kernel_source) {
  KernelPatch patch;
  std::string message = commit_message(in, c);
  std::string platform = platform_name(in.topo, in.context, c);
  std::string subject = message.substr(0, message.find('\n'));
  std::string body = message.substr(message.find('\n') + 1);
  while (!body.empty() && body.front() == '\n') body.erase(0, 1);

  std::string diff;
  size_t added = 0;
  if (!kernel_source.empty()) {
    const std::string path = kernel_source + "/drivers/pci/p2pdma.c";
    std::string text = read_input_file(path, kMaxKernelSourceBytes);
    auto lines = split_lines(text);
    for (size_t i = 0; i < lines.size(); ++i)
      if (!is_clean_text(lines[i]))  // control bytes, invalid UTF-8 or a hidden bidi or zero-width character
                                     // (a Trojan Source line, CVE-2021-42574): not the kernel's source
        throw InputError(fmt::format("{}: line {} is not text", path, i + 1));
    auto table = find_table(lines);
    if (!table) throw InputError(fmt::format("{}: no pci_p2pdma_whitelist[] table (a kernel before 5.2?)", path));
    std::string dev_hex = fmt::format("0x{:04x}", c.device);
    const char* macro = vendor_macro(c.vendor);
    std::string vendor_text = macro ? macro : fmt::format("0x{:04x}", c.vendor);
    for (const auto& e : table->entries)
      if (e.vendor == vendor_text && hex_value(e.device) == c.device)
        throw InputError(fmt::format("{}: {} is already in the table (line {})", path, c.id(), e.line + 1));
    // The table's own order: sorted by (vendor, device) when every entry is, else appended at its end.
    size_t at = table->end_line;
    bool sorted = table->entries.size() > 1;
    for (size_t k = 1; sorted && k < table->entries.size(); ++k) {
      const auto &a = table->entries[k - 1], &b = table->entries[k];
      auto av = hex_value(a.device), bv = hex_value(b.device);
      sorted = av && bv && (a.vendor < b.vendor || (a.vendor == b.vendor && *av < *bv));
    }
    if (sorted)
      for (const auto& e : table->entries)
        if (std::make_pair(e.vendor, *hex_value(e.device)) > std::make_pair(vendor_text, static_cast<unsigned long>(c.device))) {
          at = e.line;
          // Keep a comment line above the entry with it.
          if (at > 0 && trim(lines[at - 1]).rfind("/*", 0) == 0) --at;
          break;
        }
    // Spaced as the table's last entry of the same vendor (the Intel lines use a tab), else its last.
    TableStyle style{table->vendor_sep, table->device_sep, table->bool_flags};
    for (const auto& e : table->entries)
      if (e.vendor == vendor_text) style.vendor_sep = e.vendor_sep, style.device_sep = e.device_sep;
    auto insert = split_lines(kernel_table_line(c, platform, &style));
    added = insert.size();
    // A hunk with three lines of context either side, as `git diff` writes it.
    size_t first = at >= 3 ? at - 3 : 0;
    size_t last = std::min(lines.size(), at + 3);
    size_t old_count = last - first;
    diff += "diff --git a/drivers/pci/p2pdma.c b/drivers/pci/p2pdma.c\n--- a/drivers/pci/p2pdma.c\n+++ b/drivers/pci/p2pdma.c\n";
    diff += fmt::format("@@ -{},{} +{},{} @@{}\n", first + 1, old_count, first + 1, old_count + added, funcname(lines, first));
    for (size_t i = first; i < at; ++i) diff += " " + lines[i] + "\n";
    for (const auto& l : insert) diff += "+" + l + "\n";
    for (size_t i = at; i < last; ++i) diff += " " + lines[i] + "\n";
    patch.applies = true;
  }

  std::string from = in.identity.known() ? fmt::format("{} <{}>", git_header_text(in.identity.name), in.identity.email)
                                         : "FIXME Your Name <fixme@example.invalid>";
  std::string& out = patch.mbox;
  out += "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n";
  out += "From: " + from + "\n";
  out += "Date: " + rfc2822_date() + "\n";
  out += "Subject: [PATCH] " + subject + "\n";
  out += "MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n\n";
  out += body;
  out += "---\n";
  if (!in.identity.known())
    out += "FIXME: no git identity was found (GIT_AUTHOR_NAME/GIT_AUTHOR_EMAIL, user.name/user.email in "
           "~/.gitconfig or $XDG_CONFIG_HOME/git/config): replace the From: line and the Signed-off-by placeholder.\n";
  if (patch.applies) {
    out += fmt::format(" drivers/pci/p2pdma.c | {} {}\n 1 file changed, {} insertions(+)\n\n", added,
                       std::string(added, '+'), added);
    out += diff;
  } else {
    out += "No kernel tree was given (--kernel-source DIR): this is the message alone. Add these lines at the end\n"
           "of pci_p2pdma_whitelist[] in drivers/pci/p2pdma.c:\n\n";
    out += kernel_table_line(c, platform, nullptr) + "\n";
  }
  out += "-- \np2paudit\n\n";
  return patch;
}

}  // namespace p2paudit::fleet
