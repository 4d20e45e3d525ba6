// SPDX-License-Identifier: GPL-2.0-or-later
// The aggregate state: reading reports and partial states into it (hostile input: every field
// used is type-checked and bounded), merging, and the text, JSON and CSV renderings.
#include <algorithm>
#include <limits>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/fleet/aggregate.h"
#include "p2paudit/fleet/report.h"
#include "p2paudit/input_file.h"
#include "p2paudit/json_input.h"
#include "p2paudit/kernel_rules.h"

namespace p2paudit::fleet {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// Counts read from a partial state are bounded by what reports could have made (kMaxPartialMachines
// machines, kMaxPairsPerMachine pairs each: below 2^46), so that adding even thousands of them stays
// exact; the sums saturate rather than wrap in the absurd case.
constexpr size_t kMaxNameBytes = 256;     // CPU model and device names
constexpr size_t kMaxReleaseBytes = 64;   // as uname's release field
constexpr size_t kMaxRuleBytes = 128;
constexpr size_t kMaxVendorBytes = 64;    // a CPUID vendor string is 12 bytes
// A skipped input's name (a path of up to PATH_MAX bytes, each escaped) and its reason: what this
// tool records, so that its own partials read back.
constexpr size_t kMaxInputBytes = 16384;
constexpr size_t kMaxReasonBytes = 16384;

// Candidate statuses (whitelist.h, to_string(CandidateStatus)); "rejected" is what reports written
// before "do not submit" say.
const char* const kStatuses[] = {"ready to submit", "needs evidence", "rejected",          "fixed in",
                                 "do not submit",   "queued upstream", "proposed upstream"};
// CPUID's family (base + extended) and model fit in 16 bits with room to spare.
constexpr std::int64_t kMaxCpuNumber = 0xffff;

void add(std::uint64_t& total, std::uint64_t n) {
  total = total > std::numeric_limits<std::uint64_t>::max() - n ? std::numeric_limits<std::uint64_t>::max() : total + n;
}

void add(Counts& total, const Counts& more) {
  for (const auto& [key, n] : more) add(total[key], n);
}

// At most `machines` machines' worth of pairs.
std::uint64_t pairs_of(std::uint64_t machines) { return machines * kMaxPairsPerMachine; }

std::uint64_t sum(const Counts& counts) {
  std::uint64_t total = 0;
  for (const auto& [key, n] : counts) add(total, n);
  return total;
}

std::uint64_t count_of(const Counts& counts, const std::string& key) {
  auto it = counts.find(key);
  return it == counts.end() ? 0 : it->second;
}

bool is_pci_id(const std::string& s) {
  static const std::regex pattern("[0-9a-f]{4}:[0-9a-f]{4}");
  return s.size() == 9 && std::regex_match(s, pattern);
}

bool is_rule_key(const std::string& s) {
  static const std::regex pattern("[a-z0-9-]+");
  return s == kNoRuleKey || (s.size() <= kMaxRuleBytes && std::regex_match(s, pattern));
}

// Reads one hostile document; every error names the origin and the place ("decisions[3].rule").
class Checker {
 public:
  explicit Checker(const std::string& origin) : origin_(escape_text(origin)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& problem) const {
    throw InputError(fmt::format("{}: {}: {}", origin_, where, problem));
  }
  const json& field(const json& object, const char* key, const std::string& where) const {
    std::string at = where.empty() ? key : where + "." + key;
    if (!object.is_object()) fail(where.empty() ? "the document" : where, "expected an object");
    auto it = object.find(key);
    if (it == object.end()) fail(at, "missing");
    return *it;
  }
  const json& array(const json& object, const char* key, const std::string& where) const {
    const json& a = field(object, key, where);
    if (!a.is_array()) fail(where.empty() ? key : where + "." + key, "expected an array");
    return a;
  }
  const json& object(const json& object, const char* key, const std::string& where) const {
    const json& o = field(object, key, where);
    if (!o.is_object()) fail(where.empty() ? key : where + "." + key, "expected an object");
    return o;
  }
  // Input text made valid UTF-8 without controls (escape_bytes: JSON keeps the rest literal, the
  // text and CSV outputs pass the gate), at most max bytes once escaped: what is kept is
  // what a partial written from this state holds, so the tool's own partials always read back.
  std::string bounded(const std::string& s, const std::string& where, size_t max, std::string_view what = "") const {
    if (s.size() > max) fail(where, fmt::format("{}longer than {} bytes", what, max));
    std::string out = escape_bytes(s);
    if (out.size() > max) fail(where, fmt::format("{}longer than {} bytes once its control bytes are escaped", what, max));
    return out;
  }
  // A string of at most max bytes (escaped), made safe to print; "" for null when nullable.
  std::string text(const json& j, const std::string& where, size_t max, bool nullable = false) const {
    if (nullable && j.is_null()) return "";
    if (!j.is_string()) fail(where, nullable ? "expected a string or null" : "expected a string");
    return bounded(j.get_ref<const std::string&>(), where, max);
  }
  std::string one_of(const json& j, const std::string& where, std::initializer_list<const char*> allowed) const {
    if (j.is_string())
      for (const char* a : allowed)
        if (j.get_ref<const std::string&>() == a) return a;
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    fail(where, "expected one of " + list);
  }
  std::string pci_id(const json& j, const std::string& where) const {
    std::string s = text(j, where, 16);
    if (!is_pci_id(s)) fail(where, "expected a PCI ID VVVV:DDDD (lower-case hex)");
    return s;
  }
  // An integer from 0 to max; `of` says what bounds it ("the machines of host_bridge_ids.X").
  std::uint64_t count(const json& j, const std::string& where, std::uint64_t max, std::string_view of) const {
    bool integer = j.is_number_unsigned() || (j.is_number_integer() && j.get<std::int64_t>() >= 0);
    if (!integer || j.get<std::uint64_t>() > max)
      fail(where, fmt::format("expected a count from 0 to {} ({})", max, of));
    return j.get<std::uint64_t>();
  }
  std::uint64_t count(const json& object, const char* key, const std::string& where, std::uint64_t max,
                      std::string_view of) const {
    return count(field(object, key, where), join(where, key), max, of);
  }
  // A map of counts, each at most max; keys of at most max_key_bytes.
  Counts counts(const json& object, const char* key, const std::string& where, size_t max_key_bytes,
                std::uint64_t max, std::string_view of) const {
    std::string at = join(where, key);
    Counts out;
    for (const auto& [name, n] : this->object(object, key, where).items()) {
      std::string k = bounded(name, at, max_key_bytes, "a key ");
      add(out[k], count(n, at + "." + k, max, of));
    }
    return out;
  }
  // Counts that must add up to `total` (each machine counted once: one kernel, one status...).
  void adds_up(const Counts& counts, std::uint64_t total, const std::string& where, std::string_view of) const {
    if (std::uint64_t n = sum(counts); n != total)
      fail(where, fmt::format("the counts add up to {}, not to the {} of {}", n, total, of));
  }
  static std::string join(const std::string& where, const char* key) { return where.empty() ? key : where + "." + key; }
  // `newest`: the newest version of this kind this tool reads (a report: 2, grouped pairs).
  void header(const json& doc, std::string_view kind, int newest = kAggregateSchemaVersion) const {
    if (!doc.is_object()) fail("the document", "expected a JSON object");
    const json& version = field(doc, "schema_version", "");
    if (!version.is_number_integer() || version.get<std::int64_t>() < 1 || version.get<std::int64_t>() > newest)
      fail("schema_version", newest == 1 ? fmt::format("expected 1 (this tool reads version 1)")
                                         : fmt::format("expected 1 to {} (this tool reads versions 1 to {})", newest, newest));
    if (text(field(doc, "kind", ""), "kind", 64) != kind) fail("kind", fmt::format("expected \"{}\"", kind));
  }

