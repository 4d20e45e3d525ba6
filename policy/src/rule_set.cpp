// SPDX-License-Identifier: GPL-2.0-or-later
// Combining rule files and deciding a pair.
#include <algorithm>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "p2paudit/policy/rules.h"

namespace p2paudit::policy {

const char* to_string(Action a) {
  switch (a) {
    case Action::kPeer: return "peer";
    case Action::kHostStaged: return "host_staged";
    case Action::kDeny: return "deny";
    case Action::kWarn: return "warn";
  }
  return "?";
}

const char* to_string(Authority a) {
  switch (a) {
    case Authority::kKernel: return "kernel";
    case Authority::kVendorDriver: return "vendor-driver";
    case Authority::kVendorFabric: return "vendor-fabric";
    case Authority::kPlatform: return "platform";
    case Authority::kMeasurement: return "measurement";
  }
  return "?";
}

const char* to_string(Placement p) {
  return p == Placement::kBeforeDefaults ? "before-defaults" : "after-defaults";
}

void RuleSet::add(RuleFile file) {
  if (file.replace) {
    rules_.clear();
    files_.clear();
    placed_in_front_ = 0;
  }
  const bool in_front = file.placement == Placement::kBeforeDefaults;
  for (auto& rule : file.rules) {
    rule.advisory = file.kind == RuleFileKind::kAdvisories;
    auto same_id = std::find_if(rules_.begin(), rules_.end(), [&](const Rule& r) { return r.id == rule.id; });
    size_t at = static_cast<size_t>(same_id - rules_.begin());
    if (same_id != rules_.end() && !in_front) {  // replaces the rule where it stood
      *same_id = std::move(rule);
      files_[at] = file.path;
      continue;
    }
    if (same_id != rules_.end()) {  // placed: the old rule leaves its place
      rules_.erase(same_id);
      files_.erase(files_.begin() + static_cast<std::ptrdiff_t>(at));
      if (at < placed_in_front_) --placed_in_front_;
    }
    size_t where = in_front ? placed_in_front_++ : rules_.size();
    rules_.insert(rules_.begin() + static_cast<std::ptrdiff_t>(where), std::move(rule));
    files_.insert(files_.begin() + static_cast<std::ptrdiff_t>(where), file.path);
  }
}

RuleSet RuleSet::load(const std::vector<std::string>& paths) {
  RuleSet set;
  for (const auto& path : paths) set.add(load_rule_file(path));
  return set;
}

namespace {

FiredRule fire(const Rule& rule, const FactSet& facts) {
  return {rule.id, rule.action, rule.reason.render(facts), rule.remedy.render(facts), rule.authority, rule.source};
}

// Whether a rule's refusal concerns a pair decided so: the kernel's P2PDMA governs neither a
// pair that a vendor driver decides itself nor one whose traffic a vendor fabric carries.
bool governs(const Rule& rule, const Decision& d) {
  bool vendor_decides = d.authority == Authority::kVendorDriver || d.authority == Authority::kVendorFabric;
  return !(vendor_decides && rule.authority == Authority::kKernel);
}

}  // namespace

Action safest(ActionSet set) {
  for (Action a : {Action::kDeny, Action::kHostStaged, Action::kPeer})
    if (set & action_bit(a)) return a;
  return Action::kHostStaged;  // an empty set: nothing is known to hold, so stage
}

std::vector<Action> actions_in(ActionSet set) {
  std::vector<Action> out;
  for (Action a : {Action::kDeny, Action::kHostStaged, Action::kPeer})
    if (set & action_bit(a)) out.push_back(a);
  return out;
}

namespace {

// The facts whose being unknown leaves `when` open (Condition::evaluate_open()): only operands
// that are open themselves matter.
void collect_open_facts(const Condition& when, const FactSet& facts, std::string_view open_fact,
                        std::vector<std::string>& out) {
  if (when.evaluate_open(facts, open_fact) != Tri::kUnknown) return;
  if (when.kind == Condition::Kind::kTest) {
    if (when.operand_fact.empty() || !facts.get(when.fact) || when.fact == open_fact) out.push_back(when.fact);
    if (!when.operand_fact.empty() && (!facts.get(when.operand_fact) || when.operand_fact == open_fact))
      out.push_back(when.operand_fact);
    return;
  }
  for (const auto& child : when.children) collect_open_facts(child, facts, open_fact, out);
}

void sort_unique(std::vector<std::string>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// The facts a user learns to settle open ones: a derived fact is settled by learning what it is
// worked out from, so those of its inputs that are unknown are named instead. Sorted.
std::vector<std::string> facts_to_learn(const std::vector<std::string>& open_facts, const FactSet& facts) {
  std::vector<std::string> out;
  for (const auto& fact : open_facts) {
    size_t before = out.size();
    for (const auto& input : derived_from(fact))
      if (!facts.get(input)) out.push_back(input);
    if (out.size() == before) out.push_back(fact);
  }
  sort_unique(out);
  return out;
}

}  // namespace

Decision RuleSet::decide(const FactSet& facts) const {
  Decision d;
  bool decided = false, past_findings = false;
  for (const auto& rule : rules_) {
    bool decisive = rule.action != Action::kWarn;
    if (decided && decisive) {
      // No longer deciding, but a refusal that holds too is a second problem with a fix of its own,
      // up to the first peer rule that holds: with the problems before it fixed, the pair is peer.
      if (past_findings || rule.when.evaluate(facts) != Tri::kTrue) continue;
      if (rule.action == Action::kPeer) past_findings = true;
      else if (governs(rule, d)) d.findings.push_back(fire(rule, facts));
      continue;
    }
    switch (rule.when.evaluate(facts)) {
      case Tri::kTrue: {
        FiredRule fired = fire(rule, facts);
        if (decisive) {
          decided = true;
          d.action = rule.action;
          d.rule = rule.id;
          d.authority = rule.authority;
          d.reason = fired.reason;
          d.remedy = fired.remedy;
        }
        d.fired.push_back(std::move(fired));
        break;
      }
      case Tri::kUnknown:
        d.undecided_rules.push_back(rule.id);
        rule.when.collect_unknown_facts(facts, d.unknown_facts);
        break;
      case Tri::kFalse:
        break;
    }
  }
  if (!decided) d.reason = kNoRuleDecided;
  sort_unique(d.unknown_facts);

  // What the unknown facts still allow: walk the deciding rules again as they could turn out
  // (rule_analysis.h answer() once did this for `check` alone; now every output acts on it).
  std::string_view open_fact;
  if (const FactValue* map_type = facts.get("kernel.map_type");
      map_type && std::holds_alternative<std::string>(*map_type) && std::get<std::string>(*map_type) == "UNKNOWN")
    open_fact = "kernel.map_type";  // the analysis could not tell: any map type may be the truth
  std::vector<const Rule*> open_rules;  // deciding rules before the first that surely holds
  bool settled = false;
  for (const auto& rule : rules_) {
    if (rule.action == Action::kWarn) continue;
    Tri t = rule.when.evaluate_open(facts, open_fact);
    if (t == Tri::kFalse) continue;
    d.possible |= action_bit(rule.action);
    if (t == Tri::kTrue) {
      settled = true;
      break;
    }
    open_rules.push_back(&rule);
  }
  if (!settled) d.possible |= action_bit(Action::kHostStaged);  // no rule surely decides: the fallback
  d.possible |= action_bit(d.action);
  if (d.possible == action_bit(d.action)) return d;

  // Uncertain: act on the safest decision still possible. Where an open rule gives it and the rule
  // that holds does not, that open rule is the decision shown, with its texts.
  const Action safe = safest(d.possible);
  if (safe != d.action) {
    auto first = std::find_if(open_rules.begin(), open_rules.end(), [&](const Rule* r) { return r->action == safe; });
    d.alternatives.push_back({d.action, d.rule, d.authority});
    if (first != open_rules.end()) {
      const Rule& rule = **first;
      d.action = rule.action;
      d.rule = rule.id;
      d.authority = rule.authority;
      // Its reason states what it tests as fact: say which of that is not known.
      std::vector<std::string> open_facts;
      collect_open_facts(rule.when, facts, open_fact, open_facts);
      d.reason = fmt::format("may hold (not known here: {}): {}", fmt::join(facts_to_learn(open_facts, facts), ", "),
                             rule.reason.render(facts));
      d.remedy = rule.remedy.render(facts);
    } else {  // only the fallback gives it
      d.action = safe;
      d.rule.clear();
      d.authority.reset();
      d.reason = kNoRuleDecided;
      d.remedy.clear();
    }
  }
  for (Action a : actions_in(d.possible)) {
    if (a == d.action || std::any_of(d.alternatives.begin(), d.alternatives.end(), [&](const auto& x) { return x.action == a; }))
      continue;
    auto first = std::find_if(open_rules.begin(), open_rules.end(), [&](const Rule* r) { return r->action == a; });
    if (first != open_rules.end()) d.alternatives.push_back({a, (*first)->id, (*first)->authority});
    else d.alternatives.push_back({a, "", std::nullopt});
  }
  std::vector<std::string> open_facts;
  for (const Rule* rule : open_rules) collect_open_facts(rule->when, facts, open_fact, open_facts);
  d.decisive_unknown_facts = facts_to_learn(open_facts, facts);
  return d;
}

namespace {

// The facts a condition reads, in no order, repeats included.
void facts_read(const Condition& when, std::vector<std::string>& out) {
  std::vector<const Condition*> todo = {&when};
  while (!todo.empty()) {  // conditions nest as deep as the loader allows
    const Condition* c = todo.back();
    todo.pop_back();
    if (c->kind == Condition::Kind::kTest) out.push_back(c->fact);
    if (!c->operand_fact.empty()) out.push_back(c->operand_fact);
    for (const auto& child : c->children) todo.push_back(&child);
  }
}

}  // namespace

bool is_machine_fact(std::string_view name) {
  return name.starts_with("platform.") || name.starts_with("runtime.") || name == "kernel.release" ||
         name == "kernel.config_p2pdma";
}

bool RuleSet::is_machine_advisory(const Rule& rule) {
  if (!rule.advisory || rule.action != Action::kWarn) return false;
  std::vector<std::string> facts;
  facts_read(rule.when, facts);
  // Its texts too: told once, they are rendered from the machine's facts alone.
  for (const Template* t : {&rule.reason, &rule.remedy})
    for (const auto& piece : t->pieces)
      if (!piece.fact.empty()) facts.push_back(piece.fact);
  return std::all_of(facts.begin(), facts.end(), [](const std::string& f) { return is_machine_fact(f); });
}

std::vector<FiredRule> RuleSet::machine_advisories(const FactSet& machine) const {
  std::vector<FiredRule> out;
  for (const auto& rule : rules_)
    if (is_machine_advisory(rule) && rule.when.evaluate(machine) == Tri::kTrue) out.push_back(fire(rule, machine));
  return out;
}

std::vector<std::string> RuleSet::condition_facts() const {
  std::vector<std::string> out;
  for (const auto& rule : rules_) facts_read(rule.when, out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> Decision::rule_ids() const {
  std::vector<std::string> out;
  for (const auto& f : fired) out.push_back(f.id);
  return out;
}

std::vector<std::string> Decision::reasons() const {
  std::vector<std::string> out;
  for (const auto& f : fired) out.push_back(f.reason);
  return out;
}

std::vector<std::string> Decision::remedies() const {
  std::vector<std::string> out;
  for (const auto& f : fired)
    if (!f.remedy.empty()) out.push_back(f.remedy);
  return out;
}

nlohmann::json possible_json(const Decision& d) {
  nlohmann::json out = nlohmann::json::array();
  for (Action a : actions_in(d.possible | action_bit(d.action))) out.push_back(to_string(a));
  return out;
}

nlohmann::json if_known_json(const Decision& d) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : d.alternatives)
    out.push_back({{"decision", to_string(a.action)},
                   {"rule", a.rule.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.rule)},
                   {"authority", a.authority ? nlohmann::json(to_string(*a.authority)) : nlohmann::json(nullptr)}});
  return out;
}

nlohmann::json settled_by_json(const Decision& d) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& fact : d.decisive_unknown_facts) out.push_back({{"fact", fact}, {"how", how_to_learn(fact)}});
  return out;
}

