// A fake libcuda.so.1 for the probe tests (fake_scenario.h says what it does).
#include <cstdio>

#include "fake_scenario.h"

namespace {
bool g_initialized = false;
int count() { return static_cast<int>(fake::gpus().size()); }
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

}  // extern "C"
