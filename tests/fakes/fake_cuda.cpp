// SPDX-License-Identifier: GPL-2.0-or-later
// A fake libcuda.so.1 for the probe tests (fake_scenario.h says what it does).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <string>

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

// Each device's memory: FAKE_NVIDIA_MEMORY_BYTES (default 1 GiB), handed out first fit, so that an
// allocation has an offset in its device's memory (what the BAR1 scenarios look at). The bytes
// themselves are malloc()ed: untouched pages cost nothing.
struct Allocation {
  int device = 0;
  unsigned long long offset = 0, size = 0;  // in the device's memory
  std::uintptr_t base = 0;                  // its host address
};
std::map<std::uintptr_t, Allocation> g_allocations;  // by host address

unsigned long long env_bytes(const char* variable, unsigned long long fallback) {
  const char* s = std::getenv(variable);
  if (!s || !*s) return fallback;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s, &end, 0);
  return end && !*end && v ? v : fallback;
}
unsigned long long memory_bytes() { return env_bytes("FAKE_NVIDIA_MEMORY_BYTES", 1ull << 30); }
// Where a peer's accesses stop arriving in bar_end_zeroed: the last sixteenth of BAR1 (its
// FAKE_NVIDIA_BAR1_BYTES, else the memory) and everything past it.
unsigned long long zeroed_from() {
  unsigned long long bar = env_bytes("FAKE_NVIDIA_BAR1_BYTES", memory_bytes());
  return bar - bar / 16;
}

unsigned long long used_bytes(int device) {
  unsigned long long used = 0;
  for (const auto& [address, a] : g_allocations)
    if (a.device == device) used += a.size;
  return used;
}

// The lowest offset of `device` where `size` bytes fit, or ~0.
unsigned long long first_fit(int device, unsigned long long size) {
  std::map<unsigned long long, unsigned long long> taken;  // offset -> size
  for (const auto& [address, a] : g_allocations)
    if (a.device == device) taken[a.offset] = a.size;
  unsigned long long at = 0;
  for (const auto& [offset, n] : taken) {
    if (offset >= at + size) break;
    at = offset + n;
  }
  return at + size <= memory_bytes() ? at : ~0ull;
}

const Allocation* allocation_of(const void* p) {
  auto address = reinterpret_cast<std::uintptr_t>(p);
  auto it = g_allocations.upper_bound(address);
  if (it == g_allocations.begin()) return nullptr;
  --it;
  return address < it->first + it->second.size ? &it->second : nullptr;
}

// The peer-path kernels (probe/src/cuda_peer_kernels.h), run by their names on host memory.
enum class Kernel { kStore, kLoad, kAtomic };
struct CUfunc_st {
  Kernel kind;
};
CUfunc_st g_kernels[] = {{Kernel::kStore}, {Kernel::kLoad}, {Kernel::kAtomic}};
const char* const kKernelNames[] = {"p2paudit_peer_store", "p2paudit_peer_load", "p2paudit_peer_atomic"};
struct CUmod_st {
  bool has[3] = {};
};
CUmod_st g_module;
bool g_hung = false;        // kernel_hang: a kernel never finishes; what waits for it blocks
int g_kernel_error = 0;     // what cuStreamQuery reports for the last kernel

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
  if (attribute == 3 && fake::scenario() == "no_peer_atomics") ok = false;  // NATIVE_ATOMIC_SUPPORTED
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

int cuCtxSynchronize() {
  if (g_hung) fake::hang();  // behind a kernel that never ends
  return g_current ? (g_kernel_error ? g_kernel_error : 0) : 201;  // CUDA_ERROR_INVALID_CONTEXT
}

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
  if (g_hung) fake::hang();
  if (!size) return 1;  // CUDA_ERROR_INVALID_VALUE
  unsigned long long at = first_fit(g_current->device, size);
  void* p = at != ~0ull ? std::malloc(size) : nullptr;
  if (!p) return 2;  // CUDA_ERROR_OUT_OF_MEMORY
  g_allocations[reinterpret_cast<std::uintptr_t>(p)] = {g_current->device, at, size, reinterpret_cast<std::uintptr_t>(p)};
  *dptr = reinterpret_cast<std::uintptr_t>(p);
  return 0;
}

int cuMemFree_v2(unsigned long long dptr) {
  if (g_hung) fake::hang();  // the real one waits for the device
  g_allocations.erase(static_cast<std::uintptr_t>(dptr));
  std::free(host(dptr));
  return 0;
}

int cuMemGetInfo_v2(size_t* free, size_t* total) {
  if (!g_current) return 201;
  *total = memory_bytes();
  *free = *total - used_bytes(g_current->device);
  return 0;
}

