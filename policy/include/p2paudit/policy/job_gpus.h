// SPDX-License-Identifier: GPL-2.0-or-later
// The GPUs a job will use, for `policy --format env` (docs/policy.md, "Shell exports"): the ones
// --gpus names; else, vendor by vendor, the ones that vendor's runtime selection variables leave
// (gpu_selection.h); else every compute GPU. Where a selection cannot be placed on the machine's
// functions (a runtime's device order that a capture does not show, a UUID), the job is taken to
// be every GPU the selection could mean: a wider job can only make the exports more cautious.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "p2paudit/topology.h"

namespace p2paudit::policy {

// What the tool read from its command line and environment; nullopt: not given / unset.
struct GpuSelectionInputs {
  std::optional<std::string> gpus;  // --gpus LIST (BDFs or short names): wins over every variable
  std::optional<std::string> cuda_visible_devices, cuda_device_order;
  std::optional<std::string> hip_visible_devices, rocr_visible_devices;
  std::optional<std::string> oneapi_device_selector, ze_affinity_mask;
  std::optional<std::string> ze_enable_pci_id_device_order, ze_flat_device_hierarchy;
};

// A GPU is a display-class function (PCI class 03), or a processing accelerator (class 12) bound to
// amdgpu (Instinct MI300 reports 0x1200; ROCm counts it as a GPU). Physical functions only, as the
// default view lists them: a VF of a GPU is for a guest.
bool is_runtime_gpu(const Function& f);

enum class GpuRole { kCompute, kIntegrated, kDisplayOnly };
struct GpuRoleReason {
  GpuRole role = GpuRole::kCompute;
  std::string why;  // for the integrated and display-only ones: what in the tree says so
};
// Recognised from the tree alone; anything the tree leaves open counts as compute, since a GPU
// wrongly left out could make the exports say peer for a job that uses it:
// - integrated: on bare metal (no hypervisor flag), on a root bus (no upstream bridge), and a root
//   complex integrated endpoint or no PCIe device at all (an Intel iGPU at 00:02.0). In a VM root
//   bus placement says nothing (QEMU q35 makes every device on pcie.0 an integrated endpoint;
//   Firecracker puts passed-through H200s on root bus 00).
// - display-only: a display controller of a vendor whose GPUs no runtime steered by these exports
//   drives (not NVIDIA, AMD or Intel: a BMC's ASPEED, Matrox, an emulated VGA), or one whose every
//   memory BAR is known and under 32 MiB (a compute GPU maps its memory through a larger one).
// A GPU's audio, USB or serial functions and an FPGA's management function are not GPUs at all.
GpuRoleReason gpu_role(const Topology& topo, size_t index);

struct JobGpus {
  std::vector<size_t> gpus;        // function indices, in BDF order
  std::vector<std::string> notes;  // one comment line each: how they were chosen, what was left out and why
};

// Throws InputError naming --gpus or the variable when a value is malformed, names no GPU of this
// machine, or names what cannot be placed safely (a MIG instance).
JobGpus select_job_gpus(const Topology& topo, const GpuSelectionInputs& in);

}  // namespace p2paudit::policy
