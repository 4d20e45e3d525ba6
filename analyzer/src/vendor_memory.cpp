// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/vendor_memory.h"

#include <algorithm>
#include <regex>

#include <fmt/format.h>

#include "p2paudit/input_file.h"

namespace p2paudit {

namespace {

// amdgpu_vram_mgr.c: DEVICE_ATTR mem_info_vram_total (gmc.real_vram_size) and
// mem_info_vis_vram_total (gmc.visible_vram_size), created on the PCI device, printed "%llu\n".
constexpr const char* kAmdgpuVramTotal = "mem_info_vram_total";
constexpr const char* kAmdgpuVisibleVramTotal = "mem_info_vis_vram_total";
// intel-gpu-i915-backports i915_sysfs.c: lmem_total_bytes on the DRM primary minor (drm/cardN),
// the sum of the LOCAL memory regions, "%llu\n". Mainline i915 has no such file.
constexpr const char* kI915LmemTotal = "lmem_total_bytes";
// xe as first written (drivers/gpu/drm/xe/xe_tile_sysfs.c, the version with
// physical_vram_size_bytes_show()): DEVICE_ATTR_RO(physical_vram_size_bytes) in the tile's kobject
// "tile%d" below the PCI device, created for discrete GPUs but DG1, "%llu\n" of
// tile->mem.vram.actual_physical_size. Later xe (torvalds/linux commit f057b572, and the tree at
// 6.8-rc6 of commit 06d07429) has no such attribute: there the size stays unknown from sysfs.
constexpr const char* kXeTileVram = "physical_vram_size_bytes";

// "%llu\n" of a value up to 2^50 is at most 17 bytes; anything this long is not such a number.
constexpr size_t kMaxSizeText = 32;

// The DRM primary minors (card0, card1...) below a device directory.
std::vector<std::string> drm_cards(const Sysroot& root, const std::string& dir) {
  static const std::regex kCard("card[0-9]{1,6}");
  std::vector<std::string> cards;
  for (const auto& name : root.list(dir + "/drm"))
    if (std::regex_match(name, kCard)) cards.push_back(name);
  return cards;
}

// One size in bytes as the kernel prints it with "%llu\n": digits, no sign, no leading zero, no
// space, at most one trailing newline, at most kMaxDeviceMemoryBytes. nullopt (no finding) when
// the file is absent; nullopt and a finding for anything else.
std::optional<uint64_t> read_size(const Sysroot& root, const std::string& path, std::vector<Finding>& findings) {
  if (!root.exists(path)) return std::nullopt;
  auto bytes = root.read_bytes(path, kMaxSizeText);
  if (!bytes) {
    findings.push_back({path, "not a regular file inside the sysroot; memory size unknown"});
    return std::nullopt;
  }
  std::string text(bytes->begin(), bytes->end());
  if (text.size() >= kMaxSizeText) {
    findings.push_back({path, fmt::format("'{}...' is longer than any size in bytes; memory size unknown",
                                          escape_text(text.substr(0, 20)))});
    return std::nullopt;
  }
  std::string digits = text;
  if (!digits.empty() && digits.back() == '\n') digits.pop_back();
  bool ok = !digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos &&
            (digits.size() == 1 || digits[0] != '0');
  if (!ok) {
    findings.push_back({path, fmt::format("'{}' is not a size in bytes (one decimal number, as the driver prints it); "
                                          "memory size unknown", escape_text(digits))});
    return std::nullopt;
  }
  // At most 16 digits are in range; longer ones are refused before they could overflow.
  uint64_t value = 0;
  if (digits.size() <= 16) value = std::stoull(digits);
  if (digits.size() > 16 || value > kMaxDeviceMemoryBytes) {
    findings.push_back({path, fmt::format("{} bytes is more than any device holds (limit {} bytes); "
                                          "memory size unknown", digits, kMaxDeviceMemoryBytes)});
    return std::nullopt;
  }
  return value;
}

uint64_t largest_memory_bar(const Function& f) {
  uint64_t largest = 0;
  for (const auto& b : f.bars)
    if (!b.io && b.size > largest) largest = b.size;
  return largest;
}

void read_amdgpu(const Sysroot& root, Function& f, std::vector<Finding>& findings) {
  const std::string total_path = f.sysfs_path + "/" + kAmdgpuVramTotal;
  const std::string visible_path = f.sysfs_path + "/" + kAmdgpuVisibleVramTotal;
  auto total = read_size(root, total_path, findings);
  auto visible = read_size(root, visible_path, findings);
  if (total) {
    f.memory_size = total;
    f.memory_size_source = total_path;
  }
  if (!visible) return;
  // The driver caps visible_vram_size at real_vram_size (gmc_v*_mc_init()); more is not amdgpu.
  if (total && *visible > *total) {
    findings.push_back({visible_path, fmt::format("{} CPU-visible bytes of VRAM exceed the {} bytes of {}; ignored",
                                                  *visible, *total, kAmdgpuVramTotal)});
    return;
  }
  f.memory_visible_size = visible;
  // A dGPU's visible VRAM is min(BAR 0, VRAM), lowered only by amdgpu.vis_vramlimit; amdgpu's large-BAR
  // test (visible == VRAM) then fails although the BAR would hold it all, which a BAR comparison misses.
  uint64_t bar = largest_memory_bar(f);
  if (total && *visible < *total && bar >= *total)
    findings.push_back({visible_path,
                        fmt::format("only {} of {} VRAM is CPU-visible although the largest BAR is {}: amdgpu's "
                                    "large-BAR test fails, so it refuses peers access to this device's VRAM "
                                    "(amdgpu.vis_vramlimit?)",
                                    memory_size_text(*visible), memory_size_text(*total), memory_size_text(bar))});
}

void read_i915(const Sysroot& root, Function& f, std::vector<Finding>& findings) {
  std::vector<std::string> with_lmem;
  for (const auto& card : drm_cards(root, f.sysfs_path)) {
    std::string path = f.sysfs_path + "/drm/" + card + "/" + kI915LmemTotal;
    if (root.exists(path)) with_lmem.push_back(path);
  }
  if (with_lmem.empty()) return;
  if (with_lmem.size() > 1) {
    findings.push_back({f.sysfs_path + "/drm", fmt::format("{} DRM cards publish {}, one device has one; "
                                                           "memory size unknown", with_lmem.size(), kI915LmemTotal)});
    return;
  }
  if (auto total = read_size(root, with_lmem.front(), findings)) {
    f.memory_size = total;
    f.memory_size_source = with_lmem.front();
  }
}

// The tile directories (tile0, tile1...) below a device directory.
std::vector<std::string> xe_tiles(const Sysroot& root, const std::string& dir) {
  static const std::regex kTile("tile[0-9]{1,2}");
  std::vector<std::string> tiles;
  for (const auto& name : root.list(dir))
    if (std::regex_match(name, kTile)) tiles.push_back(name);
  return tiles;
}

// The physical VRAM of every tile, summed: one LMEM BAR spans all tiles. It includes the memory
// xe reserves (stolen, GSM), so it is at least what peers could be given: a BAR this large covers
// all of it, and a smaller one is called short (the safe side) even where the usable part fits.
// A tile whose file is absent or unreadable leaves the whole size unknown.
void read_xe(const Sysroot& root, Function& f, std::vector<Finding>& findings) {
  const auto tiles = xe_tiles(root, f.sysfs_path);
  std::vector<std::string> paths;
  for (const auto& tile : tiles) paths.push_back(f.sysfs_path + "/" + tile + "/" + kXeTileVram);
  const size_t present = static_cast<size_t>(
      std::count_if(paths.begin(), paths.end(), [&](const std::string& p) { return root.exists(p); }));
  if (present == 0) return;  // mainline xe: nothing published
  if (present != paths.size()) {
    findings.push_back({f.sysfs_path, fmt::format("{} of {} tiles publish {}; memory size unknown", present, paths.size(),
                                                  kXeTileVram)});
    return;
  }
  uint64_t total = 0;
  for (const auto& path : paths) {
    auto size = read_size(root, path, findings);
    if (!size) return;
    total += *size;  // each at most 2^50, at most 100 tiles: no overflow
  }
  if (total > kMaxDeviceMemoryBytes) {
    findings.push_back({f.sysfs_path, fmt::format("the tiles' {} add up to more than any device holds; memory size "
                                                  "unknown", kXeTileVram)});
    return;
  }
  f.memory_size = total;
  f.memory_size_source = paths.size() == 1 ? paths.front() : f.sysfs_path + "/tile*/" + kXeTileVram;
}

}  // namespace

std::string memory_size_text(uint64_t bytes) {
  if (bytes && bytes % (uint64_t{1} << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes && bytes % (uint64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} bytes", bytes);
}

std::vector<std::string> vendor_memory_files(const Sysroot& root, const Function& f) {
  std::vector<std::string> out;
  if (f.driver == "amdgpu") {
    out.push_back(f.sysfs_path + "/" + kAmdgpuVramTotal);
    out.push_back(f.sysfs_path + "/" + kAmdgpuVisibleVramTotal);
  } else if (f.driver == "i915") {
    for (const auto& card : drm_cards(root, f.sysfs_path))
      out.push_back(f.sysfs_path + "/drm/" + card + "/" + kI915LmemTotal);
  } else if (f.driver == "xe") {
    for (const auto& tile : xe_tiles(root, f.sysfs_path)) out.push_back(f.sysfs_path + "/" + tile + "/" + kXeTileVram);
  }
  return out;
}

void read_vendor_memory(const Sysroot& root, Function& f, std::vector<Finding>& findings) {
  if (f.driver == "amdgpu") read_amdgpu(root, f, findings);
  else if (f.driver == "i915") read_i915(root, f, findings);
  else if (f.driver == "xe") read_xe(root, f, findings);
}

}  // namespace p2paudit
