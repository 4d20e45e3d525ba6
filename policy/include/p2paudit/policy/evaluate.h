// SPDX-License-Identifier: GPL-2.0-or-later
// The policy applied to a machine: per ordered pair, the kernel verdict, the facts and the
// decision; and the renderings `p2paudit policy` prints (table, JSON; shell exports: env_exports.h).
#pragma once

#include <cstdint>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/pair_facts.h"
#include "p2paudit/policy/rules.h"

namespace p2paudit::policy {

// 2: pairs name their decision group; reasons, remedies and facts are given once per group
// (every pair's with --details).
inline constexpr int kPolicySchemaVersion = 2;

// rules/policy/default.yaml, then every rules/advisories/*.yaml in name order.
std::vector<std::string> default_rule_files(const std::string& rules_dir);

struct PairDecision {
  PairVerdict verdict;
  FactSet facts;
  Decision decision;
};

// An uncertain decision's two texts (docs/policy.md, "Uncertain decisions"): what else is possible,
// by which rules ("peer (rule nvidia-driver-allows) is possible too"), and what is acted on until
// the facts that settle it are known; and those facts, with how to learn each. "" when certain.
std::string also_possible_text(const Decision& d);
std::string settle_text(const Decision& d);

// Facts that follow from others once vendor facts are in (bar_covers_memory).
void derive_facts(FactSet& facts);

// What pairs with the same decision share: everything but the texts, which name the pair.
struct DecisionGroup {
  Action action = Action::kHostStaged;
  std::string rule;                           // "" when no rule decided
  std::optional<Authority> authority;
  std::vector<std::string> fired;             // ids of every rule that fired, warns included
  std::vector<std::string> warnings;          // ids of the warn rules among them
  std::vector<std::string> findings;          // ids of the later refusing rules that also held
  std::vector<std::string> undecided_rules;
  std::vector<std::string> unknown_facts;
  // Decisions under uncertainty (Decision::possible): the decisions still possible, the others' rules
  // and the facts that settle it.
  ActionSet possible = 0;
  std::vector<Decision::Alternative> alternatives;
  std::vector<std::string> decisive_unknown_facts;
  bool certain() const { return possible == action_bit(action); }
  size_t pairs = 0;                           // pairs decide() has put here
  std::pair<size_t, size_t> example{0, 0};    // the first of them (provider, client)
};

// Decisions for many pairs of one machine. The machine's and each device's facts are computed
// once; a pair adds its own (O(depth of the tree)); pairs whose facts agree on everything the
// rules' conditions read get the same decision without evaluating the rules again. Reasons and
// remedies name the pair, so they are rendered only for the pairs that are printed.
class PolicyEvaluator {
 public:
  // Keeps references to all four (vendor may be nullptr): they must outlive the evaluator.
  PolicyEvaluator(const Topology& topo, const KernelRules& kernel, const RuleSet& rules,
                  const VendorFactsDocument* vendor);
  ~PolicyEvaluator();

  const P2pdmaIndex& index() const { return index_; }
  const Topology& topology() const { return topo_; }
  // The index of the pair's group in groups(); counted in the group's `pairs` unless !count (a
  // second pass over the same pairs).
  size_t decide(size_t provider, size_t client, bool count = true);
  // decide() (counted) for every ordered pair of `devices` but a device with itself, handed to
  // take(row, column, group) in row order. Most of a pair's cost is its key (its fact values):
  // those are worked out on a second core a block of rows at a time; the groups, their numbers
  // and their counts are the ones decide() gives one pair at a time. Memory: two blocks.
  void decide_all_pairs(const std::vector<size_t>& devices, const std::function<void(size_t, size_t, size_t)>& take);
  const std::vector<DecisionGroup>& groups() const { return groups_; }
  // The pair's whole decision: the verdict with its texts, every fact, the rules' texts rendered.
  PairDecision decide_in_full(size_t provider, size_t client);
  // The pair's facts in one set, without the kernel's texts.
  FactSet facts(size_t provider, size_t client);
  // The advisories about the machine that hold here (RuleSet::machine_advisories() on the
  // machine's facts, the runtimes' and a vendor file's for every pair included): told once, with
  // one device as with many.
  std::vector<FiredRule> machine_advisories() const { return rules_.machine_advisories(machine_); }