 private:
  std::string origin_;
};

std::string at(const char* array, size_t i) { return fmt::format("{}[{}]", array, i); }

void keep_smallest_name(std::string& name, const std::string& other) {
  if (!other.empty() && (name.empty() || other < name)) name = other;
}

bool is_digest(const std::string& s) {
  static const std::regex pattern("fnv1a64:[0-9a-f]{16}");
  return s.size() == 24 && std::regex_match(s, pattern);
}

// How many names the text shows per finding before "and N more" (JSON and CSV name them all).
constexpr size_t kTextNames = 8;

// "Intel(R) Xeon(R) Gold 6430", else "GenuineIntel family 6 model 143", else "unknown".
std::string cpu_label(const Checker& c, const json& machine) {
  // The numbers are checked whether or not the name makes them unneeded.
  auto number = [&](const char* key) -> std::string {
    const json& j = c.field(machine, key, "machine");
    if (j.is_null()) return "?";
    if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<std::uint64_t>() > kMaxCpuNumber) ||
        j.get<std::int64_t>() < 0 || j.get<std::int64_t>() > kMaxCpuNumber)
      c.fail(std::string("machine.") + key, fmt::format("expected an integer from 0 to {} or null", kMaxCpuNumber));
    return std::to_string(j.get<std::int64_t>());
  };
  std::string family = number("cpu_family"), model = number("cpu_model");
  std::string name = c.text(c.field(machine, "cpu_model_name", "machine"), "machine.cpu_model_name", kMaxNameBytes);
  if (!name.empty()) return name;
  // At most 64 bytes, so that "VENDOR family F model M" fits a CPU model name's 256.
  std::string vendor = c.text(c.field(machine, "cpu_vendor", "machine"), "machine.cpu_vendor", kMaxVendorBytes);
  if (vendor.empty() && family == "?") return "unknown";
  return fmt::format("{} family {} model {}", vendor.empty() ? "unknown" : vendor, family, model);
}

// The earliest of releases such as "7.2" (a value that is not a release sorts last).
std::string earliest_release(const Counts& releases) {
  std::string best;
  std::optional<KernelRelease> best_release;
  for (const auto& [text, n] : releases) {
    auto r = KernelRelease::parse(text);
    if (best.empty() || (r && (!best_release || *r < *best_release))) best = text, best_release = r;
  }
  return best;
}

}  // namespace

std::string csv_cell(const std::string& s) {
  // A cell a spreadsheet would run as a formula is kept as text (OWASP's advice: = + - @, and tab
  // and carriage return, after which a spreadsheet still reads a formula): names come from other
  // machines. A cell holding a separator, a quote or a line break is quoted (RFC 4180).
  static constexpr std::string_view kFormulaStart("=+-@\t\r", 6);
  std::string v = !s.empty() && kFormulaStart.find(s[0]) != std::string_view::npos ? "'" + s : s;
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char ch : v) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

