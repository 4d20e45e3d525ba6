// SPDX-License-Identifier: GPL-2.0-or-later
#include "notes.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace p2paudit::policy {

const char* short_code(Action a) {
  switch (a) {
    case Action::kPeer: return "PEER";
    case Action::kHostStaged: return "HOST";
    case Action::kDeny: return "DENY";
    case Action::kWarn: break;
  }
  return "?";
}

std::string cell_code(Action a, bool certain) { return certain ? short_code(a) : fmt::format("{}?", short_code(a)); }

std::string also_possible_text(const Decision& d) {
  if (d.certain()) return "";
  std::vector<std::string> others;
  for (const auto& a : d.alternatives)
    others.push_back(fmt::format("{} ({})", to_string(a.action), a.rule.empty() ? "no rule decided" : "rule " + a.rule));
  // What else is possible first: a line the screen shortens keeps its leading clause.
  return fmt::format("{} {} possible too; {} until the facts that settle it are known", fmt::join(others, " or "),
                     others.size() == 1 ? "is" : "are", to_string(d.action));
}

std::string settle_text_of(const std::vector<std::string>& facts) {
  // Facts learnt the same way are told together, the way once.
  std::vector<std::pair<std::string, std::vector<std::string>>> by_way;
  for (const auto& fact : facts) {
    std::string way = how_to_learn(fact);
    auto it = std::find_if(by_way.begin(), by_way.end(), [&](const auto& w) { return w.first == way; });
    if (it == by_way.end()) by_way.push_back({std::move(way), {fact}});
    else it->second.push_back(fact);
  }
  std::vector<std::string> told;
  for (const auto& [way, named] : by_way) told.push_back(fmt::format("{} ({})", fmt::join(named, ", "), way));
  return told.empty() ? std::string("no single fact: see `p2paudit explain`") : fmt::format("{}", fmt::join(told, "; "));
}

std::string settle_text(const Decision& d) { return d.certain() ? "" : settle_text_of(d.decisive_unknown_facts); }

bool told_for_machine(const std::vector<FiredRule>& advisories, const std::string& id) {
  return std::any_of(advisories.begin(), advisories.end(), [&](const FiredRule& a) { return a.id == id; });
}

std::string machine_advisories_text(const std::vector<FiredRule>& advisories) {
  if (advisories.empty()) return "";
  std::string out = "\nThis machine (whatever the pairs):\n";
  for (const auto& a : advisories) {
    out += fmt::format("  [{}] {}\n", a.id, a.reason);
    if (!a.remedy.empty()) out += fmt::format("    fix: {}\n", a.remedy);
  }
  return out;
}

std::string group_heading(const DecisionGroup& g) {
  return fmt::format("{}{} ({}{}{})", to_string(g.action), g.certain() ? "" : ", uncertain",
                     g.rule.empty() ? "no rule decided" : "rule " + g.rule,
                     g.authority ? ", authority " : "", g.authority ? to_string(*g.authority) : "");
}

std::vector<const FiredRule*> findings_to_tell(const Decision& d) {
  std::vector<const FiredRule*> out;
  std::vector<const std::string*> fixes = {&d.remedy};
  for (const auto& f : d.findings) {
    bool known = !f.remedy.empty() && std::any_of(fixes.begin(), fixes.end(), [&](const std::string* fix) { return *fix == f.remedy; });
    if (known) continue;
    out.push_back(&f);
    fixes.push_back(&f.remedy);
  }
  return out;
}

std::vector<std::string> unknowns_to_tell(const Decision& d) {
  std::vector<std::string> out;
  for (const auto& fact : d.decisive_unknown_facts)
    if (fact != "kernel.config_p2pdma") out.push_back(fact);
  return out;
}

std::string NoteBook::body(const Decision& d, const std::string& indent) {
  std::string out = fmt::format("{}why: {}\n", indent, d.reason);
  if (!d.remedy.empty()) out += fmt::format("{}fix: {}\n", indent, d.remedy);
  // The pair's other problems: each would stage or refuse on its own, and each has its own fix.
  for (const FiredRule* f : findings_to_tell(d)) {
    out += fmt::format("{}also [{}]: {}\n", indent, f->id, f->reason);
    if (!f->remedy.empty()) out += fmt::format("{}  fix: {}\n", indent, f->remedy);
  }
  if (!d.certain()) {
    out += fmt::format("{}uncertain: {}\n", indent, also_possible_text(d));
    out += fmt::format("{}settled by: {}\n", indent, settle_text(d));
  }
  return out;
}

size_t NoteBook::note_of(size_t g) {
  if (g < note_of_group_.size() && note_of_group_[g]) return note_of_group_[g];
  const DecisionGroup& group = evaluator_.groups()[g];
  // Groups differ in what a pair-specific text names or in unknowns that change nothing; a note is
  // what the reader is told: action, rule, why, fix, the other problems and the unknowns that
  // could change the action.
  Decision d = evaluator_.decide_in_full(group.example.first, group.example.second).decision;
  std::string heading = group_heading(group);
  auto [it, added] = note_by_text_.try_emplace(heading + "\n" + body(d, ""), notes_.size() + 1);
  if (added) notes_.push_back({std::move(heading), d, 0, {}});
  if (g >= note_of_group_.size()) note_of_group_.resize(g + 1, 0), warnings_of_group_.resize(g + 1);
  for (const auto& fired : d.fired) {
    if (fired.action != Action::kWarn) continue;
    auto [w, new_warning] = warning_by_text_.try_emplace(fmt::format("[{}] {}", fired.id, fired.reason), warnings_.size());
    if (new_warning) warnings_.push_back({fired.id, fired.reason, {}});
    warnings_of_group_[g].push_back(w->second);
    auto& covered = warnings_[w->second].notes;
    if (std::find(covered.begin(), covered.end(), it->second) == covered.end()) covered.push_back(it->second);
  }
  return note_of_group_[g] = it->second;
}

}  // namespace p2paudit::policy