int cuMemsetD32_v2(unsigned long long dst, unsigned value, size_t count) {
  if (g_hung) fake::hang();
  auto* w = static_cast<std::uint32_t*>(host(dst));
  for (size_t i = 0; i < count; ++i) w[i] = value;
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
  if (g_hung) fake::hang();
  std::memcpy(host(dst), src, size);
  return 0;
}

int cuMemcpyDtoH_v2(void* dst, unsigned long long src, size_t size) {
  if (g_hung) fake::hang();
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
  if (s == "peer_copy_slow") usleep(static_cast<useconds_t>(size / 50));  // 50 bytes a microsecond: 50 MB/s
  if (s == "copy_corrupt")
    for (size_t i = 0; i < size; i += 4096) static_cast<unsigned char*>(host(dst))[i] ^= 0xff;
  return 0;
}

// The peer-path kernels (fake_scenario.h: the kernel scenarios).

int cuModuleLoadData(CUmod_st** module, const void* image) {
  if (!g_current) return 201;
  const char* ptx = static_cast<const char*>(image);
  if (!ptx || std::strncmp(ptx, ".version ", 9) != 0) return 218;  // CUDA_ERROR_INVALID_PTX
  for (int i = 0; i < 3; ++i)
    g_module.has[i] = std::strstr(ptx, (std::string(".entry ") + kKernelNames[i] + "(").c_str()) != nullptr;
  *module = &g_module;
  return 0;
}

int cuModuleUnload(CUmod_st*) { return 0; }

int cuModuleGetFunction(CUfunc_st** function, CUmod_st* module, const char* name) {
  for (int i = 0; module && i < 3; ++i)
    if (module->has[i] && std::strcmp(name, kKernelNames[i]) == 0) return *function = &g_kernels[i], 0;
  return 500;  // CUDA_ERROR_NOT_FOUND
}

// Runs the kernel at once, by its name: (dst, src, words). The side on another device than the
// current context's is the peer; without peer access to it the kernel fails with
// CUDA_ERROR_ILLEGAL_ADDRESS, as a real one would.
int cuLaunchKernel(CUfunc_st* f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void** params,
                   void**) {
  if (!g_current || !f || !params) return !g_current ? 201 : 1;
  if (g_hung) fake::hang();
  auto* dst = reinterpret_cast<std::uint32_t*>(host(*static_cast<unsigned long long*>(params[0])));
  auto* src = reinterpret_cast<const std::uint32_t*>(host(*static_cast<unsigned long long*>(params[1])));
  const unsigned long long words = *static_cast<unsigned long long*>(params[2]);
  const Allocation* d = allocation_of(dst);
  const Allocation* s = allocation_of(src);
  if (!d || !s || (words && (!allocation_of(dst + words - 1) || !allocation_of(src + words - 1)))) return g_kernel_error = 700, 0;
  const Allocation* peer = f->kind == Kernel::kLoad ? s : d;
  if (peer->device == g_current->device || !g_current->peer[peer->device]) return g_kernel_error = 700, 0;
  g_kernel_error = 0;
  const std::string scenario = fake::scenario();
  if (scenario == "kernel_hang" && peer->device == 0) {
    g_hung = true;
    return 0;
  }
  // bar_end_zeroed: the peer side's words from this index on lie in the zeroed end of BAR1.
  unsigned long long zeroed_from_word = ~0ull;
  if (scenario == "bar_end_zeroed") {
    const void* peer_side = f->kind == Kernel::kLoad ? static_cast<const void*>(src) : static_cast<const void*>(dst);
    const unsigned long long at = peer->offset + (reinterpret_cast<std::uintptr_t>(peer_side) - peer->base);
    const unsigned long long zone = zeroed_from();
    zeroed_from_word = at >= zone ? 0 : (zone - at + 3) / 4;
  }
  auto zeroed = [&](unsigned long long i) { return i >= zeroed_from_word; };
  for (unsigned long long i = 0; i < words; ++i) {
    switch (f->kind) {
      case Kernel::kStore:
        if (scenario == "kernel_stores_dropped") break;
        dst[i] = zeroed(i) ? 0 : src[i];
        break;
      case Kernel::kLoad:
        dst[i] = zeroed(i) ? 0 : src[i];
        break;
      case Kernel::kAtomic:
        // atomics_wrong: of the four adds of neighbouring threads only one lands (a plain
        // read-modify-write across the link instead of an atomic).
        dst[i] = zeroed(i) ? 0 : dst[i] + (scenario == "atomics_wrong" ? 1u : 4u) * src[i];
        break;
    }
  }
  return 0;
}

int cuStreamQuery(void*) {
  if (!g_current) return 201;
  if (g_hung) return 600;  // CUDA_ERROR_NOT_READY, for ever
  return g_kernel_error;
}

}  // extern "C"
