// SPDX-License-Identifier: GPL-2.0-or-later
// What a PCI function is, for every output: the matrix's short names (gpu0, fpga0...), the default
// view of matrix, policy and the audit, and the policy's provider./client.class fact.
#pragma once

#include <string_view>

#include "p2paudit/topology.h"

namespace p2paudit {

// In the order the default view lists them.
enum class DeviceClass { kGpu, kAccelerator, kFpga, kNvme, kNic, kInfiniband, kStorage, kBridge, kOther };

// From the PCI class code, the vendor and the bound driver: an FPGA card (Alveo, Agilex...) is an
// FPGA whatever class its shell reports (0x1200, 0x0580, 0x0b40), and every other processing
// accelerator (0x12xx: Habana Gaudi, AI cards) or co-processor (0x0b40) an accelerator.
DeviceClass classify_device(const Function& f);

// The policy fact's value: "gpu", "accelerator", "fpga", "nvme", "nic" (InfiniBand too), "storage",
// "bridge", "other".
std::string_view device_class_name(DeviceClass c);

// The short-name stem ("gpu", "accel", "fpga", "nvme", "nic", "ib"); "" for classes P2P is not
// usually asked about (storage other than NVMe, bridges, other), which only `--all` lists.
std::string_view short_name_prefix(DeviceClass c);

inline bool in_default_view(DeviceClass c) { return !short_name_prefix(c).empty(); }

}  // namespace p2paudit
