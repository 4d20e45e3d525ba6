// SPDX-License-Identifier: GPL-2.0-or-later
#include "decision_grid.h"

#include <fmt/format.h>

namespace p2paudit::policy {

GroupedGrid decision_grid(const Topology& topo, const std::vector<NamedFunction>& devices, size_t most_groups) {
  // Listed best first; a cell takes the colour of its worst decision.
  return GroupedGrid(topo, devices, most_groups,
                     {{"P", action_tone(Action::kPeer), 0},
                      {"H", action_tone(Action::kHostStaged), 1},
                      {"D", action_tone(Action::kDeny), 3},
                      {"?", action_tone(Action::kHostStaged), 2}});
}

size_t decision_kind(const Decision& d) {
  if (!d.certain()) return 3;
  return d.action == Action::kPeer ? 0 : d.action == Action::kHostStaged ? 1 : 2;
}

void write_grouped_policy_grid(std::ostream& out, PolicyEvaluator& evaluator, NoteBook& book,
                               const std::vector<NamedFunction>& devices, const std::vector<std::string>& labels,
                               const TextStyle& style) {
  GroupedGrid grid = decision_grid(evaluator.topology(), devices, kMostDeviceGroups);
  for (size_t r = 0; r < devices.size(); ++r)
    for (size_t c = 0; c < devices.size(); ++c) {
      if (r == c) continue;
      size_t n = book.count(evaluator.decide(devices[r].index, devices[c].index), labels[r], labels[c]);
      grid.count(r, c, decision_kind(book.notes()[n - 1].decision));
    }
  grid.fit(kDeviceGridColumns);
  std::string buf = grouped_grid_heading(devices.size(), "`--verbose` lists every pair") + "\n\n" + grid.rows(style);
  buf += fmt::format("\n{}.\n", kGridLegend);
  buf += fmt::format("{} devices in {} groups, {} ordered pairs; each cell counts the pairs between two groups by decision:\n",
                     devices.size(), grid.groups(), book.pairs());
  buf += "P = PEER, H = HOST, D = DENY, ? = uncertain, acted on as HOST or DENY (P12 H4: 12 pairs PEER and 4 HOST; - "
         "none). The notes below give the reasons.\n";
  for (const auto& line : grid.legend(labels, kDeviceGridColumns)) buf += line + "\n";
  out << buf;
}

}  // namespace p2paudit::policy
