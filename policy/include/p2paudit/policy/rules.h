// SPDX-License-Identifier: GPL-2.0-or-later
// Policy rules: YAML files of rules that turn a pair's facts (facts.h) into a decision — try peer
// DMA, stage through host memory, or refuse — with the reasons. docs/policy-rules.md is the
// reference for the language; this header is the engine's API.
//
// Loading is linting: load_rule_file() rejects anything it does not fully understand with a
// RuleFileError listing every problem as "FILE:LINE:COLUMN: message", so a rule is never ignored.
#pragma once

#include <cstdint>
#include <iterator>
#include <locale>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/errors.h"
#include "p2paudit/policy/facts.h"

namespace p2paudit::policy {

// Kleene's three-valued logic: a test on an unknown fact is kUnknown, and only kTrue fires a rule.
enum class Tri { kFalse, kTrue, kUnknown };
const char* to_string(Tri t);  // "false", "true", "unknown"

enum class Action { kPeer, kHostStaged, kDeny, kWarn };
const char* to_string(Action a);  // "peer", "host_staged", "deny", "warn"

// A set of deciding actions (peer, host_staged, deny), one bit each.
using ActionSet = std::uint8_t;
constexpr ActionSet action_bit(Action a) { return static_cast<ActionSet>(1u << static_cast<unsigned>(a)); }
// The safest action of a set that is not empty: deny, then host_staged, then peer. What is acted on
// when unknown facts leave several decisions open.
Action safest(ActionSet set);
// The set's actions, safest first.
std::vector<Action> actions_in(ActionSet set);

// Whose logic the decision rests on: the kernel's P2PDMA, a vendor driver's own peer logic, a
// vendor fabric that bypasses PCIe (NVLink, XGMI), the platform (VM, CPU, firmware), or a
// measurement on this machine (`probe --copy`), which outranks every prediction.
enum class Authority { kKernel, kVendorDriver, kVendorFabric, kPlatform, kMeasurement };
const char* to_string(Authority a);  // "kernel", "vendor-driver", "vendor-fabric", "platform", "measurement"

enum class Operator { kEq, kNe, kIn, kNotIn, kLt, kLe, kGt, kGe, kRegex, kContains, kUnknown };
const char* to_string(Operator op);  // the YAML spelling: "eq", "not_in", "unknown", ...

// std::regex_traits<char>, less two costs of compiling a bracket expression ("[0-9]"): libstdc++'s
// bracket matcher caches its answer for each of the 256 characters, asking the traits for every
// one of them isctype() and transform_primary(), which look the locale's facets up and collate each
// time although a pattern without [[:class:]] or [[=x=]] uses neither answer. Those two answer the
// same, faster, where they can tell cheaply that the answer is the base's.
class FactRegexTraits : public std::regex_traits<char> {
 public:
  FactRegexTraits() { remember_facets(); }
  locale_type imbue(locale_type locale);
  // No class asked for: never a member (the base's answer for an empty mask too).
  bool isctype(char c, char_class_type mask) const {
    return mask == char_class_type() ? false : std::regex_traits<char>::isctype(c, mask);
  }
  // One character in the classic locale: its lower case, which the classic collation keeps as
  // it is (tests/policy_rules_test.cpp compares every character with the base's answer).
  template <typename Iterator>
  string_type transform_primary(Iterator first, Iterator last) const {
    if (classic_ && std::next(first) == last) return string_type(1, ctype_->tolower(*first));
    return std::regex_traits<char>::transform_primary(first, last);
  }

 private:
  const std::ctype<char>* ctype_ = nullptr;
  bool classic_ = false;
  void remember_facets();
};
using FactRegex = std::basic_regex<char, FactRegexTraits>;

// A rule's `when`, as a tree. Built only by the loader, which has checked every test against the
// fact catalogue, so evaluation never meets a type it does not expect.
struct Condition {
  enum class Kind { kAlways, kAll, kAny, kNot, kTest };
  Kind kind = Kind::kAlways;
  std::vector<Condition> children;  // kAll, kAny: the operands; kNot: the one negated

  // kTest: `fact` `op` `operands`. One operand, except for in/not_in (the set).
  std::string fact;
  Operator op = Operator::kEq;
  std::vector<FactValue> operands;
  // lt, le, gt, ge against another fact's value (`FACT: {lt: {fact: OTHER}}`): OTHER's name, and
  // `operands` is empty. Unknown when either fact is.
  std::string operand_fact;
  std::shared_ptr<const FactRegex> regex;  // kRegex, compiled at load time (once per pattern and file)

  // std::regex matches by recursion, one frame per subject character: a fact longer than this
  // (read from a snapshot, so a stranger's) is not matched and the test is unknown, never a crash.
  static constexpr size_t kMaxRegexSubject = 4096;

