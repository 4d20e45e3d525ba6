// SPDX-License-Identifier: GPL-2.0-or-later
// Deterministic synthetic machines: a PCIe tree of any size written as a sysroot directory or
// .tar.gz that both the analyzer and pciutils' `lspci -A linux-sysfs` read like a real capture.
// The same options always give byte-identical output (docs/performance.md: the shape rules).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace p2paudit::synth {

enum class AcsMode { kOn, kOff, kMixed };
enum class CpuVendor { kAmd, kIntel };

// A request no tree can meet (too few functions for the shape, too many buses...); the message
// is for the user.
class ShapeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every field left unset is chosen: by the --functions rule when `functions` is set, by the
// defaults in docs/performance.md otherwise.
struct Options {
  std::optional<int> functions;           // exact total number of PCI functions, VFs included
  std::optional<int> host_bridges;
  std::optional<int> root_ports;          // per host bridge
  std::optional<int> depth;               // switch levels below each root port
  std::optional<int> fanout;              // downstream ports per switch
  std::optional<int> endpoints_per_port;  // endpoint devices on each leaf port's bus
  std::optional<int> multifunction;       // functions per endpoint device
  std::optional<int> vfs;                 // VFs of each SR-IOV-capable PF (the NICs)
  AcsMode acs = AcsMode::kOn;
  uint64_t seed = 1;
  std::string kernel = "6.12.0";
  CpuVendor cpu = CpuVendor::kAmd;
  std::string hostname = "synth";
};

struct Shape {
  int host_bridges = 0, root_ports = 0, depth = 0, fanout = 0, endpoints_per_port = 0, multifunction = 0, vfs = 0;
  int platform_functions = 0;  // root-bus functions besides each host bridge's 00.0 (USB, SATA, misc...)
};

struct Counts {
  int functions = 0, host_bridges = 0, root_ports = 0, switch_upstream = 0, switch_downstream = 0;
  int endpoints = 0;  // endpoint functions that are not VFs
  int vfs = 0, platform = 0;
  int p2p_relevant = 0;  // GPUs, NVMe, NICs (VFs included) and accelerators
};

class Machine {
 public:
  // Throws ShapeError when the options cannot be met.
  static Machine plan(const Options& options);
  ~Machine();
  Machine(Machine&&) noexcept;
  Machine& operator=(Machine&&) noexcept;

  const Shape& shape() const;
  const Counts& counts() const;
  // `dir` must exist and be empty; throws std::runtime_error naming the path on a write error.
  void write_directory(const std::string& dir) const;
  void write_tarball(const std::string& file) const;  // gzip, pax_restricted, fixed times

  struct Plan;

 private:
  explicit Machine(std::unique_ptr<Plan> plan);
  std::unique_ptr<Plan> plan_;
};

}  // namespace p2paudit::synth