namespace {

std::string counts_text(const Counts& counts) {
  // Largest first, then by name: the few that matter lead.
  std::vector<std::pair<std::string, std::uint64_t>> items(counts.begin(), counts.end());
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [name, n] : items) out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", name, n);
  return out.empty() ? "none" : out;
}

}  // namespace

void HostBridgeIdStats::merge(const HostBridgeIdStats& o) {
  keep_smallest_name(name, o.name);
  add(machines, o.machines);
  add(cpu_models, o.cpu_models);
  add(kernels, o.kernels);
  add(refused_pairs, o.refused_pairs);
  add(candidate_machines, o.candidate_machines);
  add(unlockable_pairs, o.unlockable_pairs);
  add(verified_copies, o.verified_copies);
  add(corrupt_copies, o.corrupt_copies);
  add(failed_copies, o.failed_copies);
  add(statuses, o.statuses);
  add(fixed_in, o.fixed_in);
  refused_on.insert(o.refused_on.begin(), o.refused_on.end());
  candidate_on.insert(o.candidate_on.begin(), o.candidate_on.end());
  corrupt_on.insert(o.corrupt_on.begin(), o.corrupt_on.end());
  failed_on.insert(o.failed_on.begin(), o.failed_on.end());
}

std::string HostBridgeIdStats::status() const {
  if (candidate_machines == 0) return "not a candidate";
  if (corrupt_copies > 0) return "rejected";
  auto fixed = statuses.find("fixed in");
  if (fixed != statuses.end() && fixed->second >= candidate_machines && !fixed_in.empty())
    return "fixed in " + earliest_release(fixed_in);
  // A machine's own "do not submit" (a public report) and upstream's state hold fleet-wide.
  for (const char* own : {"do not submit", "queued upstream", "proposed upstream"})
    if (count_of(statuses, own) > 0) return own;
  if (verified_copies > 0) return "ready to submit";
  return "needs evidence";
}

void AggregateState::merge(const AggregateState& o) {
  add(machines, o.machines);
  for (const auto& [id, s] : o.host_bridge_ids) host_bridge_ids[id].merge(s);
  for (const auto& [release, k] : o.kernels) {
    add(kernels[release].machines, k.machines);
    add(kernels[release].refused_pairs, k.refused_pairs);
  }
  for (const auto& [rule, d] : o.decisions) {
    auto& mine = decisions[rule];
    add(mine.peer, d.peer), add(mine.host_staged, d.host_staged), add(mine.deny, d.deny);
    mine.on.insert(d.on.begin(), d.on.end());
  }
  skipped.insert(skipped.end(), o.skipped.begin(), o.skipped.end());
  for (const auto& [key, input] : o.machine_list) {
    auto [it, added] = machine_list.try_emplace(key, input);
    if (!added && input < it->second) it->second = input;  // the same whatever the order
  }
}

std::optional<std::string> AggregateState::merge_new_machines(const AggregateState& more) {
  for (const auto& [key, input] : more.machine_list)
    if (auto it = machine_list.find(key); it != machine_list.end())
      return fmt::format("the same machine as {} (named {}, topology digest {}), counted once{}", it->second,
                         key.name, key.topology_digest,
                         more.machines > 1 ? ": a partial's counts cannot be split, so none of this one's is merged" : "");
  merge(more);
  return std::nullopt;
}

std::string fnv1a64(std::string_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325u;
  for (unsigned char ch : bytes) hash = (hash ^ ch) * 0x100000001b3u;
  return fmt::format("fnv1a64:{:016x}", hash);
}

