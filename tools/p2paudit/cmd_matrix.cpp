#include <iostream>
#include <memory>

#include "commands.h"
#include "p2paudit/json_output.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"

namespace p2paudit::cli {

namespace {

int run_matrix(const GlobalOptions& global, bool all) {
  Topology topo = load_topology(global);
  KernelRules rules = load_kernel_rules(global, topo);
  auto devices = matrix_devices(topo, all);
  auto pairs = matrix_verdicts(topo, rules, devices);
  if (global.diff) {
    MachineAsRead as_read = load_machine_as_read(global);
    auto before = matrix_verdicts(as_read.topo, as_read.kernel, matrix_devices(as_read.topo, all));
    print_changes(global, topo, kernel_verdict_changes(as_read.topo, as_read.kernel, before, topo, rules, pairs),
                  as_read.kernel, rules);
    return kExitOk;
  }
  if (global.format == "json")
    std::cout << json_text(matrix_json(topo, rules, devices, pairs)) << "\n";
  else
    std::cout << matrix_text(topo, rules, devices, pairs);
  return kExitOk;
}

}  // namespace

void add_matrix_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto* cmd = app.add_subcommand("matrix", "The kernel's P2PDMA verdict for every pair of devices that matter");
  auto all = std::make_shared<bool>(false);
  cmd->add_flag("--all", *all, "Every PCI function, not only GPUs, accelerators, NVMe, NICs and InfiniBand");
  cmd->callback([&global, status, all] { *status = run_matrix(global, *all); });
}

}  // namespace p2paudit::cli
