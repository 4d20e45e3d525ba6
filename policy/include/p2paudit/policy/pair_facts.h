// SPDX-License-Identifier: GPL-2.0-or-later
// From analysis to facts: what the analyzer read and the kernel's verdict become the catalogued
// facts (facts.h) of one (provider, client) pair. Facts the sysroot cannot tell (vendor fabric
// links, runtime versions) stay unknown unless a vendor facts file supplies them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <utility>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/nvidia_third_party.h"
#include "p2paudit/topology.h"

namespace p2paudit::policy {

// The machine's facts, shared by every pair: platform, IOMMU, the kernel's config and release, and
// the copy defaults (no copy tested until a probe's results or a facts file say so).
FactSet machine_facts(const Topology& topo, const KernelRules& rules);
// One device's facts, as "provider.X" or as "client.X".
FactSet device_facts(const Function& f, bool as_provider);
// The pair's own facts (kernel verdict, path, whose peer logic) from the index's outcome, in
// O(depth). The kernel's texts need the whole verdict and are added by add_kernel_text_facts()
// only for pairs whose reasons are printed, or when a rule's condition reads one.
struct PairFactsContext {
  explicit PairFactsContext(const P2pdmaIndex& index);
  struct LinkSpeeds {
    std::optional<double> current, max;  // GT/s; nullopt when the attribute is absent or "Unknown"
    int current_width = 0, max_width = 0;
  };
  const P2pdmaIndex& index;
  std::vector<LinkSpeeds> links;                // per function, parsed once
  std::vector<int8_t> bridge_prefetch_64bit;    // per function: 1 yes (or not a bridge), 0 no, -1 unknown
  NvidiaGrdmaMachine nvidia_machine;            // the third-party gate's machine inputs, read once
};
FactSet pair_own_facts(const PairFactsContext& context, size_t provider, size_t client, const PairOutcome& outcome);
const std::vector<std::string>& kernel_text_facts();  // "kernel.reason", "kernel.remedy", ...
void add_kernel_text_facts(const Topology& topo, const PairVerdict& verdict, FactSet& facts);
// Every analyzer fact of one pair in one set, the kernel's texts included.
FactSet pair_facts(const P2pdmaIndex& index, size_t provider, size_t client);

}  // namespace p2paudit::policy
