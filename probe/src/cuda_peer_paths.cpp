// SPDX-License-Identifier: GPL-2.0-or-later
// probe --copy (CUDA): the peer paths of kernels, run in the copy child after each pair's copies.

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cuda_api.h"
#include "cuda_peer_kernels.h"
#include "p2paudit/probe/isolate.h"
#include "peer_paths.h"

namespace p2paudit::probe::cuda {

namespace {

using Clock = std::chrono::steady_clock;

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

}  // namespace

nlohmann::json check_peer_paths(const Cuda& c, const CopyOptions& options, std::map<int, CUcontext>& contexts,
                                int provider, int client, std::uint64_t bar1_bytes, int timeout_seconds) {
  return PeerPathCheck(c, options, contexts, provider, client, bar1_bytes, timeout_seconds).run();
}

}  // namespace p2paudit::probe::cuda
