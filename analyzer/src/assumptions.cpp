// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/assumptions.h"

#include <charconv>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/kernel_cmdline.h"
#include "p2paudit/p2pdma.h"

namespace p2paudit {

namespace {

std::optional<unsigned> parse_hex(std::string_view s, size_t max_digits, unsigned max) {
  if (s.empty() || s.size() > max_digits) return std::nullopt;
  unsigned v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || end != s.data() + s.size() || v > max) return std::nullopt;
  return v;
}

// "pci:VVVV:DDDD[:SSSS:ssss]": vendor, device, subsystem vendor and device; 0 matches any.
std::optional<std::vector<unsigned>> parse_ids(std::string_view text) {
  std::vector<unsigned> ids;
  for (size_t start = 0;;) {
    size_t colon = text.find(':', start);
    auto id = parse_hex(text.substr(start, colon == std::string_view::npos ? colon : colon - start), 4, 0xffff);
    if (!id) return std::nullopt;
    ids.push_back(*id);
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (ids.size() != 2 && ids.size() != 4) return std::nullopt;
  ids.resize(4, 0);
  return ids;
}

bool ids_match(const Function& f, const std::vector<unsigned>& ids) {
  const unsigned have[] = {f.vendor, f.device, f.subsystem_vendor, f.subsystem_device};
  for (size_t k = 0; k < 4; ++k)
    if (ids[k] && ids[k] != have[k]) return false;
  return true;
}

// "[DDDD:]BB:DD.F[/DD.F]*": a device, then the devfn of each device below it down to the one meant
// (pci_dev_str_match_path(): "lspci -t" paths survive bus renumbering).
struct DevicePath {
  Bdf top;
  std::vector<uint8_t> below;
};

std::optional<DevicePath> parse_path(std::string_view text) {
  DevicePath p;
  size_t slash = text.find('/');
  auto top = Bdf::parse(text.substr(0, slash));
  if (!top) return std::nullopt;
  p.top = *top;
  while (slash != std::string_view::npos) {
    size_t next = text.find('/', slash + 1);
    std::string_view step = text.substr(slash + 1, next == std::string_view::npos ? next : next - slash - 1);
    size_t dot = step.find('.');
    auto dev = parse_hex(step.substr(0, dot), 2, 0x1f);
    auto fn = dot == std::string_view::npos ? std::nullopt : parse_hex(step.substr(dot + 1), 1, 7);
    if (!dev || !fn) return std::nullopt;
    p.below.push_back(static_cast<uint8_t>((*dev << 3) | *fn));
    slash = next;
  }
  return p;
}

// Walks up from the candidate as the kernel does: each path step must be the devfn of the device
// reached so far, and what is left at the top must be the named device.
bool path_matches(const Topology& t, size_t candidate, const DevicePath& p) {
  size_t dev = candidate;
  for (auto step = p.below.rbegin(); step != p.below.rend(); ++step) {
    if (t.functions[dev].bdf.devfn() != *step) return false;
    auto up = pci_upstream_bridge(t, dev);
    if (!up) return false;
    dev = *up;
  }
  return t.functions[dev].bdf == p.top;
}

// pci_quirk_intel_spt_pch_acs_match() in drivers/pci/quirks.c: these root ports keep their ACS
// control at cap+8, where the kernel's quirk clears the redirect bits; P2PDMA reads cap+6.
bool intel_spt_pch_root_port(const Function& f) {
  if (f.vendor != 0x8086 || (f.pcie_type != PcieType::kRootPort && f.pcie_type != PcieType::kUnknown)) return false;
  unsigned d = f.device;
  return (d >= 0xa110 && d <= 0xa11f) || (d >= 0xa167 && d <= 0xa16a) || (d >= 0xa290 && d <= 0xa29f) ||
         (d >= 0xa2e7 && d <= 0xa2ee) || (d >= 0x9d10 && d <= 0x9d1b);
}

// Marks what one device of a spec names; throws when it does not parse or names nothing here.
void mark_named(const Topology& t, std::string_view item, const std::string& spec, std::vector<bool>& named) {
  auto fail = [&](const std::string& why) {
    return InputError(fmt::format("--assume-acs-off '{}': {}", escape_text(spec), why));
  };
  if (item.empty())
    throw fail("an empty device in the list (devices are separated by ';' or ',')");
  bool any = false;
  if (item.starts_with("pci:")) {
    auto ids = parse_ids(item.substr(4));
    if (!ids) throw fail(fmt::format("'{}' is not pci:VVVV:DDDD[:SSSS:ssss] (hex IDs, 0 matches any)", escape_text(item)));
    for (size_t i = 0; i < t.functions.size(); ++i)
      if (ids_match(t.functions[i], *ids)) named[i] = any = true;
  } else {
    auto path = parse_path(item);
    if (!path)
      throw fail(fmt::format("'{}' is not a device: expected DDDD:BB:DD.F or BB:DD.F (optionally /DD.F... below "
                             "it), pci:VVVV:DDDD, or all", escape_text(item)));
    for (size_t i = 0; i < t.functions.size(); ++i)
      if (path_matches(t, i, *path)) named[i] = any = true;
  }
  if (!any) throw fail(fmt::format("no PCI function {} in this topology", escape_text(item)));
}

std::string names(const Topology& t, const std::vector<size_t>& devices, size_t at_most = 8) {
  std::string out;
  for (size_t k = 0; k < devices.size() && k < at_most; ++k) out += (k ? ", " : "") + t.functions[devices[k]].bdf.str();
  if (devices.size() > at_most) out += fmt::format(" and {} more", devices.size() - at_most);
  return out;
}

// A spec that holds '=' or blanks is kernel command line text as people paste it: the parameter
// "pci=disable_acs_redir=A;B", its option "disable_acs_redir=A;B", a whole command line (from
// /proc/cmdline), or a GRUB_CMDLINE_LINUX="..." line of /etc/default/grub.
bool is_command_line(std::string_view spec) { return spec.find_first_of("= \t\n") != std::string_view::npos; }

// "GRUB_CMDLINE_LINUX[_DEFAULT]=VALUE", the whole spec: VALUE with the shell's quoting undone
// ('...' literal; "..." where \" \\ \$ \` stand for the character), else nullopt. The result is
// GRUB script text, not yet the kernel's.
std::optional<std::string> grub_assignment_value(std::string_view spec, const std::string& whole) {
  auto trimmed = [](std::string_view s) {
    size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
    return b == std::string_view::npos ? std::string_view() : s.substr(b, e - b + 1);
  };
  spec = trimmed(spec);
  if (spec.starts_with("export ")) spec = trimmed(spec.substr(7));
  std::string_view value;
  for (std::string_view name : {"GRUB_CMDLINE_LINUX_DEFAULT=", "GRUB_CMDLINE_LINUX="})
    if (spec.starts_with(name)) {
      value = spec.substr(name.size());
      break;
    }
  if (value.data() == nullptr) return std::nullopt;
  auto unterminated = [&] {
    return InputError(fmt::format("--assume-acs-off '{}': the shell quote of the GRUB line is not closed", escape_text(whole)));
  };
  std::string out;
  for (size_t i = 0; i < value.size(); ++i) {
    char c = value[i];
    if (c == '\'') {
      size_t close = value.find('\'', i + 1);
      if (close == std::string_view::npos) throw unterminated();
      out += value.substr(i + 1, close - i - 1);
      i = close;
    } else if (c == '"') {
      for (++i;; ++i) {
        if (i >= value.size()) throw unterminated();
        if (value[i] == '"') break;
        if (value[i] == '\\' && i + 1 < value.size() && std::string_view("\"\\$`").find(value[i + 1]) != std::string_view::npos)
          ++i;
        out += value[i];
      }
    } else if (c == '\\' && i + 1 < value.size()) {
      out += value[++i];
    } else {
      out += c;
    }
  }
  return out;
}

// GRUB script words as grub.cfg's `linux` line takes them (grub-core/script): split at blanks
// outside quotes, '...' literal, "..." and a bare backslash escaping the next character (`\;` is
// how a ';' survives, GRUB's command separator). GRUB then joins the words for the kernel and puts
// a word holding a space in double quotes (grub-core/lib/cmdline.c grub_create_loader_cmdline()).
// A word that still holds a quote or backslash is passed differently by different GRUB releases
// (some escape it, some do not), so it is refused rather than guessed.
std::string kernel_text_of_grub_value(const std::string& value, const std::string& whole) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  auto end_word = [&] {
    if (in_word) words.push_back(word);
    word.clear();
    in_word = false;
  };
  for (size_t i = 0; i < value.size(); ++i) {
    char c = value[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      end_word();
    } else if (c == '\'' || c == '"') {
      in_word = true;
      size_t close = value.find(c, i + 1);
      if (close == std::string::npos)
        throw InputError(fmt::format("--assume-acs-off '{}': a {} quote in the GRUB line is not closed", escape_text(whole),
                                     c == '"' ? "double" : "single"));
      for (size_t k = i + 1; k < close; ++k) {
        if (c == '"' && value[k] == '\\' && k + 1 < close) ++k;
        word += value[k];
      }
      i = close;
    } else if (c == '\\' && i + 1 < value.size()) {
      in_word = true;
      word += value[++i];
    } else {
      in_word = true;
      word += c;
    }
  }
  end_word();
  std::string out;
  for (const auto& w : words) {
    if (w.find_first_of("\"'\\") != std::string::npos)
      throw InputError(fmt::format("--assume-acs-off '{}': GRUB passes the word '{}' (a quote or backslash left in it) "
                                   "to the kernel differently from release to release; give the kernel command line "
                                   "itself (/proc/cmdline after booting) instead",
                                   escape_text(whole), escape_text(w)));
    if (!out.empty()) out += ' ';
    out += w.find_first_of(" \t") != std::string::npos ? "\"" + w + "\"" : w;
  }
  return out;
}

std::string devices_in_command_line(std::string_view spec, std::vector<std::string>& notes) {
  constexpr std::string_view kOption = "disable_acs_redir=";
  const std::string whole(spec);
  std::string text = whole;
  if (auto grub = grub_assignment_value(spec, whole)) text = kernel_text_of_grub_value(*grub, whole);
  // The kernel's reading (kernel_cmdline.h): words split and quotes removed as next_arg() does,
  // nothing after a bare "--".
  const KernelCmdline line = read_kernel_cmdline(text);
  auto word_of = [&](const KernelArg& a) { return escape_text(std::string_view(text).substr(a.begin, a.end - a.begin)); };
  std::optional<std::string> value;
  std::vector<std::string> ignored;  // why a disable_acs_redir= in the text is not the kernel's
  const bool alone = line.params.size() == 1 && line.init_args.empty();
  for (const auto& param : line.params) {
    if (param.value && param.name + "=" == kOption) {
      if (alone) value = *param.value;  // the option alone, as pasted from a pci= parameter
      else
        ignored.push_back(fmt::format("'{}' is not a kernel parameter on its own (the kernel passes it to init): "
                                      "only pci=disable_acs_redir= names devices; ignored",
                                      word_of(param)));
    } else if (param.value && kernel_param_name_is(param.name, "pci")) {
      // pci_setup() in drivers/pci/pci.c: options split at ',', the last disable_acs_redir= kept;
      // each pci= word is its own call, so a later word's option wins too.
      bool in_redir = false;
      for (const auto& option : kernel_param_options(KernelCmdline{{param}, {}, {}}, "pci")) {
        if (option.starts_with(kOption)) {
          value = option.substr(kOption.size());
          in_redir = true;
        } else if (in_redir && Bdf::parse(std::string_view(option).substr(0, option.find('/')))) {
          notes.push_back(fmt::format("pci= options are separated by ',': the kernel ends disable_acs_redir= at the "
                                      "',' before {} and reports \"PCI: Unknown option `{}'\"; separate the "
                                      "devices with ';'",
                                      escape_text(option), escape_text(option)));
        } else {
          in_redir = false;
        }
      }
    } else if (std::string_view(text).substr(param.begin, param.end - param.begin).find(kOption) != std::string_view::npos) {
      ignored.push_back(fmt::format("'{}' is one kernel parameter, {}{}: the disable_acs_redir= in it is part of "
                                    "that parameter's value, not a pci= option; ignored",
                                    word_of(param), escape_text(param.name),
                                    param.has_quote ? " (the kernel keeps a double-quoted stretch inside one word)" : ""));
    }
  }
  for (const auto& arg : line.init_args)
    if (std::string_view(text).substr(arg.begin, arg.end - arg.begin).find(kOption) != std::string_view::npos)
      ignored.push_back(fmt::format("'{}' stands after \"--\": the kernel stops reading its parameters there and "
                                    "hands the rest to init; ignored",
                                    word_of(arg)));
  if (!value) {
    std::string why;
    for (const auto& note : ignored) why += "; " + note;
    throw InputError(fmt::format("--assume-acs-off '{}': no pci=disable_acs_redir= in this kernel command line "
                                 "(expected pci=disable_acs_redir=DDDD:BB:DD.F[;DDDD:BB:DD.F...]){}",
                                 escape_text(spec), why));
  }
  notes.insert(notes.begin(), ignored.begin(), ignored.end());
  return *value;
}

}  // namespace

