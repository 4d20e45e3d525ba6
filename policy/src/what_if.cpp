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

std::vector<PairChange> decision_changes(const Topology& before_topo, const KernelRules& before_rules,
                                         const std::vector<PairDecision>& before, const Topology& after_topo,
                                         const KernelRules& after_rules, const std::vector<PairDecision>& after) {
  std::map<std::pair<Bdf, Bdf>, const PairDecision*> as_read;
  for (const auto& d : before)
    as_read[{before_topo.functions[d.verdict.provider].bdf, before_topo.functions[d.verdict.client].bdf}] = &d;
  std::vector<PairChange> changes;
  for (const auto& d : after) {
    auto it = as_read.find({after_topo.functions[d.verdict.provider].bdf, after_topo.functions[d.verdict.client].bdf});
    if (it == as_read.end() || decision_state(*it->second) == decision_state(d)) continue;
    changes.push_back(decision_change(before_topo, before_rules, *it->second, after_topo, after_rules, d));
  }
  return changes;
}

}  // namespace p2paudit::policy
