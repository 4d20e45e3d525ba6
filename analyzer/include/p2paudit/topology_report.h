// SPDX-License-Identifier: GPL-2.0-or-later
// Renders a Topology: the JSON contract of `p2paudit topology --format json` (docs/json.md) and
// an annotated tree in the manner of `lspci -tv`.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "p2paudit/topology.h"

namespace p2paudit {

inline constexpr int kTopologySchemaVersion = 1;

nlohmann::ordered_json function_to_json(const Topology& t, const Function& f);
nlohmann::ordered_json platform_to_json(const Platform& p);
// The whole topology; the caller adds "source" (where it was read from) beside it.
nlohmann::ordered_json topology_to_json(const Topology& t);

// One-line summary of the ACS bits that matter for P2P: "RR+ CR+ EC-", "no ACS", "ACS unknown"
// (the whitelist commit message's ACS lines); acs_meaning.h's acs_line() says every bit.
std::string acs_summary(const Acs& acs);
std::string topology_tree_text(const Topology& t);
// After the tree: each ACS control bit set on some function, once, with what it does to a peer
// request and what P2PDMA does with it (acs_meaning.h); "" when no function has one set.
std::string acs_legend(const Topology& t);
// What the reader could not read, and how to fix that; empty when nothing was held back.
std::string privilege_note(const Topology& t);

}  // namespace p2paudit
