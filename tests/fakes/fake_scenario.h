// Shared by the fake NVML and CUDA libraries (tests only): the scenario and the emulated GPUs.
//   FAKE_NVIDIA_SCENARIO  ok (default) | p2p_not_supported | init_fails | hang | crash
//   FAKE_NVIDIA_BDFS      the GPUs' PCI functions, comma-separated (default 0000:00:06.0,0000:00:07.0)
// hang and crash strike in the per-pair calls (nvmlDeviceGetP2PStatus, cuDeviceCanAccessPeer):
// NVML crashes with SIGSEGV, CUDA with SIGABRT.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace fake {

inline std::string scenario() {
  const char* s = std::getenv("FAKE_NVIDIA_SCENARIO");
  return s && *s ? s : "ok";
}

struct Gpu {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
};

inline std::vector<Gpu> gpus() {
  const char* s = std::getenv("FAKE_NVIDIA_BDFS");
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
