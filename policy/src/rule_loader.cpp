// SPDX-License-Identifier: GPL-2.0-or-later
// YAML rule files → RuleFile, checking everything on the way. Problems are collected rather than
// thrown one at a time, so that `p2paudit rules lint` shows all of a file's mistakes at once.
#include <algorithm>
#include <charconv>
#include <map>
#include <span>

#include <fmt/format.h>

#include "p2paudit/input_file.h"
#include "p2paudit/policy/rules.h"
#include "p2paudit/quoted_input.h"
#include "p2paudit/strict_yaml.h"

namespace p2paudit::policy {

namespace {

constexpr std::string_view kRuleKeys[] = {"id", "description", "when", "action", "reason", "remedy", "authority", "source"};
constexpr std::string_view kFileKeys[] = {"version", "description", "kind", "replace", "placement", "rules"};

const std::map<std::string_view, Operator> kOperators = {
    {"eq", Operator::kEq},       {"ne", Operator::kNe}, {"in", Operator::kIn},       {"not_in", Operator::kNotIn},
    {"lt", Operator::kLt},       {"le", Operator::kLe}, {"gt", Operator::kGt},       {"ge", Operator::kGe},
    {"regex", Operator::kRegex}, {"contains", Operator::kContains},                   {"unknown", Operator::kUnknown}};

const std::map<std::string_view, Action> kActions = {
    {"peer", Action::kPeer}, {"host_staged", Action::kHostStaged}, {"deny", Action::kDeny}, {"warn", Action::kWarn}};

const std::map<std::string_view, Authority> kAuthorities = {{"kernel", Authority::kKernel},
                                                            {"vendor-driver", Authority::kVendorDriver},
                                                            {"vendor-fabric", Authority::kVendorFabric},
                                                            {"platform", Authority::kPlatform},
                                                            {"measurement", Authority::kMeasurement}};

template <typename Map>
std::string keys_of(const Map& m) {
  std::string out;
  for (const auto& [k, v] : m) out += (out.empty() ? "" : ", ") + std::string(k);
  return out;
}

const char* node_kind(const YamlNode& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing";
    default: return "a scalar";
  }
}

// A quoted or block scalar is a string even when it reads "true" or "42".
bool is_plain(const YamlNode& n) { return n.Tag() == "?"; }

// YAML 1.2's core schema: yes/no/on/off are strings, so `yes` for a bool is reported, not guessed.
std::optional<bool> parse_bool(const YamlNode& n) {
  static const std::map<std::string_view, bool> kBools = {{"true", true},   {"True", true},   {"TRUE", true},
                                                          {"false", false}, {"False", false}, {"FALSE", false}};
  if (!n.IsScalar() || !is_plain(n)) return std::nullopt;
  auto it = kBools.find(n.Scalar());
  return it != kBools.end() ? std::optional(it->second) : std::nullopt;
}

std::optional<std::int64_t> parse_integer(std::string_view s) {
  static constexpr std::pair<std::string_view, int> kSuffixes[] = {{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
  int shift = 0;
  for (auto [suffix, bits] : kSuffixes)
    if (s.size() > suffix.size() && s.ends_with(suffix)) {
      s.remove_suffix(suffix.size());
      shift = bits;
      break;
    }
  bool negative = s.starts_with('-');
  if (negative) s.remove_prefix(1);
  int base = 10;
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2), base = 16;
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  if (shift && v > (INT64_MAX >> shift)) return std::nullopt;
  v <<= shift;
  return negative ? -v : v;
}

std::optional<double> parse_number(std::string_view s) {
  if (auto i = parse_integer(s)) return static_cast<double>(*i);
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// libstdc++'s std::regex compiles and matches by recursion and backtracking: a deeply nested
// pattern overflows the stack while compiling (a crash, not an error), and a repeated group that
// itself repeats or alternates ("(a+)+", "(a|a)*") can take exponential time on a short fact.
// Rule files come from strangers, so such patterns are refused; the shipped ones need none of it.
std::optional<std::string> regex_hazard(std::string_view pattern) {
  constexpr size_t kMaxLength = 512;
  constexpr size_t kMaxGroupDepth = 8;
  constexpr long kMaxRepeatCount = 1000;
  if (pattern.size() > kMaxLength) return fmt::format("longer than {} characters", kMaxLength);
  auto quantifier_at = [&](size_t i) {
    return i < pattern.size() && (pattern[i] == '*' || pattern[i] == '+' || pattern[i] == '?' || pattern[i] == '{');
  };
  std::vector<bool> group_repeats_inside;  // per open group: it holds a quantifier or an alternative
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\') {
      ++i;  // an escaped character stands for itself
    } else if (c == '[') {
      for (++i; i < pattern.size() && pattern[i] != ']'; ++i)
        if (pattern[i] == '\\') ++i;
    } else if (c == '(') {
      if (group_repeats_inside.size() == kMaxGroupDepth) return fmt::format("groups nested deeper than {}", kMaxGroupDepth);
      group_repeats_inside.push_back(false);
      if (i + 2 < pattern.size() && pattern[i + 1] == '?') i += 2;  // (?: (?= (?! are not quantifiers
    } else if (c == ')' && !group_repeats_inside.empty()) {
      bool inner = group_repeats_inside.back();
      group_repeats_inside.pop_back();
      if (inner && quantifier_at(i + 1))
        return std::string("a repeated group that itself repeats or alternates can take exponential time; write it without");
    } else if (c == '|' || quantifier_at(i)) {
      if (!group_repeats_inside.empty()) group_repeats_inside.back() = true;
      if (c == '{') {
        long count = 0;
        for (size_t k = i + 1; k < pattern.size() && (std::isdigit(static_cast<unsigned char>(pattern[k])) || pattern[k] == ','); ++k)
          if (pattern[k] == ',') count = 0;
          else if ((count = count * 10 + (pattern[k] - '0')) > kMaxRepeatCount)
            return fmt::format("a repeat count above {}", kMaxRepeatCount);
      }
    }
  }
  return std::nullopt;
}

Condition of_kind(Condition::Kind kind) {
  Condition c;
  c.kind = kind;
  return c;
}

Template::Piece literal_piece(std::string text) {
  Template::Piece p;
  p.literal = std::move(text);
  return p;
}

class Loader {
 public:
  Loader(std::string_view text, std::string file) : whole_(text), text_(without_byte_order_mark(text)), file_(std::move(file)) {}

