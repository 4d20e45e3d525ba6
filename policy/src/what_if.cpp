// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/policy/what_if.h"

#include <map>

namespace p2paudit::policy {

PairState decision_state(const PairDecision& d) {
  return {d.verdict.map_type, d.verdict.p2pdma_distance, to_string(d.decision.action), d.decision.rule};
}

PairChange decision_change(const Topology& before_topo, const KernelRules& before_rules, const PairDecision& before,
                           const Topology& after_topo, const KernelRules& after_rules, const PairDecision& after) {
  auto causes = what_if_causes(before_topo, before_rules, before.verdict, after_topo, after_rules, after.verdict);
  return {after.verdict.provider, after.verdict.client, decision_state(before), decision_state(after),
          what_if_why(causes, after.decision.reason)};
}

std::vector<PairChange> decision_changes(PolicyEvaluator& before, PolicyEvaluator& after,
                                         const std::vector<NamedFunction>& devices) {
  const Topology& before_topo = before.topology();
  const Topology& after_topo = after.topology();
  std::vector<std::optional<size_t>> as_read;  // the same function in `before`, by device position
  for (const auto& d : devices) as_read.push_back(before_topo.index_of(after_topo.functions[d.index].bdf));
  auto state = [](PolicyEvaluator& e, size_t p, size_t c) {
    PairOutcome o = e.index().outcome(p, c);
    const DecisionGroup& g = e.groups()[e.decide(p, c)];
    return PairState{o.map_type, o.p2pdma_distance, to_string(g.action), g.rule};
  };
  std::vector<PairChange> changes;
  for (size_t p = 0; p < devices.size(); ++p)
    for (size_t c = 0; c < devices.size(); ++c) {
      if (!as_read[p] || !as_read[c]) continue;  // the same machine has the same functions; never expected
      size_t ap = devices[p].index, ac = devices[c].index;
      if (state(before, *as_read[p], *as_read[c]) == state(after, ap, ac)) continue;
      changes.push_back(decision_change(before_topo, before.index().rules(), before.decide_in_full(*as_read[p], *as_read[c]),
                                        after_topo, after.index().rules(), after.decide_in_full(ap, ac)));
    }
  return changes;
}

}  // namespace p2paudit::policy
