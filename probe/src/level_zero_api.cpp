// SPDX-License-Identifier: GPL-2.0-or-later
// The Level Zero loader as every probe child uses it (level_zero_api.h).
#include "level_zero_api.h"

#include <cstdio>
#include <cstring>

#include "p2paudit/probe/isolate.h"
#include "p2paudit/shared_library.h"

namespace p2paudit::probe::level_zero {

using nlohmann::json;

// Every ze_result_t of the Level Zero 1.4 specification (the Debian 1.8.12 headers) and the
// later ones a newer driver may return.
const char* result_name(uint32_t code) {
  switch (code) {
    case 0x0: return "ZE_RESULT_SUCCESS";
    case 0x1: return "ZE_RESULT_NOT_READY";
    case 0x70000001: return "ZE_RESULT_ERROR_DEVICE_LOST";
    case 0x70000002: return "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY";
    case 0x70000003: return "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY";
    case 0x70000004: return "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE";
    case 0x70000005: return "ZE_RESULT_ERROR_MODULE_LINK_FAILURE";
    case 0x70000006: return "ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET";
    case 0x70000007: return "ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE";
    case 0x7ff00001: return "ZE_RESULT_EXP_ERROR_DEVICE_IS_NOT_VERTEX";
    case 0x7ff00002: return "ZE_RESULT_EXP_ERROR_VERTEX_IS_NOT_DEVICE";
    case 0x7ff00003: return "ZE_RESULT_EXP_ERROR_REMOTE_DEVICE";
    case 0x7ff00004: return "ZE_RESULT_EXP_ERROR_OPERANDS_INCOMPATIBLE";
    case 0x7ff00005: return "ZE_RESULT_EXP_RTAS_BUILD_RETRY";
    case 0x7ff00006: return "ZE_RESULT_EXP_RTAS_BUILD_DEFERRED";
    case 0x70010000: return "ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS";
    case 0x70010001: return "ZE_RESULT_ERROR_NOT_AVAILABLE";
    case 0x70020000: return "ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE";
    case 0x70020001: return "ZE_RESULT_WARNING_DROPPED_DATA";
    case 0x78000001: return "ZE_RESULT_ERROR_UNINITIALIZED";
    case 0x78000002: return "ZE_RESULT_ERROR_UNSUPPORTED_VERSION";
    case 0x78000003: return "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE";
    case 0x78000004: return "ZE_RESULT_ERROR_INVALID_ARGUMENT";
    case 0x78000005: return "ZE_RESULT_ERROR_INVALID_NULL_HANDLE";
    case 0x78000006: return "ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE";
    case 0x78000007: return "ZE_RESULT_ERROR_INVALID_NULL_POINTER";
    case 0x78000008: return "ZE_RESULT_ERROR_INVALID_SIZE";
    case 0x78000009: return "ZE_RESULT_ERROR_UNSUPPORTED_SIZE";
    case 0x7800000a: return "ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT";
    case 0x7800000b: return "ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT";
    case 0x7800000c: return "ZE_RESULT_ERROR_INVALID_ENUMERATION";
    case 0x7800000d: return "ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION";
    case 0x7800000e: return "ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT";
    case 0x7800000f: return "ZE_RESULT_ERROR_INVALID_NATIVE_BINARY";
    case 0x78000010: return "ZE_RESULT_ERROR_INVALID_GLOBAL_NAME";
    case 0x78000011: return "ZE_RESULT_ERROR_INVALID_KERNEL_NAME";
    case 0x78000012: return "ZE_RESULT_ERROR_INVALID_FUNCTION_NAME";
    case 0x78000013: return "ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION";
    case 0x78000014: return "ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION";
    case 0x78000015: return "ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX";
    case 0x78000016: return "ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE";
    case 0x78000017: return "ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE";
    case 0x78000018: return "ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED";
    case 0x78000019: return "ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE";
    case 0x7800001a: return "ZE_RESULT_ERROR_OVERLAPPING_REGIONS";
    case 0x7800001b: return "ZE_RESULT_WARNING_ACTION_REQUIRED";
    case 0x7800001c: return "ZE_RESULT_ERROR_INVALID_KERNEL_HANDLE";
    case 0x7800001d: return "ZE_RESULT_EXT_RTAS_BUILD_RETRY";
    case 0x7800001e: return "ZE_RESULT_EXT_RTAS_BUILD_DEFERRED";
    case 0x7800001f: return "ZE_RESULT_EXT_ERROR_OPERANDS_INCOMPATIBLE";
    case 0x78000020: return "ZE_RESULT_ERROR_SURVIVABILITY_MODE_DETECTED";
    case 0x78000021: return "ZE_RESULT_ERROR_ADDRESS_NOT_FOUND";
    case 0x7ffffffe: return "ZE_RESULT_ERROR_UNKNOWN";
    default: return nullptr;
  }
}

std::string hex_code(uint32_t code) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", code);
  return buf;
}

