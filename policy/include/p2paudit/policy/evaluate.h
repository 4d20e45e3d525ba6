// The policy applied to a machine: per ordered pair, the kernel verdict, the facts and the
// decision; and the renderings `p2paudit policy` prints (table, JSON, shell exports).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/pair_facts.h"
#include "p2paudit/policy/rules.h"

namespace p2paudit::policy {

inline constexpr int kPolicySchemaVersion = 1;

// rules/policy/default.yaml, then every rules/advisories/*.yaml in name order.
std::vector<std::string> default_rule_files(const std::string& rules_dir);

struct PairDecision {
  PairVerdict verdict;
  FactSet facts;
  Decision decision;
};

// Facts that follow from others once vendor facts are in (bar_covers_memory).
void derive_facts(FactSet& facts);

// Facts from a vendor facts file (VendorFactsDocument, facts.h, which refuses facts the analyzer
// computes) are laid over the analyzer's; nullptr: none.
PairDecision decide_pair(const Topology& topo, const KernelRules& kernel, const RuleSet& rules,
                         const VendorFactsDocument* vendor, size_t provider, size_t client);

nlohmann::ordered_json pair_decision_json(const Topology& topo, const PairDecision& d);
std::string policy_table_text(const Topology& topo, const std::vector<NamedFunction>& devices,
                              const std::vector<PairDecision>& pairs);
// Shell exports for NCCL, llama.cpp/GGML, oneCCL and vLLM from the GPU pairs' decisions
// (docs/policy-env.md gives each consumer's own semantics).
std::string env_exports(const Topology& topo, const std::vector<PairDecision>& pairs);

}  // namespace p2paudit::policy
