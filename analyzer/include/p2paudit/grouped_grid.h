// SPDX-License-Identifier: GPL-2.0-or-later
// A grid of pairs too large to read device by device, told by groups of devices instead: those
// below one PCIe switch, else one root port, else one host bridge. Each cell counts the pairs
// between two groups by kind (a policy decision, a kernel map type). The audit's first screen,
// `policy` and `matrix` draw their large grids with it. Memory grows with the devices and the
// groups, never with the pairs.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "p2paudit/p2pdma_report.h"
#include "p2paudit/text_style.h"
#include "p2paudit/topology.h"

namespace p2paudit {

// `policy` and `matrix` draw a grid of one column per device only while it fits this many
// columns; past it, rows and columns are groups (at most kMostDeviceGroups, merged until the
// grid fits this width again). A fixed width, not the terminal's, so that output to a file or a
// pipe is the same everywhere.
inline constexpr size_t kDeviceGridColumns = 160;
inline constexpr size_t kMostDeviceGroups = 16;

// Whether a grid of `devices` rows and columns, each `cell_columns` wide (the row labels too),
// fits kDeviceGridColumns.
inline bool device_grid_fits(size_t devices, size_t cell_columns) {
  return cell_columns * (devices + 1) <= kDeviceGridColumns;
}

// The line above a grouped grid: how many devices, why they are grouped, and `every_pair`: the
// option that lists every pair.
std::string grouped_grid_heading(size_t devices, std::string_view every_pair);

// A kind of pair the cells count: its code in a cell ("P" of "P12"), the tone of its cells, and
// how bad it is: a cell takes the tone of the worst kind it holds.
struct PairKind {
  std::string code;
  Tone tone = Tone::kUnknown;
  int severity = 0;
};

class GroupedGrid {
 public:
  // Groups `devices` at the finest place (switch, root port, host bridge) that gives at most
  // `most_groups` groups; past that many host bridges, runs of adjacent ones. `kinds` in the
  // order a cell lists them (at most kMostKinds).
  GroupedGrid(const Topology& topo, const std::vector<NamedFunction>& devices, size_t most_groups,
              std::vector<PairKind> kinds);

  static constexpr size_t kMostKinds = 4;

  // One ordered pair: entries of `devices` (provider, client) and the index of its kind.
  void count(size_t provider_entry, size_t client_entry, size_t kind) {
    ++counts_[of_[provider_entry] * groups() + of_[client_entry]][kind];
  }
  // Merges groups 2i and 2i+1 until the grid (row labels and cells) fits `width` columns or one
  // group is left; their counts add up, nothing is counted again.
  void fit(size_t width);

  size_t groups() const { return what_.size(); }
  // Pairs counted, per kind.
  std::vector<size_t> totals() const;
  // The header row and a row per group: "G1", then each cell's counts ("P12 H4"; "-" for none),
  // every column as wide as the widest cell.
  std::string rows(const TextStyle& style) const;
  // Per group: "G1 switch 0000:01:00.0 (4 devices): gpu0 gpu1 …": its places and count always,
  // then as many of its devices' labels (entries of `devices`) as fit `width` columns, then "…".
  std::vector<std::string> legend(const std::vector<std::string>& labels, size_t width) const;

 private:
  using Counts = std::array<size_t, kMostKinds>;
  std::string cell_text(const Counts& c) const;
  Tone cell_tone(const Counts& c) const;
  size_t column_width() const;

  std::vector<PairKind> kinds_;
  std::vector<size_t> of_;                      // per entry of `devices`: its group
  std::vector<std::vector<std::string>> what_;  // per group: the places it covers
  std::vector<std::vector<size_t>> members_;    // per group: entries of `devices`
  std::vector<Counts> counts_;                  // groups() x groups(), row-major
};

}  // namespace p2paudit
