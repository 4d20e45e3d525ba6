// SPDX-License-Identifier: GPL-2.0-or-later
// Device memory sizes that vendor drivers publish in sysfs (docs/vendor-gates.md): what the vendor
// P2P gates compare with the BAR ("large BAR": the whole VRAM reachable through it).
//
//   amdgpu   <device>/mem_info_vram_total, <device>/mem_info_vis_vram_total   (bytes, "%llu\n")
//   i915     <device>/drm/cardN/lmem_total_bytes   (Intel's out-of-tree i915 backport only)
//   xe       <device>/tileN/physical_vram_size_bytes, summed over the tiles, where the xe build
//            publishes it (xe as first written); mainline releases publish no VRAM size in sysfs
//            (only the query ioctl has it), so there it stays unknown
//
// Only the bound driver's own files are read; each must be one decimal number as the kernel prints
// it, at most kMaxDeviceMemoryBytes. Anything else is a finding and leaves the size unknown.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"

namespace p2paudit {

// Larger than any device's memory (today's largest carry ~0.2 TiB); the policy's memory_size
// fact has the same bound.
inline constexpr uint64_t kMaxDeviceMemoryBytes = uint64_t{1} << 50;

// Whole GiB or MiB as such ("16 GiB", "256 MiB"), anything else in bytes.
std::string memory_size_text(uint64_t bytes);

// The files (relative to the sysroot) read for f's memory size, for its bound driver; a snapshot
// copies those that exist. Empty for drivers that publish none.
std::vector<std::string> vendor_memory_files(const Sysroot& root, const Function& f);

// Sets f.memory_size, f.memory_size_source and f.memory_visible_size from those files; a file
// that exists but is not a plain number in range (or not a regular file inside the sysroot) is a
// finding, and the size stays unknown. Needs f.driver, f.sysfs_path and f.bars.
void read_vendor_memory(const Sysroot& root, Function& f, std::vector<Finding>& findings);

}  // namespace p2paudit
