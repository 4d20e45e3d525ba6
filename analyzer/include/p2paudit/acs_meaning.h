// SPDX-License-Identifier: GPL-2.0-or-later
// What each ACS bit means, in one place: the capabilities a port implements (ACS Capability
// register) and what each control bit, when set, does to a peer request (PCI Express Base
// Specification, 6.12 "Access Control Services"; the kernel's PCI_ACS_* flags, kernel-p2pdma.md §5),
// with what the kernel's P2PDMA does with it (pci_bridge_has_acs_redir() reads RR, CR and EC only,
// kernel-p2pdma.md §1.1). The topology's text and JSON, the picture and `explain` all quote these.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/topology.h"

namespace p2paudit {

struct AcsBitMeaning {
  uint16_t mask = 0;          // PCI_ACS_SV ... PCI_ACS_DT: the same bit in the Capability and Control registers
  std::string_view bit;       // "RR"
  std::string_view name;      // "P2P Request Redirect"
  std::string_view effect;    // what the bit, set, does to a peer request (the PCIe spec's meaning)
  std::string_view p2pdma;    // what the kernel's P2PDMA does with it
  bool p2pdma_reads = false;  // pci_bridge_has_acs_redir() tests it (RR, CR, EC)
};

// SV TB RR CR UF EC DT, in register order.
std::span<const AcsBitMeaning> acs_bit_meanings();

// The bits of `word` (a Capability or Control register), in register order; bits above DT are not named.
std::vector<const AcsBitMeaning*> acs_bits_in(uint16_t word);
// "SV RR CR UF", "none" for no bit.
std::string acs_bit_names(uint16_t word);

// The Egress Control Vector (only where EC is implemented): its size in bits from the Capability
// register (0 there means 256) and the first 32 bits as read (nullopt: past the readable space);
// nullopt without EC.
struct AcsEgress {
  int size_bits = 0;
  std::optional<uint32_t> first_word;
};
std::optional<AcsEgress> acs_egress(const Acs& acs);

// Why ACS is unknown, for one function: read unprivileged, or a dump cut short.
std::string acs_unknown_text(const Topology& t, const Function& f);

// One line for the tree and the picture: "ACS set SV RR CR UF (implements SV TB RR CR UF)",
// "no ACS", "ACS unknown (config space cut short)".
std::string acs_line(const Acs& acs);

// For each bit set in `ctrl`: "RR (P2P Request Redirect): <effect>; P2PDMA: <what it does>".
std::vector<std::string> acs_set_bit_lines(uint16_t ctrl);

// pcie_acs_override=VALUE on the command line (the out-of-tree ACS override patch, "pci: Enable
// overrides for missing ACS capabilities", Alex Williamson, linux-pci, May 2013, carried by many
// distribution and gaming kernels) said on every pair's verdict: it never changes the kernel's
// P2PDMA verdict. The patch adds pcie_acs_overrides() to the pci_dev_acs_enabled[] quirks, which
// only pci_acs_enabled() and so IOMMU grouping consult (kernel-p2pdma.md §5, "Quirks that
// matter"), and it returns -ENOTTY for any device that has an ACS capability; P2PDMA's
// pci_bridge_has_acs_redir() reads the ACS control register itself and counts a device without
// the capability as no redirect (§1.1), so neither is changed by it.
std::string acs_override_text(std::string_view value);

// topology --format json, per function: "acs_implemented" and "acs_enabled" (bit names; null when
// ACS is unknown, [] when absent) and "acs_egress_vector" ({size_bits, first_word (null: not readable)} or null).
void add_acs_json(const Acs& acs, nlohmann::ordered_json& function);
// The meanings once for the document: [{bit, name, mask, effect, p2pdma, p2pdma_reads}].
nlohmann::ordered_json acs_meanings_json();

}  // namespace p2paudit
