// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/topology_reader.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <exception>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "p2paudit/config_space.h"
#include "p2paudit/drivers.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/platform.h"
#include "p2paudit/snapshot.h"
#include "p2paudit/vendor_memory.h"

namespace p2paudit {

namespace {

// The non-empty names between slashes (an istringstream per function cost more than its use).
std::vector<std::string_view> components(std::string_view path) {
  std::vector<std::string_view> out;
  for (size_t at = 0; at < path.size();) {
    size_t slash = std::min(path.find('/', at), path.size());
    if (slash > at) out.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  return out;
}

std::string basename_of(const std::string& link) { return link.substr(link.rfind('/') + 1); }

// A decimal sysfs attribute within [lo, hi]; anything else is reported, never read as a number.
std::optional<int> read_int(const Sysroot& root, const std::string& path, int lo, int hi, std::vector<Finding>& findings) {
  auto text = root.read_line(path);
  if (!text) return std::nullopt;
  std::string t = *text;
  while (!t.empty() && (t.back() == ' ' || t.back() == '\r')) t.pop_back();
  long long v = 0;
  bool ok = !t.empty() && t.size() <= 12;
  for (size_t k = 0; ok && k < t.size(); ++k) {
    if (k == 0 && t[k] == '-' && t.size() > 1) continue;
    ok = std::isdigit(static_cast<unsigned char>(t[k]));
    v = v * 10 + (t[k] - '0');
  }
  if (ok && t[0] == '-') v = -v;
  if (!ok || v < lo || v > hi) {
    findings.push_back({path, fmt::format("'{}' is not a number in {}..{}; ignored", escape_text(*text), lo, hi)});
    return std::nullopt;
  }
  return static_cast<int>(v);
}

// "pciDDDD:BB" (4 to 8 hex digits of domain, 2 of bus): a host bridge's directory below sys/devices.
bool is_host_bridge_name(std::string_view name) {
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  if (name.size() < 10 || name.size() > 14 || name.substr(0, 3) != "pci") return false;
  size_t colon = name.size() - 3;
  if (name[colon] != ':' || !hex(name[colon + 1]) || !hex(name[colon + 2])) return false;
  for (size_t k = 3; k < colon; ++k)
    if (!hex(name[k])) return false;
  return true;
}

// What place_in_sysfs() learns of a function before every function is known: its parent's and
// its PF's addresses, turned into indexes by link_in_sysfs().
struct SysfsPlace {
  std::optional<Bdf> parent;
  bool has_physfn = false;
  std::string physfn_link;
};

// The kernel's own view of where a function sits: its directory below sys/devices.
// `physfn`: the function's physfn link, read with its config space.
SysfsPlace place_in_sysfs(const Sysroot& root, Function& f, const std::optional<std::string>& physfn) {
  SysfsPlace place;
  std::string link = "sys/bus/pci/devices/" + f.bdf.str();
  auto real = root.resolve(link);
  if (!real) throw InputError(fmt::format("{}: {}: link does not lead to a device directory", root.origin(), link));
  f.sysfs_path = *real;
  auto parts = components(*real);
  for (size_t k = 0; k + 1 < parts.size(); ++k)
    if (is_host_bridge_name(parts[k])) f.host_bridge = parts[k];
  if (f.host_bridge.empty())
    throw InputError(fmt::format("{}: {}: no pciDDDD:BB host bridge above it", root.origin(), *real));
  if (parts.size() >= 2) place.parent = Bdf::parse(parts[parts.size() - 2]);
  if (physfn) {
    place.has_physfn = true;
    place.physfn_link = *physfn;
  }
  return place;
}

void link_in_sysfs(const std::map<Bdf, size_t>& index, std::vector<Function>& fns, size_t i, const SysfsPlace& place,
                   std::vector<Finding>& findings) {
  Function& f = fns[i];
  if (place.parent) {
    if (auto it = index.find(*place.parent); it != index.end()) f.parent = it->second;
    else findings.push_back({f.sysfs_path, fmt::format("parent {} is not a listed PCI function", place.parent->str())});
  }
  if (place.has_physfn) {
    f.is_virtfn = true;
    auto pf_bdf = Bdf::parse(basename_of(place.physfn_link));
    if (!pf_bdf || !index.count(*pf_bdf)) findings.push_back({f.sysfs_path + "/physfn", "points to no listed PCI function"});
    else if (index.at(*pf_bdf) == i) findings.push_back({f.sysfs_path + "/physfn", "points to the function itself; ignored"});
    else f.physfn = index.at(*pf_bdf);
  }
}

void read_sysfs_attributes(const Sysroot& root, Function& f, const TopologyReadScope& scope,
                           std::vector<Finding>& findings) {
  const std::string& dir = f.sysfs_path;
  const bool descriptive = scope.descriptive_attributes;
  // One buffer for every attribute's path ("DIR/" and then each name): a dozen reads a function
  // build no string of their own.
  std::string path = dir + '/';
  const size_t dir_bytes = path.size();
  auto in_dir = [&](std::string_view name) -> const std::string& {
    path.resize(dir_bytes);
    return path += name;
  };
  if (auto drv = root.read_link(in_dir("driver"))) f.driver = escape_bytes(basename_of(*drv));
  if (descriptive || f.driver.empty())  // a driverless function's module is looked up by its modalias
    if (auto m = root.read_line(in_dir("modalias"))) f.modalias = escape_bytes(*m);
  if (auto n = read_int(root, in_dir("numa_node"), -1, 4095, findings)) f.numa_node = *n;
  if (descriptive)
    if (auto c = root.read_line(in_dir("local_cpulist"))) f.local_cpulist = escape_bytes(*c);
  if (auto s = root.read_line(in_dir("current_link_speed"))) f.link.current_speed = escape_bytes(*s);
  if (auto s = root.read_line(in_dir("max_link_speed"))) f.link.max_speed = escape_bytes(*s);
  if (auto w = read_int(root, in_dir("current_link_width"), 0, 32, findings)) f.link.current_width = *w;
  if (auto w = read_int(root, in_dir("max_link_width"), 0, 32, findings)) f.link.max_width = *w;
  if (auto e = read_int(root, in_dir("enable"), 0, 65535, findings)) f.enabled = *e != 0;
  if (auto g = root.read_link(in_dir("iommu_group"))) {
    std::string name = basename_of(*g);
    if (!name.empty() && name.size() < 10 && std::all_of(name.begin(), name.end(), ::isdigit)) f.iommu_group = std::stoi(name);
    else findings.push_back({dir + "/iommu_group", fmt::format("'{}' is not an IOMMU group number", escape_text(name))});
    if (f.iommu_group && descriptive)
      if (auto t = root.read_lone_line(fmt::format("sys/kernel/iommu_groups/{}/type", *f.iommu_group)))
        f.iommu_group_type = *t;
  }
  f.has_p2pmem = root.exists(in_dir("p2pmem"));
}

// sysfs nests directories, so upstream links cannot loop on a real machine; a crafted tree can
// make two functions each other's parent, or a VF's physfn another VF. The kernel's upstream step
// (pci_upstream_bridge(): a VF takes its PF's parent) is checked for loops; every function on one
// is put on its root bus, with a finding naming the loop, so no walk spins and no device is lost.
void break_upstream_loops(Topology& t) {
  const size_t n = t.functions.size();
  for (auto& f : t.functions)
    if (f.physfn && t.functions[*f.physfn].is_virtfn) {
      t.findings.push_back({f.sysfs_path + "/physfn", fmt::format("points to {}, itself a VF; ignored",
                                                                  t.functions[*f.physfn].bdf.str())});
      f.physfn.reset();
    }
  auto owner = [&](size_t i) { return t.functions[i].physfn ? *t.functions[i].physfn : i; };  // whose parent counts
  std::vector<int> state(n, 0);  // 0 unseen, 1 on the current walk, 2 settled
  for (size_t start = 0; start < n; ++start) {
    std::vector<size_t> walk;
    std::optional<size_t> at = start;
    while (at && state[*at] == 0) {
      state[*at] = 1;
      walk.push_back(*at);
      at = t.functions[owner(*at)].parent;
    }
    if (at && state[*at] == 1) {
      std::vector<size_t> loop(std::find(walk.begin(), walk.end(), *at), walk.end());
      std::string names;
      for (size_t k : loop) names += t.functions[k].bdf.str() + " -> ";
      t.findings.push_back({t.functions[loop.front()].sysfs_path,
                            fmt::format("upstream links form a loop ({}{}); these functions are shown on their root bus",
                                        names, t.functions[loop.front()].bdf.str())});
      for (size_t k : loop) t.functions[owner(k)].parent.reset();
    }
    for (size_t k : walk) state[k] = 2;
  }
}

// Parents come from sysfs; a bridge whose bus range disagrees is reported, not silently trusted.
void cross_check_bus_ranges(Topology& t) {
  // The bridges whose range claims a bus, in function order; found once per bus that holds
  // root-bus functions (a few per host bridge), not once per such function.
  std::map<std::pair<uint32_t, uint8_t>, std::vector<size_t>> claims;
  auto claiming = [&](uint32_t domain, uint8_t bus) -> const std::vector<size_t>& {
    auto [it, added] = claims.try_emplace({domain, bus});
    if (added)
      for (size_t k = 0; k < t.functions.size(); ++k) {
        const Function& b = t.functions[k];
        if (b.is_bridge() && b.bdf.domain == domain && b.secondary_bus && b.subordinate_bus && *b.secondary_bus != 0 &&
            bus >= *b.secondary_bus && bus <= *b.subordinate_bus)
          it->second.push_back(k);
      }
    return it->second;
  };
  for (const auto& f : t.functions) {
    if (f.is_virtfn) continue;
    if (f.parent) {
      const Function& p = t.functions[*f.parent];
      if (p.secondary_bus && p.subordinate_bus && (f.bdf.bus < *p.secondary_bus || f.bdf.bus > *p.subordinate_bus))
        t.findings.push_back({f.sysfs_path, fmt::format("sysfs places {} below {}, whose bus range is {:02x}-{:02x}",
                                                        f.bdf.str(), p.bdf.str(), *p.secondary_bus, *p.subordinate_bus)});
      continue;
    }
    for (size_t k : claiming(f.bdf.domain, f.bdf.bus)) {
      const Function& b = t.functions[k];
      t.findings.push_back({f.sysfs_path, fmt::format("sysfs places {} on a root bus, but bridge {} claims buses {:02x}-{:02x}",
                                                      f.bdf.str(), b.bdf.str(), *b.secondary_bus, *b.subordinate_bus)});
    }
  }
}

std::vector<HostBridge> collect_host_bridges(const Sysroot& root, const std::vector<Function>& fns) {
  std::map<std::string, HostBridge> bridges;
  for (const auto& name : root.list("sys/devices"))
    if (is_host_bridge_name(name)) bridges[name].name = name;
  for (const auto& f : fns) bridges[f.host_bridge].name = f.host_bridge;
  // Each host bridge's root-bus functions (then its VFs), in function order: one pass over them all.
  std::map<std::string, std::pair<std::vector<size_t>, std::vector<size_t>>> on_root_bus;
  for (size_t i = 0; i < fns.size(); ++i)
    if (!fns[i].parent) {
      auto& [devices, vfs] = on_root_bus[fns[i].host_bridge];
      (fns[i].is_virtfn ? vfs : devices).push_back(i);
    }
  std::vector<HostBridge> out;
  for (auto& [name, hb] : bridges) {
    if (is_host_bridge_name(name)) {
      hb.domain = static_cast<uint32_t>(std::stoul(name.substr(3, name.size() - 6), nullptr, 16));
      hb.bus = static_cast<uint8_t>(std::stoul(name.substr(name.size() - 2), nullptr, 16));
    }
    // Boot-time scan adds root-bus devices in devfn order; VFs are added later, when enabled.
    auto& [devices, vfs] = on_root_bus[name];
    auto by_devfn = [&](size_t a, size_t b) { return fns[a].bdf < fns[b].bdf; };
    std::sort(devices.begin(), devices.end(), by_devfn);
    std::sort(vfs.begin(), vfs.end(), by_devfn);
    devices.insert(devices.end(), vfs.begin(), vfs.end());
    hb.root_bus_devices = std::move(devices);
    out.push_back(std::move(hb));
  }
  return out;
}

// A module's version is a short MODULE_VERSION() string ("24.10-1.1.4", "580.65.06") and its
// srcversion 24 hex digits; a longer one comes from a crafted snapshot: it is dropped (unknown)
// with a finding, so no rule, template or regex ever meets it.
constexpr size_t kMaxModuleVersion = 256;
constexpr size_t kMaxModuleSrcversion = 64;

void bound_module_strings(Topology& t) {
  std::set<std::string> reported;
  for (auto& f : t.functions) {
    for (auto [field, limit, what] : {std::tuple{&f.module.version, kMaxModuleVersion, "version"},
                                      std::tuple{&f.module.srcversion, kMaxModuleSrcversion, "srcversion"}}) {
      if (field->size() <= limit) continue;
      if (reported.insert(f.module.name + "/" + what).second)
        t.findings.push_back({"sys/module/" + escape_text(f.module.name) + "/" + what,
                              fmt::format("{} bytes, more than a module {} holds ({}); ignored", field->size(), what, limit)});
      field->clear();
    }
  }
}

void resolve_modules(const Sysroot& root, Topology& t, const std::optional<CaptureMetadata>& capture) {
  if (capture) {
    for (auto& f : t.functions)
      if (auto it = capture->modules.find(f.driver.empty() ? "modalias:" + f.modalias : f.driver);
          it != capture->modules.end())
        f.module = it->second;
    return;
  }
  ModuleResolver modules(root, t.platform.kernel_release);
  std::map<std::string, ModuleInfo> cache;
  for (auto& f : t.functions) {
    std::string key = f.driver.empty() ? "modalias:" + f.modalias : f.driver;
    auto it = cache.find(key);
    if (it == cache.end())
      it = cache.emplace(key, f.driver.empty() ? modules.for_modalias(f.modalias) : modules.for_driver(f.driver)).first;
    f.module = it->second;
  }
  // After the lookups: libkmod's child may stop answering during them.
  t.findings.insert(t.findings.end(), modules.findings().begin(), modules.findings().end());
}

}  // namespace

Topology read_topology(const Sysroot& root, const TopologyReadScope& scope) {
  if (root.list("sys/bus/pci/devices").empty())
    throw InputError(fmt::format("{}: no PCI devices: sys/bus/pci/devices is missing or empty", root.origin()));
  Topology t;
  auto capture = read_capture_metadata(root);
  t.platform = read_platform(root, t.findings);
  // Each function's directory is read in one go, right after its config space, while the
  // sysroot still has it open and listed. Findings and errors keep the order of the steps they
  // belong to: config space, then placement (first error thrown), then the sysfs attributes.
  std::vector<SysfsPlace> places;
  std::vector<Finding> attribute_findings;
  std::exception_ptr place_error, attribute_error;
  t.functions = read_config_space(root, t.findings, [&](Function& f, const std::optional<std::string>& physfn) {
    places.emplace_back();
    if (place_error) return;  // the first placement error ends the run: nothing more is needed
    try {
      places.back() = place_in_sysfs(root, f, physfn);
    } catch (const InputError&) {
      place_error = std::current_exception();
      return;
    }
    if (attribute_error) return;
    try {
      read_sysfs_attributes(root, f, scope, attribute_findings);
      read_vendor_memory(root, f, attribute_findings);
    } catch (const InputError&) {
      attribute_error = std::current_exception();
    }
  });
  if (scope.pci_names)
    for (auto& f : t.functions) fill_pci_names(f);  // after a VF's IDs were taken from sysfs
  else
    t.pci_names_deferred = true;
  if (capture)
    for (auto& f : t.functions)
      if (auto it = capture->config_sizes.find(f.bdf.str()); it != capture->config_sizes.end() && !f.config_size) {
        if (it->second == 256 || it->second == 4096) f.config_size = it->second;
        else t.findings.push_back({kCaptureMetadataPath, fmt::format("config size {} for {} is neither 256 nor 4096; ignored",
                                                                     it->second, f.bdf.str())});
      }
  if (place_error) std::rethrow_exception(place_error);

  std::map<Bdf, size_t> index;
  for (size_t i = 0; i < t.functions.size(); ++i) index[t.functions[i].bdf] = i;
  for (size_t i = 0; i < t.functions.size(); ++i) link_in_sysfs(index, t.functions, i, places[i], t.findings);
  break_upstream_loops(t);
  settle_config_sizes(t);
  if (attribute_error) std::rethrow_exception(attribute_error);
  t.findings.insert(t.findings.end(), attribute_findings.begin(), attribute_findings.end());
  for (size_t i = 0; i < t.functions.size(); ++i) {
    Function& f = t.functions[i];
    if (f.parent) t.functions[*f.parent].children.push_back(i);
    if (f.physfn) t.functions[*f.physfn].virtfns.push_back(i);
    // Cut short of what the kernel exposes, or of the standard header's capabilities.
    if (f.config_readable < 256 || (f.config_size > f.config_readable) || (f.is_pcie && f.acs.state == CapState::kUnknown))
      t.config_fully_readable = false;
  }
  t.host_bridges = collect_host_bridges(root, t.functions);
  // Without its config the kernel still shows whether it has P2PDMA: only pci_p2pdma_add_resource()
  // makes a function's p2pmem directory (drivers/pci/p2pdma.c), so one such directory settles it.
  if (t.platform.config_p2pdma == Known::kUnknown)
    for (const Function& f : t.functions)
      if (f.has_p2pmem) {
        t.platform.config_p2pdma = Known::kYes;
        t.platform.kernel_config_source = fmt::format("sys/bus/pci/devices/{}/p2pmem (no kernel config was read)", f.bdf.str());
        break;
      }
  cross_check_bus_ranges(t);
  resolve_modules(root, t, capture);
  bound_module_strings(t);
  return t;
}

}  // namespace p2paudit
