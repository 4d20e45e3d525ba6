// SPDX-License-Identifier: GPL-2.0-or-later
// CUDA driver API backend: libcuda.so.1 opened with dlopen() in an isolated child (docs/probe.md),
// and with --copy a peer and a host-staged copy per ordered pair (probe.h, PairAnswer).
// The few CUDA types and prototypes used are declared here: no build dependency on CUDA.

#include <algorithm>
#include <chrono>
#include <map>
#include <new>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "copy_check.h"
#include "cuda_peer_kernels.h"
#include "peer_paths.h"
#include "p2paudit/probe/isolate.h"
#include "p2paudit/probe/probe.h"
#include "session.h"

namespace p2paudit::probe {

namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUdeviceptr = unsigned long long;  // 64-bit builds only, like the driver's own
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
constexpr CUresult kCudaSuccess = 0;
constexpr CUresult kCudaOutOfMemory = 2;
constexpr CUresult kCudaNotReady = 600;
constexpr CUresult kPeerAccessAlreadyEnabled = 704;

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
    case 214: return "CUDA_ERROR_ECC_UNCORRECTABLE";
    case 217: return "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED";
    case 220: return "CUDA_ERROR_NVLINK_UNCORRECTABLE";
    case 304: return "CUDA_ERROR_OPERATING_SYSTEM";
    case 400: return "CUDA_ERROR_INVALID_HANDLE";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 500: return "CUDA_ERROR_NOT_FOUND";
    case 600: return "CUDA_ERROR_NOT_READY";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 704: return "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED";
    case 705: return "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED";
    case 708: return "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE";
    case 709: return "CUDA_ERROR_CONTEXT_IS_DESTROYED";
    case 711: return "CUDA_ERROR_TOO_MANY_PEERS";
    case 702: return "CUDA_ERROR_LAUNCH_TIMEOUT";
    case 719: return "CUDA_ERROR_LAUNCH_FAILED";
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
  // probe --copy
  CUresult (*ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_set)(CUcontext) = nullptr;
  CUresult (*ctx_sync)() = nullptr;
  CUresult (*peer_enable)(CUcontext, unsigned) = nullptr;
  CUresult (*peer_disable)(CUcontext) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*host_alloc)(void**, size_t) = nullptr;
  CUresult (*host_free)(void*) = nullptr;
  CUresult (*htod)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*dtoh)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*peer_copy)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t) = nullptr;
  // probe --copy: the peer paths of kernels (peer_paths.h)
  CUresult (*mem_info)(size_t*, size_t*) = nullptr;
  CUresult (*memset_d32)(CUdeviceptr, unsigned, size_t) = nullptr;
  CUresult (*module_load)(CUmodule*, const void*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*module_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**,
                     void**) = nullptr;
  CUresult (*stream_query)(CUstream) = nullptr;
  // A kernel that never finished (or failed: such errors stick to the context) leaves the child's
  // contexts unusable: every later call may block behind it. Then nothing more is asked of them,
  // no memory is freed, and the copy child ends so that a fresh one does the pairs left.
  mutable bool context_lost = false;

  std::string code_name(CUresult code) const {
    const char* s = nullptr;
    if (error_name && error_name(code, &s) == kCudaSuccess && s) return s;
    return cuda_error_name(code);
  }
  nlohmann::json failure(const std::string& phase, CUresult code) const {
    const char* s = nullptr;
    if (!error_string || error_string(code, &s) != kCudaSuccess) s = nullptr;
    return detail::failed_call(phase, code, code_name(code), s);
  }
};

