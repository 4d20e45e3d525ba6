// SPDX-License-Identifier: GPL-2.0-or-later
// What decoding one function's config space gave, as one text: the whole read and the read in
// pieces (read_config_pieces()) must give the same (config_pieces_test, fuzz_config_space).
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "p2paudit/topology.h"

namespace p2paudit::test {

inline std::string decoded_fields(const Function& f, const std::vector<Finding>& findings) {
  std::string out = fmt::format("{} {:04x}:{:04x} class {:06x} rev {} sub {:04x}:{:04x} header {} mf {} readable {} "
                                "pcie {} type {} pcix2 {}\n",
                                f.bdf.str(), f.vendor, f.device, f.class_code, f.revision, f.subsystem_vendor,
                                f.subsystem_device, f.header_type, f.multifunction, f.config_readable, f.is_pcie,
                                static_cast<int>(f.pcie_type), f.pcix_mode2);
  out += fmt::format("acs {} at {:#x} cap {:#x} ctrl {:#x} egress {}; ari {}; rebar {}", static_cast<int>(f.acs.state),
                     f.acs.offset, f.acs.cap, f.acs.ctrl,
                     f.acs.egress_first_word ? fmt::format("{:#x}", *f.acs.egress_first_word) : "-",
                     static_cast<int>(f.ari), static_cast<int>(f.rebar_state));
  for (const auto& r : f.rebar) out += fmt::format(" [{} {} {}]", r.bar, r.current_size, r.supported_sizes.size());
  if (f.sriov) out += fmt::format("; sriov {} {} {:04x}", f.sriov->total_vfs, f.sriov->num_vfs, f.sriov->vf_device);
  if (f.serial_number) out += fmt::format("; dsn {:#x}", *f.serial_number);
  out += fmt::format("; clique {} {}\nlink {} x{} / {} x{}\n", static_cast<int>(f.nvidia_clique_state), f.nvidia_clique,
                     f.link.current_speed, f.link.current_width, f.link.max_speed, f.link.max_width);
  for (const auto& b : f.bars)
    out += fmt::format("bar {} {:#x} {} io {} 64 {} pf {}\n", b.index, b.start, b.size, b.io, b.is_64bit, b.prefetchable);
  for (const auto& w : f.windows) out += fmt::format("window {} {:#x}-{:#x} {} {}\n", w.kind, w.base, w.limit, w.is_64bit, w.enabled);
  if (f.secondary_bus) out += fmt::format("buses {} {}\n", *f.secondary_bus, f.subordinate_bus.value_or(0));
  for (const auto& finding : findings) out += "finding: " + finding.message + "\n";
  return out;
}

}  // namespace p2paudit::test
