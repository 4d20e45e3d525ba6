// SPDX-License-Identifier: GPL-2.0-or-later
// CUDA driver API backend: libcuda.so.1 opened with dlopen() in an isolated child (docs/probe.md),
// and with --copy a peer and a host-staged copy per ordered pair (probe.h, PairAnswer).
// The few CUDA types and prototypes used are declared here: no build dependency on CUDA.

#include <algorithm>
#include <chrono>
#include <map>
#include <new>
#include <optional>

#include <fmt/format.h>

#include "copy_check.h"
#include "cuda_api.h"
#include "p2paudit/probe/isolate.h"
#include "p2paudit/probe/probe.h"
#include "session.h"

namespace p2paudit::probe {

namespace {

using namespace cuda;  // cuda_api.h

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
      answer["peer_paths"] = check_peer_paths(c, options, contexts, pairs[i].first, pairs[i].second,
                                              bar1 != bar1_bytes.end() ? bar1->second : 0, timeout_seconds);
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
