// SPDX-License-Identifier: GPL-2.0-or-later
// Grids of decisions by groups of devices (p2paudit/grouped_grid.h): the audit's first screen and
// `policy` past one screen of devices. Internal to the policy library.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "notes.h"
#include "p2paudit/grouped_grid.h"

namespace p2paudit::policy {

// Devices grouped into at most most_groups groups, each cell counting its pairs by decision:
// P (peer), H (host_staged), D (deny), ? (uncertain: unknown facts leave it open; the safe side, HOST
// or DENY, is acted on).
GroupedGrid decision_grid(const Topology& topo, const std::vector<NamedFunction>& devices, size_t most_groups);
// The kind decision_grid() counts a pair of this decision as.
size_t decision_kind(const Decision& d);

// `policy`'s grid when a grid of one column per device would pass kDeviceGridColumns: the line
// saying so, the grid of groups, the legend and each group's place and devices. Decides every
// ordered pair once and counts it in `book` (its notes follow), as the device grid does.
void write_grouped_policy_grid(std::ostream& out, PolicyEvaluator& evaluator, NoteBook& book,
                               const std::vector<NamedFunction>& devices, const std::vector<std::string>& labels,
                               const TextStyle& style);

}  // namespace p2paudit::policy
