// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/topology.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "p2paudit/config_space.h"

namespace p2paudit {

// "DDDD:BB:DD.F" as fmt's "{:04x}:{:02x}:{:02x}.{:x}" writes it, without its format parser: every
// sysfs path of a function and every label starts here (about a thousand instructions a call).
std::string Bdf::str() const {
  static constexpr char kHex[] = "0123456789abcdef";
  char buf[8 + 1 + 2 + 1 + 2 + 1 + 2];
  char* end = buf + sizeof buf;
  char* p = end;
  auto put = [&](uint32_t v, int min_digits) {
    for (int n = 0; n < min_digits || v; ++n, v >>= 4) *--p = kHex[v & 0xf];
  };
  put(fn, 1);
  *--p = '.';
  put(dev, 2);
  *--p = ':';
  put(bus, 2);
  *--p = ':';
  put(domain, 4);
  return std::string(p, end);
}

namespace {
std::optional<unsigned> parse_hex(std::string_view s, unsigned max) {
  if (s.empty() || s.size() > 8) return std::nullopt;
  unsigned v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || end != s.data() + s.size() || v > max) return std::nullopt;
  return v;
}
}  // namespace

std::optional<Bdf> Bdf::parse(std::string_view text) {
  std::string_view domain_part = "0";
  auto dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string_view head = text.substr(0, dot);
  auto last_colon = head.rfind(':');
  if (last_colon == std::string_view::npos) return std::nullopt;
  std::string_view dev_part = head.substr(last_colon + 1);
  std::string_view rest = head.substr(0, last_colon);
  std::string_view bus_part = rest;
  if (auto c = rest.rfind(':'); c != std::string_view::npos) {
    domain_part = rest.substr(0, c);
    bus_part = rest.substr(c + 1);
  }
  auto domain = parse_hex(domain_part, 0xffffffff);
  auto bus = parse_hex(bus_part, 0xff);
  auto dev = parse_hex(dev_part, 0x1f);
  auto fn = parse_hex(text.substr(dot + 1), 0x7);
  if (!domain || !bus || !dev || !fn) return std::nullopt;
  return Bdf{*domain, static_cast<uint8_t>(*bus), static_cast<uint8_t>(*dev), static_cast<uint8_t>(*fn)};
}

const char* to_string(Known k) {
  switch (k) {
    case Known::kNo: return "no";
    case Known::kYes: return "yes";
    case Known::kUnknown: return "unknown";
  }
  return "unknown";
}

const char* to_string(CapState s) {
  switch (s) {
    case CapState::kAbsent: return "absent";
    case CapState::kPresent: return "present";
    case CapState::kUnknown: return "unknown";
  }
  return "unknown";
}

const char* to_string(PcieType t) {
  switch (t) {
    case PcieType::kUnknown: return "unknown";
    case PcieType::kNotPcie: return "PCI";
    case PcieType::kEndpoint: return "Endpoint";
    case PcieType::kLegacyEndpoint: return "Legacy Endpoint";
    case PcieType::kRootPort: return "Root Port";
    case PcieType::kSwitchUpstream: return "Upstream Port";
    case PcieType::kSwitchDownstream: return "Downstream Port";
    case PcieType::kPcieToPciBridge: return "PCIe-PCI Bridge";
    case PcieType::kPciToPcieBridge: return "PCI-PCIe Bridge";
    case PcieType::kRcIntegratedEndpoint: return "RC Integrated Endpoint";
    case PcieType::kRcEventCollector: return "RC Event Collector";
    case PcieType::kOther: return "Other";
  }
  return "Other";
}

const std::string& Function::log_name() const {
  static const std::string kBus = "pci";
  return driver.empty() ? kBus : driver;
}

std::optional<size_t> Topology::index_of(const Bdf& bdf) const {
  auto it = std::lower_bound(functions.begin(), functions.end(), bdf,
                             [](const Function& f, const Bdf& b) { return f.bdf < b; });
  if (it == functions.end() || it->bdf != bdf) return std::nullopt;
  return static_cast<size_t>(it - functions.begin());
}

const Function* Topology::find(const Bdf& bdf) const {
  auto i = index_of(bdf);
  return i ? &functions[*i] : nullptr;
}

const HostBridge* Topology::host_bridge_of(const Function& f) const {
  for (const auto& hb : host_bridges)
    if (hb.name == f.host_bridge) return &hb;
  return nullptr;
}

std::string pci_device_name(const Topology& t, const Function& f) {
  return t.pci_names_deferred ? pci_ids_device_name(f.vendor, f.device) : f.device_name;
}

}  // namespace p2paudit
