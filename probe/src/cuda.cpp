// CUDA driver API backend: libcuda.so.1 opened with dlopen() in an isolated child (docs/probe.md).
// The few CUDA types and prototypes used are declared here: no build dependency on CUDA.
#include <dlfcn.h>

#include <algorithm>

#include <fmt/format.h>

#include "p2paudit/probe/isolate.h"
#include "p2paudit/probe/probe.h"
#include "session.h"

namespace p2paudit::probe {

namespace {

using CUresult = int;
using CUdevice = int;
constexpr CUresult kCudaSuccess = 0;

const char* cuda_error_name(CUresult code) {
  switch (code) {
    case 0: return "CUDA_SUCCESS";
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 4: return "CUDA_ERROR_DEINITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 46: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 102: return "CUDA_ERROR_DEVICE_NOT_LICENSED";
    case 201: return "CUDA_ERROR_INVALID_CONTEXT";
    case 217: return "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED";
    case 304: return "CUDA_ERROR_OPERATING_SYSTEM";
    case 801: return "CUDA_ERROR_NOT_SUPPORTED";
    case 802: return "CUDA_ERROR_SYSTEM_NOT_READY";
    case 803: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 804: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case 999: return "CUDA_ERROR_UNKNOWN";
    default: return "CUDA_ERROR_UNRECOGNIZED";
  }
}

// CUdevice_P2PAttribute values asked, and the answer names.
struct Attribute {
  int value;
  const char* name;
  bool is_flag;  // 0/1 answered as "not_supported"/"ok"; otherwise the number
};
constexpr Attribute kAttributes[] = {
    {1, "performance_rank", false},
    {2, "access_supported", true},
    {3, "native_atomic_supported", true},
    {4, "cuda_array_access_supported", true},
};

const std::vector<std::string>& answer_keys() {
  static const std::vector<std::string> keys = {"can_access_peer", "performance_rank", "access_supported",
                                                "native_atomic_supported", "cuda_array_access_supported"};
  return keys;
}

struct Cuda {
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*driver_version)(int*) = nullptr;
  CUresult (*count)(int*) = nullptr;
  CUresult (*get)(CUdevice*, int) = nullptr;
  CUresult (*name)(char*, int, CUdevice) = nullptr;
  CUresult (*bus_id)(char*, int, CUdevice) = nullptr;
  CUresult (*attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*can_access)(int*, CUdevice, CUdevice) = nullptr;
  CUresult (*p2p_attribute)(int*, int, CUdevice, CUdevice) = nullptr;
  CUresult (*error_name)(CUresult, const char**) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;

  std::string code_name(CUresult code) const {
    const char* s = nullptr;
    if (error_name && error_name(code, &s) == kCudaSuccess && s) return s;
    return cuda_error_name(code);
  }
  nlohmann::json failure(const std::string& phase, CUresult code) const {
    nlohmann::json f = {{"phase", phase}, {"code", code}, {"name", code_name(code)}};
    const char* s = nullptr;
    if (error_string && error_string(code, &s) == kCudaSuccess && s) f["description"] = s;
    return {{"failed", f}};
  }
};

template <typename F>
bool load(void* lib, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, symbol));
  return out != nullptr;
}