  Tri evaluate(const FactSet& facts) const;
  // evaluate() as it could turn out once the facts the set lacks are known: a test of a value of an
  // unknown fact is unknown, and so is any test of `open_fact` when it is given (kernel.map_type
  // UNKNOWN: the analysis could not tell, so any map type may be the truth). `unknown: true|false`
  // is a test of the input, which is known: a rule that decides where the capture lacks a fact (a
  // prediction, a fallback) holds for certain, and the open rules ahead of it still count. kTrue:
  // true whatever the unknown facts are.
  Tri evaluate_open(const FactSet& facts, std::string_view open_fact = {}) const;

  // Appends the facts whose being unknown left this condition kUnknown: knowing them could have
  // made it true or false. Appends nothing when evaluate() is not kUnknown.
  void collect_unknown_facts(const FactSet& facts, std::vector<std::string>& out) const;
};

// A reason or remedy: text with {fact.name} holes, {fact.name:size} for a byte count read as
// "32 GiB", and {{ }} for literal braces. An unknown fact renders as "unknown".
struct Template {
  struct Piece {
    std::string literal;  // used when fact is empty
    std::string fact;
    bool as_size = false;
  };
  std::string text;  // as written
  std::vector<Piece> pieces;

  bool empty() const { return text.empty(); }
  std::string render(const FactSet& facts) const;
};

struct Rule {
  std::string id;  // [a-z0-9-]+, unique across the rule set
  std::string description;
  Condition when;
  Action action = Action::kWarn;
  Template reason;
  Template remedy;                     // may be empty
  std::optional<Authority> authority;  // what the decision rests on, when the rule says
  std::string source;                  // public reference; required in advisories files
  std::string origin;                  // "FILE:LINE" where the rule starts
  bool advisory = false;               // from an advisories file (set by RuleSet::add)
  int line = 0, column = 0;            // where the rule starts in its file (1-based; 0: not from a file)
};

// kAdvisories: known problems from public reports; every rule must carry a `source`.
enum class RuleFileKind { kPolicy, kAdvisories };

// Where a file's rules stand in the rule set (the file's top-level `placement:`).
// kAfterDefaults (the default): appended after the rules loaded before it, a rule whose id was
// already loaded replacing that rule where it stood. kBeforeDefaults: in front of every rule of the
// files not so placed (the default policy, the advisories, other --rules files), after the rules of
// earlier before-defaults files; a rule whose id was already loaded moves there.
enum class Placement { kAfterDefaults, kBeforeDefaults };
const char* to_string(Placement p);  // "after-defaults", "before-defaults"

struct RuleFile {
  std::string path;
  std::string description;
  RuleFileKind kind = RuleFileKind::kPolicy;
  bool replace = false;  // drop every rule loaded before this file
  Placement placement = Placement::kAfterDefaults;
  std::vector<Rule> rules;
};

// One lint finding. Line and column are 1-based.
struct Diagnostic {
  std::string file;
  int line = 1;
  int column = 1;
  std::string message;
  bool warning = false;     // a lint warning (a shadowed rule), not an error: the file still loads
  std::string str() const;  // "FILE:LINE:COLUMN: message", "FILE:LINE:COLUMN: warning: message"
};

// what() is every diagnostic's str(), one per line (no trailing newline).
class RuleFileError : public InputError {
 public:
  explicit RuleFileError(std::vector<Diagnostic> diagnostics);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

// Read and check a rule file. Throws RuleFileError for bad content, InputError when unreadable,
// not a regular file (a FIFO, a directory, /dev/zero) or larger than kMaxRuleFileBytes. The YAML
// is read strictly (strict_yaml.h): one document, no duplicate keys, bounded aliases and nesting.
RuleFile load_rule_file(const std::string& path);
// The same for text already in memory; `file` names it in diagnostics.
RuleFile parse_rule_file(std::string_view text, const std::string& file);

// Facts that describe the machine as a whole, the same for every pair: platform.*, runtime.*,
// kernel.release and kernel.config_p2pdma.
bool is_machine_fact(std::string_view name);

// A rule whose `when` was true, with its texts rendered for this pair.
struct FiredRule {
  std::string id;
  Action action = Action::kWarn;
  std::string reason;
  std::string remedy;  // "" when the rule has none
  std::optional<Authority> authority;
  std::string source;
};

// The policy's answer for one pair.
struct Decision {
  Action action = Action::kHostStaged;  // never kWarn
  std::string rule;                     // the deciding rule's id; "" when no rule decided
  std::optional<Authority> authority;   // the deciding rule's authority
  std::string reason;                   // the deciding rule's reason, or kNoRuleDecided
  std::string remedy;
  std::vector<FiredRule> fired;         // every rule that fired, warns included, in evaluation order
  // Later host_staged or deny rules whose `when` also holds, up to the first later peer rule that
  // holds: problems of the pair that the deciding rule hides (an unassigned BAR behind a kernel
  // refusal), each with its own fix. A kernel rule is none where a vendor driver or fabric decides.
  std::vector<FiredRule> findings;
  std::vector<std::string> undecided_rules;  // rules reached whose `when` was unknown
  std::vector<std::string> unknown_facts;    // facts that left those rules unknown, sorted

