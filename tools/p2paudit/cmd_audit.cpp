// The default view, `p2paudit` with no command: the annotated tree, then the kernel's matrix of
// the devices that matter. In JSON both documents are fields of one object.
#include <iostream>

#include "commands.h"
#include "p2paudit/json_output.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/topology_report.h"

namespace p2paudit::cli {

int run_audit(const GlobalOptions& global) {
  Topology topo = load_topology(global);
  KernelRules rules = load_kernel_rules(global, topo);
  auto devices = matrix_devices(topo, false);
  auto pairs = matrix_verdicts(topo, rules, devices);
  if (global.format == "json") {
    nlohmann::ordered_json j = {{"schema_version", 1},
                                {"source", {{"sysroot", global.sysroot}}},
                                {"topology", topology_to_json(topo)},
                                {"matrix", matrix_json(topo, rules, devices, pairs)}};
    std::cout << json_text(j) << "\n";
  } else {
    std::cout << topology_tree_text(topo) << "\n" << matrix_text(topo, rules, devices, pairs);
    if (devices.empty()) std::cout << "(no GPUs, accelerators, NVMe, NICs or FPGAs here: `p2paudit matrix --all`)\n";
  }
  return kExitOk;
}

}  // namespace p2paudit::cli