void AggregateState::add_report(const json& report, const std::string& origin, const std::string& input_id) {
  Checker c(origin);
  c.header(report, kReportKind, kGroupedReportSchemaVersion);
  const json& machine = c.object(report, "machine", "");
  std::string cpu = cpu_label(c, machine);
  // The machine's name (docs/fleet.md, "Machines"): its host name, else the input's own id.
  MachineKey key;
  key.topology_digest = c.text(c.field(report, "topology_digest", ""), "topology_digest", 64);
  if (!is_digest(key.topology_digest)) c.fail("topology_digest", "expected fnv1a64: and 16 lower-case hex digits");
  if (machine.contains("hostname"))
    key.name = c.text(machine["hostname"], "machine.hostname", kMaxNameBytes, true);
  if (key.name.empty()) key.name = input_id.empty() ? key.topology_digest : "input:" + input_id.substr(input_id.find(':') + 1);
  std::string kernel = c.text(c.field(c.object(report, "kernel_rules", ""), "release", "kernel_rules"),
                              "kernel_rules.release", kMaxReleaseBytes);
  if (kernel.empty()) kernel = "unknown";

  AggregateState one;
  one.machines = 1;
  one.machine_list[key] = c.bounded(origin, "the input's name", kMaxInputBytes);
  KernelStats& k = one.kernels[kernel];
  k.machines = 1;
  std::map<std::string, HostBridgeIdStats> ids;

  const json& bridges = c.array(report, "host_bridges", "");
  for (size_t i = 0; i < bridges.size(); ++i) {
    std::string where = at("host_bridges", i);
    const json& id = c.field(bridges[i], "id", where);
    if (id.is_null()) continue;  // a host bridge with no device on its root bus
    auto& s = ids[c.pci_id(id, where + ".id")];
    keep_smallest_name(s.name, c.text(c.field(bridges[i], "device_name", where), where + ".device_name", kMaxNameBytes, true));
  }
  // An element is one pair, or past kMostListedPairs one kind of pair with its "pairs" count: each
  // section's pairs add up to at most the ordered pairs of the devices listed.
  const std::uint64_t device_pairs = std::min(ordered_pairs(c.array(report, "devices", "").size()), kMaxPairsPerMachine);
  auto pairs_in = [&](const json& element, const std::string& where, std::uint64_t& section_total,
                      const std::string& section) {
    std::uint64_t n = 1;
    if (element.is_object() && element.contains("pairs"))
      n = c.count(element, "pairs", where, device_pairs, "the ordered pairs of the report's devices");
    add(section_total, n);
    if (section_total > device_pairs)
      c.fail(where, fmt::format("{} counts more than the {} ordered pairs of the report's devices", section, device_pairs));
    return n;
  };
  const json& verdicts = c.array(report, "kernel_verdicts", "");
  std::uint64_t verdict_pairs = 0;
  for (size_t i = 0; i < verdicts.size(); ++i) {
    std::string where = at("kernel_verdicts", i);
    std::uint64_t n = pairs_in(verdicts[i], where, verdict_pairs, "kernel_verdicts");
    if (c.one_of(c.field(verdicts[i], "verdict", where), where + ".verdict", {"allowed", "refused", "unknown"}) != "refused")
      continue;
    add(k.refused_pairs, n);
    const json& refused_at = c.array(verdicts[i], "refused_at", where);
    for (size_t r = 0; r < refused_at.size(); ++r) {
      auto& s = ids[c.pci_id(refused_at[r], fmt::format("{}.refused_at[{}]", where, r))];
      add(s.refused_pairs, n);
      s.refused_on.insert(key);
    }
  }
  const json& decisions_json = c.array(report, "decisions", "");
  std::uint64_t decided_pairs = 0;
  for (size_t i = 0; i < decisions_json.size(); ++i) {
    std::string where = at("decisions", i);
    std::uint64_t n = pairs_in(decisions_json[i], where, decided_pairs, "decisions");
    std::string rule = c.text(c.field(decisions_json[i], "rule", where), where + ".rule", kMaxRuleBytes, true);
    if (rule.empty()) rule = kNoRuleKey;
    else if (!is_rule_key(rule) || rule == kNoRuleKey) c.fail(where + ".rule", "expected a rule id ([a-z0-9-]+) or null");
    auto& d = one.decisions[rule];
    std::string action = c.one_of(c.field(decisions_json[i], "decision", where), where + ".decision", {"peer", "host_staged", "deny"});
    add(action == "peer" ? d.peer : action == "deny" ? d.deny : d.host_staged, n);
    d.on.insert(key);
  }
  // A machine lists each host-bridge ID once, with one status that agrees with its own evidence
  // (whitelist_candidates()): what a partial's counts are checked against holds for reports too.
  const json& candidates = c.array(report, "candidates", "");
  std::set<std::string> listed;
  for (size_t i = 0; i < candidates.size(); ++i) {
    std::string where = at("candidates", i);
    const json& cand = candidates[i];
    std::string id = c.pci_id(c.field(cand, "id", where), where + ".id");
    if (!listed.insert(id).second) c.fail(where + ".id", "a host-bridge ID listed twice among the candidates");
    auto& s = ids[id];
    keep_smallest_name(s.name, c.text(c.field(cand, "name", where), where + ".name", kMaxNameBytes, true));
    s.candidate_machines = 1;
    s.candidate_on.insert(key);
    std::string status = c.one_of(c.field(cand, "status", where), where + ".status",
                                  {kStatuses[0], kStatuses[1], kStatuses[2], kStatuses[3], kStatuses[4],
                                   kStatuses[5], kStatuses[6]});
    s.statuses[status] = 1;
    std::string fixed = c.text(c.field(cand, "fixed_in", where), where + ".fixed_in", kMaxReleaseBytes, true);
    if (fixed.empty() != (status != "fixed in"))
      c.fail(where + ".fixed_in", "a release exactly when the status is \"fixed in\"");
    if (!fixed.empty()) s.fixed_in[fixed] = 1;
    const json& pairs = c.array(cand, "pairs", where);
    std::uint64_t candidate_pairs = 0;
    for (size_t p = 0; p < pairs.size(); ++p) {
      std::string pw = fmt::format("{}.pairs[{}]", where, p);
      std::uint64_t n = pairs_in(pairs[p], pw, candidate_pairs, where + ".pairs");
      add(s.unlockable_pairs, n);
      const json& result = c.field(pairs[p], "copy_result", pw);
      if (result.is_null()) continue;
      std::string r = c.one_of(result, pw + ".copy_result", {"verified", "corrupt", "failed", "not_run"});
      if (r == "verified") add(s.verified_copies, n);
      if (r == "corrupt") add(s.corrupt_copies, n), s.corrupt_on.insert(key);
      if (r == "failed") add(s.failed_copies, n), s.failed_on.insert(key);
    }
    if (status == "ready to submit" && s.verified_copies == 0)
      c.fail(where + ".status", "\"ready to submit\" with no verified copy among its pairs");
    if (status == "rejected" && s.corrupt_copies + s.failed_copies == 0)
      c.fail(where + ".status", "\"rejected\" with no corrupt or failed copy among its pairs");
  }
  for (auto& [id, s] : ids) {
    s.machines = 1;
    s.cpu_models[cpu] = 1;
    s.kernels[kernel] = 1;
    one.host_bridge_ids[id] = std::move(s);
  }
  merge(one);
}

