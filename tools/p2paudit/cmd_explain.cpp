// SPDX-License-Identifier: GPL-2.0-or-later
#include <iostream>
#include <memory>

#include <fmt/format.h>


#include "commands.h"
#include "p2paudit/json_output.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"

namespace p2paudit::cli {

namespace {

int run_explain(const GlobalOptions& global, const std::string& provider_spec,
                const std::vector<std::string>& client_specs) {
  Topology topo = load_topology(global);
  size_t provider = resolve_device(topo, global, provider_spec);
  std::vector<size_t> clients;
  for (const auto& spec : client_specs) clients.push_back(resolve_device(topo, global, spec));
  KernelRules rules = load_kernel_rules(global, topo);
  ManyVerdict many = pci_p2pdma_distance_many(topo, rules, provider, clients);
  if (global.format == "json") {
    std::cout << json_text(explain_json(topo, rules, many)) << "\n";
    return kExitOk;
  }
  std::cout << explain_text(topo, rules, many);
  // What else keeps the pair from peer DMA, whatever the kernel says: the platform's problems the
  // default policy finds (a BAR without room or beyond the CPU's addresses), decided or found,
  // each with its fix. They read no runtime answer, so `check` tells the same.
  policy::RuleSet policy_rules = policy::RuleSet::load(policy::default_rule_files(rules_dir(global)));
  policy::PolicyEvaluator evaluator(topo, rules, policy_rules, nullptr);
  std::string problems;
  for (size_t client : clients) {
    policy::Decision d = evaluator.decide_in_full(provider, client).decision;
    std::vector<policy::FiredRule> told;
    if (d.authority == policy::Authority::kPlatform && d.action != policy::Action::kPeer)
      told.push_back({d.rule, d.action, d.reason, d.remedy, d.authority, ""});
    for (const auto& f : d.findings)
      if (f.authority == policy::Authority::kPlatform) told.push_back(f);
    for (const auto& f : told) {
      problems += fmt::format("  {} -> {} [{}]: {}\n", topo.functions[provider].bdf.str(), topo.functions[client].bdf.str(),
                              f.id, f.reason);
      if (!f.remedy.empty()) problems += fmt::format("    fix: {}\n", f.remedy);
    }
  }
  if (!problems.empty())
    std::cout << "\nBesides the kernel's verdict, the platform keeps peers out (`p2paudit check` decides the pair):\n"
              << problems;
  return kExitOk;
}

}  // namespace

void add_explain_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto* cmd = app.add_subcommand("explain", "Why the kernel allows or refuses P2PDMA from PROVIDER to CLIENT(s)");
  auto provider = std::make_shared<std::string>();
  auto clients = std::make_shared<std::vector<std::string>>();
  cmd->add_option("PROVIDER", *provider, "Provider: DDDD:BB:DD.F, BB:DD.F or a short name (gpu0, nvme0, ...)")
      ->required();
  cmd->add_option("CLIENT", *clients, "Client(s); with several, what pci_p2pdma_distance_many() returns")
      ->required();
  cmd->callback([&global, status, provider, clients] { *status = run_explain(global, *provider, *clients); });
}

}  // namespace p2paudit::cli
