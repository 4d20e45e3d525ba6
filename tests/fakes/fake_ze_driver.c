/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A fake Level Zero driver for the probe's tests. The real Debian loader (libze_loader.so.1)
 * loads it when ZE_ENABLE_ALT_DRIVERS names this library's path: the loader calls the exported
 * zeGet*ProcAddrTable functions to fill its dispatch tables, then zeInit through the global table.
 *
 * It emulates GPUs at the BDFs in FAKE_ZE_BDFS (comma separated, default
 * 0000:03:00.0,0000:04:00.0), less those ZE_AFFINITY_MASK hides, and answers as FAKE_ZE_SCENARIO
 * says:
 *   ok                    every pair can access its peer (ACCESS and ATOMICS), bandwidth extension;
 *                         copies are right
 *   no_peer               zeDeviceCanAccessPeer says false, P2P flags are 0
 *   out_of_device_memory  zeDeviceCanAccessPeer and zeDeviceGetP2PProperties fail with
 *                         ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY (0x70000003)
 *   hang                  the peer queries never return
 *   crash                 the peer queries kill the process (SIGSEGV)
 *   hang_init, crash_init the same in zeInit
 *   copy_ok               as ok (named for the copy tests)
 *   copy_corrupt          a peer copy returns ZE_RESULT_SUCCESS and flips bytes of what it wrote
 *   copy_oodm             zeDeviceCanAccessPeer says yes, a peer copy returns 0x70000003 (two Arc
 *                         B70 whose kernel refused P2PDMA)
 *   copy_hang, copy_crash the peer copy from device 0 into device 1 never returns / kills the
 *                         process (SIGSEGV); the other copies are right
 *   mirror                zeMemAllocDevice in a context of two or more devices also maps, touches
 *                         and (when RLIMIT_MEMLOCK allows) locks as many host bytes, kept until
 *                         zeMemFree: compute-runtime 26.09's 1:1 host mirror
 * A "peer" copy is one whose command list runs on a device other than the one owning the source or
 * destination memory. Device and host memory are anonymous mappings of this process, untouched
 * until written, so they add to its resident memory only as far as they are used.
 * FAKE_ZE_DRIVER_VERSION_STRING sets what zeIntelGetDriverVersionString answers.
 * Everything else a table holds is NULL: the probe never calls it. */
#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAKE_MAX_DEVICES 16
#define FAKE_MAX_ALLOCATIONS 64
#define FAKE_MAX_ALLOC_SIZE (1ull << 32) /* the maxMemAllocSize the device properties give */
#define FAKE_CONTEXT_MAGIC 0x7a65637475u
#define FAKE_LIST_MAGIC 0x7a656c6973u
#define FAKE_EXPORT __attribute__((visibility("default")))

struct fake_device {
  int index;
  ze_pci_address_ext_t address;
};
struct fake_driver {
  int unused;
};

struct fake_context {
  uint64_t magic;
  uint32_t device_count;
  struct fake_device* devices[FAKE_MAX_DEVICES];
};
struct fake_list {
  uint64_t magic;
  struct fake_context* context;
  struct fake_device* device; /* the engine that runs its copies */
};
struct fake_allocation {
  uint8_t* base;               /* NULL: the slot is free */
  size_t size;
  struct fake_device* device;  /* NULL: host memory */
  struct fake_context* context;
  void* mirror;                /* the "mirror" scenario's host copy, or NULL */
  int mirror_locked;
};

static struct fake_driver g_driver;
static struct fake_device g_devices[FAKE_MAX_DEVICES];
static uint32_t g_device_count;
static int g_initialised;
static struct fake_allocation g_allocations[FAKE_MAX_ALLOCATIONS];

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

/* ZE_AFFINITY_MASK as compute-runtime reads it: the listed device indices stay ("1.0", a
 * sub-device, keeps its device here), the others are hidden, and the rest are numbered from 0. */
