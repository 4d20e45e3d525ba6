// SPDX-License-Identifier: GPL-2.0-or-later
// The PCIe tree rebuilt from an `lspci -x`, `-xxx` or `-xxxx` dump as people paste it (header
// lines of any length, `lspci -v` text, mail around it): each function's intact bytes are decoded
// by libpci (decode_config_bytes), bytes after damage in its hex rows are unreadable, parents come
// from bridge bus ranges as `lspci -t` draws them (pciutils ls-tree.c), and what a dump cannot tell
// (host-bridge split, CPU, IOMMU, kernel) is taken from DumpAssumptions and stated as findings.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "p2paudit/topology.h"

namespace p2paudit {

// The boot CPU as /proc/cpuinfo would say it: "AuthenticAMD:25:1", "GenuineIntel:6:207" (family
// and model decimal as in cpuinfo, or 0x-prefixed hex; the model may be left out), or a non-x86
// architecture name ("arm64", "riscv64", "ppc64le", "s390x", "loongarch64").
struct DumpCpu {
  std::string arch;    // "x86", "arm64", ...
  std::string vendor;  // x86 vendor_id, "" for other architectures
  std::optional<int> family, model;

  // Throws InputError naming --dump-cpu when the text is not one of the forms above.
  static DumpCpu parse(std::string_view text);
  std::string str() const;
};

// What a dump cannot tell; every field left empty is unknown and said to be.
struct DumpAssumptions {
  std::optional<DumpCpu> cpu;                 // --dump-cpu
  std::string iommu;                          // --dump-iommu: "off", "passthrough", "translated" or "" (unknown)
  std::vector<std::string> host_bridges;      // --dump-host-bridge DDDD:BB (repeatable); empty: one per root bus
  std::string kernel;                         // --kernel X.Y[.Z]; also assumes CONFIG_PCI_P2PDMA=y
};

// Throws InputError (naming the file) when the dump cannot be read, holds no hex rows (`lspci -v`
// or `lspci -t` text: the message says to run `sudo lspci -xxxx`), no function with its first 64
// bytes intact, or more than 2^18 function headers, or when an assumption is malformed. Damage in a
// function's hex rows is a finding naming the line ("line N: ..."). Never loops on hostile bus ranges; every function of the
// dump (one copy of a duplicated address) is in the result.
Topology read_dump_topology(const std::string& dump_file, const DumpAssumptions& assumptions);

// The statements, one per unknown or assumed fact, that read_dump_topology() adds first to the
// topology's findings (path: the dump file), for outputs that print notes rather than findings.
// dump_file is named in the first statement; empty: not named (a finding's path names it).
std::vector<std::string> dump_assumption_notes(const std::string& dump_file, const DumpAssumptions& assumptions,
                                               const Topology& topology);

}  // namespace p2paudit
