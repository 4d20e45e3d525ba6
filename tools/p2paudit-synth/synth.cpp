// SPDX-License-Identifier: GPL-2.0-or-later
#include "synth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "p2paudit/archive_library.h"

namespace p2paudit::synth {

namespace {

// ---------------------------------------------------------------------------------------------
// What can sit in a slot. IDs are real parts, so lspci prints names from pci.ids.

struct BarSpec {
  int index;  // every BAR is 64-bit: it takes registers index and index + 1
  uint64_t size;
  bool prefetchable;
};

enum class Role { kGpu, kNvme, kNic, kAccelerator, kCompanion, kPlatform, kBridge };

struct Product {
  uint16_t vendor, device, subsystem_vendor, subsystem_device;
  uint8_t revision;
  uint32_t class_code;
  Role role;
  const char* driver;  // nullptr: no driver bound
  const char* module;  // nullptr: built into the kernel
  const char* module_version;
  int link_gen, link_width;  // 0: no link (integrated in the root complex)
  std::vector<BarSpec> bars;
  uint16_t vf_device = 0;  // SR-IOV capable when set
  uint64_t vf_bar_size = 0;
  uint64_t vram = 0;  // amdgpu publishes mem_info_vram_total
};

constexpr uint64_t KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024;

const Product kNvidiaGpu{0x10de, 0x2335, 0x10de, 0x18be, 0xa1, 0x030200, Role::kGpu, "nvidia", "nvidia", "580.95.05", 5, 16,
                         {{0, 16 * MiB, false}, {2, 256 * GiB, true}, {4, 32 * MiB, true}}};
const Product kNvidiaAudio{0x10de, 0x22ba, 0x10de, 0x18be, 0xa1, 0x040300, Role::kCompanion, "snd_hda_intel",
                           "snd_hda_intel", nullptr, 5, 16, {{0, 16 * KiB, false}}};
const Product kAmdGpu{0x1002, 0x740f, 0x1002, 0x0c34, 0x02, 0x030200, Role::kGpu, "amdgpu", "amdgpu", nullptr, 4, 16,
                      {{0, 64 * GiB, true}, {2, 2 * MiB, true}, {4, 512 * KiB, false}}, 0, 0, 64 * GiB};
const Product kAmdAudio{0x1002, 0xab28, 0x1002, 0xab28, 0x00, 0x040300, Role::kCompanion, "snd_hda_intel",
                        "snd_hda_intel", nullptr, 4, 16, {{0, 16 * KiB, false}}};
const Product kNvme{0x144d, 0xa824, 0x144d, 0xa801, 0x00, 0x010802, Role::kNvme, "nvme", "nvme", nullptr, 4, 4,
                    {{0, 32 * KiB, false}}};
const Product kNic{0x15b3, 0x1021, 0x15b3, 0x0041, 0x00, 0x020000, Role::kNic, "mlx5_core", "mlx5_core", nullptr, 5, 16,
                   {{0, 64 * MiB, true}}, 0x101e, 1 * MiB};
const Product kNicVf{0x15b3, 0x101e, 0x15b3, 0x0041, 0x00, 0x020000, Role::kNic, "mlx5_core", "mlx5_core", nullptr, 0, 0,
                     {{0, 1 * MiB, true}}};
const Product kAccelerator{0x1da3, 0x1020, 0x1da3, 0x1020, 0x01, 0x120000, Role::kAccelerator, "habanalabs",
                           "habanalabs", nullptr, 4, 16, {{0, 32 * GiB, true}, {2, 1 * MiB, false}}};
// Broadcom/PLX PEX 97xx: a switch NVIDIA's driver recognises (policy's nvidia_common_switch).
const Product kSwitchPort{0x10b5, 0x9797, 0x10b5, 0x9797, 0xb0, 0x060400, Role::kBridge, "pcieport", nullptr, nullptr,
                          5, 16, {}};

struct Platform {  // one CPU vendor's root complex
  Product host_bridge, root_port, dummy_host_bridge, usb, sata, audio, misc;
  const char* cpu_vendor;
  int cpu_family, cpu_model;
  const char* cpu_model_name;
};

const Platform kAmd{
    {0x1022, 0x14a4, 0x1022, 0x14a4, 0x00, 0x060000, Role::kPlatform, nullptr, nullptr, nullptr, 0, 0, {}},
    {0x1022, 0x14ab, 0x1022, 0x1453, 0x01, 0x060400, Role::kBridge, "pcieport", nullptr, nullptr, 5, 16, {}},
    {0x1022, 0x149f, 0x1022, 0x149f, 0x00, 0x060000, Role::kPlatform, nullptr, nullptr, nullptr, 0, 0, {}},
    {0x1022, 0x15b6, 0x1022, 0x15b6, 0x00, 0x0c0330, Role::kPlatform, "xhci_hcd", "xhci_pci", nullptr, 0, 0,
     {{0, 1 * MiB, false}}},
    {0x1022, 0x7901, 0x1022, 0x7901, 0x91, 0x010601, Role::kPlatform, "ahci", "ahci", nullptr, 0, 0, {{4, 8 * KiB, false}}},
    {0x1022, 0x1487, 0x1022, 0xd102, 0x00, 0x040300, Role::kPlatform, "snd_hda_intel", "snd_hda_intel", nullptr, 0, 0,
     {{0, 32 * KiB, false}}},
    {0x1022, 0x14dc, 0x1022, 0x14dc, 0x00, 0x088000, Role::kPlatform, nullptr, nullptr, nullptr, 0, 0, {}},
    "AuthenticAMD", 25, 17, "AMD EPYC 9654 96-Core Processor"};

const Platform kIntel{
    {0x8086, 0x09a2, 0x8086, 0x0000, 0x04, 0x060000, Role::kPlatform, nullptr, nullptr, nullptr, 0, 0, {}},
    {0x8086, 0x347a, 0x8086, 0x0000, 0x04, 0x060400, Role::kBridge, "pcieport", nullptr, nullptr, 5, 16, {}},
    {0x8086, 0x09a3, 0x8086, 0x0000, 0x04, 0x060000, Role::kPlatform, nullptr, nullptr, nullptr, 0, 0, {}},
    {0x8086, 0xa1af, 0x8086, 0x7270, 0x09, 0x0c0330, Role::kPlatform, "xhci_hcd", "xhci_pci", nullptr, 0, 0,
     {{0, 64 * KiB, false}}},
    {0x8086, 0xa182, 0x8086, 0x7270, 0x09, 0x010601, Role::kPlatform, "ahci", "ahci", nullptr, 0, 0, {{4, 2 * KiB, false}}},
    {0x8086, 0xa1f0, 0x8086, 0x7270, 0x09, 0x040300, Role::kPlatform, "snd_hda_intel", "snd_hda_intel", nullptr, 0, 0,
     {{0, 16 * KiB, false}}},
    {0x8086, 0x0998, 0x8086, 0x0000, 0x00, 0x088000, Role::kPlatform, nullptr, nullptr, nullptr, 0, 0, {}},
    "GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8480+"};

// ---------------------------------------------------------------------------------------------
// Deterministic choices: splitmix64 of (seed, what is chosen, which one).

uint64_t mix(uint64_t seed, uint64_t salt, uint64_t index) {
  uint64_t z = seed ^ (salt * 0x9e3779b97f4a7c15ull) ^ (index * 0xbf58476d1ce4e5b9ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

enum Salt : uint64_t { kSaltEndpoint = 1, kSaltPlatform, kSaltAcs, kSaltSerial };

// Endpoint mix by weight: GPUs 4 (one in four AMD), NVMe 4, NICs 2, accelerators 2.
const Product& endpoint_product(uint64_t seed, uint64_t ordinal) {
  switch (mix(seed, kSaltEndpoint, ordinal) % 12) {
    case 0: case 1: case 2: return kNvidiaGpu;
    case 3: return kAmdGpu;
    case 4: case 5: case 6: case 7: return kNvme;
    case 8: case 9: return kNic;
    default: return kAccelerator;
  }
}

const Product& companion_of(const Product& p) {
  if (&p == &kNvidiaGpu) return kNvidiaAudio;
  if (&p == &kAmdGpu) return kAmdAudio;
  return p;  // dual-port NVMe and NICs, multi-function accelerators: the same function again
}

// Root-bus functions beside the host bridge: mostly uncore "system peripherals", as on servers.
const Product& platform_product(const Platform& cpu, uint64_t seed, uint64_t ordinal) {
  switch (mix(seed, kSaltPlatform, ordinal) % 16) {
    case 0: case 1: return cpu.dummy_host_bridge;
    case 2: return cpu.usb;
    case 3: return cpu.sata;
    case 4: return cpu.audio;
    default: return cpu.misc;
  }
}

bool is_p2p_relevant(const Product& p) {
  return p.role == Role::kGpu || p.role == Role::kNvme || p.role == Role::kNic || p.role == Role::kAccelerator;
}

// Functions an endpoint device brings (its PFs and their VFs), and how many of them matter for P2P.
struct DeviceSize {
  int functions = 0, p2p = 0;
};
DeviceSize device_size(const Product& main, int multifunction, int vfs) {
  DeviceSize s;
  for (int f = 0; f < multifunction; ++f) {
    const Product& p = f == 0 ? main : companion_of(main);
    int vf = p.vf_device ? vfs : 0;
    s.functions += 1 + vf;
    if (is_p2p_relevant(p)) s.p2p += 1 + vf;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Shape rules (docs/performance.md).

constexpr int kMaxDevicesPerBus = 32;
constexpr double kTargetP2pShare = 0.22;
constexpr int kDefaultPlatformPerHostBridge = 6;

// Bridges (and so buses) below and including one root port.
int bridges_per_root_port(int depth, int fanout) {
  int total = 1, switches = 1;
  for (int level = 0; level < depth; ++level) {
    total += switches * (1 + fanout);
    switches *= fanout;
  }
  return total;
}
int leaves_per_root_port(int depth, int fanout) {
  int leaves = 1;
  for (int level = 0; level < depth; ++level) leaves *= fanout;
  return leaves;
}
int buses_per_host_bridge(const Shape& s) { return 1 + s.root_ports * bridges_per_root_port(s.depth, s.fanout); }
// Root-bus slots left for platform functions: devices root_ports+1 .. 31, eight functions each.
int platform_capacity(int root_ports) { return (kMaxDevicesPerBus - 1 - root_ports) * 8; }

void check_range(const char* name, int value, int lo, int hi) {
  if (value < lo || value > hi) throw ShapeError(fmt::format("--{} {} is out of range {}..{}", name, value, lo, hi));
}

void check_shape(const Shape& s) {
  check_range("host-bridges", s.host_bridges, 1, 4096);
  check_range("root-ports", s.root_ports, 1, kMaxDevicesPerBus - 2);
  check_range("depth", s.depth, 0, 6);
  check_range("fanout", s.fanout, 1, kMaxDevicesPerBus);
  check_range("endpoints-per-port", s.endpoints_per_port, 1, kMaxDevicesPerBus);
  check_range("multifunction", s.multifunction, 1, 8);
  check_range("vfs", s.vfs, 0, 248);
  // VFs follow their PFs on the same bus (devfn after every endpoint device's eight functions).
  if (s.endpoints_per_port * 8 + s.endpoints_per_port * s.multifunction * s.vfs > 256)
    throw ShapeError(fmt::format("{} endpoint devices of {} functions with {} VFs each do not fit in one bus's 256 "
                                 "device/function numbers", s.endpoints_per_port, s.multifunction, s.vfs));
  if (buses_per_host_bridge(s) > 256)
    throw ShapeError(fmt::format("one host bridge would need {} buses (root ports x bridges below each): more than 256; "
                                 "lower --root-ports, --depth or --fanout", buses_per_host_bridge(s)));
  if (s.platform_functions > s.host_bridges * platform_capacity(s.root_ports))
    throw ShapeError(fmt::format("{} platform functions do not fit on {} root buses", s.platform_functions, s.host_bridges));
}

// Running totals over endpoint devices in creation order, so any candidate shape is counted in O(1).
struct EndpointPrefix {
  std::vector<int64_t> functions{0}, p2p{0};
  void extend(uint64_t seed, int multifunction, int vfs, size_t devices) {
    while (functions.size() <= devices) {
      DeviceSize d = device_size(endpoint_product(seed, functions.size() - 1), multifunction, vfs);
      functions.push_back(functions.back() + d.functions);
      p2p.push_back(p2p.back() + d.p2p);
    }
  }
};

struct Candidate {
  Shape shape;
  double score = 0;
};

// With --functions N: the unset host-bridge and root-port counts are searched for the tree whose
// P2P-relevant share is nearest 22% while platform functions make up the rest exactly.
Shape shape_for_functions(const Options& o, int n) {
  if (n < 1) throw ShapeError("--functions must be positive");
  std::optional<Candidate> best;
  EndpointPrefix prefix;
  std::vector<std::pair<int, int>> depth_fanout;
  if (o.depth || o.fanout) depth_fanout.push_back({o.depth.value_or(1), o.fanout.value_or(4)});
  else depth_fanout = {{1, 4}, {0, 1}};  // a switch under every root port; bare root ports for tiny trees
  for (auto [depth, fanout] : depth_fanout) {
    Shape s;
    s.depth = depth, s.fanout = fanout;
    s.endpoints_per_port = o.endpoints_per_port.value_or(1);
    s.multifunction = o.multifunction.value_or(1);
    s.vfs = o.vfs.value_or(4);
    int rp_lo = o.root_ports.value_or(1), rp_hi = o.root_ports.value_or(8);
    int hb_lo = o.host_bridges.value_or(1), hb_hi = o.host_bridges.value_or(4096);
    for (int hb = hb_lo; hb <= hb_hi; ++hb) {
      bool any_fits = false;
      for (int rp = rp_lo; rp <= rp_hi; ++rp) {
        s.host_bridges = hb, s.root_ports = rp, s.platform_functions = 0;
        int64_t bridges = int64_t{hb} * (1 + rp * int64_t{bridges_per_root_port(depth, fanout)});
        int64_t devices = int64_t{hb} * rp * leaves_per_root_port(depth, fanout) * s.endpoints_per_port;
        if (bridges + devices > n) continue;
        any_fits = true;
        prefix.extend(o.seed, s.multifunction, s.vfs, static_cast<size_t>(devices));
        int64_t core = bridges + prefix.functions[static_cast<size_t>(devices)];
        int64_t platform = n - core;
        if (platform < 0 || platform > int64_t{hb} * platform_capacity(rp) || buses_per_host_bridge(s) > 256) continue;
        s.platform_functions = static_cast<int>(platform);
        double share = static_cast<double>(prefix.p2p[static_cast<size_t>(devices)]) / n;
        // Anything within two points of the target is as good: then the fewest host bridges win.
        double score = std::max(0.0, std::abs(share - kTargetP2pShare) - 0.02);
        if (!best || score < best->score - 1e-12) best = Candidate{s, score};
      }
      if (!any_fits) break;  // more host bridges only add functions
    }
    if (best) break;
  }
  if (!best)
    throw ShapeError(fmt::format("no tree of the requested shape has exactly {} functions; relax the shape options "
                                 "or change --functions", n));
  return best->shape;
}

Shape choose_shape(const Options& o) {
  Shape s;
  if (o.functions) {
    s = shape_for_functions(o, *o.functions);
  } else {
    s.host_bridges = o.host_bridges.value_or(2);
    s.root_ports = o.root_ports.value_or(4);
    s.depth = o.depth.value_or(1);
    s.fanout = o.fanout.value_or(4);
    s.endpoints_per_port = o.endpoints_per_port.value_or(1);
    s.multifunction = o.multifunction.value_or(1);
    s.vfs = o.vfs.value_or(4);
    s.platform_functions =
        s.host_bridges * std::min(kDefaultPlatformPerHostBridge, std::max(0, platform_capacity(s.root_ports)));
  }
  check_shape(s);
  return s;
}

// ---------------------------------------------------------------------------------------------
// The planned tree.

enum class Kind { kHostBridge, kPlatform, kRootPort, kSwitchUpstream, kSwitchDownstream, kEndpoint, kVirtualFunction };

struct Bar {
  int index;
  uint64_t start, size;
  bool prefetchable;
};

struct Fn {
  uint32_t domain = 0;
  uint8_t bus = 0, dev = 0, fn = 0;
  Kind kind = Kind::kEndpoint;
  const Product* product = nullptr;
  int parent = -1, physfn = -1;  // a VF's parent is its PF's parent, as sysfs nests it
  std::vector<int> virtfns;
  uint8_t secondary = 0, subordinate = 0;
  bool acs_redirect = false;
  bool multifunction = false;
  std::vector<Bar> bars;
  uint64_t iov_start = 0;                    // PFs: the VF BAR 0 region
  uint64_t window_start = 1, window_end = 0; // bridges: prefetchable window, disabled when end < start
  int iommu_group = 0, numa_node = 0, irq = 0, port_number = 0, slot = 0;
  int link_gen = 0, link_width = 0;          // current link; the product gives the maximum
  uint16_t vf_offset = 0;
  int depth = 0;                             // BDF components in its sysfs path
  std::string dir;                           // "sys/devices/pci0000:00/0000:00:01.0/..."

  std::string bdf() const { return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, dev, fn); }
  bool is_bridge() const {
    return kind == Kind::kRootPort || kind == Kind::kSwitchUpstream || kind == Kind::kSwitchDownstream;
  }
  bool has_acs() const { return kind == Kind::kRootPort || kind == Kind::kSwitchDownstream; }
};

constexpr uint64_t kMmioBase = uint64_t{1} << 40;  // 64-bit MMIO above 1 TiB
constexpr uint64_t kWindowGranule = MiB;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

struct Machine::Plan {
  Options options;
  Shape shape;
  Counts counts;
  const Platform* cpu = nullptr;
  std::vector<Fn> fns;  // creation order: parents before children, PFs before their VFs
  std::vector<std::string> host_bridge_dirs;
  std::vector<std::vector<int>> groups;  // IOMMU group -> functions
  int numa_nodes = 1;

  // Building state.
  uint64_t mmio = kMmioBase;
  int next_bus = 0;  // within the current host bridge's range
  uint64_t endpoint_ordinal = 0, platform_ordinal = 0;
  int slots = 0;

  void build();
  void add_host_bridge(uint32_t domain, uint8_t root_bus, int platform_functions);
  int add(Fn f, int parent);
  int add_port(Kind kind, int parent, uint32_t domain, uint8_t bus, uint8_t dev, int port_number);
  void below_port(int port, int levels_left);
  void add_endpoints(int port);
  void allocate_bars(Fn& f, int vfs);
  void assign_group(int i);
};

namespace {

std::string bdf_dir_name(uint32_t domain, int bus, int dev, int fn) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, dev, fn);
}

}  // namespace

int Machine::Plan::add(Fn f, int parent) {
  f.parent = parent;
  const std::string& above = parent >= 0 ? fns[static_cast<size_t>(parent)].dir : host_bridge_dirs.back();
  f.depth = parent >= 0 ? fns[static_cast<size_t>(parent)].depth + 1 : 1;
  f.dir = above + "/" + bdf_dir_name(f.domain, f.bus, f.dev, f.fn);
  f.numa_node = static_cast<int>(host_bridge_dirs.size() - 1) * numa_nodes / shape.host_bridges;
  f.irq = f.kind == Kind::kVirtualFunction ? 0 : 24 + static_cast<int>(fns.size() % 200);
  if (!f.is_bridge()) f.link_gen = f.product->link_gen, f.link_width = f.product->link_width;
  fns.push_back(std::move(f));
  int i = static_cast<int>(fns.size() - 1);
  assign_group(i);
  return i;
}

// Groups follow ACS the way the kernel's pci_device_group() roughly does: a root port, a bridge
// below a port with redirect on, and each endpoint device (or VF) below such a port is isolated;
// anything else shares its upstream port's group. Root-bus functions are isolated.
void Machine::Plan::assign_group(int i) {
  Fn& f = fns[static_cast<size_t>(i)];
  auto fresh = [&] {
    groups.emplace_back();
    return static_cast<int>(groups.size() - 1);
  };
  if (f.parent < 0) {
    f.iommu_group = fresh();
  } else {
    const Fn& up = fns[static_cast<size_t>(f.parent)];
    bool isolated = f.kind == Kind::kSwitchDownstream ? f.acs_redirect : up.acs_redirect;
    if (!isolated) f.iommu_group = up.iommu_group;
    else if (f.kind == Kind::kEndpoint && f.fn > 0) f.iommu_group = fns[static_cast<size_t>(i - f.fn)].iommu_group;
    else f.iommu_group = fresh();
  }
  groups[static_cast<size_t>(f.iommu_group)].push_back(i);
}

void Machine::Plan::allocate_bars(Fn& f, int vfs) {
  for (const auto& spec : f.product->bars) {
    mmio = align_up(mmio, spec.size);
    f.bars.push_back({spec.index, mmio, spec.size, spec.prefetchable});
    mmio += spec.size;
  }
  if (f.product->vf_device && vfs > 0) {
    mmio = align_up(mmio, f.product->vf_bar_size);
    f.iov_start = mmio;
    mmio += f.product->vf_bar_size * static_cast<uint64_t>(vfs);
  }
}

int Machine::Plan::add_port(Kind kind, int parent, uint32_t domain, uint8_t bus, uint8_t dev, int port_number) {
  Fn f;
  f.domain = domain, f.bus = bus, f.dev = dev, f.kind = kind;
  f.product = kind == Kind::kRootPort ? &cpu->root_port : &kSwitchPort;
  f.secondary = f.subordinate = static_cast<uint8_t>(++next_bus);
  f.port_number = port_number;
  if (kind != Kind::kSwitchUpstream) f.slot = ++slots;
  switch (options.acs) {
    case AcsMode::kOn: f.acs_redirect = true; break;
    case AcsMode::kOff: f.acs_redirect = false; break;
    case AcsMode::kMixed:
      f.acs_redirect = mix(options.seed, kSaltAcs, (uint64_t{domain} << 16) | (bus << 8) | (dev << 3)) & 1;
      break;
  }
  if (kind == Kind::kSwitchUpstream) f.acs_redirect = false;  // upstream ports have no ACS
  f.link_gen = f.product->link_gen, f.link_width = f.product->link_width;
  int i = add(std::move(f), parent);
  mmio = align_up(mmio, kWindowGranule);
  fns[static_cast<size_t>(i)].window_start = mmio;
  return i;
}

// Closes a bridge: its bus range and prefetchable window now cover everything added below it.
namespace {
void close_bridge(Fn& b, int last_bus, uint64_t& mmio) {
  b.subordinate = static_cast<uint8_t>(last_bus);
  mmio = align_up(mmio, kWindowGranule);
  if (mmio > b.window_start) b.window_end = mmio - 1;
  else b.window_start = 1, b.window_end = 0;
}
}  // namespace

void Machine::Plan::below_port(int port, int levels_left) {
  if (levels_left == 0) {
    add_endpoints(port);
  } else {
    const Fn& p = fns[static_cast<size_t>(port)];
    int up = add_port(Kind::kSwitchUpstream, port, p.domain, p.secondary, 0, 0);
    for (int d = 0; d < shape.fanout; ++d) {
      const Fn& u = fns[static_cast<size_t>(up)];
      int down = add_port(Kind::kSwitchDownstream, up, u.domain, u.secondary, static_cast<uint8_t>(d), d + 1);
      below_port(down, levels_left - 1);
    }
    close_bridge(fns[static_cast<size_t>(up)], next_bus, mmio);
  }
  close_bridge(fns[static_cast<size_t>(port)], next_bus, mmio);
}

void Machine::Plan::add_endpoints(int port) {
  const uint32_t domain = fns[static_cast<size_t>(port)].domain;
  const uint8_t bus = fns[static_cast<size_t>(port)].secondary;
  std::vector<int> pfs;
  for (int e = 0; e < shape.endpoints_per_port; ++e) {
    const Product& main = endpoint_product(options.seed, endpoint_ordinal++);
    for (int f = 0; f < shape.multifunction; ++f) {
      Fn fn;
      fn.domain = domain, fn.bus = bus, fn.dev = static_cast<uint8_t>(e), fn.fn = static_cast<uint8_t>(f);
      fn.kind = Kind::kEndpoint;
      fn.product = f == 0 ? &main : &companion_of(main);
      fn.multifunction = shape.multifunction > 1;
      allocate_bars(fn, shape.vfs);
      int i = add(std::move(fn), port);
      if (fns[static_cast<size_t>(i)].product->vf_device && shape.vfs > 0) pfs.push_back(i);
    }
    if (e == 0) {  // the link the port trained with its device 0
      Fn& p = fns[static_cast<size_t>(port)];
      p.link_gen = std::min(p.product->link_gen, main.link_gen);
      p.link_width = std::min(p.product->link_width, main.link_width);
    }
  }
  int devfn = shape.endpoints_per_port * 8;  // VFs after every PF (check_shape keeps this below 256)
  for (int pf : pfs) {
    for (int v = 0; v < shape.vfs; ++v, ++devfn) {
      Fn vf;
      vf.domain = domain, vf.bus = bus, vf.dev = static_cast<uint8_t>(devfn >> 3), vf.fn = static_cast<uint8_t>(devfn & 7);
      vf.kind = Kind::kVirtualFunction;
      vf.product = &kNicVf;
      vf.physfn = pf;
      const Fn& p = fns[static_cast<size_t>(pf)];
      vf.bars.push_back({0, p.iov_start + static_cast<uint64_t>(v) * p.product->vf_bar_size, p.product->vf_bar_size, true});
      if (v == 0) fns[static_cast<size_t>(pf)].vf_offset = static_cast<uint16_t>(devfn - (p.dev << 3 | p.fn));
      int i = add(std::move(vf), port);
      fns[static_cast<size_t>(pf)].virtfns.push_back(i);
    }
  }
}

void Machine::Plan::add_host_bridge(uint32_t domain, uint8_t root_bus, int platform_functions) {
  host_bridge_dirs.push_back(fmt::format("sys/devices/pci{:04x}:{:02x}", domain, root_bus));
  next_bus = root_bus;
  Fn hb;
  hb.domain = domain, hb.bus = root_bus, hb.kind = Kind::kHostBridge, hb.product = &cpu->host_bridge;
  add(std::move(hb), -1);
  for (int r = 0; r < shape.root_ports; ++r) {
    int rp = add_port(Kind::kRootPort, -1, domain, root_bus, static_cast<uint8_t>(r + 1), r + 1);
    below_port(rp, shape.depth);
  }
  for (int k = 0; k < platform_functions; ++k) {
    Fn f;
    f.domain = domain, f.bus = root_bus;
    f.dev = static_cast<uint8_t>(shape.root_ports + 1 + k / 8), f.fn = static_cast<uint8_t>(k % 8);
    f.kind = Kind::kPlatform;
    f.product = &platform_product(*cpu, options.seed, platform_ordinal++);
    f.multifunction = std::min(8, platform_functions - k / 8 * 8) > 1;  // the device's function count
    allocate_bars(f, 0);
    add(std::move(f), -1);
  }
}

// Host bridges take consecutive bus ranges (rounded to 16, as firmware does) of one domain
// until it is full, then the next domain.
void Machine::Plan::build() {
  cpu = options.cpu == CpuVendor::kAmd ? &kAmd : &kIntel;
  numa_nodes = shape.host_bridges >= 2 ? 2 : 1;
  const int need = buses_per_host_bridge(shape);
  uint32_t domain = 0;
  int bus = 0;
  for (int h = 0; h < shape.host_bridges; ++h) {
    int aligned = (bus + 15) / 16 * 16;
    if (aligned + need > 256) aligned = bus;
    if (aligned + need > 256) ++domain, aligned = 0;
    int platform = shape.platform_functions / shape.host_bridges + (h < shape.platform_functions % shape.host_bridges);
    add_host_bridge(domain, static_cast<uint8_t>(aligned), platform);
    bus = aligned + need;
  }
  for (const Fn& f : fns) {
    ++counts.functions;
    switch (f.kind) {
      case Kind::kHostBridge: ++counts.host_bridges; break;
      case Kind::kPlatform: ++counts.platform; break;
      case Kind::kRootPort: ++counts.root_ports; break;
      case Kind::kSwitchUpstream: ++counts.switch_upstream; break;
      case Kind::kSwitchDownstream: ++counts.switch_downstream; break;
      case Kind::kEndpoint: ++counts.endpoints; break;
      case Kind::kVirtualFunction: ++counts.vfs; break;
    }
    if (is_p2p_relevant(*f.product)) ++counts.p2p_relevant;
  }
}

// ---------------------------------------------------------------------------------------------
// Rendering: config space and sysfs attributes.

namespace {

class ConfigSpace {
 public:
  void put8(int at, unsigned v) { b_[static_cast<size_t>(at)] = static_cast<char>(v & 0xff); }
  void put16(int at, unsigned v) { put8(at, v), put8(at + 1, v >> 8); }
  void put32(int at, uint32_t v) { put16(at, v & 0xffff), put16(at + 2, v >> 16); }
  uint32_t get32(int at) const {
    uint32_t v = 0;
    for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<uint8_t>(b_[static_cast<size_t>(at + k)]);
    return v;
  }
  // Extended capabilities from 0x100, each linked from the one before.
  int add_ext(uint16_t id, unsigned version, int size) {
    if (last_ext_) put32(last_ext_, (get32(last_ext_) & 0xfffff) | (uint32_t(next_ext_) << 20));
    int at = last_ext_ = next_ext_;
    put32(at, id | (version << 16));
    next_ext_ += size;
    return at;
  }
  const std::string& bytes() const { return b_; }

 private:
  std::string b_ = std::string(4096, '\0');
  int last_ext_ = 0, next_ext_ = 0x100;
};

int pcie_type(Kind k) {
  switch (k) {
    case Kind::kRootPort: return 0x4;
    case Kind::kSwitchUpstream: return 0x5;
    case Kind::kSwitchDownstream: return 0x6;
    case Kind::kHostBridge: case Kind::kPlatform: return 0x9;  // root complex integrated endpoint
    default: return 0x0;
  }
}

void put_bar(ConfigSpace& c, int reg, uint64_t start, bool prefetchable) {
  c.put32(reg, static_cast<uint32_t>(start & 0xfffffff0u) | 0x4 | (prefetchable ? 0x8 : 0));
  c.put32(reg + 4, static_cast<uint32_t>(start >> 32));
}

std::string render_config(const Fn& f, const Options& o, size_t index) {
  const Product& p = *f.product;
  const bool vf = f.kind == Kind::kVirtualFunction, bridge = f.is_bridge();
  ConfigSpace c;
  c.put16(0x00, p.vendor);
  c.put16(0x02, p.device);
  c.put16(0x04, vf ? 0x0000 : 0x0406);  // memory space, bus master, INTx off (a VF's enables live in its PF)
  c.put16(0x06, 0x0010);                // capability list
  c.put8(0x08, p.revision);
  c.put8(0x09, p.class_code & 0xff);
  c.put16(0x0a, p.class_code >> 8);
  c.put8(0x0c, vf ? 0 : 0x10);
  c.put8(0x0e, (bridge ? 1 : 0) | (f.multifunction ? 0x80 : 0));
  if (bridge) {
    c.put8(0x18, f.bus), c.put8(0x19, f.secondary), c.put8(0x1a, f.subordinate);
    c.put8(0x1c, 0xf0), c.put8(0x1d, 0x00);        // I/O window off
    c.put16(0x20, 0xfff0), c.put16(0x22, 0x0000);  // 32-bit window off: every BAR sits above 4 GiB
    if (f.window_end >= f.window_start) {
      c.put16(0x24, ((f.window_start >> 16) & 0xfff0) | 1);
      c.put16(0x26, ((f.window_end >> 16) & 0xfff0) | 1);
      c.put32(0x28, static_cast<uint32_t>(f.window_start >> 32));
      c.put32(0x2c, static_cast<uint32_t>(f.window_end >> 32));
    } else {
      c.put16(0x24, 0xfff1), c.put16(0x26, 0x0001);
    }
  } else {
    for (const auto& b : f.bars) put_bar(c, 0x10 + 4 * b.index, b.start, b.prefetchable);
    c.put16(0x2c, p.subsystem_vendor);
    c.put16(0x2e, p.subsystem_device);
  }
  c.put8(0x34, 0x40);
  c.put8(0x3c, f.irq & 0xff);
  c.put8(0x3d, vf ? 0 : 1);

  // PCI Express capability, v2.
  const int type = pcie_type(f.kind);
  const bool has_link = p.link_gen > 0, has_slot = f.kind == Kind::kRootPort || f.kind == Kind::kSwitchDownstream;
  c.put8(0x40, 0x10);
  c.put8(0x41, vf ? 0 : 0x80);
  c.put16(0x42, 0x2 | (type << 4) | (has_slot ? 0x100 : 0));
  c.put32(0x44, bridge ? 0x00008022 : 0x10008fe2);  // MPS 512, extended tags, role-based errors (+FLR)
  c.put16(0x48, 0x2930);                             // MPS 256, MRRS 512, relaxed ordering, no snoop
  if (has_link && !vf) {
    uint32_t lnkcap = static_cast<uint32_t>(p.link_gen) | (static_cast<uint32_t>(p.link_width) << 4) | 0x0003f800u |
                      (bridge && f.kind != Kind::kSwitchUpstream ? 0x00100000u : 0) |
                      (static_cast<uint32_t>(f.port_number & 0xff) << 24);
    c.put32(0x4c, lnkcap);
    c.put16(0x50, 0x0040);  // common clock
    c.put16(0x52, static_cast<unsigned>(f.link_gen | (f.link_width << 4) | 0x1000 |
                                        (bridge && f.kind != Kind::kSwitchUpstream ? 0x2000 : 0)));
    c.put32(0x6c, ((1u << p.link_gen) - 1) << 1);  // supported speeds
    c.put16(0x70, static_cast<unsigned>(p.link_gen));
  }
  if (has_slot) {
    c.put32(0x54, static_cast<uint32_t>(f.slot) << 19);
    c.put16(0x5a, 0x0040);  // presence detected
  }
  c.put32(0x64, bridge ? 0x0000003f : 0x0000001f);  // completion timeouts; ports forward ARI
  if (!vf) {
    c.put8(0x80, 0x01);  // power management, v3
    c.put8(0x81, bridge ? 0x90 : 0x00);
    c.put16(0x82, 0x0003);
    c.put16(0x84, 0x0008);
    if (bridge) {  // bridges carry their subsystem IDs in a capability
      c.put8(0x90, 0x0d);
      c.put16(0x94, p.subsystem_vendor);
      c.put16(0x96, p.subsystem_device);
    }
  }

  if (f.kind == Kind::kHostBridge || f.kind == Kind::kPlatform || vf) return c.bytes();
  int aer = c.add_ext(0x0001, 2, 0x48);
  c.put32(aer + 0x0c, 0x00462030);  // the default uncorrectable severities
  if (f.has_acs()) {
    int acs = c.add_ext(0x000d, 1, 8);
    c.put16(acs + 4, 0x001f);  // SV TB RR CR UF
    c.put16(acs + 6, f.acs_redirect ? 0x001d : 0x0011);  // SV RR CR UF, or SV UF as with disable_acs_redir
  }
  if (f.kind == Kind::kEndpoint) {
    int dsn = c.add_ext(0x0003, 1, 0x0c);
    uint64_t serial = mix(o.seed, kSaltSerial, index);
    c.put32(dsn + 4, static_cast<uint32_t>(serial));
    c.put32(dsn + 8, static_cast<uint32_t>(serial >> 32));
    if (p.vf_device) {
      c.add_ext(0x000e, 1, 8);  // ARI: VFs beyond function 7
      if (!f.virtfns.empty()) {
        int sriov = c.add_ext(0x0010, 1, 0x40);
        auto vfs = static_cast<unsigned>(f.virtfns.size());
        c.put16(sriov + 0x08, 0x0019);  // VF enable, VF memory space, ARI capable hierarchy
        c.put16(sriov + 0x0c, vfs), c.put16(sriov + 0x0e, vfs), c.put16(sriov + 0x10, vfs);
        c.put16(sriov + 0x14, f.vf_offset), c.put16(sriov + 0x16, 1);
        c.put16(sriov + 0x1a, p.vf_device);
        c.put32(sriov + 0x1c, 0x00000553), c.put32(sriov + 0x20, 1);
        put_bar(c, sriov + 0x24, f.iov_start, true);
      }
    }
  }
  return c.bytes();
}

std::string resource_line(uint64_t start, uint64_t size, uint64_t flags) {
  if (!size) return "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
  return fmt::format("0x{:016x} 0x{:016x} 0x{:016x}\n", start, start + size - 1, flags);
}

// The kernel's `resource`: six BARs, the ROM and six IOV BARs; bridges add their four windows.
std::string render_resource(const Fn& f) {
  constexpr uint64_t kPref64 = 0x14220c, kMem64 = 0x140204, kBridgePref64 = 0x102201;
  std::array<std::string, 17> lines;
  lines.fill(resource_line(0, 0, 0));
  for (const auto& b : f.bars) lines[static_cast<size_t>(b.index)] = resource_line(b.start, b.size, b.prefetchable ? kPref64 : kMem64);
  if (!f.virtfns.empty())
    lines[7] = resource_line(f.iov_start, f.product->vf_bar_size * f.virtfns.size(), kPref64);
  size_t count = 13;
  if (f.is_bridge()) {
    count = 17;
    if (f.window_end >= f.window_start) lines[15] = resource_line(f.window_start, f.window_end - f.window_start + 1, kBridgePref64);
  }
  std::string out;
  for (size_t k = 0; k < count; ++k) out += lines[k];
  return out;
}

const char* speed_name(int gen) {
  static const char* kNames[] = {"Unknown", "2.5 GT/s PCIe", "5.0 GT/s PCIe", "8.0 GT/s PCIe", "16.0 GT/s PCIe",
                                 "32.0 GT/s PCIe", "64.0 GT/s PCIe"};
  return gen >= 0 && gen <= 6 ? kNames[gen] : "Unknown";
}

std::string ups(int n) {
  std::string s;
  for (int k = 0; k < n; ++k) s += "../";
  return s;
}

// ---------------------------------------------------------------------------------------------
// Where the tree goes: a directory or a tarball, entries in one fixed order.

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void directory(const std::string& rel) = 0;
  virtual void file(const std::string& rel, std::string_view data) = 0;
  virtual void symlink(const std::string& rel, const std::string& target) = 0;
};

class DirectorySink : public Sink {
 public:
  explicit DirectorySink(const std::string& root) : root_(root + "/") {}
  void directory(const std::string& rel) override {
    path_ = root_ + rel;
    if (::mkdir(path_.c_str(), 0755) != 0) fail("cannot create directory");
  }
  void file(const std::string& rel, std::string_view data) override {
    path_ = root_ + rel;
    int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) fail("cannot create");
    for (size_t done = 0; done < data.size();) {
      ssize_t n = ::write(fd, data.data() + done, data.size() - done);
      if (n <= 0) {
        ::close(fd);
        fail("cannot write");
      }
      done += static_cast<size_t>(n);
    }
    if (::close(fd) != 0) fail("cannot write");
  }
  void symlink(const std::string& rel, const std::string& target) override {
    path_ = root_ + rel;
    if (::symlink(target.c_str(), path_.c_str()) != 0) fail("cannot create link");
  }

 private:
  [[noreturn]] void fail(const char* what) { throw std::runtime_error(fmt::format("{}: {}: {}", path_, what, std::strerror(errno))); }
  std::string root_, path_;
};

class TarSink : public Sink {
 public:
  explicit TarSink(const std::string& file)
      : la_(archive_library("write", file)), file_(file), a_(la_.archive_write_new()), e_(la_.archive_entry_new()) {
    la_.archive_write_add_filter_gzip(a_);
    la_.archive_write_set_filter_option(a_, "gzip", "timestamp", nullptr);  // no time in the gzip header
    la_.archive_write_set_format_pax_restricted(a_);
    if (la_.archive_write_open_filename(a_, file.c_str()) != ARCHIVE_OK) fail();
  }
  ~TarSink() override {
    la_.archive_entry_free(e_);
    if (a_) la_.archive_write_free(a_);
  }
  TarSink(const TarSink&) = delete;
  TarSink& operator=(const TarSink&) = delete;
  void directory(const std::string& rel) override { entry(rel, AE_IFDIR, 0755, {}, nullptr); }
  void file(const std::string& rel, std::string_view data) override { entry(rel, AE_IFREG, 0644, data, nullptr); }
  void symlink(const std::string& rel, const std::string& target) override {
    entry(rel, AE_IFLNK, 0777, {}, target.c_str());
  }
  void close() {
    if (la_.archive_write_close(a_) != ARCHIVE_OK) fail();
    la_.archive_write_free(a_);
    a_ = nullptr;
  }

