// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/probe/decision_inputs.h"

#include <cstdlib>
#include <filesystem>
#include <future>

#include <fmt/format.h>

#include "p2paudit/assumptions.h"
#include "p2paudit/errors.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/device_knowledge.h"
#include "p2paudit/probe/runtime_facts.h"
#include "p2paudit/snapshot.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"

namespace p2paudit {

DumpAssumptions MachineSource::dump_assumptions() const {
  DumpAssumptions a;
  a.cpu = dump_cpu;
  a.iommu = dump_iommu;
  a.host_bridges = dump_host_bridges;
  a.kernel = kernel;
  return a;
}

namespace {

void put_aside(std::vector<std::string>* aside, std::string note) {
  if (aside) aside->push_back("note: " + std::move(note));
}

// The topology as the sysroot or the dump reads, before any what-if assumption.
Topology read_machine(const MachineSource& source, AssumptionNotes where, std::optional<std::string>* stored_probe,
                      std::vector<std::string>* aside) {
  if (source.from_dump()) {
    auto assumptions = source.dump_assumptions();
    Topology t = read_dump_topology(source.lspci_dump, assumptions);
    if (where == AssumptionNotes::kAside)
      for (auto& note : dump_assumption_notes(source.lspci_dump, assumptions, t)) put_aside(aside, std::move(note));
    return t;
  }
  Sysroot root = Sysroot::open(source.sysroot);
  if (stored_probe && !root.is_live() && root.exists(kProbeResultsPath)) {
    *stored_probe = root.read_text(kProbeResultsPath);
    if (!*stored_probe)
      throw InputError(fmt::format("{}: {}: not a regular file of at most {} bytes", root.origin(), kProbeResultsPath,
                                   root.limits().max_file_bytes));
  }
  return read_topology(root, {.descriptive_attributes = source.descriptive_attributes, .pci_names = source.pci_names});
}

// The facts a probe document establishes, bound to topo; what did not bind goes to its findings.
void take_runtime_facts(RuntimeEvidence& e, const nlohmann::json& document, const std::string& origin, Topology& topo) {
  auto facts = probe::runtime_facts(document, origin, &topo);
  for (auto& finding : facts.findings) topo.findings.push_back(std::move(finding));
  e.asked = std::move(facts.asked);
  e.answered_by.clear();
  for (const auto& [pair, f] : facts.facts.pairs)
    if (const auto* v = f.get("vendor.peer_runtime"); v && std::holds_alternative<std::string>(*v))
      if (const auto& runtime = std::get<std::string>(*v); (runtime == "cuda" || runtime == "nvml") && e.answered_by != "cuda")
        e.answered_by = runtime;
  e.facts = std::move(facts.facts);
}

}  // namespace

Topology read_source_topology(const MachineSource& source, AssumptionNotes where,
                              std::optional<std::string>* stored_probe, std::vector<std::string>* aside) {
  Topology t = read_machine(source, where, stored_probe, aside);
  if (source.assume_acs_off.empty()) return t;
  // Stated like a dump's assumptions: always in the findings; aside or (read_source_kernel_rules)
  // in the kernel notes where the output prints those instead.
  for (auto& note : assume_acs_redirect_off(t, source.assume_acs_off).notes(t)) {
    if (where == AssumptionNotes::kAside) put_aside(aside, note);
    t.findings.push_back({std::string(kAssumeAcsOffOrigin), std::move(note)});
  }
  return t;
}

KernelRules read_source_kernel_rules(const MachineSource& source, const Topology& topo, AssumptionNotes where,
                                     std::vector<std::string>* aside) {
  KernelRules rules = load_kernel_rules(std::filesystem::path(source.rules_dir) / "kernel", topo.platform,
                                        {source.kernel, source.kernel_rules, source.assume_whitelisted});
  if (!source.assume_acs_off.empty()) {
    if (where == AssumptionNotes::kKernelNotes)
      for (const auto& f : topo.findings)
        if (f.path == kAssumeAcsOffOrigin) rules.notes.push_back(f.message);
    if (auto caveat = acs_redirect_off_caveat(rules.release)) {
      if (where == AssumptionNotes::kAside) put_aside(aside, *caveat);
      else rules.notes.push_back(*caveat);
    }
  }
  if (source.from_dump()) {
    // The dump's own statement of the unknown kernel replaces the rules' notes about a sysroot
    // without osrelease or kernel config.
    std::erase_if(rules.notes, [](const std::string& note) {
      return note.starts_with("the sysroot does not say which kernel runs") ||
             note.starts_with("the kernel config was not found");
    });
    if (where == AssumptionNotes::kKernelNotes) {
      auto notes = dump_assumption_notes(source.lspci_dump, source.dump_assumptions(), topo);
      rules.notes.insert(rules.notes.begin(), notes.begin(), notes.end());
    }
  }
  return rules;
}

bool answer_cache_applies(const MachineSource& source) {
  return source.answer_cache != probe::AnswerCacheMode::kOff && !source.from_dump() && source.sysroot == "/";
}

bool runtimes_describe(const MachineSource& source) {
  const char* allow = std::getenv("P2PAUDIT_PROBE_ALLOW_SYSROOT");
  return !source.from_dump() && (source.sysroot == "/" || (allow && std::string(allow) == "1"));
}

RuntimeEvidence read_runtime_evidence(const MachineSource& source, const std::optional<std::string>& stored_probe,
                                      bool ask_live, Topology& topo) {
  if (stored_probe) return stored_runtime_evidence(*stored_probe, fmt::format("{}: {}", source.sysroot, kProbeResultsPath), topo);
  RuntimeEvidence e;
  if (!ask_live) {
    e.note = "the runtimes were not asked (--no-probe)";
    return e;
  } else if (!runtimes_describe(source)) {
    e.note = source.from_dump() ? "the runtimes cannot be asked about an lspci dump"
                                : "the runtimes were not asked: this is not the live machine, and the snapshot holds no "
                                  "probe results (`p2paudit snapshot --probe` stores them)";
    return e;
  }
  e.source = "live";
  const auto ask = [&] { return probe::probe_document(probe::probe_for_decisions({}), nullptr, source.origin(), "", {}); };
  if (!answer_cache_applies(source)) {
    e.note = "the runtimes were asked (queries only; --no-probe skips them)";
    take_runtime_facts(e, ask(), "the runtime probe", topo);
  } else {
    probe::CachedAsk how;
    how.mode = source.answer_cache;
    how.ask = ask;
    // What a failed use of a cached document left in the tree is undone before the runtimes are asked.
    const size_t findings = topo.findings.size();
    auto answers = probe::ask_with_cache(how, topo, [&](const nlohmann::json& document) {
      topo.findings.resize(findings);
      take_runtime_facts(e, document, "the runtime probe", topo);
    });
    e.cached = answers.from_cache;
    e.note = answers.from_cache ? "the runtimes' answers of this boot, from the answer cache (--refresh asks again, "
                                  "--no-cache never keeps them; --no-probe skips them)"
                                : "the runtimes were asked (queries only; --no-probe skips them)";
    for (const auto& n : answers.notes) e.note += "; " + n;
  }
  if (e.answered_by == "nvml")
    e.note += "; NVIDIA peer access as NVML reports the driver's P2P status (CUDA was not asked: `p2paudit probe` asks it)";
  return e;
}

RuntimeEvidence stored_runtime_evidence(std::string_view stored_probe, const std::string& origin, Topology& topo) {
  RuntimeEvidence e;
  e.source = "snapshot";
  e.note = "runtime answers stored in the snapshot (snapshot --probe)";
  take_runtime_facts(e, probe::parse_probe_document(stored_probe, origin), origin, topo);
  return e;
}

policy::VendorFactsDocument load_vendor_facts(const std::string& path, Topology& topo) {
  auto file = policy::VendorFactsDocument::load(path);
  for (auto& finding : file.bind(topo, path)) topo.findings.push_back(std::move(finding));
  return file;
}

DecisionEvidence read_decision_evidence(const MachineSource& source, const std::optional<std::string>& stored_probe,
                                        bool ask_live, const std::string& vendor_facts, Topology& topo) {
  const size_t read_findings = topo.findings.size();
  DecisionEvidence e;
  e.runtimes = read_runtime_evidence(source, stored_probe, ask_live, topo);
  // A stranger's file: only a regular file, bounded, and only the facts vendor tools supply.
  if (!vendor_facts.empty()) e.claimed = load_vendor_facts(vendor_facts, topo);
  for (size_t i = read_findings; i < topo.findings.size(); ++i)
    e.unbound.push_back(fmt::format("{}: {}", topo.findings[i].path, topo.findings[i].message));
  return e;
}

nlohmann::ordered_json runtime_evidence_json(const RuntimeEvidence& r) {
  return {{"source", r.source},
          {"note", r.note},
          {"asked", r.asked},
          {"answered_by", r.answered_by.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.answered_by)},
          {"cached", r.cached}};
}