void AggregateState::add_partial(const json& doc, const std::string& origin) {
  // Every count is bounded by the machines (or those machines' pairs) it counts, and the sums add up
  // as reports make them: a partial may claim only what some set of reports could have given.
  Checker c(origin);
  c.header(doc, kPartialKind);
  AggregateState one;
  one.machines = c.count(doc, "machines", "", kMaxPartialMachines, "the machines one partial may claim");
  std::uint64_t all_pairs = pairs_of(one.machines);
  const std::string of_machines = fmt::format("the {} machines of \"machines\"", one.machines);

  // The machines named (docs/fleet.md, "Machines"): no more than it counts, each once; the lists
  // of each finding name only those, each once, and no more than the finding counts. A partial of
  // an older tool has none of them: its machines are counted, not named.
  auto machine_key = [&](const json& e, const std::string& where) {
    MachineKey key{c.text(c.field(e, "name", where), where + ".name", kMaxNameBytes),
                   c.text(c.field(e, "topology_digest", where), where + ".topology_digest", 64)};
    if (key.name.empty()) c.fail(where + ".name", "expected a name of at least one byte");
    if (!is_digest(key.topology_digest)) c.fail(where + ".topology_digest", "expected fnv1a64: and 16 lower-case hex digits");
    return key;
  };
  if (doc.contains("machine_list")) {
    const json& list = c.array(doc, "machine_list", "");
    if (list.size() > one.machines)
      c.fail("machine_list", fmt::format("names {} machines, more than {}", list.size(), of_machines));
    for (size_t i = 0; i < list.size(); ++i) {
      std::string where = at("machine_list", i);
      MachineKey key = machine_key(list[i], where);
      std::string input = c.text(c.field(list[i], "input", where), where + ".input", kMaxInputBytes);
      if (!one.machine_list.emplace(std::move(key), std::move(input)).second) c.fail(where, "a machine named twice");
    }
  }
  auto names = [&](const json& object, const char* key, const std::string& where, std::uint64_t max,
                   std::string_view of) {
    MachineSet out;
    if (!object.is_object() || !object.contains(key)) return out;
    std::string at_key = Checker::join(where, key);
    const json& list = c.array(object, key, where);
    if (list.size() > max) c.fail(at_key, fmt::format("names {} machines, more than {}", list.size(), of));
    for (size_t i = 0; i < list.size(); ++i) {
      std::string w = fmt::format("{}[{}]", at_key, i);
      MachineKey m = machine_key(list[i], w);
      if (!one.machine_list.count(m)) c.fail(w, "a machine that machine_list does not name");
      if (!out.insert(std::move(m)).second) c.fail(w, "a machine named twice");
    }
    return out;
  };

  for (const auto& [release, j] : c.object(doc, "kernels", "").items()) {
    std::string where = "kernels." + escape_text(release.substr(0, kMaxReleaseBytes + 1));
    if (release.empty() || release.size() > kMaxReleaseBytes || escape_bytes(release).size() > kMaxReleaseBytes)
      c.fail(where, fmt::format("expected a release of 1 to {} bytes (escaped) as the key", kMaxReleaseBytes));
    auto& k = one.kernels[escape_bytes(release)];
    if (k.machines) c.fail(where, "a release given twice (once escaped)");
    k.machines = c.count(j, "machines", where, one.machines, of_machines);
    k.refused_pairs = c.count(j, "refused_pairs", where, pairs_of(k.machines), "its machines' pairs");
  }
  std::uint64_t kernel_machines = 0;
  for (const auto& [release, k] : one.kernels) add(kernel_machines, k.machines);
  if (kernel_machines != one.machines)
    c.fail("kernels", fmt::format("the machines add up to {}, not to the {}", kernel_machines, of_machines));

  for (const auto& [id, j] : c.object(doc, "host_bridge_ids", "").items()) {
    std::string where = "host_bridge_ids." + escape_text(id.substr(0, 64));
    if (!is_pci_id(id)) c.fail(where, "expected a PCI ID VVVV:DDDD (lower-case hex) as the key");
    auto in = [&](const char* key) { return where + "." + key; };
    HostBridgeIdStats s;
    s.name = c.text(c.field(j, "name", where), in("name"), kMaxNameBytes);
    s.machines = c.count(j, "machines", where, one.machines, of_machines);
    const std::string of_id = fmt::format("the {} machines of {}", s.machines, in("machines"));
    s.cpu_models = c.counts(j, "cpu_models", where, kMaxNameBytes, s.machines, of_id);
    c.adds_up(s.cpu_models, s.machines, in("cpu_models"), of_id);
    s.kernels = c.counts(j, "kernels", where, kMaxReleaseBytes, s.machines, of_id);
    c.adds_up(s.kernels, s.machines, in("kernels"), of_id);
    for (const auto& [release, n] : s.kernels) {
      auto k = one.kernels.find(release);
      if (k == one.kernels.end() || n > k->second.machines)
        c.fail(in("kernels") + "." + release, "more machines than \"kernels\" has for that release");
    }
    s.refused_pairs = c.count(j, "refused_pairs", where, pairs_of(s.machines), "its machines' pairs");
    s.candidate_machines = c.count(j, "candidate_machines", where, s.machines, of_id);
    // Only candidate machines have pairs to unlock, and only those pairs have copy results.
    s.unlockable_pairs = c.count(j, "unlockable_pairs", where, pairs_of(s.candidate_machines),
                                 fmt::format("the pairs of its {} candidate machines", s.candidate_machines));
    const std::string of_pairs = fmt::format("its {} unlockable pairs", s.unlockable_pairs);
    s.verified_copies = c.count(j, "verified_copies", where, s.unlockable_pairs, of_pairs);
    s.corrupt_copies = c.count(j, "corrupt_copies", where, s.unlockable_pairs, of_pairs);
    s.failed_copies = c.count(j, "failed_copies", where, s.unlockable_pairs, of_pairs);
    if (s.verified_copies + s.corrupt_copies + s.failed_copies > s.unlockable_pairs)
      c.fail(where, "more copy results than " + of_pairs);
    // Each candidate machine has one status, consistent with its copies and its release.
    const std::string of_candidates = fmt::format("the {} machines of {}", s.candidate_machines, in("candidate_machines"));
    s.statuses = c.counts(j, "statuses", where, 32, s.candidate_machines, of_candidates);
    for (const auto& [status, n] : s.statuses)
      if (std::find(std::begin(kStatuses), std::end(kStatuses), status) == std::end(kStatuses))
        c.fail(in("statuses"), "a key that is not a candidate status: " + status);
    c.adds_up(s.statuses, s.candidate_machines, in("statuses"), of_candidates);
    if (count_of(s.statuses, "ready to submit") > s.verified_copies)
      c.fail(in("statuses"), "more machines \"ready to submit\" than verified copies");
    if (count_of(s.statuses, "rejected") > s.corrupt_copies + s.failed_copies)
      c.fail(in("statuses"), "more machines \"rejected\" than corrupt or failed copies");
    const std::uint64_t fixed = count_of(s.statuses, "fixed in");
    const std::string of_fixed = fmt::format("the {} machines \"fixed in\" of {}", fixed, in("statuses"));
    s.fixed_in = c.counts(j, "fixed_in", where, kMaxReleaseBytes, fixed, of_fixed);
    c.adds_up(s.fixed_in, fixed, in("fixed_in"), of_fixed);
    // Each named machine counts in the finding it is named for.
    s.refused_on = names(j, "refused_on", where, std::min(s.machines, s.refused_pairs),
                         fmt::format("the {} machines or {} refused pairs of {}", s.machines, s.refused_pairs, where));
    s.candidate_on = names(j, "candidate_on", where, s.candidate_machines, of_candidates);
    s.corrupt_on = names(j, "corrupt_on", where, std::min(s.candidate_machines, s.corrupt_copies),
                         fmt::format("its candidate machines or {} corrupt copies", s.corrupt_copies));
    s.failed_on = names(j, "failed_on", where, std::min(s.candidate_machines, s.failed_copies),
                        fmt::format("its candidate machines or {} failed copies", s.failed_copies));
    one.host_bridge_ids[id] = std::move(s);
  }

  std::uint64_t decided = 0;
  for (const auto& [rule, j] : c.object(doc, "decisions", "").items()) {
    std::string where = "decisions." + escape_text(rule.substr(0, 160));
    if (!is_rule_key(rule)) c.fail(where, fmt::format("expected a rule id ([a-z0-9-]+) or \"{}\" as the key", kNoRuleKey));
    auto& d = one.decisions[rule];
    const char* of_all = "the pairs of all its machines";
    d.peer = c.count(j, "peer", where, all_pairs, of_all);
    d.host_staged = c.count(j, "host_staged", where, all_pairs, of_all);
    d.deny = c.count(j, "deny", where, all_pairs, of_all);
    add(decided, d.peer), add(decided, d.host_staged), add(decided, d.deny);
    if (decided > all_pairs) c.fail(where, fmt::format("more decisions than the pairs of all its machines ({})", all_pairs));
    std::uint64_t rule_pairs = 0;
    add(rule_pairs, d.peer), add(rule_pairs, d.host_staged), add(rule_pairs, d.deny);
    d.on = names(j, "on", where, std::min(one.machines, rule_pairs),
                 fmt::format("the machines or the {} pairs it decided", rule_pairs));
  }
  const json& skipped_json = c.array(doc, "skipped", "");
  for (size_t i = 0; i < skipped_json.size(); ++i) {
    std::string where = at("skipped", i);
    one.skipped.push_back({c.text(c.field(skipped_json[i], "input", where), where + ".input", kMaxInputBytes),
                           c.text(c.field(skipped_json[i], "reason", where), where + ".reason", kMaxReasonBytes)});
  }
  merge(one);
}

