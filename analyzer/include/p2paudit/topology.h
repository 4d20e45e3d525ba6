// SPDX-License-Identifier: GPL-2.0-or-later
// The PCIe tree as the kernel sees it: functions, their upstream bridges, host bridges and the
// platform facts the P2PDMA rules depend on. Built by read_topology() (topology_reader.h).
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace p2paudit {

// A PCI function address, printed as the kernel's pci_name(): "DDDD:BB:DD.F".
struct Bdf {
  uint32_t domain = 0;
  uint8_t bus = 0;
  uint8_t dev = 0;
  uint8_t fn = 0;

  uint8_t devfn() const { return static_cast<uint8_t>((dev << 3) | fn); }
  std::string str() const;
  // Accepts "DDDD:BB:DD.F" and "BB:DD.F" (domain 0), hex, any case.
  static std::optional<Bdf> parse(std::string_view text);
  auto operator<=>(const Bdf&) const = default;
};

// Something the reader could not know is kUnknown, never folded into "absent" or "off".
enum class Known { kNo, kYes, kUnknown };
const char* to_string(Known k);

enum class CapState { kAbsent, kPresent, kUnknown };
const char* to_string(CapState s);

// PCI Express Capabilities register, Device/Port Type field (PCI_EXP_TYPE_*).
enum class PcieType : int {
  kUnknown = -2,   // PCIe capability not readable (unprivileged config read)
  kNotPcie = -1,
  kEndpoint = 0x0,
  kLegacyEndpoint = 0x1,
  kRootPort = 0x4,
  kSwitchUpstream = 0x5,
  kSwitchDownstream = 0x6,
  kPcieToPciBridge = 0x7,
  kPciToPcieBridge = 0x8,
  kRcIntegratedEndpoint = 0x9,
  kRcEventCollector = 0xa,
  kOther = 0xff,
};
const char* to_string(PcieType t);

// ACS extended capability (PCI_EXT_CAP_ID_ACS). ctrl is the word at offset+6, read as P2PDMA reads it.
struct Acs {
  CapState state = CapState::kUnknown;
  uint16_t offset = 0;
  uint16_t cap = 0;
  uint16_t ctrl = 0;
  // The Egress Control Vector's first 32 bits (cap+8), read only where EC is implemented; which
  // ports or functions EC blocks or redirects peer requests to (acs_meaning.h). nullopt: not read.
  std::optional<uint32_t> egress_first_word = std::nullopt;
};

inline constexpr uint16_t kAcsSv = 0x0001;
inline constexpr uint16_t kAcsTb = 0x0002;
inline constexpr uint16_t kAcsRr = 0x0004;
inline constexpr uint16_t kAcsCr = 0x0008;
inline constexpr uint16_t kAcsUf = 0x0010;
inline constexpr uint16_t kAcsEc = 0x0020;
inline constexpr uint16_t kAcsDt = 0x0040;
inline constexpr uint16_t kAcsRedirectBits = kAcsRr | kAcsCr | kAcsEc;

struct Bar {
  int index = 0;         // 0..5, 6 = expansion ROM
  uint64_t start = 0;    // CPU address from sysfs `resource`
  uint64_t size = 0;
  bool io = false;
  bool is_64bit = false;
  bool prefetchable = false;
};

struct BridgeWindow {
  std::string kind;      // "io", "mem", "prefetch"
  uint64_t base = 0;
  uint64_t limit = 0;    // inclusive
  bool is_64bit = false;
  bool enabled = false;
};

struct Link {
  std::string current_speed, max_speed;  // sysfs strings, e.g. "16.0 GT/s PCIe"
  int current_width = 0, max_width = 0;  // 0 when not exposed
};

struct ResizableBar {
  int bar = 0;
  uint64_t current_size = 0;
  std::vector<uint64_t> supported_sizes;
};

struct Sriov {
  uint16_t total_vfs = 0;
  uint16_t num_vfs = 0;
  uint16_t vf_device = 0;
};

struct ModuleInfo {
  std::string name;        // module the driver lives in, or the modalias match for unbound devices
  std::string version;
  std::string srcversion;
  Known builtin = Known::kUnknown;
  std::vector<std::string> alias_matches;  // unbound: modules whose alias matches the modalias
};

struct Function {
  Bdf bdf;
  std::string sysfs_path;         // relative to the sysroot, e.g. "sys/devices/pci0000:00/0000:00:01.0"
  std::string host_bridge;        // "pciDDDD:BB"
  std::optional<size_t> parent;   // upstream bridge as sysfs nests it; nullopt on a root bus
  std::optional<size_t> physfn;   // set for VFs
  std::vector<size_t> children;   // functions whose sysfs parent is this one
  std::vector<size_t> virtfns;

  uint16_t vendor = 0, device = 0;
  uint16_t subsystem_vendor = 0, subsystem_device = 0;
  uint32_t class_code = 0;        // 24-bit class/subclass/prog-if
  uint8_t revision = 0;
  uint8_t header_type = 0;        // without the multifunction bit
  bool multifunction = false;
  bool is_virtfn = false;
  std::string vendor_name, device_name, class_name;  // pci.ids' names; see Topology::pci_names_deferred

  size_t config_size = 0;         // what the kernel exposes (256 or 4096); 0 when unknown
  size_t config_readable = 0;     // what this reader could read; < config_size when unprivileged
  bool pcix_mode2 = false;        // PCI-X 266/533 capable: extended config space is reachable
  bool is_pcie = false;
  PcieType pcie_type = PcieType::kNotPcie;
  Acs acs;
  CapState ari = CapState::kUnknown;
  std::optional<Sriov> sriov;
  std::vector<ResizableBar> rebar;
  CapState rebar_state = CapState::kUnknown;
  std::optional<uint64_t> serial_number;
  // NVIDIA's hypervisor "peer clique" vendor capability (signature "P2P"): pass-through GPUs
  // with the same clique ID get PCIe peer access from NVIDIA's driver in a VM.
  CapState nvidia_clique_state = CapState::kUnknown;
  uint8_t nvidia_clique = 0;
  Link link;
  std::vector<Bar> bars;
  std::vector<BridgeWindow> windows;
  std::optional<uint8_t> secondary_bus, subordinate_bus;

  std::string driver;             // bound driver, empty when none
  ModuleInfo module;
  std::string modalias;
  int numa_node = -1;
  std::string local_cpulist;
  std::optional<int> iommu_group;
  std::string iommu_group_type;   // iommu_group/type when exposed ("DMA", "identity", ...)
  bool enabled = false;
  bool has_p2pmem = false;

  // Device-local memory (VRAM, LMEM) in bytes as the bound driver publishes it in sysfs: amdgpu's
  // mem_info_vram_total, the i915 backport's drm/cardN/lmem_total_bytes (vendor_memory.h).
  // nullopt when the driver publishes none (xe, nvidia, ...) or the file was not a plain number.
  std::optional<uint64_t> memory_size;
  std::string memory_size_source;               // the sysroot path memory_size came from, "" when unknown
  // The part of memory_size the CPU, and so a peer, reaches through the driver's aperture
  // (amdgpu's mem_info_vis_vram_total); amdgpu calls the device large-BAR when it is all of it.
  std::optional<uint64_t> memory_visible_size;

  bool is_bridge() const { return header_type == 1 || header_type == 2; }
  // What dev_driver_string() would print for this device: the driver, or the bus name "pci".
  const std::string& log_name() const;
};

struct HostBridge {
  std::string name;                    // "pciDDDD:BB"
  uint32_t domain = 0;
  uint8_t bus = 0;
  // Devices on the root bus in the kernel's list order: boot-time scan order (ascending devfn),
  // VFs appended after. The kernel's pci_host_bridge_dev() takes the first.
  std::vector<size_t> root_bus_devices;
};

// Versions of the GPU drivers and runtimes as the machine's files state them, each checked to be
// a short version string (read_runtime_versions()); "" when the sysroot does not hold it.
struct RuntimeVersions {
  std::string nvidia_driver;         // "580.159.04": /proc/driver/nvidia/version, else /sys/module/nvidia/version
  std::string nvidia_driver_source;  // the file it was read from ("/proc/driver/nvidia/version")
  std::string amdgpu_module;         // /sys/module/amdgpu/version (amdgpu-dkms, "5.0.19.20.6"; the in-tree module has none)
  std::string rocm;                  // "6.2.0-66": /opt/rocm/.info/version
};

struct Platform {
  std::string arch;                    // "x86", "arm64", ... or "" when unknown
  std::string cpu_vendor;              // /proc/cpuinfo vendor_id of processor 0
  std::optional<int> cpu_family, cpu_model;
  std::string cpu_model_name;
  std::optional<int> cpu_physical_address_bits;  // "address sizes: N bits physical" (x86); unknown elsewhere
  bool hypervisor = false;
  std::string kernel_release;          // proc/sys/kernel/osrelease
  std::string kernel_version;          // proc/version
  std::string kernel_version_signature;  // proc/version_signature (Ubuntu: "Ubuntu 7.1.0-14.14-generic 7.1.3")
  std::string cmdline;
  Known config_p2pdma = Known::kUnknown;
  std::string kernel_config_source;    // path in the sysroot the config came from, or ""
  std::string hostname;
  bool iommu_groups_present = false;
  std::string iommu_mode;              // "off", "passthrough", "translated", "unknown"
  std::string iommu_mode_source;       // where iommu_mode came from ("iommu_group type", "command line iommu=pt", ...)
  // NVIDIA's third-party peer paths (vendor-p2p-gates.md §1.9, §1.10), read_nvidia_third_party():
  // modules loaded (kUnknown where neither /proc/modules nor a live /sys/module tells), and
  // NVreg_GrdmaPciTopoCheckOverride with the file or parameter it was read from (nullopt: unknown).
  Known nvidia_peermem_loaded = Known::kUnknown, nvidia_fs_loaded = Known::kUnknown;
  std::optional<int64_t> nvidia_grdma_override;
  std::string nvidia_grdma_override_source;
  // SMBIOS type 0 says "virtual machine" (BIOS characteristics extension byte 2, bit 4): how NVIDIA's
  // driver recognises a guest on AArch64, where cpuinfo has no hypervisor flag.
  Known firmware_vm = Known::kUnknown;
  // Driver and runtime versions the sysroot states (runtime_versions.h); "" where it does not.
  RuntimeVersions versions;
};

// Something the reader noticed and did not hide (a parent mismatch, an unreadable file).
struct Finding {
  std::string path;
  std::string message;
};

struct Topology {
  std::vector<Function> functions;     // sorted by BDF
  std::vector<HostBridge> host_bridges;
  Platform platform;
  std::vector<Finding> findings;
  bool config_fully_readable = true;   // false when any function's config was cut short (not root)
  std::string lspci_dump;              // the `lspci -x` dump it was read from; "" for a sysroot
  // True when the reader left every function's pci.ids names empty (TopologyReadScope::pci_names):
  // parsing pci.ids costs more than reading a small machine, and most outputs print no name. A
  // text that prints one takes it from pci_device_name().
  bool pci_names_deferred = false;

  const Function* find(const Bdf& bdf) const;
  std::optional<size_t> index_of(const Bdf& bdf) const;
  const HostBridge* host_bridge_of(const Function& f) const;
  // Where facts come from, for messages: "this dump" or "this sysroot".
  const char* input_kind() const { return lspci_dump.empty() ? "this sysroot" : "this dump"; }
};

// The name pci.ids gives f's device, "" when none: f.device_name, or where the reader deferred the
// names, looked up now (pci.ids is parsed at the first lookup of the process). Throws InputError.
std::string pci_device_name(const Topology& t, const Function& f);

}  // namespace p2paudit
