// SPDX-License-Identifier: GPL-2.0-or-later
// Shared by the fake NVML, CUDA and HIP libraries (tests only): the scenario and the emulated GPUs.
//   FAKE_NVIDIA_SCENARIO  ok (default) | p2p_not_supported | init_fails | hang | crash
//                         | copy_corrupt | copy_fails | copy_hang | copy_crash | peer_copy_slow (probe --copy)
//                         | kernel_stores_dropped | bar_end_zeroed | atomics_wrong | kernel_hang
//                         | no_peer_atomics (probe --copy's peer paths)
//   FAKE_NVIDIA_BDFS      the GPUs' PCI functions, comma-separated (default 0000:00:06.0,0000:00:07.0)
//   FAKE_NVIDIA_BAR1_BYTES each GPU's BAR1 size (default 256 GiB), or not_supported
// hang and crash strike in the per-pair calls (nvmlDeviceGetP2PStatus, cuDeviceCanAccessPeer):
// NVML crashes with SIGSEGV, CUDA with SIGABRT. The copy scenarios, in CUDA only:
//   ok            copies over host memory; cuMemcpyPeer refuses (705) without cuCtxEnablePeerAccess
//   copy_corrupt  cuMemcpyPeer succeeds and flips one byte in 4096; the host-staged copy is right
//   copy_fails    cuCtxEnablePeerAccess returns CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (217)
//   copy_hang, copy_crash  cuMemcpyPeer from GPU 0 hangs, or dies of SIGSEGV; from the others it works
//   peer_copy_slow  cuMemcpyPeer delivers at about 50 MB/s (it sleeps 20 ms a MiB): a peer path far
//                 slower than the host-staged copy, which is a plain memcpy
// The peer-path kernels (probe/src/cuda_peer_kernels.h) run on host memory by their names; a kernel
// touching a peer without cuCtxEnablePeerAccess fails with CUDA_ERROR_ILLEGAL_ADDRESS. Scenarios:
//   kernel_stores_dropped  the copy engine delivers; kernel stores into a peer's memory are lost
//   bar_end_zeroed  peer accesses to the last sixteenth of BAR1 (FAKE_NVIDIA_BAR1_BYTES, else the
//                   memory) and past it arrive as zeros (stores and atomics write 0, loads read 0)
//   atomics_wrong   of the four atomic adds per word only one lands
//   kernel_hang     a kernel whose peer is GPU 0 never finishes: cuStreamQuery says NOT_READY for
//                   ever, and what waits for the device (cuCtxSynchronize, cuMemFree...) blocks
//   no_peer_atomics cuDeviceGetP2PAttribute(NATIVE_ATOMIC_SUPPORTED) answers 0
//   FAKE_NVIDIA_MEMORY_BYTES  each GPU's memory for cuMemAlloc/cuMemGetInfo (default 1 GiB)
// The fake HIP library reads FAKE_HIP_SCENARIO and FAKE_HIP_BDFS instead (fake_hip.cpp).
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace fake {

inline std::string scenario(const char* variable = "FAKE_NVIDIA_SCENARIO") {
  const char* s = std::getenv(variable);
  return s && *s ? s : "ok";
}

struct Gpu {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
};

inline std::vector<Gpu> gpus(const char* variable = "FAKE_NVIDIA_BDFS") {
  const char* s = std::getenv(variable);
  std::string list = s && *s ? s : "0000:00:06.0,0000:00:07.0";
  std::vector<Gpu> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    Gpu g;
    if (std::sscanf(item.c_str(), "%x:%x:%x.%x", &g.domain, &g.bus, &g.device, &g.function) == 4) out.push_back(g);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

[[noreturn]] inline void hang() {
  for (;;) pause();
}

[[noreturn]] inline void crash(int sig) {
  signal(sig, SIG_DFL);  // sanitizers install their own handlers
  if (sig == SIGABRT) std::abort();
  raise(sig);
  std::abort();
}

}  // namespace fake
