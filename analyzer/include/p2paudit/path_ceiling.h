// SPDX-License-Identifier: GPL-2.0-or-later
// The bandwidth ceiling of the path between two functions, in GB/s per direction: what a peer copy
// can reach at best, so that a measured bandwidth can be judged against it (docs/probe.md,
// "Bandwidth against the path"). Over PCIe it is the narrowest link the traffic crosses; over
// NVLink the active links between the two GPUs times the rate of one link. A ceiling is never
// guessed: where a link's speed, width or rate is not known, it is unknown and says which fact is
// missing.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "p2paudit/topology.h"

namespace p2paudit {

struct PathCeiling {
  std::optional<double> gbps;  // per direction; nullopt: unknown, or no link is crossed
  std::string path;            // how it was found: "PCIe 16.0 GT/s x8 at 0000:03:00.0", "NVLink: ..."
  std::string missing;         // when gbps is unknown: the fact that would settle it
};

// A sysfs link speed attribute as a number: "16.0 GT/s PCIe" -> 16.0; nullopt for "Unknown", an
// empty attribute or anything that is not a positive number (never an exception: most functions of
// a large machine have no link).
std::optional<double> link_speed_gts(const std::string& speed);

// Payload bandwidth of one PCIe lane per direction after line encoding, GB/s, for a link speed in
// GT/s (2.5, 5, 8, 16, 32, 64); nullopt for any other speed.
std::optional<double> pcie_lane_gbps(double gts);

// The PCIe ceiling between functions a and b of `topo` (indices): the narrowest link (speed x
// width, each link's current, negotiated values) of every function on the path, from each of them
// up to the nearest bridge they share (not included: its own link is its uplink, which the peer
// traffic does not cross), or up to the root port when they share none. The root complex's
// internal fabric and the link between sockets are not counted, so through the root complex the
// ceiling is an upper bound. a == b crosses no link: gbps nullopt, missing "".
PathCeiling pcie_path_ceiling(const Topology& topo, size_t a, size_t b);

// measured / ceiling, rounded to three decimals as every output shows it; nullopt without a
// positive ceiling.
std::optional<double> ceiling_ratio(double measured_gbps, std::optional<double> ceiling_gbps);

// One GPU's NVLinks as NVML reports them.
struct NvlinkEnd {
  Bdf gpu;
  std::vector<std::string> active_remotes;  // the remote PCI address of each active link ("" when NVML gave none)
  bool links_read = false;                  // NVML listed the GPU's links (false: they are unknown)
  std::optional<double> link_gbps;          // one link's rate per direction for this GPU's NVLink generation
  std::string rate_source;                  // where link_gbps came from, or why it is unknown
};

// The NVLink ceiling between GPUs a and b: the active links that join them directly, times the
// per-link rate; without a direct link, through NVSwitches, the fewer of the two GPUs' active links
// that lead to no GPU of `gpus` (a switch, or a remote NVML could not name), times the rate. The
// lower of the two GPUs' rates is used. Unknown when either GPU's links or rate are unknown, or when
// no active link leads from either.
PathCeiling nvlink_path_ceiling(const NvlinkEnd& a, const NvlinkEnd& b, const std::set<Bdf>& gpus);

}  // namespace p2paudit
