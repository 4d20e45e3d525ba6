// SPDX-License-Identifier: GPL-2.0-or-later
#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "p2paudit/device_class.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/json_input.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/quoted_input.h"
#include "p2paudit/strict_yaml.h"

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
  return hint.empty() ? fmt::format("unknown fact {}", quoted_input(name))
                      : fmt::format("unknown fact {} (did you mean '{}'?)", quoted_input(name), hint);
}

}  // namespace

namespace {

// Why `value` (integers already made numbers where the spec asks for a number) cannot be the
// value of `spec`; "" when it can.
std::string fact_value_error(const FactSpec& spec, const FactValue& value) {
  auto wrong = [&](const char* expected) {
    return fmt::format("{} is {} fact, got {}", spec.name, expected, value_kind(value));
  };
  switch (spec.type) {
    case FactType::kBool:
      if (!std::holds_alternative<bool>(value)) return wrong("a bool (true/false)");
      break;
    case FactType::kInteger:
      if (!std::holds_alternative<std::int64_t>(value)) return wrong("an integer");
      break;
    case FactType::kNumber:
      if (!std::holds_alternative<double>(value)) return wrong("a number");
      break;
    case FactType::kString:
      if (!std::holds_alternative<std::string>(value)) return wrong("a string");
      break;
    case FactType::kEnum: {
      auto* s = std::get_if<std::string>(&value);
      if (!s) return wrong("an enum");
      if (std::find(spec.allowed.begin(), spec.allowed.end(), *s) == spec.allowed.end())
        return fmt::format("{} is not a value of {} (one of: {})", quoted_input(*s), spec.name, fmt::join(spec.allowed, ", "));
      break;
    }
    case FactType::kStringList:
      if (!std::holds_alternative<std::vector<std::string>>(value)) return wrong("a list of strings");
      break;
  }
  return {};
}

void as_number_if_asked(const FactSpec& spec, FactValue& value) {
  if (spec.type != FactType::kNumber) return;
  if (auto* i = std::get_if<std::int64_t>(&value)) value = static_cast<double>(*i);
}

}  // namespace

FactValueCheck check_fact_value(const FactSpec& spec, FactValue value) {
  as_number_if_asked(spec, value);
  std::string error = fact_value_error(spec, value);
  if (!error.empty()) return {std::nullopt, std::move(error)};
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

std::optional<FactId> fact_id(std::string_view name) {
  const FactSpec* spec = find_fact(name);
  if (!spec) return std::nullopt;
  return static_cast<FactId>(spec - fact_catalog().data());
}

const FactSpec& fact_spec(FactId id) { return fact_catalog()[static_cast<size_t>(id)]; }

const FactSet::Entry* FactSet::find(FactId id) const {
  for (const auto& e : values_)
    if (e.id == id) return &e;
  return nullptr;
}

void FactSet::put(FactId id, std::optional<FactValue>&& value) {
  for (auto& e : values_)
    if (e.id == id) {
      e.value = std::move(value);
      return;
    }
  values_.push_back({id, std::move(value)});
}

void FactSet::put(FactId id, FactValue&& value) {
  for (auto& e : values_)
    if (e.id == id) {
      e.value.emplace(std::move(value));
      return;
    }
  values_.push_back(Entry{id, std::optional<FactValue>(std::move(value))});
}

void FactSet::set(std::string_view name, FactValue value) {
  auto id = fact_id(name);
  if (!id) throw std::invalid_argument(unknown_fact_message(name));
  set(*id, std::move(value));
}

void FactSet::set(FactId id, FactValue value) {
  const FactSpec& spec = fact_spec(id);
  as_number_if_asked(spec, value);
  if (std::string error = fact_value_error(spec, value); !error.empty()) throw std::invalid_argument(error);
  put(id, std::move(value));
}

void FactSet::set_unknown(std::string_view name) {
  auto id = fact_id(name);
  if (!id) throw std::invalid_argument(unknown_fact_message(name));
  put(*id, std::nullopt);
}

const FactValue* FactSet::get(std::string_view name) const {
  auto id = fact_id(name);
  return id ? get(*id) : nullptr;
}

const FactValue* FactSet::get(FactId id) const {
  if (const Entry* e = find(id)) return e->value ? &*e->value : nullptr;
  for (const FactSet* layer : under_)
    if (const Entry* e = layer->find(id)) return e->value ? &*e->value : nullptr;
  return nullptr;
}

FactSet::Lookup FactSet::lookup_here(FactId id) const {
  const Entry* e = find(id);
  if (!e) return {};
  return {true, e->value ? &*e->value : nullptr};
}

FactSet FactSet::flattened() const {
  FactSet out;
  for (auto it = under_.rbegin(); it != under_.rend(); ++it)
    for (const auto& e : (*it)->values_) out.put(e.id, std::optional<FactValue>(e.value));
  for (const auto& e : values_) out.put(e.id, std::optional<FactValue>(e.value));
  return out;
}

std::vector<std::pair<std::string, std::optional<FactValue>>> FactSet::entries() const {
  std::vector<std::pair<std::string, std::optional<FactValue>>> out;
  for (const auto& e : values_) out.emplace_back(fact_spec(e.id).name, e.value);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

nlohmann::json FactSet::to_json() const {
  auto j = nlohmann::json::object();
  for (const auto& [name, value] : flattened().entries()) {
    if (!value) {
      j[name] = nullptr;
      continue;
    }
    auto& slot = j[name];  // clang 14 cannot capture a structured binding
    std::visit([&slot](const auto& v) { slot = v; }, *value);
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
    else if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX))
      throw InputError(fmt::format("{}: fact '{}': {} is out of range (at most {})", origin, name, v.dump(), INT64_MAX));
    else if (v.is_number_integer()) value = v.get<std::int64_t>();
    else if (v.is_number() && !std::isfinite(v.get<double>()))
      throw InputError(fmt::format("{}: fact '{}': {} is not a finite number", origin, name, v.dump()));
    else if (v.is_number()) value = v.get<double>();
    else if (v.is_string()) value = v.get<std::string>();
    else if (v.is_array() && std::all_of(v.begin(), v.end(), [](const auto& e) { return e.is_string(); }))
      value = v.get<std::vector<std::string>>();
    else throw InputError(fmt::format("{}: fact '{}': expected true/false, a number, a string, a list of strings or null", origin, name));
    auto checked = check_fact_value(*spec, std::move(value));
    if (!checked.value) throw InputError(fmt::format("{}: {}", origin, checked.error));
    facts.put(static_cast<FactId>(spec - fact_catalog().data()), std::move(checked.value));
  }
  return facts;
}