void AggregateState::add_document(const json& doc, const std::string& origin, bool as_partial,
                                  const std::string& input_id) {
  json kind = doc.is_object() && doc.contains("kind") ? doc["kind"] : json();
  bool says_partial = kind == std::string(kPartialKind);
  if (as_partial) {
    if (!says_partial)
      throw InputError(fmt::format("{}: given with --merge, but not an `aggregate --partial` output (\"kind\": \"{}\")",
                                   escape_text(origin), kPartialKind));
    add_partial(doc, origin);
  } else if (says_partial) {
    // A partial counts as many machines as it says: only the user may let a file do that.
    throw InputError(fmt::format("{}: an `aggregate --partial` output among the ordinary inputs, where it is not read "
                                 "(a partial stands for many machines): name it with --merge to merge it",
                                 escape_text(origin)));
  } else if (kind == std::string(kReportKind)) {
    add_report(doc, origin, input_id);
  } else {
    throw InputError(fmt::format("{}: neither a p2paudit report nor an `aggregate --partial` output (\"kind\")",
                                 escape_text(origin)));
  }
}

json parse_fleet_json(std::string_view text, const std::string& origin) {
  return parse_input_json(text, origin, {16, 4u << 20, "JSON"});
}

namespace {

ordered_json names_json(const MachineSet& set) {
  ordered_json out = ordered_json::array();
  for (const auto& m : set) out.push_back({{"name", m.name}, {"topology_digest", m.topology_digest}});
  return out;
}

// "a, b, c and 312 more" (names only; the JSON has each one's topology digest too).
std::string names_text(const MachineSet& set) {
  std::string out;
  size_t shown = 0;
  for (const auto& m : set) {
    if (shown == kTextNames) break;
    out += (shown++ ? ", " : "") + m.name;
  }
  if (set.size() > shown) out += fmt::format(" and {} more", set.size() - shown);
  return out;
}

}  // namespace

