// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/acs_meaning.h"

#include <array>

#include <fmt/format.h>

#include "p2paudit/input_file.h"

namespace p2paudit {

namespace {

// The effects follow the PCI Express Base Specification, 6.12 "Access Control Services" and the
// ACS Extended Capability's register description; what P2PDMA does follows the kernel's
// pci_bridge_has_acs_redir() and pci_std_enable_acs() (shared/docs/kernel-p2pdma.md §1.1, §5, §7.8).
constexpr std::string_view kRedirect =
    "counted as redirect by pci_bridge_has_acs_redir(): the pair's path goes through the host bridge "
    "(THRU_HOST_BRIDGE, refused unless the host bridge is whitelisted or the boot CPU is AMD Zen); "
    "pci=disable_acs_redir= clears it";
constexpr std::string_view kNotRead = "not read (pci_bridge_has_acs_redir() tests RR, CR and EC only)";

constexpr std::array<AcsBitMeaning, 7> kMeanings{{
    {kAcsSv, "SV", "Source Validation",
     "a request arriving from below whose requester ID (bus number) is outside the port's secondary..subordinate "
     "bus range is blocked; a peer's own requests pass",
     kNotRead, false},
    {kAcsTb, "TB", "Translation Blocking",
     "a request arriving from below with a translated address (AT field not untranslated, i.e. ATS-translated) is "
     "blocked",
     "not read (the kernel sets TB only with ATS disabled or on external-facing, untrusted ports)", false},
    {kAcsRr, "RR", "P2P Request Redirect",
     "a peer-to-peer request is sent up to the root complex (and its IOMMU) instead of across to the peer; it "
     "reaches the peer only if the root complex routes it back down",
     kRedirect, true},
    {kAcsCr, "CR", "P2P Completion Redirect",
     "a peer-to-peer completion (without Relaxed Ordering) is sent up to the root complex instead of across, so it "
     "cannot pass the requests redirected before it",
     kRedirect, true},
    {kAcsUf, "UF", "Upstream Forwarding",
     "a request or completion arriving at this downstream port that targets a device below the same port (traffic "
     "redirected up from below) is forwarded upstream instead of back down the link it came from",
     kNotRead, false},
    {kAcsEc, "EC", "P2P Egress Control",
     "a peer request to a port or function whose bit is set in the Egress Control Vector is blocked, or redirected "
     "up to the root complex where RR is also set",
     "counted as redirect by pci_bridge_has_acs_redir() whatever the vector holds: the pair's path goes through "
     "the host bridge; the kernel never sets EC itself; pci=disable_acs_redir= clears it",
     true},
    {kAcsDt, "DT", "Direct Translated P2P",
     "a peer request with an ATS-translated address goes directly to the peer even where RR or EC would redirect "
     "it; untranslated requests are still redirected",
     "not read: RR, CR or EC still count as redirect with DT set, and the kernel never sets DT itself", false},
}};

}  // namespace

std::span<const AcsBitMeaning> acs_bit_meanings() { return kMeanings; }

std::vector<const AcsBitMeaning*> acs_bits_in(uint16_t word) {
  std::vector<const AcsBitMeaning*> out;
  for (const auto& m : kMeanings)
    if (word & m.mask) out.push_back(&m);
  return out;
}

std::string acs_bit_names(uint16_t word) {
  std::string out;
  for (const auto* m : acs_bits_in(word)) {
    if (!out.empty()) out += ' ';
    out += m->bit;
  }
  return out.empty() ? "none" : out;
}

std::optional<AcsEgress> acs_egress(const Acs& acs) {
  if (acs.state != CapState::kPresent || !(acs.cap & kAcsEc)) return std::nullopt;
  int size = (acs.cap >> 8) & 0xff;  // PCI_ACS_EGRESS_BITS; 0 encodes 256
  return AcsEgress{size ? size : 256, acs.egress_first_word};
}

std::string acs_unknown_text(const Topology& t, const Function& f) {
  if (!t.lspci_dump.empty())
    return fmt::format("ACS not in the dump ({} bytes of config space): rerun `sudo lspci -xxxx`", f.config_readable);
  return "ACS not readable (run as root)";
}

std::string acs_line(const Acs& acs) {
  switch (acs.state) {
    case CapState::kUnknown: return "ACS unknown (config space cut short)";
    case CapState::kAbsent: return "no ACS";
    case CapState::kPresent: break;
  }
  std::string line = fmt::format("ACS set {} (implements {})", acs_bit_names(acs.ctrl), acs_bit_names(acs.cap));
  if (auto egress = acs_egress(acs)) {
    line += fmt::format(", egress vector {} bits", egress->size_bits);
    if (!egress->first_word) line += " (not readable)";
    else line += fmt::format("{} {:#010x}", egress->size_bits > 32 ? ", first 32" : "", *egress->first_word);
  }
  return line;
}

std::vector<std::string> acs_set_bit_lines(uint16_t ctrl) {
  std::vector<std::string> out;
  for (const auto* m : acs_bits_in(ctrl)) out.push_back(fmt::format("{} ({}): {}; P2PDMA: {}", m->bit, m->name, m->effect, m->p2pdma));
  return out;
}

std::string acs_override_text(std::string_view value) {
  return fmt::format("pcie_acs_override={} on the command line does not change the kernel's P2PDMA verdict: it "
                     "changes IOMMU grouping only, never pci_p2pdma_distance()'s ACS check, which reads the ACS "
                     "control register itself",
                     escape_text(value));
}

void add_acs_json(const Acs& acs, nlohmann::ordered_json& j) {
  using json = nlohmann::ordered_json;
  auto names = [](uint16_t word) {
    json out = json::array();
    for (const auto* m : acs_bits_in(word)) out.push_back(std::string(m->bit));
    return out;
  };
  switch (acs.state) {
    case CapState::kUnknown:
      j["acs_implemented"] = nullptr;
      j["acs_enabled"] = nullptr;
      break;
    case CapState::kAbsent:
      j["acs_implemented"] = json::array();
      j["acs_enabled"] = json::array();
      break;
    case CapState::kPresent:
      j["acs_implemented"] = names(acs.cap);
      j["acs_enabled"] = names(acs.ctrl);
      break;
  }
  auto egress = acs_egress(acs);
  j["acs_egress_vector"] =
      egress ? json{{"size_bits", egress->size_bits},
                    {"first_word", egress->first_word ? json(*egress->first_word) : json(nullptr)}}
             : json(nullptr);
}

nlohmann::ordered_json acs_meanings_json() {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& m : kMeanings)
    out.push_back({{"bit", std::string(m.bit)},
                   {"name", std::string(m.name)},
                   {"mask", m.mask},
                   {"effect", std::string(m.effect)},
                   {"p2pdma", std::string(m.p2pdma)},
                   {"p2pdma_reads", m.p2pdma_reads}});
  return out;
}

}  // namespace p2paudit
