// SPDX-License-Identifier: GPL-2.0-or-later
// A fake libnvidia-ml.so.1 for the probe tests (fake_scenario.h says what it does).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fake_scenario.h"

namespace {
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlDevice_st {
  unsigned index;
};
nvmlDevice_st g_devices[64];
bool g_initialized = false;

unsigned count() {
  auto n = fake::gpus().size();
  return n > 64 ? 64 : static_cast<unsigned>(n);
}

void fill_pci(unsigned index, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  auto g = fake::gpus()[index];
  pci->domain = g.domain;
  pci->bus = g.bus;
  pci->device = g.device;
  pci->pciDeviceId = 0x233510de;
  std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.%X", g.domain, g.bus, g.device, g.function);
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", g.domain, g.bus, g.device, g.function);
}
}  // namespace

extern "C" {

int nvmlInit_v2() {
  if (fake::scenario() == "init_fails") return 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  g_initialized = true;
  return 0;
}

int nvmlShutdown() { return 0; }

const char* nvmlErrorString(int code) {
  switch (code) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  if (!g_initialized) return 1;
  std::snprintf(version, length, "%s", "580.159.04");
  return 0;
}

int nvmlDeviceGetCount_v2(unsigned* n) {
  if (!g_initialized) return 1;
  *n = count();
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_st** device) {
  if (index >= count()) return 2;
  g_devices[index].index = index;
  *device = &g_devices[index];
  return 0;
}

int nvmlDeviceGetPciInfo_v3(nvmlDevice_st* device, nvmlPciInfo_t* pci) {
  fill_pci(device->index, pci);
  return 0;
}

int nvmlDeviceGetName(nvmlDevice_st*, char* name, unsigned length) {
  std::snprintf(name, length, "%s", "NVIDIA H200");
  return 0;
}

// An H200 as nvidia-smi shows it: 143771 MiB of memory, a 256 GiB BAR1 (FAKE_NVIDIA_BAR1_BYTES).
int nvmlDeviceGetMemoryInfo(nvmlDevice_st*, nvmlMemory_t* memory) {
  memory->total = 143771ull << 20;
  memory->used = 0;
  memory->free = memory->total;
  return 0;
}

int nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_st*, nvmlMemory_t* bar1) {
  const char* v = std::getenv("FAKE_NVIDIA_BAR1_BYTES");
  if (v && std::strcmp(v, "not_supported") == 0) return 3;  // NVML_ERROR_NOT_SUPPORTED
  bar1->total = v && *v ? std::strtoull(v, nullptr, 0) : 256ull << 30;
  bar1->used = 0;
  bar1->free = bar1->total;
  return 0;
}

int nvmlDeviceGetP2PStatus(nvmlDevice_st*, nvmlDevice_st*, int, int* status) {
  auto s = fake::scenario();
  if (s == "hang") fake::hang();
  if (s == "crash") fake::crash(SIGSEGV);
  *status = s == "p2p_not_supported" ? 5 : 0;  // NVML_P2P_STATUS_NOT_SUPPORTED : OK
  return 0;
}

// Every link of one GPU goes to the next GPU (two GPUs: to each other), 18 links like NV18.
int nvmlDeviceGetNvLinkState(nvmlDevice_st*, unsigned link, int* active) {
  if (fake::scenario() == "p2p_not_supported" || count() < 2) return 3;  // NVML_ERROR_NOT_SUPPORTED
  if (link >= 18) return 2;                                                // NVML_ERROR_INVALID_ARGUMENT
  *active = 1;
  return 0;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_st* device, unsigned link, nvmlPciInfo_t* pci) {
  if (link >= 18) return 2;
  fill_pci((device->index + 1) % count(), pci);
  return 0;
}

}  // extern "C"
