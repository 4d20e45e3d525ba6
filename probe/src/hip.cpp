// SPDX-License-Identifier: GPL-2.0-or-later
// HIP backend (AMD ROCm): libamdhip64.so opened with dlopen() in an isolated child (docs/probe.md).
// The few HIP types and prototypes used are declared here: no build dependency on ROCm.

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

#include "p2paudit/probe/isolate.h"
#include "p2paudit/probe/probe.h"
#include "session.h"

namespace p2paudit::probe {

namespace {

using hipError_t = int;
constexpr hipError_t kHipSuccess = 0;

// The names of the codes a query may return, for a runtime without hipGetErrorName.
const char* hip_error_name(hipError_t code) {
  switch (code) {
    case 0: return "hipSuccess";
    case 1: return "hipErrorInvalidValue";
    case 2: return "hipErrorOutOfMemory";
    case 3: return "hipErrorNotInitialized";
    case 4: return "hipErrorDeinitialized";
    case 35: return "hipErrorInsufficientDriver";
    case 100: return "hipErrorNoDevice";
    case 101: return "hipErrorInvalidDevice";
    case 217: return "hipErrorPeerAccessUnsupported";
    case 801: return "hipErrorNotSupported";
    case 999: return "hipErrorUnknown";
    default: return "hipErrorUnrecognized";
  }
}

// hsa_amd_link_info_type_t, in HSA's own spelling (INFINBAND included).
std::string link_type_name(std::uint32_t type) {
  switch (type) {
    case 0: return "HSA_AMD_LINK_INFO_TYPE_HYPERTRANSPORT";
    case 1: return "HSA_AMD_LINK_INFO_TYPE_QPI";
    case 2: return "HSA_AMD_LINK_INFO_TYPE_PCIE";
    case 3: return "HSA_AMD_LINK_INFO_TYPE_INFINBAND";
    case 4: return "HSA_AMD_LINK_INFO_TYPE_XGMI";
    default: return fmt::format("HSA_AMD_LINK_INFO_TYPE_{}", type);
  }
}

const std::vector<std::string>& answer_keys() {
  static const std::vector<std::string> keys = {"can_access_peer", "link_type", "hop_count"};
  return keys;
}

struct Hip {
  hipError_t (*init)(unsigned) = nullptr;
  hipError_t (*driver_version)(int*) = nullptr;
  hipError_t (*count)(int*) = nullptr;
  hipError_t (*name)(char*, int, int) = nullptr;
  hipError_t (*bus_id)(char*, int, int) = nullptr;
  hipError_t (*can_access)(int*, int, int) = nullptr;
  hipError_t (*link)(int, int, std::uint32_t*, std::uint32_t*) = nullptr;
  const char* (*error_name)(hipError_t) = nullptr;
  const char* (*error_string)(hipError_t) = nullptr;

