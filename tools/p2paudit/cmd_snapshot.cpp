// SPDX-License-Identifier: GPL-2.0-or-later
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "p2paudit/errors.h"
#include "p2paudit/json_output.h"
#include "p2paudit/kernel_log_snapshot.h"
#include "p2paudit/probe/runtime_facts.h"
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
  bool probe = false;     // store the runtimes' answers (queries), --copy and --mirror results
  bool with_log = false;  // store this boot's kernel log (/dev/kmsg)
  bool copy = false;
  bool mirror = false;
  std::string size = "256MiB";
  int repeat = 3;
  int timeout_seconds = 20;
};

int run_snapshot(const GlobalOptions& global, const SnapshotArgs& args) {
  refuse_terminal_output(args.output);  // before the probe's minutes, not after
  // With -o - the archive is standard output: what the command says goes to standard error.
  std::ostream& out = args.output == kStandardOutput ? std::cerr : std::cout;
  Sysroot root = Sysroot::open(global.sysroot);
  Topology t = read_topology(root);
  SnapshotOptions options{args.redact, args.force, P2PAUDIT_VERSION, {}};
  bool probed = args.probe || args.copy || args.mirror;
  if (probed) {
    if (!runtimes_describe(global))
      throw InputError(fmt::format("--probe asks the runtimes of this machine, which do not describe {}", global.source()));
    probe::ProbeOptions p;
    p.timeout_seconds = args.timeout_seconds;
    p.copy.enabled = args.copy;
    p.copy.size_bytes = parse_byte_size(args.size, "--size");
    p.copy.repeat = args.repeat;
    p.mirror = args.mirror;
    auto document = probe::probe_document(probe::probe_all(p), &t, global.source(), "", p);
    options.extra_files[kProbeResultsPath] = json_text(document) + "\n";
  }
  std::vector<std::string> log_notes;
  if (args.with_log) {
    if (!root.is_live())
      throw InputError(fmt::format("--with-log stores this machine's kernel log, which does not describe {}", global.source()));
    options.extra_files[kKernelLogPath] = capture_kernel_log(args.redact, t.platform.hostname, &log_notes);
  }
  auto report = write_snapshot(root, t, args.output, options);
  if (global.format == "json") {
    out << json_text(nlohmann::ordered_json{{"schema_version", 1}, {"output", args.output}, {"files", report.files},
                                                  {"privileged", report.privileged}, {"redacted", args.redact},
                                                  {"probe", probed}, {"kernel_log", args.with_log}})
              << "\n";
    for (const auto& note : log_notes) std::cerr << "note: " << note << "\n";
  } else {
    out << fmt::format("wrote {} ({} files{}{}{})\n", args.output == kStandardOutput ? "the archive to standard output" : args.output,
                       report.files, args.redact ? ", redacted" : "", probed ? ", with the runtimes' answers" : "",
                       args.with_log ? ", with this boot's kernel log" : "");
    if (auto note = privilege_note(t); !note.empty()) out << "note: " << note << "\n";
    for (const auto& note : log_notes) out << "note: " << note << "\n";
  }
  return kExitOk;
}

}  // namespace

void add_snapshot_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto args = std::make_shared<SnapshotArgs>();  // CLI11 binds the options to it
  auto* cmd = app.add_subcommand("snapshot", "Capture the files the analyzer reads into a .tar.gz");
  cmd->add_option("-o,--output", args->output,
                  "Output file (FILE.tar.gz); - writes the archive to standard output (not a terminal)")
      ->required();
  cmd->add_flag("--redact", args->redact,
                "Drop Device Serial Numbers, the host name and every boot parameter but the PCI, IOMMU and ACS ones");
  cmd->add_flag("--force", args->force, "Replace the output file if it exists (never through a symlink)");
  cmd->add_flag("--probe", args->probe, "Store the runtimes' answers (p2paudit probe) in the snapshot");
  cmd->add_flag("--with-log", args->with_log,
                "Store this boot's kernel log (/dev/kmsg; redacted with --redact) for `log` to read");
  cmd->add_flag("--copy", args->copy, "With --probe: run and store the copy test (p2paudit probe --copy)");
  cmd->add_flag("--mirror", args->mirror, "With --probe: measure and store host mirroring (p2paudit probe --mirror)");
  cmd->add_option("--size", args->size, "Bytes per copy for --copy (default 256MiB)");
  cmd->add_option("--repeat", args->repeat, "Timed copies per leg for --copy (default 3)")->check(CLI::Range(1, 1000));
  cmd->add_option("--timeout", args->timeout_seconds, "Seconds one runtime step may take")->check(CLI::Range(1, 3600));
  cmd->callback([&global, args, status] { *status = run_snapshot(global, *args); });
}

}  // namespace p2paudit::cli
