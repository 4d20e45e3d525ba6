// SPDX-License-Identifier: GPL-2.0-or-later
// What every Level Zero child shares (level_zero.cpp, level_zero_copy.cpp, level_zero_mirror.cpp):
// the loader's functions looked up with dlsym, ze_result_t names, and the walk of drivers and
// devices that numbers them the same way in every child. Used inside run_isolated children only:
// nothing here is called in the parent, which never initialises the loader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <level_zero/loader/ze_loader.h>
#include <level_zero/ze_api.h>
#include <nlohmann/json.hpp>

namespace p2paudit::probe::level_zero {

inline constexpr const char* kLoaderLibrary = "libze_loader.so.1";

// The code's name ("ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"), nullptr when the table lacks it.
const char* result_name(uint32_t code);
// The name, or "unknown ze_result_t 0x..." for a code the table does not know.
std::string result_text(ze_result_t r);
std::string hex_code(uint32_t code);  // "0x70000003"

// A call's result as the JSON a child sends: {"call", "code": "0x70000003", "value", "name"}.
nlohmann::json call_json(const std::string& call, ze_result_t r);
// That JSON as a sentence: "zeDeviceGet returned 0x70000001 ZE_RESULT_ERROR_DEVICE_LOST".
std::string failure_text(const nlohmann::json& failure);

// The loader's functions; a missing one stays null (each user checks the ones it needs).
struct Api {
  decltype(&zeInit) Init = nullptr;
  decltype(&zeDriverGet) DriverGet = nullptr;
  decltype(&zeDriverGetProperties) DriverGetProperties = nullptr;
  decltype(&zeDriverGetApiVersion) DriverGetApiVersion = nullptr;
  decltype(&zeDriverGetExtensionProperties) DriverGetExtensionProperties = nullptr;
  decltype(&zeDriverGetExtensionFunctionAddress) DriverGetExtensionFunctionAddress = nullptr;
  decltype(&zeDeviceGet) DeviceGet = nullptr;
  decltype(&zeDeviceGetProperties) DeviceGetProperties = nullptr;
  decltype(&zeDevicePciGetPropertiesExt) DevicePciGetPropertiesExt = nullptr;
  decltype(&zeDeviceCanAccessPeer) DeviceCanAccessPeer = nullptr;
  decltype(&zeDeviceGetP2PProperties) DeviceGetP2PProperties = nullptr;
  decltype(&zeDeviceGetCommandQueueGroupProperties) DeviceGetCommandQueueGroupProperties = nullptr;
  decltype(&zeFabricVertexGetExp) FabricVertexGetExp = nullptr;
  decltype(&zeFabricVertexGetPropertiesExp) FabricVertexGetPropertiesExp = nullptr;
  decltype(&zeFabricEdgeGetExp) FabricEdgeGetExp = nullptr;
  decltype(&zeFabricEdgeGetPropertiesExp) FabricEdgeGetPropertiesExp = nullptr;
  decltype(&zeContextCreateEx) ContextCreateEx = nullptr;
  decltype(&zeContextDestroy) ContextDestroy = nullptr;
  decltype(&zeMemAllocDevice) MemAllocDevice = nullptr;
  decltype(&zeMemAllocHost) MemAllocHost = nullptr;
  decltype(&zeMemFree) MemFree = nullptr;
  decltype(&zeCommandListCreateImmediate) CommandListCreateImmediate = nullptr;
  decltype(&zeCommandListDestroy) CommandListDestroy = nullptr;
  decltype(&zeCommandListAppendMemoryCopy) CommandListAppendMemoryCopy = nullptr;
  decltype(&zeCommandListAppendMemoryFill) CommandListAppendMemoryFill = nullptr;
  decltype(&zelLoaderGetVersions) LoaderGetVersions = nullptr;

  // What --copy and --mirror need: contexts, memory and immediate command lists.
  bool has_memory_calls() const {
    return DeviceGetCommandQueueGroupProperties && ContextCreateEx && ContextDestroy && MemAllocDevice &&
           MemAllocHost && MemFree && CommandListCreateImmediate && CommandListDestroy &&
           CommandListAppendMemoryCopy && CommandListAppendMemoryFill;
  }
};

// Opens the loader; on failure returns the dlerror() text (or what the loader lacks).
std::string open_loader(Api& api);

// Thrown inside a child when a call fails in a way that ends the phase; becomes its result.
struct CallFailed {
  nlohmann::json failure;
};
void check(const std::string& call, ze_result_t r);

std::string pci_string(const ze_pci_address_ext_t& a);  // "0000:03:00.0"

// zeInit and every driver's devices: the same walk in every child, so that the handles a pair
// child uses are the ones the enumeration child numbered. Throws CallFailed.
struct Walk {
  std::vector<ze_driver_handle_t> drivers;
  std::vector<std::vector<ze_device_handle_t>> devices;  // per driver
};
Walk walk(const Api& api);

// The device's PCI address as pci_string writes it, "" when the driver does not say.
std::string device_pci_address(const Api& api, ze_device_handle_t device);

// The ordinal of the device's command queue group best suited to `want`: ZE_COMMAND_QUEUE_GROUP_
// PROPERTY_FLAG_COPY prefers a copy-only group (the copy engines, which carry PCIe transfers),
// _COMPUTE any group that has it; falls back to any group with COPY. Throws CallFailed, or
// returns -1 when no group fits.
int queue_group_ordinal(const Api& api, ze_device_handle_t device, ze_command_queue_group_property_flags_t want,
                        const std::string& phase);

}  // namespace p2paudit::probe::level_zero
