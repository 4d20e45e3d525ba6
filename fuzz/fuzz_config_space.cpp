// SPDX-License-Identifier: GPL-2.0-or-later
// Config space bytes as a function presents them: libpci's decoding plus ours (capabilities,
// extended capabilities, ACS, ReBAR, SR-IOV, bridge windows, NVIDIA's clique capability); and the
// same bytes read in pieces as the live machine reads them (read_config_pieces()) decode alike.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "config_fields.h"

#include "p2paudit/config_space.h"
#include "p2paudit/errors.h"

namespace {

std::string decoded(const std::vector<uint8_t>& bytes) {
  std::vector<p2paudit::Finding> findings;
  try {
    return p2paudit::test::decoded_fields(p2paudit::decode_config_bytes(p2paudit::Bdf{0, 1, 0, 0}, bytes, findings), findings);
  } catch (const p2paudit::InputError& e) {
    return e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return -1;
  const std::vector<uint8_t> whole(data, data + size);
  std::vector<uint8_t> pieces = p2paudit::read_config_pieces([&](size_t offset, uint8_t* out, size_t n) -> size_t {
    if (offset >= size) return 0;
    n = std::min(n, size - offset);
    std::memcpy(out, data + offset, n);
    return n;
  });
  // Only whole regions count as read (a file cut inside one holds no more than the regions before).
  if (p2paudit::whole_config_regions(pieces.size()) != p2paudit::whole_config_regions(size)) std::abort();
  if (decoded(pieces) != decoded(whole)) std::abort();
  return 0;
}
