// SPDX-License-Identifier: GPL-2.0-or-later
#include <iostream>

#include "commands.h"
#include "p2paudit/json_output.h"
#include "p2paudit/picture.h"
#include "p2paudit/topology_report.h"

namespace p2paudit::cli {

namespace {

int run_topology(const GlobalOptions& global) {
  Topology t = load_topology(global);
  if (global.format == "dot") {
    picture::write_dot(std::cout, t, nullptr, global.source());
  } else if (global.format == "html") {
    picture::write_html(std::cout, t, nullptr, global.source());
  } else if (global.format == "json") {
    auto j = topology_to_json(t);
    j["source"] = source_json(global);
    std::cout << json_text(j) << "\n";
  } else {
    std::cout << topology_tree_text(t);
  }
  return kExitOk;
}

}  // namespace

void add_topology_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto* cmd = app.add_subcommand("topology", "Show the PCIe tree, annotated for peer-to-peer DMA");
  cmd->callback([&global, status] { *status = run_topology(global); });
}

}  // namespace p2paudit::cli
