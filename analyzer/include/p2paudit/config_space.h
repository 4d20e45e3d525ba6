// SPDX-License-Identifier: GPL-2.0-or-later
// Per-function config space decoding through libpci: the linux-sysfs access method pointed into a
// sysroot, or libpci's dump method for `lspci -x` dumps.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"

namespace p2paudit {

// Functions with identity, capabilities, BARs and windows filled in; sysfs-only facts (parents,
// drivers, IOMMU groups) and the pci.ids names (fill_pci_names()) are left to the topology reader.
// read_config_dump() and decode_config_bytes() fill the names too. Throws InputError.
// `each`, when given, is called with every function kept, right after its config space: the
// topology reader reads the rest of that function's directory while it is still open. `physfn`
// is the function's physfn link as read (a VF's only), so the reader need not read it again.
std::vector<Function> read_config_space(const Sysroot& root, std::vector<Finding>& findings,
                                        const std::function<void(Function&, const std::optional<std::string>& physfn)>& each = {});
std::vector<Function> read_config_dump(const std::string& dump_file, std::vector<Finding>& findings);
// One function's config space as held in memory (64, 256 or 4096 bytes count); BAR sizes unknown.
Function decode_config_bytes(const Bdf& bdf, std::vector<uint8_t> bytes, std::vector<Finding>& findings);

// One function's config space read piece by piece (Sysroot::read_pieces()), only where the
// decoding looks: the 256 bytes of conventional space, every extended capability header on the
// kernel's and libpci's walks of the list, and the bodies of the capabilities decoded (ACS,
// SR-IOV, Device Serial Number, Resizable BAR). Unread bytes are zero; the size is what a whole
// read would give (64, 256 or 4096 bytes, fewer when the read stops short), so
// whole_config_regions() and the decoding see the same function as from the whole file.
std::vector<uint8_t> read_config_pieces(const Sysroot::PieceRead& read);

// How much of config space counts as read when `bytes` of it are held (a sysfs file, a dump's
// rows, what libpci's dump method holds): only whole regions, the 64-byte header, the 256 bytes
// of conventional and the 4096 of extended config space; a read cut inside a region leaves that
// region unknown. Every source's readability is measured by this one rule.
size_t whole_config_regions(size_t bytes);

// Once parents are known: the config size the kernel gives each function whose size no record
// states (pci_cfg_space_size()), and extended capabilities absent only where the kernel gives 256
// bytes; a copy cut short of the kernel's size leaves them unknown, with a finding.
void settle_config_sizes(Topology& t);

// Mirrors pci_find_ext_capability() in drivers/pci/pci.c: the offset the kernel would find, 0 if none.
using ConfigReader = uint32_t (*)(const void* ctx, int pos);
int pci_find_ext_capability(const void* ctx, ConfigReader read32, size_t cfg_size, int cap);

// The names pci.ids gives f's vendor, device and class ("" where it has none), looked up by the
// IDs f holds. pci.ids is parsed at the first name this process asks for. Throws InputError.
void fill_pci_names(Function& f);
// The name pci.ids gives a device, "" when none: fill_pci_names()'s device_name.
std::string pci_ids_device_name(uint16_t vendor, uint16_t device);

// How many times this process has loaded libpci's PCI ID names (pci.ids): once, however many
// sysroots, dumps and aggregate inputs are read, on however many threads.
std::uint64_t pci_name_list_loads();

}  // namespace p2paudit
