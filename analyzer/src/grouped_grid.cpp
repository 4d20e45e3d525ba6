// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/grouped_grid.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace p2paudit {

namespace {

// Where a device hangs: the places it can be grouped by, finest first. Each is a key that sorts
// in tree order and a description for the legend.
struct Place {
  std::string key, what;
};

std::array<Place, 3> places_of(const Topology& t, size_t dev) {
  const Function& f = t.functions[dev];
  std::string hb_key = f.host_bridge.starts_with("pci") ? f.host_bridge.substr(3) : f.host_bridge;
  Place host_bridge{hb_key, "host bridge " + f.host_bridge};
  std::optional<size_t> top, nearest_switch;
  for (auto up = f.parent; up; up = t.functions[*up].parent) {
    if (!nearest_switch && t.functions[*up].pcie_type == PcieType::kSwitchUpstream) nearest_switch = up;
    top = up;
  }
  Place root = top ? Place{t.functions[*top].bdf.str(), "root port " + t.functions[*top].bdf.str()} : host_bridge;
  Place sw = nearest_switch ? Place{t.functions[*nearest_switch].bdf.str(), "switch " + t.functions[*nearest_switch].bdf.str()}
                            : root;
  return {sw, root, host_bridge};
}

// A row without the padding after its last cell.
void end_row(std::string& buf) {
  while (!buf.empty() && buf.back() == ' ') buf.pop_back();
  buf += '\n';
}

}  // namespace

std::string grouped_grid_heading(size_t devices, std::string_view every_pair) {
  return fmt::format("{} devices, more than a grid of {} columns holds: rows and columns are groups of devices below one "
                     "switch, root port or host bridge ({}).",
                     devices, kDeviceGridColumns, every_pair);
}

GroupedGrid::GroupedGrid(const Topology& topo, const std::vector<NamedFunction>& devices, size_t most_groups,
                         std::vector<PairKind> kinds)
    : kinds_(std::move(kinds)) {
  kinds_.resize(std::min(kinds_.size(), kMostKinds));
  const size_t most = std::max<size_t>(most_groups, 1);
  std::vector<std::array<Place, 3>> places;
  places.reserve(devices.size());
  for (const auto& d : devices) places.push_back(places_of(topo, d.index));
  // The finest place that gives at most `most` groups; past the host bridges, runs of them.
  size_t level = 0;
  std::map<std::string, std::string> keys;  // key -> description, in tree order
  for (;; ++level) {
    keys.clear();
    for (const auto& p : places) keys.emplace(p[level].key, p[level].what);
    if (keys.size() <= most || level == 2) break;
  }
  const size_t per = (keys.size() + most - 1) / most;  // 1 unless the host bridges alone are too many
  std::map<std::string, size_t> group_of_key;
  size_t i = 0;
  for (const auto& [key, what] : keys) {
    size_t n = i++ / per;
    if (n == what_.size()) what_.emplace_back(), members_.emplace_back();
    what_[n].push_back(what);
    group_of_key[key] = n;
  }
  for (size_t d = 0; d < devices.size(); ++d) {
    of_.push_back(group_of_key.at(places[d][level].key));
    members_[of_.back()].push_back(d);
  }
  counts_.assign(groups() * groups(), Counts{});
}

std::string GroupedGrid::cell_text(const Counts& c) const {
  std::string out;
  for (size_t k = 0; k < kinds_.size(); ++k)
    if (c[k]) out += fmt::format("{}{}{}", out.empty() ? "" : " ", kinds_[k].code, c[k]);
  return out.empty() ? "-" : out;
}

Tone GroupedGrid::cell_tone(const Counts& c) const {
  const PairKind* worst = nullptr;
  for (size_t k = 0; k < kinds_.size(); ++k)
    if (c[k] && (!worst || kinds_[k].severity > worst->severity)) worst = &kinds_[k];
  return worst ? worst->tone : Tone::kUnknown;
}

size_t GroupedGrid::column_width() const {
  size_t width = fmt::format("G{}", groups()).size() + 2;
  for (const auto& c : counts_) width = std::max(width, cell_text(c).size() + 2);
  return width;
}

void GroupedGrid::fit(size_t width) {
  while (groups() > 1 && column_width() * (groups() + 1) > width) {
    const size_t old = groups(), merged = (old + 1) / 2;
    std::vector<Counts> counts(merged * merged, Counts{});
    for (size_t r = 0; r < old; ++r)
      for (size_t c = 0; c < old; ++c)
        for (size_t k = 0; k < kMostKinds; ++k) counts[(r / 2) * merged + c / 2][k] += counts_[r * old + c][k];
    std::vector<std::vector<std::string>> what(merged);
    std::vector<std::vector<size_t>> members(merged);
    for (size_t g = 0; g < old; ++g) {
      what[g / 2].insert(what[g / 2].end(), what_[g].begin(), what_[g].end());
      members[g / 2].insert(members[g / 2].end(), members_[g].begin(), members_[g].end());
    }
    for (auto& g : of_) g /= 2;
    what_ = std::move(what);
    members_ = std::move(members);
    counts_ = std::move(counts);
  }
}

std::vector<size_t> GroupedGrid::totals() const {
  std::vector<size_t> out(kinds_.size(), 0);
  for (const auto& c : counts_)
    for (size_t k = 0; k < kinds_.size(); ++k) out[k] += c[k];
  return out;
}

std::string GroupedGrid::rows(const TextStyle& style) const {
  const size_t n = groups(), width = column_width();
  std::string buf = fmt::format("{:<{}}", "", width);
  for (size_t c = 0; c < n; ++c) buf += fmt::format("{:<{}}", fmt::format("G{}", c + 1), width);
  end_row(buf);
  for (size_t r = 0; r < n; ++r) {
    buf += fmt::format("{:<{}}", fmt::format("G{}", r + 1), width);
    for (size_t c = 0; c < n; ++c) {
      const Counts& counts = counts_[r * n + c];
      std::string text = cell_text(counts);
      buf += text == "-" ? fmt::format("{:<{}}", text, width) : style.paint(fmt::format("{:<{}}", text, width), cell_tone(counts));
    }
    end_row(buf);
  }
  return buf;
}

std::vector<std::string> GroupedGrid::legend(const std::vector<std::string>& labels, size_t width) const {
  std::vector<std::string> out;
  for (size_t g = 0; g < groups(); ++g) {
    std::string where = what_[g].size() == 1 ? what_[g][0] : fmt::format("{} .. {}", what_[g].front(), what_[g].back());
    const auto& members = members_[g];
    std::string text = fmt::format("G{} {} ({} device{}):", g + 1, where, members.size(), members.size() == 1 ? "" : "s");
    // As many of its devices as the line holds.
    for (size_t i = 0; i < members.size(); ++i) {
      const std::string& name = labels[members[i]];
      bool last = i + 1 == members.size();
      if (text_columns(text) + 1 + name.size() + (last ? 0 : 2) > width) {
        text += " …";
        break;
      }
      text += " " + name;
    }
    out.push_back(std::move(text));
  }
  return out;
}

}  // namespace p2paudit
