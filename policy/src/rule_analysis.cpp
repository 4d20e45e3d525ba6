// SPDX-License-Identifier: GPL-2.0-or-later
// Shadowed rules and certain answers (rule_analysis.h).
#include "p2paudit/policy/rule_analysis.h"

#include <algorithm>

#include <fmt/format.h>

namespace p2paudit::policy {

namespace {

using Kind = Condition::Kind;

bool is_deciding(const Rule& rule) { return rule.action != Action::kWarn; }

bool same_condition(const Condition& a, const Condition& b) {
  if (a.kind != b.kind || a.children.size() != b.children.size()) return false;
  if (a.kind == Kind::kTest && (a.fact != b.fact || a.op != b.op || a.operands != b.operands ||
                                a.operand_fact != b.operand_fact)) return false;
  for (size_t i = 0; i < a.children.size(); ++i)
    if (!same_condition(a.children[i], b.children[i])) return false;
  return true;
}

// A test evaluated on one known value of its fact.
bool passes(const Condition& test, const FactValue& value) {
  auto listed = [&] { return std::find(test.operands.begin(), test.operands.end(), value) != test.operands.end(); };
  switch (test.op) {  // the common ones without building a fact set
    case Operator::kEq: return value == test.operands.front();
    case Operator::kNe: return value != test.operands.front();
    case Operator::kIn: return listed();
    case Operator::kNotIn: return !listed();
    default: break;
  }
  FactSet one;
  one.set(test.fact, value);
  return test.evaluate(one) == Tri::kTrue;
}

// Every value a test can be true for, when there are finitely many: the operands of eq and in, or
// the values of a bool or enum fact that pass it.
std::optional<std::vector<FactValue>> finite_values(const Condition& test) {
  if (test.op == Operator::kEq || test.op == Operator::kIn) return test.operands;
  const FactSpec* spec = find_fact(test.fact);
  if (!spec || test.op == Operator::kUnknown) return std::nullopt;
  std::vector<FactValue> domain;
  if (spec->type == FactType::kBool) domain = {FactValue(false), FactValue(true)};
  else if (spec->type == FactType::kEnum)
    for (const auto& v : spec->allowed) domain.emplace_back(v);
  else return std::nullopt;
  std::vector<FactValue> out;
  for (const auto& v : domain)
    if (passes(test, v)) out.push_back(v);
  return out;
}

// a <=> b for two operands of one numeric fact (the loader stores both in the fact's type).
int compare(const FactValue& a, const FactValue& b) {
  if (auto* i = std::get_if<std::int64_t>(&a)) {
    auto j = std::get<std::int64_t>(b);
    return *i < j ? -1 : *i > j ? 1 : 0;
  }
  double x = std::get<double>(a), y = std::get<double>(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

bool is_bound(Operator op) { return op == Operator::kLt || op == Operator::kLe || op == Operator::kGt || op == Operator::kGe; }

// Whether every value within bound `later` (x < n, x <= n, x > n, x >= n) passes bound `earlier`.
bool bound_implies(Operator later, const FactValue& n, Operator earlier, const FactValue& m) {
  int c = compare(n, m);
  switch (later) {
    case Operator::kLt: return (earlier == Operator::kLt || earlier == Operator::kLe) && c <= 0;
    case Operator::kLe: return (earlier == Operator::kLt && c < 0) || (earlier == Operator::kLe && c <= 0);
    case Operator::kGt: return (earlier == Operator::kGt || earlier == Operator::kGe) && c >= 0;
    case Operator::kGe: return (earlier == Operator::kGt && c > 0) || (earlier == Operator::kGe && c >= 0);
    default: return false;
  }
}

// Whether value v lies outside bound `later` (so `ne v` holds wherever the bound does).
bool bound_excludes(Operator later, const FactValue& n, const FactValue& v) {
  int c = compare(v, n);
  switch (later) {
    case Operator::kLt: return c >= 0;
    case Operator::kLe: return c > 0;
    case Operator::kGt: return c <= 0;
    case Operator::kGe: return c < 0;
    default: return false;
  }
}

// Test `later` true implies test `earlier` true.
bool test_implies(const Condition& later, const Condition& earlier) {
  if (later.fact != earlier.fact) return false;
  if (same_condition(later, earlier)) return true;
  const bool later_unknown_op = later.op == Operator::kUnknown;
  if (earlier.op == Operator::kUnknown) {
    bool earlier_wants_unknown = std::get<bool>(earlier.operands.front());
    if (later_unknown_op) return std::get<bool>(later.operands.front()) == earlier_wants_unknown;
    return !earlier_wants_unknown;  // a value test that is true has a known fact
  }
  if (later_unknown_op) {
    // `unknown: true` is never followed by a true value test; `unknown: false` only by a test every
    // value of a bool or enum fact passes.
    if (std::get<bool>(later.operands.front())) return false;
    const FactSpec* spec = find_fact(later.fact);
    if (!spec || (spec->type != FactType::kBool && spec->type != FactType::kEnum)) return false;
    std::vector<FactValue> domain;
    if (spec->type == FactType::kBool) domain = {FactValue(false), FactValue(true)};
    else
      for (const auto& v : spec->allowed) domain.emplace_back(v);
    return std::all_of(domain.begin(), domain.end(), [&](const FactValue& v) { return passes(earlier, v); });
  }
  // A comparison with another fact: implied only by its own copy (above), never worked out.
  if (!later.operand_fact.empty() || !earlier.operand_fact.empty()) return false;
  if (auto values = finite_values(later))
    return std::all_of(values->begin(), values->end(), [&](const FactValue& v) { return passes(earlier, v); });
  // Infinitely many values: compare what the two tests say.
  std::vector<FactValue> excluded_by_earlier;  // earlier is `ne v` / `not_in [v...]`
  if (earlier.op == Operator::kNe || earlier.op == Operator::kNotIn) excluded_by_earlier = earlier.operands;
  if (is_bound(later.op)) {
    const FactValue& n = later.operands.front();
    if (is_bound(earlier.op)) return bound_implies(later.op, n, earlier.op, earlier.operands.front());
    if (!excluded_by_earlier.empty())
      return std::all_of(excluded_by_earlier.begin(), excluded_by_earlier.end(),
                         [&](const FactValue& v) { return bound_excludes(later.op, n, v); });
    return false;
  }
  if ((later.op == Operator::kNe || later.op == Operator::kNotIn) && !excluded_by_earlier.empty())
    return std::all_of(excluded_by_earlier.begin(), excluded_by_earlier.end(), [&](const FactValue& v) {
      return std::find(later.operands.begin(), later.operands.end(), v) != later.operands.end();
    });
  return false;
}

// condition_covers() with a bound on the work: the alternatives below can multiply on wide trees,
// and running out of budget answers "not shown", which is always allowed.
bool covers(const Condition& earlier, const Condition& later, int& budget) {
  if (--budget < 0) return false;
  if (earlier.kind == Kind::kAlways) return true;
  if (same_condition(earlier, later)) return true;
  auto each = [&](const std::vector<Condition>& v, auto pred) { return std::all_of(v.begin(), v.end(), pred); };
  auto some = [&](const std::vector<Condition>& v, auto pred) { return std::any_of(v.begin(), v.end(), pred); };
  // earlier = all[a...]: true when every a is.
  if (earlier.kind == Kind::kAll && each(earlier.children, [&](const Condition& a) { return covers(a, later, budget); }))
    return true;
  // later = any[b...]: whichever b made it true must be covered.
  if (later.kind == Kind::kAny && each(later.children, [&](const Condition& b) { return covers(earlier, b, budget); }))
    return true;
  // later = all[b...]: every b is true, so one covered b is enough.
  if (later.kind == Kind::kAll && some(later.children, [&](const Condition& b) { return covers(earlier, b, budget); }))
    return true;
  // earlier = any[a...]: one a that is true is enough.
  if (earlier.kind == Kind::kAny && some(earlier.children, [&](const Condition& a) { return covers(a, later, budget); }))
    return true;
  if (earlier.kind == Kind::kTest && later.kind == Kind::kTest) return test_implies(later, earlier);
  // `not`: Kleene negation does not turn implication around (an unknown fact stays unknown), so a
  // negated condition covers only its own copy, handled above.
  return false;
}

}  // namespace

// The work one coverage question may take, and all of them together for one rule set: a
// stranger's file of thousands of rules is linted in seconds, and what is left unexamined when the
// budget runs out is "not shown", never a warning.
constexpr int kStepsPerQuestion = 100000;
constexpr long kStepsPerRuleSet = 50'000'000;

bool condition_covers(const Condition& earlier, const Condition& later) {
  int budget = kStepsPerQuestion;
  return covers(earlier, later, budget);
}

std::vector<ShadowedRule> find_shadowed_rules(const RuleSet& set) {
  const auto& rules = set.rules();
  std::vector<ShadowedRule> out;
  long left = kStepsPerRuleSet;
  for (size_t i = 0; i < rules.size() && left > 0; ++i) {
    if (!is_deciding(rules[i])) continue;
    for (size_t j = 0; j < i && left > 0; ++j) {
      if (!is_deciding(rules[j])) continue;
      int budget = kStepsPerQuestion;
      bool covered = covers(rules[j].when, rules[i].when, budget);
      left -= kStepsPerQuestion - std::max(budget, 0);
      if (covered) {
        out.push_back({i, j});
        break;
      }
    }
  }
  return out;
}

std::vector<Diagnostic> shadow_warnings(const RuleSet& set, const std::set<std::string>& files) {
  const auto& rules = set.rules();
  const auto& from = set.rule_files();
  std::vector<Diagnostic> out;
  long left = kStepsPerRuleSet;  // for the hints; out of budget, a hint is not given (never a wrong one)
  for (const auto& s : find_shadowed_rules(set)) {
    if (!files.contains(from[s.shadowed]) && !files.contains(from[s.shadowing])) continue;
    const Rule& hidden = rules[s.shadowed];
    const Rule& first = rules[s.shadowing];
    std::string where = from[s.shadowing].empty() ? std::string("")
                                                   : fmt::format(", {}:{}:{}", from[s.shadowing], first.line, first.column);
    std::string message = fmt::format("rule '{}' ({}, position {} of {}) can never decide: rule '{}' (position {}{}) is "
                                      "true whenever it is and decides first",
                                      hidden.id, to_string(hidden.action), s.shadowed + 1, rules.size(), first.id,
                                      s.shadowing + 1, where);
    // A linted rule behind a rule of the context (the default policy): its file is placed after
    // the defaults, since a before-defaults file's rules precede every one of theirs. Placed in
    // front it would decide first, unless a linted rule before it covers it too, which would still
    // precede it there: then the placement would not help, and the hint is not given.
    if (files.contains(from[s.shadowed]) && !files.contains(from[s.shadowing])) {
      bool linted_cover = false;
      for (size_t k = s.shadowing + 1; k < s.shadowed && !linted_cover; ++k) {
        if (!is_deciding(rules[k]) || !files.contains(from[k])) continue;
        int budget = kStepsPerQuestion;
        // Not shown within the budget counts as covered: no hint rather than a wrong one.
        linted_cover = covers(rules[k].when, hidden.when, budget) || budget < 0 || left <= 0;
        left -= kStepsPerQuestion - std::max(budget, 0);
      }
      if (!linted_cover && left > 0)
        message += "; to let it decide before the default policy's rules (the measurement rules included), give "
                   "its file `placement: before-defaults`";
    }
    Diagnostic d{from[s.shadowed], std::max(hidden.line, 1), std::max(hidden.column, 1), std::move(message)};
    d.warning = true;
    out.push_back(std::move(d));
  }
  return out;
}

const char* to_string(Answer a) {
  switch (a) {
    case Answer::kYes: return "yes";
    case Answer::kNo: return "no";
    case Answer::kUnknown: return "unknown";
  }
  return "?";
}

Answer answer(const Decision& decision, const std::function<bool(Action)>& yes) {
  const auto possible = actions_in(decision.possible | action_bit(decision.action));
  const bool all = std::all_of(possible.begin(), possible.end(), yes);
  const bool none = std::none_of(possible.begin(), possible.end(), yes);
  return all ? Answer::kYes : none ? Answer::kNo : Answer::kUnknown;
}

}  // namespace p2paudit::policy
