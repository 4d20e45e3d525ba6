// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit report [-o FILE]`: one machine's report for `aggregate` (docs/fleet.md).
#include <iostream>
#include <memory>
#include <ostream>
#include <streambuf>
#include <string_view>

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

// An ostream onto the temporary twin of an OutputFile: the report is written as it is computed.
class OutputFileBuf : public std::streambuf {
 public:
  explicit OutputFileBuf(OutputFile& file) : file_(file) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    file_.write(std::string_view(s, static_cast<size_t>(n)));
    return n;
  }
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    char ch = traits_type::to_char_type(c);
    file_.write(std::string_view(&ch, 1));
    return c;
  }

 private:
  OutputFile& file_;
};

int run_report(const GlobalOptions& global, const ReportArgs& args) {
  AnalysedMachine machine = load_analysed_machine(global, args.no_probe || global.no_probe);
  fleet::ReportOptions options{P2PAUDIT_VERSION, args.redact};
  if (args.output.empty() || args.output == "-") {
    fleet::write_machine_report(std::cout, machine.analysis(), options);
    std::cout << "\n";
  } else {
    OutputFile file(args.output, args.force);
    OutputFileBuf buf(file);
    std::ostream out(&buf);
    out.exceptions(std::ios::badbit);  // a failed write throws the OutputFile's InputError
    fleet::write_machine_report(out, machine.analysis(), options);
    out << "\n";
    out.flush();
    file.commit();
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
