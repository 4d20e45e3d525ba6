// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit aggregate` (docs/fleet.md): many machines' reports and snapshots folded into counts
// per host-bridge ID, per kernel release and per deciding rule.
//
// The state is a commutative monoid: counters and maps of counters, merged by adding. A `--partial`
// output is the state itself, so folding partial outputs (and raw inputs) in any grouping and any
// order gives the answer of one run over all the inputs. No report is kept once it is counted; each
// machine's name is (docs/fleet.md "Machines"), so that one given twice is counted once: aggregate()
// merges the inputs in the order found, through merge_new_machines().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace p2paudit::fleet {

inline constexpr int kAggregateSchemaVersion = 1;
inline constexpr std::string_view kPartialKind = "p2paudit-aggregate-partial";
inline constexpr std::string_view kAggregateKind = "p2paudit-aggregate";
// The key of decisions no rule decided (rule ids are [a-z0-9-]+, so it cannot clash).
inline constexpr std::string_view kNoRuleKey = "(no rule decided)";
// What one partial state may claim (docs/fleet.md, "Merging"): at most this many machines, and no
// more pairs per machine than 16,384 devices have (a report past kMostListedPairs counts its pairs
// by kind, so the values parse_fleet_json reads no longer bound them; a snapshot is folded pair by
// pair). 10 M machines of 2^28 pairs stay below 2^52: thousands of partials still add up exactly.
inline constexpr std::uint64_t kMaxPartialMachines = 10'000'000;
inline constexpr std::uint64_t kMaxPairsPerMachine = std::uint64_t{1} << 28;

using Counts = std::map<std::string, std::uint64_t>;

// One machine as the fleet names it (docs/fleet.md, "Machines"): its host name, or, when the input
// has none (a `report --redact`, a snapshot without one), "input:" and the FNV-1a 64 of the
// input's bytes (report JSON, snapshot archive; a sysroot directory: its absolute path); with the
// topology digest. Two inputs with the same name and digest are one machine, counted once.
struct MachineKey {
  std::string name, topology_digest;
  auto operator<=>(const MachineKey&) const = default;
};
using MachineSet = std::set<MachineKey>;
// "fnv1a64:" and 16 lower-case hex digits of FNV-1a 64 over `bytes` (as topology_digest()).
std::string fnv1a64(std::string_view bytes);

// One host-bridge ID ("8086:4c43": the vendor and device of the first device on its root bus).
struct HostBridgeIdStats {
  std::string name;                         // the device's name (the smallest seen, for determinism)
  std::uint64_t machines = 0;               // machines with a host bridge of this ID
  Counts cpu_models, kernels;               // of those machines
  std::uint64_t refused_pairs = 0;          // pairs refused at this ID's whitelist check
  std::uint64_t candidate_machines = 0;     // machines where it is a whitelist candidate
  std::uint64_t unlockable_pairs = 0;       // pairs its entry would unlock (candidates' pairs)
  std::uint64_t verified_copies = 0, corrupt_copies = 0, failed_copies = 0;  // on those pairs
  Counts statuses;                          // each candidate machine's own status
  Counts fixed_in;                          // release -> machines saying that release has the entry
  // The machines behind each finding (named ones only: a partial from an older tool names none).
  MachineSet refused_on;                    // machines with a pair refused at this ID's check
  MachineSet candidate_on;                  // machines where it is a candidate
  MachineSet corrupt_on, failed_on;         // machines with a corrupt / failed copy on its pairs

  void merge(const HostBridgeIdStats& other);
  // rejected (any corrupt copy), else "fixed in X" (every candidate machine says so), else ready
  // to submit (a verified copy), else needs evidence; "not a candidate" when no machine had it.
  std::string status() const;
};

struct KernelStats {
  std::uint64_t machines = 0, refused_pairs = 0;
};

struct DecisionCounts {
  std::uint64_t peer = 0, host_staged = 0, deny = 0;
  MachineSet on;                            // machines with a pair this rule decided
};

struct SkippedInput {
  std::string input, reason;
  auto operator<=>(const SkippedInput&) const = default;
};

struct AggregateState {
  std::uint64_t machines = 0;
  std::map<std::string, HostBridgeIdStats> host_bridge_ids;
  std::map<std::string, KernelStats> kernels;           // by the release whose rules decided
  std::map<std::string, DecisionCounts> decisions;      // by deciding rule (kNoRuleKey: none)
  std::vector<SkippedInput> skipped;                    // sorted when rendered
  // Every named machine counted, with the input it was read from (escaped). At most `machines`.
  std::map<MachineKey, std::string> machine_list;

