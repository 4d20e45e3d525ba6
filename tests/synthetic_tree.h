// SPDX-License-Identifier: GPL-2.0-or-later
// Synthetic trees for tests: a Topology built in code the way the reader would build it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "p2paudit/topology.h"

namespace p2paudit::test {

// Builds a Topology the way the reader would: functions added in BDF order, parents by BDF.
class Tree {
 public:
  Tree() {
    t.platform.arch = "x86";
    t.platform.cpu_vendor = "GenuineIntel";
    t.platform.cpu_family = 6;
    t.platform.cpu_model = 0x8f;  // Sapphire Rapids, a server part (a test that needs a client CPU sets its own)
    t.platform.cpu_physical_address_bits = 46;  // /proc/cpuinfo's "address sizes" line of an x86 CPU
    t.platform.config_p2pdma = Known::kYes;
    t.platform.kernel_config_source = "boot/config-test";
  }

  size_t add(const std::string& bdf, const std::string& parent, uint16_t vendor, uint16_t device, PcieType type,
             std::optional<uint16_t> acs_ctrl = std::nullopt, const std::string& host = "pci0000:00") {
    Function f;
    f.bdf = *Bdf::parse(bdf);
    f.vendor = vendor;
    f.device = device;
    f.pcie_type = type;
    f.is_pcie = type != PcieType::kNotPcie;
    f.header_type = (type == PcieType::kRootPort || type == PcieType::kSwitchUpstream ||
                     type == PcieType::kSwitchDownstream) ? 1 : 0;
    f.class_code = f.header_type == 1 ? 0x060400 : 0x010802;
    f.config_size = f.config_readable = 4096;
    f.acs.state = acs_ctrl ? CapState::kPresent : CapState::kAbsent;
    f.acs.ctrl = acs_ctrl.value_or(0);
    f.rebar_state = CapState::kAbsent;  // the whole config space was read, and it has none
    f.host_bridge = host;
    if (!t.functions.empty() && !(t.functions.back().bdf < f.bdf)) ADD_FAILURE() << bdf << " added out of BDF order";
    if (!parent.empty()) f.parent = index(parent);
    size_t i = t.functions.size();
    if (f.parent) t.functions[*f.parent].children.push_back(i);
    t.functions.push_back(f);
    if (f.header_type == 1) windows(i, true);  // a bridge's header holds its windows: the reader has them
    if (!f.parent) bridge(host).root_bus_devices.push_back(i);
    return i;
  }
  size_t rp(const std::string& bdf, std::optional<uint16_t> acs = std::nullopt, const std::string& host = "pci0000:00") {
    return add(bdf, "", 0x8086, 0x7000, PcieType::kRootPort, acs, host);
  }
  size_t ep(const std::string& bdf, const std::string& parent, std::optional<uint16_t> acs = std::nullopt,
            const std::string& host = "pci0000:00") {
    return add(bdf, parent, 0x1b36, 0x0010, PcieType::kEndpoint, acs, host);
  }
  size_t vf(const std::string& bdf, const std::string& pf) {
    size_t i = add(bdf, "", 0x1b36, 0x0011, PcieType::kEndpoint);
    Function& f = t.functions[i];
    f.is_virtfn = true;
    f.physfn = index(pf);
    f.parent = t.functions[*f.physfn].parent;  // sysfs nests a VF beside its PF
    auto& roots = bridge(f.host_bridge).root_bus_devices;
    if (f.parent) roots.erase(std::remove(roots.begin(), roots.end(), i), roots.end());
    t.functions[*f.physfn].virtfns.push_back(i);
    return i;
  }
  // The device the whitelist is keyed by: first on the root bus, at 00.0.
  size_t host_dev(uint16_t vendor, uint16_t device, const std::string& host = "pci0000:00",
                  const std::string& bdf = "00:00.0") {
    return add(bdf, "", vendor, device, PcieType::kNotPcie, std::nullopt, host);
  }
  size_t index(const std::string& bdf) const { return *t.index_of(*Bdf::parse(bdf)); }
  HostBridge& bridge(const std::string& name) {
    for (auto& hb : t.host_bridges)
      if (hb.name == name) return hb;
    HostBridge hb;
    hb.name = name;
    hb.domain = std::stoul(name.substr(3, 4), nullptr, 16);
    hb.bus = static_cast<uint8_t>(std::stoul(name.substr(8, 2), nullptr, 16));
    t.host_bridges.push_back(hb);
    return t.host_bridges.back();
  }
  void amd_zen(int family = 0x19) {
    t.platform.cpu_vendor = "AuthenticAMD";
    t.platform.cpu_family = family;
  }
  // A device as the policy sees it: class, driver and its largest BAR.
  Function& describe(size_t i, uint32_t class_code, const std::string& driver, uint64_t bar_size = 0,
                     uint64_t bar_start = uint64_t{1} << 36) {
    Function& f = t.functions[i];
    f.class_code = class_code;
    f.driver = driver;
    if (bar_size) f.bars.push_back(Bar{2, bar_start, bar_size, false, true, true});
    return f;
  }

