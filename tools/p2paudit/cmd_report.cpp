// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit report [-o FILE]`: one machine's report for `aggregate` (docs/fleet.md).
#include <iostream>
#include <memory>

#include "commands.h"
#include "p2paudit/errors.h"
#include "p2paudit/fleet/report.h"
#include "p2paudit/json_output.h"
#include "p2paudit/output_file.h"
#include "p2paudit/policy/evaluate.h"

namespace p2paudit::cli {

namespace {

struct ReportArgs {
  std::string output;     // "" or "-": stdout
  bool force = false;
  bool redact = false;
  bool no_probe = false;
};

int run_report(const GlobalOptions& global, const ReportArgs& args) {
  AnalysedMachine machine = load_analysed_machine(global, args.no_probe || global.no_probe);
  auto report = fleet::machine_report(machine.analysis(), {P2PAUDIT_VERSION, args.redact});
  std::string text = json_text(std::move(report)) + "\n";
  if (args.output.empty() || args.output == "-") {
    std::cout << text;
  } else {
    OutputFile out(args.output, args.force);
    out.write(text);
    out.commit();
  }
  return kExitOk;
}

}  // namespace

void add_report_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto args = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "This machine's report for `aggregate` (JSON): platform, host bridges, "
                                           "verdicts, decisions, whitelist candidates, the runtimes' answers");
  cmd->add_option("-o,--output", args->output, "Write to FILE (atomically; an existing FILE is kept unless --force)");
  cmd->add_flag("--force", args->force, "Replace the output file if it exists (never through a symlink)");
  cmd->add_flag("--redact", args->redact, "Leave the host name out");
  cmd->add_flag("--no-probe", args->no_probe, "Do not ask the runtimes (NVML, CUDA, Level Zero, HIP) on the live machine");
  cmd->callback([&global, args, status] { *status = run_report(global, *args); });
}

}  // namespace p2paudit::cli
