// SPDX-License-Identifier: GPL-2.0-or-later
// A fake libcuda.so.1 for the probe tests (fake_scenario.h says what it does).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fake_scenario.h"

namespace {
bool g_initialized = false;
int count() { return static_cast<int>(fake::gpus().size()); }

// Device memory is host memory; a context is its device's, with the peers it may access.
constexpr int kMaxGpus = 64;
struct CUctx_st {
  int device = 0;
  bool peer[kMaxGpus] = {};
};
CUctx_st g_contexts[kMaxGpus];
CUctx_st* g_current = nullptr;

void* host(unsigned long long dptr) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(dptr)); }
}  // namespace

extern "C" {

int cuInit(unsigned) {
  if (fake::scenario() == "init_fails") return 100;  // CUDA_ERROR_NO_DEVICE
  g_initialized = true;
  return 0;
}

int cuGetErrorName(int code, const char** name) {
  switch (code) {
    case 0: *name = "CUDA_SUCCESS"; return 0;
    case 3: *name = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 100: *name = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 217: *name = "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"; return 0;
    default: *name = nullptr; return 1;
  }
}

int cuGetErrorString(int code, const char** text) {
  *text = code == 100 ? "no CUDA-capable device is detected" : "unknown error";
  return 0;
}

int cuDriverGetVersion(int* version) {
  *version = 13000;
  return 0;
}

int cuDeviceGetCount(int* n) {
  if (!g_initialized) return 3;
  *n = count();
  return 0;
}

int cuDeviceGet(int* device, int ordinal) {
  if (ordinal < 0 || ordinal >= count()) return 101;
  *device = ordinal;
  return 0;
}

int cuDeviceGetName(char* name, int length, int) {
  std::snprintf(name, static_cast<size_t>(length), "%s", "NVIDIA H200");
  return 0;
}

int cuDeviceGetPCIBusId(char* bus_id, int length, int device) {
  auto g = fake::gpus()[static_cast<size_t>(device)];
  std::snprintf(bus_id, static_cast<size_t>(length), "%04X:%02X:%02X.%X", g.domain, g.bus, g.device, g.function);
  return 0;
}

int cuDeviceCanAccessPeer(int* can, int, int) {
  auto s = fake::scenario();
  if (s == "hang") fake::hang();
  if (s == "crash") fake::crash(SIGABRT);
  *can = s == "p2p_not_supported" ? 0 : 1;
  return 0;
}

int cuDeviceGetP2PAttribute(int* value, int attribute, int, int) {
  bool ok = fake::scenario() != "p2p_not_supported";
  *value = attribute == 1 ? 0 : (ok ? 1 : 0);  // PERFORMANCE_RANK 0; the flags 1 or 0
  return 0;
}

// probe --copy (fake_scenario.h: the copy scenarios).

int cuDevicePrimaryCtxRetain(CUctx_st** ctx, int device) {
  if (device < 0 || device >= count() || device >= kMaxGpus) return 101;  // CUDA_ERROR_INVALID_DEVICE
  g_contexts[device].device = device;
  *ctx = &g_contexts[device];
  return 0;
}

int cuCtxSetCurrent(CUctx_st* ctx) {
  g_current = ctx;
  return 0;
}

int cuCtxSynchronize() { return g_current ? 0 : 201; }  // CUDA_ERROR_INVALID_CONTEXT

int cuCtxEnablePeerAccess(CUctx_st* peer, unsigned) {
  if (!g_current || !peer) return 201;
  if (fake::scenario() == "copy_fails") return 217;          // CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
  if (g_current->peer[peer->device]) return 704;            // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
  g_current->peer[peer->device] = true;
  return 0;
}

int cuCtxDisablePeerAccess(CUctx_st* peer) {
  if (!g_current || !peer) return 201;
  if (!g_current->peer[peer->device]) return 705;           // CUDA_ERROR_PEER_ACCESS_NOT_ENABLED
  g_current->peer[peer->device] = false;
  return 0;
}

int cuMemAlloc_v2(unsigned long long* dptr, size_t size) {
  if (!g_current) return 201;
  void* p = size ? std::malloc(size) : nullptr;
  if (!p) return size ? 2 : 1;  // CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_INVALID_VALUE
  *dptr = reinterpret_cast<std::uintptr_t>(p);
  return 0;
}

int cuMemFree_v2(unsigned long long dptr) {
  std::free(host(dptr));
  return 0;
}

int cuMemAllocHost_v2(void** p, size_t size) {
  *p = size ? std::malloc(size) : nullptr;
  return *p ? 0 : 2;
}

int cuMemFreeHost(void* p) {
  std::free(p);
  return 0;
}

int cuMemcpyHtoD_v2(unsigned long long dst, const void* src, size_t size) {
  std::memcpy(host(dst), src, size);
  return 0;
}

int cuMemcpyDtoH_v2(void* dst, unsigned long long src, size_t size) {
  std::memcpy(dst, host(src), size);
  return 0;
}

// The real one stages through host memory when peer access is off; the fake refuses, so a test
// sees a probe that forgot to enable it.
int cuMemcpyPeer(unsigned long long dst, CUctx_st* dst_ctx, unsigned long long src, CUctx_st* src_ctx, size_t size) {
  if (!dst_ctx || !src_ctx) return 201;
  if (!dst_ctx->peer[src_ctx->device]) return 705;  // CUDA_ERROR_PEER_ACCESS_NOT_ENABLED
  auto s = fake::scenario();
  if (s == "copy_hang" && src_ctx->device == 0) fake::hang();
  if (s == "copy_crash" && src_ctx->device == 0) fake::crash(SIGSEGV);
  std::memcpy(host(dst), host(src), size);
  if (s == "copy_corrupt")
    for (size_t i = 0; i < size; i += 4096) static_cast<unsigned char*>(host(dst))[i] ^= 0xff;
  return 0;
}

}  // extern "C"
