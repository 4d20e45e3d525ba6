// SPDX-License-Identifier: GPL-2.0-or-later
// Shared plumbing of the p2paudit command line: global options and one add_*_command() per file.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>

#include "p2paudit/fleet/report.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/rules.h"
#include "p2paudit/probe/decision_inputs.h"
#include "p2paudit/text_style.h"
#include "p2paudit/topology.h"
#include "p2paudit/what_if.h"

namespace p2paudit::cli {

struct GlobalOptions {
  std::string sysroot = "/";
  std::string format = "text";                  // text | json (| env for policy, dot | html | prom for the audit)
  bool verbose = false;                         // --verbose: every pair's reasons in text (today's per-pair detail)
  std::string color = "auto";                   // --color auto|always|never (auto: a terminal and no NO_COLOR)
  std::string kernel;                           // --kernel X.Y overrides the sysroot's release
  std::vector<std::string> kernel_rules;        // --kernel-rules FILE (repeatable)
  std::vector<std::string> assume_whitelisted;  // --assume-whitelisted VVVV:DDDD[:same-host-bridge]
  std::vector<std::string> assume_acs_off;      // --assume-acs-off BDF...|all: as booted with pci=disable_acs_redir=
  bool diff = false;                            // --diff: only the pairs the what-if options above change
  bool no_probe = false;                        // --no-probe: the runtimes are not asked (the audit; any command)
  bool no_cache = false;                        // --no-cache: the per-boot answer cache is neither read nor written
  bool refresh = false;                         // --refresh: the runtimes are asked again, their answers cached
  std::string rules_dir;                        // --rules-dir DIR (default: installed or source rules/)

  // An lspci dump instead of a sysroot (--lspci-dump FILE), and what a dump cannot tell.
  std::string lspci_dump;
  std::string dump_cpu;                         // --dump-cpu VENDOR:FAMILY[:MODEL] or an architecture
  std::string dump_iommu;                       // --dump-iommu off|passthrough|translated
  std::vector<std::string> dump_host_bridges;   // --dump-host-bridge DDDD:BB (repeatable)
  // Where a dump's assumptions (and --assume-acs-off's) are stated, once, set when the command is
  // known: the topology's findings (topology, the audit), the kernel rules' notes (matrix, explain,
  // policy JSON, every --diff), or stderr (policy text and env, check: their output carries neither).
  enum class DumpNotes { kFindings, kKernelNotes, kStderr };
  DumpNotes dump_notes = DumpNotes::kFindings;
  // Whether the functions' pci.ids names are read with the tree, set when the command is known:
  // only where an output prints them (topology, the audit's JSON and pictures, prom, report,
  // whitelist...). The decisions' texts look up the few names they print themselves.
  bool pci_names = true;