  RuleFile load() {
    RuleFile out;
    out.path = file_;
    try {
      // One shared strict reader (strict_yaml.h): one document, no duplicate keys, bounded aliases
      // and nesting, UTF-8 only. Duplicate keys come all at once, like the rest of the findings.
      YamlDocument document = read_strict_yaml(whole_, file_);
      YamlNode doc = document.root();
      if (doc.IsNull()) error(YAML::Mark(), "empty rule file: expected 'version: 1' and 'rules:'");
      else read_file(doc, out);
    } catch (const YamlError& e) {
      for (const auto& problem : e.problems()) errors_.push_back(at(problem.position, problem.message));
    }
    if (!errors_.empty()) throw RuleFileError(std::move(errors_));
    return out;
  }

 private:
  std::string_view whole_;
  // The reader skips a leading byte order mark, and its marks count from after it: so do place_in()'s.
  std::string_view text_;
  std::string file_;
  std::vector<Diagnostic> errors_;
  std::map<std::string, YAML::Mark> rule_ids_;
  // A pattern that several tests use is compiled once (compiling costs far more than matching).
  std::map<std::string, std::shared_ptr<const FactRegex>, std::less<>> regexes_;

  // Messages quote the file's own scalars through quoted_input() (escaped, cut); this escapes the
  // rest once more, since YAML escapes can fill any scalar with control characters.
  Diagnostic at(TextPosition position, std::string_view message) const {
    return Diagnostic{file_, position.line, position.column, escape_text(message)};
  }
  Diagnostic at(const YAML::Mark& m, std::string_view message) const { return at(yaml_position(m), message); }
  void error(const YAML::Mark& m, std::string message) { errors_.push_back(at(m, message)); }

