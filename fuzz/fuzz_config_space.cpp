// SPDX-License-Identifier: GPL-2.0-or-later
// Config space bytes as a function presents them: libpci's decoding plus ours (capabilities,
// extended capabilities, ACS, ReBAR, SR-IOV, bridge windows, NVIDIA's clique capability).
#include <cstdint>
#include <vector>

#include "p2paudit/config_space.h"
#include "p2paudit/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return -1;
  std::vector<p2paudit::Finding> findings;
  try {
    (void)p2paudit::decode_config_bytes(p2paudit::Bdf{0, 1, 0, 0}, std::vector<uint8_t>(data, data + size), findings);
  } catch (const p2paudit::InputError&) {
  }
  return 0;
}
