// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/device_class.h"

#include <array>

namespace p2paudit {

namespace {

constexpr uint16_t kVendorXilinx = 0x10ee;
constexpr uint16_t kVendorAltera = 0x1172;  // Intel's FPGA cards keep Altera's ID

// Drivers that bind only FPGA shells: Xilinx XRT (user and management functions) and Intel's DFL.
constexpr std::array<std::string_view, 4> kFpgaDrivers = {"xocl", "xclmgmt", "dfl-pci", "intel-fpga-pci"};

bool is_fpga(const Function& f, uint32_t base) {
  for (auto d : kFpgaDrivers)
    if (f.driver == d) return true;
  const bool fpga_vendor = f.vendor == kVendorXilinx || f.vendor == kVendorAltera;
  // Alveo shells report 0x1200 (accelerator) or 0x0580 (memory controller); older boards 0x0b40.
  return fpga_vendor && (base == 0x12 || base == 0x05 || base == 0x0b);
}

}  // namespace

DeviceClass classify_device(const Function& f) {
  const uint32_t base = f.class_code >> 16, sub = (f.class_code >> 8) & 0xff;
  if (is_fpga(f, base)) return DeviceClass::kFpga;
  if (base == 0x03) return DeviceClass::kGpu;
  if (base == 0x12 || (base == 0x0b && sub == 0x40)) return DeviceClass::kAccelerator;
  if (base == 0x01 && sub == 0x08) return DeviceClass::kNvme;
  if (base == 0x02) return DeviceClass::kNic;
  if (base == 0x0c && sub == 0x06) return DeviceClass::kInfiniband;
  if (base == 0x01) return DeviceClass::kStorage;
  if (base == 0x06) return DeviceClass::kBridge;
  return DeviceClass::kOther;
}

std::string_view device_class_name(DeviceClass c) {
  switch (c) {
    case DeviceClass::kGpu: return "gpu";
    case DeviceClass::kAccelerator: return "accelerator";
    case DeviceClass::kFpga: return "fpga";
    case DeviceClass::kNvme: return "nvme";
    case DeviceClass::kNic:
    case DeviceClass::kInfiniband: return "nic";
    case DeviceClass::kStorage: return "storage";
    case DeviceClass::kBridge: return "bridge";
    case DeviceClass::kOther: break;
  }
  return "other";
}

std::string_view short_name_prefix(DeviceClass c) {
  switch (c) {
    case DeviceClass::kGpu: return "gpu";
    case DeviceClass::kAccelerator: return "accel";
    case DeviceClass::kFpga: return "fpga";
    case DeviceClass::kNvme: return "nvme";
    case DeviceClass::kNic: return "nic";
    case DeviceClass::kInfiniband: return "ib";
    default: return "";
  }
}

}  // namespace p2paudit
