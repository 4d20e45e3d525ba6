#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "p2paudit/errors.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"

namespace p2paudit::cli {

std::string rules_dir(const GlobalOptions& global) {
  if (!global.rules_dir.empty()) return global.rules_dir;
  if (const char* env = std::getenv("P2PAUDIT_RULES_DIR"); env && *env) return env;
  if (std::filesystem::is_directory(P2PAUDIT_RULES_DIR)) return P2PAUDIT_RULES_DIR;
  return P2PAUDIT_SOURCE_RULES_DIR;
}

void print_error(const std::string& message) { std::cerr << "p2paudit: " << message << "\n"; }

Topology load_topology(const GlobalOptions& global) {
  Sysroot root = Sysroot::open(global.sysroot);
  return read_topology(root);
}

KernelRules load_kernel_rules(const GlobalOptions& global, const Topology& topo) {
  return p2paudit::load_kernel_rules(std::filesystem::path(rules_dir(global)) / "kernel", topo.platform,
                                     {global.kernel, global.kernel_rules, global.assume_whitelisted});
}

size_t resolve_device(const Topology& topo, const GlobalOptions& global, const std::string& spec) {
  if (auto i = resolve_function(topo, spec)) return *i;
  throw InputError(fmt::format("no PCI function '{}' in {} (use DDDD:BB:DD.F, BB:DD.F, or a name such as gpu0 "
                               "or nvme0 from `p2paudit matrix`)", spec, global.sysroot));
}

}  // namespace p2paudit::cli