nlohmann::json decision_to_json(const Decision& d) {
  auto optional_authority = [](const std::optional<Authority>& a) -> nlohmann::json {
    return a ? nlohmann::json(to_string(*a)) : nlohmann::json(nullptr);
  };
  auto rules_json = [&](const std::vector<FiredRule>& rules) {
    auto out = nlohmann::json::array();
    for (const auto& f : rules)
      out.push_back({{"id", f.id},
                     {"action", to_string(f.action)},
                     {"reason", f.reason},
                     {"remedy", f.remedy},
                     {"authority", optional_authority(f.authority)},
                     {"source", f.source}});
    return out;
  };
  return {{"decision", to_string(d.action)},
          {"certain", d.certain()},
          {"possible", possible_json(d)},
          {"if_known", if_known_json(d)},
          {"settled_by", settled_by_json(d)},
          {"rule", d.rule.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.rule)},
          {"authority", optional_authority(d.authority)},
          {"reason", d.reason},
          {"remedy", d.remedy},
          {"rules", d.rule_ids()},
          {"reasons", d.reasons()},
          {"remedies", d.remedies()},
          {"fired", rules_json(d.fired)},
          {"findings", rules_json(d.findings)},
          {"undecided_rules", d.undecided_rules},
          {"unknown_facts", d.unknown_facts}};
}

}  // namespace p2paudit::policy