nlohmann::json cuda_session(const std::string& library, size_t first_pair) {
  isolated_phase("dlopen");
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    return {{"absent", e ? e : "dlopen failed"}};
  }
  Cuda c;
  isolated_phase("dlsym");
  const char* missing = nullptr;
  if (!load(lib, "cuInit", c.init)) missing = "cuInit";
  else if (!load(lib, "cuDriverGetVersion", c.driver_version)) missing = "cuDriverGetVersion";
  else if (!load(lib, "cuDeviceGetCount", c.count)) missing = "cuDeviceGetCount";
  else if (!load(lib, "cuDeviceGet", c.get)) missing = "cuDeviceGet";
  else if (!load(lib, "cuDeviceCanAccessPeer", c.can_access)) missing = "cuDeviceCanAccessPeer";
  if (missing)
    return {{"failed", {{"phase", "dlsym"}, {"code", -1}, {"name", "symbol_missing"}, {"description", missing}}}};
  load(lib, "cuDeviceGetName", c.name);
  load(lib, "cuDeviceGetPCIBusId", c.bus_id);
  load(lib, "cuDeviceGetAttribute", c.attribute);
  load(lib, "cuDeviceGetP2PAttribute", c.p2p_attribute);
  load(lib, "cuGetErrorName", c.error_name);
  load(lib, "cuGetErrorString", c.error_string);

  isolated_phase("cuInit");
  if (auto rc = c.init(0); rc != kCudaSuccess) return c.failure("cuInit", rc);
  isolated_phase("cuDriverGetVersion");
  int version = 0;
  if (auto rc = c.driver_version(&version); rc != kCudaSuccess) return c.failure("cuDriverGetVersion", rc);
  isolated_phase("cuDeviceGetCount");
  int count = 0;
  if (auto rc = c.count(&count); rc != kCudaSuccess) return c.failure("cuDeviceGetCount", rc);
  count = std::clamp(count, 0, 1024);

  std::vector<CUdevice> devs(static_cast<size_t>(count), 0);
  nlohmann::json devices = nlohmann::json::array();
  for (int i = 0; i < count; ++i) {
    isolated_phase(fmt::format("cuDeviceGet({})", i));
    if (auto rc = c.get(&devs[static_cast<size_t>(i)], i); rc != kCudaSuccess)
      return c.failure(fmt::format("cuDeviceGet({})", i), rc);
    CUdevice dev = devs[static_cast<size_t>(i)];
    nlohmann::json d = {{"index", i}, {"name", ""}, {"extra", nlohmann::json::object()}};
    auto& extra = d["extra"];
    if (c.name) {
      isolated_phase(fmt::format("cuDeviceGetName({})", i));
      char name[256] = {};
      if (auto rc = c.name(name, sizeof name - 1, dev); rc == kCudaSuccess) d["name"] = std::string(name);
      else extra["name_error"] = c.code_name(rc);
    }
    std::string bus_id;
    if (c.bus_id) {
      isolated_phase(fmt::format("cuDeviceGetPCIBusId({})", i));
      char buf[64] = {};
      if (auto rc = c.bus_id(buf, sizeof buf - 1, dev); rc == kCudaSuccess) bus_id = buf;
      else extra["bus_id_error"] = c.code_name(rc);
    }
    if (bus_id.empty() && c.attribute) {
      // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID (50), PCI_BUS_ID (33), PCI_DEVICE_ID (34).
      isolated_phase(fmt::format("cuDeviceGetAttribute({}, PCI ids)", i));
      int domain = 0, bus = 0, device = 0;
      if (c.attribute(&domain, 50, dev) == kCudaSuccess && c.attribute(&bus, 33, dev) == kCudaSuccess &&
          c.attribute(&device, 34, dev) == kCudaSuccess)
        bus_id = fmt::format("{:04x}:{:02x}:{:02x}.0", domain, bus, device);
    }
    if (!bus_id.empty()) {
      extra["bus_id"] = bus_id;
      if (auto bdf = parse_runtime_bus_id(bus_id)) d["bdf"] = bdf->str();
    }
    devices.push_back(std::move(d));
  }
  isolated_partial({{"driver_version", fmt::format("{}.{}", version / 1000, (version % 1000) / 10)},
                    {"devices", devices}});

  size_t total = count > 1 ? static_cast<size_t>(count) * static_cast<size_t>(count - 1) : 0;
  for (size_t k = first_pair; k < total; ++k) {
    auto [a, b] = detail::ordered_pair(k, count);
    CUdevice da = devs[static_cast<size_t>(a)], db = devs[static_cast<size_t>(b)];
    nlohmann::json answers = nlohmann::json::object();
    isolated_phase(fmt::format("cuDeviceCanAccessPeer({}, {})", a, b));
    int can = 0;
    // cuDeviceCanAccessPeer(&can, dev, peer): can `dev` access `peer`'s memory. The provider
    // exposes memory, the client accesses it: dev = client, peer = provider.
    if (auto rc = c.can_access(&can, db, da); rc == kCudaSuccess) answers["can_access_peer"] = can ? "ok" : "not_supported";
    else answers["can_access_peer"] = c.code_name(rc);
    if (c.p2p_attribute) {
      for (const auto& attr : kAttributes) {
        isolated_phase(fmt::format("cuDeviceGetP2PAttribute({}, {}, {})", attr.name, a, b));
        int value = 0;
        // cuDeviceGetP2PAttribute(&value, attr, src, dst): asked as (client, provider) like above.
        if (auto rc = c.p2p_attribute(&value, attr.value, db, da); rc != kCudaSuccess)
          answers[attr.name] = c.code_name(rc);
        else if (attr.is_flag)
          answers[attr.name] = value ? "ok" : "not_supported";
        else
          answers[attr.name] = value;
      }
    }
    isolated_partial({{"pair", k}, {"provider", a}, {"client", b}, {"answers", answers}});
  }
  return {{"done", true}};
}

}  // namespace

RuntimeReport probe_cuda(const ProbeOptions& options) {
  std::string library = detail::library_path("P2PAUDIT_CUDA_LIBRARY", "libcuda.so.1");
  return detail::run_session("cuda", library, options, answer_keys(),
                             [&](size_t first) { return cuda_session(library, first); });
}

}  // namespace p2paudit::probe
