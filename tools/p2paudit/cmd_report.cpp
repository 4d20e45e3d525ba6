// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit report [-o FILE]`: one machine's report for `aggregate` (docs/fleet.md).
#include <cstdint>
#include <memory>
#include <ostream>

#include "commands.h"
#include "p2paudit/errors.h"
#include "p2paudit/fleet/report.h"
#include "p2paudit/policy/evaluate.h"

namespace p2paudit::cli {

namespace {

struct ReportArgs {
  OutputTarget target;
  bool redact = false;
  bool no_probe = false;
  bool all_pairs = false;
};

int run_report(const GlobalOptions& global, const ReportArgs& args) {
  AnalysedMachine machine = load_analysed_machine(global, args.no_probe || global.no_probe);
  fleet::ReportOptions options{P2PAUDIT_VERSION, args.redact};
  if (args.all_pairs) options.most_listed_pairs = UINT64_MAX;
  write_output(args.target, [&](std::ostream& out) {
    fleet::write_machine_report(out, machine.analysis(), options);
    out << "\n";
  });
  return kExitOk;
}

}  // namespace

void add_report_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto args = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "This machine's report for `aggregate` (JSON): platform, host bridges, "
                                           "verdicts, decisions, whitelist candidates, the runtimes' answers");
  add_output_options(*cmd, args->target);
  cmd->add_flag("--redact", args->redact, "Leave the host name out");
  cmd->add_flag("--all-pairs", args->all_pairs,
                "List every ordered pair even past 65,536 pairs (by default they are grouped there, counted exactly)");
  cmd->add_flag("--no-probe", args->no_probe, "Do not ask the runtimes (NVML, CUDA, Level Zero, HIP) on the live machine");
  cmd->callback([&global, args, status] { *status = run_report(global, *args); });
}

}  // namespace p2paudit::cli