  // An empty value (`when:`) has the position of whatever follows it; point at its key instead.
  static YAML::Mark value_mark(const YamlNode& key, const YamlNode& value) {
    return value.IsNull() ? key.Mark() : value.Mark();
  }

  // Calls visit(key, value) for each entry with a scalar key that appears in `allowed` (all keys
  // when allowed is empty), reporting the rest. load_strict_yaml() has refused duplicate keys.
  template <typename Visit>
  void for_each_entry(const YamlNode& map, std::span<const std::string_view> allowed, std::string_view what, Visit visit) {
    for (size_t entry = 0; entry < map.size(); ++entry) {
      YamlNode key = map.key(entry), value = map.value(entry);
      if (!key.IsScalar()) {
        error(key.Mark(), fmt::format("a key in {} must be a plain name, not {}", what, node_kind(key)));
        continue;
      }
      std::string_view name = key.Scalar();
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        error(key.Mark(), fmt::format("unknown key {} in {} (expected one of: {})", quoted_input(name), what, fmt::join(allowed, ", ")));
        continue;
      }
      visit(key, value);
    }
  }

  std::optional<std::string> scalar(const YamlNode& key, const YamlNode& value) {
    if (value.IsScalar()) {
      // Reasons, remedies and descriptions end up on terminals.
      if (auto bad = find_control_character(value.Scalar())) {
        error(value.Mark(), fmt::format("'{}' holds a {}: write plain text", key.Scalar(), bad->description));
        return std::nullopt;
      }
      return std::string(value.Scalar());
    }
    error(value_mark(key, value), fmt::format("'{}' must be a single value, not {}", key.Scalar(), node_kind(value)));
    return std::nullopt;
  }

  template <typename Map>
  std::optional<typename Map::mapped_type> one_of(const YamlNode& key, const YamlNode& value, const Map& choices) {
    auto text = scalar(key, value);
    if (!text) return std::nullopt;
    if (auto it = choices.find(*text); it != choices.end()) return it->second;
    error(value.Mark(), fmt::format("{} is not a valid {} (one of: {})", quoted_input(*text), key.Scalar(), keys_of(choices)));
    return std::nullopt;
  }

  std::optional<bool> boolean(const YamlNode& key, const YamlNode& value) {
    auto text = scalar(key, value);
    if (!text) return std::nullopt;
    if (auto b = parse_bool(value)) return b;
    error(value.Mark(), fmt::format("'{}' must be true or false, not {}{}", key.Scalar(), is_plain(value) ? "" : "the string ",
                                    quoted_input(*text)));
    return std::nullopt;
  }

  void read_file(const YamlNode& doc, RuleFile& out) {
    if (!doc.IsMap()) {
      error(doc.Mark(), fmt::format("a rule file is a mapping with 'version: 1' and 'rules:', not {}", node_kind(doc)));
      return;
    }
    bool has_version = false, has_rules = false;
    for_each_entry(doc, kFileKeys, "the rule file", [&](const YamlNode& key, const YamlNode& value) {
      std::string_view name = key.Scalar();
      if (name == "version") {
        has_version = true;
        if (auto v = scalar(key, value); v && (*v != "1" || !is_plain(value)))
          error(value.Mark(), fmt::format("unsupported version {}{}: this p2paudit reads version 1", is_plain(value) ? "" : "the string ",
                                          quoted_input(*v)));
      } else if (name == "description") {
        if (auto v = scalar(key, value)) out.description = *v;
      } else if (name == "kind") {
        static const std::map<std::string_view, RuleFileKind> kKinds = {{"policy", RuleFileKind::kPolicy},
                                                                       {"advisories", RuleFileKind::kAdvisories}};
        if (auto v = one_of(key, value, kKinds)) out.kind = *v;
      } else if (name == "replace") {
        if (auto v = boolean(key, value)) out.replace = *v;
      } else if (name == "placement") {
        static const std::map<std::string_view, Placement> kPlacements = {{"after-defaults", Placement::kAfterDefaults},
                                                                         {"before-defaults", Placement::kBeforeDefaults}};
        if (auto v = one_of(key, value, kPlacements)) out.placement = *v;
      } else if (name == "rules") {
        has_rules = true;
        if (!value.IsSequence()) error(value_mark(key, value), fmt::format("'rules' must be a list of rules, not {}", node_kind(value)));
      }
    });
    if (!has_version) error(doc.Mark(), "missing 'version: 1'");
    if (!has_rules) error(doc.Mark(), "missing 'rules:'");
    if (!has_rules || !doc["rules"].IsSequence()) return;
    for (const auto& node : doc["rules"])
      if (auto rule = read_rule(node, out.kind)) out.rules.push_back(std::move(*rule));
    check_reachable(out.rules);
  }

