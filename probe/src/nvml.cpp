// SPDX-License-Identifier: GPL-2.0-or-later
// NVML backend: libnvidia-ml.so.1 opened with dlopen() in an isolated child (docs/probe.md).
// The few NVML types and prototypes used are declared here: no build dependency on CUDA.

#include <tuple>

#include <fmt/format.h>

#include "p2paudit/probe/isolate.h"
#include "p2paudit/probe/probe.h"
#include "session.h"

namespace p2paudit::probe {

namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
// nvmlMemory_t and nvmlBAR1Memory_t: total, free, used bytes.
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorInvalidArgument = 2;
constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
constexpr nvmlReturn_t kNvmlErrorFunctionNotFound = 13;
constexpr unsigned kMaxNvLinks = 18;

const char* nvml_error_name(nvmlReturn_t code) {
  switch (code) {
    case 0: return "NVML_SUCCESS";
    case 1: return "NVML_ERROR_UNINITIALIZED";
    case 2: return "NVML_ERROR_INVALID_ARGUMENT";
    case 3: return "NVML_ERROR_NOT_SUPPORTED";
    case 4: return "NVML_ERROR_NO_PERMISSION";
    case 5: return "NVML_ERROR_ALREADY_INITIALIZED";
    case 6: return "NVML_ERROR_NOT_FOUND";
    case 7: return "NVML_ERROR_INSUFFICIENT_SIZE";
    case 8: return "NVML_ERROR_INSUFFICIENT_POWER";
    case 9: return "NVML_ERROR_DRIVER_NOT_LOADED";
    case 10: return "NVML_ERROR_TIMEOUT";
    case 11: return "NVML_ERROR_IRQ_ISSUE";
    case 12: return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case 13: return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case 14: return "NVML_ERROR_CORRUPTED_INFOROM";
    case 15: return "NVML_ERROR_GPU_IS_LOST";
    case 16: return "NVML_ERROR_RESET_REQUIRED";
    case 17: return "NVML_ERROR_OPERATING_SYSTEM";
    case 18: return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case 19: return "NVML_ERROR_IN_USE";
    case 20: return "NVML_ERROR_MEMORY";
    case 21: return "NVML_ERROR_NO_DATA";
    case 22: return "NVML_ERROR_VGPU_ECC_NOT_ENABLED";
    case 23: return "NVML_ERROR_INSUFFICIENT_RESOURCES";
    case 24: return "NVML_ERROR_FREQ_NOT_SUPPORTED";
    case 25: return "NVML_ERROR_ARGUMENT_VERSION_MISMATCH";
    case 26: return "NVML_ERROR_DEPRECATED";
    case 27: return "NVML_ERROR_NOT_READY";
    case 28: return "NVML_ERROR_GPU_NOT_FOUND";
    case 29: return "NVML_ERROR_INVALID_STATE";
    case 999: return "NVML_ERROR_UNKNOWN";
    default: return "NVML_ERROR_UNRECOGNIZED";
  }
}

// nvmlGpuP2PStatus_t as the answer: "ok", "not_supported" or the status name (NVML's spelling).
std::string p2p_status_answer(int status) {
  switch (status) {
    case 0: return "ok";
    case 1: return "NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED";
    case 2: return "NVML_P2P_STATUS_GPU_NOT_SUPPORTED";
    case 3: return "NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED";
    case 4: return "NVML_P2P_STATUS_DISABLED_BY_REGKEY";
    case 5: return "not_supported";
    case 6: return "unknown";
    default: return fmt::format("NVML_P2P_STATUS_{}", status);
  }
}

// nvmlGpuP2PCapsIndex_t: the answer names, in NVML's index order; decisions read the first three.
const std::vector<std::string>& caps(bool decisions_only = false) {
  static const std::vector<std::string> names = {"read", "write", "nvlink", "atomics", "prop"};
  static const std::vector<std::string> decided = {"read", "write", "nvlink"};
  return decisions_only ? decided : names;
}

struct Nvml {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*p2p)(nvmlDevice_t, nvmlDevice_t, int, int*) = nullptr;
  nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*link_remote)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*bar1)(nvmlDevice_t, nvmlMemory_t*) = nullptr;

  nlohmann::json failure(const std::string& phase, nvmlReturn_t code) const {
    return detail::failed_call(phase, code, nvml_error_name(code), error_string ? error_string(code) : nullptr);
  }
};

