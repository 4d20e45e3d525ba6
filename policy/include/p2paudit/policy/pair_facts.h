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

}  // namespace p2paudit::policy
