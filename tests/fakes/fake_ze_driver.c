/* A fake Level Zero driver for the probe's tests. The real Debian loader (libze_loader.so.1)
 * loads it when ZE_ENABLE_ALT_DRIVERS names this library's path: the loader calls the exported
 * zeGet*ProcAddrTable functions to fill its dispatch tables, then zeInit through the global table.
 *
 * It emulates GPUs at the BDFs in FAKE_ZE_BDFS (comma separated, default
 * 0000:03:00.0,0000:04:00.0) and answers peer queries as FAKE_ZE_SCENARIO says:
 *   ok                    every pair can access its peer (ACCESS and ATOMICS), bandwidth extension
 *   no_peer               zeDeviceCanAccessPeer says false, P2P flags are 0
 *   out_of_device_memory  zeDeviceCanAccessPeer and zeDeviceGetP2PProperties fail with
 *                         ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY (0x70000003)
 *   hang                  the peer queries never return
 *   crash                 the peer queries kill the process (SIGSEGV)
 *   hang_init, crash_init the same in zeInit
 * FAKE_ZE_DRIVER_VERSION_STRING sets what zeIntelGetDriverVersionString answers.
 * Everything else a table holds is NULL: the probe never calls it. */
#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAKE_MAX_DEVICES 16
#define FAKE_EXPORT __attribute__((visibility("default")))

struct fake_device {
  int index;
  ze_pci_address_ext_t address;
};
struct fake_driver {
  int unused;
};

static struct fake_driver g_driver;
static struct fake_device g_devices[FAKE_MAX_DEVICES];
static uint32_t g_device_count;
static int g_initialised;

static const char* scenario(void) {
  const char* s = getenv("FAKE_ZE_SCENARIO");
  return s ? s : "ok";
}
static int is_scenario(const char* name) { return strcmp(scenario(), name) == 0; }

static void misbehave(const char* hang_name, const char* crash_name) {
  if (is_scenario(hang_name)) {
    for (;;) pause();
  }
  if (is_scenario(crash_name)) {
    raise(SIGSEGV);
    abort();
  }
}

static void parse_bdfs(void) {
  const char* list = getenv("FAKE_ZE_BDFS");
  if (!list) list = "0000:03:00.0,0000:04:00.0";
  g_device_count = 0;
  const char* p = list;
  while (*p && g_device_count < FAKE_MAX_DEVICES) {
    unsigned domain, bus, dev, fn;
    if (sscanf(p, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) == 4) {
      struct fake_device* d = &g_devices[g_device_count];
      d->index = (int)g_device_count;
      d->address.domain = domain;
      d->address.bus = bus;
      d->address.device = dev;
      d->address.function = fn;
      ++g_device_count;
    }
    const char* comma = strchr(p, ',');
    if (!comma) break;
    p = comma + 1;
  }
}

static struct fake_device* as_device(ze_device_handle_t h) {
  struct fake_device* d = (struct fake_device*)h;
  if (d < g_devices || d >= g_devices + g_device_count) return NULL;
  return d;
}

/* ---- the API ---------------------------------------------------------------------------------- */

