// SPDX-License-Identifier: GPL-2.0-or-later
// Every input of a decision, read one way for every interface: `p2paudit check` and `policy`
// (tools/p2paudit) and libp2paudit's p2paudit_open_with() (capi/) turn a machine (sysroot, snapshot
// or lspci dump), its kernel rules and what-if overrides, the policy files, the runtimes' answers
// (stored in a snapshot, asked live only when asked to) and a vendor facts file into the same
// DecisionInputs, and a pair's answer into the same CheckAnswer. It lives in the probe library
// because the runtimes' answers are read there (runtime_facts.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/dump_topology.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/rule_analysis.h"
#include "p2paudit/policy/rules.h"
#include "p2paudit/probe/answer_cache.h"
#include "p2paudit/topology.h"

namespace p2paudit {

// What is read and what is assumed about it (the tool's global options).
struct MachineSource {
  std::string sysroot = "/";                     // "/", a snapshot directory or .tar.gz
  std::string lspci_dump;                        // non-empty: this `lspci -xxxx` dump instead of the sysroot
  std::optional<DumpCpu> dump_cpu;               // with a dump: the boot CPU
  std::string dump_iommu;                        // with a dump: "off", "passthrough", "translated" or ""
  std::vector<std::string> dump_host_bridges;    // with a dump: root buses DDDD:BB sharing a host bridge
  std::string kernel;                            // X.Y[.Z] whose rules apply; "": the machine's
  std::vector<std::string> kernel_rules;         // extra kernel whitelist YAML files
  std::vector<std::string> assume_whitelisted;   // VVVV:DDDD[:same-host-bridge]
  std::vector<std::string> assume_acs_off;       // as booted with pci=disable_acs_redir= (assumptions.h)
  std::string rules_dir;                         // the rules/ directory, already located
  bool descriptive_attributes = true;            // TopologyReadScope: false when no JSON tree is printed
  bool pci_names = true;                         // TopologyReadScope: false when no output prints a field's name
  // The per-boot cache of the runtimes' answers (answer_cache.h): used only on the live "/"; the tool
  // turns it on (--no-cache, --refresh), a library caller gets none unless it asks.
  probe::AnswerCacheMode answer_cache = probe::AnswerCacheMode::kOff;

