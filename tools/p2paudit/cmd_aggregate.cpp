// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit aggregate INPUT...`: many machines' reports and snapshots as counts per host-bridge
// ID, kernel release and deciding rule; `--partial` writes a state that later runs merge
// (docs/fleet.md).
#include <malloc.h>

#include <climits>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "commands.h"
#include "p2paudit/errors.h"
#include "p2paudit/fleet/aggregate.h"
#include "p2paudit/json_output.h"
#include "p2paudit/text_style.h"

namespace p2paudit::cli {

namespace {

struct AggregateArgs {
  std::vector<std::string> inputs;
  std::vector<std::string> merge;  // --merge: earlier --partial outputs, the only files read as partials
  bool partial = false;
  std::string format;     // text | json | csv | csv-wide; "" takes the global --format
  unsigned jobs = 0;      // 0: one per hardware thread
  OutputTarget target;
};

int run_aggregate(const GlobalOptions& global, const AggregateArgs& args) {
  if (args.inputs.empty() && args.merge.empty())
    throw InputError("aggregate needs an INPUT or a --merge P (an earlier --partial output)");
  if (args.partial && !args.format.empty() && args.format != "json")
    throw InputError("--partial writes the mergeable state as JSON: drop --format " + args.format);
  std::string format = args.partial ? "json" : args.format.empty() ? global.format : args.format;
  fleet::AggregateOptions options;
  options.rules_dir = rules_dir(global);
  options.tool_version = P2PAUDIT_VERSION;
  options.jobs = args.jobs;
  options.partials = args.merge;
  options.skipped = [](const fleet::SkippedInput& s) { print_error(fmt::format("skipped {}: {}", s.input, s.reason)); };
  if (progress_wanted())
    options.progress = [](const fleet::AggregateProgress& p) {
      std::cerr << own_controls("\r") << fmt::format("aggregate: {} found, {} read, {} skipped", p.found, p.read, p.skipped)
                << (p.finished ? "\n" : "") << std::flush;
    };
  // glibc shrinks a worker thread's malloc heap after reading the host's
  // /proc/sys/vm/overcommit_memory; heaps that never reach this threshold are not shrunk, so the
  // run reads nothing of the analyst's machine (docs/security.md). Empty heaps are still released.
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  auto result = fleet::aggregate(args.inputs, options);
  if (args.partial && result.state.machines > fleet::kMaxPartialMachines)
    throw InputError(fmt::format("{} machines: more than one partial may hold ({}), so no aggregate would read it; "
                                 "split the inputs into several --partial runs", result.state.machines,
                                 fleet::kMaxPartialMachines));

  std::string text = format == "csv"        ? result.state.to_csv()
                     : format == "csv-wide" ? result.state.to_csv_wide()
                     : format == "json"     ? json_text(result.state.to_json(args.partial, P2PAUDIT_VERSION)) + "\n"
                                            : result.state.to_text();
  write_output(args.target, [&](std::ostream& out) {
    // Text and CSV are read by people (a pager, a spreadsheet) from a file as from a terminal: the
    // same gate as standard output, for the names and models other machines' reports hold.
    std::optional<TextGate> gate;
    if (format != "json") gate.emplace(out);
    out << text;
  });
  if (result.inputs_read == 0) {
    print_error(fmt::format("no input could be read ({} skipped)", result.state.skipped.size()));
    return kExitError;
  }
  return kExitOk;
}

}  // namespace

void add_aggregate_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto args = std::make_shared<AggregateArgs>();
  auto* cmd = app.add_subcommand("aggregate", "Fold many machines' reports, snapshots and --partial outputs into "
                                              "counts per host-bridge ID, kernel and rule (docs/fleet.md)");
  cmd->add_option("inputs", args->inputs, "Reports, snapshots, sysroot directories, or directories holding them");
  cmd->add_option("--merge", args->merge, "Merge P, an earlier --partial output (repeatable; a partial among "
                                          "the INPUTs is skipped)")
      ->type_name("P")
      ->allow_extra_args(false);
  cmd->add_flag("--partial", args->partial, "Write the mergeable state (JSON) for a later aggregate --merge");
  cmd->add_option("--format", args->format, "Output format")->check(CLI::IsMember({"text", "json", "csv", "csv-wide"}));
  cmd->add_option("--jobs", args->jobs, "Worker threads (default: one per hardware thread)")->check(CLI::Range(1, 1024));
  add_output_options(*cmd, args->target);
  cmd->callback([&global, args, status] { *status = run_aggregate(global, *args); });
}

}  // namespace p2paudit::cli