ordered_json AggregateState::to_json(bool partial, const std::string& tool_version) const {
  ordered_json j;
  j["schema_version"] = kAggregateSchemaVersion;
  j["kind"] = partial ? kPartialKind : kAggregateKind;
  j["tool_version"] = tool_version;
  j["machines"] = machines;
  ordered_json ids = ordered_json::object();
  for (const auto& [id, s] : host_bridge_ids) {
    ordered_json e;
    e["name"] = s.name;
    if (!partial) e["status"] = s.status();
    e["machines"] = s.machines;
    e["cpu_models"] = s.cpu_models;
    e["kernels"] = s.kernels;
    e["refused_pairs"] = s.refused_pairs;
    e["candidate_machines"] = s.candidate_machines;
    e["unlockable_pairs"] = s.unlockable_pairs;
    e["verified_copies"] = s.verified_copies;
    e["corrupt_copies"] = s.corrupt_copies;
    e["failed_copies"] = s.failed_copies;
    e["statuses"] = s.statuses;
    e["fixed_in"] = s.fixed_in;
    e["refused_on"] = names_json(s.refused_on);
    e["candidate_on"] = names_json(s.candidate_on);
    e["corrupt_on"] = names_json(s.corrupt_on);
    e["failed_on"] = names_json(s.failed_on);
    ids[id] = std::move(e);
  }
  j["host_bridge_ids"] = std::move(ids);
  ordered_json kernels_json = ordered_json::object();
  for (const auto& [release, k] : kernels) kernels_json[release] = {{"machines", k.machines}, {"refused_pairs", k.refused_pairs}};
  j["kernels"] = std::move(kernels_json);
  ordered_json decisions_json = ordered_json::object();
  for (const auto& [rule, d] : decisions)
    decisions_json[rule] = {{"peer", d.peer}, {"host_staged", d.host_staged}, {"deny", d.deny}, {"on", names_json(d.on)}};
  j["decisions"] = std::move(decisions_json);
  auto sorted = skipped;
  std::sort(sorted.begin(), sorted.end());
  ordered_json skipped_json = ordered_json::array();
  for (const auto& s : sorted) skipped_json.push_back({{"input", s.input}, {"reason", s.reason}});
  j["skipped"] = std::move(skipped_json);
  ordered_json machines_json = ordered_json::array();
  for (const auto& [key, input] : machine_list)
    machines_json.push_back({{"name", key.name}, {"topology_digest", key.topology_digest}, {"input", input}});
  j["machine_list"] = std::move(machines_json);
  return j;
}

std::string AggregateState::to_text() const {
  std::string out = fmt::format("Fleet: {} machine(s), {} input(s) skipped\n", machines, skipped.size());
  out += "\nHost bridges by root device ID:\n";
  if (host_bridge_ids.empty()) out += "  none\n";
  for (const auto& [id, s] : host_bridge_ids) {
    out += fmt::format("  {}  {}\n", id, s.name.empty() ? "(name unknown)" : s.name);
    out += fmt::format("    status: {}\n", s.status());
    out += fmt::format("    machines {}, whitelist candidate on {}; pairs refused here {}, its entry would unlock {}\n",
                       s.machines, s.candidate_machines, s.refused_pairs, s.unlockable_pairs);
    out += fmt::format("    copies on those pairs: {} verified, {} corrupt, {} failed\n", s.verified_copies,
                       s.corrupt_copies, s.failed_copies);
    if (!s.statuses.empty()) out += "    machines' own status: " + counts_text(s.statuses) + "\n";
    if (!s.candidate_on.empty()) out += "    candidate on: " + names_text(s.candidate_on) + "\n";
    if (!s.refused_on.empty()) out += "    pairs refused here on: " + names_text(s.refused_on) + "\n";
    if (!s.corrupt_on.empty()) out += "    corrupt copies on: " + names_text(s.corrupt_on) + "\n";
    if (!s.failed_on.empty()) out += "    failed copies on: " + names_text(s.failed_on) + "\n";
    out += "    CPU models: " + counts_text(s.cpu_models) + "\n";
    out += "    kernels: " + counts_text(s.kernels) + "\n";
  }
  out += "\nKernels (release whose rules decided):\n";
  if (kernels.empty()) out += "  none\n";
  for (const auto& [release, k] : kernels)
    out += fmt::format("  {:<28} machines {:>6}  refused pairs {:>8}\n", release, k.machines, k.refused_pairs);
  out += "\nDecisions by rule (peer / host_staged / deny):\n";
  if (decisions.empty()) out += "  none\n";
  for (const auto& [rule, d] : decisions) {
    out += fmt::format("  {:<40} {} / {} / {}\n", rule, d.peer, d.host_staged, d.deny);
    if (!d.on.empty()) out += "    on: " + names_text(d.on) + "\n";
  }
  if (!skipped.empty()) {
    auto sorted = skipped;
    std::sort(sorted.begin(), sorted.end());
    out += "\nSkipped inputs:\n";
    for (const auto& s : sorted) out += fmt::format("  {}: {}\n", s.input, s.reason);
  }
  return out;
}