  bool from_dump() const { return !lspci_dump.empty(); }
  // What the tree is read from, for messages: the dump file or the sysroot.
  const std::string& origin() const { return from_dump() ? lspci_dump : sysroot; }
  DumpAssumptions dump_assumptions() const;
};

// Where the statements of what was assumed (a dump's unknowns, --assume-acs-off) are put besides
// the topology's findings: nowhere else, first in the kernel rules' notes, or in `aside` for the
// caller to print (the outputs that carry neither findings nor notes).
enum class AssumptionNotes { kFindings, kKernelNotes, kAside };

// The topology as the source reads, with --assume-acs-off laid over it. With stored_probe: the
// snapshot's stored runtime answers (`snapshot --probe`), when it holds them. Throws InputError.
Topology read_source_topology(const MachineSource& source, AssumptionNotes where,
                              std::optional<std::string>* stored_probe, std::vector<std::string>* aside);

// The kernel's rules for the topology's release (or source.kernel), with the extra rule files and
// assumed whitelist entries applied, and the notes the assumptions call for. Throws InputError.
KernelRules read_source_kernel_rules(const MachineSource& source, const Topology& topo, AssumptionNotes where,
                                     std::vector<std::string>* aside);

// Whether the runtimes describe the source: the live "/" (or any sysroot with
// P2PAUDIT_PROBE_ALLOW_SYSROOT=1, for tests with fake runtimes); never a dump.
bool runtimes_describe(const MachineSource& source);
// Whether the answer cache may be read and written for the source: the live "/" only (never a
// snapshot, a dump or another sysroot, whatever P2PAUDIT_PROBE_ALLOW_SYSROOT says), unless kOff.
bool answer_cache_applies(const MachineSource& source);

// The runtimes' answers as policy facts: read from a snapshot taken with --probe, else asked now on
// the live machine (queries only, no copies) when ask_live and the runtimes describe the source,
// else none.
struct RuntimeEvidence {
  std::string source = "none";                   // "live", "snapshot", "none"
  std::string note;                              // why none, or where from
  std::vector<std::string> asked;                // "nvml ok", "cuda absent"...
  // Whose answer decides NVIDIA peer access: "cuda" when CUDA answered, "nvml" when NVML's answer
  // stood for it (CUDA not asked, or it could not answer), "" when neither answered.
  std::string answered_by;
  bool cached = false;                           // live answers read from the per-boot answer cache
  std::optional<policy::VendorFactsDocument> facts;
};
// The answers are bound to `topo` (runtime_facts.h): what does not match its functions is dropped
// and added to topo.findings.
RuntimeEvidence read_runtime_evidence(const MachineSource& source, const std::optional<std::string>& stored_probe,
                                      bool ask_live, Topology& topo);
// A snapshot's stored answers (the text of its kProbeResultsPath; `origin` names it in messages),
// bound to `topo` the same way: read_runtime_evidence() of a snapshot, and the fleet's reports.
RuntimeEvidence stored_runtime_evidence(std::string_view stored_probe, const std::string& origin, Topology& topo);
// A --vendor-facts file, bound to `topo` the same way (VendorFactsDocument::bind), its drops in
// topo.findings.
policy::VendorFactsDocument load_vendor_facts(const std::string& path, Topology& topo);

// What a decision takes from outside the tree: the runtimes' answers (read_runtime_evidence), then
// a --vendor-facts file (when `vendor_facts` names one), each bound to `topo`. The two are kept
// apart: `policy` lays the file over the answers, `whitelist` keeps a claim apart from what was
// measured.
struct DecisionEvidence {
  RuntimeEvidence runtimes;
  std::optional<policy::VendorFactsDocument> claimed;  // the --vendor-facts file
  std::vector<std::string> unbound;                    // "origin: message" per answer that did not bind to topo
};
DecisionEvidence read_decision_evidence(const MachineSource& source, const std::optional<std::string>& stored_probe,
                                        bool ask_live, const std::string& vendor_facts, Topology& topo);
// {"source", "note", "asked", "answered_by" (null for ""), "cached"}: the JSON outputs' "runtime_probe".
nlohmann::ordered_json runtime_evidence_json(const RuntimeEvidence& evidence);

// The policy's inputs besides the machine (the options of `policy` and `check`).
struct PolicyInputs {
  std::vector<std::string> rule_files;           // --rules FILE..., after the default policy
  bool no_default_rules = false;                 // only rule_files
  std::string vendor_facts;                      // a vendor facts JSON laid over the runtimes' answers
  bool ignore_stored_probe = false;              // leave a snapshot's stored runtime answers unread
  bool ask_live = false;                         // ask the runtimes when the source is the live machine
};

// Everything a decision is computed from. PolicyEvaluator keeps references into it: keep it alive
// (and unmoved) while an evaluator made from it is used.
struct DecisionInputs {
  Topology topo;
  KernelRules kernel;
  policy::RuleSet rules;
  RuntimeEvidence runtimes;                           // facts moved into `vendor`
  std::optional<policy::VendorFactsDocument> vendor;  // the runtimes' answers, the vendor facts file over them

  const policy::VendorFactsDocument* vendor_facts() const { return vendor ? &*vendor : nullptr; }
};
DecisionInputs read_decision_inputs(const MachineSource& source, const PolicyInputs& policy, AssumptionNotes where,
                                    std::vector<std::string>* aside);

// `check PROVIDER CLIENT --require peer|host_staged`: the pair's whole decision, whether it meets
// the requirement, and the answer (yes, no, or unknown where unknown facts could change it).
struct CheckAnswer {
  policy::PairDecision pair;
  bool satisfied = false;
  policy::Answer answer = policy::Answer::kUnknown;
};
CheckAnswer check_pair(policy::PolicyEvaluator& evaluator, size_t provider, size_t client, bool require_peer);
// `check --format json`'s object (docs/json.md) without --diff's "what_if".
inline constexpr int kCheckSchemaVersion = 1;
nlohmann::ordered_json check_json(const DecisionInputs& inputs, const CheckAnswer& answer, bool require_peer);

}  // namespace p2paudit
