/* SPDX-License-Identifier: GPL-2.0-or-later */
/* cuda-peer-copy: the plain CUDA peer copy between GPUs 0 and 1, the reference that
 * `p2paudit probe --copy` bandwidth is checked against. Deliberately the textbook way and nothing
 * more: peer access enabled both ways, cuMemcpyPeer of SIZE bytes REPEAT times after one warm-up
 * copy, each timed with the host clock up to cuCtxSynchronize of both contexts, median GB/s
 * (1e9 bytes/s); then the same through pinned host memory (cuMemcpyDtoH + cuMemcpyHtoD).
 *
 *   cuda-peer-copy [SIZE_BYTES [REPEAT]]      (defaults 268435456 and 3)
 *
 * libcuda.so.1 is opened with dlopen(), so it builds without CUDA; P2PAUDIT_CUDA_LIBRARY names
 * another library (the tests' fake). Exit 0 on success, 1 when a CUDA call fails, 2 on bad usage. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef void* CUcontext;
typedef unsigned long long CUdeviceptr;

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(int*, int);
static CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, int);
static CUresult (*cuCtxSetCurrent)(CUcontext);
static CUresult (*cuCtxSynchronize)(void);
static CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned);
static CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
static CUresult (*cuMemAllocHost)(void**, size_t);
static CUresult (*cuMemcpyPeer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
static CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
static CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);

static void check(CUresult rc, const char* call) {
  if (rc != 0 && !(rc == 704 && strcmp(call, "cuCtxEnablePeerAccess") == 0)) { /* 704: already enabled */
    fprintf(stderr, "cuda-peer-copy: %s failed: CUresult %d\n", call, rc);
    exit(1);
  }
}

static void* symbol(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "cuda-peer-copy: %s not found in the CUDA library\n", name);
    exit(1);
  }
  return p;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static CUcontext ctx[2];
static CUdeviceptr buf[2];
static void* pinned;
static size_t size;

static void sync_both(void) {
  for (int i = 0; i < 2; ++i) {
    check(cuCtxSetCurrent(ctx[i]), "cuCtxSetCurrent");
    check(cuCtxSynchronize(), "cuCtxSynchronize");
  }
}

/* One copy from GPU `from` to GPU `to`, timed up to its end: direct, or through pinned host memory. */
static double copy_once(int from, int to, int staged) {
  double start = now();
  if (staged) {
    check(cuCtxSetCurrent(ctx[from]), "cuCtxSetCurrent");
    check(cuMemcpyDtoH(pinned, buf[from], size), "cuMemcpyDtoH_v2");
    check(cuCtxSetCurrent(ctx[to]), "cuCtxSetCurrent");
    check(cuMemcpyHtoD(buf[to], pinned, size), "cuMemcpyHtoD_v2");
  } else {
    check(cuCtxSetCurrent(ctx[to]), "cuCtxSetCurrent");
    check(cuMemcpyPeer(buf[to], ctx[to], buf[from], ctx[from], size), "cuMemcpyPeer");
  }
  sync_both();
  return now() - start;
}

static void measure(const char* what, int from, int to, int staged, int repeat) {
  double seconds[1000];
  copy_once(from, to, staged); /* warm-up: the first copy also sets up mappings */
  for (int r = 0; r < repeat; ++r) seconds[r] = copy_once(from, to, staged);
  qsort(seconds, (size_t)repeat, sizeof seconds[0], by_value);
  double median = repeat % 2 ? seconds[repeat / 2] : (seconds[repeat / 2 - 1] + seconds[repeat / 2]) / 2;
  printf("%-11s %d->%d: %.2f GB/s (median of %d, %zu bytes)\n", what, from, to, (double)size / median / 1e9, repeat,
         size);
}

int main(int argc, char** argv) {
  char* end = NULL;
  unsigned long long size_arg = argc > 1 ? strtoull(argv[1], &end, 0) : 268435456ull;
  long repeat = argc > 2 ? strtol(argv[2], NULL, 10) : 3;
  if (argc > 3 || (argc > 1 && (*end || size_arg == 0)) || repeat < 1 || repeat > 1000) {
    fprintf(stderr, "usage: cuda-peer-copy [SIZE_BYTES [REPEAT (1-1000)]]\n");
    return 2;
  }
  size = (size_t)size_arg;

  const char* name = getenv("P2PAUDIT_CUDA_LIBRARY");
  void* lib = dlopen(name && *name ? name : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "cuda-peer-copy: %s\n", dlerror());
    return 1;
  }
  /* POSIX allows the object-to-function pointer conversion dlsym() needs. */
  *(void**)&cuInit = symbol(lib, "cuInit");
  *(void**)&cuDeviceGet = symbol(lib, "cuDeviceGet");
  *(void**)&cuDevicePrimaryCtxRetain = symbol(lib, "cuDevicePrimaryCtxRetain");
  *(void**)&cuCtxSetCurrent = symbol(lib, "cuCtxSetCurrent");
  *(void**)&cuCtxSynchronize = symbol(lib, "cuCtxSynchronize");
  *(void**)&cuCtxEnablePeerAccess = symbol(lib, "cuCtxEnablePeerAccess");
  *(void**)&cuMemAlloc = symbol(lib, "cuMemAlloc_v2");
  *(void**)&cuMemAllocHost = symbol(lib, "cuMemAllocHost_v2");
  *(void**)&cuMemcpyPeer = symbol(lib, "cuMemcpyPeer");
  *(void**)&cuMemcpyDtoH = symbol(lib, "cuMemcpyDtoH_v2");
  *(void**)&cuMemcpyHtoD = symbol(lib, "cuMemcpyHtoD_v2");

  check(cuInit(0), "cuInit");
  for (int i = 0; i < 2; ++i) {
    int dev = 0;
    check(cuDeviceGet(&dev, i), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx[i], dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx[i]), "cuCtxSetCurrent");
    check(cuMemAlloc(&buf[i], size), "cuMemAlloc_v2");
  }
  check(cuMemAllocHost(&pinned, size), "cuMemAllocHost_v2");
  memset(pinned, 0x5a, size);
  for (int i = 0; i < 2; ++i) {
    check(cuCtxSetCurrent(ctx[i]), "cuCtxSetCurrent");
    check(cuMemcpyHtoD(buf[i], pinned, size), "cuMemcpyHtoD_v2"); /* defined contents */
    check(cuCtxEnablePeerAccess(ctx[1 - i], 0), "cuCtxEnablePeerAccess");
  }

  measure("peer", 0, 1, 0, (int)repeat);
  measure("peer", 1, 0, 0, (int)repeat);
  measure("host-staged", 0, 1, 1, (int)repeat);
  measure("host-staged", 1, 0, 1, (int)repeat);
  return 0;
}
