// `p2paudit policy`: the decision for every pair of the devices that matter; `p2paudit check A B`:
// one pair's decision as an exit status for provisioning scripts.
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "p2paudit/errors.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"

namespace p2paudit::cli {

namespace {

struct PolicyArgs {
  std::vector<std::string> rules;   // --rules FILE (repeatable), after the default policy
  bool no_default = false;          // --no-default-rules: only the --rules files
  std::string vendor_facts;         // --vendor-facts FILE
  bool all = false;
  std::vector<std::string> pair;    // check: PROVIDER CLIENT
  std::string require = "peer";     // check: peer | host_staged
  bool no_probe = false;            // --no-probe: do not ask the runtimes on a live machine
};

struct Context {
  Topology topo;
  KernelRules kernel;
  policy::RuleSet rules;
  std::optional<policy::VendorFactsDocument> vendor;  // the runtimes' answers, then --vendor-facts over them
  RuntimeEvidence runtimes;
};

// Rule and facts files are refused unless they are UTF-8, but strings from a stranger's sysroot
// (driver and module names, versions) still reach the facts: a byte that is not UTF-8 becomes
// U+FFFD here rather than an exception halfway through the output.
std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

nlohmann::ordered_json runtimes_json(const RuntimeEvidence& r) {
  return {{"source", r.source}, {"note", r.note}, {"asked", r.asked}};
}

policy::PairDecision decide(const Context& ctx, size_t provider, size_t client) {
  return policy::decide_pair(ctx.topo, ctx.kernel, ctx.rules, ctx.vendor ? &*ctx.vendor : nullptr, provider, client);
}

Context load_context(const GlobalOptions& global, const PolicyArgs& args) {
  std::optional<std::string> stored_probe;
  Context ctx{load_topology(global, &stored_probe), {}, {}, std::nullopt, {}};
  ctx.kernel = load_kernel_rules(global, ctx.topo);
  std::vector<std::string> files = args.no_default ? std::vector<std::string>{} : policy::default_rule_files(rules_dir(global));
  files.insert(files.end(), args.rules.begin(), args.rules.end());
  if (files.empty()) throw InputError("no rule files: --no-default-rules needs at least one --rules FILE");
  ctx.rules = policy::RuleSet::load(files);
  // A stranger's file: only a regular file, bounded, and only the facts vendor tools supply.
  ctx.runtimes = runtime_evidence(global, stored_probe, args.no_probe);
  ctx.vendor = std::move(ctx.runtimes.facts);
  ctx.runtimes.facts.reset();
  if (!args.vendor_facts.empty()) {
    auto file = policy::VendorFactsDocument::load(args.vendor_facts);
    if (ctx.vendor) ctx.vendor->merge(file);
    else ctx.vendor = std::move(file);
  }
  return ctx;
}

void add_rule_options(CLI::App* cmd, PolicyArgs& args) {
  cmd->add_option("--rules", args.rules, "Policy or advisories YAML applied after the default (repeatable)");
  cmd->add_flag("--no-default-rules", args.no_default, "Use only the --rules files");
  cmd->add_option("--vendor-facts", args.vendor_facts, "JSON facts from vendor tools, laid over the runtimes' answers (docs/policy.md)");
  cmd->add_flag("--no-probe", args.no_probe, "Do not ask the runtimes (NVML, CUDA, Level Zero, HIP) on the live machine");
}

int run_policy(const GlobalOptions& global, const PolicyArgs& args) {
  Context ctx = load_context(global, args);
  auto devices = matrix_devices(ctx.topo, args.all);
  std::vector<policy::PairDecision> pairs;
  for (const auto& p : devices)
    for (const auto& c : devices)
      pairs.push_back(decide(ctx, p.index, c.index));
  if (global.format == "env") {
    std::cout << policy::env_exports(ctx.topo, pairs);
  } else if (global.format == "json") {
    nlohmann::ordered_json j;
    j["schema_version"] = policy::kPolicySchemaVersion;
    j["kernel"] = kernel_json(ctx.kernel);
    nlohmann::ordered_json devs = nlohmann::ordered_json::array();
    for (const auto& d : devices) devs.push_back({{"name", d.short_name}, {"bdf", ctx.topo.functions[d.index].bdf.str()}});
    j["devices"] = devs;
    j["runtime_probe"] = runtimes_json(ctx.runtimes);
    j["pairs"] = nlohmann::ordered_json::array();
    for (const auto& p : pairs) j["pairs"].push_back(policy::pair_decision_json(ctx.topo, p));
    std::cout << dump_json(j);
  } else {
    std::cout << policy::policy_table_text(ctx.topo, devices, pairs);
    std::cout << "\nRuntimes: " << ctx.runtimes.note;
    if (!ctx.runtimes.asked.empty()) std::cout << ": " << fmt::format("{}", fmt::join(ctx.runtimes.asked, ", "));
    std::cout << "\n";
  }
  return kExitOk;
}

int run_check(const GlobalOptions& global, const PolicyArgs& args) {
  Context ctx = load_context(global, args);
  size_t provider = resolve_device(ctx.topo, global, args.pair[0]);
  size_t client = resolve_device(ctx.topo, global, args.pair[1]);
  auto d = decide(ctx, provider, client);
  bool ok = args.require == "peer" ? d.decision.action == policy::Action::kPeer
                                   : d.decision.action != policy::Action::kDeny;
  if (global.format == "json") {
    auto j = policy::pair_decision_json(ctx.topo, d);
    j["require"] = args.require;
    j["runtime_probe"] = runtimes_json(ctx.runtimes);
    j["satisfied"] = ok;
    std::cout << dump_json(j);
  } else {
    std::cout << fmt::format("{}: {} -> {}: {} ({})\n", ok ? "yes" : "no", ctx.topo.functions[provider].bdf.str(),
                             ctx.topo.functions[client].bdf.str(), policy::to_string(d.decision.action),
                             d.decision.reason);
  }
  return ok ? kExitOk : kExitNo;
}

}  // namespace

void add_policy_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto args = std::make_shared<PolicyArgs>();
  auto* cmd = app.add_subcommand("policy", "Decide per pair: peer, host-staged or deny, with rules and reasons");
  add_rule_options(cmd, *args);
  cmd->add_flag("--all", args->all, "Every PCI function, not only GPUs, accelerators, NVMe, NICs and FPGAs");
  cmd->callback([&global, status, args] { *status = run_policy(global, *args); });

  auto check = app.add_subcommand("check", "Exit 0 when PROVIDER -> CLIENT meets --require, 1 when not, 2 on error");
  check->add_option("pair", args->pair, "PROVIDER CLIENT (BDFs or names such as gpu0)")->required()->expected(2);
  check->add_option("--require", args->require, "peer (default) or host_staged (anything but deny)")
      ->check(CLI::IsMember({"peer", "host_staged"}));
  add_rule_options(check, *args);
  check->callback([&global, status, args] { *status = run_check(global, *args); });
}

}  // namespace p2paudit::cli
