// SPDX-License-Identifier: GPL-2.0-or-later
// The kernel log lines that bear on peer DMA, recognised by the exact text the kernel and the
// drivers print. Each pattern names the source file and function that prints it; a line whose
// wording changed between releases is matched in every wording the tool models.
#include <string_view>

#include <fmt/format.h>

#include "p2paudit/kernel_log.h"

namespace p2paudit {

namespace {

using std::string_view;
constexpr size_t kNone = string_view::npos;

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool starts_with(string_view s, string_view p) { return s.substr(0, p.size()) == p; }

// Exactly n hex digits at s[i].
bool hex_run(string_view s, size_t i, size_t n) {
  if (i + n > s.size()) return false;
  for (size_t k = 0; k < n; ++k)
    if (!is_hex(s[i + k])) return false;
  return true;
}

// A PCI function's name at the start of s as the kernel prints it: pci_name() "DDDD:BB:DD.F"
// (with_domain) or the "BB:DD.F" of printks that leave the segment out. Returns the length.
size_t bdf_at(string_view s, bool with_domain, Bdf* out) {
  size_t i = 0;
  if (with_domain) {
    size_t d = 0;
    while (d < s.size() && d < 8 && is_hex(s[d])) ++d;
    if (d < 4 || d >= s.size() || s[d] != ':') return 0;
    i = d + 1;
  }
  if (!hex_run(s, i, 2) || i + 2 >= s.size() || s[i + 2] != ':' || !hex_run(s, i + 3, 2) || i + 5 >= s.size() ||
      s[i + 5] != '.' || i + 6 >= s.size() || s[i + 6] < '0' || s[i + 6] > '7')
    return 0;
  size_t n = i + 7;
  if (n < s.size() && (is_hex(s[n]) || s[n] == '.')) return 0;  // a longer token: not a BDF
  auto bdf = Bdf::parse(s.substr(0, n));
  if (!bdf) return 0;
  *out = *bdf;
  return n;
}

std::optional<Bdf> bdf_exact(string_view s, bool with_domain) {
  Bdf b;
  if (bdf_at(s, with_domain, &b) == s.size() && !s.empty()) return b;
  return std::nullopt;
}

// A hex number (with or without 0x) at the start of s; the length in *n.
std::optional<uint64_t> hex_value(string_view s, size_t* n = nullptr) {
  size_t i = 0;
  if (starts_with(s, "0x") || starts_with(s, "0X")) i = 2;
  size_t start = i;
  uint64_t v = 0;
  while (i < s.size() && is_hex(s[i]) && i - start < 16) {
    char c = s[i++];
    v = v * 16 + static_cast<uint64_t>(is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  if (i == start || (i < s.size() && is_hex(s[i]))) return std::nullopt;
  if (n) *n = i;
  return v;
}

// The value of "key" in "... key=VALUE ..." (up to a space, ',' or ']').
string_view field(string_view s, string_view key) {
  for (size_t at = s.find(key); at != kNone; at = s.find(key, at + 1)) {
    if (at != 0 && s[at - 1] != ' ' && s[at - 1] != '[' && s[at - 1] != ',') continue;
    size_t v = at + key.size();
    size_t end = v;
    while (end < s.size() && s[end] != ' ' && s[end] != ',' && s[end] != ']') ++end;
    return s.substr(v, end - v);
  }
  return {};
}

// The dev_printk() prefix "DRIVER DEVICE: " (drivers/base/core.c, __dev_printk():
// "%s %s: ", dev_driver_string(dev), dev_name(dev)); pci_warn/pci_err/pci_info print through it.
struct DevPrefix {
  string_view driver;
  string_view name;           // dev_name(): a PCI function's pci_name(), a platform device...
  std::optional<Bdf> bdf;     // the name read as a PCI function
  string_view message;        // what follows ": "
};

std::optional<DevPrefix> dev_prefix(string_view text) {
  size_t sp = text.substr(0, 128).find(' ');
  if (sp == kNone || sp == 0 || text[sp - 1] == ':') return std::nullopt;
  size_t colon = text.find(": ", sp + 1);
  if (colon == kNone || colon == sp + 1 || colon - sp > 128) return std::nullopt;
  string_view name = text.substr(sp + 1, colon - sp - 1);
  if (name.find(' ') != kNone) return std::nullopt;
  DevPrefix p;
  p.driver = text.substr(0, sp);
  p.name = name;
  p.bdf = bdf_exact(name, true);
  p.message = text.substr(colon + 2);
  return p;
}

LogEvent make(LogEventKind kind, const char* source, const KernelLogLine& line, const DevPrefix* prefix) {
  LogEvent e;
  e.kind = kind;
  e.source = source;
  e.line = line;
  if (prefix) e.driver = std::string(prefix->driver);
  return e;
}

// "(DDDD:BB:DD.F)" at s[0]: the provider pci_name() P2PDMA prints in parentheses.
std::optional<Bdf> parenthesised_bdf(string_view s) {
  if (s.empty() || s[0] != '(') return std::nullopt;
  size_t close = s.find(')');
  if (close == kNone) return std::nullopt;
  return bdf_exact(s.substr(1, close - 1), true);
}

// P2PDMA (drivers/pci/p2pdma.c), every era the tool models (/work/shared/docs/kernel-p2pdma.md §4.1):
//  upstream_bridge_distance_warn() 4.20-5.3, pci_p2pdma_distance_many()/calc_map_type_and_dist() 5.4+:
//   "cannot be used for peer-to-peer DMA as ACS redirect is set between the client and provider (%s)" (4.20-5.3)
//   "cannot be used for peer-to-peer DMA as the client and provider (%s) do not share an upstream bridge" (4.20-5.3)
//   "cannot be used for peer-to-peer DMA as the client and provider (%s) do not share an upstream bridge
//    or whitelisted host bridge" (5.4+)
//   "ACS redirect is set between the client and provider (%s)" (5.4+)
//   "to disable ACS redirect for this path, add the kernel parameter: pci=disable_acs_redir=%s" (4.20+)
//  pci_p2pdma_distance_many(): "cannot be used for peer-to-peer DMA as it is not a PCI device" (4.20+),
//   "cannot be used for peer-to-peer DMA because the driver makes use of dma_virt_ops" (5.3-5.10)
//  host_bridge_whitelist() 5.14+: "Host bridge not in P2PDMA whitelist: %04x:%04x" (on the root device)
// All are pci_warn()/dev_warn() on the client (the root complex for the whitelist line).
std::optional<LogEvent> p2pdma(const KernelLogLine& line, const DevPrefix& p) {
  constexpr string_view kCannot = "cannot be used for peer-to-peer DMA";
  constexpr string_view kBetween = "ACS redirect is set between the client and provider ";
  constexpr string_view kDisable = "to disable ACS redirect for this path, add the kernel parameter:";
  constexpr string_view kWhitelist = "Host bridge not in P2PDMA whitelist: ";
  string_view m = p.message;
  auto event = [&](LogEventKind kind) {
    LogEvent e = make(kind, "p2pdma", line, &p);
    e.device = p.bdf;
    if (!p.bdf) e.detail = fmt::format("device {}: ", p.name);
    return e;
  };
  if (starts_with(m, kCannot)) {
    LogEvent e = event(LogEventKind::kP2pdmaRefused);
    string_view rest = m.substr(kCannot.size());
    constexpr string_view kPair = " as the client and provider ";
    constexpr string_view kAcs = " as ACS redirect is set between the client and provider ";
    if (starts_with(rest, kPair)) {
      rest.remove_prefix(kPair.size());
      e.peer = parenthesised_bdf(rest);
      size_t close = rest.find(')');
      string_view why = close == kNone ? string_view() : rest.substr(close + 1);
      if (starts_with(why, " ")) why.remove_prefix(1);
      if (starts_with(why, "do not share an upstream bridge or whitelisted host bridge"))
        e.detail += "no common upstream bridge, and the host bridge is not whitelisted";
      else if (starts_with(why, "do not share an upstream bridge"))
        e.detail += "no common upstream bridge (4.20-5.3: no host bridge whitelist)";
      else if (rest.empty())
        e.detail += "the provider is not on this line (a wrapped or cut line)";
      else
        e.detail += std::string(why);
    } else if (starts_with(rest, kAcs)) {
      rest.remove_prefix(kAcs.size());
      e.peer = parenthesised_bdf(rest);
      e.detail += "ACS redirect is set on the path (4.20-5.3 refuse it)";
    } else {
      if (starts_with(rest, " ")) rest.remove_prefix(1);
      e.detail += std::string(rest);  // "as it is not a PCI device", "because the driver makes use of dma_virt_ops"
    }
    return e;
  }
  if (starts_with(m, kBetween)) {
    LogEvent e = event(LogEventKind::kAcsRedirect);
    e.peer = parenthesised_bdf(m.substr(kBetween.size()));
    e.detail += "ACS redirect is set between the client and the provider: the path goes through the root complex";
    return e;
  }
  if (starts_with(m, kDisable)) {
    LogEvent e = event(LogEventKind::kAcsRedirect);
    string_view remedy = m.substr(kDisable.size());
    while (starts_with(remedy, " ")) remedy.remove_prefix(1);
    if (remedy.empty())
      e.detail += "the kernel's remedy pci=disable_acs_redir= is not on this line (a wrapped or cut line)";
    else
      e.detail += fmt::format("the kernel's remedy: {}", remedy);
    return e;
  }
  if (starts_with(m, kWhitelist)) {
    LogEvent e = event(LogEventKind::kHostBridgeNotWhitelisted);
    string_view id = m.substr(kWhitelist.size());
    if (hex_run(id, 0, 4) && id.size() >= 9 && id[4] == ':' && hex_run(id, 5, 4))
      e.detail += fmt::format("host bridge {}", id.substr(0, 9));
    else
      e.detail += std::string(id);
    return e;
  }
  return std::nullopt;
}

// AMD-Vi (drivers/iommu/amd/iommu.c; drivers/iommu/amd_iommu.c before 5.8):
//  amd_iommu_report_page_fault(), the faulting device known: pci_err(pdev, "Event logged
//   [IO_PAGE_FAULT domain=0x%04x address=0x%llx flags=0x%04x]") (5.x+; 6.x adds " vflags=%#x"),
//   older drivers: dev_err(&pdev->dev, "AMD-Vi: Event logged [IO_PAGE_FAULT domain=...]") as pasted in
//   https://github.com/NVIDIA/cuda-samples/issues/48;
//  unknown device: pr_err("Event logged [IO_PAGE_FAULT device=%02x:%02x.%x domain=0x%04x address=0x%llx
//   flags=0x%04x]") with pr_fmt "AMD-Vi: ", "device=%04x:%02x:%02x.%x" once PCI segments were added;
//  iommu_print_event(): "Event logged [INVALID_DEVICE_REQUEST device=... pasid=... address=... flags=...]"
//   and the other event types, printed on the IOMMU's own device.
std::optional<LogEvent> amd_vi(const KernelLogLine& line, const std::optional<DevPrefix>& p) {
  constexpr string_view kLogged = "Event logged [";
  size_t at = line.text.find(kLogged);
  if (at == kNone) return std::nullopt;
  string_view body = string_view(line.text).substr(at + kLogged.size());
  size_t close = body.find(']');
  if (close != kNone) body = body.substr(0, close);
  size_t sp = body.find(' ');
  string_view type = body.substr(0, sp);
  if (type.empty() || type.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != kNone) return std::nullopt;
  string_view rest = sp == kNone ? string_view() : body.substr(sp + 1);
  LogEvent e = make(LogEventKind::kIommuFault, "amd-vi", line, p ? &*p : nullptr);
  if (string_view dev = field(rest, "device="); !dev.empty()) {
    // The older form leaves the segment out: which segment is for the machine to tell (log_explain).
    e.device = bdf_exact(dev, true);
    if (!e.device && (e.device = bdf_exact(dev, false))) e.device_segment_unknown = true;
  } else if (type == "IO_PAGE_FAULT" && p && p->bdf) {
    e.device = p->bdf;
  }
  if (string_view a = field(rest, "address="); !a.empty()) e.address = hex_value(a);
  e.detail = std::string(type);
  for (string_view key : {"domain=", "pasid=", "flags=", "vflags="}) {
    string_view v = field(rest, key);
    if (!v.empty()) e.detail += fmt::format(" {}{}", key, v);
  }
  return e;
}

// Intel VT-d (drivers/iommu/intel/dmar.c, drivers/iommu/dmar.c before 5.8), dmar_fault_do_one(),
// pr_fmt "DMAR: ", the requester printed without its segment:
//   "[%s] Request device [%02x:%02x.%d] fault addr %llx [fault reason %02d] %s" (4.x)
//   "[%s] Request device [%02x:%02x.%d] PASID %x fault addr %llx [fault reason %02d] %s" (5.x)
//   "[%s w/o PASID] Request device [...] fault addr %llx [fault reason %02xh] %s" (5.9-5.10)
//   "[%s NO_PASID] Request device [%02x:%02x.%d] fault addr 0x%llx [fault reason 0x%02x] %s" (5.11+)
//   "[%s PASID 0x%x] Request device [...] fault addr 0x%llx [fault reason 0x%02x] %s" (5.11+)
// where %s is "DMA Read" or "DMA Write"; "[INTR-REMAP] ... fault index" is an interrupt, not a DMA.
std::optional<LogEvent> dmar(const KernelLogLine& line) {
  constexpr string_view kRequest = "Request device [";
  string_view t = line.text;
  size_t at = t.find(kRequest);
  if (at == kNone || t.find("DMAR") == kNone) return std::nullopt;
  size_t open = t.rfind('[', at);
  string_view access = open == kNone ? string_view() : t.substr(open + 1, at - open - 1);
  while (!access.empty() && (access.back() == ' ' || access.back() == ']')) access.remove_suffix(1);
  if (!starts_with(access, "DMA ")) return std::nullopt;  // INTR-REMAP
  string_view rest = t.substr(at + kRequest.size());
  size_t close = rest.find(']');
  if (close == kNone) return std::nullopt;
  std::string dev(rest.substr(0, close));
  for (size_t x; (x = dev.find("0x")) != std::string::npos;) dev.erase(x, 2);  // "[0x%02x:0x%02x.%d]" (5.10-rc)
  LogEvent e = make(LogEventKind::kIommuFault, "dmar", line, nullptr);
  e.device = bdf_exact(dev, false);
  e.device_segment_unknown = e.device.has_value();
  rest.remove_prefix(close + 1);
  constexpr string_view kAddr = "fault addr ";
  if (size_t a = rest.find(kAddr); a != kNone) e.address = hex_value(rest.substr(a + kAddr.size()));
  e.detail = std::string(access);
  constexpr string_view kReason = "[fault reason ";
  if (size_t r = rest.find(kReason); r != kNone) {
    string_view reason = rest.substr(r + kReason.size());
    size_t end = reason.find(']');
    if (end != kNone) {
      e.detail += fmt::format(", fault reason {}", reason.substr(0, end));
      string_view text = reason.substr(end + 1);
      while (starts_with(text, " ")) text.remove_prefix(1);
      if (!text.empty()) e.detail += fmt::format(": {}", text);
    }
  }
  return e;
}

// ARM SMMU. The faulting master is named by a stream ID that the line does not map to a PCI
// function, so the device stays unknown unless the line names it:
//  arm-smmu.c arm_smmu_context_fault(): "Unhandled context fault: fsr=0x%x, iova=0x%08lx, fsynr=0x%x,
//   cbfrsynra=0x%x, cb=%d" (cbfrsynra added in 5.x; before it "fsr=..., iova=..., fsynr=..., cb=%d");
//  arm-smmu-v3.c arm_smmu_evtq_thread(): "event 0x%02x received:" followed by the raw dwords;
//  arm-smmu-v3.c arm_smmu_dump_event() (6.15+): "event: %s client: %s sid: %#x ssid: %#x iova: %#llx ipa: %#llx".
std::optional<LogEvent> arm_smmu(const KernelLogLine& line, const std::optional<DevPrefix>& p) {
  if (!p || p->driver.find("smmu") == kNone) return std::nullopt;
  string_view m = p->message;
  LogEvent e = make(LogEventKind::kIommuFault, "arm-smmu", line, &*p);
  constexpr string_view kContext = "Unhandled context fault: ";
  if (starts_with(m, kContext)) {
    string_view rest = m.substr(kContext.size());
    if (string_view iova = field(rest, "iova="); !iova.empty()) e.address = hex_value(iova);
    e.detail = fmt::format("context fault {} on {}", rest, p->name);
    return e;
  }
  constexpr string_view kEvent = "event 0x";
  if (starts_with(m, kEvent) && m.find(" received:") != kNone) {
    string_view id = m.substr(kEvent.size() - 2, 4);
    auto v = hex_value(id);
    const char* name = !v ? nullptr
                       : *v == 0x10 ? "F_TRANSLATION"
                       : *v == 0x11 ? "F_ADDR_SIZE"
                       : *v == 0x12 ? "F_ACCESS"
                       : *v == 0x13 ? "F_PERMISSION"
                                    : nullptr;
    e.detail = fmt::format("event {}{}{}{} on {} (the stream ID and address are in the raw lines that follow)", id,
                           name ? " (" : "", name ? name : "", name ? ")" : "", p->name);
    return e;
  }
  constexpr string_view kEventNamed = "event: ";
  if (starts_with(m, kEventNamed) && m.find(" client: ") != kNone) {
    string_view rest = m.substr(kEventNamed.size());
    size_t c = rest.find(" client: ");
    string_view client = rest.substr(c + 9);
    client = client.substr(0, client.find(' '));
    e.device = bdf_exact(client, true);
    constexpr string_view kIova = " iova: ";
    if (size_t a = rest.find(kIova); a != kNone) e.address = hex_value(rest.substr(a + kIova.size()));
    e.detail = std::string(rest.substr(0, c));
    constexpr string_view kSid = " sid: ";
    if (size_t s = rest.find(kSid); s != kNone) {
      string_view sid = rest.substr(s + kSid.size());
      e.detail += fmt::format(" sid {}", sid.substr(0, sid.find(' ')));
    }
    return e;
  }
  return std::nullopt;
}

// AER (drivers/pci/pcie/aer.c), dev_fmt "AER: " since 5.0:
//  aer_print_port_info(): "%s%s error received: %04x:%02x:%02x.%d" ("Multiple ", "Corrected" /
//   "Uncorrected (Non-Fatal)" / "Uncorrected (Fatal)"); 4.x: "... error received: id=%04x";
//   6.16+: "%s%s error message received from %04x:%02x:%02x.%d"; printed by the root port, naming the source;
//  aer_print_error(): "PCIe Bus Error: severity=%s, type=%s, (%s)" (4.x: "..., id=%04x(%s)") and
//  __aer_print_error(): "   [%2d] %-22s%s" for each error bit ("[12] Timeout", "(First)").
std::optional<LogEvent> aer(const KernelLogLine& line, const std::optional<DevPrefix>& p) {
  if (!p || !p->bdf) return std::nullopt;
  string_view m = p->message;
  if (starts_with(m, "AER: ")) m.remove_prefix(5);
  for (string_view marker : {string_view("error received: "), string_view("error message received from ")}) {
    size_t at = m.find(marker);
    if (at == kNone) continue;
    string_view severity = m.substr(0, at);
    while (!severity.empty() && severity.back() == ' ') severity.remove_suffix(1);
    string_view plain = starts_with(severity, "Multiple ") ? severity.substr(9) : severity;
    if (plain != "Corrected" && plain != "Uncorrected (Non-Fatal)" && plain != "Uncorrected (Fatal)") continue;
    LogEvent e = make(LogEventKind::kAer, "aer", line, &*p);
    string_view source = m.substr(at + marker.size());
    source = source.substr(0, source.find(' '));
    if (starts_with(source, "id=")) {
      // The requester ID: bus in the high byte, devfn in the low; the segment is the port's.
      if (auto id = hex_value(source.substr(3)); id && *id <= 0xffff)
        e.device = Bdf{p->bdf->domain, static_cast<uint8_t>(*id >> 8), static_cast<uint8_t>((*id & 0xff) >> 3),
                       static_cast<uint8_t>(*id & 7)};
    } else {
      e.device = bdf_exact(source, true);
    }
    e.detail = fmt::format("{} error, reported by {}", severity, p->bdf->str());
    return e;
  }
  constexpr string_view kBus = "PCIe Bus Error: ";
  if (starts_with(m, kBus)) {
    LogEvent e = make(LogEventKind::kAer, "aer", line, &*p);
    e.device = p->bdf;
    e.detail = std::string(m.substr(kBus.size()));
    return e;
  }
  // The error bits' names of aer_correctable_error_string[] and aer_uncorrectable_error_string[].
  size_t i = 0;
  while (i < m.size() && m[i] == ' ') ++i;
  if (i < 2 || i >= m.size() || m[i] != '[') return std::nullopt;
  size_t close = m.find(']', i);
  if (close == kNone || close - i > 4) return std::nullopt;
  for (size_t k = i + 1; k < close; ++k)
    if (!(is_digit(m[k]) || m[k] == ' ')) return std::nullopt;
  string_view name = m.substr(close + 1);
  while (starts_with(name, " ")) name.remove_prefix(1);
  string_view word = name.substr(0, name.find(' '));
  static constexpr string_view kBits[] = {
      "RxErr",      "BadTLP",     "BadDLLP",        "Rollover",     "Timeout",       "NonFatalErr", "CorrIntErr",
      "HeaderOF",   "Undefined",  "DLP",            "SDES",         "TLP",           "FCP",         "CmpltTO",
      "CmpltAbrt",  "UnxCmplt",   "RxOF",           "MalfTLP",      "ECRC",          "UnsupReq",    "ACSViol",
      "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked", "TLPBlockedErr", "PoisonTLPBlocked", "DMWrReqBlocked",
      "IDECheck",   "MisIDETLP",  "PCRC_CHECK",     "TLPXlatBlocked"};
  bool known = false;
  for (auto b : kBits) known = known || word == b;
  if (!known) return std::nullopt;
  LogEvent e = make(LogEventKind::kAer, "aer", line, &*p);
  e.device = p->bdf;
  while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
  e.detail = std::string(name);
  return e;
}

// NVIDIA (open-gpu-kernel-modules src/nvidia/src/kernel/gpu/rc/kernel_rc.c, krcReportXid...):
//   "NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s" and "NVRM: Xid (PCI:%04x:%02x:%02x): %d, %s";
// MIG adds " GPU-I:%02u" and " GPU-CI:%02u" inside the parentheses; older drivers print
// "NVRM: Xid (%04x:%02x:%02x): ...". The function is not printed: a GPU is function 0.
std::optional<LogEvent> nvidia_xid(const KernelLogLine& line) {
  constexpr string_view kXid = "NVRM: Xid (";
  size_t at = line.text.find(kXid);
  if (at == kNone) return std::nullopt;
  string_view rest = string_view(line.text).substr(at + kXid.size());
  if (starts_with(rest, "PCI:")) rest.remove_prefix(4);
  size_t close = rest.find(')');
  if (close == kNone) return std::nullopt;
  string_view inside = rest.substr(0, close);
  string_view bdf = inside.substr(0, inside.find(' '));
  LogEvent e = make(LogEventKind::kNvidiaXid, "nvidia-xid", line, nullptr);
  if (bdf.size() >= 10 && hex_run(bdf, 0, 4) && bdf[4] == ':' && hex_run(bdf, 5, 2) && bdf[7] == ':' &&
      hex_run(bdf, 8, 2) && bdf.size() == 10)
    e.device = bdf_exact(fmt::format("{}.0", bdf), true);
  string_view what = rest.substr(close + 1);
  if (starts_with(what, ":")) what.remove_prefix(1);
  while (starts_with(what, " ")) what.remove_prefix(1);
  e.detail = fmt::format("Xid {}", what);
  if (inside.size() > bdf.size()) e.detail += fmt::format(" ({})", inside.substr(bdf.size() + 1));
  return e;
}

// Driver messages about peer access that are not P2PDMA's own lines.
//  amdgpu: drivers/gpu/drm/amd/amdgpu/amdgpu_device.c, amdgpu_device_is_peer_accessible() (6.14+):
//   dev_info(adev->dev, "PCIe P2P access from peer device %s is not supported by the chipset\n", pci_name(peer))
//   (the printing device owns the memory: the provider; the peer is the one refused).
//  XRT: xocl subdev/p2p.c (https://github.com/Xilinx/XRT, src/runtime_src/core/pcie/driver/linux/xocl/subdev/p2p.c)
//   through xocl_err(): p2p_configure() "Not enough IO space, please warm reboot", p2p_mem_get_pages()
//   "p2p is not enabled", p2p_mem_chunk_reserve() "reserve p2p chunk failed, releasing", p2p_mem_map()
//   "reserve p2p chunks failed ret = %d", p2p_remap_resource() "not enough remap space".
//  xe prints no peer message of its own: xe_dma_buf_attach() (drivers/gpu/drm/xe/xe_dma_buf.c) asks
//   pci_p2pdma_distance() quietly, and xe_has_interconnect() (xe_svm.c) asks it verbosely, so xe's
//   refusals are P2PDMA's lines above with the "xe" driver prefix.
std::optional<LogEvent> vendor(const KernelLogLine& line, const std::optional<DevPrefix>& p) {
  if (!p) return std::nullopt;
  string_view m = p->message;
  constexpr string_view kAmdgpu = "PCIe P2P access from peer device ";
  if (starts_with(m, kAmdgpu)) {
    LogEvent e = make(LogEventKind::kVendorPeerMessage, "amdgpu", line, &*p);
    e.device = p->bdf;
    string_view peer = m.substr(kAmdgpu.size());
    e.peer = bdf_exact(peer.substr(0, peer.find(' ')), true);
    e.detail = "amdgpu: peer access is not supported by the chipset (pci_p2pdma_distance() refused the pair)";
    return e;
  }
  if (p->driver == "xocl" || p->driver == "xclmgmt") {
    for (string_view what : {"Not enough IO space, please warm reboot", "p2p is not enabled",
                             "reserve p2p chunk failed", "reserve p2p chunks failed", "not enough remap space"}) {
      if (m.find(what) == kNone) continue;
      LogEvent e = make(LogEventKind::kVendorPeerMessage, "xrt", line, &*p);
      e.device = p->bdf;
      e.detail = fmt::format("XRT P2P: {}", what);
      return e;
    }
  }
  return std::nullopt;
}

}  // namespace

const char* to_string(LogEventKind kind) {
  switch (kind) {
    case LogEventKind::kP2pdmaRefused: return "p2pdma-refused";
    case LogEventKind::kAcsRedirect: return "acs-redirect";
    case LogEventKind::kHostBridgeNotWhitelisted: return "host-bridge-not-whitelisted";
    case LogEventKind::kIommuFault: return "iommu-fault";
    case LogEventKind::kAer: return "aer";
    case LogEventKind::kNvidiaXid: return "nvidia-xid";
    case LogEventKind::kVendorPeerMessage: return "vendor-peer-message";
  }
  return "unknown";
}

std::optional<LogEvent> recognise_kernel_log_line(const KernelLogLine& line) {
  auto prefix = dev_prefix(line.text);
  if (prefix) {
    if (auto e = p2pdma(line, *prefix)) return e;
  }
  if (auto e = amd_vi(line, prefix)) return e;
  if (auto e = dmar(line)) return e;
  if (auto e = arm_smmu(line, prefix)) return e;
  if (auto e = aer(line, prefix)) return e;
  if (auto e = nvidia_xid(line)) return e;
  if (auto e = vendor(line, prefix)) return e;
  return std::nullopt;
}

}  // namespace p2paudit