 private:
  // What a pair's decision depends on, fixed-size and known before any fact set is built: its
  // devices' signatures and its own facts' values (those the conditions read; the rest cleared).
  struct MemoKey {
    uint32_t provider_signature = 0, client_signature = 0;
    PairFactValues values;
    // By the bytes (no padding: hash_bytes() asserts it), not field by field: once per pair.
    bool operator==(const MemoKey& other) const { return std::memcmp(this, &other, sizeof *this) == 0; }
  };
  struct MemoSlot {
    MemoKey key;
    uint32_t group = 0;
    bool used = false;
  };
  const FactSet& device_layer(size_t dev, bool as_provider);
  // device_layer() for its signature's sake, skipped once the signature is known (every pair asks).
  void ensure_device_layers(size_t provider, size_t client) {
    if (provider_signature_[provider] == UINT32_MAX) device_layer(provider, true);
    if (client_signature_[client] == UINT32_MAX) device_layer(client, false);
  }
  // The pair's own facts laid over its devices' and the machine's; the kernel's texts from
  // `verdict` when given (the pair's whole verdict, computed once by the caller).
  FactSet layered_facts(size_t provider, size_t client, const PairOutcome& outcome, const PairVerdict* verdict);
  // Devices whose facts (and the facts derived from them and the machine's) agree on everything
  // the conditions read get the same number.
  uint32_t device_signature(const FactSet& device, const FactSet& derived);
  size_t group_of(const Decision& d, size_t provider, size_t client);
  // decide() by the MemoKey: O(depth), no allocation when remembered.
  size_t decide_by_key(size_t provider, size_t client, const PairOutcome& outcome);
  // The pair's key; reads only what is fixed once the devices' layers are made (any thread).
  MemoKey memo_key(size_t provider, size_t client, const PairOutcome& outcome) const;
  // The group of a pair with this key: remembered, or decided (outcome: the pair's, or nullptr).
  size_t group_of_key(const MemoKey& key, size_t provider, size_t client, const PairOutcome* outcome);
  // A vendor file sets facts for this very pair.
  bool vendor_pair(size_t provider, size_t client) const;
  static constexpr size_t kPairsABlock = 8192;
  // decide() from the pair's whole fact set, remembered by the bytes of the facts the conditions
  // read: when a condition reads the kernel's texts or a vendor file sets facts for the pair.
  size_t decide_by_facts(size_t provider, size_t client, const PairOutcome& outcome);
  MemoSlot* find_slot(const MemoKey& key, uint64_t hash);

  const Topology& topo_;
  const RuleSet& rules_;
  const VendorFactsDocument* vendor_;
  P2pdmaIndex index_;
  PairFactsContext pair_context_;
  FactSet machine_;
  std::vector<FactId> condition_facts_;
  std::vector<bool> read_by_conditions_;             // by FactId
  bool conditions_read_texts_ = false;
  PairFactValues pair_mask_;                         // PairFactValues::mask_for(read_by_conditions_)
  std::vector<uint8_t> in_vendor_pairs_;             // per function: named by a pair of the vendor file
  std::vector<std::unique_ptr<FactSet>> provider_layers_, client_layers_;
  std::vector<uint32_t> provider_signature_, client_signature_;
  std::unordered_map<std::string, uint32_t> device_signatures_;
  std::vector<MemoSlot> memo_slots_;                 // open addressing, a power of two (or empty)
  size_t memo_size_ = 0;
  MemoKey last_key_;                                 // the last key found in memo_slots_
  uint32_t last_key_group_ = UINT32_MAX;             // its group; UINT32_MAX: none yet
  std::unordered_map<std::string, size_t> memo_;     // decide_by_facts(): condition facts' values -> group
  std::map<std::string, size_t> group_ids_;          // group's content -> index
  std::vector<DecisionGroup> groups_;
  std::string key_;                                  // reused for every pair
};

// Facts from a vendor facts file (VendorFactsDocument, facts.h, which refuses facts the analyzer
// computes) are laid over the analyzer's; nullptr: none.
PairDecision decide_pair(const Topology& topo, const KernelRules& kernel, const RuleSet& rules,
                         const VendorFactsDocument* vendor, size_t provider, size_t client);
nlohmann::ordered_json pair_decision_json(const Topology& topo, const PairDecision& d);

// `p2paudit policy`: the grid, each cell the action and a note number, then each note once (the
// decision, why, fix, the unknown facts that could change it, the pairs it covers) and each warning
// once with the notes it applies to; with per_pair every pair's own texts instead. With group_wide,
// a grid of one column per device that would pass kDeviceGridColumns (p2paudit/grouped_grid.h) is
// drawn by groups of devices instead, each cell counting its pairs by decision. Written as the
// pairs are decided: memory grows with the number of groups, not of pairs.
void write_policy_text(std::ostream& out, PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices,
                       bool per_pair, const TextStyle& style = {}, bool group_wide = true);
// The audit's first screen (docs/policy.md): the decision grid with each note's action, rule, one
// line of why and of fix, and the pair's other problems, then the warnings (notes and warnings
// that read alike on a line are told once, at most max_notes and max_warnings); every line at most
// `width` columns. Past max_columns devices, or what fits the width, rows and columns are groups
// of devices (by switch, root port or host bridge, at most max_groups) and each cell counts its
// pairs by decision. Memory grows with the notes and groups, not with the pairs.
struct ScreenOptions {
  size_t width = 80;
  size_t max_columns = 16;
  size_t max_groups = 8;
  size_t max_notes = 6;
  size_t max_warnings = 4;
};
void write_decision_screen(std::ostream& out, PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices,
                           const TextStyle& style = {}, const ScreenOptions& options = {});
// {"schema_version": 2, ...head, "devices", "pairs": [{provider, client, decision, rule, authority,
// group}...], "groups": [...]}; with details each pair is pair_decision_json()'s object plus its group.
// Past `most_listed_pairs` pairs (`policy` passes kMostListedPairs, p2pdma_report.h) "pairs" holds
// one element per decision group, {pairs (its count), decision, certain, rule, authority, group},
// and "grouped_pairs" {count, most_listed, note} says so: every pair decided and counted once.
void write_policy_json(std::ostream& out, PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices,
                       const nlohmann::ordered_json& head, bool details, std::uint64_t most_listed_pairs = UINT64_MAX);
}  // namespace p2paudit::policy