static void apply_affinity_mask(void) {
  const char* mask = getenv("ZE_AFFINITY_MASK");
  if (!mask || !*mask) return;
  int keep[FAKE_MAX_DEVICES] = {0};
  const char* p = mask;
  for (;;) {
    char* end = NULL;
    long i = strtol(p, &end, 10);
    if (end != p && i >= 0 && i < (long)g_device_count) keep[i] = 1;
    const char* comma = strchr(p, ',');
    if (!comma) break;
    p = comma + 1;
  }
  uint32_t n = 0;
  for (uint32_t i = 0; i < g_device_count; ++i) {
    if (!keep[i]) continue;
    g_devices[n] = g_devices[i];
    g_devices[n].index = (int)n;
    ++n;
  }
  g_device_count = n;
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
  apply_affinity_mask();
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
  /* The PCI device ID the runtime reports, as the tree's function has it (FAKE_ZE_DEVICE_ID, hex):
     answers bind to a function only when the IDs match. */
  const char* id = getenv("FAKE_ZE_DEVICE_ID");
  p->deviceId = id && *id ? (uint32_t)strtoul(id, NULL, 16) : 0xe211;
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

/* ---- contexts, memory and command lists (probe --copy, --mirror) ----------------------------- */

static struct fake_context* as_context(ze_context_handle_t h) {
  struct fake_context* c = (struct fake_context*)h;
  return c && c->magic == FAKE_CONTEXT_MAGIC ? c : NULL;
}

static struct fake_list* as_list(ze_command_list_handle_t h) {
  struct fake_list* l = (struct fake_list*)h;
  return l && l->magic == FAKE_LIST_MAGIC ? l : NULL;
}

static int context_has(const struct fake_context* c, const struct fake_device* d) {
  for (uint32_t i = 0; i < c->device_count; ++i)
    if (c->devices[i] == d) return 1;
  return 0;
}

static ze_result_t ZE_APICALL fake_context_create_ex(ze_driver_handle_t h, const ze_context_desc_t* desc,
                                                     uint32_t count, ze_device_handle_t* devices,
                                                     ze_context_handle_t* out) {
  (void)h;
  if (!desc || !out || (count && !devices)) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (count > g_device_count) return ZE_RESULT_ERROR_INVALID_SIZE;
  struct fake_context* c = calloc(1, sizeof *c);
  if (!c) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  c->magic = FAKE_CONTEXT_MAGIC;
  if (count == 0) { /* the specification: no list means every device of the driver */
    for (uint32_t i = 0; i < g_device_count; ++i) c->devices[c->device_count++] = &g_devices[i];
  }
  for (uint32_t i = 0; i < count; ++i) {
    struct fake_device* d = as_device(devices[i]);
    if (!d) {
      free(c);
      return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    }
    c->devices[c->device_count++] = d;
  }
  *out = (ze_context_handle_t)c;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_context_create(ze_driver_handle_t h, const ze_context_desc_t* desc,
                                                  ze_context_handle_t* out) {
  return fake_context_create_ex(h, desc, 0, NULL, out);
}

static ze_result_t ZE_APICALL fake_context_destroy(ze_context_handle_t h) {
  struct fake_context* c = as_context(h);
  if (!c) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  c->magic = 0;
  free(c);
  return ZE_RESULT_SUCCESS;
}

/* Anonymous memory, untouched (so not resident) until written. */
static void* fake_map(size_t size) {
  void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* The allocation holding [p, p + size), or NULL. */
static struct fake_allocation* find_allocation(const void* p, size_t size) {
  uintptr_t at = (uintptr_t)p;
  for (int i = 0; i < FAKE_MAX_ALLOCATIONS; ++i) {
    struct fake_allocation* a = &g_allocations[i];
    uintptr_t base = (uintptr_t)a->base;
    if (a->base && at >= base && size <= a->size && at - base <= a->size - size) return a;
  }
  return NULL;
}

static ze_result_t allocate(struct fake_context* c, struct fake_device* d, size_t size, size_t alignment,
                            void** out) {
  if (size == 0 || size > FAKE_MAX_ALLOC_SIZE) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
  if (alignment & (alignment - 1)) return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
  if (alignment > (size_t)sysconf(_SC_PAGESIZE)) return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
  struct fake_allocation* a = NULL;
  for (int i = 0; i < FAKE_MAX_ALLOCATIONS && !a; ++i)
    if (!g_allocations[i].base) a = &g_allocations[i];
  if (!a) return d ? ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  uint8_t* base = fake_map(size);
  if (!base) return d ? ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  memset(a, 0, sizeof *a);
  a->base = base;
  a->size = size;
  a->device = d;
  a->context = c;
  if (d && is_scenario("mirror") && c->device_count >= 2) {
    a->mirror = fake_map(size);
    if (a->mirror) {
      memset(a->mirror, 0x5a, size); /* resident, as a mirror the driver fills would be */
      a->mirror_locked = mlock(a->mirror, size) == 0;
    }
  }
  *out = base;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_mem_alloc_device(ze_context_handle_t hc, const ze_device_mem_alloc_desc_t* desc,
                                                    size_t size, size_t alignment, ze_device_handle_t hd,
                                                    void** out) {
  struct fake_context* c = as_context(hc);
  struct fake_device* d = as_device(hd);
  if (!c || !d) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!desc || !out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (!context_has(c, d)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  return allocate(c, d, size, alignment, out);
}

static ze_result_t ZE_APICALL fake_mem_alloc_host(ze_context_handle_t hc, const ze_host_mem_alloc_desc_t* desc,
                                                  size_t size, size_t alignment, void** out) {
  struct fake_context* c = as_context(hc);
  if (!c) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!desc || !out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  return allocate(c, NULL, size, alignment, out);
}

static ze_result_t ZE_APICALL fake_mem_free(ze_context_handle_t hc, void* p) {
  if (!as_context(hc)) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  struct fake_allocation* a = NULL;
  for (int i = 0; i < FAKE_MAX_ALLOCATIONS && !a; ++i)
    if (p && g_allocations[i].base == p) a = &g_allocations[i];
  if (!a) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (a->mirror) {
    if (a->mirror_locked) munlock(a->mirror, a->size);
    munmap(a->mirror, a->size);
  }
  munmap(a->base, a->size);
  memset(a, 0, sizeof *a);
  return ZE_RESULT_SUCCESS;
}

/* Two groups, as an Arc has: the compute engine (which copies too) and two copy-only engines. */
static ze_result_t ZE_APICALL fake_device_get_command_queue_group_properties(
    ze_device_handle_t h, uint32_t* count, ze_command_queue_group_properties_t* groups) {
  if (!as_device(h)) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (*count == 0 || !groups) {
    *count = 2;
    return ZE_RESULT_SUCCESS;
  }
  uint32_t n = *count < 2 ? *count : 2;
  for (uint32_t i = 0; i < n; ++i) {
    groups[i].flags = i == 0 ? ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE | ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY
                             : ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
    groups[i].maxMemoryFillPatternSize = i == 0 ? 128 : 256;
    groups[i].numQueues = i == 0 ? 1 : 2;
  }
  *count = n;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_command_list_create_immediate(ze_context_handle_t hc, ze_device_handle_t hd,
                                                                 const ze_command_queue_desc_t* desc,
                                                                 ze_command_list_handle_t* out) {
  struct fake_context* c = as_context(hc);
  struct fake_device* d = as_device(hd);
  if (!c || !d) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!desc || !out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (!context_has(c, d) || desc->ordinal >= 2 || desc->index >= (desc->ordinal == 0 ? 1u : 2u))
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  struct fake_list* l = calloc(1, sizeof *l);
  if (!l) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  l->magic = FAKE_LIST_MAGIC;
  l->context = c;
  l->device = d;
  *out = (ze_command_list_handle_t)l;
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_command_list_destroy(ze_command_list_handle_t h) {
  struct fake_list* l = as_list(h);
  if (!l) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  l->magic = 0;
  free(l);
  return ZE_RESULT_SUCCESS;
}

/* Synchronous: the copy is done when the call returns. Events are not emulated. */
static ze_result_t ZE_APICALL fake_command_list_append_memory_copy(ze_command_list_handle_t h, void* dst,
                                                                   const void* src, size_t size,
                                                                   ze_event_handle_t signal_event,
                                                                   uint32_t wait_count, ze_event_handle_t* waits) {
  (void)waits;
  struct fake_list* l = as_list(h);
  if (!l) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!dst || !src) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (signal_event || wait_count) return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
  struct fake_allocation* to = find_allocation(dst, size);
  struct fake_allocation* from = find_allocation(src, size);
  if (!to || !from || to->context != l->context || from->context != l->context) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  int peer = (to->device && to->device != l->device) || (from->device && from->device != l->device);
  if (peer) {
    if (from->device && to->device && from->device->index == 0 && to->device->index == 1)
      misbehave("copy_hang", "copy_crash");
    if (is_scenario("copy_oodm")) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
  }
  memmove(dst, src, size);
  if (peer && is_scenario("copy_corrupt")) {
    for (size_t i = size / 3; i < size; i += 65536) ((uint8_t*)dst)[i] ^= 0xff;
  }
  return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL fake_command_list_append_memory_fill(ze_command_list_handle_t h, void* ptr,
                                                                   const void* pattern, size_t pattern_size,
                                                                   size_t size, ze_event_handle_t signal_event,
                                                                   uint32_t wait_count, ze_event_handle_t* waits) {
  (void)waits;
  struct fake_list* l = as_list(h);
  if (!l) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!ptr || !pattern) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (signal_event || wait_count) return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
  if (pattern_size == 0 || pattern_size > 256 || size % pattern_size) return ZE_RESULT_ERROR_INVALID_SIZE;
  struct fake_allocation* a = find_allocation(ptr, size);
  if (!a || a->context != l->context) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < size; i += pattern_size) memcpy((uint8_t*)ptr + i, pattern, pattern_size);
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
  t->pfnGetCommandQueueGroupProperties = fake_device_get_command_queue_group_properties;
  return ZE_RESULT_SUCCESS;
}

FAKE_EXPORT ze_result_t ZE_APICALL zeGetContextProcAddrTable(ze_api_version_t v, ze_context_dditable_t* t) {
  (void)v;
  if (!t) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  memset(t, 0, sizeof *t);
  t->pfnCreate = fake_context_create;
  t->pfnCreateEx = fake_context_create_ex;
  t->pfnDestroy = fake_context_destroy;
  return ZE_RESULT_SUCCESS;
}

FAKE_EXPORT ze_result_t ZE_APICALL zeGetMemProcAddrTable(ze_api_version_t v, ze_mem_dditable_t* t) {
  (void)v;
  if (!t) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  memset(t, 0, sizeof *t);
  t->pfnAllocDevice = fake_mem_alloc_device;
  t->pfnAllocHost = fake_mem_alloc_host;
  t->pfnFree = fake_mem_free;
  return ZE_RESULT_SUCCESS;
}

FAKE_EXPORT ze_result_t ZE_APICALL zeGetCommandListProcAddrTable(ze_api_version_t v, ze_command_list_dditable_t* t) {
  (void)v;
  if (!t) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  memset(t, 0, sizeof *t);
  t->pfnCreateImmediate = fake_command_list_create_immediate;
  t->pfnDestroy = fake_command_list_destroy;
  t->pfnAppendMemoryCopy = fake_command_list_append_memory_copy;
  t->pfnAppendMemoryFill = fake_command_list_append_memory_fill;
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
FAKE_EMPTY_TABLE(zeGetCommandQueueProcAddrTable, ze_command_queue_dditable_t)
FAKE_EMPTY_TABLE(zeGetEventProcAddrTable, ze_event_dditable_t)
FAKE_EMPTY_TABLE(zeGetEventExpProcAddrTable, ze_event_exp_dditable_t)
FAKE_EMPTY_TABLE(zeGetEventPoolProcAddrTable, ze_event_pool_dditable_t)
FAKE_EMPTY_TABLE(zeGetFenceProcAddrTable, ze_fence_dditable_t)
FAKE_EMPTY_TABLE(zeGetImageProcAddrTable, ze_image_dditable_t)
FAKE_EMPTY_TABLE(zeGetImageExpProcAddrTable, ze_image_exp_dditable_t)
FAKE_EMPTY_TABLE(zeGetKernelProcAddrTable, ze_kernel_dditable_t)
FAKE_EMPTY_TABLE(zeGetKernelExpProcAddrTable, ze_kernel_exp_dditable_t)
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