AcsRedirectOff assume_acs_redirect_off(Topology& topo, const std::vector<std::string>& specs) {
  if (specs.empty()) throw InputError("--assume-acs-off: no device given (BDFs, pci:VVVV:DDDD or all)");
  std::vector<bool> named(topo.functions.size());
  std::vector<std::string> read_notes;
  for (const auto& spec : specs) {
    if (spec.empty()) throw InputError("--assume-acs-off: an empty device list (BDFs, pci:VVVV:DDDD or all)");
    std::string devices = is_command_line(spec) ? devices_in_command_line(spec, read_notes) : spec;
    std::string_view rest = devices;
    for (;;) {
      size_t sep = rest.find_first_of(";,");
      std::string_view item = rest.substr(0, sep);
      if (item == "all") {
        // Only devices that may have ACS: `all` names no device the kernel would warn about.
        for (size_t i = 0; i < topo.functions.size(); ++i)
          if (topo.functions[i].acs.state != CapState::kAbsent) named[i] = true;
      } else {
        mark_named(topo, item, spec, named);
      }
      if (sep == std::string_view::npos) break;
      rest = rest.substr(sep + 1);
    }
  }

  AcsRedirectOff out;
  out.read_notes = std::move(read_notes);
  for (size_t i = 0; i < topo.functions.size(); ++i) {
    if (!named[i]) continue;
    Acs& acs = topo.functions[i].acs;
    if (intel_spt_pch_root_port(topo.functions[i])) out.pch_quirk.push_back(i);
    else if (acs.state == CapState::kAbsent) out.without_acs.push_back(i);
    else if (acs.state == CapState::kUnknown) out.unreadable.push_back(i);
    else if (!(acs.ctrl & kAcsRedirectBits)) out.already_clear.push_back(i);
    else {
      uint16_t before = acs.ctrl;
      acs.ctrl = static_cast<uint16_t>(acs.ctrl & ~kAcsRedirectBits);
      out.cleared.push_back({i, before, acs.ctrl});
    }
  }
  return out;
}

