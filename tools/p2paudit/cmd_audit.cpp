// SPDX-License-Identifier: GPL-2.0-or-later
// The default view, `p2paudit` with no command: the annotated tree, then the kernel's matrix of
// the devices that matter. In JSON both documents are fields of one object.
#include <ctime>
#include <iostream>

#include "commands.h"
#include "p2paudit/fleet/prometheus.h"
#include "p2paudit/json_output.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/picture.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/topology_report.h"

namespace p2paudit::cli {

namespace {

// --format prom (docs/prometheus.md): the machine's report as node_exporter textfile gauges.
int print_prometheus(const GlobalOptions& global) {
  AnalysedMachine machine = load_analysed_machine(global, false);
  std::cout << fleet::prometheus_text(machine.analysis(),
                                      {P2PAUDIT_VERSION, static_cast<std::int64_t>(std::time(nullptr))});
  return kExitOk;
}

// --format dot|html (docs/pictures.md): the tree with every pair's verdict and decision, by the
// default policy without asking the runtimes, and the whitelist candidates.
int draw_picture(const GlobalOptions& global) {
  Topology topo = load_topology(global);
  KernelRules kernel = load_kernel_rules(global, topo);
  policy::RuleSet rules = policy::RuleSet::load(policy::default_rule_files(rules_dir(global)));
  policy::PolicyEvaluator evaluator(topo, kernel, rules, nullptr);
  picture::Pairs pairs{&evaluator, matrix_devices(topo, false), fleet::whitelist_candidates(topo, kernel, nullptr)};
  if (global.format == "dot") picture::write_dot(std::cout, topo, &pairs, global.source());
  else picture::write_html(std::cout, topo, &pairs, global.source());
  return kExitOk;
}

}  // namespace

int run_audit(const GlobalOptions& global) {
  if (global.format == "prom") return print_prometheus(global);
  if (global.format == "dot" || global.format == "html") return draw_picture(global);
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
    write_matrix_text(std::cout, index, devices, text_style(global));
  }
  return kExitOk;
}

}  // namespace p2paudit::cli
