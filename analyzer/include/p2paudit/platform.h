// SPDX-License-Identifier: GPL-2.0-or-later
// Platform facts: boot CPU, kernel release and command line, CONFIG_PCI_P2PDMA, IOMMU state.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"

namespace p2paudit {

Platform read_platform(const Sysroot& root, std::vector<Finding>& findings);

// Whether a kernel release may name a directory (boot/config-R, lib/modules/R): one path component
// of the characters kernel releases use, so a hostile "../../etc/shadow" cannot steer a lookup.
// read_platform() keeps only such a release (else it is unknown: "").
bool is_safe_kernel_release(const std::string& release);

// The value of a kernel command-line parameter ("iommu", "pci", ...), last one wins as in the
// kernel; nullopt when absent. A bare flag yields "". The line is read as the kernel reads it
// (kernel_cmdline.h): nothing after "--", quotes as next_arg() takes them, '-' and '_' alike.
std::optional<std::string> cmdline_param(const std::string& cmdline, const std::string& name);

// Values given through pci=KEY=VALUE (pci= options are split on ','; the last wins, across
// pci= words too).
std::optional<std::string> cmdline_pci_option(const std::string& cmdline, const std::string& key);

}  // namespace p2paudit
