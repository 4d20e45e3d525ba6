#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "p2paudit/dump_topology.h"
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

namespace {

DumpAssumptions dump_assumptions(const GlobalOptions& global) {
  DumpAssumptions a;
  if (!global.dump_cpu.empty()) a.cpu = DumpCpu::parse(global.dump_cpu);
  a.iommu = global.dump_iommu;
  a.host_bridges = global.dump_host_bridges;
  a.kernel = global.kernel;
  return a;
}

}  // namespace

Topology load_topology(const GlobalOptions& global) {
  if (global.from_dump()) {
    auto assumptions = dump_assumptions(global);
    Topology t = read_dump_topology(global.lspci_dump, assumptions);
    if (global.dump_notes == GlobalOptions::DumpNotes::kStderr)
      for (const auto& note : dump_assumption_notes(global.lspci_dump, assumptions, t)) print_error("note: " + note);
    return t;
  }
  Sysroot root = Sysroot::open(global.sysroot);
  return read_topology(root);
}

KernelRules load_kernel_rules(const GlobalOptions& global, const Topology& topo) {
  KernelRules rules = p2paudit::load_kernel_rules(std::filesystem::path(rules_dir(global)) / "kernel", topo.platform,
                                                  {global.kernel, global.kernel_rules, global.assume_whitelisted});
  if (global.from_dump()) {
    // The dump's own statement of the unknown kernel replaces the rules' notes about a sysroot
    // without osrelease or kernel config.
    std::erase_if(rules.notes, [](const std::string& note) {
      return note.starts_with("the sysroot does not say which kernel runs") ||
             note.starts_with("the kernel config was not found");
    });
    if (global.dump_notes == GlobalOptions::DumpNotes::kKernelNotes) {
      auto notes = dump_assumption_notes(global.lspci_dump, dump_assumptions(global), topo);
      rules.notes.insert(rules.notes.begin(), notes.begin(), notes.end());
    }
  }
  return rules;
}

size_t resolve_device(const Topology& topo, const GlobalOptions& global, const std::string& spec) {
  if (auto i = resolve_function(topo, spec)) return *i;
  throw InputError(fmt::format("no PCI function '{}' in {} (use DDDD:BB:DD.F, BB:DD.F, or a name such as gpu0 "
                               "or nvme0 from `p2paudit matrix`)", spec, global.source()));
}

}  // namespace p2paudit::cli