  std::string code_name(hipError_t code) const {
    if (error_name)
      if (const char* s = error_name(code); s && *s) return s;
    return hip_error_name(code);
  }
  nlohmann::json failure(const std::string& phase, hipError_t code) const {
    return detail::failed_call(phase, code, code_name(code), error_string ? error_string(code) : nullptr);
  }
};

// The library names tried in order: the override alone, or the development symlink and then the
// runtime packages' own names (ROCm 6, ROCm 5), since a machine without the -dev package has only those.
std::vector<std::string> candidates() {
  if (const char* v = std::getenv("P2PAUDIT_HIP_LIBRARY"); v && *v) return {v};
  return {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
}

std::string describe(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The child's whole conversation with HIP (session.h's protocol).
nlohmann::json hip_session(size_t first_pair) {
  isolated_phase("dlopen");
  SharedLibrary lib = SharedLibrary::open(candidates());
  if (!lib) return {{"absent", "not available: " + lib.error()}};
  Hip h;
  isolated_phase("dlsym");
  lib.get(h.init, "hipInit");
  lib.get(h.driver_version, "hipDriverGetVersion");
  lib.get(h.count, "hipGetDeviceCount");
  lib.get(h.can_access, "hipDeviceCanAccessPeer");
  if (!lib.missing().empty()) return detail::symbol_missing(lib.missing());
  lib.get(h.name, "hipDeviceGetName", SharedLibrary::kOptional);
  lib.get(h.bus_id, "hipDeviceGetPCIBusId", SharedLibrary::kOptional);
  lib.get(h.link, "hipExtGetLinkTypeAndHopCount", SharedLibrary::kOptional);  // AMD's extension; absent from older HIP
  lib.get(h.error_name, "hipGetErrorName", SharedLibrary::kOptional);
  lib.get(h.error_string, "hipGetErrorString", SharedLibrary::kOptional);

  isolated_phase("hipInit");
  // ROCm installed on a machine without an AMD GPU: hipInit answers hipErrorNoDevice (100), or
  // hipErrorInvalidDevice (101) as seen on an NVIDIA host. No runtime to ask, not a failure.
  if (auto rc = h.init(0); rc == 100 || rc == 101)
    return {{"absent", fmt::format("no AMD GPU (hipInit returned {} ({}))", h.code_name(rc), rc)}};
  else if (rc != kHipSuccess)
    return h.failure("hipInit", rc);
  isolated_phase("hipDriverGetVersion");
  int version = 0;
  if (auto rc = h.driver_version(&version); rc != kHipSuccess) return h.failure("hipDriverGetVersion", rc);
  isolated_phase("hipGetDeviceCount");
  int count = 0;
  if (auto rc = h.count(&count); rc != kHipSuccess) return h.failure("hipGetDeviceCount", rc);
  count = std::clamp(count, 0, 1024);

  // HIP's device handle is the device's ordinal: every call below takes the index.
  nlohmann::json devices = nlohmann::json::array();
  for (int i = 0; i < count; ++i) {
    nlohmann::json d = {{"index", i}, {"name", ""}, {"extra", nlohmann::json::object()}};
    auto& extra = d["extra"];
    if (h.name) {
      isolated_phase(fmt::format("hipDeviceGetName({})", i));
      char name[256] = {};
      if (auto rc = h.name(name, sizeof name - 1, i); rc == kHipSuccess) d["name"] = std::string(name);
      else extra["name_error"] = h.code_name(rc);
    }
    if (h.bus_id) {
      isolated_phase(fmt::format("hipDeviceGetPCIBusId({})", i));
      char buf[64] = {};
      if (auto rc = h.bus_id(buf, sizeof buf - 1, i); rc == kHipSuccess) {
        extra["bus_id"] = std::string(buf);
        if (auto bdf = parse_runtime_bus_id(buf)) d["bdf"] = bdf->str();
      } else {
        extra["bus_id_error"] = h.code_name(rc);
      }
    }
    devices.push_back(std::move(d));
  }
  // HIP_VERSION's encoding: major * 10000000 + minor * 100000 + patch.
  isolated_partial({{"driver_version", fmt::format("{}.{}.{}", version / 10000000, version / 100000 % 100, version % 100000)},
                    {"library", lib.name()},
                    {"devices", devices}});

  size_t total = count > 1 ? static_cast<size_t>(count) * static_cast<size_t>(count - 1) : 0;
  for (size_t k = first_pair; k < total; ++k) {
    auto [a, b] = detail::ordered_pair(k, count);
    nlohmann::json answers = nlohmann::json::object();
    isolated_phase(fmt::format("hipDeviceCanAccessPeer({}, {})", a, b));
    int can = 0;
    // hipDeviceCanAccessPeer(&can, device, peer): can `device` access `peer`'s memory; like CUDA,
    // device = client, peer = provider.
    if (auto rc = h.can_access(&can, b, a); rc == kHipSuccess) answers["can_access_peer"] = can ? "ok" : "not_supported";
    else answers["can_access_peer"] = h.code_name(rc);
    if (h.link) {
      isolated_phase(fmt::format("hipExtGetLinkTypeAndHopCount({}, {})", a, b));
      std::uint32_t type = 0, hops = 0;
      if (auto rc = h.link(a, b, &type, &hops); rc == kHipSuccess) {
        answers["link_type"] = link_type_name(type);
        answers["hop_count"] = hops;
      } else {
        answers["link_type"] = h.code_name(rc);
      }
    }
    isolated_partial({{"pair", k}, {"provider", a}, {"client", b}, {"answers", answers}});
  }
  return {{"done", true}};
}

}  // namespace

RuntimeReport probe_hip(const ProbeOptions& options) {
  // The library field names what was tried; the child replaces it with the file it loaded.
  return detail::run_session("hip", describe(candidates()), options, answer_keys(),
                             [](size_t first) { return hip_session(first); });
}

}  // namespace p2paudit::probe
