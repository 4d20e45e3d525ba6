// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/assumptions.h"

#include <charconv>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
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
// "pci=disable_acs_redir=A;B", its option "disable_acs_redir=A;B", or a whole command line (from
// /proc/cmdline or GRUB_CMDLINE_LINUX="..."). The devices are found as the kernel finds them:
// pci_setup() splits pci= at ',' into options and keeps the last disable_acs_redir= it sees; an
// option outside pci= is no kernel parameter (the kernel hands it to init).
bool is_command_line(std::string_view spec) { return spec.find_first_of("= \t\n") != std::string_view::npos; }

std::string devices_in_command_line(std::string_view spec, std::vector<std::string>& notes) {
  constexpr std::string_view kOption = "disable_acs_redir=";
  std::vector<std::string> words;
  for (size_t at = 0; at < spec.size();) {
    size_t end = spec.find_first_of(" \t\n", at);
    if (end == std::string_view::npos) end = spec.size();
    std::string word;
    for (char c : spec.substr(at, end - at))
      if (c != '"' && c != '\'' && c != '\\') word += c;  // shell and GRUB quoting around ';'
    if (!word.empty()) words.push_back(std::move(word));
    at = end + 1;
  }
  std::optional<std::string> value;
  for (const auto& word : words) {
    if (word.starts_with(kOption) && words.size() == 1) {
      value = word.substr(kOption.size());  // the option alone, as pasted from a pci= parameter
    } else if (word.starts_with(kOption)) {
      notes.push_back(fmt::format("'{}' is not a kernel parameter on its own (the kernel passes it to init): only "
                                  "pci=disable_acs_redir= names devices; ignored",
                                  escape_text(word)));
    } else if (word.starts_with("pci=")) {
      std::string_view options = std::string_view(word).substr(4);
      bool in_redir = false;
      for (size_t at = 0; at <= options.size();) {
        size_t comma = std::min(options.find(',', at), options.size());
        std::string_view option = options.substr(at, comma - at);
        if (option.starts_with(kOption)) {
          value = std::string(option.substr(kOption.size()));
          in_redir = true;
        } else if (in_redir && Bdf::parse(option.substr(0, option.find('/')))) {
          notes.push_back(fmt::format("pci= options are separated by ',': the kernel ends disable_acs_redir= at the "
                                      "',' before {} and reports \"PCI: Unknown option `{}'\"; separate the "
                                      "devices with ';'",
                                      escape_text(option), escape_text(option)));
        } else {
          in_redir = false;
        }
        at = comma + 1;
      }
    }
  }
  if (!value)
    throw InputError(fmt::format("--assume-acs-off '{}': no pci=disable_acs_redir= in this kernel command line "
                                 "(expected pci=disable_acs_redir=DDDD:BB:DD.F[;DDDD:BB:DD.F...])",
                                 escape_text(spec)));
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
