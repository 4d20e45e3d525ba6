// SPDX-License-Identifier: GPL-2.0-or-later
// The facts policy rules are written against: a fixed catalogue of dotted names, each with a type
// and a one-line meaning, and FactSet, the values one (provider, client) pair has for them.
// The catalogue is the contract between whoever extracts facts (the analyzer, vendor probes, a
// hand-written facts file) and whoever writes rules: a rule may only name a catalogued fact, and a
// FactSet only accepts values of the catalogued type. A fact not in a FactSet is unknown.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/topology.h"

namespace p2paudit::policy {

enum class FactType { kBool, kInteger, kNumber, kString, kEnum, kStringList };
const char* to_string(FactType t);  // "bool", "integer", "number", "string", "enum", "list"

// Who knows a fact. The analyzer computes most from the sysroot and the kernel's rules; a few only
// vendor tools can tell (NVLink, XGMI, runtime versions, device memory), and only those may come
// from a vendor facts file: a file that could set kernel.allowed would overrule the analysis.
enum class FactSource { kAnalyzer, kVendor };
const char* to_string(FactSource s);  // "analyzer", "vendor"

struct FactSpec {
  std::string name;                  // dotted, e.g. "kernel.map_type", "provider.class"
  FactType type = FactType::kString;
  std::vector<std::string> allowed;  // kEnum only: every value the fact can take
  std::string description;           // one line, for docs and `p2paudit rules facts`
  FactSource source = FactSource::kAnalyzer;
  // kInteger, kNumber: the values that can be true; a vendor facts file is held to them.
  std::optional<double> minimum, maximum;
};

// Every fact, grouped by namespace (kernel., path., iommu., platform., vendor., runtime.,
// provider., client.) in the order the docs list them. Per-device facts appear twice, as "provider.X" (the device whose
// memory is reached) and "client.X" (the device doing the DMA).
const std::vector<FactSpec>& fact_catalog();

// nullptr when the name is not catalogued.
const FactSpec* find_fact(std::string_view name);

// The catalogued name closest to a misspelt one, for "did you mean" hints; "" when none is close.
std::string closest_fact_name(std::string_view name);

// How a user learns a fact the capture did not hold, in one clause: run on the machine as root,
// `snapshot --probe`, `probe --copy`, or the vendor fact to pass (docs/policy.md, "Uncertain
// decisions"). Every catalogued fact has one.
std::string how_to_learn(std::string_view name);
// The facts a derived one is worked out from (derive_facts(): bar_covers_memory from the largest BAR
// and the memory size; bar_beyond_address_width from the BAR's end and the CPU's address width):
// what a user learns to settle it. Empty for a fact that is read, not derived.
std::vector<std::string> derived_from(std::string_view name);

// Renderings of the catalogue: a Markdown table per namespace for docs/, JSON for tools.
std::string fact_catalog_markdown();
std::string fact_catalog_text();
nlohmann::json fact_catalog_json();

// A known value. kEnum and kString hold std::string; kNumber holds double; kStringList a vector.
using FactValue = std::variant<bool, std::int64_t, double, std::string, std::vector<std::string>>;

// How a value reads in a reason: true/false, decimal, the string, list items joined by ", "
// ("none" when empty).
std::string render_fact_value(const FactValue& value);

// Bytes as a person reads them: "256 MiB", "32 GiB", "1.5 KiB", "17 bytes".
std::string render_size(std::int64_t bytes);

// A catalogued fact by its position in fact_catalog(): what code that evaluates many pairs uses
// instead of the name.
enum class FactId : std::uint16_t {};
std::optional<FactId> fact_id(std::string_view name);
const FactSpec& fact_spec(FactId id);

class FactSet {
 public:
  // Both throw std::invalid_argument for a name not in the catalogue or a value of the wrong type
  // (an enum value outside its set included): facts are produced by code, so that is a bug.
  // An integer is accepted for a kNumber fact.
  void set(std::string_view name, FactValue value);
  void set(FactId id, FactValue value);
  void set_unknown(std::string_view name);  // explicit, for readers: same effect as never set
  // nullptr when the fact is unknown.
  const FactValue* get(std::string_view name) const;
  const FactValue* get(FactId id) const;
  bool known(std::string_view name) const { return get(name) != nullptr; }