DecisionInputs read_decision_inputs(const MachineSource& source, const PolicyInputs& policy, AssumptionNotes where,
                                    std::vector<std::string>* aside) {
  policy::use_device_knowledge_from(source.rules_dir);  // the device table beside the rules
  std::vector<std::string> files =
      policy.no_default_rules ? std::vector<std::string>{} : policy::default_rule_files(source.rules_dir);
  files.insert(files.end(), policy.rule_files.begin(), policy.rule_files.end());
  // The rule files do not depend on the machine: a second core parses them while the tree is read
  // (deferred to get() where no thread can be had). Errors keep their order: the tree's, the kernel
  // rules', then the policy's.
  std::future<policy::RuleSet> rules;
  if (!files.empty())
    rules = std::async(std::launch::async | std::launch::deferred, [&files] { return policy::RuleSet::load(files); });
  std::optional<std::string> stored_probe;
  DecisionInputs in{read_source_topology(source, where, policy.ignore_stored_probe ? nullptr : &stored_probe, aside),
                    {}, {}, {}, std::nullopt};
  in.kernel = read_source_kernel_rules(source, in.topo, where, aside);
  if (files.empty()) throw InputError("no rule files: --no-default-rules needs at least one --rules FILE");
  in.rules = rules.get();
  DecisionEvidence evidence = read_decision_evidence(source, stored_probe, policy.ask_live, policy.vendor_facts, in.topo);
  in.runtimes = std::move(evidence.runtimes);
  in.vendor = std::move(in.runtimes.facts);
  in.runtimes.facts.reset();
  if (evidence.claimed) {
    if (in.vendor) in.vendor->merge(*evidence.claimed);
    else in.vendor = std::move(evidence.claimed);
  }
  // Answers that did not bind to the tree: in the findings, and where this output prints its notes.
  for (auto& note : evidence.unbound) {
    if (where == AssumptionNotes::kAside) put_aside(aside, std::move(note));
    else if (where == AssumptionNotes::kKernelNotes) in.kernel.notes.push_back(std::move(note));
  }
  return in;
}

CheckAnswer check_pair(policy::PolicyEvaluator& evaluator, size_t provider, size_t client, bool require_peer) {
  CheckAnswer a;
  a.pair = evaluator.decide_in_full(provider, client);
  auto meets = [&](policy::Action action) {
    return require_peer ? action == policy::Action::kPeer : action != policy::Action::kDeny;
  };
  a.satisfied = meets(a.pair.decision.action);
  a.answer = policy::answer(a.pair.decision, meets);
  return a;
}

nlohmann::ordered_json check_json(const DecisionInputs& inputs, const CheckAnswer& answer, bool require_peer) {
  nlohmann::ordered_json j = {{"schema_version", kCheckSchemaVersion}};
  j.update(policy::pair_decision_json(inputs.topo, answer.pair));
  j["require"] = require_peer ? "peer" : "host_staged";
  j["runtime_probe"] = runtime_evidence_json(inputs.runtimes);
  j["satisfied"] = answer.satisfied;
  j["answer"] = policy::to_string(answer.answer);
  return j;
}

}  // namespace p2paudit
