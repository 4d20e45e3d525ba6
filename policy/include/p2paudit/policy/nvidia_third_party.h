// SPDX-License-Identifier: GPL-2.0-or-later
// NVIDIA's third-party peer paths: GPUDirect RDMA (nvidia-peermem, nv-p2p), GPUDirect Storage
// (nvidia-fs) and dma-buf export map GPU memory for another device without asking the kernel's
// pci_p2pdma_distance(); nv_grdma_pci_topology_supported() decides (vendor-p2p-gates.md §1.10).
// Also the path class NCCL gives a GPU<->NIC pair (its GPUDirect RDMA distance) and whether the
// host's CPU is an Intel client part (whose root complex forwards peer writes only).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "p2paudit/policy/facts.h"
#include "p2paudit/topology.h"

namespace p2paudit::policy {

// The NVIDIA GPU of a third-party pair: one side a GPU (or 3D controller / accelerator) bound to
// nvidia, the other a device of another driver that is not a function of the same device. nullopt
// for any other pair, and (§1.11) when the GPU is the provider and publishes its BAR1 as kernel
// P2PDMA memory (a p2pmem directory): then the kernel's rules govern.
std::optional<size_t> nvidia_third_party_gpu(const Topology& t, size_t provider, size_t client);

// The gate's machine inputs (every GPU of the machine shares them).
struct NvidiaGrdmaMachine {
  // clFindFHBAndGetChipsetInfoIndex(): the first chipsetInfo[] entry (NVIDIA's table order) of
  // which a function is present in a domain holding an NVIDIA GPU; "CS_UNKNOWN" when none is.
  std::string chipset;
  bool unsupported_chipset = false;   // NV_FLAG_PCI_P2P_UNSUPPORTED_CHIPSET
  std::optional<bool> coherent;       // nv->coherent (NVLink-C2C to a Grace CPU)
  std::optional<int64_t> override_value;  // NVreg_GrdmaPciTopoCheckOverride
};
NvidiaGrdmaMachine nvidia_grdma_machine(const Topology& t);

// NV_FLAG_PASSTHRU: in a guest that NVIDIA's driver recognises (x86: the CPU hypervisor flag; other
// architectures: SMBIOS's virtual-machine bit), a GPU that is not a VF. nullopt where nothing says.
std::optional<bool> nvidia_passthrough(const Topology& t, size_t gpu);

// nv_pci_has_common_pci_switch(): some upstream bridge of the GPU is an upstream bridge of the peer
// (a shared root port counts).
bool nv_pci_has_common_pci_switch(const Topology& t, size_t gpu, size_t peer);

enum class GrdmaStep { kCoherent, kOverrideAllow, kOverrideDeny, kPassthrough, kCommonBridge, kNoCommonBridge, kAllow };
const char* to_string(GrdmaStep s);  // "coherent", "override_allow", ..., "supported_chipset"
struct GrdmaResult {
  std::optional<bool> allowed;    // nullopt: an unknown input could change the answer
  std::optional<GrdmaStep> step;  // the step that answered, where every possible input agrees on it
};
// Mirrors nv_grdma_pci_topology_supported() (kernel-open/nvidia/nv-pci.c) over inputs that may be
// unknown: the answer is known only where every value an unknown input could take gives it.
GrdmaResult nv_grdma_pci_topology_supported(const NvidiaGrdmaMachine& machine, std::optional<bool> passthrough,
                                            bool common_switch);

// NCCL's path types for a GPU<->NIC pair (NVIDIA/nccl src/include/graph.h; C2C, P2C, PXN and NVLink
// types need vendor information a snapshot lacks and are not computed).
enum class NcclPath { kPix = 4, kPxb = 5, kPhb = 8, kSys = 9 };
const char* to_string(NcclPath p);  // "PIX", "PXB", "PHB", "SYS"
std::optional<NcclPath> nccl_path_class(const Topology& t, size_t a, size_t b);
// Whether NCCL uses GPUDirect RDMA on such a path with NCCL_NET_GDR_LEVEL unset.
bool nccl_gdr_by_default(NcclPath p);

// The boot CPU is an Intel client (Core) part by the kernel's intel-family.h names: true for the
// client and mobile models, false for the server ones (_X, _D, _EP, _EX) and for other vendors,
// nullopt for a model the table lacks or an unknown CPU.
std::optional<bool> intel_client_cpu(const Platform& p);

// The machine facts (modules, override, chipset, coherent, Intel client) and a pair's own facts
// (authority-independent inputs and the gate's answer, NCCL's path class).
void set_nvidia_third_party_machine_facts(const Topology& t, FactSet& facts);
void set_nvidia_third_party_pair_facts(const Topology& t, const NvidiaGrdmaMachine& machine, size_t provider,
                                       size_t client, FactSet& facts);

}  // namespace p2paudit::policy