  // A bridge's windows as the reader parses them: an enabled 32-bit memory window, and a
  // prefetchable one that is 64-bit and enabled, or (prefetch64 false) not enabled at all.
  void windows(size_t i, bool prefetch64) {
    auto& w = t.functions[i].windows;
    w.clear();
    w.push_back(BridgeWindow{"mem", 0xfc000000, 0xfcffffff, false, true});
    if (prefetch64) w.push_back(BridgeWindow{"prefetch", uint64_t{1} << 36, (uint64_t{1} << 37) - 1, true, true});
    else w.push_back(BridgeWindow{"prefetch", 0xfff00000, 0x000fffff, false, false});
  }

  Topology t;
};

// A random forest: root ports and bridges under several host bridges, endpoints with VFs, ACS
// present with and without redirect bits or unreadable, root-bus first devices away from 00.0.
// The options draw more from the same generator only when on, so a seed's tree without them
// stays the same.
struct RandomForestOptions {
  bool client_host_bridge = false;  // host bridge devices 8086:4c43 too (a client root complex)
  bool gpus_and_nics = false;       // endpoints described as NVIDIA GPUs or mlx5 NICs (default views)
};
inline Topology random_forest(unsigned seed, RandomForestOptions options = {}) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  Tree tree;
  if (pick(3) == 0) tree.t.platform.cpu_vendor = "AuthenticAMD", tree.t.platform.cpu_family = 0x19;
  if (pick(4) == 0) tree.t.platform.cpu_vendor.clear(), tree.t.platform.arch.clear();
  std::vector<std::string> bridges;
  int bus = 0;
  for (int h = 0; h < 1 + pick(3); ++h) {
    std::string host = fmt::format("pci0000:{:02x}", bus);
    int root_bus = bus++;
    bool host_dev_first = pick(3) != 0;
    if (host_dev_first) {
      uint16_t device = !options.client_host_bridge || pick(3) ? (pick(2) ? 0x1450 : 0x29c0) : 0x4c43;
      uint16_t vendor = pick(2) ? 0x8086 : 0x1022;
      tree.host_dev(vendor, device, host, fmt::format("{:02x}:00.0", root_bus));
    }
    for (int r = 0; r < 1 + pick(3); ++r) {
      std::optional<uint16_t> acs;
      if (pick(2)) acs = pick(2) ? (kAcsRr | kAcsCr) : kAcsSv;
      std::string rp = fmt::format("{:02x}:{:02x}.0", root_bus, 1 + r);
      size_t i = tree.rp(rp, acs, host);
      if (pick(4) == 0)
        tree.t.functions[i].acs.state = tree.t.functions[i].rebar_state = CapState::kUnknown,
        tree.t.functions[i].config_readable = 64;
      if (!host_dev_first && r == 0 && pick(2)) {
        tree.t.functions[i].config_readable = 64;
        tree.t.functions[i].rebar_state = CapState::kUnknown;
        tree.t.functions[i].is_pcie = false;
        tree.t.functions[i].pcie_type = PcieType::kUnknown;
      }
      bridges.push_back(rp);
    }
    // Bridges and endpoints below, each under a random earlier bridge of this host.
    size_t first = bridges.size() - 1;
    for (int d = 0; d < 2 + pick(6); ++d) {
      const std::string parent = bridges[first + static_cast<size_t>(pick(static_cast<int>(bridges.size() - first)))];
      std::string bdf = fmt::format("{:02x}:00.0", ++bus);
      if (pick(2)) {
        std::optional<uint16_t> acs;
        if (pick(2)) acs = pick(2) ? kAcsRr : kAcsEc;
        tree.add(bdf, parent, 0x10b5, 0x8747, pick(2) ? PcieType::kSwitchDownstream : PcieType::kSwitchUpstream, acs, host);
        bridges.push_back(bdf);
      } else {
        size_t e = tree.ep(bdf, parent, std::nullopt, host);
        if (options.gpus_and_nics) {
          if (pick(2)) tree.describe(e, 0x030200, "nvidia");
          else tree.describe(e, 0x020000, "mlx5_core");
        }
        if (pick(2)) tree.vf(fmt::format("{:02x}:00.1", bus), bdf);
      }
    }
    bus += 2;
  }
  return tree.t;
}

// What an unprivileged reader gets: 64 bytes of config space, so no ACS and no PCIe type.
inline Topology unprivileged_view(Topology t) {
  for (auto& f : t.functions) {
    f.config_readable = std::min<size_t>(f.config_readable, 64);
    f.acs = Acs{};
    if (f.is_bridge()) f.is_pcie = false, f.pcie_type = PcieType::kUnknown;
  }
  return t;
}

}  // namespace p2paudit::test