 private:
  void entry(const std::string& name, unsigned type, unsigned perm, std::string_view data, const char* link) {
    la_.archive_entry_clear(e_);
    la_.archive_entry_set_pathname(e_, name.c_str());
    la_.archive_entry_set_filetype(e_, type);
    la_.archive_entry_set_perm(e_, perm);
    la_.archive_entry_set_size(e_, static_cast<la_int64_t>(data.size()));
    la_.archive_entry_set_mtime(e_, 0, 0);
    if (link) la_.archive_entry_set_symlink(e_, link);
    if (la_.archive_write_header(a_, e_) != ARCHIVE_OK) fail();
    if (!data.empty() && la_.archive_write_data(a_, data.data(), data.size()) < 0) fail();
  }
  [[noreturn]] void fail() {
    const char* why = la_.archive_error_string(a_);
    throw std::runtime_error(fmt::format("{}: {}", file_, why ? why : "cannot write the archive"));
  }
  const ArchiveLibrary& la_;
  std::string file_;
  struct archive* a_;
  struct archive_entry* e_;
};

std::string hex(unsigned v, int digits) { return fmt::format("0x{:0{}x}\n", v, digits); }

std::string cpuinfo(const Platform& cpu, int numa_nodes) {
  std::string out;
  for (int cpu_index = 0; cpu_index < numa_nodes; ++cpu_index)
    out += fmt::format(
        "processor\t: {}\nvendor_id\t: {}\ncpu family\t: {}\nmodel\t\t: {}\nmodel name\t: {}\nstepping\t: 1\n"
        "physical id\t: {}\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush "
        "mmx fxsr sse sse2 ht syscall nx pdpe1gb rdtscp lm constant_tsc nopl xtopology cpuid pni pclmulqdq ssse3 fma "
        "cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm abm avx2 bmi1 bmi2 avx512f\n"
        "address sizes\t: 52 bits physical, 57 bits virtual\n\n",
        cpu_index, cpu.cpu_vendor, cpu.cpu_family, cpu.cpu_model, cpu.cpu_model_name, cpu_index);
  return out;
}

void emit(const Machine::Plan& m, Sink& out) {
  const Options& o = m.options;
  const Platform& cpu = *m.cpu;
  for (const char* d : {"boot", "proc", "proc/sys", "proc/sys/kernel", "sys", "sys/bus", "sys/bus/pci",
                        "sys/bus/pci/devices", "sys/bus/pci/drivers", "sys/devices", "sys/kernel",
                        "sys/kernel/iommu_groups", "sys/module"})
    out.directory(d);
  out.file("boot/config-" + o.kernel,
           "CONFIG_PCI=y\nCONFIG_PCIEPORTBUS=y\nCONFIG_PCI_IOV=y\nCONFIG_PCI_P2PDMA=y\nCONFIG_IOMMU_SUPPORT=y\n");
  out.file("proc/cpuinfo", cpuinfo(cpu, m.numa_nodes));
  out.file("proc/cmdline", fmt::format("BOOT_IMAGE=/boot/vmlinuz-{} root=/dev/nvme0n1p2 ro quiet{}\n", o.kernel,
                                       o.cpu == CpuVendor::kIntel ? " intel_iommu=on" : ""));
  out.file("proc/version", fmt::format("Linux version {} (synth@p2paudit-synth) (gcc (Debian 12.2.0-14) 12.2.0, GNU ld "
                                       "(GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC\n", o.kernel));
  out.file("proc/sys/kernel/osrelease", o.kernel + "\n");
  out.file("proc/sys/kernel/hostname", o.hostname + "\n");

  // Drivers and the modules they live in.
  std::map<std::string, const Product*> drivers;
  for (const Fn& f : m.fns)
    if (f.product->driver) drivers.emplace(f.product->driver, f.product);
  std::set<std::string> modules;
  for (const auto& [driver, p] : drivers) {
    out.directory("sys/bus/pci/drivers/" + driver);
    if (p->module) out.symlink("sys/bus/pci/drivers/" + driver + "/module", std::string("../../../../module/") + p->module);
    if (p->module && modules.insert(p->module).second) {
      out.directory(std::string("sys/module/") + p->module);
      out.file(std::string("sys/module/") + p->module + "/initstate", "live\n");
      if (p->module_version) out.file(std::string("sys/module/") + p->module + "/version", std::string(p->module_version) + "\n");
    }
  }

  for (size_t g = 0; g < m.groups.size(); ++g) {
    std::string dir = fmt::format("sys/kernel/iommu_groups/{}", g);
    out.directory(dir);
    out.directory(dir + "/devices");
    out.file(dir + "/type", "DMA-FQ\n");
    for (int i : m.groups[g]) {
      const Fn& f = m.fns[static_cast<size_t>(i)];
      out.symlink(dir + "/devices/" + f.bdf(), "../../../../devices/" + f.dir.substr(std::strlen("sys/devices/")));
    }
  }

  size_t next_host_bridge = 0;
  for (size_t i = 0; i < m.fns.size(); ++i) {
    const Fn& f = m.fns[i];
    const Product& p = *f.product;
    if (f.kind == Kind::kHostBridge) out.directory(m.host_bridge_dirs[next_host_bridge++]);
    const std::string d = f.dir + "/";
    out.directory(f.dir);
    out.file(d + "config", render_config(f, o, i));
    out.file(d + "resource", render_resource(f));
    out.file(d + "vendor", hex(p.vendor, 4));
    out.file(d + "device", hex(p.device, 4));
    out.file(d + "class", hex(p.class_code, 6));
    out.file(d + "subsystem_vendor", hex(p.subsystem_vendor, 4));
    out.file(d + "subsystem_device", hex(p.subsystem_device, 4));
    out.file(d + "revision", hex(p.revision, 2));
    out.file(d + "irq", fmt::format("{}\n", f.irq));
    out.file(d + "numa_node", fmt::format("{}\n", f.numa_node));
    out.file(d + "local_cpulist", fmt::format("{}-{}\n", f.numa_node * 96, f.numa_node * 96 + 95));
    out.file(d + "enable", (p.driver || f.is_bridge()) ? "1\n" : "0\n");
    out.file(d + "modalias", fmt::format("pci:v{:08X}d{:08X}sv{:08X}sd{:08X}bc{:02X}sc{:02X}i{:02X}\n", p.vendor,
                                         p.device, p.subsystem_vendor, p.subsystem_device, p.class_code >> 16,
                                         (p.class_code >> 8) & 0xff, p.class_code & 0xff));
    if (p.link_gen > 0 && f.kind != Kind::kVirtualFunction) {
      out.file(d + "current_link_speed", fmt::format("{}\n", speed_name(f.link_gen)));
      out.file(d + "current_link_width", fmt::format("{}\n", f.link_width));
      out.file(d + "max_link_speed", fmt::format("{}\n", speed_name(p.link_gen)));
      out.file(d + "max_link_width", fmt::format("{}\n", p.link_width));
    }
    if (f.is_bridge()) {
      out.file(d + "secondary_bus_number", fmt::format("{}\n", f.secondary));
      out.file(d + "subordinate_bus_number", fmt::format("{}\n", f.subordinate));
    }
    if (p.vram) {
      out.file(d + "mem_info_vram_total", fmt::format("{}\n", p.vram));
      out.file(d + "mem_info_vis_vram_total", fmt::format("{}\n", p.vram));
    }
    if (!f.virtfns.empty()) {
      out.file(d + "sriov_totalvfs", fmt::format("{}\n", f.virtfns.size()));
      out.file(d + "sriov_numvfs", fmt::format("{}\n", f.virtfns.size()));
      out.file(d + "sriov_offset", fmt::format("{}\n", f.vf_offset));
      out.file(d + "sriov_stride", "1\n");
      out.file(d + "sriov_vf_device", fmt::format("{:04x}\n", p.vf_device));
      for (size_t v = 0; v < f.virtfns.size(); ++v)
        out.symlink(d + fmt::format("virtfn{}", v), "../" + m.fns[static_cast<size_t>(f.virtfns[v])].bdf());
    }
    if (f.physfn >= 0) out.symlink(d + "physfn", "../" + m.fns[static_cast<size_t>(f.physfn)].bdf());
    // Relative as the kernel makes them: up through the BDF directories, pciDDDD:BB and devices/.
    const std::string to_sys = ups(f.depth + 2);
    if (p.driver) out.symlink(d + "driver", to_sys + "bus/pci/drivers/" + p.driver);
    out.symlink(d + "iommu_group", to_sys + fmt::format("kernel/iommu_groups/{}", f.iommu_group));
  }

  std::vector<const Fn*> by_bdf;
  for (const Fn& f : m.fns) by_bdf.push_back(&f);
  std::sort(by_bdf.begin(), by_bdf.end(), [](const Fn* a, const Fn* b) {
    return std::tie(a->domain, a->bus, a->dev, a->fn) < std::tie(b->domain, b->bus, b->dev, b->fn);
  });
  for (const Fn* f : by_bdf)
    out.symlink("sys/bus/pci/devices/" + f->bdf(), "../../../devices/" + f->dir.substr(std::strlen("sys/devices/")));
}

}  // namespace

Machine Machine::plan(const Options& options) {
  auto p = std::make_unique<Plan>();
  p->options = options;
  p->shape = choose_shape(options);
  p->build();
  return Machine(std::move(p));
}

Machine::Machine(std::unique_ptr<Plan> plan) : plan_(std::move(plan)) {}
Machine::~Machine() = default;
Machine::Machine(Machine&&) noexcept = default;
Machine& Machine::operator=(Machine&&) noexcept = default;
const Shape& Machine::shape() const { return plan_->shape; }
const Counts& Machine::counts() const { return plan_->counts; }

void Machine::write_directory(const std::string& dir) const {
  DirectorySink sink(dir);
  emit(*plan_, sink);
}

void Machine::write_tarball(const std::string& file) const {
  TarSink sink(file);
  emit(*plan_, sink);
  sink.close();
}

}  // namespace p2paudit::synth
