// The default view, `p2paudit` with no command: the annotated tree, then the kernel's matrix of
// the devices that matter. In JSON both documents are fields of one object.
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/topology_report.h"

namespace p2paudit::cli {

int run_audit(const GlobalOptions& global) {
  Topology topo = load_topology(global);
  KernelRules rules = load_kernel_rules(std::filesystem::path(rules_dir(global)) / "kernel", topo.platform,
                                        {global.kernel, global.kernel_rules, global.assume_whitelisted});
  auto devices = matrix_devices(topo, false);
  std::vector<PairVerdict> pairs;
  for (const auto& provider : devices)
    for (const auto& client : devices) pairs.push_back(pci_p2pdma_distance(topo, rules, provider.index, client.index));
  if (global.format == "json") {
    nlohmann::ordered_json j = {{"schema_version", 1},
                                {"source", {{"sysroot", global.sysroot}}},
                                {"topology", topology_to_json(topo)},
                                {"matrix", matrix_json(topo, rules, devices, pairs)}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << topology_tree_text(topo) << "\n" << matrix_text(topo, rules, devices, pairs);
    if (devices.empty()) std::cout << "(no GPUs, accelerators, NVMe, NICs or FPGAs here: `p2paudit matrix --all`)\n";
  }
  return kExitOk;
}

}  // namespace p2paudit::cli