std::string result_text(ze_result_t r) {
  const auto code = static_cast<uint32_t>(r);
  const char* name = result_name(code);
  return name ? name : "unknown ze_result_t " + hex_code(code);
}

json call_json(const std::string& call, ze_result_t r) {
  const auto code = static_cast<uint32_t>(r);
  return json{{"call", call}, {"code", hex_code(code)}, {"value", code}, {"name", result_text(r)}};
}

std::string failure_text(const json& f) {
  std::string s = f.value("call", std::string());
  if (f.contains("code")) {
    s += " returned " + f.value("code", std::string()) + " " + f.value("name", std::string());
  } else {
    s += ": " + f.value("name", std::string());
  }
  return s;
}

std::string open_loader(Api& api) {
  SharedLibrary lib = SharedLibrary::open({kLoaderLibrary});
  if (!lib) return lib.error();
  lib.get(api.Init, "zeInit");
  lib.get(api.DriverGet, "zeDriverGet");
  lib.get(api.DriverGetProperties, "zeDriverGetProperties", SharedLibrary::kOptional);
  lib.get(api.DriverGetApiVersion, "zeDriverGetApiVersion", SharedLibrary::kOptional);
  lib.get(api.DriverGetExtensionProperties, "zeDriverGetExtensionProperties", SharedLibrary::kOptional);
  lib.get(api.DriverGetExtensionFunctionAddress, "zeDriverGetExtensionFunctionAddress", SharedLibrary::kOptional);
  lib.get(api.DeviceGet, "zeDeviceGet");
  lib.get(api.DeviceGetProperties, "zeDeviceGetProperties");
  lib.get(api.DevicePciGetPropertiesExt, "zeDevicePciGetPropertiesExt", SharedLibrary::kOptional);
  lib.get(api.DeviceCanAccessPeer, "zeDeviceCanAccessPeer", SharedLibrary::kOptional);
  lib.get(api.DeviceGetP2PProperties, "zeDeviceGetP2PProperties", SharedLibrary::kOptional);
  lib.get(api.DeviceGetCommandQueueGroupProperties, "zeDeviceGetCommandQueueGroupProperties", SharedLibrary::kOptional);
  lib.get(api.FabricVertexGetExp, "zeFabricVertexGetExp", SharedLibrary::kOptional);
  lib.get(api.FabricVertexGetPropertiesExp, "zeFabricVertexGetPropertiesExp", SharedLibrary::kOptional);
  lib.get(api.FabricEdgeGetExp, "zeFabricEdgeGetExp", SharedLibrary::kOptional);
  lib.get(api.FabricEdgeGetPropertiesExp, "zeFabricEdgeGetPropertiesExp", SharedLibrary::kOptional);
  lib.get(api.ContextCreateEx, "zeContextCreateEx", SharedLibrary::kOptional);
  lib.get(api.ContextDestroy, "zeContextDestroy", SharedLibrary::kOptional);
  lib.get(api.MemAllocDevice, "zeMemAllocDevice", SharedLibrary::kOptional);
  lib.get(api.MemAllocHost, "zeMemAllocHost", SharedLibrary::kOptional);
  lib.get(api.MemFree, "zeMemFree", SharedLibrary::kOptional);
  lib.get(api.CommandListCreateImmediate, "zeCommandListCreateImmediate", SharedLibrary::kOptional);
  lib.get(api.CommandListDestroy, "zeCommandListDestroy", SharedLibrary::kOptional);
  lib.get(api.CommandListAppendMemoryCopy, "zeCommandListAppendMemoryCopy", SharedLibrary::kOptional);
  lib.get(api.CommandListAppendMemoryFill, "zeCommandListAppendMemoryFill", SharedLibrary::kOptional);
  lib.get(api.LoaderGetVersions, "zelLoaderGetVersions", SharedLibrary::kOptional);
  if (!lib.missing().empty()) return std::string(kLoaderLibrary) + " lacks " + lib.missing();
  return {};
}