// dlopen, dlsym and cuInit: nullopt when CUDA is ready, else the session's answer
// ({"absent": why} or {"failed": ...}).
std::optional<nlohmann::json> open_cuda(const std::string& library, Cuda& c) {
  isolated_phase("dlopen");
  SharedLibrary lib = SharedLibrary::open({library});
  if (!lib) return nlohmann::json{{"absent", lib.error()}};
  isolated_phase("dlsym");
  lib.get(c.init, "cuInit");
  lib.get(c.driver_version, "cuDriverGetVersion");
  lib.get(c.count, "cuDeviceGetCount");
  lib.get(c.get, "cuDeviceGet");
  lib.get(c.can_access, "cuDeviceCanAccessPeer");
  if (!lib.missing().empty()) return detail::symbol_missing(lib.missing());
  lib.get(c.name, "cuDeviceGetName", SharedLibrary::kOptional);
  lib.get(c.bus_id, "cuDeviceGetPCIBusId", SharedLibrary::kOptional);
  lib.get(c.attribute, "cuDeviceGetAttribute", SharedLibrary::kOptional);
  lib.get(c.p2p_attribute, "cuDeviceGetP2PAttribute", SharedLibrary::kOptional);
  lib.get(c.error_name, "cuGetErrorName", SharedLibrary::kOptional);
  lib.get(c.error_string, "cuGetErrorString", SharedLibrary::kOptional);
  lib.get(c.ctx_retain, "cuDevicePrimaryCtxRetain", SharedLibrary::kOptional);
  lib.get(c.ctx_set, "cuCtxSetCurrent", SharedLibrary::kOptional);
  lib.get(c.ctx_sync, "cuCtxSynchronize", SharedLibrary::kOptional);
  lib.get(c.peer_enable, "cuCtxEnablePeerAccess", SharedLibrary::kOptional);
  lib.get(c.peer_disable, "cuCtxDisablePeerAccess", SharedLibrary::kOptional);
  lib.get(c.mem_alloc, "cuMemAlloc_v2", SharedLibrary::kOptional);
  lib.get(c.mem_free, "cuMemFree_v2", SharedLibrary::kOptional);
  lib.get(c.host_alloc, "cuMemAllocHost_v2", SharedLibrary::kOptional);
  lib.get(c.host_free, "cuMemFreeHost", SharedLibrary::kOptional);
  lib.get(c.htod, "cuMemcpyHtoD_v2", SharedLibrary::kOptional);
  lib.get(c.dtoh, "cuMemcpyDtoH_v2", SharedLibrary::kOptional);
  lib.get(c.peer_copy, "cuMemcpyPeer", SharedLibrary::kOptional);
  lib.get(c.mem_info, "cuMemGetInfo_v2", SharedLibrary::kOptional);
  lib.get(c.memset_d32, "cuMemsetD32_v2", SharedLibrary::kOptional);
  lib.get(c.module_load, "cuModuleLoadData", SharedLibrary::kOptional);
  lib.get(c.module_unload, "cuModuleUnload", SharedLibrary::kOptional);
  lib.get(c.module_function, "cuModuleGetFunction", SharedLibrary::kOptional);
  lib.get(c.launch, "cuLaunchKernel", SharedLibrary::kOptional);
  lib.get(c.stream_query, "cuStreamQuery", SharedLibrary::kOptional);

  isolated_phase("cuInit");
  if (auto rc = c.init(0); rc != kCudaSuccess) return c.failure("cuInit", rc);
  return std::nullopt;
}