// ---- vendor facts files ----

namespace {

constexpr int kMaxVendorJsonDepth = 8;            // the format nests four deep
constexpr size_t kMaxVendorJsonValues = 200000;   // a 16-GPU host's every pair has a few dozen
constexpr size_t kMaxVendorStringBytes = 1024;    // version strings and the like

std::string json_kind(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "the integer " + v.dump();
    case nlohmann::json::value_t::number_float: return "the number " + v.dump();
    case nlohmann::json::value_t::string: {
      return "the string " + quoted_input(v.get_ref<const std::string&>(), '"');
    }
    case nlohmann::json::value_t::array: return "a list";
    case nlohmann::json::value_t::object: return "an object";
    default: return "something else";
  }
}

std::string vendor_fact_names() {
  std::string out;
  for (const auto& f : fact_catalog())
    if (f.source == FactSource::kVendor) out += (out.empty() ? "" : ", ") + f.name;
  return out;
}

// Reads one document; every error is "ORIGIN: ENTRY: problem".
class VendorFactsReader {
 public:
  explicit VendorFactsReader(const std::string& origin) : origin_raw_(origin), origin_(escape_text(origin)) {}

  [[noreturn]] void refuse(std::string_view entry, std::string_view problem) const {
    throw InputError(fmt::format("{}: {}: {}", origin_, entry, problem));
  }

  nlohmann::json parse(std::string_view text) const {
    if (auto bad = find_invalid_utf8(text))
      throw InputError(fmt::format("{}: {} (byte {}) (a JSON file is UTF-8 text)",
                                   format_position(origin_, text_position(text, bad->offset)), bad->description, bad->offset));
    // Bounded while parsing, so that a deep or huge document is refused before it is built.
    return parse_input_json(text, origin_raw_, {kMaxVendorJsonDepth, kMaxVendorJsonValues, "JSON"});
  }

