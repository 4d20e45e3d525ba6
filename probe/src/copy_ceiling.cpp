// SPDX-License-Identifier: GPL-2.0-or-later
#include "copy_ceiling.h"

#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "p2paudit/path_ceiling.h"
#include "p2paudit/policy/device_knowledge.h"

namespace p2paudit::probe::detail {

namespace {

constexpr size_t kMaxRuntimes = 16, kMaxDevices = 1024, kMaxLinks = 64;

// Each NVML device's NVLinks, by its PCI address, as far as the document shows them in the shape
// the probe writes; the IDs it recorded must be the tree's function's, else it is left out.
std::map<Bdf, NvlinkEnd> nvml_links(const nlohmann::json& document, const Topology& topo) {
  std::map<Bdf, NvlinkEnd> out;
  const auto runtimes = document.find("runtimes");
  if (runtimes == document.end() || !runtimes->is_array()) return out;
  for (size_t r = 0; r < runtimes->size() && r < kMaxRuntimes; ++r) {
    const auto& rt = (*runtimes)[r];
    if (!rt.is_object() || rt.value("runtime", nlohmann::json()) != "nvml") continue;
    const auto devices = rt.find("devices");
    if (devices == rt.end() || !devices->is_array()) continue;
    for (size_t d = 0; d < devices->size() && d < kMaxDevices; ++d) {
      const auto& dev = (*devices)[d];
      if (!dev.is_object() || !dev.contains("bdf") || !dev["bdf"].is_string()) continue;
      auto bdf = Bdf::parse(dev["bdf"].get_ref<const std::string&>());
      const Function* f = bdf ? topo.find(*bdf) : nullptr;
      if (!f) continue;
      if (dev.contains("pci_device_id") &&
          dev["pci_device_id"] != nlohmann::json(fmt::format("{:04x}{:04x}", f->device, f->vendor)))
        continue;
      NvlinkEnd end;
      end.gpu = *bdf;
      if (dev.contains("nvlink") && dev["nvlink"].is_array() && dev["nvlink"].size() <= kMaxLinks) {
        end.links_read = true;
        for (const auto& link : dev["nvlink"]) {
          if (!link.is_object() || link.value("state", nlohmann::json()) != "active") continue;
          const auto remote = link.find("remote_bdf");
          end.active_remotes.push_back(remote != link.end() && remote->is_string() ? remote->get<std::string>() : "");
        }
      }
      out[*bdf] = std::move(end);
    }
  }
  return out;
}

// The table's per-link NVLink rate of the function's product, or why there is none.
void link_rate(const Function& f, NvlinkEnd& end) {
  const policy::DeviceRow* row = policy::device_knowledge()->find(f.vendor, f.device);
  if (row && row->nvlink_link_gbps) {
    end.link_gbps = row->nvlink_link_gbps;
    end.rate_source = fmt::format("{} ({}): {} GB/s a link (rules/devices)", row->product, row->chip, *row->nvlink_link_gbps);
  } else {
    end.rate_source = fmt::format("{:04x}:{:04x} has no nvlink_link_gbps in rules/devices", f.vendor, f.device);
  }
}

// Whether the device table says the function's product has no GPU fabric (NVLink, xGMI, Xe Link).
bool table_says_no_fabric(const Function& f) {
  const policy::DeviceRow* row = policy::device_knowledge()->find(f.vendor, f.device);
  return row && row->fabric == "none";
}

std::optional<bool> bool_fact(const policy::FactSet& f, const char* name) {
  const auto* v = f.get(name);
  return v ? std::optional<bool>(std::get<bool>(*v)) : std::nullopt;
}

double rounded(double v) { return std::round(v * 1000) / 1000; }

}  // namespace

void add_copy_ceilings(const nlohmann::json& document, const Topology& topo, policy::VendorFactsDocument& facts) {
  std::optional<std::map<Bdf, NvlinkEnd>> links;  // read at the first NVLink pair
  std::set<Bdf> gpus;
  for (auto& [key, f] : facts.pairs) {
    if (!f.known("vendor.copy_result")) continue;
    const auto provider = topo.index_of(key.first), client = topo.index_of(key.second);
    if (!provider || !client || *provider == *client) continue;
    const Function &p = topo.functions[*provider], &c = topo.functions[*client];
    const std::optional<bool> nvlink = bool_fact(f, "vendor.nvlink"), xgmi = bool_fact(f, "vendor.xgmi");
    PathCeiling ceiling;
    if (nvlink == true) {
      if (!links) {
        links = nvml_links(document, topo);
        for (const auto& [bdf, end] : *links) gpus.insert(bdf);
      }
      auto a = links->find(key.first), b = links->find(key.second);
      const auto end_of = [&](auto it, const Bdf& gpu) {
        if (it != links->end()) return it->second;
        NvlinkEnd unlisted;  // NVML did not list this GPU: its links are unknown
        unlisted.gpu = gpu;
        return unlisted;
      };
      NvlinkEnd ea = end_of(a, key.first), eb = end_of(b, key.second);
      link_rate(p, ea);
      link_rate(c, eb);
      ceiling = nvlink_path_ceiling(ea, eb, gpus);
    } else if (xgmi == true) {
      ceiling.missing = "the xGMI link rate between them (HIP does not report it)";
    } else if (nvlink == false || xgmi == false || (table_says_no_fabric(p) && table_says_no_fabric(c))) {
      ceiling = pcie_path_ceiling(topo, *provider, *client);
    } else {
      ceiling.missing = fmt::format("whether a GPU fabric (NVLink, xGMI, Xe Link) joins {} and {}: no runtime said, and "
                                    "rules/devices does not say both have none",
                                    key.first.str(), key.second.str());
    }
    // vendor.copy_ceiling: the ceiling in words, for a reason that names it known or not.
    if (ceiling.gbps && *ceiling.gbps > 0) {
      f.set("vendor.copy_ceiling_gbps", rounded(*ceiling.gbps));
      f.set("vendor.copy_ceiling_path", ceiling.path);
      std::string words = fmt::format("the path's ceiling is {} GB/s ({})", rounded(*ceiling.gbps), ceiling.path);
      if (const auto* gbps = f.get("vendor.copy_gbps")) {
        const double ratio = *ceiling_ratio(std::get<double>(*gbps), ceiling.gbps);
        f.set("vendor.copy_ceiling_ratio", ratio);
        words = fmt::format("{:.0f}% of the path's {} GB/s ({})", ratio * 100, rounded(*ceiling.gbps), ceiling.path);
      }
      f.set("vendor.copy_ceiling", words);
    } else if (!ceiling.missing.empty()) {
      f.set("vendor.copy_ceiling_missing", ceiling.missing);
      f.set("vendor.copy_ceiling", "the path's ceiling is unknown: " + ceiling.missing);
    }
  }
}

}  // namespace p2paudit::probe::detail
