// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/topology_report.h"

#include <bit>

#include <fmt/format.h>

#include "p2paudit/acs_meaning.h"
#include "p2paudit/vendor_memory.h"

namespace p2paudit {

namespace {

std::string hex4(uint16_t v) { return fmt::format("{:04x}", v); }

nlohmann::ordered_json optional_json(const std::optional<size_t>& i, const Topology& t) {
  return i ? nlohmann::ordered_json(t.functions[*i].bdf.str()) : nlohmann::ordered_json(nullptr);
}

std::string short_bdf(const Function& f) {
  return f.bdf.domain ? f.bdf.str() : f.bdf.str().substr(5);
}

std::string function_line(const Function& f) {
  std::string name = f.device_name.empty() ? "Device" : f.device_name;
  std::string vendor = f.vendor_name.empty() ? "" : f.vendor_name + " ";
  std::string line = fmt::format("{} {}{} [{:04x}:{:04x}]", short_bdf(f), vendor, name, f.vendor, f.device);
  std::vector<std::string> notes;
  if (f.is_virtfn) notes.push_back("VF");
  if (f.pcie_type == PcieType::kUnknown) notes.push_back("port type unknown");
  else if (f.pcie_type != PcieType::kNotPcie && f.pcie_type != PcieType::kEndpoint) notes.push_back(to_string(f.pcie_type));
  if (f.link.current_width)
    notes.push_back(fmt::format("link {} x{}{}", f.link.current_speed, f.link.current_width,
                                (f.link.max_width && (f.link.current_width < f.link.max_width ||
                                                      f.link.current_speed != f.link.max_speed))
                                    ? fmt::format(" (max {} x{})", f.link.max_speed, f.link.max_width)
                                    : ""));
  notes.push_back(acs_line(f.acs));
  if (f.iommu_group) notes.push_back(fmt::format("group {}", *f.iommu_group));
  if (!f.driver.empty()) notes.push_back("driver " + f.driver);
  if (f.numa_node >= 0) notes.push_back(fmt::format("node {}", f.numa_node));
  if (f.memory_size) notes.push_back("memory " + memory_size_text(*f.memory_size));
  std::string joined;
  for (const auto& n : notes) joined += (joined.empty() ? "" : ", ") + n;
  return line + "  {" + joined + "}";
}

void draw(const Topology& t, size_t i, const std::string& prefix, bool last, std::string& out) {
  out += prefix + (last ? "└─ " : "├─ ") + function_line(t.functions[i]) + "\n";
  const auto& kids = t.functions[i].children;
  for (size_t k = 0; k < kids.size(); ++k) draw(t, kids[k], prefix + (last ? "   " : "│  "), k + 1 == kids.size(), out);
}

}  // namespace

std::string acs_summary(const Acs& acs) {
  switch (acs.state) {
    case CapState::kUnknown: return "ACS unknown";
    case CapState::kAbsent: return "no ACS";
    case CapState::kPresent: break;
  }
  auto bit = [&](uint16_t mask, const char* name) { return fmt::format("{}{}", name, acs.ctrl & mask ? '+' : '-'); };
  return fmt::format("ACS {} {} {}", bit(kAcsRr, "RR"), bit(kAcsCr, "CR"), bit(kAcsEc, "EC"));
}

nlohmann::ordered_json function_to_json(const Topology& t, const Function& f) {
  using json = nlohmann::ordered_json;
  json j;
  j["bdf"] = f.bdf.str();
  j["parent"] = optional_json(f.parent, t);
  j["host_bridge"] = f.host_bridge;
  j["sysfs_path"] = f.sysfs_path;
  j["vendor"] = hex4(f.vendor);
  j["device"] = hex4(f.device);
  j["subsystem_vendor"] = hex4(f.subsystem_vendor);
  j["subsystem_device"] = hex4(f.subsystem_device);
  j["class"] = fmt::format("{:06x}", f.class_code);
  j["revision"] = fmt::format("{:02x}", f.revision);
  j["vendor_name"] = f.vendor_name;
  j["device_name"] = f.device_name;
  j["class_name"] = f.class_name;
  j["header_type"] = f.header_type;
  j["multifunction"] = f.multifunction;
  j["is_virtfn"] = f.is_virtfn;
  j["physfn"] = optional_json(f.physfn, t);
  json vfs = json::array();
  for (size_t v : f.virtfns) vfs.push_back(t.functions[v].bdf.str());
  j["virtfns"] = vfs;
  j["pcie_type"] = f.pcie_type == PcieType::kUnknown ? json(nullptr) : json(to_string(f.pcie_type));
  j["config_size"] = f.config_size ? json(f.config_size) : json(nullptr);
  j["config_readable"] = f.config_readable;
  j["acs"] = to_string(f.acs.state);
  j["acs_ctrl"] = f.acs.state == CapState::kPresent ? json(f.acs.ctrl) : json(nullptr);
  j["acs_cap"] = f.acs.state == CapState::kPresent ? json(f.acs.cap) : json(nullptr);
  j["acs_offset"] = f.acs.state == CapState::kPresent ? json(f.acs.offset) : json(nullptr);
  add_acs_json(f.acs, j);
  j["ari"] = to_string(f.ari);
  j["sriov"] = f.sriov ? json{{"total_vfs", f.sriov->total_vfs}, {"num_vfs", f.sriov->num_vfs},
                              {"vf_device", hex4(f.sriov->vf_device)}}
                       : json(nullptr);
  j["resizable_bar"] = to_string(f.rebar_state);
  json rebar = json::array();
  for (const auto& r : f.rebar)
    rebar.push_back({{"bar", r.bar}, {"current_size", r.current_size}, {"supported_sizes", r.supported_sizes}});
  j["resizable_bars"] = rebar;
  j["nvidia_p2p_clique"] = f.nvidia_clique_state == CapState::kPresent ? json(f.nvidia_clique) : json(nullptr);
  j["nvidia_p2p_clique_cap"] = to_string(f.nvidia_clique_state);
  j["serial_number"] = f.serial_number ? json(fmt::format("{:016x}", *f.serial_number)) : json(nullptr);
  j["link"] = {{"current_speed", f.link.current_speed}, {"current_width", f.link.current_width},
               {"max_speed", f.link.max_speed}, {"max_width", f.link.max_width}};
  json bars = json::array();
  for (const auto& b : f.bars)
    bars.push_back({{"index", b.index}, {"start", b.start}, {"size", b.size}, {"io", b.io}, {"is_64bit", b.is_64bit},
                    {"prefetchable", b.prefetchable}, {"above_4g", b.start + b.size > (uint64_t{1} << 32)}});
  j["bars"] = bars;
  json windows = json::array();
  for (const auto& w : f.windows)
    windows.push_back({{"kind", w.kind}, {"base", w.base}, {"limit", w.limit}, {"is_64bit", w.is_64bit},
                       {"enabled", w.enabled}});
  j["bridge_windows"] = windows;
  j["secondary_bus"] = f.secondary_bus ? json(*f.secondary_bus) : json(nullptr);
  j["subordinate_bus"] = f.subordinate_bus ? json(*f.subordinate_bus) : json(nullptr);
  j["driver"] = f.driver.empty() ? json(nullptr) : json(f.driver);
  j["module"] = {{"name", f.module.name}, {"version", f.module.version}, {"srcversion", f.module.srcversion},
                 {"builtin", to_string(f.module.builtin)}, {"alias_matches", f.module.alias_matches}};
  j["modalias"] = f.modalias;
  j["numa_node"] = f.numa_node;
  j["local_cpulist"] = f.local_cpulist;
  j["iommu_group"] = f.iommu_group ? json(*f.iommu_group) : json(nullptr);
  j["iommu_group_type"] = f.iommu_group_type.empty() ? json(nullptr) : json(f.iommu_group_type);
  j["enabled"] = f.enabled;
  j["p2pmem"] = f.has_p2pmem;
  j["memory_size"] = f.memory_size ? json(*f.memory_size) : json(nullptr);
  j["memory_size_source"] = f.memory_size_source.empty() ? json(nullptr) : json(f.memory_size_source);
  j["memory_visible_size"] = f.memory_visible_size ? json(*f.memory_visible_size) : json(nullptr);
  return j;
}

nlohmann::ordered_json platform_to_json(const Platform& p) {
  using json = nlohmann::ordered_json;
  return {{"arch", p.arch},
          {"cpu_vendor", p.cpu_vendor},
          {"cpu_family", p.cpu_family ? json(*p.cpu_family) : json(nullptr)},
          {"cpu_model", p.cpu_model ? json(*p.cpu_model) : json(nullptr)},
          {"cpu_model_name", p.cpu_model_name},
          {"hypervisor", p.hypervisor},
          {"kernel_release", p.kernel_release},
          {"kernel_version", p.kernel_version},
          {"cmdline", p.cmdline},
          {"config_pci_p2pdma", to_string(p.config_p2pdma)},
          {"kernel_config_source", p.kernel_config_source.empty() ? json(nullptr) : json(p.kernel_config_source)},
          {"iommu_groups_present", p.iommu_groups_present},
          {"iommu_mode", p.iommu_mode},
          {"iommu_mode_source", p.iommu_mode_source.empty() ? json(nullptr) : json(p.iommu_mode_source)}};
}

nlohmann::ordered_json topology_to_json(const Topology& t) {
  using json = nlohmann::ordered_json;
  json j;
  j["schema_version"] = kTopologySchemaVersion;
  j["platform"] = platform_to_json(t.platform);
  j["config_fully_readable"] = t.config_fully_readable;
  // What each ACS bit does, once: the functions name the bits they implement and have set.
  j["acs_bits"] = acs_meanings_json();
  json hbs = json::array();
  for (const auto& hb : t.host_bridges) {
    json devs = json::array();
    for (size_t i : hb.root_bus_devices) devs.push_back(t.functions[i].bdf.str());
    hbs.push_back({{"name", hb.name}, {"domain", hb.domain}, {"bus", hb.bus}, {"root_bus_devices", devs}});
  }
  j["host_bridges"] = hbs;
  json fns = json::array();
  for (const auto& f : t.functions) fns.push_back(function_to_json(t, f));
  j["functions"] = fns;
  json findings = json::array();
  for (const auto& f : t.findings) findings.push_back({{"path", f.path}, {"message", f.message}});
  j["findings"] = findings;
  j["notes"] = json::array();
  if (auto note = privilege_note(t); !note.empty()) j["notes"].push_back(note);
  return j;
}

std::string privilege_note(const Topology& t) {
  if (t.config_fully_readable) return "";
  if (!t.lspci_dump.empty())
    return "the dump holds less than the whole config space of some functions (the findings name them): ACS and "
           "PCIe port types are unknown for them; rerun `sudo lspci -xxxx`";
  return "config space was only partly readable (unprivileged reads stop at 64 bytes; a copy may be cut short): ACS and PCIe port types "
         "are unknown; run as root, or analyse a snapshot captured as root";
}

std::string topology_tree_text(const Topology& t) {
  std::string out;
  for (const auto& hb : t.host_bridges) {
    std::string first;
    if (!hb.root_bus_devices.empty()) {
      const Function& r = t.functions[hb.root_bus_devices.front()];
      first = fmt::format("  (first device {} [{:04x}:{:04x}])", short_bdf(r), r.vendor, r.device);
    }
    out += fmt::format("{}{}\n", hb.name, first);
    const auto& devs = hb.root_bus_devices;
    for (size_t k = 0; k < devs.size(); ++k) draw(t, devs[k], "", k + 1 == devs.size(), out);
  }
  out += acs_legend(t);
  for (const auto& f : t.findings) out += fmt::format("note: {}: {}\n", f.path, f.message);
  if (auto note = privilege_note(t); !note.empty()) out += "note: " + note + "\n";
  return out;
}

std::string acs_legend(const Topology& t) {
  // Each bit's meaning once, with how many functions have it set: a machine of thousands of
  // ports says it in as many lines as one of two.
  size_t counts[16] = {};
  bool unknown = false;
  for (const auto& f : t.functions) {
    if (f.acs.state == CapState::kUnknown) unknown = true;
    if (f.acs.state != CapState::kPresent) continue;
    for (int b = 0; b < 16; ++b)
      if (f.acs.ctrl & (1u << b)) ++counts[b];
  }
  std::string out;
  for (const auto& m : acs_bit_meanings()) {
    int b = std::countr_zero(m.mask);
    if (!counts[b]) continue;
    if (out.empty())
      out = "ACS control bits set here, and what each does to a peer request (PCIe Base Specification 6.12; the "
            "kernel's P2PDMA reads RR, CR and EC only):\n";
    out += fmt::format("  {} ({}), set on {} function(s): {}; P2PDMA: {}\n", m.bit, m.name, counts[b], m.effect, m.p2pdma);
  }
  if (unknown)
    out += "  ACS unknown on some functions: which bits they have set cannot be read (the note below says why)\n";
  return out;
}

}  // namespace p2paudit