  // Decisions under uncertainty (docs/policy.md, "Uncertain decisions"). The decisions the unknown
  // facts still allow: each deciding rule before the first that holds whatever they turn out to be,
  // whose `when` they leave open, adds its action; with no rule that surely holds, the fallback
  // host_staged. `action` is the safest of them, and `rule` the rule that gives it: the rule that
  // holds when it gives that action, else the first open rule that does.
  ActionSet possible = 0;
  bool certain() const { return possible == action_bit(action); }
  // When not certain: every other decision still possible, each by the rule giving it ("" for the
  // fallback): first the rule that holds where the decision shown is not its, then the others, safest
  // first, each by the first open rule giving it.
  struct Alternative {
    Action action = Action::kPeer;
    std::string rule;
    std::optional<Authority> authority;
  };
  std::vector<Alternative> alternatives;
  // When not certain: the facts whose being unknown leaves those rules open, sorted; knowing them
  // settles the decision (how to learn each: how_to_learn(), facts.h). Empty when certain.
  std::vector<std::string> decisive_unknown_facts;

  std::vector<std::string> rule_ids() const;  // of `fired`
  std::vector<std::string> reasons() const;   // of `fired`, same order
  std::vector<std::string> remedies() const;  // the non-empty remedies of `fired`
};

inline constexpr std::string_view kNoRuleDecided = "no rule decided";

// {"decision", "certain", "possible", "if_known", "settled_by", "rule", "authority", "reason",
//  "remedy", "rules", "reasons", "remedies", "fired", "findings", "undecided_rules", "unknown_facts"};
// absent rule/authority are null. "possible" lists the decisions still possible, safest first;
// "if_known" each other one with its rule; "settled_by" the facts that settle it, each {fact, how}.
nlohmann::json decision_to_json(const Decision& d);
// Its uncertainty parts alone: "possible", "if_known" and "settled_by" (the policy's groups carry them too).
nlohmann::json possible_json(const Decision& d);
nlohmann::json if_known_json(const Decision& d);
nlohmann::json settled_by_json(const Decision& d);

// Rule files combined in order. A rule whose id an earlier file already used replaces that rule
// where it stood; a file with `replace: true` first drops everything loaded before it. A file
// placed before the defaults (Placement) goes in front of the rules of the files not so placed.
class RuleSet {
 public:
  void add(RuleFile file);
  static RuleSet load(const std::vector<std::string>& paths);

  const std::vector<Rule>& rules() const { return rules_; }
  // The file each rule came from (the RuleFile's path), parallel to rules().
  const std::vector<std::string>& rule_files() const { return files_; }

  // Rules are evaluated in order. Every warn rule is evaluated; the first peer, host_staged or
  // deny rule whose `when` is true decides; of the later ones, those that would stage or refuse
  // and are also true become the decision's findings, until a later peer rule is true (past it the
  // pair would be peer once the problems before were fixed). With none, the
  // decision is host_staged, reason kNoRuleDecided: staging works wherever each device can reach
  // system memory, so it is the answer that is safe without evidence. Where unknown facts leave an
  // earlier rule open whose action is safer, that rule's action is the decision, uncertain
  // (Decision::possible): what is not known never becomes a yes.
  Decision decide(const FactSet& facts) const;
  // Every fact some rule's `when` reads, sorted: a decision depends on these alone (the texts
  // may name more).
  std::vector<std::string> condition_facts() const;

  // Whether a rule is an advisory about the machine: a warn rule of an advisories file whose `when`
  // and texts read only facts of the machine (is_machine_fact()), such as a runtime's version or a
  // measurement, so that it holds or not for the machine as a whole, with one device as with many.
  static bool is_machine_advisory(const Rule& rule);
  // Those that hold on the machine's facts (the facts every pair shares), in rule order, texts
  // rendered from them: told once for the machine. decide() still fires them on every pair.
  std::vector<FiredRule> machine_advisories(const FactSet& machine) const;

 private:
  std::vector<Rule> rules_;
  std::vector<std::string> files_;  // parallel to rules_
  size_t placed_in_front_ = 0;      // rules_[0, placed_in_front_) came from before-defaults files
};

}  // namespace p2paudit::policy