nlohmann::json cuda_session(const std::string& library, size_t first_pair) {
  Cuda c;
  if (auto not_ready = open_cuda(library, c)) return *not_ready;
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


// ---- probe --copy ----------------------------------------------------------------------------

// Device or pinned host memory, freed when the pair is done (the next pair allocates its own).
struct DeviceBuffer {
  const Cuda& c;
  CUcontext ctx;
  CUdeviceptr ptr = 0;
  ~DeviceBuffer() {
    if (ptr && !c.context_lost && c.ctx_set(ctx) == kCudaSuccess) c.mem_free(ptr);
  }
};
struct PinnedBuffer {
  const Cuda& c;
  void* ptr = nullptr;
  ~PinnedBuffer() {
    if (ptr) c.host_free(ptr);
  }
};

using Clock = std::chrono::steady_clock;
using detail::CopyLeg;

// An idle peer link sleeps: on 2x H200 (NVLink), a 256 MiB peer copy after half a second of idling
// (what filling and comparing the buffers take) ran at 290 GB/s, against 389 GB/s back to back,
// and at 385 GB/s after a 4 MiB copy over the same path. So each timed peer copy follows such a
// copy, into a buffer of its own: the bytes compared still come from the timed copy alone.
constexpr size_t kWakeBytes = 4u << 20;

// Copies one ordered pair's buffer both ways of probe.h's "copy" answer. The provider's memory is
// read, the client's written. Each of `repeat` timed copies moves fresh random bytes and is read
// back and compared in full, so a copy that reports success without moving the data is "corrupt",
// never fast.
class PairCopy {
 public:
  PairCopy(const Cuda& c, const CopyOptions& options, std::map<int, CUcontext>& contexts, int provider, int client)
      : c_(c), options_(options), contexts_(contexts), provider_(provider), client_(client) {}

  nlohmann::json run() {
    try {
      run_legs();
    } catch (const std::exception& e) {  // the host buffers: std::bad_alloc
      fail_both("host memory", -1, e.what());
    }
    return detail::copy_answer(options_, peer_, staged_);
  }

 private:
  void phase(const std::string& what) { isolated_phase(fmt::format("copy {}->{}: {}", provider_, client_, what)); }

  // True when rc is success; otherwise remembers the call and its code for the leg that failed.
  bool step(const char* call, CUresult rc) {
    if (rc == kCudaSuccess) return true;
    failed_call_ = call, failed_code_ = rc;
    return false;
  }
  void fail(CopyLeg& leg) { leg.fail(failed_call_, failed_code_, c_.code_name(failed_code_)); }
  void fail_both(const char* call, long long code, const std::string& name) {
    for (CopyLeg* leg : {&peer_, &staged_})
      if (leg->result == "not_run") leg->fail(call, code, name);
  }

  // The device's primary context, retained once per child (creating one costs far more than a copy).
  bool context(int index, CUcontext* out) {
    if (auto it = contexts_.find(index); it != contexts_.end()) return *out = it->second, true;
    CUdevice dev = 0;
    if (!step("cuDeviceGet", c_.get(&dev, index)) || !step("cuDevicePrimaryCtxRetain", c_.ctx_retain(out, dev)))
      return false;
    contexts_[index] = *out;
    return true;
  }

  void run_legs() {
    const char* missing = !c_.ctx_retain ? "cuDevicePrimaryCtxRetain" : !c_.ctx_set ? "cuCtxSetCurrent"
                        : !c_.ctx_sync ? "cuCtxSynchronize" : !c_.peer_enable ? "cuCtxEnablePeerAccess"
                        : !c_.mem_alloc ? "cuMemAlloc_v2" : !c_.mem_free ? "cuMemFree_v2"
                        : !c_.host_alloc ? "cuMemAllocHost_v2" : !c_.host_free ? "cuMemFreeHost"
                        : !c_.htod ? "cuMemcpyHtoD_v2" : !c_.dtoh ? "cuMemcpyDtoH_v2"
                        : !c_.peer_copy ? "cuMemcpyPeer" : nullptr;
    if (missing) return fail_both(missing, -1, "symbol_missing");
    if (options_.size_bytes == 0) {
      peer_.error = staged_.error = "--size 0: nothing to copy";
      return;
    }
    const size_t size = options_.size_bytes;

    phase("cuDevicePrimaryCtxRetain");
    DeviceBuffer src{c_, nullptr}, dst{c_, nullptr}, wake{c_, nullptr};
    PinnedBuffer pinned{c_};
    bool ready = context(provider_, &pctx_) && context(client_, &cctx_);
    src.ctx = pctx_, dst.ctx = wake.ctx = cctx_;
    wake_size_ = std::min<size_t>(size, kWakeBytes);
    if (ready) phase("cuMemAlloc_v2");
    ready = ready && step("cuCtxSetCurrent", c_.ctx_set(pctx_)) && step("cuMemAlloc_v2", c_.mem_alloc(&src.ptr, size)) &&
            step("cuCtxSetCurrent", c_.ctx_set(cctx_)) && step("cuMemAlloc_v2", c_.mem_alloc(&dst.ptr, size)) &&
            step("cuMemAlloc_v2", c_.mem_alloc(&wake.ptr, wake_size_)) &&
            step("cuMemAllocHost_v2", c_.host_alloc(&pinned.ptr, size));
    if (!ready) return fail_both(failed_call_, failed_code_, c_.code_name(failed_code_));
    src_ = src.ptr, dst_ = dst.ptr, wake_ = wake.ptr, pinned_ = pinned.ptr;
    expected_.resize(size);
    actual_.resize(size);

    // The client's context may read the provider's memory. Without it cuMemcpyPeer still succeeds,
    // staged through host memory behind our back: then the peer leg fails instead of measuring that.
    phase("cuCtxEnablePeerAccess");
    CUresult enabled = c_.ctx_set(cctx_);
    if (enabled == kCudaSuccess) enabled = c_.peer_enable(pctx_, 0);
    if (enabled == kCudaSuccess || enabled == kPeerAccessAlreadyEnabled) {
      auto peer_copy = [this](CUdeviceptr to, size_t bytes) {
        return step("cuCtxSetCurrent", c_.ctx_set(cctx_)) && step("cuMemcpyPeer", c_.peer_copy(to, cctx_, src_, pctx_, bytes)) &&
               synchronize_both();
      };
      run_leg(peer_, "cuMemcpyPeer", 1, [&] { return peer_copy(wake_, wake_size_); },
              [&] { return peer_copy(dst_, expected_.size()); });
      // Left as found: a device has few peer slots, and later pairs need theirs.
      if (enabled == kCudaSuccess && c_.peer_disable && c_.ctx_set(cctx_) == kCudaSuccess) c_.peer_disable(pctx_);
    } else {
      step("cuCtxEnablePeerAccess", enabled);
      fail(peer_);
    }
    run_leg(staged_, "host-staged copy", 1000, [] { return true; }, [this] {
      return step("cuCtxSetCurrent", c_.ctx_set(pctx_)) && step("cuMemcpyDtoH_v2", c_.dtoh(pinned_, src_, expected_.size())) &&
             step("cuCtxSetCurrent", c_.ctx_set(cctx_)) && step("cuMemcpyHtoD_v2", c_.htod(dst_, pinned_, expected_.size())) &&
             synchronize_both();
    });
  }

  // A copy between devices returns before it is done; it is ordered with the work of both
  // contexts, so waiting for both is waiting for it.
  bool synchronize_both() {
    return step("cuCtxSetCurrent", c_.ctx_set(cctx_)) && step("cuCtxSynchronize", c_.ctx_sync()) &&
           step("cuCtxSetCurrent", c_.ctx_set(pctx_)) && step("cuCtxSynchronize", c_.ctx_sync());
  }

  // `copy` is the timed part: the copy and the wait for it; `wake` runs just before, untimed.
  template <typename Wake, typename Copy>
  void run_leg(CopyLeg& leg, const char* what, std::uint64_t seed_base, Wake wake, Copy copy) {
    const int repeat = std::clamp(options_.repeat, 1, 1000);
    const size_t size = expected_.size();
    for (int r = 1; r <= repeat; ++r) {
      std::string which = fmt::format("repeat {} of {}", r, repeat);
      phase(fmt::format("upload for {}, {}", what, which));
      detail::fill_random(expected_.data(), size, seed_base + static_cast<std::uint64_t>(r));
      if (!step("cuCtxSetCurrent", c_.ctx_set(pctx_)) || !step("cuMemcpyHtoD_v2", c_.htod(src_, expected_.data(), size)) ||
          !step("cuCtxSynchronize", c_.ctx_sync()))
        return fail(leg);
      phase(fmt::format("{}, {}", what, which));
      if (!wake()) return fail(leg);
      auto start = Clock::now();
      if (!copy()) return fail(leg);
      double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      phase(fmt::format("read back after {}, {}", what, which));
      if (!step("cuCtxSetCurrent", c_.ctx_set(cctx_)) || !step("cuMemcpyDtoH_v2", c_.dtoh(actual_.data(), dst_, size)))
        return fail(leg);
      auto mismatch = detail::compare_buffers(expected_.data(), actual_.data(), size);
      if (mismatch.any() && !leg.mismatch.any()) leg.mismatch = mismatch;
      leg.seconds.push_back(seconds);
    }
    leg.finish();
  }

  const Cuda& c_;
  const CopyOptions& options_;
  std::map<int, CUcontext>& contexts_;
  int provider_, client_;
  CUcontext pctx_ = nullptr, cctx_ = nullptr;
  CUdeviceptr src_ = 0, dst_ = 0, wake_ = 0;
  size_t wake_size_ = 0;
  void* pinned_ = nullptr;
  std::vector<std::uint8_t> expected_, actual_;  // the bytes sent, the bytes that arrived
  const char* failed_call_ = "";
  CUresult failed_code_ = kCudaSuccess;
  CopyLeg peer_, staged_;
};

// ---- probe --copy: the peer paths of kernels (peer_paths.h) ------------------------------------

// Kernel stores, kernel loads and atomics of the client GPU on the provider's memory, each into
// windows at the start, middle and end of a block as large as the span a peer reaches (docs/probe.md
// "Peer paths"). The client's context gets peer access to the provider's, as for cuMemcpyPeer.
class PeerPathCheck {
 public:
  PeerPathCheck(const Cuda& c, const CopyOptions& options, std::map<int, CUcontext>& contexts, int provider, int client,
                std::uint64_t bar1_bytes, int timeout_seconds)
      : c_(c), options_(options), contexts_(contexts), provider_(provider), client_(client), bar1_bytes_(bar1_bytes),
        timeout_seconds_(timeout_seconds) {}

  nlohmann::json run() {
    const auto start = Clock::now();
    seed_ = static_cast<std::uint64_t>(start.time_since_epoch().count()) ^ (static_cast<std::uint64_t>(provider_) << 40) ^
            (static_cast<std::uint64_t>(client_) << 48);
    try {
      check();
    } catch (const std::exception& e) {  // the host buffers: std::bad_alloc
      not_run(std::string("host memory: ") + e.what());
    }
    return detail::peer_paths_answer(plan_, block_bytes_, offsets_, seed_,
                                     std::chrono::duration<double>(Clock::now() - start).count(), paths_, note_);
  }

 private:
  using PathResult = detail::PathResult;
  using PeerPath = detail::PeerPath;

  void phase(const std::string& what) { isolated_phase(fmt::format("peer paths {}->{}: {}", provider_, client_, what)); }
  PathResult& path(PeerPath p) { return paths_[static_cast<int>(p)]; }
  static const char* kernel_name(PeerPath p) {
    return p == PeerPath::kKernelStores ? detail::kPeerStoreKernel
         : p == PeerPath::kKernelLoads  ? detail::kPeerLoadKernel : detail::kPeerAtomicKernel;
  }
  // Every path still not run gets the same reason (a missing symbol, no context, the time bound).
  void not_run(const std::string& why) {
    for (auto& p : paths_)
      if (p.result == "not_run" && p.note.empty()) p.note = why;
  }
  void refuse_all(const char* call, CUresult rc) {
    for (auto& p : paths_)
      if (p.result == "not_run") p.refuse(call, rc, c_.code_name(rc));
  }

  bool context(int index, CUcontext* out, CUdevice* dev) {
    if (c_.get(dev, index) != kCudaSuccess) return false;
    if (auto it = contexts_.find(index); it != contexts_.end()) return *out = it->second, true;
    if (c_.ctx_retain(out, *dev) != kCudaSuccess) return false;
    contexts_[index] = *out;
    return true;
  }

  void check() {
    const char* missing = !c_.ctx_retain ? "cuDevicePrimaryCtxRetain" : !c_.ctx_set ? "cuCtxSetCurrent"
                        : !c_.ctx_sync ? "cuCtxSynchronize" : !c_.peer_enable ? "cuCtxEnablePeerAccess"
                        : !c_.mem_alloc ? "cuMemAlloc_v2" : !c_.mem_free ? "cuMemFree_v2" : !c_.htod ? "cuMemcpyHtoD_v2"
                        : !c_.dtoh ? "cuMemcpyDtoH_v2" : !c_.mem_info ? "cuMemGetInfo_v2"
                        : !c_.memset_d32 ? "cuMemsetD32_v2" : !c_.module_load ? "cuModuleLoadData"
                        : !c_.module_function ? "cuModuleGetFunction" : !c_.launch ? "cuLaunchKernel"
                        : !c_.stream_query ? "cuStreamQuery" : nullptr;
    if (missing) return not_run(fmt::format("the CUDA library lacks {}", missing));
    phase("cuDevicePrimaryCtxRetain");
    if (!context(provider_, &pctx_, &pdev_) || !context(client_, &cctx_, &cdev_))
      return not_run("no context for the provider or the client");

    phase("cuMemGetInfo_v2");
    size_t free = 0, total = 0;
    if (auto rc = c_.ctx_set(pctx_) == kCudaSuccess ? c_.mem_info(&free, &total) : 201; rc != kCudaSuccess)
      return not_run(fmt::format("cuMemGetInfo_v2 returned {}", c_.code_name(rc)));
    plan_ = detail::plan_windows(bar1_bytes_, total, free, options_.thorough, timeout_seconds_);
    if (plan_.window_bytes < 4096) return not_run("the provider has no free memory for a test window");

    // The block: as asked, else halved until it fits (another job may hold memory).
    phase(fmt::format("cuMemAlloc_v2 of {} bytes", plan_.block_bytes));
    DeviceBuffer block{c_, pctx_}, local{c_, cctx_};
    CUresult rc = kCudaOutOfMemory;
    for (std::uint64_t want = plan_.block_bytes; want >= plan_.window_bytes; want = want / 2 / 4096 * 4096) {
      rc = c_.mem_alloc(&block.ptr, want);
      if (rc == kCudaSuccess) {
        block_bytes_ = want;
        break;
      }
      block.ptr = 0;
      if (rc != kCudaOutOfMemory) break;
    }
    if (rc == kCudaSuccess && c_.ctx_set(cctx_) == kCudaSuccess) rc = c_.mem_alloc(&local.ptr, plan_.window_bytes);
    if (rc != kCudaSuccess) return not_run(fmt::format("cuMemAlloc_v2 returned {}", c_.code_name(rc)));
    offsets_ = detail::window_offsets(block_bytes_, plan_.window_bytes, plan_.windows);
    if (block_bytes_ < plan_.block_bytes)
      note_ = fmt::format("only {} of the {} bytes asked could be allocated: the windows stop there", block_bytes_,
                          plan_.block_bytes);
    block_ = block.ptr, local_ = local.ptr;

    phase("cuCtxEnablePeerAccess");
    CUresult enabled = c_.ctx_set(cctx_);
    if (enabled == kCudaSuccess) enabled = c_.peer_enable(pctx_, 0);
    if (enabled != kCudaSuccess && enabled != kPeerAccessAlreadyEnabled) return refuse_all("cuCtxEnablePeerAccess", enabled);

    phase("cuModuleLoadData");
    CUmodule module = nullptr;
    rc = c_.module_load(&module, detail::kPeerKernelsPtx);
    for (PeerPath p : detail::kPeerPaths)
      if (rc == kCudaSuccess) rc = c_.module_function(&kernels_[static_cast<int>(p)], module, kernel_name(p));
    if (rc != kCudaSuccess) {
      // The tool's own kernels did not load: that says nothing about the pair.
      not_run(fmt::format("the check's kernels did not load: {} returned {}", module ? "cuModuleGetFunction" : "cuModuleLoadData",
                          c_.code_name(rc)));
    } else {
      // cuDeviceGetP2PAttribute(NATIVE_ATOMIC_SUPPORTED, client, provider): atomics are asked
      // only of pairs the driver says carry them natively.
      int atomics = 0;
      if (!c_.p2p_attribute || c_.p2p_attribute(&atomics, 3, cdev_, pdev_) != kCudaSuccess || !atomics) {
        path(PeerPath::kAtomics).result = "not_supported";
        path(PeerPath::kAtomics).note = "the driver does not report native peer atomics for this pair";
      }
      run_windows();
    }
    if (c_.context_lost) {  // nothing more is asked of the contexts, not even to free
      block.ptr = local.ptr = 0;
      return;
    }
    if (module && c_.module_unload) c_.module_unload(module);
    // Left as found: a device has few peer slots, and later pairs need theirs.
    if (enabled == kCudaSuccess && c_.peer_disable && c_.ctx_set(cctx_) == kCudaSuccess) c_.peer_disable(pctx_);
  }

  void run_windows() {
    const size_t words = plan_.window_bytes / 4;
    expected_.resize(words), actual_.resize(words), source_.resize(words);
    const auto start = Clock::now();
    for (size_t w = 0; w < offsets_.size(); ++w)
      for (PeerPath p : detail::kPeerPaths) {
        if (c_.context_lost) return not_run("an earlier kernel left the client's context unusable");
        if (path(p).result == "not_supported") continue;
        if (std::chrono::duration<double>(Clock::now() - start).count() > plan_.seconds_per_pair) {
          note_ = fmt::format("the time bound of {:g} s per pair was reached after {} of {} windows", plan_.seconds_per_pair,
                              w, offsets_.size());
          return;
        }
        run_window(p, w);
      }
  }

  // One path in one window: fill, run the client's kernel, read back, judge.
  void run_window(PeerPath p, size_t w) {
    PathResult& result = path(p);
    const size_t words = expected_.size(), bytes = words * 4;
    const std::uint64_t offset = offsets_[w];
    const CUdeviceptr window = block_ + offset;
    const std::uint64_t seed = seed_ + w * 3 + static_cast<std::uint64_t>(p);
    phase(fmt::format("{} at offset {:#x}: fill", detail::path_words(p), offset));
    // Stores and atomics write the provider's window (the sentinel first); loads read it into the
    // client's buffer (the sentinel there).
    const bool writes_provider = p != PeerPath::kKernelLoads;
    if (p == PeerPath::kAtomics) detail::fill_increments(source_.data(), expected_.data(), words, seed);
    else detail::fill_pattern(expected_.data(), words, seed);
    const std::uint32_t* upload = p == PeerPath::kAtomics ? source_.data() : expected_.data();
    CUcontext upload_ctx = writes_provider ? cctx_ : pctx_, sentinel_ctx = writes_provider ? pctx_ : cctx_;
    CUdeviceptr upload_to = writes_provider ? local_ : window, sentinel_at = writes_provider ? window : local_;
    const char* call = "cuCtxSetCurrent";
    CUresult rc = c_.ctx_set(upload_ctx);
    if (rc == kCudaSuccess) call = "cuMemcpyHtoD_v2", rc = c_.htod(upload_to, upload, bytes);
    if (rc == kCudaSuccess) call = "cuCtxSynchronize", rc = c_.ctx_sync();
    if (rc == kCudaSuccess) call = "cuCtxSetCurrent", rc = c_.ctx_set(sentinel_ctx);
    if (rc == kCudaSuccess) call = "cuMemsetD32_v2", rc = c_.memset_d32(sentinel_at, detail::kSentinel, words);
    if (rc == kCudaSuccess) call = "cuCtxSynchronize", rc = c_.ctx_sync();
    if (rc != kCudaSuccess) {  // the test's own set-up, not the peer path
      if (result.note.empty()) result.note = fmt::format("not run at offset {:#x}: {} returned {}", offset, call, c_.code_name(rc));
      return;
    }

    phase(fmt::format("{} at offset {:#x}: kernel", detail::path_words(p), offset));
    CUdeviceptr dst = writes_provider ? window : local_, src = writes_provider ? local_ : window;
    unsigned long long count = words;
    void* params[] = {&dst, &src, &count};
    const std::uint64_t threads = p == PeerPath::kAtomics ? words * detail::kAtomicAddsPerWord : words;
    const auto grid = static_cast<unsigned>(std::clamp<std::uint64_t>((threads + 255) / 256, 1, 4096));
    if (rc = c_.ctx_set(cctx_); rc != kCudaSuccess) return result.refuse("cuCtxSetCurrent", rc, c_.code_name(rc));
    const auto launched = Clock::now();
    if (rc = c_.launch(kernels_[static_cast<int>(p)], grid, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr); rc != kCudaSuccess) {
      c_.context_lost = rc != 1;  // an invalid argument is ours; anything else may stick to the context
      return result.refuse("cuLaunchKernel", rc, c_.code_name(rc));
    }
    // Polled, never waited for: a kernel whose peer accesses never complete must not take the
    // child with it.
    while ((rc = c_.stream_query(nullptr)) == kCudaNotReady) {
      if (std::chrono::duration<double>(Clock::now() - launched).count() > plan_.seconds_per_kernel) {
        c_.context_lost = true;
        return result.hang(fmt::format("{} at offset {:#x}", kernel_name(p), offset), plan_.seconds_per_kernel);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (rc != kCudaSuccess) {  // an error of the kernel's own accesses: sticky, the context is gone
      c_.context_lost = true;
      return result.refuse("the kernel (cuStreamQuery)", rc, c_.code_name(rc));
    }

    phase(fmt::format("{} at offset {:#x}: read back", detail::path_words(p), offset));
    rc = c_.ctx_set(writes_provider ? pctx_ : cctx_);
    if (rc == kCudaSuccess) rc = c_.dtoh(actual_.data(), writes_provider ? window : local_, bytes);
    if (rc != kCudaSuccess) {
      if (result.note.empty()) result.note = fmt::format("read back at offset {:#x}: cuMemcpyDtoH_v2 returned {}", offset, c_.code_name(rc));
      return;
    }
    result.add(detail::judge_window(expected_.data(), actual_.data(), words, offset));
  }

  const Cuda& c_;
  const CopyOptions& options_;
  std::map<int, CUcontext>& contexts_;
  int provider_, client_;
  std::uint64_t bar1_bytes_;
  int timeout_seconds_;
  CUcontext pctx_ = nullptr, cctx_ = nullptr;
  CUdevice pdev_ = 0, cdev_ = 0;
  CUdeviceptr block_ = 0, local_ = 0;
  CUfunction kernels_[3] = {};
  std::uint64_t seed_ = 0, block_bytes_ = 0;
  std::vector<std::uint64_t> offsets_;
  detail::WindowPlan plan_;
  std::vector<std::uint32_t> expected_, actual_, source_;
  PathResult paths_[3];
  std::string note_;
};

// The copy child (session.h, run_pair_task): every pair of `pairs`, in order.
nlohmann::json cuda_copy_session(const std::string& library, const CopyOptions& options, int timeout_seconds,
                                 const std::map<int, std::uint64_t>& bar1_bytes,
                                 const std::vector<std::pair<int, int>>& pairs) {
  Cuda c;
  std::optional<nlohmann::json> not_ready = open_cuda(library, c);
  std::map<int, CUcontext> contexts;
  for (size_t i = 0; i < pairs.size(); ++i) {
    nlohmann::json answer;
    if (not_ready) {  // CUDA answered the questions a moment ago: unlikely, but both legs say why
      CopyLeg peer, staged;
      const auto& f = not_ready->contains("failed") ? (*not_ready)["failed"] : nlohmann::json::object();
      std::string name = f.value("name", not_ready->value("absent", std::string("not available")));
      peer.fail(f.value("phase", "dlopen"), f.value("code", -1LL), name);
      staged = peer;
      answer = detail::copy_answer(options, peer, staged);
    } else {
      answer = PairCopy(c, options, contexts, pairs[i].first, pairs[i].second).run();
      auto bar1 = bar1_bytes.find(pairs[i].first);
      answer["peer_paths"] = PeerPathCheck(c, options, contexts, pairs[i].first, pairs[i].second,
                                           bar1 != bar1_bytes.end() ? bar1->second : 0, timeout_seconds).run();
    }
    isolated_partial({{"item", i}, {"answer", answer}});
    // session.h: a fresh child for the pairs left, since these contexts answer nothing more.
    if (c.context_lost) return {{"restart", true}};
  }
  return {{"done", true}};
}

}  // namespace

RuntimeReport probe_cuda(const ProbeOptions& options) {
  std::string library = detail::library_path("P2PAUDIT_CUDA_LIBRARY", "libcuda.so.1");
  RuntimeReport report = detail::run_session("cuda", library, options, answer_keys(),
                                             [&](size_t first) { return cuda_session(library, first); });
  if (options.copy.enabled) {
    // NVML's BAR1 size of each provider, by CUDA's index: the span the windows of the peer paths cover.
    std::map<int, std::uint64_t> bar1_bytes;
    for (const auto& d : report.devices)
      if (d.bdf)
        if (auto it = options.copy.bar1_bytes.find(d.bdf->str()); it != options.copy.bar1_bytes.end())
          bar1_bytes[d.index] = it->second;
    detail::run_pair_task(report, "copy", options, [&](const std::vector<std::pair<int, int>>& pairs) {
      return cuda_copy_session(library, options.copy, options.timeout_seconds, bar1_bytes, pairs);
    });
  }
  return report;
}

}  // namespace p2paudit::probe
