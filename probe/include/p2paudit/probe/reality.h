// SPDX-License-Identifier: GPL-2.0-or-later
// Prediction against reality: for every pair a runtime answered, the kernel's verdict, the offline
// decision (the policy without runtime facts), what the runtime said and did, and the decision
// once its answers are facts, with every disagreement named and explained (docs/probe.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/rules.h"
#include "p2paudit/probe/runtime_facts.h"
#include "p2paudit/topology.h"

namespace p2paudit::probe {

struct RealityCheck {
  std::string runtime;                 // "cuda", "level_zero"...
  size_t provider = 0, client = 0;     // topology indices
  std::string kernel;                  // the kernel's map type: "BUS_ADDR", "NOT_SUPPORTED"...
  std::string predicted;               // offline decision and rule: "host_staged (nvidia-driver-unknown)"
  std::string runtime_says;            // "yes", "no", "unknown", or the raw answer
  std::string copy;                    // "verified, 389.2 GB/s", "CORRUPT: ...", "failed: ...", "" (no test)
  // A verified copy against its path (vendor.copy_ceiling_*, docs/probe.md "Bandwidth against the
  // path"): the ceiling and this runtime's copy / ceiling, or the fact that would settle an unknown one.
  std::optional<double> copy_ceiling_gbps, copy_ceiling_ratio;
  std::string copy_ceiling_path, copy_ceiling_missing;
  std::string decided;                 // with the runtime's answers as facts: "peer (nvlink)"
  bool disagreement = false;           // the runtime or the copy contradicts the prediction
  bool corrupt = false;                // a copy reported success with wrong data
  std::string explanation;             // why, and what to do
  std::vector<std::string> kernel_log; // the kernel's own lines for the pair, when it refuses
};

// One entry per pair runtime_facts() read of runtime devices bound to the topology's functions, in
// the document's order (runtime_facts(document, origin, &topo)).
std::vector<RealityCheck> check_predictions(const Topology& topo, const KernelRules& kernel,
                                            const policy::RuleSet& rules, const RuntimeFacts& runtime_facts);

nlohmann::ordered_json reality_json(const Topology& topo, const RealityCheck& check);

}  // namespace p2paudit::probe
