// SPDX-License-Identifier: GPL-2.0-or-later
// `--diff`: what the what-if options (--assume-acs-off, --assume-whitelisted, --kernel,
// --kernel-rules) change against the machine as read: the pairs whose kernel verdict (or, from the
// policy library, decision) differs, before -> after, and why.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/topology.h"

namespace p2paudit {

inline constexpr int kWhatIfSchemaVersion = 1;

// One side of a pair as --diff compares it.
struct PairState {
  MapType map_type = MapType::kUnknown;
  std::optional<int> p2pdma_distance;
  std::string decision;  // the policy's action ("peer", "host_staged", "deny"); "" when only the kernel is compared
  std::string rule;      // the deciding policy rule; "" when none decided or only the kernel is compared
  bool operator==(const PairState&) const = default;
};

struct PairChange {
  size_t provider = 0, client = 0;  // function indexes of the topology with the what-if options
  PairState before, after;
  std::string why;
};

PairState kernel_state(const PairVerdict& v);

// What made one pair's verdict differ, each a short clause: the ACS bits cleared on its path, the
// whitelist entry that now matches (or no longer does), the other release's rules. Empty when the
// options touched nothing this pair depends on.
std::vector<std::string> what_if_causes(const Topology& before_topo, const KernelRules& before_rules,
                                        const PairVerdict& before, const Topology& after_topo,
                                        const KernelRules& after_rules, const PairVerdict& after);
// "<causes>: <the new answer's reason>".
std::string what_if_why(const std::vector<std::string>& causes, const std::string& reason);

// Per entry of `devices` (functions of `after_topo`): the same function, by BDF, in `before_topo`
// (the machine as read); nullopt where it has none.
std::vector<std::optional<size_t>> functions_as_read(const Topology& before_topo, const Topology& after_topo,
                                                     const std::vector<NamedFunction>& devices);

// The changes of the ordered pairs of `devices` (functions of `after_topo`) against the same pairs
// on the machine as read: `change_of(before_provider, before_client, after_provider, after_client)`
// gives a pair's change, nullopt when it has none. The what-if options add or remove no function,
// so a device missing from `before_topo` is never expected; its pairs are left out. Both --diff
// comparisons (kernel verdicts here, decisions in the policy library) pair the functions this way.
template <typename ChangeOf>
std::vector<PairChange> changes_against_as_read(const Topology& before_topo, const Topology& after_topo,
                                                const std::vector<NamedFunction>& devices, ChangeOf change_of) {
  const std::vector<std::optional<size_t>> as_read = functions_as_read(before_topo, after_topo, devices);
  std::vector<PairChange> changes;
  for (size_t p = 0; p < devices.size(); ++p)
    for (size_t c = 0; c < devices.size(); ++c) {
      if (!as_read[p] || !as_read[c]) continue;
      if (std::optional<PairChange> change = change_of(*as_read[p], *as_read[c], devices[p].index, devices[c].index))
        changes.push_back(std::move(*change));
    }
  return changes;
}

// The ordered pairs of `devices` (functions of `after`'s topology) whose map type or
// pci_p2pdma_distance() differs from the same pair (by BDF) in `before`.
std::vector<PairChange> kernel_verdict_changes(const P2pdmaIndex& before, const P2pdmaIndex& after,
                                               const std::vector<NamedFunction>& devices);

// The notes the what-if options added (in `after`, not in `before`): what was assumed.
std::vector<std::string> notes_added(const KernelRules& before, const KernelRules& after);

// "gpu0 -> gpu1: NOT_SUPPORTED -> BUS_ADDR (why)", the pair named as the matrix names it.
std::string change_line(const Topology& topo, const PairChange& change);
// Every change, one line each, then the notes; `what_if` lists the options compared.
std::string changes_text(const Topology& topo, const std::vector<PairChange>& changes,
                         const std::vector<std::string>& what_if, const std::vector<std::string>& notes);
// {"schema_version", "what_if", "notes", "changes": [{provider, client, provider_name, client_name,
//  before: {map_type, p2pdma_distance, decision, rule}, after: {...}, why}]}; decision and rule
// are null when only the kernel is compared.
nlohmann::ordered_json change_json(const Topology& topo, const PairChange& change);
nlohmann::ordered_json changes_json(const Topology& topo, const std::vector<PairChange>& changes,
                                    const std::vector<std::string>& what_if, const std::vector<std::string>& notes);

}  // namespace p2paudit
