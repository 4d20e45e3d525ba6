// SPDX-License-Identifier: GPL-2.0-or-later
#include <iostream>
#include <memory>

#include "commands.h"
#include "p2paudit/json_output.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/what_if.h"

namespace p2paudit::cli {

namespace {

int run_matrix(const GlobalOptions& global, bool all, bool details) {
  Topology topo = load_topology(global);
  KernelRules rules = load_kernel_rules(global, topo);
  P2pdmaIndex index(topo, rules);
  auto devices = matrix_devices(topo, all);
  if (global.diff) {
    MachineAsRead as_read = load_machine_as_read(global);
    P2pdmaIndex before(as_read.topo, as_read.kernel);
    print_changes(global, topo, kernel_verdict_changes(before, index, devices), as_read.kernel, rules);
    return kExitOk;
  }
  if (global.format == "json") {
    write_matrix_json(std::cout, index, devices, details);
    std::cout << "\n";
  } else {
    // Past one screen of devices the grid is by groups; --all, --details and --verbose keep every device's.
    write_matrix_text(std::cout, index, devices, text_style(global), all || details || global.verbose);
  }
  return kExitOk;
}

}  // namespace

void add_matrix_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto* cmd = app.add_subcommand("matrix", "The kernel's P2PDMA verdict for every pair of devices that matter");
  auto all = std::make_shared<bool>(false);
  auto details = std::make_shared<bool>(false);
  cmd->add_flag("--all", *all, "Every PCI function, not only GPUs, accelerators, FPGAs, NVMe, NICs and InfiniBand");
  cmd->add_flag("--details", *details,
                "JSON: every pair with its reason, kernel log lines, chains and remedy (as `explain` gives them)");
  cmd->callback([&global, status, all, details] { *status = run_matrix(global, *all, *details); });
}

}  // namespace p2paudit::cli
