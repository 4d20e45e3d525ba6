// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/policy/pair_facts.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <span>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "p2paudit/device_class.h"
#include "p2paudit/errors.h"
#include "p2paudit/policy/device_knowledge.h"
#include "p2paudit/runtime_versions.h"

namespace p2paudit::policy {

namespace {

// "16.0 GT/s PCIe" -> 16.0; nullopt for "Unknown" or an empty attribute.
std::optional<double> gts(const std::string& speed) {
  // std::stod's own test (strtod, no digits or out of range: no number) without its exception:
  // a function without a link (most of a large machine) threw one each.
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(speed.c_str(), &end);
  if (end == speed.c_str() || errno == ERANGE || !(v > 0)) return std::nullopt;
  return v;
}

// The pair facts set for every pair, by id: looking names up costs more than the rest.
struct PairFactIds {
  FactId narrowest_link_speed_gts = id("path.narrowest_link_speed_gts");
  FactId narrowest_link_width = id("path.narrowest_link_width");
  FactId degraded_link = id("path.degraded_link");
  FactId relation = id("path.relation"), same_model = id("path.same_model"), same_numa_node = id("path.same_numa_node");
  FactId bridges_64bit_prefetch = id("path.bridges_64bit_prefetch"), authority = id("vendor.authority");
  FactId map_type = id("kernel.map_type"), distance = id("kernel.distance"), p2pdma_distance = id("kernel.p2pdma_distance");
  FactId allowed = id("kernel.allowed"), acs_redirect = id("kernel.acs_redirect");
  FactId acs_redirect_devices = id("kernel.acs_redirect_devices"), host_bridge = id("kernel.host_bridge");
  FactId whitelist = id("kernel.whitelist"), whitelist_assumed = id("kernel.whitelist_assumed");
  FactId cpu_rule = id("kernel.cpu_rule");
  FactId nccl_path_class = id("vendor.nccl_path_class"), nccl_gdr_default = id("vendor.nccl_gdr_default");
  FactId same_chip = id("path.same_chip"), nvlink = id("vendor.nvlink"), xgmi = id("vendor.xgmi");

