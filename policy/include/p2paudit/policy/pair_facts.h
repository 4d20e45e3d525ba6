// From analysis to facts: what the analyzer read and the kernel's verdict become the catalogued
// facts (facts.h) of one (provider, client) pair. Facts the sysroot cannot tell (vendor fabric
// links, runtime versions) stay unknown unless a vendor facts file supplies them.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/topology.h"

namespace p2paudit::policy {

// "gpu", "accelerator", "nvme", "nic", "fpga", "storage", "bridge" or "other".
std::string device_class(const Function& f);

FactSet pair_facts(const Topology& topo, const KernelRules& rules, const PairVerdict& verdict);

// Facts from outside the sysroot (a vendor probe's output, or written by hand):
//   {"schema_version": 1,
//    "all": {"runtime.compute_runtime_version": "26.09.1", ...},
//    "pairs": [{"provider": "0000:00:06.0", "client": "0000:00:07.0", "facts": {"vendor.nvlink": true}}]}
// A pair's facts apply to that ordered pair; add "symmetric": true to apply them both ways.
class VendorFacts {
 public:
  static VendorFacts load(const std::string& path);  // throws InputError naming the file and fact
  // Copies the facts for (provider, client) over `facts`.
  void apply(const Bdf& provider, const Bdf& client, FactSet& facts) const;

 private:
  FactSet all_;
  std::map<std::pair<Bdf, Bdf>, FactSet> pairs_;
};

}  // namespace p2paudit::policy
