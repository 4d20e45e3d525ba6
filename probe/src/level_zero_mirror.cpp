// SPDX-License-Identifier: GPL-2.0-or-later
// `probe --mirror` on Level Zero: does the runtime back a device allocation with host memory?
// compute-runtime 26.09 and later mirror device allocations 1:1 in host memory, charged to the peer
// device, when a context spans two GPUs (intel/compute-runtime#953, #980, #981,
// intel/torch-xpu-ops#5428). In a child: a context with every device of one driver, a snapshot of
// the memory counters (mirror_meter.h), zeMemAllocDevice of --size bytes on the first device and a
// small fill so that lazily backed memory is backed, a second snapshot. Then the same in a child that
// sees only that device (ZE_AFFINITY_MASK set before the loader is opened; the parent never opens it).
#include <algorithm>
#include <cstdlib>

#include "level_zero_api.h"
#include "level_zero_steps.h"
#include "mirror_meter.h"
#include "p2paudit/probe/isolate.h"
#include "session.h"

namespace p2paudit::probe::level_zero {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr size_t kTouchBytes = 4096;  // the fill after the allocation: one page, not the whole buffer

const char* inherited_affinity_mask() {
  const char* mask = std::getenv("ZE_AFFINITY_MASK");
  return mask && *mask ? mask : nullptr;
}

json failed_run(const json& failure) {
  return json{{"status", "failed"}, {"phase", failure.value("call", std::string())},
              {"error", failure_text(failure)}};
}

// The child's body: {"status": "ok", "devices_in_context", "figures": mirror::growth(...)} or
// {"status": "failed", "phase", "error"}. `affinity`: ZE_AFFINITY_MASK for this child, or nullptr.
json mirror_body(const DeviceSlot& target, const char* affinity, uint64_t allocation_bytes) {
  if (affinity) setenv("ZE_AFFINITY_MASK", affinity, 1);  // before the loader and its drivers read it
  Api api;
  if (const std::string e = open_loader(api); !e.empty()) return failed_run({{"call", "dlopen"}, {"name", e}});
  if (!api.has_memory_calls())
    return failed_run({{"call", "dlsym"}, {"name", "the loader lacks the context, memory or command list calls"}});
  ze_context_handle_t context = nullptr;
  ze_command_list_handle_t list = nullptr;
  void* memory = nullptr;
  json result;
  try {
    const Walk w = walk(api);
    // The device by its PCI address (the mask renumbers devices), else by its place in the walk.
    size_t driver = target.driver, position = affinity ? 0 : target.position;
    for (size_t d = 0; d < w.devices.size() && !target.bdf.empty(); ++d)
      for (size_t i = 0; i < w.devices[d].size(); ++i)
        if (device_pci_address(api, w.devices[d][i]) == target.bdf) driver = d, position = i;
    if (driver >= w.devices.size() || position >= w.devices[driver].size())
      throw CallFailed{{{"call", "zeDeviceGet"}, {"name", "the device is not there any more"}}};
    std::vector<ze_device_handle_t> devices = w.devices[driver];
    std::vector<std::string> bdfs;
    for (auto* device : devices) bdfs.push_back(device_pci_address(api, device));

    isolated_phase("zeContextCreateEx");
    ze_context_desc_t context_desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    check("zeContextCreateEx", api.ContextCreateEx(w.drivers[driver], &context_desc,
                                                   static_cast<uint32_t>(devices.size()),
                                                   devices.data(), &context));
    // The command list exists before the first snapshot: only the allocation is measured.
    const std::string groups = "zeDeviceGetCommandQueueGroupProperties(" + std::to_string(target.index) + ")";
    const int ordinal = queue_group_ordinal(api, devices[position], ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE, groups);
    if (ordinal < 0) throw CallFailed{{{"call", groups}, {"name", "no command queue group that can fill"}}};
    ze_command_queue_desc_t queue_desc{};
    queue_desc.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC;
    queue_desc.ordinal = static_cast<uint32_t>(ordinal);
    queue_desc.mode = ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS;
    isolated_phase("zeCommandListCreateImmediate");
    check("zeCommandListCreateImmediate", api.CommandListCreateImmediate(context, devices[position], &queue_desc, &list));

    isolated_phase("reading /proc before the allocation");
    const mirror::Snapshot before = mirror::take_snapshot();
    const std::string alloc = "zeMemAllocDevice(" + std::to_string(allocation_bytes) + " bytes on " +
                              std::to_string(target.index) + ")";
    isolated_phase(alloc);
    ze_device_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
    check(alloc, api.MemAllocDevice(context, &desc, static_cast<size_t>(allocation_bytes), 64, devices[position], &memory));
    isolated_phase("zeCommandListAppendMemoryFill");
    const uint8_t pattern = 0xa5;
    check("zeCommandListAppendMemoryFill",
          api.CommandListAppendMemoryFill(list, memory, &pattern, 1, std::min<uint64_t>(allocation_bytes, kTouchBytes),
                                          nullptr, 0, nullptr));
    isolated_phase("reading /proc after the allocation");
    const mirror::Snapshot after = mirror::take_snapshot();
    result = json{{"status", "ok"},
                  {"devices_in_context", devices.size()},
                  {"figures", mirror::growth(before, after, allocation_bytes, bdfs)}};
    isolated_partial(result);  // kept should the cleanup hang or crash
  } catch (const CallFailed& f) {
    result = failed_run(f.failure);
  }
  if (memory) {
    isolated_phase("zeMemFree");
    api.MemFree(context, memory);
  }
  if (list) {
    isolated_phase("zeCommandListDestroy");
    api.CommandListDestroy(list);
  }
  if (context) {
    isolated_phase("zeContextDestroy");
    api.ContextDestroy(context);
  }
  return result;
}

// One run as report.extra["mirror"]["runs"] holds it (docs/probe-level-zero.md).
ordered_json run_json(const IsolatedResult& r, const std::string& visible, size_t expected_devices,
                      const DeviceSlot& target, const std::vector<DeviceSlot>& slots) {
  json child = r.ok() ? r.value : json(nullptr);
  if (!child.is_object() || !child.contains("status"))
    for (const json& piece : r.partial)
      if (piece.is_object() && piece.contains("figures")) child = piece;  // measured, then died cleaning up
  const json figures = child.is_object() && child.contains("figures") ? child["figures"] : json::object();
  ordered_json run;
  run["visible"] = visible;
  run["devices_in_context"] = child.is_object() ? child.value("devices_in_context", expected_devices) : expected_devices;
  run["allocated_on"] = target.index;
  run["allocated_bdf"] = target.bdf.empty() ? ordered_json(nullptr) : ordered_json(target.bdf);
  if (!r.ok()) {
    run["status"] = r.status;
    run["phase"] = r.phase;
    run["error"] = r.error;
  } else if (!child.is_object() || child.value("status", "") != "ok") {
    run["status"] = "failed";
    run["phase"] = child.is_object() ? child.value("phase", r.phase) : r.phase;
    run["error"] = child.is_object() ? child.value("error", std::string("no answer")) : "no answer";
  } else {
    run["status"] = "ok";
  }
  const auto take = [&](const char* key, const json& otherwise) {
    return ordered_json::parse((figures.contains(key) ? figures[key] : otherwise).dump());
  };
  run["host_bytes"] = take("host_bytes", nullptr);
  run["host_bytes_per_byte"] = take("host_bytes_per_byte", nullptr);
  run["source"] = take("source", nullptr);
  run["per_device"] = ordered_json::array();
  if (figures.contains("per_device") && figures["per_device"].is_array()) {
    for (const json& d : figures["per_device"]) {
      const std::string bdf = d.value("bdf", std::string());
      ordered_json one;
      one["index"] = nullptr;  // the report's index of the device at that PCI address
      for (const auto& s : slots)
        if (!bdf.empty() && s.bdf == bdf) one["index"] = s.index;
      one["bdf"] = bdf.empty() ? ordered_json(nullptr) : ordered_json(bdf);
      for (const char* key : {"host_bytes", "host_bytes_per_byte"})
        one[key] = ordered_json::parse((d.contains(key) ? d[key] : json(nullptr)).dump());
      one["fdinfo"] = d.contains("fdinfo") ? in_order(d["fdinfo"], {"before", "after"}) : ordered_json::object();
      run["per_device"].push_back(std::move(one));
    }
  }
  run["meminfo_delta"] = in_order(figures.value("meminfo_delta", json::object()),
                                  {"MemAvailable", "Committed_AS", "Mlocked", "AnonPages", "Unevictable"});
  run["status_delta"] = in_order(figures.value("status_delta", json::object()), {"VmRSS", "VmPin", "VmLck"});
  return run;
}

}  // namespace

