// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit policy`: the decision for every pair of the devices that matter; `p2paudit check A B`:
// one pair's decision as an exit status for provisioning scripts.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "p2paudit/errors.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/env_exports.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/job_gpus.h"
#include "p2paudit/policy/rule_analysis.h"
#include "p2paudit/policy/what_if.h"

namespace p2paudit::cli {

namespace {

struct PolicyArgs : RuleOptions {
  bool all = false;
  bool details = false;             // policy: every pair's own reasons (and facts in JSON)
  std::vector<std::string> pair;    // check: PROVIDER CLIENT
  std::string require = "peer";     // check: peer | host_staged
  std::string fail_on;              // policy --fail-on host_staged|deny: exit 1 when a pair is that bad
  std::optional<std::string> gpus;  // policy --gpus LIST: the job's GPUs for --format env
};

// The machine, its kernel rules, the policy and the runtimes' answers: read the one way the C
// library reads them too (probe/decision_inputs.h).
using Context = DecisionInputs;

// Rule and facts files are refused unless they are UTF-8, but strings from a stranger's sysroot
// (driver and module names, versions) still reach the facts: a byte that is not UTF-8 becomes
// U+FFFD here rather than an exception halfway through the output.
std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

const policy::VendorFactsDocument* vendor_of(const Context& ctx) { return ctx.vendor_facts(); }

Context load_context(const GlobalOptions& global, const PolicyArgs& args) { return load_decision_inputs(global, args); }

// How bad a decision is, for --fail-on: peer < host_staged < deny.
int badness(policy::Action a) {
  switch (a) {
    case policy::Action::kPeer: return 0;
    case policy::Action::kHostStaged: return 1;
    default: return 2;
  }
}

int exit_status(policy::Answer a) {
  return a == policy::Answer::kYes ? kExitOk : a == policy::Answer::kNo ? kExitNo : kExitUnknown;
}

// policy --fail-on: 1 when a listed pair's decision is at least `fail_on` whatever the unknown facts
// are, else 3 when the unknown facts leave a pair's answer open (Decision::possible), else 0.
int fail_on_status(policy::PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices,
                   const std::string& fail_on) {
  int limit = badness(fail_on == "deny" ? policy::Action::kDeny : policy::Action::kHostStaged);
  auto bad = [&](policy::Action a) { return badness(a) >= limit; };
  bool unknown = false;
  for (size_t r = 0; r < devices.size(); ++r)
    for (size_t c = 0; c < devices.size(); ++c) {
      if (r == c) continue;
      const auto& group = evaluator.groups()[evaluator.decide(devices[r].index, devices[c].index, false)];
      policy::ActionSet possible = group.possible | policy::action_bit(group.action);
      bool all_bad = true, some_bad = false;
      for (policy::Action a : policy::actions_in(possible)) all_bad &= bad(a), some_bad |= bad(a);
      if (all_bad) return kExitNo;
      unknown |= some_bad;
    }
  return unknown ? kExitUnknown : kExitOk;
}

// The job's GPUs for --format env: --gpus, else the runtimes' selection variables of this process.
policy::GpuSelectionInputs job_selection(const PolicyArgs& args) {
  auto variable = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  policy::GpuSelectionInputs in;
  in.gpus = args.gpus;
  in.cuda_visible_devices = variable("CUDA_VISIBLE_DEVICES");
  in.cuda_device_order = variable("CUDA_DEVICE_ORDER");
  in.hip_visible_devices = variable("HIP_VISIBLE_DEVICES");
  in.rocr_visible_devices = variable("ROCR_VISIBLE_DEVICES");
  in.oneapi_device_selector = variable("ONEAPI_DEVICE_SELECTOR");
  in.ze_affinity_mask = variable("ZE_AFFINITY_MASK");
  in.ze_enable_pci_id_device_order = variable("ZE_ENABLE_PCI_ID_DEVICE_ORDER");
  in.ze_flat_device_hierarchy = variable("ZE_FLAT_DEVICE_HIERARCHY");
  return in;
}

int run_policy(const GlobalOptions& global, const PolicyArgs& args) {
  if (args.gpus && global.format != "env")
    throw InputError("policy --gpus: the job's GPUs are for --format env (the shell exports)");
  Context ctx = load_context(global, args);
  auto devices = matrix_devices(ctx.topo, args.all);
  policy::PolicyEvaluator evaluator(ctx.topo, ctx.kernel, ctx.rules, vendor_of(ctx));
  if (global.diff) {
    // The machine as read, with the same rules and runtime answers; only the what-if options dropped.
    MachineAsRead as_read = load_machine_as_read(global);
    policy::PolicyEvaluator before(as_read.topo, as_read.kernel, ctx.rules, vendor_of(ctx));
    print_changes(global, ctx.topo, policy::decision_changes(before, evaluator, devices), as_read.kernel, ctx.kernel);
    return args.fail_on.empty() ? kExitOk : fail_on_status(evaluator, devices, args.fail_on);
  }
  if (global.format == "env") {
    // Selected before the exports are built: a bad selection is exit 2 with nothing printed.
    policy::JobGpus job = policy::select_job_gpus(ctx.topo, job_selection(args));
    std::cout << policy::env_exports(evaluator, devices, job);
  } else if (global.format == "json") {
    nlohmann::ordered_json head = {{"kernel", kernel_json(ctx.kernel)}, {"runtime_probe", runtime_evidence_json(ctx.runtimes)}};
    policy::write_policy_json(std::cout, evaluator, devices, head, args.details, kMostListedPairs);
  } else {
    // Past one screen of devices the grid is by groups; --all keeps every function's.
    policy::write_policy_text(std::cout, evaluator, devices, args.details || global.verbose, text_style(global), !args.all);
    std::cout << "\nRuntimes: " << ctx.runtimes.note;
    if (!ctx.runtimes.asked.empty()) std::cout << ": " << fmt::format("{}", fmt::join(ctx.runtimes.asked, ", "));
    std::cout << "\n";
  }
  return args.fail_on.empty() ? kExitOk : fail_on_status(evaluator, devices, args.fail_on);
}

int run_check(const GlobalOptions& global, const PolicyArgs& args) {
  Context ctx = load_context(global, args);
  size_t provider = resolve_device(ctx.topo, global, args.pair[0]);
  size_t client = resolve_device(ctx.topo, global, args.pair[1]);
  policy::PolicyEvaluator evaluator(ctx.topo, ctx.kernel, ctx.rules, vendor_of(ctx));
  const bool require_peer = args.require == "peer";
  CheckAnswer checked = check_pair(evaluator, provider, client, require_peer);
  const policy::PairDecision& d = checked.pair;
  policy::Answer answer = checked.answer;
  std::optional<PairChange> what_if;  // --diff: this pair in the machine as read -> under the options
  std::vector<std::string> assumed;
  if (global.diff) {
    MachineAsRead as_read = load_machine_as_read(global);
    auto same = [&](size_t i) {  // the same function, read once more
      if (auto j = as_read.topo.index_of(ctx.topo.functions[i].bdf)) return *j;
      throw InputError(fmt::format("{} changed while it was read", global.source()));
    };
    auto before = policy::PolicyEvaluator(as_read.topo, as_read.kernel, ctx.rules, vendor_of(ctx))
                      .decide_in_full(same(provider), same(client));
    what_if = policy::decision_change(as_read.topo, as_read.kernel, before, ctx.topo, ctx.kernel, d);
    assumed = notes_added(as_read.kernel, ctx.kernel);
  }
  if (global.format == "json") {
    // docs/json.md: the pair's whole decision as `policy --details` gives it, and the answer.
    nlohmann::ordered_json j = check_json(ctx, checked, require_peer);
    if (what_if) j["what_if"] = {{"changed", what_if->before != what_if->after},
                                 {"change", change_json(ctx.topo, *what_if)}, {"notes", assumed}};
    std::cout << dump_json(j);
  } else {
    std::cout << fmt::format("{}: {} -> {}: {} ({})\n", policy::to_string(answer), ctx.topo.functions[provider].bdf.str(),
                             ctx.topo.functions[client].bdf.str(), policy::to_string(d.decision.action),
                             d.decision.reason);
    // The pair's other problems, whatever rule decided: each would stage or refuse on its own and
    // has its own fix (one whose fix was already given is the same problem told twice).
    std::vector<std::string> fixes = {d.decision.remedy};
    for (const auto& f : d.decision.findings) {
      if (!f.remedy.empty() && std::find(fixes.begin(), fixes.end(), f.remedy) != fixes.end()) continue;
      std::cout << fmt::format("also [{}]: {}\n", f.id, f.reason);
      if (!f.remedy.empty()) std::cout << fmt::format("  fix: {}\n", f.remedy);
      fixes.push_back(f.remedy);
    }
    if (!d.decision.certain()) {
      std::cout << fmt::format("uncertain: {}\n", policy::also_possible_text(d.decision));
      if (answer == policy::Answer::kUnknown)
        std::cout << fmt::format("unknown: the answer to --require {} depends on facts not known here: {}\n", args.require,
                                 policy::settle_text(d.decision));
      else
        std::cout << fmt::format("settled by: {}\n", policy::settle_text(d.decision));
    }
    if (what_if) {
      std::cout << (what_if->before != what_if->after ? "what-if: " + change_line(ctx.topo, *what_if)
                                                      : "what-if: unchanged against the machine as read")
                << "\n";
      for (const auto& note : assumed) std::cout << "Note: " << note << "\n";
    }
  }
  return exit_status(answer);
}

}  // namespace

void add_policy_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto args = std::make_shared<PolicyArgs>();
  auto* cmd = app.add_subcommand("policy", "Decide per pair: peer, host-staged or deny, with rules and reasons");
  add_rule_options(cmd, *args);
  cmd->add_flag("--all", args->all, "Every PCI function, not only GPUs, accelerators, FPGAs, NVMe, NICs and InfiniBand");
  cmd->add_flag("--details", args->details,
                "Every pair's own reasons, remedies and warnings (and facts in JSON), not once per decision group");
  cmd->add_option("--fail-on", args->fail_on,
                  "Exit 1 when a listed pair's decision is this or worse (deny is worse than host_staged), 3 when none is "
                  "but unknown facts could make one so")
      ->check(CLI::IsMember({"host_staged", "deny"}));
  cmd->add_option("--gpus", args->gpus,
                  "--format env: the job's GPUs (BDFs or names such as gpu0, comma-separated), instead of "
                  "CUDA_VISIBLE_DEVICES and the other runtimes' selection variables");
  cmd->callback([&global, status, args] { *status = run_policy(global, *args); });

  auto check = app.add_subcommand("check", "Exit 0 when PROVIDER -> CLIENT meets --require, 1 when not, 3 when unknown facts decide, 2 on error");
  check->add_option("pair", args->pair, "PROVIDER CLIENT (BDFs or names such as gpu0)")->required()->expected(2);
  check->add_option("--require", args->require, "peer (default) or host_staged (anything but deny)")
      ->check(CLI::IsMember({"peer", "host_staged"}));
  add_rule_options(check, *args);
  check->callback([&global, status, args] { *status = run_check(global, *args); });
}

}  // namespace p2paudit::cli