  std::optional<Rule> read_rule(const YamlNode& node, RuleFileKind kind) {
    if (!node.IsMap()) {
      error(node.Mark(), fmt::format("a rule is a mapping with id, when, action and reason, not {}", node_kind(node)));
      return std::nullopt;
    }
    size_t errors_before = errors_.size();
    Rule rule;
    rule.origin = fmt::format("{}:{}", file_, node.Mark().line + 1);
    TextPosition start = yaml_position(node.Mark());
    rule.line = start.line;
    rule.column = start.column;
    bool has_id = false, has_when = false, has_action = false, has_reason = false;
    for_each_entry(node, kRuleKeys, "a rule", [&](const YamlNode& key, const YamlNode& value) {
      std::string_view name = key.Scalar();
      if (name == "id") {
        has_id = true;
        read_id(key, value, rule);
      } else if (name == "description") {
        if (auto v = scalar(key, value)) rule.description = *v;
      } else if (name == "when") {
        has_when = true;
        if (auto c = read_condition(value, key)) rule.when = std::move(*c);
      } else if (name == "action") {
        has_action = true;
        if (auto a = one_of(key, value, kActions)) rule.action = *a;
      } else if (name == "reason") {
        has_reason = true;
        if (auto t = read_template(key, value)) rule.reason = std::move(*t);
      } else if (name == "remedy") {
        if (auto t = read_template(key, value)) rule.remedy = std::move(*t);
      } else if (name == "authority") {
        if (auto a = one_of(key, value, kAuthorities)) rule.authority = *a;
      } else if (name == "source") {
        if (auto v = scalar(key, value)) rule.source = *v;
      }
    });
    std::string who = rule.id.empty() ? "rule" : fmt::format("rule {}", quoted_input(rule.id));
    const std::pair<bool, const char*> required[] = {{has_id, "id"}, {has_when, "when"}, {has_action, "action"}, {has_reason, "reason"}};
    for (auto [present, key] : required)
      if (!present) error(node.Mark(), fmt::format("{} has no '{}'", who, key));
    if (kind == RuleFileKind::kAdvisories && rule.source.empty())
      error(node.Mark(), fmt::format("{} has no 'source': every advisory names its public reference", who));
    if (errors_.size() != errors_before) return std::nullopt;
    return rule;
  }