  void merge(const AggregateState& other);
  // A report (`p2paudit report`) or a partial state (`aggregate --partial`), parsed with bounds.
  // Each is checked in full before anything is counted: a malformed one throws InputError naming
  // `origin` and the place, and leaves the state as it was. A partial's counts must be ones that
  // reports could have made: at most kMaxPartialMachines machines, every count within the machines
  // (or pairs) it counts, sums that add up (a candidate machine has one status...).
  // `input_id`: the input's own fingerprint (fnv1a64() of its bytes), naming the machine when the
  // report has no host name; "" leaves such a machine named by its topology digest alone.
  void add_report(const nlohmann::json& report, const std::string& origin, const std::string& input_id = "");
  void add_partial(const nlohmann::json& partial, const std::string& origin);
  // A JSON input by its "kind": a report, or a partial only where the user asked for partials
  // (`as_partial`: `aggregate --merge`). A document that says it is a partial is refused as an
  // ordinary input, and anything but a partial is refused with `as_partial`.
  void add_document(const nlohmann::json& doc, const std::string& origin, bool as_partial,
                    const std::string& input_id = "");
  // Merges `more` (one input's state) unless a machine it names is already counted here: then
  // nothing is merged and the reason is returned ("the same machine as INPUT ..."), for the input
  // to be listed as skipped. The same machine given twice is counted once.
  std::optional<std::string> merge_new_machines(const AggregateState& more);

  // kPartialKind: the state; kAggregateKind: the state with each host-bridge ID's status.
  nlohmann::ordered_json to_json(bool partial, const std::string& tool_version) const;
  std::string to_text() const;
  // One table, columns section,key,field,item,value (docs/fleet.md).
  std::string to_csv() const;
  // One row per named machine, one column per finding (candidate:ID, refused_at:ID,
  // corrupt_copy:ID, failed_copy:ID, rule:RULE), "1" where the machine has it (docs/fleet.md).
  std::string to_csv_wide() const;
};

// One cell of to_csv(): RFC 4180 quoting, and a cell a spreadsheet would run as a formula kept as text.
std::string csv_cell(const std::string& s);

// A report or partial document's text as JSON: at most 16 levels and 4 M values; InputError
// naming `origin` otherwise.
nlohmann::json parse_fleet_json(std::string_view text, const std::string& origin);

struct AggregateProgress {
  std::uint64_t found = 0;     // inputs found so far (files and sysroot directories)
  std::uint64_t read = 0;      // counted
  std::uint64_t skipped = 0;
  bool finished = false;
};

struct AggregateOptions {
  std::string rules_dir;       // kernel/ and the policy files snapshots are analysed with
  std::string tool_version;    // written into the reports made from snapshots
  unsigned jobs = 0;           // worker threads; 0: one per hardware thread
  // Called now and then, and once finished, from one thread at a time; may be empty.
  std::function<void(const AggregateProgress&)> progress;
  // Called for each input this run skips (not those carried in from partial outputs), from one
  // thread at a time; may be empty.
  std::function<void(const SkippedInput&)> skipped;
  // Earlier `--partial` outputs (`aggregate --merge FILE`): the only files read as partial states.
  std::vector<std::string> partials;
  // Tests only: called with each input's path once it is read, before what it holds is counted,
  // from the worker reading it; what it throws is that input's failure (std::bad_alloc included).
  // Empty in the tool.
  std::function<void(const std::string&)> fail_input;
};

struct AggregateResult {
  AggregateState state;
  std::uint64_t inputs_read = 0;  // reports, snapshots, sysroots and partial outputs counted
};

// INPUTs: snapshot archives, sysroot directories, report JSON files, or directories holding them
// (walked without following links: *.json, *.tar.gz, *.tgz, *.tar; a directory with
// sys/bus/pci/devices is a sysroot); options.partials: partial states, each a regular file. A bad
// input (a partial among the INPUTs included) is a SkippedInput, never an exception; only the
// tool's own rules failing to load throws InputError.
AggregateResult aggregate(const std::vector<std::string>& inputs, const AggregateOptions& options);

}  // namespace p2paudit::fleet
