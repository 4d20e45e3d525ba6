// SPDX-License-Identifier: GPL-2.0-or-later
// Rebuilds the PCIe tree and platform facts from a sysroot (libpci for config space, libkmod for
// modules, sysfs for the kernel's own view of parents, drivers, IOMMU groups).
#pragma once

#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"

namespace p2paudit {

// What read_topology() reads beyond what every output uses.
struct TopologyReadScope {
  // local_cpulist, the IOMMU group's type and a bound function's modalias (a function without a
  // driver keeps its modalias: its module is looked up by it): only the JSON tree prints them,
  // no rule decides on them and none can be a finding. Left empty when false.
  bool descriptive_attributes = true;
  // Each function's vendor, device and class names from pci.ids. False for the outputs whose only
  // names are the few their texts look up (pci_device_name()): pci.ids is then parsed only when a
  // text that names a device is built (a verdict's, printed or not), and
  // Topology::pci_names_deferred says so.
  bool pci_names = true;
};

// Throws InputError (naming the path) when the sysroot has no PCI devices or is malformed.
Topology read_topology(const Sysroot& root, const TopologyReadScope& scope = {});

}  // namespace p2paudit