  void read_id(const YamlNode& key, const YamlNode& value, Rule& rule) {
    auto id = scalar(key, value);
    if (!id) return;
    // A loop, not std::regex: that recurses once per character and a stranger's id can be long.
    auto id_char = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; };
    if (id->empty() || !std::all_of(id->begin(), id->end(), id_char)) {
      error(value.Mark(), fmt::format("rule id {} may only use a-z, 0-9 and '-'", quoted_input(*id)));
      return;
    }
    if (auto [first, inserted] = rule_ids_.emplace(*id, value.Mark()); !inserted)
      error(value.Mark(), fmt::format("duplicate rule id {} (first at line {})", quoted_input(*id), first->second.line + 1));
    rule.id = *id;
  }

  // A decisive rule after one that always decides would be silently dead.
  void check_reachable(const std::vector<Rule>& rules) {
    const Rule* always = nullptr;
    for (const auto& rule : rules) {
      if (rule.action == Action::kWarn) continue;
      if (always) {
        auto mark = rule_ids_.at(rule.id);
        error(mark, fmt::format("rule {} is never reached: rule {} ({}) always decides first", quoted_input(rule.id),
                               quoted_input(always->id), always->origin));
      } else if (rule.when.kind == Condition::Kind::kAlways) {
        always = &rule;
      }
    }
  }

  // ---- conditions ----

  std::optional<Condition> read_condition(const YamlNode& node, const YamlNode& key) {
    if (node.IsScalar() && node.Scalar() == "always" && is_plain(node)) return of_kind(Condition::Kind::kAlways);
    if (node.IsMap() && node.size() == 0) {
      error(node.Mark(), "empty condition; write 'always' for a rule that always fires");
      return std::nullopt;
    }
    if (!node.IsMap()) {
      error(value_mark(key, node), fmt::format("a condition is a mapping of facts to values, all/any/not, or 'always'; not {}{}",
                                               node_kind(node), node.IsSequence() ? " (wrap a list in all: or any:)" : ""));
      return std::nullopt;
    }
    Condition all = of_kind(Condition::Kind::kAll);
    bool ok = true;
    for_each_entry(node, {}, "a condition", [&](const YamlNode& k, const YamlNode& v) {
      auto c = read_condition_entry(k, v);
      if (c) all.children.push_back(std::move(*c));
      ok &= c.has_value();
    });
    if (!ok) return std::nullopt;
    if (all.children.size() == 1) return std::move(all.children.front());
    return all;
  }

  std::optional<Condition> read_condition_entry(const YamlNode& key, const YamlNode& value) {
    std::string_view name = key.Scalar();
    if (name == "all" || name == "any") {
      if (!value.IsSequence() || value.size() == 0) {
        error(value_mark(key, value), fmt::format("'{}' takes a non-empty list of conditions", name));
        return std::nullopt;
      }
      Condition c = of_kind(name == "all" ? Condition::Kind::kAll : Condition::Kind::kAny);
      bool ok = true;
      for (const auto& item : value) {
        auto child = read_condition(item, key);
        if (child) c.children.push_back(std::move(*child));
        ok &= child.has_value();
      }
      return ok ? std::optional(std::move(c)) : std::nullopt;
    }
    if (name == "not") {
      auto child = read_condition(value, key);
      if (!child) return std::nullopt;
      Condition c = of_kind(Condition::Kind::kNot);
      c.children.push_back(std::move(*child));
      return c;
    }
    const FactSpec* spec = find_fact(name);
    if (!spec) {
      std::string hint = closest_fact_name(name);
      if (kOperators.contains(name)) hint = fmt::format("; an operator goes under a fact: FACT: {{{}: ...}}", name);
      else if (!hint.empty()) hint = fmt::format(" (did you mean '{}'?)", hint);
      error(key.Mark(), fmt::format("unknown fact {}{}", quoted_input(name), hint));
      return std::nullopt;
    }
    if (!value.IsMap()) return read_test(*spec, Operator::kEq, key, value);
    if (value.size() == 0) {
      error(value.Mark(), fmt::format("no operator for {}: expected one of {}", name, keys_of(kOperators)));
      return std::nullopt;
    }
    // Several operators on one fact (a range: {ge: 8, lt: 16}) must all hold.
    Condition all = of_kind(Condition::Kind::kAll);
    bool ok = true;
    for_each_entry(value, {}, fmt::format("the tests of {}", name), [&](const YamlNode& op_key, const YamlNode& operand) {
      auto op = kOperators.find(op_key.Scalar());
      if (op == kOperators.end()) {
        error(op_key.Mark(), fmt::format("unknown operator {} (one of: {})", quoted_input(op_key.Scalar()), keys_of(kOperators)));
        ok = false;
        return;
      }
      auto c = read_test(*spec, op->second, op_key, operand);
      if (c) all.children.push_back(std::move(*c));
      ok &= c.has_value();
    });
    if (!ok) return std::nullopt;
    if (all.children.size() == 1) return std::move(all.children.front());
    return all;
  }

  std::optional<Condition> read_test(const FactSpec& spec, Operator op, const YamlNode& key, const YamlNode& value) {
    Condition c = of_kind(Condition::Kind::kTest);
    c.fact = spec.name;
    c.op = op;
    auto fail = [&](std::string message) -> std::optional<Condition> {
      error(value_mark(key, value), std::move(message));
      return std::nullopt;
    };
    const char* op_name = to_string(op);
    bool list_fact = spec.type == FactType::kStringList;
    switch (op) {
      case Operator::kUnknown: {
        auto b = boolean(key, value);
        if (!b) return std::nullopt;
        c.operands.push_back(*b);
        return c;
      }
      case Operator::kIn:
      case Operator::kNotIn: {
        if (list_fact) return fail(fmt::format("{} is a list; '{}' compares single values (use contains)", spec.name, op_name));
        if (!value.IsSequence() || value.size() == 0) return fail(fmt::format("'{}' takes a non-empty list of values of {}", op_name, spec.name));
        bool ok = true;
        for (const auto& item : value) {
          auto v = read_value(spec, key, item);
          if (v) c.operands.push_back(std::move(*v));
          ok &= v.has_value();
        }
        return ok ? std::optional(std::move(c)) : std::nullopt;
      }
      case Operator::kLt:
      case Operator::kLe:
      case Operator::kGt:
      case Operator::kGe:
        if (spec.type != FactType::kInteger && spec.type != FactType::kNumber)
          return fail(fmt::format("'{}' compares numbers; {} is {} {} fact", op_name, spec.name,
                                  spec.type == FactType::kEnum ? "an" : "a", to_string(spec.type)));
        if (value.IsMap()) return read_fact_operand(spec, std::move(c), key, value);
        break;
      case Operator::kRegex:
        if (spec.type != FactType::kString)
          return fail(fmt::format("'regex' matches strings; {} is {} {} fact{}", spec.name, spec.type == FactType::kEnum ? "an" : "a",
                                  to_string(spec.type), spec.type == FactType::kEnum ? " (use in)" : ""));
        break;
      case Operator::kContains:
        if (spec.type != FactType::kString && !list_fact)
          return fail(fmt::format("'contains' looks into strings and lists; {} is {} {} fact", spec.name,
                                  spec.type == FactType::kEnum || spec.type == FactType::kInteger ? "an" : "a", to_string(spec.type)));
        if (!value.IsScalar()) return fail(fmt::format("'contains' takes one string, not {}", node_kind(value)));
        c.operands.push_back(std::string(value.Scalar()));
        return c;
      case Operator::kEq:
      case Operator::kNe:
        break;
    }
    auto v = read_value(spec, key, value);
    if (!v) return std::nullopt;
    if (op == Operator::kRegex) {
      if (auto hazard = regex_hazard(std::get<std::string>(*v)))
        return fail(fmt::format("regex {}: {}", quoted_input(std::get<std::string>(*v)), *hazard));
      const std::string& pattern = std::get<std::string>(*v);
      auto [compiled, first_use] = regexes_.try_emplace(pattern);
      if (first_use) {
        try {
          compiled->second = std::make_shared<const FactRegex>(pattern, FactRegex::ECMAScript);
        } catch (const std::regex_error& e) {
          regexes_.erase(compiled);
          return fail(fmt::format("bad regex {}: {}", quoted_input(pattern), e.what()));
        }
      }
      c.regex = compiled->second;
    }
    c.operands.push_back(std::move(*v));
    return c;
  }

  // `{fact: OTHER}` as the operand of a bound: OTHER must be another integer or number fact.
  std::optional<Condition> read_fact_operand(const FactSpec& spec, Condition c, const YamlNode& key, const YamlNode& value) {
    auto fail = [&](const YamlNode& at, std::string message) -> std::optional<Condition> {
      error(value_mark(key, at), std::move(message));
      return std::nullopt;
    };
    const char* op_name = to_string(c.op);
    if (value.size() != 1 || !value.key(0).IsScalar() || value.key(0).Scalar() != "fact")
      return fail(value, fmt::format("'{}' takes a number or {{fact: NAME}} (another number fact)", op_name));
    const YamlNode name = value.value(0);
    if (!name.IsScalar()) return fail(name, fmt::format("'fact' names one fact, not {}", node_kind(name)));
    const FactSpec* other = find_fact(name.Scalar());
    if (!other) {
      std::string hint = closest_fact_name(name.Scalar());
      return fail(name, fmt::format("unknown fact {}{}", quoted_input(name.Scalar()),
                                    hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
    }
    if (other->type != FactType::kInteger && other->type != FactType::kNumber)
      return fail(name, fmt::format("'{}' compares numbers; {} is {} {} fact", op_name, other->name,
                                    other->type == FactType::kEnum ? "an" : "a", to_string(other->type)));
    if (other->name == spec.name) return fail(name, fmt::format("{} compared with itself", spec.name));
    c.operand_fact = other->name;
    return c;
  }

  // One value of `spec`'s type, as written in YAML.
  std::optional<FactValue> read_value(const FactSpec& spec, const YamlNode& key, const YamlNode& node) {
    auto fail = [&](std::string message) -> std::optional<FactValue> {
      error(value_mark(key, node), std::move(message));
      return std::nullopt;
    };
    if (spec.type == FactType::kStringList) {
      if (!node.IsSequence()) return fail(fmt::format("{} is a list fact: compare it with a list, or use contains", spec.name));
      std::vector<std::string> items;
      for (const auto& item : node) {
        if (!item.IsScalar()) return fail(fmt::format("{} holds strings, not {}", spec.name, node_kind(item)));
        items.emplace_back(item.Scalar());
      }
      return items;
    }
    if (node.IsNull()) return fail(fmt::format("missing value for {}", spec.name));
    if (node.IsSequence()) return fail(fmt::format("{} takes one value, not a list (write {{in: [...]}} to match any of several)", spec.name));
    if (!node.IsScalar()) return fail(fmt::format("{} takes one value, not {}", spec.name, node_kind(node)));
    std::string_view text = node.Scalar();
    std::string quoted = is_plain(node) ? "" : "the string ";
    FactValue value;
    switch (spec.type) {
      case FactType::kBool:
        if (auto b = parse_bool(node)) value = *b;
        else return fail(fmt::format("{} is a bool fact: expected true or false, got {}{}", spec.name, quoted, quoted_input(text)));
        break;
      case FactType::kInteger: {
        auto i = is_plain(node) ? parse_integer(text) : std::nullopt;
        if (!i) return fail(fmt::format("{} is an integer fact: expected an integer (suffixes KiB MiB GiB TiB allowed), got {}{}", spec.name, quoted, quoted_input(text)));
        value = *i;
        break;
      }
      case FactType::kNumber: {
        auto d = is_plain(node) ? parse_number(text) : std::nullopt;
        if (!d) return fail(fmt::format("{} is a number fact: expected a number, got {}{}", spec.name, quoted, quoted_input(text)));
        value = *d;
        break;
      }
      default:
        value = std::string(text);
    }
    auto checked = check_fact_value(spec, std::move(value));
    if (!checked.value) return fail(checked.error);
    return checked.value;
  }

  // ---- templates ----

  std::optional<Template> read_template(const YamlNode& key, const YamlNode& value) {
    auto text = scalar(key, value);
    if (!text) return std::nullopt;
    if (text->empty()) {
      error(value_mark(key, value), fmt::format("'{}' is empty", key.Scalar()));
      return std::nullopt;
    }
    Template t{std::move(*text), {}};
    const std::string& written = t.text;
    bool ok = true;
    std::string literal;
    literal.reserve(written.size());
    for (size_t i = 0; i < written.size(); ++i) {
      size_t brace = i;  // plain text up to the next brace goes in one piece
      while (brace < written.size() && written[brace] != '{' && written[brace] != '}') ++brace;
      literal.append(written, i, brace - i);
      if ((i = brace) == written.size()) break;
      char ch = written[i];
      if ((ch == '{' || ch == '}') && i + 1 < written.size() && written[i + 1] == ch) {
        literal += ch;
        ++i;
        continue;
      }
      if (ch == '}') {
        error(place_in(value, "}"), "unmatched '}' (write '}}' for a literal brace)");
        ok = false;
        continue;
      }
      if (ch != '{') {
        literal += ch;
        continue;
      }
      size_t close = written.find('}', i);
      if (close == std::string::npos) {
        error(place_in(value, written.substr(i)), "unclosed '{' (write '{{' for a literal brace)");
        return std::nullopt;
      }
      std::string placeholder = written.substr(i, close - i + 1);
      if (auto piece = read_placeholder(placeholder, value)) {
        if (!literal.empty()) t.pieces.push_back(literal_piece(std::move(literal))), literal.clear();
        t.pieces.push_back(std::move(*piece));
      } else {
        ok = false;
      }
      i = close;
    }
    if (!literal.empty()) t.pieces.push_back(literal_piece(std::move(literal)));
    return ok ? std::optional(std::move(t)) : std::nullopt;
  }

  std::optional<Template::Piece> read_placeholder(const std::string& placeholder, const YamlNode& value) {
    std::string inner = placeholder.substr(1, placeholder.size() - 2);
    std::string format;
    if (size_t colon = inner.find(':'); colon != std::string::npos) format = inner.substr(colon + 1), inner.resize(colon);
    const FactSpec* spec = find_fact(inner);
    if (!spec) {
      std::string hint = closest_fact_name(inner);
      error(place_in(value, placeholder),
            fmt::format("unknown fact {} in {}{}", quoted_input(inner), quoted_input(placeholder, '\0'),
                        hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
      return std::nullopt;
    }
    if (!format.empty() && (format != "size" || spec->type != FactType::kInteger)) {
      error(place_in(value, placeholder),
            fmt::format("unknown format {} for {} (only ':size', for integer facts)", quoted_input(":" + format), spec->name));
      return std::nullopt;
    }
    Template::Piece piece;
    piece.fact = spec->name;
    piece.as_size = !format.empty();
    return piece;
  }

  // The position of `needle` inside the scalar as written, so a bad placeholder is pointed at
  // exactly; falls back to the scalar's start when escapes make the written form differ.
  YAML::Mark place_in(const YamlNode& scalar_node, const std::string& needle) const {
    YAML::Mark m = scalar_node.Mark();
    if (m.pos < 0) return m;
    size_t found = text_.find(needle, static_cast<size_t>(m.pos));
    if (found == std::string_view::npos) return m;
    size_t line_end = found == 0 ? std::string_view::npos : text_.rfind('\n', found - 1);
    size_t line_start = line_end == std::string_view::npos ? 0 : line_end + 1;
    YAML::Mark exact;
    exact.pos = static_cast<int>(found);
    exact.line = static_cast<int>(std::count(text_.begin(), text_.begin() + found, '\n'));
    exact.column = static_cast<int>(found - line_start);
    return exact;
  }
};

}  // namespace

std::string Diagnostic::str() const {
  return fmt::format("{}: {}{}", format_position(file, TextPosition{line, column}), warning ? "warning: " : "", message);
}

namespace {
std::string join_diagnostics(const std::vector<Diagnostic>& diagnostics) {
  std::string out;
  for (const auto& d : diagnostics) out += (out.empty() ? "" : "\n") + d.str();
  return out;
}
}  // namespace

RuleFileError::RuleFileError(std::vector<Diagnostic> diagnostics)
    : InputError(join_diagnostics(diagnostics)), diagnostics_(std::move(diagnostics)) {}

RuleFile parse_rule_file(std::string_view text, const std::string& file) { return Loader(text, file).load(); }

RuleFile load_rule_file(const std::string& path) { return parse_rule_file(read_input_file(path, kMaxRuleFileBytes), path); }

}  // namespace p2paudit::policy