std::string AggregateState::to_csv() const {
  std::string out = "section,key,field,item,value\n";
  auto row = [&](std::string_view section, const std::string& key, std::string_view field, const std::string& item,
                 const std::string& value) {
    out += fmt::format("{},{},{},{},{}\n", section, csv_cell(key), field, csv_cell(item), csv_cell(value));
  };
  auto number = [](std::uint64_t n) { return std::to_string(n); };
  row("summary", "", "machines", "", number(machines));
  row("summary", "", "skipped", "", number(skipped.size()));
  for (const auto& [id, s] : host_bridge_ids) {
    row("host_bridge_id", id, "name", "", s.name);
    row("host_bridge_id", id, "status", "", s.status());
    for (const auto& [field, n] : {std::pair<const char*, std::uint64_t>{"machines", s.machines},
                                   {"candidate_machines", s.candidate_machines},
                                   {"refused_pairs", s.refused_pairs},
                                   {"unlockable_pairs", s.unlockable_pairs},
                                   {"verified_copies", s.verified_copies},
                                   {"corrupt_copies", s.corrupt_copies},
                                   {"failed_copies", s.failed_copies}})
      row("host_bridge_id", id, field, "", number(n));
    for (const auto& [field, counts] : {std::pair<const char*, const Counts*>{"cpu_models", &s.cpu_models},
                                        {"kernels", &s.kernels},
                                        {"statuses", &s.statuses},
                                        {"fixed_in", &s.fixed_in}})
      for (const auto& [item, n] : *counts) row("host_bridge_id", id, field, item, number(n));
    // The machines behind each finding: item the machine's name, value its topology digest.
    for (const auto& [field, set] : {std::pair<const char*, const MachineSet*>{"refused_on", &s.refused_on},
                                     {"candidate_on", &s.candidate_on},
                                     {"corrupt_on", &s.corrupt_on},
                                     {"failed_on", &s.failed_on}})
      for (const auto& m : *set) row("host_bridge_id", id, field, m.name, m.topology_digest);
  }
  for (const auto& [release, k] : kernels) {
    row("kernel", release, "machines", "", number(k.machines));
    row("kernel", release, "refused_pairs", "", number(k.refused_pairs));
  }
  for (const auto& [rule, d] : decisions) {
    row("decision", rule, "peer", "", number(d.peer));
    row("decision", rule, "host_staged", "", number(d.host_staged));
    row("decision", rule, "deny", "", number(d.deny));
    for (const auto& m : d.on) row("decision", rule, "on", m.name, m.topology_digest);
  }
  for (const auto& [key, input] : machine_list) row("machine", key.name, "topology_digest", input, key.topology_digest);
  auto sorted = skipped;
  std::sort(sorted.begin(), sorted.end());
  for (const auto& s : sorted) row("skipped", s.input, "reason", "", s.reason);
  return out;
}

std::string AggregateState::to_csv_wide() const {
  // Columns: the machine, then each finding in a fixed order (sorted within each kind); a cell is
  // "1" where the machine has the finding. Rows: the named machines, sorted.
  std::vector<std::pair<std::string, const MachineSet*>> columns;
  for (const auto& [id, s] : host_bridge_ids)
    if (!s.candidate_on.empty()) columns.emplace_back("candidate:" + id, &s.candidate_on);
  for (const auto& [id, s] : host_bridge_ids)
    if (!s.refused_on.empty()) columns.emplace_back("refused_at:" + id, &s.refused_on);
  for (const auto& [id, s] : host_bridge_ids)
    if (!s.corrupt_on.empty()) columns.emplace_back("corrupt_copy:" + id, &s.corrupt_on);
  for (const auto& [id, s] : host_bridge_ids)
    if (!s.failed_on.empty()) columns.emplace_back("failed_copy:" + id, &s.failed_on);
  for (const auto& [rule, d] : decisions)
    if (!d.on.empty()) columns.emplace_back("rule:" + rule, &d.on);
  std::string out = "machine,topology_digest,input";
  for (const auto& [name, set] : columns) out += "," + csv_cell(name);
  out += "\n";
  for (const auto& [key, input] : machine_list) {
    out += csv_cell(key.name) + "," + csv_cell(key.topology_digest) + "," + csv_cell(input);
    for (const auto& [name, set] : columns) out += set->count(key) ? ",1" : ",";
    out += "\n";
  }
  return out;
}

}  // namespace p2paudit::fleet
