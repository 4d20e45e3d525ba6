// SPDX-License-Identifier: GPL-2.0-or-later
// A copy's bandwidth judged against its path (docs/probe.md, "Bandwidth against the path"): for
// every pair the probe document holds a copy result for, the path's ceiling (path_ceiling.h) and
// the share of it the copy reached, as the facts vendor.copy_ceiling_gbps, vendor.copy_ceiling_ratio,
// vendor.copy_ceiling_path and vendor.copy_ceiling_missing.
#pragma once

#include <nlohmann/json.hpp>

#include "p2paudit/policy/facts.h"
#include "p2paudit/topology.h"

namespace p2paudit::probe::detail {

// Which path a copy takes: NVLink where NVML says it joins the pair (vendor.nvlink), PCIe where
// the runtime says no fabric does (vendor.nvlink or vendor.xgmi false) or the device table says
// neither GPU has one; otherwise the ceiling is unknown and vendor.copy_ceiling_missing says what
// would settle it. NVLink counts and remotes come from the document's NVML devices ("nvlink"), the
// per-link rate from the device table (rules/devices, nvlink_link_gbps). Entries the document
// holds in a shape this reader does not expect leave that GPU's links unknown.
void add_copy_ceilings(const nlohmann::json& document, const Topology& topo, policy::VendorFactsDocument& facts);

}  // namespace p2paudit::probe::detail