  bool from_dump() const { return !lspci_dump.empty(); }
  // What the tree is read from, for messages: the dump file or the sysroot.
  const std::string& source() const { return from_dump() ? lspci_dump : sysroot; }
};

// The rules/ directory: --rules-dir, else $P2PAUDIT_RULES_DIR, else the copy installed with the
// binary (bin/../share/p2paudit/rules, wherever the prefix was moved), else the source tree's.
std::string rules_dir(const GlobalOptions& global);

// What was analysed, for JSON: {"sysroot": DIR|FILE} or {"lspci_dump": FILE}.
nlohmann::ordered_json source_json(const GlobalOptions& global);

// Colour for text on stdout: --color always, or auto on a terminal with NO_COLOR unset or empty
// (no-color.org) and TERM not "dumb".
TextStyle text_style(const GlobalOptions& global);
// Whether progress lines may be drawn on stderr: a terminal that is not "dumb".
bool progress_wanted();

// Prints one line "p2paudit: MESSAGE" to stderr.
void print_error(const std::string& message);

// The kernel's rules for the topology's release (or --kernel), with --kernel-rules and
// --assume-whitelisted applied. Throws InputError.
KernelRules load_kernel_rules(const GlobalOptions& global, const Topology& topo);

// A device named on the command line (DDDD:BB:DD.F, BB:DD.F, gpu0...); InputError when none.
size_t resolve_device(const Topology& topo, const GlobalOptions& global, const std::string& spec);

// Reads the topology (a directory, a .tar.gz or an lspci dump); throws InputError on bad input.
// With stored_probe: the snapshot's stored probe document (`snapshot --probe`), when it has one.
Topology load_topology(const GlobalOptions& global, std::optional<std::string>* stored_probe = nullptr);

// Whether the runtimes describe the topology being analysed: the live "/" (or any sysroot with
// P2PAUDIT_PROBE_ALLOW_SYSROOT=1, for tests with fake runtimes).
bool runtimes_describe(const GlobalOptions& global);
bool probe_sysroot_allowed_for_tests();

// "256MiB", "1GiB", "4096" as bytes (1 byte to 1 TiB); InputError naming `option` otherwise.
std::uint64_t parse_byte_size(const std::string& text, const std::string& option);

// The global options as the shared reader's source (probe/decision_inputs.h, which the C library
// reads through too): the sysroot or dump, its assumptions, the kernel overrides, the rules dir.
MachineSource machine_source(const GlobalOptions& global);
// Where the global options' --dump-notes setting puts the assumptions' statements.
AssumptionNotes assumption_notes(const GlobalOptions& global);
// Prints each statement read_source_*() put aside on stderr ("p2paudit: note: ...").
void print_aside(const std::vector<std::string>& aside);

// The rule options of policy, check, log and watch (--rules, --no-default-rules, --vendor-facts,
// --no-probe), and the machine and policy they read, as `check` reads them.
struct RuleOptions {
  std::vector<std::string> rules;   // --rules FILE (repeatable), after the default policy
  bool no_default = false;          // --no-default-rules: only the --rules files
  std::string vendor_facts;         // --vendor-facts FILE
  bool no_probe = false;            // --no-probe: do not ask the runtimes on a live machine
};
void add_rule_options(CLI::App* cmd, RuleOptions& options);
DecisionInputs load_decision_inputs(const GlobalOptions& global, const RuleOptions& options);

// A machine as `report` and `--format prom` analyse it: the topology, its kernel rules, the default
// policy and the runtimes' answers (asked unless no_probe, or the snapshot's stored ones).
struct AnalysedMachine {
  Topology topo;
  KernelRules kernel;
  policy::RuleSet rules;
  RuntimeEvidence runtimes;
  // Refers into this object: keep it alive while the analysis is used.
  fleet::MachineAnalysis analysis() const;
};
AnalysedMachine load_analysed_machine(const GlobalOptions& global, bool no_probe);

// --diff (what_if.cpp): the same options without the what-if ones (--assume-whitelisted,
// --assume-acs-off, --kernel, --kernel-rules), i.e. the machine as read, and what it reads as.
GlobalOptions machine_as_read(const GlobalOptions& global);
struct MachineAsRead {
  Topology topo;
  KernelRules kernel;
};
MachineAsRead load_machine_as_read(const GlobalOptions& global);
// The what-if options given, each as typed ("--assume-acs-off 0000:00:01.0"); empty when none.
std::vector<std::string> what_if_options(const GlobalOptions& global);
// Prints --diff's answer in the --format asked: the changes and the notes the options added.
void print_changes(const GlobalOptions& global, const Topology& topo, const std::vector<PairChange>& changes,
                   const KernelRules& before, const KernelRules& after);

// Where a command's output goes: -o|--output FILE (atomically, an existing FILE kept unless
// --force), or stdout ("" or "-"). report and aggregate share the options and the writing.
struct OutputTarget {
  std::string output;
  bool force = false;
};
void add_output_options(CLI::App& cmd, OutputTarget& target);
// Calls write(out) with stdout, or with a stream onto the FILE's temporary twin, which replaces
// FILE once write returns (a failed write throws the OutputFile's InputError).
void write_output(const OutputTarget& target, const std::function<void(std::ostream&)>& write);

// The default view when no command is given.
int run_audit(const GlobalOptions& global);

// Each command file adds its subcommand; the callback stores the command's exit status in *status.
void add_topology_command(CLI::App& app, const GlobalOptions& global, int* status);
void add_snapshot_command(CLI::App& app, const GlobalOptions& global, int* status);
void add_matrix_command(CLI::App& app, const GlobalOptions& global, int* status);
void add_explain_command(CLI::App& app, const GlobalOptions& global, int* status);
void add_rules_command(CLI::App& app, const GlobalOptions& global, int* status);
void add_policy_command(CLI::App& app, const GlobalOptions& global, int* status);  // policy and check
void add_probe_command(CLI::App& app, const GlobalOptions& global, int* status);   // docs/probe.md
void add_whitelist_command(CLI::App& app, const GlobalOptions& global, int* status);  // docs/whitelist.md
void add_report_command(CLI::App& app, const GlobalOptions& global, int* status);     // docs/fleet.md
void add_aggregate_command(CLI::App& app, const GlobalOptions& global, int* status);  // docs/fleet.md
void add_log_command(CLI::App& app, const GlobalOptions& global, int* status);        // log and watch: docs/log.md

// Exit statuses scripts can rely on.
inline constexpr int kExitOk = 0;
inline constexpr int kExitNo = 1;      // a check's answer was "no"
inline constexpr int kExitError = 2;   // bad input, unreadable sysroot, usage error
inline constexpr int kExitUnknown = 3; // check, policy --fail-on: the answer depends on unknown facts
inline constexpr int kExitContradiction = 4;  // log, watch --seconds: an event contradicts a peer/allowed prediction

}  // namespace p2paudit::cli
