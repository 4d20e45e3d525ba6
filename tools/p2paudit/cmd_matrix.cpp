#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"

namespace p2paudit::cli {

namespace {

int run_matrix(const GlobalOptions& global, bool all) {
  Topology topo = load_topology(global);
  KernelRules rules = load_kernel_rules(std::filesystem::path(rules_dir(global)) / "kernel", topo.platform,
                                        {global.kernel, global.kernel_rules, global.assume_whitelisted});
  auto devices = matrix_devices(topo, all);
  std::vector<PairVerdict> pairs;
  pairs.reserve(devices.size() * devices.size());
  for (const auto& provider : devices)
    for (const auto& client : devices)
      pairs.push_back(pci_p2pdma_distance(topo, rules, provider.index, client.index));
  if (global.format == "json")
    std::cout << matrix_json(topo, rules, devices, pairs).dump(2) << "\n";
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