  VendorFactsDocument read(const nlohmann::json& j) const {
    if (!j.is_object()) refuse("the document", fmt::format("expected an object with \"schema_version\": 1, got {}", json_kind(j)));
    for (const auto& [key, value] : j.items())
      if (key != "schema_version" && key != "all" && key != "devices" && key != "pairs")
        refuse(quoted_input(key, '"'), "unknown key (expected schema_version, all, devices, pairs)");
    if (!j.contains("schema_version")) refuse("schema_version", "missing (expected \"schema_version\": 1)");
    const auto& version = j["schema_version"];
    if (!version.is_number_integer() || version != 1)
      refuse("schema_version", fmt::format("expected 1 (the only version this p2paudit reads), got {}", json_kind(version)));
    VendorFactsDocument doc;
    if (j.contains("all")) doc.all = facts(j["all"], "all");
    if (j.contains("devices")) read_devices(j["devices"], doc);
    if (!j.contains("pairs")) return doc;
    const auto& pairs = j["pairs"];
    if (!pairs.is_array()) refuse("pairs", fmt::format("expected a list of {{provider, client, facts}}, got {}", json_kind(pairs)));
    for (size_t i = 0; i < pairs.size(); ++i) {
      const auto& entry = pairs[i];
      std::string where = fmt::format("pairs[{}]", i);
      if (!entry.is_object()) refuse(where, fmt::format("expected an object with provider, client and facts, got {}", json_kind(entry)));
      for (const auto& [key, value] : entry.items())
        if (key != "provider" && key != "client" && key != "facts" && key != "symmetric")
          refuse(where, fmt::format("unknown key {} (expected provider, client, facts, symmetric)", quoted_input(key, '"')));
      for (const char* key : {"provider", "client", "facts"})
        if (!entry.contains(key)) refuse(where, fmt::format("needs provider, client and facts; \"{}\" is missing", key));
      Bdf provider = bdf(entry["provider"], where + ".provider");
      Bdf client = bdf(entry["client"], where + ".client");
      bool symmetric = false;
      if (entry.contains("symmetric")) {
        if (!entry["symmetric"].is_boolean()) refuse(where + ".symmetric", fmt::format("expected true or false, got {}", json_kind(entry["symmetric"])));
        symmetric = entry["symmetric"].get<bool>();
      }
      FactSet set = facts(entry["facts"], where + ".facts");
      if (symmetric) doc.pairs[{client, provider}] = set;
      doc.pairs[{provider, client}] = std::move(set);
    }
    return doc;
  }

 private:
  std::string origin_raw_, origin_;

  // "devices": [{"bdf", "facts": {"memory_size": N}}]: per-device facts without the role prefix,
  // applied as provider.X when the device is the provider and client.X when it is the client.
  void read_devices(const nlohmann::json& devices, VendorFactsDocument& doc) const {
    if (!devices.is_array()) refuse("devices", fmt::format("expected a list of {{bdf, facts}}, got {}", json_kind(devices)));
    for (size_t i = 0; i < devices.size(); ++i) {
      const auto& entry = devices[i];
      std::string where = fmt::format("devices[{}]", i);
      if (!entry.is_object() || !entry.contains("bdf") || !entry.contains("facts") || entry.size() != 2)
        refuse(where, "expected an object with exactly bdf and facts");
      Bdf device = bdf(entry["bdf"], where + ".bdf");
      if (!entry["facts"].is_object()) refuse(where + ".facts", fmt::format("expected an object, got {}", json_kind(entry["facts"])));
      nlohmann::json as_provider = nlohmann::json::object();
      for (const auto& [name, value] : entry["facts"].items()) {
        if (name.find('.') != std::string::npos)
          refuse(where + ".facts", fmt::format("{}: a device fact is named without a prefix (memory_size, not "
                                               "provider.memory_size)", quoted_input(name)));
        as_provider["provider." + name] = value;
      }
      FactSet set = facts(as_provider, where + ".facts");
      FactSet& into = doc.devices[device];
      for (const auto& [name, value] : set.entries()) {
        std::string bare = name.substr(std::string_view("provider.").size());
        if (value) into.set("provider." + bare, *value);
        else into.set_unknown("provider." + bare);
      }
    }
  }

  Bdf bdf(const nlohmann::json& v, const std::string& where) const {
    auto parsed = v.is_string() ? Bdf::parse(v.get<std::string>()) : std::nullopt;
    if (!parsed) refuse(where, fmt::format("expected a PCI address DDDD:BB:DD.F, got {}", json_kind(v)));
    return *parsed;
  }

