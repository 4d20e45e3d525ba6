// SPDX-License-Identifier: GPL-2.0-or-later
// nv_grdma_pci_topology_supported() (NVIDIA open-gpu-kernel-modules kernel-open/nvidia/nv-pci.c), offline.
#include "p2paudit/policy/nvidia_third_party.h"

#include <algorithm>
#include <array>
#include <vector>

#include "p2paudit/device_class.h"

namespace p2paudit::policy {

namespace {

struct ChipsetEntry {
  uint16_t vendor, device;
  const char* cs;
};

// NVIDIA's chipsetInfo[] in source order (src/nvidia/arch/nvalloc/common/inc/nvcst.h, 595.45.04;
// vendor-p2p-gates.md Appendix A, 201 rows): the search takes the first entry present.
constexpr ChipsetEntry kChipsets[] = {
    {0x8086, 0x2580, "CS_INTEL_2580"}, {0x8086, 0x2584, "CS_INTEL_2584"}, {0x8086, 0x2588, "CS_INTEL_2588"},
    {0x8086, 0x2590, "CS_INTEL_2590"}, {0x8086, 0x25c0, "CS_INTEL_25E0"}, {0x8086, 0x25e0, "CS_INTEL_25E0"},
    {0x8086, 0x29b0, "CS_INTEL_29X0"}, {0x8086, 0x29c0, "CS_INTEL_29X0"}, {0x8086, 0x29d0, "CS_INTEL_29X0"},
    {0x8086, 0x29e0, "CS_INTEL_29E0"}, {0x8086, 0x359e, "CS_INTEL_359E"}, {0x8086, 0x4000, "CS_INTEL_4000"},
    {0x8086, 0x4003, "CS_INTEL_4003"}, {0x8086, 0x3400, "CS_INTEL_3400"}, {0x8086, 0x3403, "CS_INTEL_3400"},
    {0x8086, 0x3405, "CS_INTEL_3400"}, {0x8086, 0x3406, "CS_INTEL_3400"}, {0x8086, 0x2770, "CS_INTEL_2770"},
    {0x8086, 0x2774, "CS_INTEL_2774"}, {0x8086, 0x277c, "CS_INTEL_277C"}, {0x8086, 0x2a40, "CS_INTEL_2A40"},
    {0x8086, 0x2e00, "CS_INTEL_2E00"}, {0x8086, 0x2e10, "CS_INTEL_2E00"}, {0x8086, 0x2e20, "CS_INTEL_2E00"},
    {0x8086, 0x2e30, "CS_INTEL_2E00"}, {0x8086, 0x0044, "CS_INTEL_0040"}, {0x8086, 0x0062, "CS_INTEL_0040"},
    {0x8086, 0xd130, "CS_INTEL_3B42"}, {0x8086, 0xd132, "CS_INTEL_3B42"}, {0x8086, 0x3b42, "CS_INTEL_3B42"},
    {0x8086, 0x1c46, "CS_INTEL_1C46"}, {0x8086, 0x1c4b, "CS_INTEL_1C46"}, {0x8086, 0x1c4f, "CS_INTEL_1C46"},
    {0x8086, 0x1c49, "CS_INTEL_1C49"}, {0x8086, 0x1c44, "CS_INTEL_1C46"}, {0x8086, 0x1c10, "CS_INTEL_1C10"},
    {0x8086, 0x1d40, "CS_INTEL_1D40"}, {0x8086, 0x1d41, "CS_INTEL_1D40"}, {0x8086, 0x1e10, "CS_INTEL_1E10"},
    {0x8086, 0x0150, "CS_INTEL_1E10"}, {0x8086, 0x0151, "CS_INTEL_1E10"}, {0x8086, 0x0100, "CS_INTEL_1E10"},
    {0x8086, 0x8c4b, "CS_INTEL_8C4B"}, {0x8086, 0x8c44, "CS_INTEL_8C4B"}, {0x8086, 0x8c41, "CS_INTEL_8C4B"},
    {0x8086, 0x8c49, "CS_INTEL_8C4B"}, {0x8086, 0x8c52, "CS_INTEL_8C4B"}, {0x8086, 0x8cc4, "CS_INTEL_8CC4"},
    {0x8086, 0x8cc3, "CS_INTEL_8CC4"}, {0x8086, 0xa145, "CS_INTEL_A145"}, {0x8086, 0xa14e, "CS_INTEL_A145"},
    {0x8086, 0xa150, "CS_INTEL_A145"}, {0x8086, 0xa149, "CS_INTEL_A145"}, {0x8086, 0xa14a, "CS_INTEL_A145"},
    {0x8086, 0xa14d, "CS_INTEL_A145"}, {0x8086, 0xa244, "CS_INTEL_A145"}, {0x8086, 0xa1c8, "CS_INTEL_A145"},
    {0x8086, 0x8d47, "CS_INTEL_8D47"}, {0x8086, 0x8d44, "CS_INTEL_8D47"}, {0x8086, 0xa2c5, "CS_INTEL_A2C5"},
    {0x8086, 0xa154, "CS_INTEL_A2C5"}, {0x8086, 0xa152, "CS_INTEL_A2C5"}, {0x8086, 0xa242, "CS_INTEL_A242"},
    {0x8086, 0xa241, "CS_INTEL_A242"}, {0x8086, 0xa243, "CS_INTEL_A242"}, {0x8086, 0xa2d2, "CS_INTEL_A2D2"},
    {0x8086, 0xa2d3, "CS_INTEL_A242"}, {0x8086, 0xa1c1, "CS_INTEL_A242"}, {0x8086, 0xa1c2, "CS_INTEL_A242"},
    {0x8086, 0xa1c3, "CS_INTEL_A242"}, {0x8086, 0xa1c4, "CS_INTEL_A242"}, {0x8086, 0xa1c5, "CS_INTEL_A242"},
    {0x8086, 0xa1c6, "CS_INTEL_A242"}, {0x8086, 0xa1c7, "CS_INTEL_A242"}, {0x8086, 0xa2c9, "CS_INTEL_A2C9"},
    {0x8086, 0xa310, "CS_INTEL_A2C9"}, {0x8086, 0xa30e, "CS_INTEL_A2C9"}, {0x8086, 0xa305, "CS_INTEL_A2C9"},
    {0x8086, 0xa30d, "CS_INTEL_A2C9"}, {0x8086, 0xa301, "CS_INTEL_A301"}, {0x8086, 0x0685, "CS_INTEL_0685"},
    {0x8086, 0xa1cb, "CS_INTEL_C620"}, {0x8086, 0x4381, "CS_INTEL_4381"}, {0x8086, 0x4385, "CS_INTEL_4381"},
    {0x8086, 0x7a82, "CS_INTEL_7A82"}, {0x8086, 0x7a84, "CS_INTEL_7A82"}, {0x8086, 0x1b81, "CS_INTEL_1B81"},
    {0x8086, 0x7a8a, "CS_INTEL_1B81"}, {0x8086, 0x18dc, "CS_INTEL_18DC"}, {0x8086, 0x7a04, "CS_INTEL_7A04"},
    {0x8086, 0x5795, "CS_INTEL_5795"}, {0x8086, 0xa70d, "CS_INTEL_B660"}, {0x8086, 0x7d06, "CS_INTEL_7D06"},
    {0x8086, 0x7d1a, "CS_INTEL_7D06"}, {0x8086, 0x7d1b, "CS_INTEL_7D06"}, {0x8086, 0x7d1c, "CS_INTEL_7D06"},
    {0x8086, 0x7d2a, "CS_INTEL_7D06"}, {0x8086, 0x7d2d, "CS_INTEL_7D06"}, {0x8086, 0x7d2f, "CS_INTEL_7D06"},
    {0x8086, 0x7d35, "CS_INTEL_7D06"}, {0x8086, 0x7d67, "CS_INTEL_7D06"}, {0x8086, 0x7d30, "CS_INTEL_7D06"},
    {0x10de, 0x0fae, "CS_NVIDIA_T210"}, {0x10de, 0x0faf, "CS_NVIDIA_T210"}, {0x10de, 0x10e5, "CS_NVIDIA_T186"},
    {0x10de, 0x10e6, "CS_NVIDIA_T186"}, {0x10de, 0x1ad0, "CS_NVIDIA_T194"}, {0x10de, 0x1ad1, "CS_NVIDIA_T194"},
    {0x10de, 0x1ad2, "CS_NVIDIA_T194"}, {0x10de, 0x229a, "CS_NVIDIA_T234"}, {0x10de, 0x229c, "CS_NVIDIA_T234"},
    {0x10de, 0x229e, "CS_NVIDIA_T234"}, {0x10de, 0x22c2, "CS_NVIDIA_T23x"}, {0x10de, 0x22c3, "CS_NVIDIA_T23x"},
    {0x10de, 0x22b1, "CS_NVIDIA_TH500"}, {0x10de, 0x22b2, "CS_NVIDIA_TH500"}, {0x10de, 0x22b3, "CS_NVIDIA_TH500"},
    {0x10de, 0x22b4, "CS_NVIDIA_TH500"}, {0x10de, 0x22b8, "CS_NVIDIA_TH500"}, {0x10de, 0x22b9, "CS_NVIDIA_TH500"},
    {0x10de, 0x22d6, "CS_NVIDIA_T264"}, {0x10de, 0x22d8, "CS_NVIDIA_T264"}, {0x10de, 0x22da, "CS_NVIDIA_T264"},
    {0x10de, 0x2b00, "CS_NVIDIA_T264"}, {0x1039, 0x0649, "CS_SIS_649"}, {0x1039, 0x0656, "CS_SIS_656"},
    {0x1002, 0x5a31, "CS_ATI_RS400"}, {0x1002, 0x5a33, "CS_ATI_RS400"}, {0x1002, 0x5950, "CS_ATI_RS480"},
    {0x1002, 0x5951, "CS_ATI_RS480"}, {0x1002, 0x5956, "CS_ATI_FX790"}, {0x1002, 0x5a11, "CS_ATI_FX890"},
    {0x1002, 0x5a13, "CS_ATI_RD850"}, {0x1002, 0x5a12, "CS_ATI_RD870"}, {0x1002, 0x5a10, "CS_ATI_RD890"},
    {0x1002, 0x5957, "CS_ATI_RX780"}, {0x1002, 0x5a14, "CS_ATI_FX990"}, {0x1022, 0x9601, "CS_AMD_GX890"},
    {0x1022, 0x9600, "CS_AMD_RS780"}, {0x1022, 0x790e, "CS_AMD_X370"}, {0x1022, 0x14d8, "CS_AMD_RPH"},
    {0x1106, 0x0308, "CS_VIA_VT8369B"}, {0x1106, 0x0410, "CS_VIA_VX900"}, {0x10e8, 0xe004, "CS_APM_STORM"},
    {0x1014, 0x03dc, "CS_IBM_VENICE"}, {0x177d, 0xaf00, "CS_MARVELL_THUNDERX2"}, {0x1b36, 0x0008, "CS_REDHAT_QEMU"},
    {0x1def, 0xe005, "CS_AMPERE_EMAG"}, {0x1def, 0xe006, "CS_AMPERE_EMAG"}, {0x1def, 0xe007, "CS_AMPERE_EMAG"},
    {0x1def, 0xe008, "CS_AMPERE_EMAG"}, {0x1def, 0xe009, "CS_AMPERE_EMAG"}, {0x1def, 0xe00a, "CS_AMPERE_EMAG"},
    {0x1def, 0xe00b, "CS_AMPERE_EMAG"}, {0x1def, 0xe00c, "CS_AMPERE_EMAG"}, {0x19e5, 0xa120, "CS_HUAWEI_KUNPENG920"},
    {0x15b3, 0xa2d0, "CS_MELLANOX_BLUEFIELD"}, {0x15b3, 0xa2d4, "CS_MELLANOX_BLUEFIELD2"}, {0x15b3, 0xa2d5, "CS_MELLANOX_BLUEFIELD2"},
    {0x15b3, 0xa2da, "CS_MELLANOX_BLUEFIELD3"}, {0x15b3, 0xa2db, "CS_MELLANOX_BLUEFIELD3"}, {0x1d0f, 0x0200, "CS_AMAZON_GRAVITRON2"},
    {0x10cf, 0x1952, "CS_FUJITSU_A64FX"}, {0x17cd, 0xdc01, "CS_PHYTIUM_S2500"}, {0x17cd, 0xdc08, "CS_PHYTIUM_S2500"},
    {0x17cd, 0xdc16, "CS_PHYTIUM_S2500"}, {0x17cd, 0xfc01, "CS_PHYTIUM_S2500"}, {0x17cd, 0xfc08, "CS_PHYTIUM_S2500"},
    {0x17cd, 0xfc16, "CS_PHYTIUM_S2500"}, {0x1def, 0xe000, "CS_AMPERE_ALTRA"}, {0x1def, 0xe00d, "CS_AMPERE_ALTRA"},
    {0x1def, 0xe00e, "CS_AMPERE_ALTRA"}, {0x1def, 0xe010, "CS_AMPERE_ALTRA"}, {0x1def, 0xe100, "CS_AMPERE_ALTRA"},
    {0x1def, 0xe110, "CS_AMPERE_ALTRA"}, {0x13b5, 0x0100, "CS_ARM_NEOVERSEN1"}, {0x1d94, 0x790e, "CS_HYGON_C86"},
    {0x177d, 0xa02d, "CS_MARVELL_OCTEON_CN96XX"}, {0x177d, 0xa02d, "CS_MARVELL_OCTEON_CN98XX"}, {0x17cb, 0x010e, "CS_SNAPDRAGON_8CX"},
    {0x17cb, 0x0111, "CS_SNAPDRAGON_8CX"}, {0xf15e, 0x0000, "CS_SIFIVE_FU740_C000"}, {0x1556, 0x1111, "CS_PLDA_XPRESSRICH_AXI_REF"},
    {0x1def, 0xe200, "CS_AMPERE_AMPEREONE160"}, {0x1def, 0xe201, "CS_AMPERE_AMPEREONE160"}, {0x1def, 0xe202, "CS_AMPERE_AMPEREONE160"},
    {0x1def, 0xe203, "CS_AMPERE_AMPEREONE160"}, {0x1def, 0xe204, "CS_AMPERE_AMPEREONE160"}, {0x1def, 0xe205, "CS_AMPERE_AMPEREONE160"},
    {0x1def, 0xe206, "CS_AMPERE_AMPEREONE160"}, {0x1def, 0xe207, "CS_AMPERE_AMPEREONE160"}, {0x1db7, 0x5c16, "CS_PHYTIUM_S5000"},
    {0x1def, 0xe208, "CS_AMPERE_AMPEREONE192"}, {0x1def, 0xe209, "CS_AMPERE_AMPEREONE192"}, {0x1def, 0xe20a, "CS_AMPERE_AMPEREONE192"},
    {0x1def, 0xe20b, "CS_AMPERE_AMPEREONE192"}, {0x1def, 0xe20c, "CS_AMPERE_AMPEREONE192"}, {0x1def, 0xe20d, "CS_AMPERE_AMPEREONE192"},
    {0x1def, 0xe20e, "CS_AMPERE_AMPEREONE192"}, {0x1def, 0xe20f, "CS_AMPERE_AMPEREONE192"}, {0x10de, 0x22d1, "CS_NVIDIA_T254"},
};

bool is_nvidia_gpu(const Function& f) {
  if (f.driver != "nvidia") return false;
  DeviceClass c = classify_device(f);
  return c == DeviceClass::kGpu || c == DeviceClass::kAccelerator;
}

bool same_device(const Function& a, const Function& b) {
  return a.bdf.domain == b.bdf.domain && a.bdf.bus == b.bdf.bus && a.bdf.dev == b.bdf.dev;
}

// Intel family-6 (and 19) models by the kernel's arch/x86/include/asm/intel-family.h (gregkh/linux
// at 5ba594f2049bc9eb2781500c137e3e9fcc87ef69), classed by the file's own suffix convention: no
// suffix, _L, _G, _N, _P, _H, _S, _M are client and mobile parts; _X, _D, _EP, _EX server parts
// (Skylake-X 0x55 also covers the X299 HEDT parts, whose root complex is the server mesh). Models
// the convention does not class (Xeon Phi, ICELAKE_NNPI, Atom _MID/_TABLET/_NP) are not listed.
struct IntelModel {
  int family, model;
  bool client;
};
constexpr IntelModel kIntelModels[] = {
    // "Big Core"
    {6, 0x1E, true}, {6, 0x1F, true}, {6, 0x1A, false}, {6, 0x2E, false},   // Nehalem, _G, _EP, _EX
    {6, 0x25, true}, {6, 0x2C, false}, {6, 0x2F, false},                    // Westmere, _EP, _EX
    {6, 0x2A, true}, {6, 0x2D, false}, {6, 0x3A, true}, {6, 0x3E, false},   // Sandy/Ivy Bridge, _X
    {6, 0x3C, true}, {6, 0x3F, false}, {6, 0x45, true}, {6, 0x46, true},    // Haswell, _X, _L, _G
    {6, 0x3D, true}, {6, 0x47, true}, {6, 0x4F, false}, {6, 0x56, false},   // Broadwell, _G, _X, _D
    {6, 0x4E, true}, {6, 0x5E, true}, {6, 0x55, false},                     // Skylake _L, -, _X
    {6, 0x8E, true}, {6, 0x9E, true}, {6, 0xA5, true}, {6, 0xA6, true},     // Kaby Lake _L, -, Comet Lake, _L
    {6, 0x66, true},                                                        // Cannon Lake _L
    {6, 0x6A, false}, {6, 0x6C, false}, {6, 0x7D, true}, {6, 0x7E, true},   // Ice Lake _X, _D, -, _L
    {6, 0xA7, true}, {6, 0x8C, true}, {6, 0x8D, true},                      // Rocket Lake, Tiger Lake _L, -
    {6, 0x8F, false}, {6, 0xCF, false}, {6, 0xAD, false}, {6, 0xAE, false}, // Sapphire/Emerald/Granite Rapids
    {6, 0xD7, true},                                                        // Bartlett Lake
    // "Hybrid"
    {6, 0x8A, true}, {6, 0x97, true}, {6, 0x9A, true},                      // Lakefield, Alder Lake, _L
    {6, 0xB7, true}, {6, 0xBA, true}, {6, 0xBF, true},                      // Raptor Lake, _P, _S
    {6, 0xAC, true}, {6, 0xAA, true},                                       // Meteor Lake, _L
    {6, 0xC5, true}, {6, 0xC6, true}, {6, 0xB5, true},                      // Arrow Lake _H, -, _U
    {6, 0xBD, true}, {6, 0xCC, true},                                       // Lunar Lake _M, Panther Lake _L
    // "Small Core" (Atom / E-core)
    {6, 0x1C, true}, {6, 0x36, true}, {6, 0x37, true}, {6, 0x4D, false},    // Bonnell, Saltwell, Silvermont, _D
    {6, 0x4C, true}, {6, 0x5C, true}, {6, 0x5F, false}, {6, 0x7A, true},    // Airmont, Goldmont, _D, Plus
    {6, 0x86, false}, {6, 0x96, true}, {6, 0x9C, true}, {6, 0xBE, true},    // Tremont _D, -, _L, Gracemont
    {6, 0xAF, false}, {6, 0xB6, true}, {6, 0xDD, false},                    // Crestmont _X, -, Darkmont _X
    // Family 19
    {19, 0x01, false},                                                      // Panther Cove _X (Diamond Rapids)
};

// NCCL's topology node of a device: the PCI switch two sysfs levels up (xml.cc walks "two /"
// upward from each PCI node), or the CPU (NUMA node) once a level is no PCI function.
struct NcclNode {
  bool cpu = false;
  size_t index = 0;  // a function (PCI switch) or, for a CPU, its numa_node
  int numa = -1;
  bool operator==(const NcclNode& o) const { return cpu == o.cpu && (cpu ? numa == o.numa : index == o.index); }
};

// BCM Gen4/Gen5 PEX switches present two levels; NCCL flattens the inner one into the outer
// (topo.cc getBcmGen(): id = vendor<<48 | device<<32 | subsystem vendor<<16 | subsystem device).
int bcm_gen(const Function& f, int level) {
  uint64_t id = uint64_t{f.vendor} << 48 | uint64_t{f.device} << 32 | uint64_t{f.subsystem_vendor} << 16 | f.subsystem_device;
  if ((id & 0xfffffffffffff000ull) == 0x1000c0101000a000ull) return 4;
  if ((id & 0xfffffffffffff000ull) == (0x1000c03010000000ull | uint64_t(level) * 0x1000)) return 5;
  return 0;
}

std::vector<NcclNode> nccl_chain(const Topology& t, size_t dev) {
  std::vector<NcclNode> chain;
  size_t cur = dev;
  for (size_t steps = 0; steps <= t.functions.size(); ++steps) {
    auto up1 = t.functions[cur].parent;
    auto up2 = up1 ? t.functions[*up1].parent : std::nullopt;
    if (!up2) {
      chain.push_back({true, 0, t.functions[cur].numa_node});
      break;
    }
    chain.push_back({false, *up2, -1});
    cur = *up2;
  }
  // Flatten a BCM sub-switch into the switch above it.
  for (size_t i = 0; i + 1 < chain.size(); ++i) {
    if (chain[i].cpu || chain[i + 1].cpu) continue;
    int gen = bcm_gen(t.functions[chain[i + 1].index], 0);
    if (gen && bcm_gen(t.functions[chain[i].index], 1) == gen) chain.erase(chain.begin() + static_cast<long>(i--));
  }
  return chain;
}

}  // namespace

std::optional<size_t> nvidia_third_party_gpu(const Topology& t, size_t provider, size_t client) {
  const Function& p = t.functions[provider];
  const Function& c = t.functions[client];
  if (provider == client || same_device(p, c) || p.driver.empty() || c.driver.empty()) return std::nullopt;
  if (p.driver == "nvidia" && c.driver == "nvidia") return std::nullopt;  // GPU<->GPU: the driver's own P2P
  auto other_is_device = [&](const Function& f) { return classify_device(f) != DeviceClass::kBridge; };
  if (is_nvidia_gpu(p) && other_is_device(c)) {
    if (p.has_p2pmem) return std::nullopt;  // published with pci_p2pdma_add_resource(): the kernel's rules
    return provider;
  }
  if (is_nvidia_gpu(c) && other_is_device(p)) return client;
  return std::nullopt;
}

NvidiaGrdmaMachine nvidia_grdma_machine(const Topology& t) {
  NvidiaGrdmaMachine m;
  std::vector<uint32_t> domains;
  for (const Function& f : t.functions)
    if (is_nvidia_gpu(f) && std::find(domains.begin(), domains.end(), f.bdf.domain) == domains.end())
      domains.push_back(f.bdf.domain);
  m.chipset = "CS_UNKNOWN";
  for (const ChipsetEntry& e : kChipsets) {
    bool present = std::any_of(t.functions.begin(), t.functions.end(), [&](const Function& f) {
      return f.vendor == e.vendor && f.device == e.device &&
             std::find(domains.begin(), domains.end(), f.bdf.domain) != domains.end();
    });
    if (present) {
      m.chipset = e.cs;
      break;
    }
  }
  // RmInitNvDevice(): CS_NVIDIA_TH500, CS_AMPERE_ALTRA, CS_AMPERE_AMPEREONE160 (vendor-p2p-gates.md §1.10).
  m.unsupported_chipset = m.chipset == "CS_NVIDIA_TH500" || m.chipset == "CS_AMPERE_ALTRA" ||
                          m.chipset == "CS_AMPERE_AMPEREONE160";
  // PDB_PROP_GPU_COHERENT_CPU_MAPPING needs NVLink-C2C to a Grace CPU (TH500): never on x86 nor on
  // another identified chipset; on a Grace machine the snapshot does not show it.
  if (t.platform.arch == "x86" || (m.chipset != "CS_UNKNOWN" && m.chipset != "CS_NVIDIA_TH500")) m.coherent = false;
  m.override_value = t.platform.nvidia_grdma_override;
  return m;
}

std::optional<bool> nvidia_passthrough(const Topology& t, size_t gpu) {
  // hypervisor.c: CPUID hypervisor leaves on x86 (cpuinfo's hypervisor flag), SMBIOS type 0's
  // virtual-machine bit on AArch64.
  bool guest = t.platform.hypervisor;
  if (!guest && t.platform.arch != "x86") {
    if (t.platform.firmware_vm == Known::kUnknown) return std::nullopt;
    guest = t.platform.firmware_vm == Known::kYes;
  }
  if (!guest) return t.platform.arch.empty() ? std::nullopt : std::optional<bool>(false);
  return !t.functions[gpu].is_virtfn;
}

bool nv_pci_has_common_pci_switch(const Topology& t, size_t gpu, size_t peer) {
  std::vector<size_t> above;
  for (auto up = t.functions[gpu].parent; up && above.size() <= t.functions.size(); up = t.functions[*up].parent)
    above.push_back(*up);
  size_t steps = 0;
  for (auto up = t.functions[peer].parent; up && steps++ <= t.functions.size(); up = t.functions[*up].parent)
    if (std::find(above.begin(), above.end(), *up) != above.end()) return true;
  return false;
}

const char* to_string(GrdmaStep s) {
  switch (s) {
    case GrdmaStep::kCoherent: return "coherent";
    case GrdmaStep::kOverrideAllow: return "override_allow";
    case GrdmaStep::kOverrideDeny: return "override_deny";
    case GrdmaStep::kPassthrough: return "passthrough";
    case GrdmaStep::kCommonBridge: return "common_bridge";
    case GrdmaStep::kNoCommonBridge: return "no_common_bridge";
    case GrdmaStep::kAllow: return "supported_chipset";
  }
  return "?";
}

GrdmaResult nv_grdma_pci_topology_supported(const NvidiaGrdmaMachine& machine, std::optional<bool> passthrough,
                                            bool common_switch) {
  // The function itself, over known inputs.
  auto gate = [&](bool coherent, int64_t override_value, bool pass) -> std::pair<bool, GrdmaStep> {
    if (coherent) return {true, GrdmaStep::kCoherent};
    if (override_value == 1) return {true, GrdmaStep::kOverrideAllow};
    if (override_value == 2) return {false, GrdmaStep::kOverrideDeny};
    if (pass) return {true, GrdmaStep::kPassthrough};
    if (machine.unsupported_chipset)
      return {common_switch, common_switch ? GrdmaStep::kCommonBridge : GrdmaStep::kNoCommonBridge};
    return {true, GrdmaStep::kAllow};
  };
  // Every value an unknown input could take (an override other than 1 or 2 acts as 0).
  std::vector<bool> coherent = machine.coherent ? std::vector<bool>{*machine.coherent} : std::vector<bool>{false, true};
  std::vector<int64_t> overrides = machine.override_value ? std::vector<int64_t>{*machine.override_value}
                                                          : std::vector<int64_t>{0, 1, 2};
  std::vector<bool> pass = passthrough ? std::vector<bool>{*passthrough} : std::vector<bool>{false, true};
  std::optional<std::pair<bool, GrdmaStep>> first;
  bool same_answer = true, same_step = true;
  for (bool c : coherent)
    for (int64_t o : overrides)
      for (bool p : pass) {
        auto r = gate(c, o, p);
        if (!first) first = r;
        same_answer &= r.first == first->first;
        same_step &= r.second == first->second;
      }
  GrdmaResult out;
  if (same_answer) out.allowed = first->first;
  if (same_answer && same_step) out.step = first->second;
  return out;
}

const char* to_string(NcclPath p) {
  switch (p) {
    case NcclPath::kPix: return "PIX";
    case NcclPath::kPxb: return "PXB";
    case NcclPath::kPhb: return "PHB";
    case NcclPath::kSys: return "SYS";
  }
  return "?";
}

// NVIDIA/nccl at 5067397c2676d5aed50042fc39e5c8ee96eb0027: src/graph/paths.cc ncclTopoSetPaths()
// gives a path the worst of its links: device to PCI switch PIX, switch to switch PXB, a link to a
// CPU PHB, CPU to CPU (LINK_SYS) SYS; src/graph/xml.cc ncclTopoGetXmlFromSys() attaches a device to
// the PCI node two sysfs levels up (skipping the switch's downstream port) or to the CPU of its
// numa_node; src/graph/topo.cc ncclTopoFlattenBcmSwitches() merges BCM PEX sub-switches.
std::optional<NcclPath> nccl_path_class(const Topology& t, size_t a, size_t b) {
  if (a == b) return std::nullopt;
  auto ca = nccl_chain(t, a), cb = nccl_chain(t, b);
  for (size_t i = 0; i < ca.size(); ++i) {
    if (ca[i].cpu) break;
    for (size_t j = 0; j < cb.size(); ++j)
      if (!cb[j].cpu && cb[j] == ca[i]) return i == 0 && j == 0 ? NcclPath::kPix : NcclPath::kPxb;
  }
  return ca.back().numa == cb.back().numa ? NcclPath::kPhb : NcclPath::kSys;
}

// paths.cc ncclTopoCheckGdr(): netGdrLevel = NCCL_NET_GDR_C2C (default 1) ? PATH_P2C : PATH_PXB, and
// "if (distance > netGdrLevel)" GPUDirect RDMA is disabled for the pair (NCCL stages through host
// memory). Without C2C no GPU<->NIC path is P2C, so both defaults end at PXB.
bool nccl_gdr_by_default(NcclPath p) { return p == NcclPath::kPix || p == NcclPath::kPxb; }

std::optional<bool> intel_client_cpu(const Platform& p) {
  if (!p.arch.empty() && p.arch != "x86") return false;  // an Arm or POWER host has no Intel CPU
  if (p.cpu_vendor.empty()) return std::nullopt;
  if (p.cpu_vendor != "GenuineIntel") return false;
  if (!p.cpu_family || !p.cpu_model) return std::nullopt;
  for (const IntelModel& m : kIntelModels)
    if (m.family == *p.cpu_family && m.model == *p.cpu_model) return m.client;
  return std::nullopt;
}

void set_nvidia_third_party_machine_facts(const Topology& t, FactSet& facts) {
  const Platform& p = t.platform;
  if (p.nvidia_peermem_loaded != Known::kUnknown) facts.set("vendor.nvidia_peermem_loaded", p.nvidia_peermem_loaded == Known::kYes);
  if (p.nvidia_fs_loaded != Known::kUnknown) facts.set("vendor.nvidia_fs_loaded", p.nvidia_fs_loaded == Known::kYes);
  if (auto client = intel_client_cpu(p)) facts.set("platform.intel_client_cpu", *client);
  if (std::none_of(t.functions.begin(), t.functions.end(), is_nvidia_gpu)) return;
  NvidiaGrdmaMachine m = nvidia_grdma_machine(t);
  facts.set("vendor.nvidia_chipset", m.chipset);
  facts.set("vendor.nvidia_unsupported_chipset", m.unsupported_chipset);
  if (m.coherent) facts.set("vendor.nvidia_coherent", *m.coherent);
  if (m.override_value) {
    facts.set("vendor.nvidia_grdma_override", *m.override_value);
    facts.set("vendor.nvidia_grdma_override_source", p.nvidia_grdma_override_source);
  }
}

namespace {

// The PCI drivers under which the kernel's RDMA providers (drivers/infiniband/hw/*) register an
// ib_device: only their devices can take GPU memory through ib_core peer memory or a dma-buf MR.
// NVMe drives take it through nvidia_fs (GPUDirect Storage). Anything else (virtio-net, e1000e, a
// USB or audio controller) has no importer, whatever NVIDIA's gate says.
const char* nvidia_importer(const Function& f) {
  static constexpr std::string_view kRdmaProviders[] = {
      "mlx4_core", "mlx5_core", "bnxt_en", "ice",  "i40e",     "idpf",  "qede",  "efa",      "ionic", "hfi1",
      "ib_qib",    "cxgb4",     "erdma",   "mana", "vmw_pvrdma", "be2net", "hns3", "mthca",   "ib_mthca"};
  if (classify_device(f) == DeviceClass::kInfiniband) return "rdma";
  for (std::string_view d : kRdmaProviders)
    if (f.driver == d) return "rdma";
  if (f.driver == "nvme") return "storage";
  return "none";
}

}  // namespace

void set_nvidia_third_party_pair_facts(const Topology& t, const NvidiaGrdmaMachine& machine, size_t provider,
                                       size_t client, FactSet& facts) {
  auto gpu = nvidia_third_party_gpu(t, provider, client);
  if (!gpu) return;
  size_t peer = *gpu == provider ? client : provider;
  auto pass = nvidia_passthrough(t, *gpu);
  if (pass) facts.set("vendor.nvidia_passthrough", *pass);
  bool common = nv_pci_has_common_pci_switch(t, *gpu, peer);
  facts.set("vendor.nvidia_shared_upstream_bridge", common);
  GrdmaResult r = nv_grdma_pci_topology_supported(machine, pass, common);
  if (r.allowed) facts.set("vendor.nvidia_grdma_allowed", *r.allowed);
  if (r.step) facts.set("vendor.nvidia_grdma_step", std::string(to_string(*r.step)));
  facts.set("vendor.nvidia_importer", std::string(nvidia_importer(t.functions[peer])));
  DeviceClass c = classify_device(t.functions[peer]);
  if (c == DeviceClass::kNic || c == DeviceClass::kInfiniband)
    if (auto path = nccl_path_class(t, *gpu, peer)) {
      facts.set("vendor.nccl_path_class", std::string(to_string(*path)));
      facts.set("vendor.nccl_gdr_default", nccl_gdr_by_default(*path));
    }
}

}  // namespace p2paudit::policy
