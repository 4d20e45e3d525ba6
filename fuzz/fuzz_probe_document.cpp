// SPDX-License-Identifier: GPL-2.0-or-later
// A snapshot's stored probe document (p2paudit-probe.json): the bounded parse, then the facts and
// the prediction checks drawn from it, without a tree and bound to the devices of fixed trees (the
// recorded machines of tests/data/machines: NVIDIA GPUs, NVMe drives, bridges), so that the
// binding path (a runtime's PCI IDs against the tree's function, then VendorFactsDocument::bind)
// meets whatever the document claims.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "fuzz_input.h"
#include "p2paudit/errors.h"
#include "p2paudit/probe/runtime_facts.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"

namespace {

// Read once: every capture of tests/data/machines (in memory: archives are never unpacked).
const std::vector<p2paudit::Topology>& trees() {
  static const std::vector<p2paudit::Topology> t = [] {
    std::vector<p2paudit::Topology> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(P2PAUDIT_FUZZ_MACHINES, ec)) {
      auto archive = e.path() / "sysroot.tar.gz";
      if (!std::filesystem::exists(archive)) continue;
      out.push_back(p2paudit::read_topology(p2paudit::Sysroot::open(archive.string())));
    }
    if (out.empty()) std::abort();  // the fuzz target would not reach the binding path
    return out;
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& topologies = trees();
  try {
    auto document = p2paudit::probe::parse_probe_document(p2paudit::fuzz::text(data, size), "fuzz.json");
    (void)p2paudit::probe::runtime_facts(document, "fuzz.json");
    for (const auto& topo : topologies) {
      try {
        (void)p2paudit::probe::runtime_facts(document, "fuzz.json", &topo);
      } catch (const p2paudit::InputError&) {
      }
    }
  } catch (const p2paudit::InputError&) {
  }
  return 0;
}