  FactSet facts(const nlohmann::json& j, const std::string& where) const {
    if (!j.is_object()) refuse(where, fmt::format("expected an object of \"fact\": value, got {}", json_kind(j)));
    FactSet out;
    for (const auto& [name, v] : j.items()) {
      const FactSpec* spec = find_fact(name);
      if (!spec) refuse(where, escape_text(unknown_fact_message(name)));
      if (spec->source != FactSource::kVendor)
        refuse(where, fmt::format("fact '{}' is computed by the analyzer from the machine, so a vendor facts file may "
                                  "not set it (it may set: {})", name, vendor_fact_names()));
      if (v.is_null()) {
        out.set_unknown(name);
        continue;
      }
      auto value = fact_value(*spec, v, where);
      auto checked = check_fact_value(*spec, std::move(value));
      if (!checked.value) refuse(where, fmt::format("fact '{}': {}", name, escape_text(checked.error)));
      out.set(name, std::move(*checked.value));
    }
    return out;
  }

  FactValue fact_value(const FactSpec& spec, const nlohmann::json& v, const std::string& where) const {
    auto wrong = [&](std::string_view expected) {
      refuse(where, fmt::format("fact '{}': expected {}, got {}", spec.name, expected, json_kind(v)));
    };
    auto text = [&](const nlohmann::json& s) {
      const auto& str = s.get_ref<const std::string&>();
      // Strings end up in terminals and reasons: no control characters, nothing very long.
      if (!is_clean_bytes(str) || str.size() > kMaxVendorStringBytes)
        refuse(where, fmt::format("fact '{}': {} must be printable text of at most {} bytes", spec.name, json_kind(s),
                                  kMaxVendorStringBytes));
      return str;
    };
    switch (spec.type) {
      case FactType::kBool:
        if (!v.is_boolean()) wrong("true or false");
        return v.get<bool>();
      case FactType::kInteger: {
        if (!v.is_number_integer()) wrong("an integer");
        bool fits = !v.is_number_unsigned() || v.get<std::uint64_t>() <= std::uint64_t(INT64_MAX);
        auto i = fits ? v.get<std::int64_t>() : INT64_MAX;
        if (!fits || (spec.minimum && double(i) < *spec.minimum) || (spec.maximum && double(i) > *spec.maximum))
          refuse(where, fmt::format("fact '{}': {} is out of range ({} to {})", spec.name, v.dump(),
                                    spec.minimum ? *spec.minimum : double(INT64_MIN), spec.maximum ? *spec.maximum : double(INT64_MAX)));
        return i;
      }
      case FactType::kNumber: {
        if (!v.is_number()) wrong("a number");
        double d = v.get<double>();
        if (!std::isfinite(d) || (spec.minimum && d < *spec.minimum) || (spec.maximum && d > *spec.maximum))
          refuse(where, fmt::format("fact '{}': {} is out of range", spec.name, v.dump()));
        return d;
      }
      case FactType::kString:
        if (!v.is_string()) wrong("a string");
        return text(v);
      case FactType::kEnum:
        if (!v.is_string()) wrong(fmt::format("one of {}", fmt::join(spec.allowed, ", ")));
        return text(v);
      case FactType::kStringList: {
        if (!v.is_array()) wrong("a list of strings");
        std::vector<std::string> items;
        for (const auto& item : v) {
          if (!item.is_string()) wrong("a list of strings");
          items.push_back(text(item));
        }
        return items;
      }
    }
    refuse(where, fmt::format("fact '{}': unsupported type", spec.name));
  }
};

}  // namespace

VendorFactsDocument VendorFactsDocument::parse(std::string_view json_text, const std::string& origin) {
  VendorFactsReader reader(origin);
  return reader.read(reader.parse(json_text));
}

VendorFactsDocument VendorFactsDocument::load(const std::string& path) {
  return parse(read_input_file(path, kMaxVendorFactsBytes), path);
}

namespace {

void copy_facts(const FactSet& from, FactSet& into) {
  for (const auto& [name, value] : from.entries()) {
    if (value) into.set(name, *value);
    else into.set_unknown(name);
  }
}

}  // namespace

void VendorFactsDocument::apply(const Bdf& provider, const Bdf& client, FactSet& facts) const {
  copy_facts(all, facts);
  apply_device(provider, true, facts);
  apply_device(client, false, facts);
  apply_pair(provider, client, facts);
}

