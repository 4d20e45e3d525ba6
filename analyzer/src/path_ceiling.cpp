// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/path_ceiling.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace p2paudit {

std::optional<double> link_speed_gts(const std::string& speed) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(speed.c_str(), &end);
  if (end == speed.c_str() || errno == ERANGE || !(v > 0)) return std::nullopt;
  return v;
}

namespace {

// Functions without a link of their own: the root complex's integrated endpoints and event
// collectors sit on the root complex's internal bus.
bool has_no_link(const Function& f) {
  return f.pcie_type == PcieType::kRcIntegratedEndpoint || f.pcie_type == PcieType::kRcEventCollector;
}

struct Narrowest {
  std::optional<double> gbps;
  std::string path, missing;
};

// Lays f's link over the narrowest so far; a link that is not known makes the whole ceiling unknown.
void visit(const Topology& topo, const Function& f, Narrowest& n) {
  if (!n.missing.empty()) return;
  // A virtual function has no link: its traffic crosses its physical function's.
  const Function& owner = f.is_virtfn && f.physfn && *f.physfn < topo.functions.size() ? topo.functions[*f.physfn] : f;
  if (has_no_link(owner)) return;
  const std::string at = owner.bdf.str();
  if (!owner.is_pcie && owner.pcie_type == PcieType::kNotPcie) {
    n.missing = fmt::format("the bus speed of {}: it is conventional PCI, whose rate p2paudit does not read", at);
    return;
  }
  auto gts = link_speed_gts(owner.link.current_speed);
  if (!gts) {
    n.missing = fmt::format("the current link speed of {} (sysfs current_link_speed: {})", at,
                            owner.link.current_speed.empty() ? "not exposed" : owner.link.current_speed);
    return;
  }
  if (owner.link.current_width <= 0) {
    n.missing = fmt::format("the current link width of {} (sysfs current_link_width not exposed)", at);
    return;
  }
  auto lane = pcie_lane_gbps(*gts);
  if (!lane) {
    n.missing = fmt::format("the payload rate of a {} GT/s PCIe lane at {} (not a PCIe generation p2paudit knows)", *gts, at);
    return;
  }
  const double gbps = *lane * owner.link.current_width;
  if (!n.gbps || gbps < *n.gbps) {
    n.gbps = gbps;
    n.path = fmt::format("PCIe {} GT/s x{} at {}", *gts, owner.link.current_width, at);
  }
}

// Every ancestor of `start`, itself first (bounded: a malformed tree may loop).
std::vector<size_t> chain(const Topology& topo, size_t start) {
  std::vector<size_t> out;
  for (std::optional<size_t> at = start; at && *at < topo.functions.size() && out.size() <= topo.functions.size();
       at = topo.functions[*at].parent)
    out.push_back(*at);
  return out;
}

}  // namespace

// Per lane and direction after encoding: 8b/10b for 2.5 and 5 GT/s, 128b/130b for 8 to 32 GT/s,
// FLIT mode (PAM4 with FEC) for 64 GT/s. PCI-SIG, PCI Express Base Specification 6.0;
// table "PCI Express link performance" of https://en.wikipedia.org/wiki/PCI_Express#Comparison_table
std::optional<double> pcie_lane_gbps(double gts) {
  static constexpr struct {
    double gts, gbps;
  } kRates[] = {{2.5, 0.25}, {5.0, 0.5}, {8.0, 0.985}, {16.0, 1.969}, {32.0, 3.938}, {64.0, 7.563}};
  for (const auto& r : kRates)
    if (std::fabs(gts - r.gts) < 0.01) return r.gbps;
  return std::nullopt;
}

std::optional<double> ceiling_ratio(double measured_gbps, std::optional<double> ceiling_gbps) {
  if (!ceiling_gbps || !(*ceiling_gbps > 0)) return std::nullopt;
  return std::round(measured_gbps / *ceiling_gbps * 1000) / 1000;
}

PathCeiling pcie_path_ceiling(const Topology& topo, size_t a, size_t b) {
  if (a == b || a >= topo.functions.size() || b >= topo.functions.size()) return {};
  const std::vector<size_t> up_a = chain(topo, a), up_b = chain(topo, b);
  // The nearest function both chains hold: the bridge that turns the traffic around.
  std::optional<size_t> common;
  for (size_t f : up_a)
    if (std::find(up_b.begin(), up_b.end(), f) != up_b.end()) {
      common = f;
      break;
    }
  Narrowest n;
  for (const auto* up : {&up_a, &up_b})
    for (size_t f : *up) {
      if (f == common) break;
      visit(topo, topo.functions[f], n);
    }
  if (!n.missing.empty()) return {std::nullopt, "", n.missing};
  if (!n.gbps) return {std::nullopt, "", "a PCIe link on the path: neither function nor a bridge above it has one"};
  return {n.gbps, n.path, ""};
}

PathCeiling nvlink_path_ceiling(const NvlinkEnd& a, const NvlinkEnd& b, const std::set<Bdf>& gpus) {
  for (const NvlinkEnd* end : {&a, &b}) {
    if (!end->links_read) return {std::nullopt, "", fmt::format("the NVLinks of {} (NVML did not list them)", end->gpu.str())};
    if (!end->link_gbps)
      return {std::nullopt, "", fmt::format("the per-link NVLink rate of {}: {}", end->gpu.str(), end->rate_source)};
  }
  // Direct links, from each side (NVML lists each GPU's own); links to something that is not one of
  // the machine's GPUs lead to an NVSwitch (or a switch a VM does not show: "FFFFFFFF:FF:FF.0").
  struct Count {
    int direct = 0, switched = 0, unnamed = 0;
  };
  auto count = [&](const NvlinkEnd& self, const NvlinkEnd& peer) {
    Count c;
    for (const auto& remote : self.active_remotes) {
      if (remote.empty()) {
        ++c.unnamed;
        continue;
      }
      auto bdf = Bdf::parse(remote);
      if (bdf && *bdf == peer.gpu) ++c.direct;
      else if (!bdf || !gpus.contains(*bdf)) ++c.switched;
    }
    return c;
  };
  const Count ca = count(a, b), cb = count(b, a);
  for (const auto& [end, c] : {std::pair{&a, ca}, std::pair{&b, cb}})
    if (c.unnamed)
      return {std::nullopt, "",
              fmt::format("where {} of {}'s active NVLinks lead (NVML gave no remote address)", c.unnamed, end->gpu.str())};
  const double rate = std::min(*a.link_gbps, *b.link_gbps);
  const int direct = std::max(ca.direct, cb.direct);
  if (direct > 0)
    return {direct * rate, fmt::format("NVLink: {} active links between them x {} GB/s", direct, rate), ""};
  const int switched = std::min(ca.switched, cb.switched);
  if (switched > 0)
    return {switched * rate,
            fmt::format("NVLink through NVSwitch: {} active links on {}, {} on {}, x {} GB/s", ca.switched, a.gpu.str(),
                        cb.switched, b.gpu.str(), rate),
            ""};
  return {std::nullopt, "", fmt::format("an active NVLink path between {} and {} (NVML listed none)", a.gpu.str(), b.gpu.str())};
}

}  // namespace p2paudit