void measure_mirror(RuntimeReport& report, const std::vector<DeviceSlot>& slots, const ProbeOptions& options) {
  if (slots.empty()) {
    detail::add_note(report, "--mirror: no Level Zero device to measure");
    return;
  }
  if (options.copy.size_bytes == 0) {
    detail::add_note(report, "--mirror: --size 0, nothing to allocate");
    return;
  }
  // The driver with the most devices (a context spans one driver); its first device is allocated on.
  std::vector<std::vector<DeviceSlot>> by_driver;
  for (const auto& s : slots) {
    if (s.driver >= by_driver.size()) by_driver.resize(s.driver + 1);
    by_driver[s.driver].push_back(s);
  }
  const auto most = std::max_element(by_driver.begin(), by_driver.end(),
                                     [](const auto& a, const auto& b) { return a.size() < b.size(); });
  const std::vector<DeviceSlot>& devices = *most;
  const DeviceSlot& target = devices.front();
  const uint64_t n = options.copy.size_bytes;

  ordered_json mirror;
  mirror["allocation_bytes"] = n;
  mirror["runs"] = ordered_json::array();
  const char* inherited = inherited_affinity_mask();
  const IsolatedResult all = run_isolated("zeInit", options.timeout_seconds,
                                          [&] { return mirror_body(target, nullptr, n); });
  mirror["runs"].push_back(run_json(all, inherited ? inherited : "all", devices.size(), target, slots));
  if (devices.size() < 2) {
    mirror["note"] = "one device: no context spans two devices, so there is no peer to mirror for";
  } else if (inherited) {
    mirror["note"] = std::string("ZE_AFFINITY_MASK is already set (") + inherited +
                     "): the single-device run is not made, its index would not be the device's";
  } else {
    const std::string mask = std::to_string(target.position);
    const IsolatedResult one = run_isolated("zeInit", options.timeout_seconds,
                                            [&] { return mirror_body(target, mask.c_str(), n); });
    mirror["runs"].push_back(run_json(one, mask, 1, target, slots));
  }
  report.extra["mirror"] = std::move(mirror);
}

}  // namespace p2paudit::probe::level_zero
