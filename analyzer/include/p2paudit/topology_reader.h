// SPDX-License-Identifier: GPL-2.0-or-later
// Rebuilds the PCIe tree and platform facts from a sysroot (libpci for config space, libkmod for
// modules, sysfs for the kernel's own view of parents, drivers, IOMMU groups).
#pragma once

#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"

namespace p2paudit {

// Throws InputError (naming the path) when the sysroot has no PCI devices or is malformed.
Topology read_topology(const Sysroot& root);

}  // namespace p2paudit
