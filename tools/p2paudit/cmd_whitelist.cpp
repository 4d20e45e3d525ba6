// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit whitelist`: the host bridges whose absence from the kernel's P2PDMA whitelist refuses
// peer DMA on this machine, with the pairs an entry would unlock, the evidence, and the table line
// and commit message for upstream (docs/whitelist.md).
#include <functional>
#include <iostream>
#include <memory>
#include <ostream>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "p2paudit/errors.h"
#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/input_file.h"
#include "p2paudit/json_output.h"
#include "p2paudit/output_file.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/log_explain.h"
#include "p2paudit/probe/runtime_facts.h"

namespace p2paudit::cli {

namespace {

// The pairs of a candidate handed out again (fleet::candidate_pairs() with the counting's arguments).
using CandidatePairs = std::function<fleet::PairSource(const fleet::WhitelistCandidate&)>;

struct WhitelistArgs {
  bool all = false;
  bool commit_message = false;
  bool no_probe = false;
  std::string vendor_facts;
  std::string patch, candidate, kernel_source;  // --patch FILE [--candidate ID] [--kernel-source DIR]
  bool force = false;
  std::string log;                              // --log FILE: the kernel log's events as evidence (docs/log.md)
};

std::string pair_names(const Topology& topo, const std::vector<NamedFunction>& named, const fleet::UnlockedPair& p) {
  auto name = [&](size_t i) {
    for (const auto& n : named)
      if (n.index == i && !n.short_name.empty()) return n.short_name;
    return topo.functions[i].bdf.str();
  };
  return fmt::format("{} -> {}", name(p.provider), name(p.client));
}

// "a, b, c" of the pairs listed (the first kPairsListed), then how many more there are: the text
// stays readable past a few pairs; --format json lists every pair (docs/whitelist.md).
std::string listed_pairs(const std::vector<std::string>& listed, size_t pair_count) {
  std::string out = fmt::format("{}", fmt::join(listed, ", "));
  if (pair_count > listed.size())
    out += fmt::format(", ... and {} more (--format json lists every pair)", pair_count - listed.size());
  return out;
}

// Sets of entries (docs/whitelist.md, "Sets of entries"): pairs no single entry unlocks.
void print_sets(const Topology& topo, const std::vector<NamedFunction>& named, const std::vector<fleet::WhitelistCandidate>& candidates,
                const std::vector<fleet::CandidateSet>& sets) {
  if (sets.empty()) return;
  std::cout << "\nSets of entries: pairs across host bridges that each need every entry of a set\n";
  for (const auto& s : sets) {
    std::cout << fmt::format("\nset {}: {}{}\n", s.id(), to_string(s.status),
                             s.status == fleet::CandidateStatus::kFixedIn ? " " + s.fixed_in : "");
    for (size_t i = 0; i < s.entries.size(); ++i)
      std::cout << fmt::format("  {} {} [{}]\n", s.entries[i].id(), i < s.names.size() ? escape_line(s.names[i]) : "",
                               i < s.host_bridges.size() ? fmt::format("{}", fmt::join(s.host_bridges[i], ", ")) : "");
    std::vector<std::string> pairs;
    for (const auto& p : s.first_pairs)
      pairs.push_back(pair_names(topo, named, p) + (p.copy_result.empty() ? "" : " (copy " + escape_line(p.copy_result) + ")"));
    std::cout << fmt::format("  unlocks {} pair(s), only with every entry: {}\n", s.pair_count, listed_pairs(pairs, s.pair_count));
    std::cout << "  the pairs span host bridges: no entry of the set may carry REQ_SAME_HOST_BRIDGE\n";
    // The kernel stops at the first entry that matches: one line per ID, the one without the flag.
    for (const auto& e : s.entries)
      for (const auto& c : candidates)
        if (c.vendor == e.vendor && c.device == e.device && c.needs_same_host_bridge)
          std::cout << fmt::format("  {} is also a single candidate: its line without REQ_SAME_HOST_BRIDGE serves both\n", e.id());
    for (const auto& m : s.missing) std::cout << "  missing: " << m << "\n";
    if (s.status == fleet::CandidateStatus::kFixedIn) {
      std::cout << fmt::format("  Linux {} and later have every entry: upgrade rather than submit\n", s.fixed_in);
      continue;
    }
    std::cout << "  for drivers/pci/p2pdma.c, pci_p2pdma_whitelist[]:\n" << fleet::kernel_table_lines(s) << "\n";
  }
}

// --patch: the candidate named by --candidate, else the only one ready to submit.
int write_patch(fleet::PatchInput in, const std::vector<fleet::WhitelistCandidate>& candidates, const WhitelistArgs& args,
                const CandidatePairs& pair_source) {
  std::vector<const fleet::WhitelistCandidate*> pick;
  for (const auto& c : candidates)
    if (args.candidate.empty() ? c.status == fleet::CandidateStatus::kReadyToSubmit : c.id() == args.candidate) pick.push_back(&c);
  if (pick.size() != 1) {
    std::vector<std::string> ids;
    for (const auto& c : candidates) ids.push_back(fmt::format("{} ({})", c.id(), to_string(c.status)));
    std::cerr << fmt::format("p2paudit: whitelist --patch: {}; candidates here: {}\n",
                             args.candidate.empty() ? (pick.empty() ? "no candidate is ready to submit: name one with --candidate VVVV:DDDD"
                                                                    : "several candidates are ready: name one with --candidate VVVV:DDDD")
                                                    : "no candidate " + escape_line(args.candidate),
                             ids.empty() ? "none" : fmt::format("{}", fmt::join(ids, ", ")));
    return kExitError;
  }
  const auto& c = *pick.front();
  if (c.status == fleet::CandidateStatus::kFixedIn) {
    std::cerr << fmt::format("p2paudit: whitelist --patch: Linux {} and later have {}: upgrade rather than submit\n", c.fixed_in, c.id());
    return kExitError;
  }
  // A rejected entry (a public report or a measured copy of wrong data) is not sent: its patch is
  // written only when asked for by name and forced, to document the refusal or test it.
  if (c.status == fleet::CandidateStatus::kDoNotSubmit && !args.force) {
    std::cerr << fmt::format("p2paudit: whitelist --patch: {} is {} ({}): add --force to write its patch anyway\n", c.id(),
                             to_string(c.status), c.status_reason);
    return kExitError;
  }
  in.pairs = pair_source(c);
  auto patch = fleet::kernel_patch(in, c, args.kernel_source);
  OutputFile file(args.patch, args.force);
  file.write(patch.mbox);
  file.commit();
  std::cerr << fmt::format("p2paudit: wrote {} for {}{}{}\n", escape_line(args.patch), c.id(),
                           patch.applies ? " (git am applies it to the tree it was made from)"
                                         : " (the message alone: no --kernel-source, no diff)",
                           c.status == fleet::CandidateStatus::kReadyToSubmit     ? ""
                           : c.status == fleet::CandidateStatus::kDoNotSubmit     ? fmt::format("; status {}: do not send it", to_string(c.status))
                           : c.status == fleet::CandidateStatus::kQueuedUpstream ? fmt::format("; status {}: do not send it again", to_string(c.status))
                                                                                  : fmt::format("; status {}: do not send it yet", to_string(c.status)));
  if (!in.identity.known())
    std::cerr << "p2paudit: no git identity (user.name/user.email or GIT_AUTHOR_NAME/GIT_AUTHOR_EMAIL): the patch carries a FIXME placeholder\n";
  return kExitOk;
}

void print_text(const Topology& topo, const KernelRules& kernel, const fleet::CandidateContext& context,
                const std::vector<fleet::WhitelistCandidate>& candidates, const std::vector<fleet::CandidateSet>& sets,
                const WhitelistArgs& args, const CandidatePairs& pair_source) {
  std::cout << fmt::format("Whitelist candidates: Linux {}, {} family {} model {}, IOMMU {}\n",
                           escape_line(context.kernel_release),
                           context.cpu_vendor.empty() ? "CPU unknown" : escape_line(context.cpu_vendor),
                           context.cpu_family ? std::to_string(*context.cpu_family) : "?",
                           context.cpu_model ? std::to_string(*context.cpu_model) : "?", escape_line(context.iommu_mode));
  for (const auto& note : kernel.notes) std::cout << "note: " << note << "\n";
  auto named = matrix_devices(topo, true);
  if (candidates.empty() && sets.empty()) {
    std::cout << "\nnone: no pair here is refused only because a host bridge is missing from the whitelist\n";
    return;
  }
  for (const auto& c : candidates) {
    std::cout << fmt::format("\n{} {} [{}]: {}{}\n", c.id(), escape_line(c.name), fmt::join(c.host_bridges, ", "), to_string(c.status),
                             c.status == fleet::CandidateStatus::kFixedIn ? " " + c.fixed_in : "");
    std::vector<std::string> pairs;
    for (const auto& p : c.first_pairs)
      pairs.push_back(pair_names(topo, named, p) +
                      (!p.copy_result.empty()         ? " (copy " + p.copy_result + ")"
                       : p.seen_copy_result.empty()   ? ""
                       : p.copy_provenance == "claimed" ? " (copy " + escape_line(p.seen_copy_result) + " claimed, not counted)"
                                                        : " (copy " + escape_line(p.seen_copy_result) + " without peer traffic, not counted)"));
    std::cout << fmt::format("  unlocks {} pair(s): {}\n", c.pair_count, listed_pairs(pairs, c.pair_count));
    std::cout << (c.needs_same_host_bridge ? "  every pair shares one host bridge: REQ_SAME_HOST_BRIDGE is enough\n"
                                           : "  pairs span host bridges: the entry needs no REQ_SAME_HOST_BRIDGE\n");
    if (!c.acs_redirect.empty())
      std::cout << fmt::format("  ACS redirect on the paths: {} (pci=disable_acs_redir= is the other way)\n",
                               fmt::join(c.acs_redirect, ", "));
    for (const auto& m : c.missing) std::cout << "  missing: " << m << "\n";
    for (const auto& r : c.reports) std::cout << "  report: " << r << "\n";
    for (const auto& line : fleet::evidence_lines(c)) std::cout << "  " << line << "\n";
    if (c.status == fleet::CandidateStatus::kFixedIn) {
      std::cout << fmt::format("  Linux {} and later have the entry: upgrade rather than submit\n", c.fixed_in);
      continue;
    }
    // Nothing to send: the entry is queued already, or must not be sent (status_reason).
    if (c.status == fleet::CandidateStatus::kQueuedUpstream || c.status == fleet::CandidateStatus::kDoNotSubmit) continue;
    std::cout << "  for drivers/pci/p2pdma.c, pci_p2pdma_whitelist[]:\n"
              << fleet::kernel_table_line(c, fleet::platform_name(topo, context, c), nullptr) << "\n";
    if (args.commit_message) {
      std::cout << "  draft commit message:\n\n";
      std::cout << fleet::commit_message(fleet::PatchInput{topo, kernel, context, nullptr, fleet::git_identity(false),
                                                           pair_source(c)},
                                         c)
                << "\n";
    }
  }
  print_sets(topo, named, candidates, sets);
  if (!args.commit_message && !candidates.empty()) std::cout << "\n--commit-message drafts the patch description with the evidence.\n";
}

int run_whitelist(const GlobalOptions& global, const WhitelistArgs& args) {
  std::optional<std::string> stored_probe;
  Topology topo = load_topology(global, &stored_probe);
  KernelRules kernel = load_kernel_rules(global, topo);
  // A hand-written file is a claim, kept apart from what was measured (docs/whitelist.md).
  DecisionEvidence read = read_decision_evidence(machine_source(global), stored_probe,
                                                 !(args.no_probe || global.no_probe), args.vendor_facts, topo);
  RuntimeEvidence& runtimes = read.runtimes;
  std::optional<policy::VendorFactsDocument> evidence = std::move(runtimes.facts);
  std::optional<policy::VendorFactsDocument>& claimed = read.claimed;
  kernel.notes.insert(kernel.notes.end(), read.unbound.begin(), read.unbound.end());  // answers that did not bind
  fleet::WhitelistOptions options;
  options.all_functions = args.all;
  // Counted, not kept: memory stays flat in the pairs; what is printed of them is handed out again.
  options.count_pairs_only = true;
  options.claimed = claimed ? &*claimed : nullptr;
  if (stored_probe && runtimes.source == "snapshot") try {
      options.copy_run = fleet::copy_run_of(probe::parse_probe_document(*stored_probe, "the stored probe"));
    } catch (const InputError&) {
      // runtime_evidence() has read it already; nothing more to say about its copies.
    }
  const policy::VendorFactsDocument* measured = evidence ? &*evidence : nullptr;
  auto candidates = fleet::whitelist_candidates(topo, kernel, measured, options);
  if (!args.log.empty()) {
    // The log's refusals and faults through each candidate's host bridge, against the default policy.
    policy::RuleSet rules = policy::RuleSet::load(policy::default_rule_files(rules_dir(global)));
    policy::PolicyEvaluator evaluator(topo, kernel, rules, measured);
    policy::LogExplainer log(evaluator, kernel);
    policy::explain_log_file(args.log, log);
    fleet::add_log_evidence(log, candidates);
  }
  auto sets = fleet::candidate_sets(topo, kernel, measured, options);
  auto context = fleet::candidate_context(topo, kernel);
  CandidatePairs pair_source = [&](const fleet::WhitelistCandidate& c) {
    return fleet::candidate_pairs(topo, kernel, measured, options, c);
  };
  if (!args.patch.empty())
    return write_patch({topo, kernel, context, measured, fleet::git_identity()}, candidates, args, pair_source);
  if (global.format == "json") {
    fleet::write_whitelist_json(std::cout, {topo, kernel, context, measured, options, runtimes.source, runtimes.note},
                                candidates, sets);
    std::cout << "\n";
  } else {
    print_text(topo, kernel, context, candidates, sets, args, pair_source);
  }
  return kExitOk;
}

}  // namespace

void add_whitelist_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto args = std::make_shared<WhitelistArgs>();
  auto* cmd = app.add_subcommand("whitelist", "Host bridges whose whitelist entry would unlock peer DMA here, with "
                                              "the evidence, the kernel table line and a draft commit message");
  cmd->add_flag("--all", args->all, "Every PCI function, not only GPUs, accelerators, FPGAs, NVMe, NICs and InfiniBand");
  cmd->add_flag("--commit-message", args->commit_message, "Print the draft commit message of each candidate");
  cmd->add_flag("--no-probe", args->no_probe, "Do not ask the runtimes on the live machine");
  cmd->add_option("--log", args->log, "A saved kernel log (dmesg) of this machine: its refusals and faults through each "
                                     "candidate's host bridge as evidence (docs/log.md)");
  cmd->add_option("--vendor-facts", args->vendor_facts, "JSON facts (copy results...) laid over the runtimes' answers");
  auto* patch = cmd->add_option("--patch", args->patch,
                                 "Write the candidate's patch as an mbox for `git am` (atomically; an existing FILE is "
                                 "kept unless --force)");
  cmd->add_option("--candidate", args->candidate, "The candidate VVVV:DDDD of --patch (default: the only one ready to submit)")
      ->needs(patch);
  cmd->add_option("--kernel-source", args->kernel_source,
                  "Kernel tree whose drivers/pci/p2pdma.c the --patch diff applies to (without it: the message alone)")
      ->needs(patch);
  cmd->add_flag("--force", args->force,
                "Replace the --patch file if it exists (never through a symlink); write the patch of a candidate "
                "whose status is do not submit")
      ->needs(patch);
  cmd->callback([&global, status, args] { *status = run_whitelist(global, *args); });
}

}  // namespace p2paudit::cli
