// SPDX-License-Identifier: GPL-2.0-or-later
// Reasoning about a rule set rather than running it: which deciding rules can never decide
// (`rules lint` warns about them), and whether a decision's yes/no answer could change once the
// facts a pair lacks were known (`check` and `policy --fail-on` exit 3 then). docs/policy-rules.md
// ("Shadowed rules") and docs/policy.md ("check exit status") describe both.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "p2paudit/policy/rules.h"

namespace p2paudit::policy {

// True only when `earlier` is true on every fact set on which `later` is true (Kleene logic: true,
// not merely "not false"). Sound, not complete: false means "not shown", never a false claim.
// Shown by the structure of the trees: `always`; every conjunct of an `all` covered; some operand
// of an `any` covering; the same test; or a test on the same fact whose values imply the other's
// (an `eq`/`in` value that passes the other test, every value of a bool or enum fact, numeric
// bounds, `ne`/`not_in` sets).
bool condition_covers(const Condition& earlier, const Condition& later);

// A deciding rule (peer, host_staged, deny) that can never decide: an earlier deciding rule's
// `when` covers its `when`, so that rule decides first whenever this one would fire.
struct ShadowedRule {
  size_t shadowed = 0;   // index into RuleSet::rules()
  size_t shadowing = 0;  // the first earlier deciding rule that covers it
};
// The work is bounded (per question and per rule set); what is left unexamined is not reported.
std::vector<ShadowedRule> find_shadowed_rules(const RuleSet& rules);

// Lint warnings (Diagnostic::warning set) for the shadowed rules where the shadowed or the
// shadowing rule comes from one of `files` (RuleSet::rule_files(): the linted files; the other
// rules are the context they are linted in, the default policy), at the shadowed rule's
// FILE:LINE:COLUMN, naming the shadowing rule, its place and its 1-based position in the set. A
// linted rule shadowed by a context rule, and by no linted rule before it, is told that
// `placement: before-defaults` would let it decide; one shadowed by a linted rule is told nothing
// more (placement moves a whole file, so the rule that covers it would still come first).
std::vector<Diagnostic> shadow_warnings(const RuleSet& rules, const std::set<std::string>& files);

// A yes/no question about a decision ("does it meet --require peer?", "is it deny?") answered for
// certain or not: kYes when every decision the unknown facts still allow (Decision::possible)
// answers yes, kNo when none does, kUnknown otherwise (`check` and `policy --fail-on` exit 3).
enum class Answer { kYes, kNo, kUnknown };
const char* to_string(Answer a);  // "yes", "no", "unknown"
Answer answer(const Decision& decision, const std::function<bool(Action)>& yes);

}  // namespace p2paudit::policy
