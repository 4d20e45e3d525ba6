// SPDX-License-Identifier: GPL-2.0-or-later
// `policy --diff` and `check --diff`: the pairs whose kernel verdict or decision differs between the
// machine as read and the machine under the what-if options (p2paudit/what_if.h prints them).
#pragma once

#include <vector>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/topology.h"
#include "p2paudit/what_if.h"

namespace p2paudit::policy {

PairState decision_state(const PairDecision& d);

// One pair before -> after, why being the causes and the deciding rule's reason; for `check`,
// which shows its pair whether it changed or not.
PairChange decision_change(const Topology& before_topo, const KernelRules& before_rules, const PairDecision& before,
                           const Topology& after_topo, const KernelRules& after_rules, const PairDecision& after);

// The ordered pairs of `devices` (functions of `after`'s topology) whose map type,
// pci_p2pdma_distance(), action or deciding rule differs from the same pair (by BDF) in `before`.
std::vector<PairChange> decision_changes(PolicyEvaluator& before, PolicyEvaluator& after,
                                         const std::vector<NamedFunction>& devices);

}  // namespace p2paudit::policy
