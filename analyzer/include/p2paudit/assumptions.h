// SPDX-License-Identifier: GPL-2.0-or-later
// What-if assumptions laid over a topology as read (`--assume-acs-off`): the machine as it would be
// after a reboot with a kernel parameter, so every command can answer "what if I booted with it?".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/topology.h"

namespace p2paudit {

// Where the statements of an assumption are filed in Topology::findings (their `path`).
inline constexpr std::string_view kAssumeAcsOffOrigin = "--assume-acs-off";

// What assume_acs_redirect_off() did, function by function (indexes into Topology::functions).
struct AcsRedirectOff {
  struct Cleared {
    size_t function = 0;
    uint16_t ctrl_before = 0, ctrl_after = 0;
  };
  std::vector<Cleared> cleared;       // RR/CR/EC were set and are now clear
  std::vector<size_t> already_clear;  // ACS present, none of RR/CR/EC set: nothing to do
  std::vector<size_t> without_acs;    // named, but no ACS capability: the kernel warns and changes nothing
  std::vector<size_t> unreadable;     // ACS control not readable: left unknown, never guessed
  std::vector<size_t> pch_quirk;      // Intel SPT/UPT PCH root ports: what P2PDMA reads does not change
  std::vector<std::string> read_notes;  // how a pasted kernel command line was read (ignored parts)

  // "pci=disable_acs_redir=" with the cleared devices, ';'-separated; "" when nothing was cleared.
  std::string kernel_parameter(const Topology& topo) const;
  // One line per kind of outcome, for a topology finding or a kernel note.
  std::vector<std::string> notes(const Topology& topo) const;
};

// Lays `pci=disable_acs_redir=` over the topology: pci_disable_acs_redir() (drivers/pci/pci.c)
// clears PCI_ACS_RR | PCI_ACS_CR | PCI_ACS_EC in the ACS control register of every device the
// parameter names. Each spec is one or more devices separated by ';' or ',' (as the kernel
// separates them), each in the kernel's pci_dev_str_match() syntax: "[DDDD:]BB:DD.F" with an
// optional "/DD.F" path below it, or "pci:VVVV:DDDD[:SSSS:ssss]" (a 0 field matches any); or
// "all": every device with an ACS capability. A spec holding '=' or blanks is the kernel's own
// parameter as pasted: "pci=disable_acs_redir=A;B", "disable_acs_redir=A;B", or a whole kernel
// command line holding it, read as the kernel's pci_setup() reads it (the last disable_acs_redir=
// of the pci= options). Throws InputError naming the spec when it does not parse, is empty, holds no
// pci=disable_acs_redir=, or matches no function of the topology.
AcsRedirectOff assume_acs_redirect_off(Topology& topo, const std::vector<std::string>& specs);

// Kernels 6.11 to 6.14 (47c8846a49ba until the fix 9cf8a952d57b, also backported to 6.12.y)
// restore the firmware's RR/CR/EC values instead of clearing them; nullopt for other releases.
std::optional<std::string> acs_redirect_off_caveat(const KernelRelease& release);

}  // namespace p2paudit
