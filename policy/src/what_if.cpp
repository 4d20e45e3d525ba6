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
  auto state = [](PolicyEvaluator& e, size_t p, size_t c) {
    PairOutcome o = e.index().outcome(p, c);
    const DecisionGroup& g = e.groups()[e.decide(p, c)];
    return PairState{o.map_type, o.p2pdma_distance, to_string(g.action), g.rule};
  };
  return changes_against_as_read(
      before_topo, after_topo, devices,
      [&](size_t before_p, size_t before_c, size_t after_p, size_t after_c) -> std::optional<PairChange> {
        if (state(before, before_p, before_c) == state(after, after_p, after_c)) return std::nullopt;
        return decision_change(before_topo, before.index().rules(), before.decide_in_full(before_p, before_c),
                               after_topo, after.index().rules(), after.decide_in_full(after_p, after_c));
      });
}

}  // namespace p2paudit::policy
