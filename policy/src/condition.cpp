// SPDX-License-Identifier: GPL-2.0-or-later
// Evaluating conditions and rendering templates against a FactSet.
#include <algorithm>

#include "p2paudit/input_file.h"
#include "p2paudit/policy/rules.h"

namespace p2paudit::policy {

namespace {

Tri from_bool(bool b) { return b ? Tri::kTrue : Tri::kFalse; }

Tri negate(Tri t) {
  if (t == Tri::kUnknown) return t;
  return t == Tri::kTrue ? Tri::kFalse : Tri::kTrue;
}

// The loader stores operands in the fact's own representation, so two values of one fact compare
// directly; integer vs number cannot meet (kNumber operands are stored as double).
template <typename Compare>
bool compare_numbers(const FactValue& fact, const FactValue& operand, Compare cmp) {
  if (auto* i = std::get_if<std::int64_t>(&fact)) return cmp(*i, std::get<std::int64_t>(operand));
  return cmp(std::get<double>(fact), std::get<double>(operand));
}

double as_double(const FactValue& v) {
  if (auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

// A bound against another fact: both are integer or number facts (the loader checked), compared
// as numbers whatever their representation.
bool compare_facts(Operator op, const FactValue& value, const FactValue& other) {
  const double a = as_double(value), b = as_double(other);
  switch (op) {
    case Operator::kLt: return a < b;
    case Operator::kLe: return a <= b;
    case Operator::kGt: return a > b;
    case Operator::kGe: return a >= b;
    default: return false;
  }
}

bool test(const Condition& c, const FactValue& value) {
  const FactValue& operand = c.operands.front();
  switch (c.op) {
    case Operator::kEq: return value == operand;
    case Operator::kNe: return value != operand;
    case Operator::kIn: return std::find(c.operands.begin(), c.operands.end(), value) != c.operands.end();
    case Operator::kNotIn: return std::find(c.operands.begin(), c.operands.end(), value) == c.operands.end();
    case Operator::kLt: return compare_numbers(value, operand, [](auto a, auto b) { return a < b; });
    case Operator::kLe: return compare_numbers(value, operand, [](auto a, auto b) { return a <= b; });
    case Operator::kGt: return compare_numbers(value, operand, [](auto a, auto b) { return a > b; });
    case Operator::kGe: return compare_numbers(value, operand, [](auto a, auto b) { return a >= b; });
    case Operator::kRegex: return std::regex_search(std::get<std::string>(value), *c.regex);
    case Operator::kContains: {
      const auto& needle = std::get<std::string>(operand);
      if (auto* list = std::get_if<std::vector<std::string>>(&value))
        return std::find(list->begin(), list->end(), needle) != list->end();
      return std::get<std::string>(value).find(needle) != std::string::npos;
    }
    case Operator::kUnknown: return !std::get<bool>(operand);  // reached only for a known fact
  }
  return false;
}

}  // namespace

FactRegexTraits::locale_type FactRegexTraits::imbue(locale_type locale) {
  locale_type old = std::regex_traits<char>::imbue(std::move(locale));
  remember_facets();
  return old;
}

void FactRegexTraits::remember_facets() {
  locale_type locale = getloc();
  ctype_ = &std::use_facet<std::ctype<char>>(locale);
  classic_ = locale == std::locale::classic();
}

const char* to_string(Tri t) {
  switch (t) {
    case Tri::kFalse: return "false";
    case Tri::kTrue: return "true";
    case Tri::kUnknown: return "unknown";
  }
  return "?";
}

const char* to_string(Operator op) {
  switch (op) {
    case Operator::kEq: return "eq";
    case Operator::kNe: return "ne";
    case Operator::kIn: return "in";
    case Operator::kNotIn: return "not_in";
    case Operator::kLt: return "lt";
    case Operator::kLe: return "le";
    case Operator::kGt: return "gt";
    case Operator::kGe: return "ge";
    case Operator::kRegex: return "regex";
    case Operator::kContains: return "contains";
    case Operator::kUnknown: return "unknown";
  }
  return "?";
}

Tri Condition::evaluate(const FactSet& facts) const {
  switch (kind) {
    case Kind::kAlways: return Tri::kTrue;
    case Kind::kNot: return negate(children.front().evaluate(facts));
    case Kind::kAll:
    case Kind::kAny: {
      // all: one false decides; any: one true decides; otherwise an unknown operand leaves it unknown.
      Tri decisive = kind == Kind::kAll ? Tri::kFalse : Tri::kTrue;
      bool saw_unknown = false;
      for (const auto& child : children) {
        Tri t = child.evaluate(facts);
        if (t == decisive) return decisive;
        saw_unknown |= t == Tri::kUnknown;
      }
      return saw_unknown ? Tri::kUnknown : negate(decisive);
    }
    case Kind::kTest: {
      const FactValue* value = facts.get(fact);
      if (op == Operator::kUnknown) return from_bool((value == nullptr) == std::get<bool>(operands.front()));
      if (!value) return Tri::kUnknown;
      if (!operand_fact.empty()) {
        const FactValue* other = facts.get(operand_fact);
        return other ? from_bool(compare_facts(op, *value, *other)) : Tri::kUnknown;
      }
      // A regex over a subject beyond the bound is not run (std::regex recurses per character):
      // unknown, as if the fact could not be read; the report names the fact as unknown.
      if (op == Operator::kRegex && std::get<std::string>(*value).size() > kMaxRegexSubject) return Tri::kUnknown;
      return from_bool(test(*this, *value));
    }
  }
  return Tri::kUnknown;
}

Tri Condition::evaluate_open(const FactSet& facts, std::string_view open_fact) const {
  switch (kind) {
    case Kind::kAlways: return Tri::kTrue;
    case Kind::kNot: return negate(children.front().evaluate_open(facts, open_fact));
    case Kind::kAll:
    case Kind::kAny: {
      Tri decisive = kind == Kind::kAll ? Tri::kFalse : Tri::kTrue;
      bool saw_unknown = false;
      for (const auto& child : children) {
        Tri t = child.evaluate_open(facts, open_fact);
        if (t == decisive) return decisive;
        saw_unknown |= t == Tri::kUnknown;
      }
      return saw_unknown ? Tri::kUnknown : negate(decisive);
    }
    case Kind::kTest:
      if (!open_fact.empty() && (fact == open_fact || operand_fact == open_fact)) return Tri::kUnknown;
      // `unknown: true|false` asks about the input, which is known: whether it holds the fact.
      if (op == Operator::kUnknown) return evaluate(facts);
      if (!facts.get(fact) || (!operand_fact.empty() && !facts.get(operand_fact))) return Tri::kUnknown;
      return evaluate(facts);
  }
  return Tri::kUnknown;
}

void Condition::collect_unknown_facts(const FactSet& facts, std::vector<std::string>& out) const {
  if (evaluate(facts) != Tri::kUnknown) return;
  if (kind == Kind::kTest) {
    // Of a comparison of two facts, those that are unknown.
    if (operand_fact.empty() || !facts.get(fact)) out.push_back(fact);
    if (!operand_fact.empty() && !facts.get(operand_fact)) out.push_back(operand_fact);
    return;
  }
  // Only unknown operands matter: a known-true operand of `all` cannot change the result.
  for (const auto& child : children) child.collect_unknown_facts(facts, out);
}

std::string Template::render(const FactSet& facts) const {
  std::string out;
  for (const auto& piece : pieces) {
    if (piece.fact.empty()) {
      out += piece.literal;
      continue;
    }
    const FactValue* value = facts.get(piece.fact);
    if (!value) out += "unknown";
    else if (auto* bytes = std::get_if<std::int64_t>(value); bytes && piece.as_size) out += render_size(*bytes);
    else out += escape_line(render_fact_value(*value));  // a value from input is one line of text
  }
  return out;
}

}  // namespace p2paudit::policy
