// SPDX-License-Identifier: GPL-2.0-or-later
// Pictures of a machine (docs/pictures.md): a Graphviz digraph and one self-contained HTML page
// of the PCIe tree (host bridges, switches, endpoints, the ports whose ACS redirects peer traffic
// up to the root complex, NUMA nodes); for the audit also every pair's kernel verdict and policy
// decision, their explanations and the whitelist candidates.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/topology.h"

namespace p2paudit::picture {

// What the audit draws beside the tree; `topology` draws the tree alone (no Pairs).
struct Pairs {
  policy::PolicyEvaluator* evaluator = nullptr;     // decides every ordered pair of `devices`
  std::vector<NamedFunction> devices;               // matrix_devices()
  std::vector<fleet::WhitelistCandidate> candidates;  // with their pairs, or counted (count_pairs_only)
  const policy::VendorFactsDocument* evidence = nullptr;  // what the candidates were computed with
};

// `source` names what was read (a sysroot, a snapshot, a dump) in the picture's title.
void write_dot(std::ostream& out, const Topology& topo, Pairs* pairs, const std::string& source);
void write_html(std::ostream& out, const Topology& topo, Pairs* pairs, const std::string& source);

}  // namespace p2paudit::picture