  static FactId id(std::string_view name) {
    auto found = fact_id(name);
    if (!found) throw std::logic_error(fmt::format("fact {} is not catalogued", name));
    return *found;
  }
};

const PairFactIds& ids() {
  static const PairFactIds instance;
  return instance;
}

// What the device table knows of the device's ID; a value its row leaves out stays unknown, and so
// does every value of an ID it does not hold. Memory read from the driver's sysfs comes first (and a
// vendor facts file, laid over these facts, over both).
void set_device_table_facts(const Function& f, const std::string& prefix, FactSet& facts) {
  const std::shared_ptr<const DeviceKnowledge> table = device_knowledge();
  const DeviceRow* row = table->find(f.vendor, f.device);
  if (!row) return;
  facts.set(prefix + "product", row->product);
  if (!row->product_line.empty()) facts.set(prefix + "product_line", row->product_line);
  if (!row->chip.empty()) facts.set(prefix + "chip", row->chip);
  if (!row->fabric.empty()) facts.set(prefix + "fabric", row->fabric);
  if (!row->driver_pcie_peer.empty()) facts.set(prefix + "driver_pcie_peer", row->driver_pcie_peer);
  if (row->vm_clique_documented) facts.set(prefix + "vm_clique_documented", *row->vm_clique_documented);
  if (row->memory_size && !f.memory_size) facts.set(prefix + "memory_size", *row->memory_size);
}

void set_device_facts(const Function& f, const std::string& prefix, FactSet& facts) {
  facts.set(prefix + "bdf", f.bdf.str());
  facts.set(prefix + "class", std::string(device_class_name(classify_device(f))));
  facts.set(prefix + "vendor", fmt::format("{:04x}", f.vendor));
  facts.set(prefix + "device", fmt::format("{:04x}", f.device));
  if (!f.driver.empty()) facts.set(prefix + "driver", f.driver);
  if (!f.module.name.empty()) facts.set(prefix + "module", f.module.name);
  if (!f.module.version.empty()) facts.set(prefix + "module_version", f.module.version);
  const Bar* largest = nullptr;
  bool unassigned = false;
  for (const auto& b : f.bars) {
    if (b.io) continue;
    if (!largest || b.size > largest->size) largest = &b;
    unassigned |= b.size > 0 && b.start == 0;
  }
  if (f.config_readable >= 64) facts.set(prefix + "bar_unassigned", unassigned);
  // A device without an addressed memory BAR has nothing above 4 GiB, 32 TiB or the CPU's width:
  // those facts are false, not unknown (a BAR without an address is bar_unassigned's business).
  const bool no_addressed_bar = f.config_readable >= 64 && (!largest || largest->start == 0);
  if (no_addressed_bar) {
    facts.set(prefix + "bar_above_4g", false);
    facts.set(prefix + "bar_above_32t", false);
    facts.set(prefix + "bar_beyond_address_width", false);
  }
  if (largest) {
    facts.set(prefix + "largest_bar", static_cast<int64_t>(largest->size));
    facts.set(prefix + "bar_above_4g", largest->start >= (uint64_t{1} << 32));
    // The BAR's end, for the address limits (derive_facts() compares it with the CPU's width). A
    // start and size that overflow 64 bits are no address a bridge can decode: left unknown.
    if (largest->start != 0 && largest->size > 0 && largest->start <= INT64_MAX - largest->size) {
      uint64_t end = largest->start + largest->size;
      facts.set(prefix + "bar_end", static_cast<int64_t>(end));
      facts.set(prefix + "bar_above_32t", end > (uint64_t{1} << 45));
      // Every CPU addresses 32 bits: a BAR that ends by 4 GiB is within any width, known or not
      // (derive_facts() compares the others with platform.cpu_physical_address_bits).
      if (end <= (uint64_t{1} << 32)) facts.set(prefix + "bar_beyond_address_width", false);
    }
  } else if (f.config_readable >= 64) {
    facts.set(prefix + "largest_bar", int64_t{0});
  }
  // The memory its driver publishes in sysfs (amdgpu, i915 backport); derive_facts() compares it
  // with largest_bar, and a vendor facts file laid over these facts may still replace it. When all
  // of amdgpu's VRAM is CPU-visible through an aperture larger than every BAR (an APU's carve-out
  // in system memory, or memory connected to the CPU: gmc_v*_mc_init() sets aper_size to the VRAM
  // size there), no BAR limits peers, so the comparison would be wrong: the fact stays unknown.
  if (f.memory_size) {
    bool aperture_is_no_bar = f.memory_visible_size && *f.memory_visible_size == *f.memory_size && largest &&
                              largest->size < *f.memory_visible_size;
    if (!aperture_is_no_bar) facts.set(prefix + "memory_size", static_cast<int64_t>(*f.memory_size));
  }
  // Device memory that a driver wants mapped whole is a GPU's, an accelerator's or an FPGA's.
  // What any other device offers peers (an NVMe CMB or PMR, a NIC's memory) is by definition a
  // region of one of its BARs, so its BAR covers it; derive_facts() still compares a memory_size
  // that a vendor facts file gives.
  const DeviceClass kind = classify_device(f);
  if (kind != DeviceClass::kGpu && kind != DeviceClass::kAccelerator && kind != DeviceClass::kFpga)
    facts.set(prefix + "bar_covers_memory", true);
  // No Resizable BAR capability, read where it would be (extended config space, or a function the
  // kernel gives 256 bytes): no BAR was resized, so none lacks room, and each BAR is at the only,
  // so largest, size it has (the warning about a BAR below its largest size stays false). Where
  // the extended space was not readable (unprivileged: 64 bytes) the state stays unknown.
  if (f.rebar_state == CapState::kAbsent) {
    facts.set(prefix + "rebar_no_room", false);
    facts.set(prefix + "rebar_at_max", true);
  }
  if (f.rebar_state == CapState::kPresent) {
    bool no_room = false;
    for (const auto& r : f.rebar)
      for (const auto& b : f.bars)
        no_room |= b.index == r.bar && b.size < r.current_size;
    facts.set(prefix + "rebar_no_room", no_room);
  }
  if (f.rebar_state == CapState::kPresent && !f.rebar.empty()) {
    const ResizableBar* r = &f.rebar.front();
    for (const auto& e : f.rebar)
      if (e.current_size > r->current_size) r = &e;
    facts.set(prefix + "rebar_current", static_cast<int64_t>(r->current_size));
    if (!r->supported_sizes.empty()) {
      uint64_t max = *std::max_element(r->supported_sizes.begin(), r->supported_sizes.end());
      facts.set(prefix + "rebar_max", static_cast<int64_t>(max));
      facts.set(prefix + "rebar_at_max", r->current_size >= max);
    }
  }
}

// Whether the bridges that must route a peer request down to the provider's BAR all have an
// enabled 64-bit prefetchable window: what a BAR above 4 GiB needs to be reached at all. A bridge
// forwards downstream only what its windows claim; upstream it forwards whatever they do not
// claim, so the client's side of the path needs no window. Directly, the request turns at the
// common upstream bridge (on its secondary bus), so only the provider's bridges below it count.
// Through the host bridge (no common upstream bridge, or an ACS-redirecting bridge on the path
// sends it up to the root complex) the provider's whole chain up to its root port counts.
std::optional<bool> bridges_64bit_prefetch(const PairFactsContext& context, size_t provider, size_t client,
                                           const PairOutcome& o) {
  const P2pdmaIndex& index = context.index;
  // false as soon as one bridge is known to lack the window; nullopt when one is not readable.
  auto windows = [&](bool up_to_root) -> std::optional<bool> {
    if (!up_to_root && o.common_ancestor == provider) return true;  // the client sits below it
    bool unknown = false;
    size_t steps = 0;
    for (auto dev = index.upstream(provider); dev; dev = index.upstream(*dev)) {
      if (!up_to_root && dev == o.common_ancestor) break;
      if (++steps > index.topology().functions.size()) break;  // no cycle in a malformed tree
      if (*dev == client) continue;  // the client itself forwards nothing for itself
      if (context.bridge_prefetch_64bit[*dev] == 0) return false;
      unknown |= context.bridge_prefetch_64bit[*dev] == -1;  // header not readable
    }
    if (unknown) return std::nullopt;
    return true;
  };
  if (provider == client) return true;  // the request never leaves the device
  if (!o.common_ancestor || o.acs_redirecting > 0) return windows(true);
  if (o.acs_unreadable == 0) return windows(false);
  // ACS not readable on the path: either route may be taken; a fact only where both agree.
  auto direct = windows(false), via_host = windows(true);
  if (direct == via_host) return direct;
  return std::nullopt;
}

// NVIDIA's clFindCommonDownstreamBR() allow-list (docs: vendor-p2p-gates.md §1.5).
bool nvidia_recognised_switch(const Function& f) {
  switch (f.vendor) {
    case 0x10de: return (f.device >> 4) == (0x05b0 >> 4) || f.device == 0x01b3;  // BR04, BR03
    case 0x10b5: return (f.device & 0xff00) == 0x8700 || (f.device & 0xff00) == 0x9700;  // PLX
    case 0x11f8: return (f.device & 0xff00) == 0x8500 || (f.device & 0xff00) == 0x4000;  // PMC-Sierra
    case 0x15b3: return f.device == 0x1976;  // Mellanox CX6 bridge
    default: return false;
  }
}

// The open driver's walk: each GPU's own port must be a recognised switch port; then a recognised
// switch level (by bus number) above both. The GSP firmware's chipset rule is not predictable.
bool nvidia_common_switch(const Topology& t, size_t provider, size_t client) {
  auto below_recognised_port = [&](size_t gpu) {
    const Function& g = t.functions[gpu];
    return g.parent && nvidia_recognised_switch(t.functions[*g.parent]);
  };
  if (!below_recognised_port(provider) || !below_recognised_port(client)) return false;
  // Some recognised switch above the provider's port on the same bus as one above the client's:
  // two walks rather than two lists, so that a pair allocates nothing.
  for (auto a = t.functions[*t.functions[provider].parent].parent; a; a = t.functions[*a].parent) {
    const Function& above_provider = t.functions[*a];
    if (!nvidia_recognised_switch(above_provider)) continue;
    for (auto b = t.functions[*t.functions[client].parent].parent; b; b = t.functions[*b].parent) {
      const Function& above_client = t.functions[*b];
      if (nvidia_recognised_switch(above_client) && above_client.bdf.domain == above_provider.bdf.domain &&
          above_client.bdf.bus == above_provider.bdf.bus)
        return true;
    }
  }
  return false;
}

constexpr const char* kRelations[] = {"same_function", "same_device", "same_root_port", "same_switch",
                                     "same_host_bridge", "different_host_bridges"};
constexpr const char* kAuthorities[] = {"nvidia", "amdgpu", "xe", "xrt", "unknown", "kernel", "nvidia_third_party"};
constexpr uint8_t kThirdParty = 7;  // 1 + index of "nvidia_third_party"

uint8_t tri(bool v) { return v ? 2 : 1; }

// path.relation, as 1 + index into kRelations.
uint8_t relation(const PairFactsContext& context, size_t provider, size_t client, const PairOutcome& o) {
  const Topology& t = context.index.topology();
  const Function& p = t.functions[provider];
  const Function& c = t.functions[client];
  if (provider == client) return 1;
  if (p.bdf.domain == c.bdf.domain && p.bdf.bus == c.bdf.bus && p.bdf.dev == c.bdf.dev) return 2;
  if (o.common_ancestor) {
    PcieType type = t.functions[*o.common_ancestor].pcie_type;
    return type == PcieType::kRootPort ? 3 : 4;
  }
  return context.host_bridge_id[provider] == context.host_bridge_id[client] ? 5 : 6;
}

// Whose peer logic governs this pair: GPU pairs on vendor drivers with their own peer code; as 1 +
// index into kAuthorities.
uint8_t authority(const PairFactsContext& context, size_t provider, size_t client) {
  using K = PairFactsContext::DriverKind;
  const K p = static_cast<K>(context.driver_kind[context.driver_id[provider]]);
  const K c = static_cast<K>(context.driver_kind[context.driver_id[client]]);
  if (p == c && p == K::kNvidia) return 1;
  if (p == c && p == K::kAmdgpu) return 2;
  if (p == c && p == K::kXe) return 3;
  if (p == K::kXrt && c == K::kXrt) return 4;  // xocl and xclmgmt alike
  if (p == K::kUnbound || c == K::kUnbound) return 5;
  return 6;
}

// The path's narrowest link and whether one runs below its maximum, over every device the traffic
// crosses: both chains up to and including the common ancestor, or up to the root bus when there
// is none. Minimum and "any" do not care how often a device is visited, so the chains are walked
// as they are (bounded: a malformed tree may loop).
void link_values(const PairFactsContext& context, size_t provider, size_t client, const PairOutcome& o,
                 PairFactValues& v) {
  const P2pdmaIndex& index = context.index;
  const size_t limit = index.topology().functions.size();
  double narrowest_speed = 0;
  int narrowest_width = 0;
  bool degraded = false, any_link = false;
  for (size_t start : {provider, client}) {
    size_t steps = 0;
    for (std::optional<size_t> dev = start; dev; dev = index.upstream(*dev)) {
      const PairFactsContext::Link& l = context.links[*dev];
      if (l.present) {
        narrowest_speed = any_link ? std::min(narrowest_speed, l.speed) : l.speed;
        narrowest_width = any_link ? std::min(narrowest_width, l.width) : l.width;
        degraded |= l.degraded;
        any_link = true;
      }
      if (dev == o.common_ancestor || ++steps > limit) break;
    }
  }
  if (!any_link) return;
  v.has_link = 1;
  v.narrowest_link_speed_bits = std::bit_cast<uint64_t>(narrowest_speed);
  v.narrowest_link_width = narrowest_width;
  v.degraded_link = degraded;
}

void kernel_values(const PairFactsContext& context, const PairOutcome& o, PairFactValues& v) {
  const Topology& t = context.index.topology();
  const KernelRules& rules = context.index.rules();
  v.map_type = static_cast<uint8_t>(o.map_type);
  v.distance = o.distance;
  if (o.p2pdma_distance) v.has_p2pdma_distance = 1, v.p2pdma_distance = *o.p2pdma_distance;
  v.has_common_ancestor = o.common_ancestor.has_value();
  if (!o.common_ancestor) v.acs_redirect = tri(false);  // no common upstream bridge: the kernel does not look
  else if (o.acs_redirecting > 0 || o.acs_unreadable == 0) v.acs_redirect = tri(o.acs_redirecting > 0);
  const auto checks = std::span(o.whitelist_checks, o.whitelist_check_count);
  // whitelist_assumed is the tool's own option, so it is always known: false unless an entry added
  // for this run (--assume-whitelisted, --kernel-rules) is what let the pair through. It stays
  // unknown only where such an entry exists and the whitelist's answer for the pair is unknown.
  const bool entries_added = rules.whitelist.size() > rules.table_entries;
  v.whitelist_assumed = tri(false);
  if (checks.empty() && o.map_type == MapType::kUnknown && entries_added) v.whitelist_assumed = 0;
  if (!checks.empty()) {
    const bool one_failed = std::any_of(checks.begin(), checks.end(), [](const auto& h) { return h.passed == false; });
    if (!one_failed && entries_added) v.whitelist_assumed = 0;  // decided below when every check is known
    if (const auto& root = checks.front().root_device) {
      const Function& r = t.functions[*root];
      v.has_host_bridge = 1;
      v.host_bridge = uint32_t{r.vendor} << 16 | r.device;
    }
    if (std::all_of(checks.begin(), checks.end(), [](const auto& h) { return h.passed.has_value(); })) {
      bool passed = std::all_of(checks.begin(), checks.end(), [](const auto& h) { return *h.passed; });
      v.whitelist = passed ? 1 : 2;
      if (passed)
        v.whitelist_assumed = tri(std::any_of(checks.begin(), checks.end(), [&](const auto& h) {
          return h.entry && *h.entry >= rules.table_entries;
        }));
    }
  }
  auto cpu = o.cpu_rule_consulted ? context.cpu_rule : std::nullopt;
  if (checks.empty() && (o.map_type == MapType::kBusAddr || cpu.value_or(false))) v.whitelist = 3;
  if (cpu) v.cpu_rule = tri(*cpu);
}

// The device table's per-function values for the pair facts, read once per machine: each chip as
// a small number, and which products are known to have no peer fabric.
void device_table_values(const Topology& t, PairFactsContext& context) {
  const std::shared_ptr<const DeviceKnowledge> table = device_knowledge();
  std::vector<std::string_view> chips = {""};
  for (const Function& f : t.functions) {
    const DeviceRow* row = table->find(f.vendor, f.device);
    uint32_t chip = 0;
    if (row && !row->chip.empty()) {
      auto known = std::find(chips.begin(), chips.end(), std::string_view(row->chip));
      chip = static_cast<uint32_t>(known - chips.begin());
      if (known == chips.end()) chips.push_back(row->chip);
    }
    context.chip_id.push_back(chip);
    context.no_fabric.push_back(row && row->fabric == "none");
  }
}

// path.same_chip, and vendor.nvlink (vendor.xgmi) false for a pair of NVIDIA (AMD) GPUs one of whose
// products has no such link: what the pair's two rows say, computed from the context alone.
void device_table_pair_values(const PairFactsContext& context, size_t provider, size_t client, PairFactValues& v) {
  if (context.chip_id[provider] && context.chip_id[client])
    v.same_chip = tri(context.chip_id[provider] == context.chip_id[client]);
  if (provider == client || !(context.no_fabric[provider] || context.no_fabric[client])) return;
  const Topology& t = context.index.topology();
  const uint16_t vendor = t.functions[provider].vendor;
  auto gpu = [&](size_t f) {
    return context.device_class[f] == DeviceClass::kGpu || context.device_class[f] == DeviceClass::kAccelerator;
  };
  if (vendor != t.functions[client].vendor || !gpu(provider) || !gpu(client)) return;
  if (vendor == 0x10de) v.no_fabric_link = 1;
  else if (vendor == 0x1002) v.no_fabric_link = 2;
}

}  // namespace

FactSet machine_facts(const Topology& t, const KernelRules& rules) {
  FactSet facts;
  if (rules.config_p2pdma != Known::kUnknown) facts.set("kernel.config_p2pdma", rules.config_p2pdma == Known::kYes);
  facts.set("kernel.release", rules.release.text);
  // No copy test is in the evidence until a probe's results (or a facts file) say otherwise.
  facts.set("vendor.copy_result", std::string("not_run"));
  facts.set("vendor.copy_verified", false);
  for (const char* path : {"vendor.kernel_store_result", "vendor.kernel_load_result", "vendor.atomic_result"})
    facts.set(path, std::string("not_run"));
  facts.set("vendor.peer_paths_failed", std::vector<std::string>{});
  const std::string& mode = t.platform.iommu_mode;
  if (mode == "off" || mode == "passthrough" || mode == "translated") facts.set("iommu.mode", mode);
  if (!t.platform.iommu_mode_source.empty()) facts.set("iommu.mode_source", t.platform.iommu_mode_source);
  facts.set("platform.vm_guest", t.platform.hypervisor);
  if (!t.platform.cpu_vendor.empty()) facts.set("platform.cpu_vendor", t.platform.cpu_vendor);
  if (t.platform.cpu_family) facts.set("platform.cpu_family", int64_t{*t.platform.cpu_family});
  if (t.platform.cpu_model) facts.set("platform.cpu_model", int64_t{*t.platform.cpu_model});
  if (t.platform.cpu_physical_address_bits)
    facts.set("platform.cpu_physical_address_bits", int64_t{*t.platform.cpu_physical_address_bits});
  if (t.platform.arch == "x86" && t.platform.cpu_family)
    facts.set("platform.amd_zen", t.platform.cpu_vendor == "AuthenticAMD" && *t.platform.cpu_family >= 0x17);
  else if (!t.platform.arch.empty())
    facts.set("platform.amd_zen", false);
  set_nvidia_third_party_machine_facts(t, facts);
  // Versions the sysroot states, already checked to be short version strings (runtime_versions.h);
  // the runtimes' answers, laid over these, may add those it lacks.
  // A capture without those files (an older snapshot) may still state the module's version
  // through a device bound to it (Function::module, from sys/module or the capture record).
  const RuntimeVersions& v = t.platform.versions;
  auto bound_module_version = [&](std::string_view module) {
    for (const Function& f : t.functions)
      if (f.module.name == module && is_version_text(f.module.version)) return f.module.version;
    return std::string();
  };
  const std::string nvidia = !v.nvidia_driver.empty() ? v.nvidia_driver : bound_module_version("nvidia");
  if (!nvidia.empty()) {
    facts.set("runtime.nvidia_driver_version", nvidia);
    if (auto major = version_major(nvidia)) facts.set("runtime.nvidia_driver_major", *major);
  }
  const std::string amdgpu = !v.amdgpu_module.empty() ? v.amdgpu_module : bound_module_version("amdgpu");
  if (!amdgpu.empty()) facts.set("runtime.amdgpu_module_version", amdgpu);
  if (!v.rocm.empty()) facts.set("runtime.rocm_version", v.rocm);
  return facts;
}

FactSet device_facts(const Function& f, bool as_provider, bool drivers_read) {
  FactSet facts;
  const std::string prefix = as_provider ? "provider." : "client.";
  set_device_facts(f, prefix, facts);
  // A capture of sysfs shows an unbound function as such: its driver is known to be none.
  if (drivers_read && f.driver.empty()) facts.set(prefix + "driver", std::string(kNoDriver));
  set_device_table_facts(f, prefix, facts);
  return facts;
}

PairFactsContext::PairFactsContext(const P2pdmaIndex& index)
    : index(index), nvidia_machine(nvidia_grdma_machine(index.topology())) {
  ids();  // made on this thread, before pair_fact_values() may run on two (decide_all_pairs())
  const Topology& t = index.topology();
  std::vector<std::string_view> drivers = {""}, host_bridges;
  for (const Function& f : t.functions) {
    const std::optional<double> current = gts(f.link.current_speed), max = gts(f.link.max_speed);
    const int width = f.link.current_width, max_width = f.link.max_width;
    Link& link = links.emplace_back();
    if (current && width) {
      link = {true, (max && *current < *max) || (max_width && width < max_width), *current, width};
    }
    int8_t prefetch = 1;
    if (f.is_bridge() && f.windows.empty()) prefetch = -1;
    for (const auto& w : f.windows)
      if (f.is_bridge() && w.kind == "prefetch" && !(w.enabled && w.is_64bit)) prefetch = 0;
    bridge_prefetch_64bit.push_back(prefetch);
    auto known = std::find(drivers.begin(), drivers.end(), std::string_view(f.driver));
    driver_id.push_back(static_cast<uint32_t>(known - drivers.begin()));
    if (known == drivers.end()) drivers.push_back(f.driver);
    auto bridge = std::find(host_bridges.begin(), host_bridges.end(), std::string_view(f.host_bridge));
    host_bridge_id.push_back(static_cast<uint32_t>(bridge - host_bridges.begin()));
    if (bridge == host_bridges.end()) host_bridges.push_back(f.host_bridge);
  }
  for (const Function& f : t.functions) device_class.push_back(classify_device(f));
  nvidia_passthrough.assign(t.functions.size(), 0);
  for (size_t i = 0; i < t.functions.size(); ++i)
    if (t.functions[i].driver == "nvidia") {
      auto pass = policy::nvidia_passthrough(t, i);
      nvidia_passthrough[i] = pass ? (*pass ? 1 : 0) : -1;
    }
  device_table_values(t, *this);
  for (std::string_view d : drivers)
    driver_kind.push_back(d.empty() ? kUnbound : d == "nvidia" ? kNvidia : d == "amdgpu" ? kAmdgpu : d == "xe" ? kXe
                          : d == "xocl" || d == "xclmgmt" ? kXrt : kOtherDriver);
  // The topmost ancestor of each function's parent, from the functions above it (memoised walk).
  const size_t n = t.functions.size();
  std::vector<uint32_t> top(n, kNoParent);  // of the function itself, inclusive; kNoParent: not yet
  std::vector<size_t> pending;
  for (size_t i = 0; i < n; ++i) {
    pending.clear();
    size_t cur = i;
    uint32_t found = kNoParent;
    for (;;) {
      if (top[cur] != kNoParent) {
        found = top[cur];
        break;
      }
      pending.push_back(cur);
      if (pending.size() > n) {  // a parent loop: no top
        found = kIrregular;
        break;
      }
      auto parent = t.functions[cur].parent;
      if (!parent || *parent >= n) {
        found = static_cast<uint32_t>(cur);
        break;
      }
      cur = *parent;
    }
    for (size_t f : pending) top[f] = found;
  }
  top_of_parent.assign(n, kNoParent);
  for (size_t i = 0; i < n; ++i)
    if (auto parent = t.functions[i].parent; parent && *parent < n) top_of_parent[i] = top[*parent];
  if (index.rules().cpu_supports_p2pdma) cpu_rule = cpu_supports_p2pdma(t.platform, index.rules());
}

PairFactValues PairFactValues::mask_for(const std::vector<bool>& read) {
  auto any = [&](std::initializer_list<std::string_view> names) {
    for (auto name : names)
      if (auto id = fact_id(name); id && static_cast<size_t>(*id) < read.size() && read[static_cast<size_t>(*id)])
        return true;
    return false;
  };
  // Each field with the facts set_pair_fact_values() makes of it (and those it gates).
  PairFactValues m;
  auto keep = [](auto& field, bool read) { field = read ? static_cast<std::remove_reference_t<decltype(field)>>(~0ull) : 0; };
  keep(m.map_type, any({"kernel.map_type"}));
  keep(m.distance, any({"kernel.distance"}));
  const bool p2pdma_distance = any({"kernel.p2pdma_distance", "kernel.allowed"});
  keep(m.has_p2pdma_distance, p2pdma_distance);
  keep(m.p2pdma_distance, p2pdma_distance);
  keep(m.has_common_ancestor, any({"kernel.acs_redirect_devices"}));
  keep(m.acs_redirect, any({"kernel.acs_redirect"}));
  const bool host_bridge = any({"kernel.host_bridge"});
  keep(m.has_host_bridge, host_bridge);
  keep(m.host_bridge, host_bridge);
  keep(m.whitelist, any({"kernel.whitelist"}));
  keep(m.whitelist_assumed, any({"kernel.whitelist_assumed"}));
  keep(m.cpu_rule, any({"kernel.cpu_rule"}));
  const bool speed = any({"path.narrowest_link_speed_gts"}), width = any({"path.narrowest_link_width"});
  const bool degraded = any({"path.degraded_link"});
  keep(m.has_link, speed || width || degraded);
  keep(m.narrowest_link_speed_bits, speed);
  keep(m.narrowest_link_width, width);
  keep(m.degraded_link, degraded);
  keep(m.relation, any({"path.relation"}));
  keep(m.same_model, any({"path.same_model"}));
  keep(m.same_chip, any({"path.same_chip"}));
  keep(m.no_fabric_link, any({"vendor.nvlink", "vendor.xgmi"}));
  keep(m.same_numa_node, any({"path.same_numa_node"}));
  keep(m.bridges_64bit_prefetch, any({"path.bridges_64bit_prefetch"}));
  keep(m.authority, any({"vendor.authority"}));
  keep(m.nvidia_common_switch, any({"vendor.nvidia_common_switch"}));
  keep(m.nvidia_vm_clique, any({"vendor.nvidia_vm_clique"}));
  const bool third_party = any({"vendor.nvidia_passthrough", "vendor.nvidia_shared_upstream_bridge",
                                "vendor.nvidia_grdma_allowed", "vendor.nvidia_grdma_step",
                                "vendor.nvidia_importer", "vendor.nccl_path_class", "vendor.nccl_gdr_default"});
  keep(m.third_party_gpu, third_party);
  keep(m.nvidia_passthrough, third_party);
  keep(m.nvidia_shared_upstream_bridge, third_party);
  keep(m.peer_class, third_party);
  keep(m.peer_driver, third_party);
  keep(m.nccl_path_class, any({"vendor.nccl_path_class", "vendor.nccl_gdr_default"}));
  return m;
}

void PairFactValues::apply_mask(const PairFactValues& mask) {
  static_assert(sizeof(PairFactValues) % sizeof(uint64_t) == 0);
  uint64_t words[sizeof(PairFactValues) / sizeof(uint64_t)], masks[std::size(words)];
  std::memcpy(words, this, sizeof words);
  std::memcpy(masks, &mask, sizeof masks);
  for (size_t i = 0; i < std::size(words); ++i) words[i] &= masks[i];
  std::memcpy(static_cast<void*>(this), words, sizeof words);
}

PairFactValues pair_fact_values(const PairFactsContext& context, size_t provider, size_t client, const PairOutcome& o,
                                const std::vector<bool>* read) {
  const P2pdmaIndex& index = context.index;
  const Topology& t = index.topology();
  const Function& p = t.functions[provider];
  const Function& c = t.functions[client];
  PairFactValues v;
  kernel_values(context, o, v);
  v.relation = relation(context, provider, client, o);
  v.same_model = tri(p.vendor == c.vendor && p.device == c.device);
  device_table_pair_values(context, provider, client, v);
  if (p.numa_node >= 0 && c.numa_node >= 0) v.same_numa_node = tri(p.numa_node == c.numa_node);
  else if (p.numa_node < 0 && c.numa_node < 0) v.same_numa_node = tri(true);  // no NUMA information: one node
  link_values(context, provider, client, o, v);
  if (auto b = bridges_64bit_prefetch(context, provider, client, o)) v.bridges_64bit_prefetch = tri(*b);
  v.authority = authority(context, provider, client);
  // NVIDIA's third-party paths (GPUDirect RDMA / Storage, dma-buf) answer to the driver's own gate.
  // Only a function on the nvidia driver can be that GPU (is_nvidia_gpu()): the rest are not asked.
  using K = PairFactsContext::DriverKind;
  auto on_nvidia = [&](size_t f) { return context.driver_kind[context.driver_id[f]] == K::kNvidia; };
  if (v.authority == 6 && (on_nvidia(provider) || on_nvidia(client)))
    if (auto gpu = nvidia_third_party_gpu(t, provider, client)) {
      v.authority = kThirdParty;
      const size_t peer = *gpu == provider ? client : provider;
      v.third_party_gpu = *gpu == provider ? 1 : 2;
      if (int8_t pass = context.nvidia_passthrough[*gpu]; pass >= 0) v.nvidia_passthrough = tri(pass == 1);
      uint32_t a = context.top_of_parent[*gpu], b = context.top_of_parent[peer];
      bool common = a == PairFactsContext::kIrregular || b == PairFactsContext::kIrregular
                        ? nv_pci_has_common_pci_switch(t, *gpu, peer)
                        : a != PairFactsContext::kNoParent && a == b;
      v.nvidia_shared_upstream_bridge = tri(common);
      const DeviceClass peer_class = context.device_class[peer];
      v.peer_class = static_cast<uint8_t>(1 + static_cast<int>(peer_class));
      v.peer_driver = context.driver_id[peer];
      const bool nccl_read = !read || (*read)[static_cast<size_t>(ids().nccl_path_class)] ||
                             (*read)[static_cast<size_t>(ids().nccl_gdr_default)];
      if (nccl_read && (peer_class == DeviceClass::kNic || peer_class == DeviceClass::kInfiniband))
        if (auto path = nccl_path_class(t, *gpu, peer)) v.nccl_path_class = static_cast<uint8_t>(1 + static_cast<int>(*path));
    }
  if (v.authority == 1 && provider != client) {  // both on the nvidia driver
    v.nvidia_common_switch = tri(nvidia_common_switch(t, provider, client));
    if (p.nvidia_clique_state != CapState::kUnknown && c.nvidia_clique_state != CapState::kUnknown)
      v.nvidia_vm_clique = tri(p.nvidia_clique_state == CapState::kPresent && c.nvidia_clique_state == CapState::kPresent &&
                               p.nvidia_clique == c.nvidia_clique);
  }
  return v;
}

void set_pair_fact_values(const PairFactsContext& context, size_t provider, size_t client, const PairFactValues& v,
                          FactSet& facts) {
  const Topology& t = context.index.topology();
  auto is_true = [](uint8_t tri) { return tri == 2; };
  facts.set(ids().map_type, to_string(static_cast<MapType>(v.map_type)));
  facts.set(ids().distance, int64_t{v.distance});
  if (v.has_p2pdma_distance) {
    facts.set(ids().p2pdma_distance, int64_t{v.p2pdma_distance});
    facts.set(ids().allowed, v.p2pdma_distance >= 0);
  }
  if (v.acs_redirect) facts.set(ids().acs_redirect, is_true(v.acs_redirect));
  // The devices come with the kernel's texts; without a common upstream bridge there are none.
  if (!v.has_common_ancestor) facts.set(ids().acs_redirect_devices, std::vector<std::string>{});
  if (v.has_host_bridge) facts.set(ids().host_bridge, fmt::format("{:04x}:{:04x}", v.host_bridge >> 16, v.host_bridge & 0xffff));
  static const char* const kWhitelist[] = {"", "whitelisted", "not_whitelisted", "not_consulted"};
  if (v.whitelist) facts.set(ids().whitelist, kWhitelist[v.whitelist]);
  if (v.whitelist_assumed) facts.set(ids().whitelist_assumed, is_true(v.whitelist_assumed));
  if (v.cpu_rule) facts.set(ids().cpu_rule, is_true(v.cpu_rule));
  facts.set(ids().relation, kRelations[v.relation - 1]);
  facts.set(ids().same_model, is_true(v.same_model));
  if (v.same_chip) facts.set(ids().same_chip, is_true(v.same_chip));
  // A vendor facts file's or a runtime's vendor.nvlink / vendor.xgmi for the pair is laid over this.
  if (v.no_fabric_link == 1) facts.set(ids().nvlink, false);
  if (v.no_fabric_link == 2) facts.set(ids().xgmi, false);
  if (v.same_numa_node) facts.set(ids().same_numa_node, is_true(v.same_numa_node));
  if (v.has_link) {
    facts.set(ids().narrowest_link_speed_gts, std::bit_cast<double>(v.narrowest_link_speed_bits));
    facts.set(ids().narrowest_link_width, int64_t{v.narrowest_link_width});
    facts.set(ids().degraded_link, v.degraded_link != 0);
  }
  if (v.bridges_64bit_prefetch) facts.set(ids().bridges_64bit_prefetch, is_true(v.bridges_64bit_prefetch));
  if (v.authority == kThirdParty) set_nvidia_third_party_pair_facts(t, context.nvidia_machine, provider, client, facts);
  facts.set(ids().authority, kAuthorities[v.authority - 1]);
  if (v.nvidia_common_switch) facts.set("vendor.nvidia_common_switch", is_true(v.nvidia_common_switch));
  if (v.nvidia_vm_clique) facts.set("vendor.nvidia_vm_clique", is_true(v.nvidia_vm_clique));
}

FactSet pair_own_facts(const PairFactsContext& context, size_t provider, size_t client, const PairOutcome& o) {
  FactSet facts;
  facts.reserve(32);  // what a pair sets, with room for vendor and derived facts
  set_pair_fact_values(context, provider, client, pair_fact_values(context, provider, client, o), facts);
  return facts;
}

const std::vector<std::string>& kernel_text_facts() {
  static const std::vector<std::string> names = {"kernel.reason", "kernel.remedy", "kernel.acs_redirect_devices"};
  return names;
}

void add_kernel_text_facts(const Topology& t, const PairVerdict& v, FactSet& facts) {
  facts.set("kernel.reason", v.reason);
  // What to do, each an action, the boot parameter first; where this kernel offers nothing, it
  // says so (remedy.whitelist says why the kernel refuses, which is no fix).
  std::vector<std::string> actions;
  // An unknown verdict's first action is to read what was missing, said for where it came from.
  if (v.map_type == MapType::kUnknown) {
    const bool dump = !t.lspci_dump.empty();
    if (!v.remedy.acs_unknown.empty())
      actions.push_back(dump ? "rerun `sudo lspci -xxxx` (the dump lacks ACS registers) and analyse that dump"
                             : "run p2paudit as root, or analyse a snapshot captured as root (ACS needs root)");
    if (v.remedy.cpu_unknown)
      actions.push_back(dump ? "pass --dump-cpu VENDOR:FAMILY:MODEL as /proc/cpuinfo of that machine says"
                             : "capture the snapshot with its /proc/cpuinfo");
    actions.insert(actions.end(), v.remedy.unknown_whitelist.begin(), v.remedy.unknown_whitelist.end());
    if (actions.empty())
      actions.push_back(dump ? "rerun `sudo lspci -xxxx` and analyse that dump"
                             : "run p2paudit as root, or analyse a snapshot captured as root");
  }
  if (!v.remedy.disable_acs_redir.empty())
    actions.push_back("add the kernel parameter pci=disable_acs_redir=" + v.remedy.disable_acs_redir +
                      (v.remedy.acs_override.empty() ? "" : " (" + v.remedy.acs_override + ")"));
  actions.insert(actions.end(), v.remedy.alternatives.begin(), v.remedy.alternatives.end());
  if (actions.empty() && v.map_type == MapType::kNotSupported)
    actions.push_back("none on this kernel: stage through host memory");
  if (!actions.empty()) facts.set("kernel.remedy", fmt::format("{}", fmt::join(actions, "; or ")));
  if (!v.acs_considered) return;  // set with the pair's own facts
  std::vector<std::string> redirecting;
  bool unknown = false;
  for (const auto& test : v.acs_tests) {
    if (!test.redirect) unknown = true;
    else if (*test.redirect) redirecting.push_back(t.functions[test.function].bdf.str());
  }
  if (!redirecting.empty() || !unknown) facts.set("kernel.acs_redirect_devices", redirecting);
}

FactSet pair_facts(const P2pdmaIndex& index, size_t provider, size_t client) {
  const Topology& t = index.topology();
  FactSet machine = machine_facts(t, index.rules());
  FactSet as_provider = device_facts(t.functions[provider], true, t.lspci_dump.empty());
  FactSet as_client = device_facts(t.functions[client], false, t.lspci_dump.empty());
  FactSet facts = pair_own_facts(PairFactsContext(index), provider, client, index.outcome(provider, client));
  add_kernel_text_facts(t, index.verdict(provider, client), facts);
  facts.lay_over({&as_client, &as_provider, &machine});
  return facts.flattened();
}

}  // namespace p2paudit::policy
