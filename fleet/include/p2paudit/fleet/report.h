// SPDX-License-Identifier: GPL-2.0-or-later
// One machine's report (`p2paudit report`, docs/fleet.md): what the machine is, its host bridges,
// the kernel's verdict and the policy's decision per pair, the whitelist candidates and what the
// runtimes said, in one JSON document that `p2paudit aggregate` folds with thousands of others.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/rules.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"

namespace p2paudit::fleet {

inline constexpr int kReportSchemaVersion = 1;
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

struct ReportOptions {
  std::string tool_version;
  bool redact = false;  // leave the host name out
};

// The report document (docs/fleet.md). Pairs are every ordered pair of distinct devices of the
// default view (matrix_devices(topo, false)).
nlohmann::ordered_json machine_report(const MachineAnalysis& machine, const ReportOptions& options);

// "fnv1a64:<16 hex digits>" over the sorted "BDF VVVV:DDDD PARENT" lines of every function: equal
// trees get equal digests. It groups machines; it is not a security measure.
std::string topology_digest(const Topology& topo);

// The report of a snapshot or sysroot directory as `p2paudit --sysroot X report --redact` makes it
// offline: the machine's own kernel release, the given rules, and the runtimes' answers stored by
// `snapshot --probe` (none otherwise). Throws InputError naming the sysroot when anything is bad.
nlohmann::ordered_json sysroot_report(const Sysroot& root, const KernelRuleData& kernel_data,
                                      const policy::RuleSet& rules, const ReportOptions& options);

}  // namespace p2paudit::fleet