void check(const std::string& call, ze_result_t r) {
  if (r != ZE_RESULT_SUCCESS) throw CallFailed{call_json(call, r)};
}

std::string pci_string(const ze_pci_address_ext_t& a) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", a.domain, a.bus, a.device, a.function);
  return buf;
}

Walk walk(const Api& api) {
  Walk w;
  isolated_phase("zeInit");
  check("zeInit", api.Init(ZE_INIT_FLAG_GPU_ONLY));
  isolated_phase("zeDriverGet");
  uint32_t count = 0;
  check("zeDriverGet", api.DriverGet(&count, nullptr));
  w.drivers.resize(count);
  if (count) check("zeDriverGet", api.DriverGet(&count, w.drivers.data()));
  w.drivers.resize(count);
  for (auto* driver : w.drivers) {
    isolated_phase("zeDeviceGet");
    uint32_t n = 0;
    check("zeDeviceGet", api.DeviceGet(driver, &n, nullptr));
    std::vector<ze_device_handle_t> devs(n);
    if (n) check("zeDeviceGet", api.DeviceGet(driver, &n, devs.data()));
    devs.resize(n);
    w.devices.push_back(std::move(devs));
  }
  return w;
}

std::string device_pci_address(const Api& api, ze_device_handle_t device) {
  if (!api.DevicePciGetPropertiesExt) return {};
  isolated_phase("zeDevicePciGetPropertiesExt");
  ze_pci_ext_properties_t pp{};
  pp.stype = ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES;
  if (api.DevicePciGetPropertiesExt(device, &pp) != ZE_RESULT_SUCCESS) return {};
  return pci_string(pp.address);
}

int queue_group_ordinal(const Api& api, ze_device_handle_t device, ze_command_queue_group_property_flags_t want,
                        const std::string& phase) {
  isolated_phase(phase);
  uint32_t n = 0;
  check(phase, api.DeviceGetCommandQueueGroupProperties(device, &n, nullptr));
  // A driver has a handful of groups; more than 64 is not a count to trust.
  if (n == 0 || n > 64) return -1;
  std::vector<ze_command_queue_group_properties_t> groups(n);
  for (auto& g : groups) g.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
  check(phase, api.DeviceGetCommandQueueGroupProperties(device, &n, groups.data()));
  if (n > groups.size()) n = static_cast<uint32_t>(groups.size());
  int preferred = -1, fallback = -1;
  for (uint32_t i = 0; i < n; ++i) {
    const auto flags = groups[i].flags;
    if (groups[i].numQueues == 0) continue;
    const bool copy = flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
    const bool compute = flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE;
    const bool fits = want == ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY ? copy && !compute : compute;
    if (fits && preferred < 0) preferred = static_cast<int>(i);
    if (copy && fallback < 0) fallback = static_cast<int>(i);
  }
  return preferred >= 0 ? preferred : fallback;
}

}  // namespace p2paudit::probe::level_zero
