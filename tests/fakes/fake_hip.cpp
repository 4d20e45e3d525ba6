// SPDX-License-Identifier: GPL-2.0-or-later
// A fake libamdhip64.so for the probe tests.
//   FAKE_HIP_SCENARIO  ok (default): peers over PCIe, 2 hops | no_peer | xgmi (1 hop) | init_fails | no_device
//                      | hang | crash (in hipDeviceCanAccessPeer, SIGSEGV)
//   FAKE_HIP_BDFS      the GPUs' PCI functions (default 0000:03:00.0,0000:83:00.0)
#include <cstdint>
#include <cstdio>

#include "fake_scenario.h"

namespace {
std::string scenario() { return fake::scenario("FAKE_HIP_SCENARIO"); }
std::vector<fake::Gpu> gpus() {
  if (!std::getenv("FAKE_HIP_BDFS")) return {{0, 0x03, 0, 0}, {0, 0x83, 0, 0}};
  return fake::gpus("FAKE_HIP_BDFS");
}
bool valid(int device) { return device >= 0 && device < static_cast<int>(gpus().size()); }
bool g_initialized = false;
}  // namespace

extern "C" {

int hipInit(unsigned) {
  if (scenario() == "init_fails") return 35;   // hipErrorInsufficientDriver
  if (scenario() == "no_device") return 101;   // hipErrorInvalidDevice, as ROCm answers on an NVIDIA host
  g_initialized = true;
  return 0;
}

const char* hipGetErrorName(int code) {
  switch (code) {
    case 0: return "hipSuccess";
    case 100: return "hipErrorNoDevice";
    case 101: return "hipErrorInvalidDevice";
    case 35: return "hipErrorInsufficientDriver";
    default: return "hipErrorUnknown";
  }
}

const char* hipGetErrorString(int code) {
  return code == 100 ? "no ROCm-capable device is detected" : code == 35 ? "driver version is insufficient for runtime version" : "unknown error";
}

int hipDriverGetVersion(int* version) {
  *version = 60342131;  // ROCm 6.3: HIP 6.3.42131
  return 0;
}

int hipGetDeviceCount(int* n) {
  if (!g_initialized) return 3;  // hipErrorNotInitialized
  *n = static_cast<int>(gpus().size());
  return 0;
}

int hipDeviceGetName(char* name, int length, int device) {
  if (!valid(device)) return 101;
  std::snprintf(name, static_cast<size_t>(length), "%s", "AMD Instinct MI300X");
  return 0;
}

int hipDeviceGetPCIBusId(char* bus_id, int length, int device) {
  if (!valid(device)) return 101;
  auto g = gpus()[static_cast<size_t>(device)];
  std::snprintf(bus_id, static_cast<size_t>(length), "%04x:%02x:%02x.%x", g.domain, g.bus, g.device, g.function);
  return 0;
}

int hipDeviceCanAccessPeer(int* can, int device, int peer) {
  if (!valid(device) || !valid(peer)) return 101;
  auto s = scenario();
  if (s == "hang") fake::hang();
  if (s == "crash") fake::crash(SIGSEGV);
  *can = s == "no_peer" ? 0 : 1;
  return 0;
}

int hipExtGetLinkTypeAndHopCount(int device1, int device2, std::uint32_t* type, std::uint32_t* hops) {
  if (!valid(device1) || !valid(device2)) return 101;
  bool xgmi = scenario() == "xgmi";
  *type = xgmi ? 4 : 2;  // HSA_AMD_LINK_INFO_TYPE_XGMI : HSA_AMD_LINK_INFO_TYPE_PCIE
  *hops = xgmi ? 1 : 2;
  return 0;
}

}  // extern "C"
