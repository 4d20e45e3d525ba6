// SPDX-License-Identifier: GPL-2.0-or-later
// A snapshot archive from a stranger: read in memory, the tree rebuilt and printed as JSON and text;
// and read by the tar walk and by libarchive's tar reader alone, which must agree (same tree or
// same error).
#include <cstdint>
#include <string>

#include "../tests/archive_tree.h"

#include "fuzz_input.h"
#include "p2paudit/errors.h"
#include "p2paudit/json_output.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "p2paudit/topology_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  p2paudit::fuzz::TempFile file(data, size, ".tar.gz");
  p2paudit::SysrootLimits limits;
  limits.max_archive_bytes = 64u << 20;  // keep each run small; the limits themselves are tested
  try {
    p2paudit::Topology t = p2paudit::read_topology(p2paudit::Sysroot::open(file.path(), limits));
    (void)p2paudit::json_text(p2paudit::topology_to_json(t));
    (void)p2paudit::topology_tree_text(t);
  } catch (const p2paudit::InputError&) {
  }
  auto outcome = [&](p2paudit::ArchiveReader reader) {
    try {
      return p2paudit::test::tree_text(p2paudit::Sysroot::open(file.path(), limits, reader), 100'000);
    } catch (const p2paudit::InputError& e) {
      return std::string("error: ") + e.what();
    }
  };
  if (outcome(p2paudit::ArchiveReader::kTarWalk) != outcome(p2paudit::ArchiveReader::kLibarchive)) __builtin_trap();
  return 0;
}
