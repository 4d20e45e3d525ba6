// SPDX-License-Identifier: GPL-2.0-or-later
// The kernels of `probe --copy`'s peer paths (peer_paths.h), as PTX text: loaded with
// cuModuleLoadData, so the driver compiles them for whatever GPU it finds (PTX for sm_50 is
// accepted by every later architecture) and nothing needs nvcc to build the tool. Written by hand
// and kept tiny: a grid-stride loop over 32-bit words. All three take (dst, src, words) as 64-bit
// parameters; the client GPU runs them, with peer access to the provider enabled.
//   p2paudit_peer_store:  dst (the provider's memory)[i] = src (the client's)[i]       peer stores
//   p2paudit_peer_load:   dst (the client's)[i] = src (the provider's memory)[i]       peer loads
//   p2paudit_peer_atomic: atomicAdd(&dst (the provider's)[i / 4], src (the client's)[i / 4])
//                         for i < 4 * words: four neighbouring threads of a warp add to each word
// The store and load kernels are the same code under two names, so that a driver trace (and the
// fake CUDA of the tests, which runs each by its name) tells which path ran.
#pragma once

namespace p2paudit::probe::detail {

inline constexpr const char* kPeerStoreKernel = "p2paudit_peer_store";
inline constexpr const char* kPeerLoadKernel = "p2paudit_peer_load";
inline constexpr const char* kPeerAtomicKernel = "p2paudit_peer_atomic";

#define P2PAUDIT_PTX_COPY_WORDS(NAME)                                        \
  ".visible .entry " NAME "(\n"                                              \
  "  .param .u64 dst,\n"                                                     \
  "  .param .u64 src,\n"                                                     \
  "  .param .u64 words)\n"                                                   \
  "{\n"                                                                      \
  "  .reg .pred %p<2>;\n"                                                    \
  "  .reg .b32 %r<6>;\n"                                                     \
  "  .reg .b64 %rd<12>;\n"                                                   \
  "  ld.param.u64 %rd1, [dst];\n"                                            \
  "  ld.param.u64 %rd2, [src];\n"                                            \
  "  ld.param.u64 %rd3, [words];\n"                                          \
  "  cvta.to.global.u64 %rd4, %rd1;\n"                                       \
  "  cvta.to.global.u64 %rd5, %rd2;\n"                                       \
  "  mov.u32 %r1, %ctaid.x;\n"                                               \
  "  mov.u32 %r2, %ntid.x;\n"                                                \
  "  mov.u32 %r3, %tid.x;\n"                                                 \
  "  mov.u32 %r4, %nctaid.x;\n"                                              \
  "  mul.wide.u32 %rd6, %r1, %r2;\n"                                         \
  "  cvt.u64.u32 %rd7, %r3;\n"                                               \
  "  add.u64 %rd6, %rd6, %rd7;\n"                                            \
  "  mul.wide.u32 %rd8, %r4, %r2;\n"                                         \
  NAME "_loop:\n"                                                           \
  "  setp.ge.u64 %p1, %rd6, %rd3;\n"                                         \
  "  @%p1 bra " NAME "_done;\n"                                             \
  "  shl.b64 %rd9, %rd6, 2;\n"                                               \
  "  add.u64 %rd10, %rd5, %rd9;\n"                                           \
  "  ld.global.u32 %r5, [%rd10];\n"                                          \
  "  add.u64 %rd11, %rd4, %rd9;\n"                                           \
  "  st.global.u32 [%rd11], %r5;\n"                                          \
  "  add.u64 %rd6, %rd6, %rd8;\n"                                            \
  "  bra.uni " NAME "_loop;\n"                                              \
  NAME "_done:\n"                                                           \
  "  ret;\n"                                                                 \
  "}\n"

inline constexpr const char kPeerKernelsPtx[] =
    ".version 6.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    "\n" P2PAUDIT_PTX_COPY_WORDS("p2paudit_peer_store") "\n" P2PAUDIT_PTX_COPY_WORDS("p2paudit_peer_load") "\n"
    ".visible .entry p2paudit_peer_atomic(\n"
    "  .param .u64 dst,\n"
    "  .param .u64 src,\n"
    "  .param .u64 words)\n"
    "{\n"
    "  .reg .pred %p<2>;\n"
    "  .reg .b32 %r<7>;\n"
    "  .reg .b64 %rd<13>;\n"
    "  ld.param.u64 %rd1, [dst];\n"
    "  ld.param.u64 %rd2, [src];\n"
    "  ld.param.u64 %rd3, [words];\n"
    "  cvta.to.global.u64 %rd4, %rd1;\n"
    "  cvta.to.global.u64 %rd5, %rd2;\n"
    "  shl.b64 %rd12, %rd3, 2;\n"  // 4 adds per word
    "  mov.u32 %r1, %ctaid.x;\n"
    "  mov.u32 %r2, %ntid.x;\n"
    "  mov.u32 %r3, %tid.x;\n"
    "  mov.u32 %r4, %nctaid.x;\n"
    "  mul.wide.u32 %rd6, %r1, %r2;\n"
    "  cvt.u64.u32 %rd7, %r3;\n"
    "  add.u64 %rd6, %rd6, %rd7;\n"
    "  mul.wide.u32 %rd8, %r4, %r2;\n"
    "atomic_loop:\n"
    "  setp.ge.u64 %p1, %rd6, %rd12;\n"
    "  @%p1 bra atomic_done;\n"
    "  shr.u64 %rd9, %rd6, 2;\n"   // the word: i / 4
    "  shl.b64 %rd9, %rd9, 2;\n"   // its byte offset
    "  add.u64 %rd10, %rd5, %rd9;\n"
    "  ld.global.u32 %r5, [%rd10];\n"
    "  add.u64 %rd11, %rd4, %rd9;\n"
    "  atom.global.add.u32 %r6, [%rd11], %r5;\n"
    "  add.u64 %rd6, %rd6, %rd8;\n"
    "  bra.uni atomic_loop;\n"
    "atomic_done:\n"
    "  ret;\n"
    "}\n";

#undef P2PAUDIT_PTX_COPY_WORDS

}  // namespace p2paudit::probe::detail
