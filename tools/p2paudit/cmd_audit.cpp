// The default view, `p2paudit` with no command: the annotated tree, then the kernel's matrix of
// the devices that matter. In JSON both documents are fields of one object.
#include <iostream>

#include "commands.h"
#include "p2paudit/json_output.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/topology_report.h"

namespace p2paudit::cli {

int run_audit(const GlobalOptions& global) {
  Topology topo = load_topology(global);
  KernelRules rules = load_kernel_rules(global, topo);
  P2pdmaIndex index(topo, rules);
  auto devices = matrix_devices(topo, false);
  if (global.format == "json") {
    std::string head = json_text(nlohmann::ordered_json{{"schema_version", 1},
                                                        {"source", {{"sysroot", global.sysroot}}},
                                                        {"topology", topology_to_json(topo)}});
    head.resize(head.size() - 2);  // "\n}": the matrix follows, streamed
    std::cout << head << ",\n  \"matrix\": ";
    write_matrix_json(std::cout, index, devices, false, 2);
    std::cout << "\n}\n";
  } else {
    std::cout << topology_tree_text(topo) << "\n";
    write_matrix_text(std::cout, index, devices);
    if (devices.empty()) std::cout << "(no GPUs, accelerators, NVMe, NICs or FPGAs here: `p2paudit matrix --all`)\n";
  }
  return kExitOk;
}

}  // namespace p2paudit::cli
