#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "p2paudit/json_output.h"
#include "p2paudit/snapshot.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "p2paudit/topology_report.h"

namespace p2paudit::cli {

namespace {

struct SnapshotArgs {
  std::string output;
  bool redact = false;
  bool force = false;
};

int run_snapshot(const GlobalOptions& global, const SnapshotArgs& args) {
  Sysroot root = Sysroot::open(global.sysroot);
  Topology t = read_topology(root);
  auto report = write_snapshot(root, t, args.output, {args.redact, args.force, P2PAUDIT_VERSION});
  if (global.format == "json") {
    std::cout << json_text(nlohmann::ordered_json{{"schema_version", 1}, {"output", args.output}, {"files", report.files},
                                                  {"privileged", report.privileged}, {"redacted", args.redact}})
              << "\n";
  } else {
    std::cout << fmt::format("wrote {} ({} files{})\n", args.output, report.files, args.redact ? ", redacted" : "");
    if (auto note = privilege_note(t); !note.empty()) std::cout << "note: " << note << "\n";
  }
  return kExitOk;
}

}  // namespace

void add_snapshot_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto args = std::make_shared<SnapshotArgs>();  // CLI11 binds the options to it
  auto* cmd = app.add_subcommand("snapshot", "Capture the files the analyzer reads into a .tar.gz");
  cmd->add_option("-o,--output", args->output, "Output file (FILE.tar.gz)")->required();
  cmd->add_flag("--redact", args->redact, "Drop Device Serial Numbers and the host name");
  cmd->add_flag("--force", args->force, "Replace the output file if it exists (never through a symlink)");
  cmd->callback([&global, args, status] { *status = run_snapshot(global, *args); });
}

}  // namespace p2paudit::cli