std::string AcsRedirectOff::kernel_parameter(const Topology& topo) const {
  std::string list;
  for (const auto& c : cleared) list += (list.empty() ? "" : ";") + topo.functions[c.function].bdf.str();
  return list.empty() ? "" : "pci=disable_acs_redir=" + list;
}

std::vector<std::string> AcsRedirectOff::notes(const Topology& topo) const {
  std::vector<std::string> out = read_notes;
  if (cleared.empty()) {
    out.push_back("assumed booted with pci=disable_acs_redir= naming these devices: none was read with ACS "
                  "redirect (RR/CR/EC) set, so nothing is cleared");
  } else {
    std::string list;
    for (const auto& c : cleared)
      list += fmt::format("{}{} (ACS control {:#06x} -> {:#06x})", list.empty() ? "" : ", ",
                          topo.functions[c.function].bdf.str(), c.ctrl_before, c.ctrl_after);
    out.push_back(fmt::format("assumed booted with {}: ACS redirect (RR/CR/EC) cleared on {}",
                              kernel_parameter(topo), list));
  }
  if (!already_clear.empty())
    out.push_back(fmt::format("ACS redirect already clear on {}", names(topo, already_clear)));
  if (!without_acs.empty())
    out.push_back(fmt::format("no ACS capability on {}: the kernel would warn \"cannot disable ACS redirect for this "
                              "hardware as it does not have ACS capabilities\" and change nothing",
                              names(topo, without_acs, without_acs.size())));
  if (!unreadable.empty() && topo.lspci_dump.empty())
    out.push_back(fmt::format("the ACS control register of {} was not readable: left unknown (run as root)",
                              names(topo, unreadable, unreadable.size())));
  if (!unreadable.empty() && !topo.lspci_dump.empty()) {
    std::string sizes;
    for (size_t i : unreadable)
      sizes += fmt::format("{}{} bytes of config space for {}", sizes.empty() ? "" : ", ", topo.functions[i].config_readable,
                           topo.functions[i].bdf.str());
    out.push_back(fmt::format("the ACS control register of {} is not in the dump (it has {}): left "
                              "unknown; rerun `sudo lspci -xxxx`",
                              names(topo, unreadable, unreadable.size()), sizes));
  }
  if (!pch_quirk.empty())
    out.push_back(fmt::format("{}: Intel Sunrise/Union Point PCH root port; the kernel's quirk clears redirect in the "
                              "control dword at ACS+8, but P2PDMA reads the word at ACS+6, which stays as read",
                              names(topo, pch_quirk, pch_quirk.size())));
  return out;
}

std::optional<std::string> acs_redirect_off_caveat(const KernelRelease& release) {
  if (release < *KernelRelease::parse("6.11") || release >= *KernelRelease::parse("6.15")) return std::nullopt;
  return fmt::format("kernel {}: releases 6.11 to 6.14 (and 6.12.y before the backported fix 9cf8a952d57b) give the "
                     "devices named in pci=disable_acs_redir= the firmware's RR/CR/EC bits back instead of clearing "
                     "them; --assume-acs-off shows them cleared, as when the firmware leaves them clear",
                     release.version());
}

}  // namespace p2paudit