std::string fixed_string(const char* s, size_t max) {
  size_t n = 0;
  while (n < max && s[n]) ++n;
  return std::string(s, n);
}

// The child's whole conversation with NVML (session.h's protocol).
nlohmann::json nvml_session(const std::string& library, size_t first_pair, bool decisions_only) {
  isolated_phase("dlopen");
  SharedLibrary lib = SharedLibrary::open({library});
  if (!lib) return {{"absent", lib.error()}};
  Nvml n;
  isolated_phase("dlsym");
  lib.get(n.init, "nvmlInit_v2");
  lib.get(n.driver_version, "nvmlSystemGetDriverVersion");
  lib.get(n.count, "nvmlDeviceGetCount_v2");
  lib.get(n.handle, "nvmlDeviceGetHandleByIndex_v2");
  lib.get(n.p2p, "nvmlDeviceGetP2PStatus");
  if (!lib.missing().empty()) return detail::symbol_missing(lib.missing());
  lib.get(n.shutdown, "nvmlShutdown", SharedLibrary::kOptional);
  lib.get(n.error_string, "nvmlErrorString", SharedLibrary::kOptional);
  lib.get(n.pci, "nvmlDeviceGetPciInfo_v3", SharedLibrary::kOptional);
  lib.get(n.name, "nvmlDeviceGetName", SharedLibrary::kOptional);
  lib.get(n.link_state, "nvmlDeviceGetNvLinkState", SharedLibrary::kOptional);
  lib.get(n.link_remote, "nvmlDeviceGetNvLinkRemotePciInfo_v2", SharedLibrary::kOptional);
  lib.get(n.memory, "nvmlDeviceGetMemoryInfo", SharedLibrary::kOptional);
  lib.get(n.bar1, "nvmlDeviceGetBAR1MemoryInfo", SharedLibrary::kOptional);

  isolated_phase("nvmlInit_v2");
  if (auto rc = n.init(); rc != kNvmlSuccess) return n.failure("nvmlInit_v2", rc);
  isolated_phase("nvmlSystemGetDriverVersion");
  char version[96] = {};
  if (auto rc = n.driver_version(version, sizeof version); rc != kNvmlSuccess)
    return n.failure("nvmlSystemGetDriverVersion", rc);
  isolated_phase("nvmlDeviceGetCount_v2");
  unsigned count = 0;
  if (auto rc = n.count(&count); rc != kNvmlSuccess) return n.failure("nvmlDeviceGetCount_v2", rc);
  if (count > 1024) count = 1024;

  std::vector<nvmlDevice_t> handles(count, nullptr);
  nlohmann::json devices = nlohmann::json::array();
  for (unsigned i = 0; i < count; ++i) {
    isolated_phase(fmt::format("nvmlDeviceGetHandleByIndex_v2({})", i));
    if (auto rc = n.handle(i, &handles[i]); rc != kNvmlSuccess)
      return n.failure(fmt::format("nvmlDeviceGetHandleByIndex_v2({})", i), rc);
    nlohmann::json d = {{"index", i}, {"name", ""}, {"extra", nlohmann::json::object()}};
    auto& extra = d["extra"];
    if (n.pci) {
      isolated_phase(fmt::format("nvmlDeviceGetPciInfo_v3({})", i));
      nvmlPciInfo_t pci{};
      if (auto rc = n.pci(handles[i], &pci); rc == kNvmlSuccess) {
        std::string bus_id = fixed_string(pci.busId, sizeof pci.busId);
        extra["bus_id"] = bus_id;
        if (auto bdf = parse_runtime_bus_id(bus_id)) d["bdf"] = bdf->str();
        extra["pci_device_id"] = fmt::format("{:08x}", pci.pciDeviceId);
      } else {
        extra["pci_error"] = nvml_error_name(rc);
      }
    }
    if (n.name) {
      isolated_phase(fmt::format("nvmlDeviceGetName({})", i));
      char name[96] = {};
      if (auto rc = n.name(handles[i], name, sizeof name); rc == kNvmlSuccess) d["name"] = fixed_string(name, sizeof name);
      else extra["name_error"] = nvml_error_name(rc);
    }
    // The device's memory and its BAR1 aperture, through which a peer reaches that memory over
    // PCIe: a BAR1 smaller than the memory means only part of it can be a peer's target at once.
    for (auto [call, key, get] : {std::tuple{"nvmlDeviceGetMemoryInfo", "memory", n.memory},
                                  std::tuple{"nvmlDeviceGetBAR1MemoryInfo", "bar1", n.bar1}}) {
      isolated_phase(fmt::format("{}({})", call, i));
      nvmlMemory_t info{};
      auto rc = get ? get(handles[i], &info) : kNvmlErrorFunctionNotFound;
      if (rc == kNvmlSuccess) extra[fmt::format("{}_total_bytes", key)] = info.total;
      else extra[fmt::format("{}_error", key)] = nvml_error_name(rc);
    }
    if (n.link_state) {
      nlohmann::json links = nlohmann::json::array();
      for (unsigned link = 0; link < kMaxNvLinks; ++link) {
        isolated_phase(fmt::format("nvmlDeviceGetNvLinkState({}, {})", i, link));
        int active = 0;
        auto rc = n.link_state(handles[i], link, &active);
        if (rc == kNvmlErrorNotSupported || rc == kNvmlErrorInvalidArgument) break;
        nlohmann::json l = {{"link", link}};
        if (rc != kNvmlSuccess) {
          l["state"] = nvml_error_name(rc);
        } else {
          l["state"] = active ? "active" : "inactive";
          if (active && n.link_remote) {
            isolated_phase(fmt::format("nvmlDeviceGetNvLinkRemotePciInfo_v2({}, {})", i, link));
            nvmlPciInfo_t remote{};
            if (auto rc2 = n.link_remote(handles[i], link, &remote); rc2 == kNvmlSuccess) {
              std::string bus_id = fixed_string(remote.busId, sizeof remote.busId);
              auto bdf = parse_runtime_bus_id(bus_id);
              l["remote_bdf"] = bdf ? bdf->str() : bus_id;
            } else {
              l["remote_error"] = nvml_error_name(rc2);
            }
          }
        }
        links.push_back(std::move(l));
      }
      extra["nvlink"] = std::move(links);
    }
    devices.push_back(std::move(d));
  }
  isolated_partial({{"driver_version", fixed_string(version, sizeof version)}, {"devices", devices}});

  int nd = static_cast<int>(count);
  size_t total = nd > 1 ? static_cast<size_t>(nd) * static_cast<size_t>(nd - 1) : 0;
  for (size_t k = first_pair; k < total; ++k) {
    auto [a, b] = detail::ordered_pair(k, nd);
    nlohmann::json answers = nlohmann::json::object();
    const auto& asked = caps(decisions_only);
    for (size_t c = 0; c < asked.size(); ++c) {  // NVML's index c is the c-th name either way
      isolated_phase(fmt::format("nvmlDeviceGetP2PStatus({}, {}, {})", a, b, asked[c]));
      int status = 0;
      auto rc = n.p2p(handles[static_cast<size_t>(a)], handles[static_cast<size_t>(b)], static_cast<int>(c), &status);
      answers[asked[c]] = rc == kNvmlSuccess ? p2p_status_answer(status) : std::string(nvml_error_name(rc));
    }
    isolated_partial({{"pair", k}, {"provider", a}, {"client", b}, {"answers", answers}});
  }
  // The first screen's child exits next, which releases NVML's handles as nvmlShutdown() would
  // (measured at 6.5 ms on 4 H100s); `probe` still says goodbye.
  if (n.shutdown && !decisions_only) {
    isolated_phase("nvmlShutdown");
    n.shutdown();
  }
  return {{"done", true}};
}

}  // namespace

RuntimeReport probe_nvml(const ProbeOptions& options) {
  std::string library = detail::library_path("P2PAUDIT_NVML_LIBRARY", "libnvidia-ml.so.1");
  return detail::run_session("nvml", library, options, caps(options.decisions_only),
                             [&](size_t first) { return nvml_session(library, first, options.decisions_only); });
}

}  // namespace p2paudit::probe
