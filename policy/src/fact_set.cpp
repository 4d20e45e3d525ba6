#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/policy/facts.h"

namespace p2paudit::policy {

namespace {

const char* value_kind(const FactValue& v) {
  switch (v.index()) {
    case 0: return "true/false";
    case 1: return "an integer";
    case 2: return "a number";
    case 3: return "a string";
    default: return "a list";
  }
}

std::string unknown_fact_message(std::string_view name) {
  std::string hint = closest_fact_name(name);
  return hint.empty() ? fmt::format("unknown fact '{}'", name) : fmt::format("unknown fact '{}' (did you mean '{}'?)", name, hint);
}

}  // namespace

FactValueCheck check_fact_value(const FactSpec& spec, FactValue value) {
  auto wrong = [&](const char* expected) {
    return FactValueCheck{std::nullopt, fmt::format("{} is {} fact, got {}", spec.name, expected, value_kind(value))};
  };
  switch (spec.type) {
    case FactType::kBool:
      if (!std::holds_alternative<bool>(value)) return wrong("a bool (true/false)");
      break;
    case FactType::kInteger:
      if (!std::holds_alternative<std::int64_t>(value)) return wrong("an integer");
      break;
    case FactType::kNumber:
      if (auto* i = std::get_if<std::int64_t>(&value)) value = static_cast<double>(*i);
      if (!std::holds_alternative<double>(value)) return wrong("a number");
      break;
    case FactType::kString:
      if (!std::holds_alternative<std::string>(value)) return wrong("a string");
      break;
    case FactType::kEnum: {
      auto* s = std::get_if<std::string>(&value);
      if (!s) return wrong("an enum");
      if (std::find(spec.allowed.begin(), spec.allowed.end(), *s) == spec.allowed.end())
        return {std::nullopt, fmt::format("'{}' is not a value of {} (one of: {})", *s, spec.name, fmt::join(spec.allowed, ", "))};
      break;
    }
    case FactType::kStringList:
      if (!std::holds_alternative<std::vector<std::string>>(value)) return wrong("a list of strings");
      break;
  }
  return {std::move(value), {}};
}

std::string render_fact_value(const FactValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>) return v;
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) return v.empty() ? "none" : fmt::format("{}", fmt::join(v, ", "));
        else return fmt::format("{}", v);
      },
      value);
}

std::string render_size(std::int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024 && bytes > -1024) return fmt::format("{} bytes", bytes);
  double scaled = static_cast<double>(bytes);
  size_t unit = 0;
  for (scaled /= 1024; (scaled >= 1024 || scaled <= -1024) && unit + 1 < std::size(kUnits); scaled /= 1024) ++unit;
  if (scaled == static_cast<double>(static_cast<std::int64_t>(scaled))) return fmt::format("{} {}", static_cast<std::int64_t>(scaled), kUnits[unit]);
  return fmt::format("{:.1f} {}", scaled, kUnits[unit]);
}

void FactSet::set(std::string_view name, FactValue value) {
  const FactSpec* spec = find_fact(name);
  if (!spec) throw std::invalid_argument(unknown_fact_message(name));
  auto checked = check_fact_value(*spec, std::move(value));
  if (!checked.value) throw std::invalid_argument(checked.error);
  values_.insert_or_assign(std::string(name), std::move(checked.value));
}

void FactSet::set_unknown(std::string_view name) {
  if (!find_fact(name)) throw std::invalid_argument(unknown_fact_message(name));
  values_.insert_or_assign(std::string(name), std::nullopt);
}

const FactValue* FactSet::get(std::string_view name) const {
  auto it = values_.find(name);
  return it != values_.end() && it->second ? &*it->second : nullptr;
}

nlohmann::json FactSet::to_json() const {
  auto j = nlohmann::json::object();
  for (const auto& [name, value] : values_) {
    if (!value) {
      j[name] = nullptr;
      continue;
    }
    std::visit([&](const auto& v) { j[name] = v; }, *value);
  }
  return j;
}

FactSet FactSet::from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw InputError(fmt::format("{}: facts must be a JSON object of \"name\": value", origin));
  FactSet facts;
  for (const auto& [name, v] : j.items()) {
    const FactSpec* spec = find_fact(name);
    if (!spec) throw InputError(fmt::format("{}: {}", origin, unknown_fact_message(name)));
    if (v.is_null()) {
      facts.set_unknown(name);
      continue;
    }
    FactValue value;
    if (v.is_boolean()) value = v.get<bool>();
    else if (v.is_number_integer()) value = v.get<std::int64_t>();
    else if (v.is_number()) value = v.get<double>();
    else if (v.is_string()) value = v.get<std::string>();
    else if (v.is_array() && std::all_of(v.begin(), v.end(), [](const auto& e) { return e.is_string(); }))
      value = v.get<std::vector<std::string>>();
    else throw InputError(fmt::format("{}: fact '{}': expected true/false, a number, a string, a list of strings or null", origin, name));
    auto checked = check_fact_value(*spec, std::move(value));
    if (!checked.value) throw InputError(fmt::format("{}: {}", origin, checked.error));
    facts.values_.insert_or_assign(name, std::move(checked.value));
  }
  return facts;
}

}  // namespace p2paudit::policy
