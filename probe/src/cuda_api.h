// SPDX-License-Identifier: GPL-2.0-or-later
// The few CUDA driver API types and entry points the CUDA backend uses (cuda.cpp: the questions and
// the copies; cuda_peer_paths.cpp: the peer paths of kernels), declared here so that nothing needs
// CUDA to build. Only the probe's child processes include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "p2paudit/probe/probe.h"
#include "session.h"

namespace p2paudit::probe::cuda {

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

inline const char* cuda_error_name(CUresult code) {
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

// Kernel stores, kernel loads and atomics of GPU `client` on the memory of GPU `provider`
// (docs/probe.md "Peer paths"): copy.peer_paths of the pair. `contexts` holds the primary contexts
// retained so far, by CUDA index; bar1_bytes is the provider's BAR1 size from NVML (0: unknown).
nlohmann::json check_peer_paths(const Cuda& c, const CopyOptions& options, std::map<int, CUcontext>& contexts,
                                int provider, int client, std::uint64_t bar1_bytes, int timeout_seconds);

}  // namespace p2paudit::probe::cuda
