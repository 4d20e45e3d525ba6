// SPDX-License-Identifier: GPL-2.0-or-later
// How a user learns a fact the capture did not hold (facts.h how_to_learn()): what an uncertain
// decision tells its reader to do, next to the facts that would settle it.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "p2paudit/policy/facts.h"

namespace p2paudit::policy {

namespace {

// A device fact without its role ("provider.memory_size" -> "memory_size").
std::string_view device_part(std::string_view name) {
  for (std::string_view role : {"provider.", "client."})
    if (name.starts_with(role)) return name.substr(role.size());
  return {};
}

}  // namespace

std::vector<std::string> derived_from(std::string_view name) {
  for (std::string_view role : {"provider.", "client."}) {
    if (!name.starts_with(role)) continue;
    const std::string r(role);
    std::string_view device = name.substr(role.size());
    if (device == "bar_covers_memory") return {r + "largest_bar", r + "memory_size"};
    if (device == "bar_beyond_address_width") return {r + "bar_end", "platform.cpu_physical_address_bits"};
  }
  return {};
}

std::string how_to_learn(std::string_view name) {
  const FactSpec* spec = find_fact(name);
  const std::string vendor_file =
      spec && spec->source == FactSource::kVendor ? std::string(", or pass it as a vendor fact (--vendor-facts FILE)") : "";
  if (name.starts_with("vendor.copy_"))
    return "run `p2paudit probe --copy` on the machine (or capture with `p2paudit snapshot --probe --copy`)";
  if (name.starts_with("vendor.") || name.starts_with("runtime."))
    return fmt::format("run p2paudit on the machine with the drivers loaded (it asks NVML, CUDA, HIP and Level Zero), "
                       "or capture with `p2paudit snapshot --probe`{}", vendor_file);
  if (name == "kernel.config_p2pdma")
    return "a capture holding the kernel's config (/proc/config.gz or /boot/config-RELEASE: `p2paudit snapshot` "
           "keeps them)";
  if (name.starts_with("kernel.") || name.starts_with("path."))
    return "run p2paudit (or `p2paudit snapshot`) as root: without root the kernel shows only 64 bytes of each "
           "function's config space, so ACS and the capabilities behind it cannot be read";
  if (name.starts_with("iommu."))
    return "a capture holding /sys/kernel/iommu_groups and the kernel command line (`p2paudit snapshot` on the machine)";
  if (name.starts_with("platform."))
    return "a capture holding /proc/cpuinfo (`p2paudit snapshot` on the machine)";
  std::string_view device = device_part(name);
  if (device == "memory_size")
    return fmt::format("a capture with the GPU driver loaded (amdgpu, xe and i915 publish their memory size in sysfs){}",
                       vendor_file);
  if (device == "driver" || device == "module" || device == "module_version")
    return "a capture of the running machine (`p2paudit snapshot`: an lspci dump shows no drivers)";
  if (!device.empty())
    return "run p2paudit (or `p2paudit snapshot`) as root: the device's capabilities lie past the 64 bytes of config "
           "space an unprivileged reader sees";
  return fmt::format("a capture of the whole machine as root (`p2paudit snapshot`){}", vendor_file);
}

}  // namespace p2paudit::policy
