// SPDX-License-Identifier: GPL-2.0-or-later
// One machine's report (`p2paudit report`, docs/fleet.md): what the machine is, its host bridges,
// the kernel's verdict and the policy's decision per pair, the whitelist candidates and what the
// runtimes said, in one JSON document that `p2paudit aggregate` folds with thousands of others.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/rules.h"

namespace p2paudit::policy {
class PolicyEvaluator;
struct DecisionGroup;
}
#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"

namespace p2paudit::fleet {

inline constexpr int kReportSchemaVersion = 1;
// A report whose pairs are grouped (past ReportOptions::most_listed_pairs): an aggregate of an
// earlier version, which counts one pair per element, refuses it by this version rather than
// miscount it; a report whose every pair is listed keeps version 1, which every aggregate reads.
inline constexpr int kGroupedReportSchemaVersion = 2;
inline constexpr std::string_view kReportKind = "p2paudit-report";

// Where the runtimes' answers came from: "live" (asked now), "snapshot" (`snapshot --probe`) or
// "none", why, and each runtime's status ("nvml ok", "cuda absent").
struct ProbeSummary {
  std::string source = "none";
  std::string note;
  std::vector<std::string> asked;
};

// What one machine's report is made of. `evidence` (the runtimes' answers as facts) may be null.
struct MachineAnalysis {
  const Topology& topo;
  const KernelRules& kernel;
  const policy::RuleSet& rules;
  const policy::VendorFactsDocument* evidence = nullptr;
  ProbeSummary probe;
};

// A report lists each ordered pair (its kernel verdict, its decision, each whitelist candidate's
// pairs) only up to kMostListedPairs (p2pdma_report.h); past it the pairs are grouped by what they
// share, one element per kind of pair with its exact "pairs" count. `--format prom` writes one
// series per pair under the same bound.
struct ReportOptions {
  std::string tool_version;
  bool redact = false;  // leave the host name out
  std::uint64_t most_listed_pairs = kMostListedPairs;  // UINT64_MAX: always each pair (`report --all-pairs`)
};

// The ordered pairs of `devices` devices, and whether a report lists each of them.
inline std::uint64_t ordered_pairs(size_t devices) {
  return devices < 2 ? 0 : static_cast<std::uint64_t>(devices) * (devices - 1);
}
inline bool pairs_listed(size_t devices, std::uint64_t most_listed) { return ordered_pairs(devices) <= most_listed; }

// The report's "pairs" member: {"count", "listed", "most_listed", "note"}: how many ordered pairs,
// whether each is an element of kernel_verdicts and decisions, and when not, why and how to list them.
nlohmann::ordered_json pairs_summary(size_t devices, std::uint64_t most_listed);

// The report document (docs/fleet.md), written to `out` as it is computed: the text
// json_text() prints for it (two-space indentation, hostile strings escaped, no newline at the
// end). Pairs are every ordered pair of distinct devices of the default view
// (matrix_devices(topo, false)); they are written one at a time and nothing is kept per pair, so
// memory does not grow with their number (docs/scale.md).
void write_machine_report(std::ostream& out, const MachineAnalysis& machine, const ReportOptions& options);

// The report's fields that do not grow with the pairs, in the report's order: schema_version to
// devices. kernel_verdicts, decisions, candidates and probe follow them.
nlohmann::ordered_json report_head(const MachineAnalysis& machine, const ReportOptions& options);

// The report's pairs, one at a time: the elements of kernel_verdicts and of decisions (with the
// pair's vendor.copy_result, "" when none), in the report's order. Each pass decides every pair
// again; nothing is kept per pair.
class ReportPairs {
 public:
  explicit ReportPairs(const MachineAnalysis& machine);  // keeps a reference: it must outlive this
  ~ReportPairs();
  void each_verdict(const std::function<void(const nlohmann::ordered_json&)>& fn);
  void each_decision(const std::function<void(const nlohmann::ordered_json&, const std::string&)>& fn);

  // The same pairs without JSON, through the index and the evaluator: nothing is built per pair
  // but what is printed. each_outcome(): each pair's kernel outcome (P2pdmaIndex::outcome(), what
  // kernel_verdicts shows; reason() renders its "reason"). each_group(): each pair's decision
  // (PolicyEvaluator::decide()) and its vendor.copy_result ("" when unknown).
  void each_outcome(const std::function<void(size_t provider, size_t client, const PairOutcome&)>& fn);
  const std::string& reason(size_t provider, size_t client, const PairOutcome& outcome);
  // `group` numbers the decision (PolicyEvaluator::groups()): pairs with one number share `decision`.
  void each_group(const std::function<void(size_t provider, size_t client, size_t group,
                                           const policy::DecisionGroup& decision, const std::string& copy_result)>& fn);
  const std::vector<NamedFunction>& devices() const { return devices_; }

 private:
  // The pair's vendor.copy_result as its fact set has it: the evidence's own entry for the pair,
  // else the machine's (the evidence's "all" over "not_run").
  const std::string& copy_result(size_t provider, size_t client) const;

  const MachineAnalysis& machine_;
  std::vector<NamedFunction> devices_;
  std::unique_ptr<policy::PolicyEvaluator> evaluator_;
  std::unique_ptr<VerdictReasons> reasons_;
  std::string machine_copy_result_;
};

// kernel_verdicts' "verdict" of an outcome ("allowed", "refused", "unknown") and its "refused_at":
// the root devices' IDs whose whitelist check refused the pair.
const char* verdict_word(const PairOutcome& outcome);
std::vector<std::string> refused_at(const Topology& topo, const PairOutcome& outcome);

// A whitelist candidate's report element without its "pairs"; and one of those pairs.
nlohmann::ordered_json candidate_head(const Topology& topo, WhitelistCandidate& candidate);
nlohmann::ordered_json unlocked_pair_json(const Topology& topo, const UnlockedPair& pair);

// "fnv1a64:<16 hex digits>" over the sorted "BDF VVVV:DDDD PARENT" lines of every function: equal
// trees get equal digests. It groups machines; it is not a security measure.
std::string topology_digest(const Topology& topo);

// The analysis of a snapshot or sysroot directory as `p2paudit --sysroot X report --redact` makes
// it offline: the machine's own kernel release, the given rules, and the runtimes' answers stored
// by `snapshot --probe` (none otherwise), handed to `fn`. Throws InputError naming the sysroot
// when anything is bad.
void with_sysroot_analysis(const Sysroot& root, const KernelRuleData& kernel_data, const policy::RuleSet& rules,
                           const std::function<void(const MachineAnalysis&)>& fn);

}  // namespace p2paudit::fleet
