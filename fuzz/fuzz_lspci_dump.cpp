// SPDX-License-Identifier: GPL-2.0-or-later
// `lspci -x/-xxx/-xxxx` output as a reporter sends it: libpci's dump parser, our decoding and the
// tree rebuilt from bridge bus ranges.
#include <cstdint>

#include "fuzz_input.h"
#include "p2paudit/dump_topology.h"
#include "p2paudit/errors.h"
#include "p2paudit/json_output.h"
#include "p2paudit/topology_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  p2paudit::fuzz::TempFile file(data, size, ".txt");
  try {
    p2paudit::Topology t = p2paudit::read_dump_topology(file.path(), {});
    (void)p2paudit::json_text(p2paudit::topology_to_json(t));
  } catch (const p2paudit::InputError&) {
  }
  return 0;
}