  // Facts not set here are looked up in `under`, first to last (not owned: each must outlive this
  // set). A pair's own facts lie over its devices' and the machine's, which are computed once; a
  // fact set here as unknown hides a value below.
  void lay_over(std::vector<const FactSet*> under) { under_ = std::move(under); }
  // Whether the fact is set in this set itself, layers below aside, and its value (nullptr when set
  // as unknown).
  struct Lookup {
    bool set = false;
    const FactValue* value = nullptr;
  };
  Lookup lookup_here(FactId id) const;
  struct Entry {
    FactId id;
    std::optional<FactValue> value;
  };
  // The facts set in this set itself, in the order they were first set.
  const std::vector<Entry>& here() const { return values_; }
  // The same facts in one set of its own, with no layers below.
  FactSet flattened() const;

  // Facts set explicitly here (known or unknown), by name; the layers below are not included.
  std::vector<std::pair<std::string, std::optional<FactValue>>> entries() const;
  bool empty() const { return values_.empty(); }
  void reserve(size_t facts) { values_.reserve(facts); }
  // {"name": value-or-null, ...} of every layer; null is an explicitly unknown fact.
  nlohmann::json to_json() const;
  // Reads that shape back (a hand-written facts file, a probe's output); throws InputError naming
  // `origin` and the fact for an unknown name or a wrong type.
  static FactSet from_json(const nlohmann::json& j, const std::string& origin);

 private:
  const Entry* find(FactId id) const;
  void put(FactId id, std::optional<FactValue>&& value);
  void put(FactId id, FactValue&& value);

  std::vector<Entry> values_;  // a few dozen at most: a linear search beats a map
  std::vector<const FactSet*> under_;
};

// Facts from vendor tools (--vendor-facts FILE; docs/policy.md), as JSON:
//   {"schema_version": 1,
//    "all": {"runtime.compute_runtime_version": "26.09.1", ...},
//    "devices": [{"bdf": "0000:00:06.0", "facts": {"memory_size": 150754820096}}],
//    "pairs": [{"provider": "0000:00:06.0", "client": "0000:00:07.0", "symmetric": true,
//               "facts": {"vendor.nvlink": true}}]}
// Every name must be a catalogued fact whose source is kVendor, every value of its type and range.
// The file comes from a stranger: each error names the file, the entry and what was expected.
struct VendorFactsDocument {
  FactSet all;                                    // for every pair
  std::map<Bdf, FactSet> devices;                 // per device, stored as "provider.X"
  std::map<std::pair<Bdf, Bdf>, FactSet> pairs;   // (provider, client); a later entry replaces an earlier

  // Throws InputError "ORIGIN: ENTRY: problem" (ENTRY like pairs[2].facts, schema_version).
  static VendorFactsDocument parse(std::string_view json_text, const std::string& origin);
  // read_input_file(path, kMaxVendorFactsBytes), then parse().
  static VendorFactsDocument load(const std::string& path);

  // Copies the facts for (provider, client) over `facts`: all's, each device's, then the pair's own.
  void apply(const Bdf& provider, const Bdf& client, FactSet& facts) const;
  // The same in parts: one device's facts as the provider's or the client's, and a pair's own.
  void apply_device(const Bdf& device, bool as_provider, FactSet& facts) const;
  void apply_pair(const Bdf& provider, const Bdf& client, FactSet& facts) const;
  // Lays `over`'s facts over these (the runtime probe's first, a hand-written file over them).
  void merge(const VendorFactsDocument& over);
  // Binds the document to the tree it is applied to (docs/security.md): an entry naming a PCI
  // address the tree lacks is dropped, and so are the facts only one vendor's GPUs can have
  // (vendor.nvlink: a pair of NVIDIA GPUs or accelerators; vendor.xgmi: a pair of AMD ones) on every
  // other pair and in "all". Each drop is a finding {origin, what was dropped and why}; at most
  // kMaxBindFindings are listed, then one counting the rest.
  static constexpr size_t kMaxBindFindings = 16;
  std::vector<Finding> bind(const Topology& topo, const std::string& origin);
};

// Converts `value` to the representation `spec` asks for (integer → number) or says why it cannot;
// shared by FactSet and the rule loader so that both accept exactly the same values.
struct FactValueCheck {
  std::optional<FactValue> value;
  std::string error;  // set when value is empty: "expected a bool", "'x' is not one of a, b"
};
FactValueCheck check_fact_value(const FactSpec& spec, FactValue value);

}  // namespace p2paudit::policy
