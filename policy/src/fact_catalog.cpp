// SPDX-License-Identifier: GPL-2.0-or-later
// The fact catalogue. Names are a public contract (rule files use them): add facts freely, never
// rename or retype one without a new rule-file version.
#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>

#include "p2paudit/policy/facts.h"

namespace p2paudit::policy {

namespace {

using enum FactType;

FactSpec fact(std::string name, FactType type, std::string description, std::vector<std::string> allowed = {}) {
  FactSpec f;
  f.name = std::move(name);
  f.type = type;
  f.allowed = std::move(allowed);
  f.description = std::move(description);
  return f;
}

// A fact only vendor tools can tell, and so one a vendor facts file may set.
FactSpec from_vendor(FactSpec f) {
  f.source = FactSource::kVendor;
  return f;
}

FactSpec in_range(FactSpec f, double minimum, double maximum) {
  f.minimum = minimum;
  f.maximum = maximum;
  return f;
}

// Device memory beyond this is a typo or an attack, not a device (today's largest carry ~0.2 TiB).
constexpr double kMaxDeviceMemory = double(std::int64_t{1} << 50);

// Facts every device of a pair has; the catalogue lists each under "provider." and "client.".
std::vector<FactSpec> device_facts() {
  return {
      fact("bdf", kString, "PCI address DDDD:BB:DD.F"),
      fact("class", kEnum, "what the device is, from its PCI class and driver",
           {"gpu", "accelerator", "nvme", "nic", "fpga", "storage", "bridge", "other"}),
      fact("vendor", kString, "PCI vendor ID, 4 lower-case hex digits (\"10de\")"),
      fact("device", kString, "PCI device ID, 4 lower-case hex digits"),
      fact("driver", kString,
           "bound kernel driver (\"nvidia\", \"amdgpu\", \"xe\", \"nvme\"); \"none\" when the capture shows it unbound; "
           "unknown where the input cannot tell (an lspci dump)"),
      fact("module", kString, "kernel module providing the driver"),
      fact("module_version", kString, "that module's version string (modinfo version)"),
      fact("largest_bar", kInteger, "size in bytes of the largest memory BAR"),
      fact("bar_above_4g", kBool, "the largest memory BAR is assigned above 4 GiB; false without a memory BAR that has an address"),
      fact("bar_unassigned", kBool, "a memory BAR has a size but no address: no room was found for it in the bridge windows"),
      fact("rebar_current", kInteger, "current size in bytes of the Resizable BAR"),
      fact("rebar_max", kInteger, "largest Resizable BAR size in bytes the device supports"),
      fact("rebar_at_max", kBool,
           "the Resizable BAR is set to the largest size the device supports; true without a Resizable BAR capability "
           "(each BAR has one size, its largest); unknown where the extended config space was not read"),
      fact("rebar_no_room", kBool,
           "the Resizable BAR control asks for more than the BAR was given: resized, but no address space was "
           "found until a (warm) reboot (XRT's \"no iomem\"); false without a Resizable BAR capability; unknown where "
           "the extended config space was not read (unprivileged)"),
      fact("bar_covers_memory", kBool,
           "the largest BAR is at least memory_size (known when memory_size is); true for a device that is not a GPU, "
           "accelerator or FPGA, whose memory for peers (an NVMe CMB) is a BAR region by definition"),
      from_vendor(in_range(fact("memory_size", kInteger,
                                "device memory in bytes (VRAM, HBM, DDR): set by the analyzer from amdgpu's "
                                "mem_info_vram_total, the i915 backport's lmem_total_bytes or an early xe's "
                                "tileN/physical_vram_size_bytes in sysfs where present (mainline xe and nvidia publish "
                                "none), else from the device table where the ID has one size, or by a vendor facts "
                                "file, which wins"),
                           0, kMaxDeviceMemory)),
      // Where the largest memory BAR (the one peers reach) ends, against the limits on it.
      fact("bar_end", kInteger,
           "address one past the last byte of the largest memory BAR (its start plus its size); known when that BAR "
           "has an address"),
      fact("bar_above_32t", kBool,
           "the largest memory BAR ends above 32 TiB (2^45): XRT documents that the P2P BAR's highest address must be "
           "below 32 TiB; false without a memory BAR that has an address"),
      fact("bar_beyond_address_width", kBool,
           "the largest memory BAR ends beyond the CPU's physical address width (platform.cpu_physical_address_bits): "
           "the kernel cannot map it; false for a BAR that ends by 4 GiB or has no address; otherwise unknown when the "
           "width is"),
      // From the device table (rules/devices/, docs/devices.md) by PCI vendor and device ID: unknown
      // for an ID the table does not hold, and for a value its row leaves out.
      fact("product", kString, "the product, from the device table (rules/devices/) by PCI vendor and device ID"),
      fact("product_line", kEnum, "the product line, from the device table",
           {"consumer", "workstation", "datacenter", "integrated"}),
      fact("chip", kString,
           "the GPU die (\"AD102\", \"GH100\"), from the device table: NVIDIA's driver allows PCIe peer access only "
           "between GPUs of one chip"),
      fact("fabric", kEnum,
           "the on-package link the product can use for peers (NVLink, xGMI / Infinity Fabric Link, Xe Link) or none, "
           "from the device table; whether a link is fitted is vendor.nvlink / vendor.xgmi",
           {"none", "nvlink", "xgmi", "xelink"}),
      fact("driver_pcie_peer", kEnum,
           "what the vendor's driver answers for PCIe peer access on the product's line, from the device table "
           "(GeForce RTX 30/40/50: refused, GPU_NOT_SUPPORTED)",
           {"allowed", "refused"}),
      fact("vm_clique_documented", kBool,
           "NVIDIA documents the hypervisor's GPUDirect peer clique for the product's line (data-centre GPUs), from "
           "the device table"),
  };
}

std::vector<FactSpec> build_catalog() {
  std::vector<FactSpec> c = {
      // The kernel's P2PDMA verdict for the pair (drivers/pci/p2pdma.c, re-done offline).
      fact("kernel.map_type", kEnum, "pci_p2pdma_map_type() for the pair",
           {"BUS_ADDR", "THRU_HOST_BRIDGE", "NOT_SUPPORTED", "UNKNOWN"}),
      fact("kernel.allowed", kBool, "pci_p2pdma_distance() >= 0: the kernel lets in-tree users do P2P"),
      fact("kernel.p2pdma_distance", kInteger, "pci_p2pdma_distance() return value (-1: refused)"),
      fact("kernel.distance", kInteger, "calc_map_type_and_dist() distance, also when refused"),
      fact("kernel.acs_redirect", kBool, "a bridge on the path redirects peer requests upstream (ACS RR/CR/EC)"),
      fact("kernel.acs_redirect_devices", kStringList, "BDFs of the bridges whose ACS redirects peer requests"),
      fact("kernel.whitelist", kEnum, "the host-bridge whitelist result for the pair",
           {"whitelisted", "not_whitelisted", "not_consulted"}),
      fact("kernel.host_bridge", kString, "vendor:device (\"8086:4c43\") of the host bridge the kernel checked"),
      fact("kernel.whitelist_assumed", kBool,
           "the whitelist entry that let the pair through was added for this run (--assume-whitelisted, "
           "--kernel-rules), not one the kernel ships; false for every other pair, unknown only where such an entry "
           "exists and the whitelist's answer is unknown"),
      fact("kernel.cpu_rule", kBool, "the kernel's CPU rule (AMD Zen and newer) lets traffic through the host bridge"),
      fact("kernel.config_p2pdma", kBool, "the kernel is built with CONFIG_PCI_P2PDMA"),
      fact("kernel.release", kString, "kernel release whose rules were applied (\"6.8.0\")"),
      fact("kernel.reason", kString, "the kernel verdict in one sentence"),
      fact("kernel.remedy", kString, "what to do about the kernel verdict, each an action (boot parameter, kernel, slot)"),

      // Where the two devices meet in the PCIe tree.
      fact("path.relation", kEnum, "the closest thing the two devices share",
           {"same_function", "same_device", "same_switch", "same_root_port", "same_host_bridge",
            "different_host_bridges"}),
      fact("path.same_model", kBool, "both devices have the same PCI vendor and device ID"),
      fact("path.same_chip", kBool,
           "both devices are the same chip by the device table (provider.chip, client.chip); known when both chips are"),
      fact("path.same_numa_node", kBool, "both devices report the same NUMA node"),
      fact("path.narrowest_link_speed_gts", kNumber, "slowest current link speed on the path, GT/s"),
      fact("path.narrowest_link_width", kInteger, "narrowest current link width on the path, lanes"),
      fact("path.degraded_link", kBool, "a link on the path runs below its maximum speed or width"),
      fact("path.bridges_64bit_prefetch", kBool,
           "every bridge that routes peer requests down to the provider has an enabled 64-bit prefetchable window: "
           "the provider's bridges below the common upstream bridge, or its whole chain up to the root port when the "
           "path goes through the host bridge (no common upstream bridge, or ACS redirects); the client's side needs none"),

      fact("iommu.mode", kEnum, "DMA translation for the devices (kernel command line, iommu_group/type)",
           {"off", "passthrough", "translated"}),
      fact("iommu.mode_source", kString,
           "where iommu.mode came from: \"iommu_group type\", \"command line iommu=pt\", \"kernel config: "
           "CONFIG_IOMMU_DEFAULT_PASSTHROUGH=y\", \"no IOMMU groups\", the era's default; set also when the mode is unknown"),

      fact("platform.vm_guest", kBool, "the machine is a virtual machine (CPU hypervisor flag)"),
      fact("platform.cpu_vendor", kString, "CPU vendor_id (\"GenuineIntel\", \"AuthenticAMD\")"),
      fact("platform.cpu_family", kInteger, "boot CPU family (/proc/cpuinfo \"cpu family\", decimal)"),
      fact("platform.cpu_model", kInteger, "boot CPU model (/proc/cpuinfo \"model\", decimal)"),
      fact("platform.amd_zen", kBool, "the CPU is AMD family 17h or newer (the kernel's CPU rule)"),
      in_range(fact("platform.cpu_physical_address_bits", kInteger,
                    "the boot CPU's physical address width in bits (/proc/cpuinfo \"address sizes\", x86): memory and "
                    "BARs above 2^N cannot be addressed"),
               32, 64),

      // What the vendor stack that owns the pair would decide; see docs/vendor-p2p-gates.
      fact("vendor.authority", kEnum, "whose peer logic governs the pair: the kernel's P2PDMA or a vendor driver's",
           {"kernel", "nvidia", "amdgpu", "xe", "xrt", "nvidia_third_party", "unknown"}),
      from_vendor(fact("vendor.nvlink", kBool, "an NVLink connects the two GPUs")),
      from_vendor(fact("vendor.xgmi", kBool, "both AMD GPUs are in the same XGMI hive")),
      from_vendor(fact("vendor.peer_supported", kBool, "the vendor stack reports peer access between the two as supported")),
      fact("vendor.nvidia_vm_clique", kBool,
           "both NVIDIA GPUs carry the hypervisor's peer-clique capability with the same clique ID "
           "(in a VM, NVIDIA's driver then approves PCIe peer access without its chipset check)"),
      fact("vendor.nvidia_common_switch", kBool,
           "NVIDIA's own topology walk finds a PCIe switch it recognises above both GPUs (PLX 87xx/97xx, "
           "PMC 85xx/40xx, NVIDIA BR03/BR04, Mellanox 1976); the rest of its decision is in GSP firmware"),

      from_vendor(fact("vendor.peer_runtime", kString,
                       "the runtime whose answer set vendor.peer_supported (\"cuda\", \"nvml\", \"level_zero\", \"hip\")")),
      from_vendor(fact("vendor.peer_answer", kString,
                       "that runtime's raw answer when it was not a plain yes or no (\"NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED\", "
                       "\"ZE_RESULT_ERROR_...\")")),

      // `probe --copy`: a peer copy of random data, compared in full (docs/probe.md).
      from_vendor(fact("vendor.copy_result", kEnum,
                       "the peer copy test of this pair: every byte arrived, a copy reported success with wrong data, "
                       "or a call failed (hung and crashed count as failed); not_run without a copy test",
                       {"verified", "corrupt", "failed", "not_run"})),
      from_vendor(fact("vendor.copy_verified", kBool, "a peer copy of this pair was compared in full and was right every time")),
      from_vendor(fact("vendor.copy_runtime", kString, "the runtime that ran the copy test")),
      from_vendor(fact("vendor.copy_error", kString, "the failing call and its code, or where the copy hung or crashed")),
      from_vendor(in_range(fact("vendor.copy_mismatched_bytes", kInteger, "bytes that differed after a copy reported success"),
                           0, kMaxDeviceMemory)),
      from_vendor(in_range(fact("vendor.copy_gbps", kNumber, "median peer copy bandwidth, GB/s"), 0, 1e6)),
      from_vendor(in_range(fact("vendor.copy_staged_gbps", kNumber, "median host-staged copy bandwidth, GB/s"), 0, 1e6)),
      // The path's ceiling for the copy (path_ceiling.h, docs/probe.md "Bandwidth against the path").
      from_vendor(in_range(fact("vendor.copy_ceiling_gbps", kNumber,
                                "the most the pair's path carries per direction, GB/s: the narrowest PCIe link (speed x "
                                "width), or the active NVLinks between the GPUs x one link's rate"),
                           0, 1e6)),
      from_vendor(in_range(fact("vendor.copy_ceiling_ratio", kNumber,
                                "vendor.copy_gbps / vendor.copy_ceiling_gbps: the share of its path's ceiling the peer copy reached"),
                           0, 1e6)),
      from_vendor(fact("vendor.copy_ceiling_path", kString,
                       "what the ceiling is made of (\"PCIe 16 GT/s x8 at 0000:03:00.0\", \"NVLink through NVSwitch: ...\")")),
      from_vendor(fact("vendor.copy_ceiling_missing", kString,
                       "when the ceiling is unknown: the fact that would settle it (a link's speed or width, an NVLink rate)")),
      from_vendor(fact("vendor.copy_ceiling", kString,
                       "the ceiling in words for a reason: \"62% of the path's 450 GB/s (...)\", or \"the path's ceiling is "
                       "unknown: ...\"")),
      // `probe --copy`'s peer paths of kernels (CUDA; docs/probe.md "Peer paths"): a kernel on the client
      // storing into, loading from and adding atomically to the provider's memory, in windows across it.
      from_vendor(fact("vendor.kernel_store_result", kEnum,
                       "peer stores of a kernel on the client into the provider's memory: every word arrived, some were "
                       "dropped (the destination's sentinel left), zeroed, wrong, the kernel hung, or a call refused; "
                       "not_run without the test",
                       {"verified", "dropped", "zeroed", "wrong", "hung", "refused", "not_supported", "not_run"})),
      from_vendor(fact("vendor.kernel_load_result", kEnum,
                       "peer loads of a kernel on the client from the provider's memory (the values as for "
                       "vendor.kernel_store_result)",
                       {"verified", "dropped", "zeroed", "wrong", "hung", "refused", "not_supported", "not_run"})),
      from_vendor(fact("vendor.atomic_result", kEnum,
                       "atomic adds of a kernel on the client to the provider's memory; not_supported where the driver "
                       "reports no native peer atomics for the pair (the values as for vendor.kernel_store_result)",
                       {"verified", "dropped", "zeroed", "wrong", "hung", "refused", "not_supported", "not_run"})),
      from_vendor(fact("vendor.peer_paths_failed", kStringList,
                       "the pair's peer paths that did not carry their data: copy_engine (the peer copy), kernel_stores, "
                       "kernel_loads, atomics; empty when none failed or none was tested")),
      from_vendor(fact("vendor.peer_path_error", kString,
                       "the first failed kernel path in words: the path, its result, the window's offset and the bad "
                       "words, or the call that hung or refused")),
      // NVIDIA's third-party paths (vendor.authority nvidia_third_party: an NVIDIA GPU and a device of
      // another driver): GPUDirect RDMA, GPUDirect Storage and dma-buf export ask the driver's
      // nv_grdma_pci_topology_supported() (vendor-p2p-gates.md §1.10), never the kernel's P2PDMA.
      fact("vendor.nvidia_peermem_loaded", kBool,
           "the nvidia_peermem module is loaded (/proc/modules): GPUDirect RDMA through ib_core peer memory needs it, "
           "dma-buf registration does not"),
      fact("vendor.nvidia_fs_loaded", kBool, "the nvidia_fs module (GPUDirect Storage) is loaded (/proc/modules)"),
      fact("vendor.nvidia_chipset", kString,
           "the chipset NVIDIA's driver identifies (its chipsetInfo[] table, first entry present: \"CS_AMPERE_ALTRA\"; "
           "\"CS_UNKNOWN\" when none is)"),
      fact("vendor.nvidia_unsupported_chipset", kBool,
           "that chipset is one NVIDIA's third-party gate restricts to devices sharing an upstream bridge "
           "(CS_NVIDIA_TH500, CS_AMPERE_ALTRA, CS_AMPERE_AMPEREONE160)"),
      fact("vendor.nvidia_coherent", kBool, "the GPUs are cache-coherent with the CPU over NVLink-C2C (Grace): the gate allows"),
      fact("vendor.nvidia_grdma_override", kInteger,
           "NVreg_GrdmaPciTopoCheckOverride as the driver or its configuration states it: 1 always allow, 2 always deny, "
           "0 the topology check"),
      fact("vendor.nvidia_grdma_override_source", kString, "where vendor.nvidia_grdma_override was read"),
      fact("vendor.nvidia_passthrough", kBool,
           "the GPU is passed through to this VM (a guest, and not a VF): NVIDIA's gate then allows"),
      fact("vendor.nvidia_shared_upstream_bridge", kBool,
           "the GPU and the other device share an upstream bridge (a root port counts): nv_pci_has_common_pci_switch()"),
      fact("vendor.nvidia_grdma_allowed", kBool,
           "nv_grdma_pci_topology_supported() for the pair: the driver maps GPU memory for the device (unknown when an "
           "unknown input could change it)"),
      fact("vendor.nvidia_grdma_step", kEnum, "the step of nv_grdma_pci_topology_supported() that answered",
           {"coherent", "override_allow", "override_deny", "passthrough", "common_bridge", "no_common_bridge",
            "supported_chipset"}),
      fact("vendor.nccl_path_class", kEnum,
           "NCCL's path type for a GPU<->NIC pair: PIX one PCIe switch, PXB several switches, PHB through the CPU's "
           "host bridge, SYS across NUMA nodes (NVIDIA/nccl src/include/graph.h)",
           {"PIX", "PXB", "PHB", "SYS"}),
      fact("vendor.nccl_gdr_default", kBool,
           "NCCL uses GPUDirect RDMA on that path with NCCL_NET_GDR_LEVEL unset (PIX, PXB); beyond it NCCL stages "
           "through host memory"),
      fact("vendor.nvidia_importer", kEnum,
           "how the device paired with an NVIDIA GPU can map GPU memory for its own DMA: rdma (its PCI driver is an "
           "RDMA provider's, ib_core peer memory or dma-buf), storage (nvme: GPUDirect Storage through nvidia_fs), "
           "none (no importer: data passes through host memory)",
           {"rdma", "storage", "none"}),
      fact("platform.intel_client_cpu", kBool,
           "the CPU is an Intel client (Core) part by the kernel's intel-family.h model names; its root complex "
           "forwards peer writes only"),

      // Driver and runtime versions: strings, compared with eq or regex; the NVIDIA driver's major
      // number also as an integer, for ranges of branches (lt: 510).
      from_vendor(fact("runtime.nvidia_driver_version", kString,
                       "NVIDIA kernel driver version (\"580.159.04\"): /proc/driver/nvidia/version, else "
                       "/sys/module/nvidia/version or the capture record's nvidia module, or NVML's "
                       "nvmlSystemGetDriverVersion (probe); unknown without the driver loaded")),
      from_vendor(in_range(fact("runtime.nvidia_driver_major", kInteger,
                                "the NVIDIA driver's branch: the leading number of runtime.nvidia_driver_version (580)"),
                           0, 999999)),
      from_vendor(fact("runtime.cuda_driver_version", kString,
                       "the CUDA version the installed driver supports, MAJOR.MINOR (\"13.0\"): cuDriverGetVersion "
                       "(probe)")),
      fact("runtime.amdgpu_module_version", kString,
           "amdgpu module version from /sys/module/amdgpu/version or the capture record (amdgpu-dkms, "
           "\"5.0.19.20.6\"); unknown for the in-tree module, which has none: then the kernel release tells it"),
      fact("runtime.rocm_version", kString, "ROCm release installed (/opt/rocm/.info/version, \"6.2.0-66\")"),
      from_vendor(fact("runtime.level_zero_version", kString, "Level Zero loader version")),
      from_vendor(fact("runtime.compute_runtime_version", kString, "Intel compute-runtime release (\"26.09.37435.1\")")),
      from_vendor(in_range(fact("runtime.host_mirror_per_byte", kNumber,
                                "host memory the Level Zero runtime committed or pinned per byte of a device allocation "
                                "made in a context of every GPU (`probe --mirror`; about 1: a full host mirror)"),
                           0, 1e3)),
  };
  for (const char* role : {"provider", "client"})
    for (FactSpec f : device_facts()) {
      f.name = fmt::format("{}.{}", role, f.name);
      f.description = fmt::format("{}: {}", role, f.description);
      c.push_back(std::move(f));
    }
  return c;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string type_text(const FactSpec& f) {
  if (f.type != kEnum) return to_string(f.type);
  std::string out = "enum:";
  for (const auto& v : f.allowed) out += (out.size() > 5 ? " | " : " ") + v;
  return out;
}

}  // namespace

const char* to_string(FactSource s) { return s == FactSource::kVendor ? "vendor" : "analyzer"; }

const char* to_string(FactType t) {
  switch (t) {
    case kBool: return "bool";
    case kInteger: return "integer";
    case kNumber: return "number";
    case kString: return "string";
    case kEnum: return "enum";
    case kStringList: return "list";
  }
  return "?";
}

const std::vector<FactSpec>& fact_catalog() {
  static const std::vector<FactSpec> catalog = build_catalog();
  return catalog;
}

const FactSpec* find_fact(std::string_view name) {
  static const auto index = [] {
    std::unordered_map<std::string_view, const FactSpec*> by_name;
    for (const auto& f : fact_catalog()) by_name.emplace(f.name, &f);
    return by_name;
  }();
  auto it = index.find(name);
  return it != index.end() ? it->second : nullptr;
}

std::string closest_fact_name(std::string_view name) {
  // A name far longer than any fact's is no typo, and its edit distance would cost its length
  // times each name's (a stranger's rule file may hold megabytes).
  constexpr size_t kLongestTypo = 128;
  if (name.size() > kLongestTypo) return {};
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 4) + 1;  // beyond that it is not a typo
  for (const auto& f : fact_catalog())
    if (size_t d = edit_distance(name, f.name); d < best_distance) best = f.name, best_distance = d;
  return best;
}

std::string fact_catalog_markdown() {
  std::ostringstream out;
  std::string section;
  for (const auto& f : fact_catalog()) {
    std::string prefix = f.name.substr(0, f.name.find('.'));
    if (prefix != section) {
      out << (section.empty() ? "" : "\n") << "### `" << prefix << ".`\n\n| fact | type | meaning |\n|---|---|---|\n";
      section = prefix;
    }
    std::string type = to_string(f.type);
    for (size_t i = 0; i < f.allowed.size(); ++i) type += (i ? ", `" : ": `") + f.allowed[i] + "`";
    out << "| `" << f.name << "` | " << type << " | " << f.description << " |\n";
  }
  return out.str();
}

std::string fact_catalog_text() {
  size_t width = 0;
  for (const auto& f : fact_catalog()) width = std::max(width, f.name.size());
  std::string out;
  for (const auto& f : fact_catalog())
    out += fmt::format("{:<{}}  {}{}\n{:<{}}  {}\n", f.name, width, type_text(f),
                       f.source == FactSource::kVendor ? " (vendor facts file)" : "", "", width, f.description);
  return out;
}

nlohmann::json fact_catalog_json() {
  auto facts = nlohmann::json::array();
  for (const auto& f : fact_catalog()) {
    nlohmann::json j = {{"name", f.name}, {"type", to_string(f.type)}, {"description", f.description},
                        {"source", to_string(f.source)}};
    if (f.type == kEnum) j["values"] = f.allowed;
    facts.push_back(std::move(j));
  }
  return {{"schema_version", 1}, {"facts", std::move(facts)}};
}

}  // namespace p2paudit::policy