static ze_result_t ZE_APICALL fake_init(ze_init_flags_t flags) {
  (void)flags;
  misbehave("hang_init", "crash_init");
  parse_bdfs();
  g_initialised = 1;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_driver_get(uint32_t* count, ze_driver_handle_t* drivers) {
  if (!g_initialised) return ZE_RESULT_ERROR_UNINITIALIZED;
  if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (*count == 0 || !drivers) {
    *count = 1;
    return ZE_RESULT_SUCCESS;
  }
  drivers[0] = (ze_driver_handle_t)&g_driver;
  *count = 1;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_driver_get_api_version(ze_driver_handle_t h, ze_api_version_t* v) {
  (void)h;
  *v = ZE_API_VERSION_1_4;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_driver_get_properties(ze_driver_handle_t h, ze_driver_properties_t* p) {
  (void)h;
  if (!p) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  memset(&p->uuid, 0, sizeof p->uuid);
  memcpy(p->uuid.id, "fake-ze-driver", 14);
  p->driverVersion = (1u << 24) | (6u << 16) | 32567u;  /* Intel's encoding: 1.6.32567 */
  return ZE_RESULT_SUCCESS;
}

static const char* k_version_string_ext = "ZE_intel_get_driver_version_string";

static ze_result_t ZE_APICALL fake_driver_get_extension_properties(ze_driver_handle_t h, uint32_t* count,
                                                                   ze_driver_extension_properties_t* props) {
  (void)h;
  if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (*count == 0 || !props) {
    *count = 2;
    return ZE_RESULT_SUCCESS;
  }
  uint32_t n = *count < 2 ? *count : 2;
  const char* names[2] = {k_version_string_ext, ZE_BANDWIDTH_PROPERTIES_EXP_NAME};
  for (uint32_t i = 0; i < n; ++i) {
    memset(props[i].name, 0, sizeof props[i].name);
    strncpy(props[i].name, names[i], sizeof props[i].name - 1);
    props[i].version = 1;
  }
  *count = n;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_intel_driver_version_string(ze_driver_handle_t h, char* str, size_t* size) {
  (void)h;
  const char* v = getenv("FAKE_ZE_DRIVER_VERSION_STRING");
  if (!v) v = "26.09.37435.1";
  size_t need = strlen(v) + 1;
  if (!size) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (*size == 0 || !str) {
    *size = need;
    return ZE_RESULT_SUCCESS;
  }
  snprintf(str, *size, "%s", v);
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_driver_get_extension_function_address(ze_driver_handle_t h, const char* name,
                                                                         void** fn) {
  (void)h;
  if (!name || !fn) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (strcmp(name, "zeIntelGetDriverVersionString") == 0) {
    *fn = (void*)&fake_intel_driver_version_string;
    return ZE_RESULT_SUCCESS;
  }
  *fn = NULL;
  return ZE_RESULT_ERROR_INVALID_ARGUMENT;
}

static ze_result_t ZE_APICALL fake_device_get(ze_driver_handle_t h, uint32_t* count, ze_device_handle_t* devices) {
  (void)h;
  if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (*count == 0 || !devices) {
    *count = g_device_count;
    return ZE_RESULT_SUCCESS;
  }
  uint32_t n = *count < g_device_count ? *count : g_device_count;
  for (uint32_t i = 0; i < n; ++i) devices[i] = (ze_device_handle_t)&g_devices[i];
  *count = n;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_device_get_sub_devices(ze_device_handle_t h, uint32_t* count,
                                                          ze_device_handle_t* subs) {
  (void)h;
  (void)subs;
  if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  *count = 0;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_device_get_properties(ze_device_handle_t h, ze_device_properties_t* p) {
  struct fake_device* d = as_device(h);
  if (!d) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!p) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  p->type = ZE_DEVICE_TYPE_GPU;
  p->vendorId = 0x8086;
  p->deviceId = 0xe211;
  p->flags = 0;
  p->subdeviceId = 0;
  p->coreClockRate = 2400;
  p->maxMemAllocSize = 1ull << 32;
  memset(&p->uuid, 0, sizeof p->uuid);
  p->uuid.id[0] = (uint8_t)(d->index + 1);
  memset(p->name, 0, sizeof p->name);
  snprintf(p->name, sizeof p->name, "Fake Level Zero GPU %d", d->index);
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_device_pci_get_properties_ext(ze_device_handle_t h, ze_pci_ext_properties_t* p) {
  struct fake_device* d = as_device(h);
  if (!d) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!p) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  p->address = d->address;
  p->maxSpeed.genVersion = 5;
  p->maxSpeed.width = 16;
  p->maxSpeed.maxBandwidth = 32000000000ll;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t peer_failure(void) {
  misbehave("hang", "crash");
  if (is_scenario("out_of_device_memory")) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_device_can_access_peer(ze_device_handle_t h, ze_device_handle_t peer,
                                                          ze_bool_t* value) {
  if (!as_device(h) || !as_device(peer)) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!value) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  ze_result_t r = peer_failure();
  if (r != ZE_RESULT_SUCCESS) return r;
  *value = is_scenario("no_peer") ? 0 : 1;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_device_get_p2p_properties(ze_device_handle_t h, ze_device_handle_t peer,
                                                             ze_device_p2p_properties_t* p) {
  if (!as_device(h) || !as_device(peer)) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!p) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  ze_result_t r = peer_failure();
  if (r != ZE_RESULT_SUCCESS) return r;
  int yes = !is_scenario("no_peer");
  p->flags = yes ? (ZE_DEVICE_P2P_PROPERTY_FLAG_ACCESS | ZE_DEVICE_P2P_PROPERTY_FLAG_ATOMICS) : 0;
  for (ze_base_properties_t* ext = (ze_base_properties_t*)p->pNext; ext; ext = (ze_base_properties_t*)ext->pNext) {
    if (ext->stype == ZE_STRUCTURE_TYPE_DEVICE_P2P_BANDWIDTH_EXP_PROPERTIES) {
      ze_device_p2p_bandwidth_exp_properties_t* bw = (ze_device_p2p_bandwidth_exp_properties_t*)ext;
      bw->logicalBandwidth = yes ? 28 : 0;
      bw->physicalBandwidth = yes ? 32 : 0;
      bw->bandwidthUnit = ZE_BANDWIDTH_UNIT_BYTES_PER_NANOSEC;
      bw->logicalLatency = bw->physicalLatency = yes ? 1000 : 0;
      bw->latencyUnit = ZE_LATENCY_UNIT_NANOSEC;
    }
  }
  return ZE_RESULT_SUCCESS;
}

/* Fabric: one vertex per device, no edges (PCIe only, no Xe Link). */
static ze_result_t ZE_APICALL fake_fabric_vertex_get(ze_driver_handle_t h, uint32_t* count,
                                                     ze_fabric_vertex_handle_t* vertices) {
  (void)h;
  if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (*count == 0 || !vertices) {
    *count = g_device_count;
    return ZE_RESULT_SUCCESS;
  }
  uint32_t n = *count < g_device_count ? *count : g_device_count;
  for (uint32_t i = 0; i < n; ++i) vertices[i] = (ze_fabric_vertex_handle_t)&g_devices[i];
  *count = n;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_fabric_vertex_get_properties(ze_fabric_vertex_handle_t h,
                                                                ze_fabric_vertex_exp_properties_t* p) {
  struct fake_device* d = as_device((ze_device_handle_t)h);
  if (!d) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  memset(&p->uuid, 0, sizeof p->uuid);
  p->uuid.id[0] = (uint8_t)(d->index + 1);
  p->type = ZE_FABRIC_VERTEX_EXP_TYPE_DEVICE;
  p->remote = 0;
  p->address.domain = d->address.domain;
  p->address.bus = d->address.bus;
  p->address.device = d->address.device;
  p->address.function = d->address.function;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_fabric_edge_get(ze_fabric_vertex_handle_t a, ze_fabric_vertex_handle_t b,
                                                   uint32_t* count, ze_fabric_edge_handle_t* edges) {
  (void)a;
  (void)b;
  (void)edges;
  if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  *count = 0;
  return ZE_RESULT_SUCCESS;
}

/* ---- the tables the loader asks for ---------------------------------------------------------- */

FAKE_EXPORT ze_result_t ZE_APICALL zeGetGlobalProcAddrTable(ze_api_version_t v, ze_global_dditable_t* t) {
  (void)v;
  if (!t) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  memset(t, 0, sizeof *t);
  t->pfnInit = fake_init;
  return ZE_RESULT_SUCCESS;
}

FAKE_EXPORT ze_result_t ZE_APICALL zeGetDriverProcAddrTable(ze_api_version_t v, ze_driver_dditable_t* t) {
  (void)v;
  if (!t) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  memset(t, 0, sizeof *t);
  t->pfnGet = fake_driver_get;
  t->pfnGetApiVersion = fake_driver_get_api_version;
  t->pfnGetProperties = fake_driver_get_properties;
  t->pfnGetExtensionProperties = fake_driver_get_extension_properties;
  t->pfnGetExtensionFunctionAddress = fake_driver_get_extension_function_address;
  return ZE_RESULT_SUCCESS;
}

FAKE_EXPORT ze_result_t ZE_APICALL zeGetDeviceProcAddrTable(ze_api_version_t v, ze_device_dditable_t* t) {
  (void)v;
  if (!t) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  memset(t, 0, sizeof *t);
  t->pfnGet = fake_device_get;
  t->pfnGetSubDevices = fake_device_get_sub_devices;
  t->pfnGetProperties = fake_device_get_properties;
  t->pfnGetP2PProperties = fake_device_get_p2p_properties;
  t->pfnCanAccessPeer = fake_device_can_access_peer;
  t->pfnPciGetPropertiesExt = fake_device_pci_get_properties_ext;
  return ZE_RESULT_SUCCESS;
}

FAKE_EXPORT ze_result_t ZE_APICALL zeGetFabricVertexExpProcAddrTable(ze_api_version_t v,
                                                                     ze_fabric_vertex_exp_dditable_t* t) {
  (void)v;
  if (!t) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  memset(t, 0, sizeof *t);
  t->pfnGetExp = fake_fabric_vertex_get;
  t->pfnGetPropertiesExp = fake_fabric_vertex_get_properties;
  return ZE_RESULT_SUCCESS;
}

FAKE_EXPORT ze_result_t ZE_APICALL zeGetFabricEdgeExpProcAddrTable(ze_api_version_t v,
                                                                   ze_fabric_edge_exp_dditable_t* t) {
  (void)v;
  if (!t) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  memset(t, 0, sizeof *t);
  t->pfnGetExp = fake_fabric_edge_get;
  return ZE_RESULT_SUCCESS;
}

/* Tables the loader fills as well; the probe calls nothing in them, so they stay empty. */
#define FAKE_EMPTY_TABLE(fn, type)                                          \
  FAKE_EXPORT ze_result_t ZE_APICALL fn(ze_api_version_t v, type* t) {      \
    (void)v;                                                                \
    if (!t) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;                    \
    memset(t, 0, sizeof *t);                                                \
    return ZE_RESULT_SUCCESS;                                               \
  }
FAKE_EMPTY_TABLE(zeGetDeviceExpProcAddrTable, ze_device_exp_dditable_t)
FAKE_EMPTY_TABLE(zeGetContextProcAddrTable, ze_context_dditable_t)
FAKE_EMPTY_TABLE(zeGetCommandQueueProcAddrTable, ze_command_queue_dditable_t)
FAKE_EMPTY_TABLE(zeGetCommandListProcAddrTable, ze_command_list_dditable_t)
FAKE_EMPTY_TABLE(zeGetEventProcAddrTable, ze_event_dditable_t)
FAKE_EMPTY_TABLE(zeGetEventExpProcAddrTable, ze_event_exp_dditable_t)
FAKE_EMPTY_TABLE(zeGetEventPoolProcAddrTable, ze_event_pool_dditable_t)
FAKE_EMPTY_TABLE(zeGetFenceProcAddrTable, ze_fence_dditable_t)
FAKE_EMPTY_TABLE(zeGetImageProcAddrTable, ze_image_dditable_t)
FAKE_EMPTY_TABLE(zeGetImageExpProcAddrTable, ze_image_exp_dditable_t)
FAKE_EMPTY_TABLE(zeGetKernelProcAddrTable, ze_kernel_dditable_t)
FAKE_EMPTY_TABLE(zeGetKernelExpProcAddrTable, ze_kernel_exp_dditable_t)
FAKE_EMPTY_TABLE(zeGetMemProcAddrTable, ze_mem_dditable_t)
FAKE_EMPTY_TABLE(zeGetModuleProcAddrTable, ze_module_dditable_t)
FAKE_EMPTY_TABLE(zeGetModuleBuildLogProcAddrTable, ze_module_build_log_dditable_t)
FAKE_EMPTY_TABLE(zeGetPhysicalMemProcAddrTable, ze_physical_mem_dditable_t)
FAKE_EMPTY_TABLE(zeGetSamplerProcAddrTable, ze_sampler_dditable_t)
FAKE_EMPTY_TABLE(zeGetVirtualMemProcAddrTable, ze_virtual_mem_dditable_t)
/* The loader 1.8 refuses a driver that lacks the tools (zet) and sysman (zes) tables. */
FAKE_EMPTY_TABLE(zetGetDeviceProcAddrTable, zet_device_dditable_t)
FAKE_EMPTY_TABLE(zetGetContextProcAddrTable, zet_context_dditable_t)
FAKE_EMPTY_TABLE(zetGetCommandListProcAddrTable, zet_command_list_dditable_t)
FAKE_EMPTY_TABLE(zetGetModuleProcAddrTable, zet_module_dditable_t)
FAKE_EMPTY_TABLE(zetGetKernelProcAddrTable, zet_kernel_dditable_t)
FAKE_EMPTY_TABLE(zetGetMetricGroupProcAddrTable, zet_metric_group_dditable_t)
FAKE_EMPTY_TABLE(zetGetMetricGroupExpProcAddrTable, zet_metric_group_exp_dditable_t)
FAKE_EMPTY_TABLE(zetGetMetricProcAddrTable, zet_metric_dditable_t)
FAKE_EMPTY_TABLE(zetGetMetricStreamerProcAddrTable, zet_metric_streamer_dditable_t)
FAKE_EMPTY_TABLE(zetGetMetricQueryPoolProcAddrTable, zet_metric_query_pool_dditable_t)
FAKE_EMPTY_TABLE(zetGetMetricQueryProcAddrTable, zet_metric_query_dditable_t)
FAKE_EMPTY_TABLE(zetGetTracerExpProcAddrTable, zet_tracer_exp_dditable_t)
FAKE_EMPTY_TABLE(zetGetDebugProcAddrTable, zet_debug_dditable_t)
FAKE_EMPTY_TABLE(zesGetDriverProcAddrTable, zes_driver_dditable_t)
FAKE_EMPTY_TABLE(zesGetDeviceProcAddrTable, zes_device_dditable_t)
FAKE_EMPTY_TABLE(zesGetSchedulerProcAddrTable, zes_scheduler_dditable_t)
FAKE_EMPTY_TABLE(zesGetPerformanceFactorProcAddrTable, zes_performance_factor_dditable_t)
FAKE_EMPTY_TABLE(zesGetPowerProcAddrTable, zes_power_dditable_t)
FAKE_EMPTY_TABLE(zesGetFrequencyProcAddrTable, zes_frequency_dditable_t)
FAKE_EMPTY_TABLE(zesGetEngineProcAddrTable, zes_engine_dditable_t)
FAKE_EMPTY_TABLE(zesGetStandbyProcAddrTable, zes_standby_dditable_t)
FAKE_EMPTY_TABLE(zesGetFirmwareProcAddrTable, zes_firmware_dditable_t)
FAKE_EMPTY_TABLE(zesGetMemoryProcAddrTable, zes_memory_dditable_t)
FAKE_EMPTY_TABLE(zesGetFabricPortProcAddrTable, zes_fabric_port_dditable_t)
FAKE_EMPTY_TABLE(zesGetTemperatureProcAddrTable, zes_temperature_dditable_t)
FAKE_EMPTY_TABLE(zesGetPsuProcAddrTable, zes_psu_dditable_t)
FAKE_EMPTY_TABLE(zesGetFanProcAddrTable, zes_fan_dditable_t)
FAKE_EMPTY_TABLE(zesGetLedProcAddrTable, zes_led_dditable_t)
FAKE_EMPTY_TABLE(zesGetRasProcAddrTable, zes_ras_dditable_t)
FAKE_EMPTY_TABLE(zesGetDiagnosticsProcAddrTable, zes_diagnostics_dditable_t)