void VendorFactsDocument::apply_device(const Bdf& device, bool as_provider, FactSet& facts) const {
  auto it = devices.find(device);
  if (it == devices.end()) return;
  // A device's facts are stored under "provider."; as the client they become "client.".
  for (const auto& [name, value] : it->second.entries()) {
    std::string as_role = (as_provider ? "provider." : "client.") + name.substr(std::string_view("provider.").size());
    if (value) facts.set(as_role, *value);
    else facts.set_unknown(as_role);
  }
}

void VendorFactsDocument::apply_pair(const Bdf& provider, const Bdf& client, FactSet& facts) const {
  if (auto it = pairs.find({provider, client}); it != pairs.end()) copy_facts(it->second, facts);
}

void VendorFactsDocument::merge(const VendorFactsDocument& over) {
  copy_facts(over.all, all);
  for (const auto& [bdf, set] : over.devices) copy_facts(set, devices[bdf]);
  for (const auto& [key, set] : over.pairs) copy_facts(set, pairs[key]);
}

namespace {

// The vendor a fact names, for the facts only one vendor's GPUs can have; 0 for any other fact.
std::uint16_t vendor_of_fact(std::string_view name) {
  if (name == "vendor.nvlink") return 0x10de;
  if (name == "vendor.xgmi") return 0x1002;
  return 0;
}

bool gpu_of(const Function& f, std::uint16_t vendor) {
  DeviceClass c = classify_device(f);
  return f.vendor == vendor && (c == DeviceClass::kGpu || c == DeviceClass::kAccelerator);
}

FactSet without(const FactSet& set, const std::vector<std::string>& names) {
  FactSet out;
  for (const auto& [name, value] : set.entries()) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    if (value) out.set(name, *value);
    else out.set_unknown(name);
  }
  return out;
}

std::string function_text(const Function& f) {
  return fmt::format("{} {:04x}:{:04x} {}", f.bdf.str(), f.vendor, f.device, device_class_name(classify_device(f)));
}

}  // namespace

std::vector<Finding> VendorFactsDocument::bind(const Topology& topo, const std::string& origin) {
  std::vector<Finding> findings;
  size_t dropped = 0;
  std::string path = escape_text(origin);
  auto note = [&](std::string message) {
    if (++dropped <= kMaxBindFindings) findings.push_back({path, std::move(message)});
  };
  // Facts that name a pair of one vendor's GPUs hold for no pair as a rule of "all".
  std::vector<std::string> vendor_only;
  for (const auto& [name, value] : all.entries())
    if (vendor_of_fact(name) && value) vendor_only.push_back(name);
  if (!vendor_only.empty()) {
    note(fmt::format("\"all\" sets {}, which describes one pair of GPUs: dropped (give it under \"pairs\" for the "
                     "GPUs it connects)", fmt::join(vendor_only, ", ")));
    all = without(all, vendor_only);
  }
  for (auto it = devices.begin(); it != devices.end();) {
    if (topo.find(it->first)) {
      ++it;
      continue;
    }
    note(fmt::format("device {}: no such PCI function in this machine: its facts are dropped", it->first.str()));
    it = devices.erase(it);
  }
  for (auto it = pairs.begin(); it != pairs.end();) {
    const auto& [provider, client] = it->first;
    const Function* p = topo.find(provider);
    const Function* c = topo.find(client);
    if (!p || !c) {
      note(fmt::format("pair {} -> {}: {} is no PCI function in this machine: its facts are dropped", provider.str(),
                       client.str(), (!p ? provider : client).str()));
      it = pairs.erase(it);
      continue;
    }
    std::vector<std::string> wrong;
    for (const auto& [name, value] : it->second.entries())
      if (auto vendor = vendor_of_fact(name); vendor && value && !(gpu_of(*p, vendor) && gpu_of(*c, vendor))) {
        wrong.push_back(name);
        note(fmt::format("pair {} -> {}: {} is a fact of two {} GPUs, and these are {} and {}: dropped", provider.str(),
                         client.str(), name, vendor == 0x10de ? "NVIDIA" : "AMD", function_text(*p), function_text(*c)));
      }
    if (!wrong.empty()) it->second = without(it->second, wrong);
    ++it;
  }
  if (dropped > kMaxBindFindings)
    findings.push_back({path, fmt::format("{} more entries were dropped the same way", dropped - kMaxBindFindings)});
  return findings;
}

}  // namespace p2paudit::policy
