// SPDX-License-Identifier: GPL-2.0-or-later
// Text and JSON renderings of P2PDMA verdicts (the contract is docs/kernel-verdicts.md), and the
// short device names (gpu0, nvme0, nic0, accel0, ib0) the matrix and explain commands share.
#pragma once

#include <cstdint>

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/text_style.h"
#include "p2paudit/topology.h"

namespace p2paudit {

inline constexpr int kVerdictSchemaVersion = 1;
// Matrix documents: 2 since pairs carry the verdict's facts, not its texts (--details adds them).
inline constexpr int kMatrixSchemaVersion = 2;

// A function and its short name; the name is "" for functions outside the named classes.
struct NamedFunction {
  size_t index = 0;
  std::string short_name;
};

// The devices P2P is usually asked about (device_class.h: GPUs, accelerators, FPGAs, NVMe, NICs,
// InfiniBand), physical functions only, each class numbered in BDF order; with all = true every function (VFs too).
std::vector<NamedFunction> matrix_devices(const Topology& topo, bool all);
// "DDDD:BB:DD.F", "BB:DD.F" or a short name; nullopt when nothing matches.
std::optional<size_t> resolve_function(const Topology& topo, std::string_view spec);
// "X" (self), "BUS", "HB", "NO" or "?".
const char* matrix_code(const PairVerdict& v);
const char* matrix_code(MapType map_type, bool self);

nlohmann::ordered_json kernel_json(const KernelRules& rules);
nlohmann::ordered_json verdict_json(const Topology& topo, const KernelRules& rules, const PairVerdict& v);
nlohmann::ordered_json explain_json(const Topology& topo, const KernelRules& rules, const ManyVerdict& many);

// Grid labels: the short name, else the BDF ("BB:DD.F" when every function is in domain 0).
std::vector<std::string> matrix_labels(const Topology& t, const std::vector<NamedFunction>& devices);

// The matrix of every ordered pair of `devices`, written row by row as it is computed: memory does
// not grow with the number of pairs. Unless every_pair, a grid of one column per device that would
// pass kDeviceGridColumns (grouped_grid.h) is drawn by groups of devices instead, each cell
// counting its pairs by map type.
void write_matrix_text(std::ostream& out, const P2pdmaIndex& index, const std::vector<NamedFunction>& devices,
                       const TextStyle& style = {}, bool every_pair = false);
// {"schema_version": 2, "kernel", "devices", "pairs"}: pairs row-major, one line each, with the
// map type, distances, common upstream device and whether the path crosses a host bridge; with
// details, every field of verdict_json() (reason, kernel log, chains, ACS tests, remedy). `indent`
// places the document inside another one at that depth.
//
// Past `most_listed_pairs` pairs (the audit passes kMostListedPairs), "pairs" holds one element
// per kind of pair instead, {pairs (its count), map_type, distance, p2pdma_distance,
// through_host_bridge}, and a "grouped_pairs" member {count, most_listed, note} says so: every pair
// is computed and counted once, the output grows with the kinds, not the pairs.
void write_matrix_json(std::ostream& out, const P2pdmaIndex& index, const std::vector<NamedFunction>& devices,
                       bool details, int indent = 0, std::uint64_t most_listed_pairs = UINT64_MAX);

// Documents that list pairs (the audit's JSON, `report`, `--format prom`) list each ordered pair
// only while a machine has at most this many (256 devices have 65,280): past it the pairs are
// grouped by kind with exact counts, so that 5,000 GPUs (25 million pairs) give kilobytes, not
// gigabytes (docs/fleet.md, "Grouped pairs").
inline constexpr std::uint64_t kMostListedPairs = 65536;
std::string explain_text(const Topology& topo, const KernelRules& rules, const ManyVerdict& many);

// PairVerdict::reason for many pairs of one index, rendered from the index's chain data: the
// sentence pci_p2pdma_distance() writes, without building its kernel log, remedy or ACS tests.
// An unknown outcome's sentence lists what is unknown: the full verdict gives it.
class VerdictReasons {
 public:
  explicit VerdictReasons(const P2pdmaIndex& index);  // keeps a reference: it must outlive this
  // index.verdict(provider, client).reason, byte for byte; `outcome` is index.outcome(provider,
  // client). Valid until the next call.
  const std::string& reason(size_t provider, size_t client, const PairOutcome& outcome);

 private:
  const std::string& name(size_t dev);
  const std::string& device_label(size_t dev);
  // The sentence into text_, without the pcie_acs_override= note; true when taken whole from the
  // full verdict (which carries the note already).
  bool reason_without_override(size_t provider, size_t client, const PairOutcome& outcome);

  const P2pdmaIndex& index_;
  std::vector<std::string> names_;  // bdf.str() of each function, made on first use
  std::vector<std::string> labels_;  // "BDF [VVVV:DDDD] (name)" of each function, made on first use
  std::string acs_override_;        // " (pcie_acs_override= ...)" on the command line: why it does not help
  bool cpu_allows_ = false;         // cpu_supports_p2pdma() holds
  std::string cpu_allows_text_;     // what a reason says after its path when it does
  std::vector<size_t> redirecting_, unreadable_;
  std::string text_;
};

}  // namespace p2paudit
