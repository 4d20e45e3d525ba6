// SPDX-License-Identifier: GPL-2.0-or-later
// p2paudit: will these two PCIe devices do peer-to-peer DMA, and if not, why and what to do.
#include <unistd.h>

#include <iostream>
#include <new>
#include <optional>
#include <string_view>

#include "commands.h"
#include "p2paudit/dump_topology.h"
#include "p2paudit/errors.h"
#include "p2paudit/policy/device_knowledge.h"
#include "p2paudit/text_style.h"
#include "usage.h"

using namespace p2paudit::cli;

namespace {

// Out of memory (an input larger than this machine can hold): one line and exit 2, never an abort.
// Written straight to the descriptor: printing through the streams allocates.
int out_of_memory() {
  static constexpr std::string_view kMessage = "p2paudit: out of memory: an input needs more memory than this machine gives\n";
  [[maybe_unused]] ssize_t written = ::write(STDERR_FILENO, kMessage.data(), kMessage.size());
  return kExitError;
}

}  // namespace

int main(int argc, char** argv) {
  // The text gate (text_style.h) on what a command prints: installed once parsing is done, before
  // any command runs, and kept until main returns, so error messages pass it too. Not on report's
  // document (JSON, escaped as it is written) nor on snapshot's archive.
  std::optional<p2paudit::TextGate> gate_out, gate_err;
  GlobalOptions global;
  CLI::App app{"p2paudit: predicts whether PCIe devices can do peer-to-peer DMA, why not, and what to do.\n"
               "With no command, audits this machine: the decision for each pair, with reasons and fixes."};
  app.set_version_flag("--version", std::string("p2paudit ") + P2PAUDIT_VERSION);
  use_usage_text(app);
  app.fallthrough();
  app.require_subcommand(0, 1);
  auto* sysroot = app.add_option("--sysroot", global.sysroot,
                                 "Machine to analyse: / (default), a snapshot directory or FILE.tar.gz");
  auto* dump = app.add_option("--lspci-dump", global.lspci_dump,
                              "Analyse `lspci -xxxx` output (FILE) instead of a machine (docs/lspci-dump.md)");
  auto* dump_cpu = app.add_option("--dump-cpu", global.dump_cpu,
                                  "With --lspci-dump: the boot CPU, VENDOR:FAMILY[:MODEL] as /proc/cpuinfo says "
                                  "(AuthenticAMD:25:1), or arm64, riscv64...");
  auto* dump_iommu = app.add_option("--dump-iommu", global.dump_iommu, "With --lspci-dump: the IOMMU mode")
                         ->check(CLI::IsMember({"off", "passthrough", "translated"}));
  auto* dump_host_bridge = app.add_option("--dump-host-bridge", global.dump_host_bridges,
                                          "With --lspci-dump: a host bridge's root bus DDDD:BB (repeatable); default: "
                                          "each root bus its own host bridge");
  app.add_option("--format", global.format, "Output format")
      ->check(CLI::IsMember({"text", "json", "env", "dot", "html", "prom"}));
  app.add_flag("--verbose,-v", global.verbose, "Text: every pair's reasons, not each reason once");
  app.add_option("--color", global.color, "Colour in text: auto (a terminal without NO_COLOR), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  app.add_option("--kernel", global.kernel, "Kernel release whose rules apply (X.Y[.Z]); default: the sysroot's");
  app.add_option("--kernel-rules", global.kernel_rules, "Extra kernel whitelist YAML (repeatable)");
  app.add_option("--assume-whitelisted", global.assume_whitelisted,
                 "Add a host-bridge whitelist entry VVVV:DDDD[:same-host-bridge] for this run (repeatable)");
  app.add_option("--assume-acs-off", global.assume_acs_off,
                 "Analyse as if booted with pci=disable_acs_redir=: ACS RR/CR/EC cleared on these devices "
                 "(DDDD:BB:DD.F or BB:DD.F, ';'/','-separated, repeatable; pci:VVVV:DDDD) or on all");
  app.add_flag("--diff", global.diff,
               "(matrix, policy, check) Only the pairs the what-if options (--assume-*, --kernel, --kernel-rules) "
               "change against the machine as read: before -> after, and why");
  app.add_option("--rules-dir", global.rules_dir, "Directory of rule data (default: installed rules/)");
  app.add_flag("--no-probe", global.no_probe,
               "Do not ask the runtimes (NVML, CUDA, Level Zero, HIP) on the live machine (the audit; "
               "policy, check, whitelist and report take it too)");
  app.add_flag("--no-cache", global.no_cache,
               "Neither read nor keep the runtimes' answers of this boot (the per-boot answer cache, docs/probe.md)");
  app.add_flag("--refresh", global.refresh, "Ask the runtimes again and keep their answers for this boot")
      ->excludes(app.get_option("--no-cache"));

  int status = kExitOk;
  add_topology_command(app, global, &status);
  add_snapshot_command(app, global, &status);
  add_matrix_command(app, global, &status);
  add_explain_command(app, global, &status);
  add_rules_command(app, global, &status);
  add_policy_command(app, global, &status);
  add_probe_command(app, global, &status);
  add_whitelist_command(app, global, &status);
  add_report_command(app, global, &status);
  add_aggregate_command(app, global, &status);
  add_log_command(app, global, &status);

  // Checked once parsing is done and before any command runs.
  app.parse_complete_callback([&, sysroot, dump, dump_cpu, dump_iommu, dump_host_bridge] {
    if (global.format == "env" && !app.got_subcommand("policy"))
      throw CLI::ValidationError("--format", "env (shell exports) is only printed by `policy`");
    // One-line usage errors (exit 2) for the dump options.
    if (dump->count() && sysroot->count())
      throw p2paudit::InputError("--lspci-dump and --sysroot name two inputs: give one");
    if (!dump->count())
      for (const auto* opt : {dump_cpu, dump_iommu, dump_host_bridge})
        if (opt->count()) throw p2paudit::InputError(opt->get_name() + " describes an lspci dump: it needs --lspci-dump FILE");
    // The device table (rules/devices/) of the rules directory this run uses; read on first use.
    p2paudit::policy::use_device_knowledge_from(p2paudit::cli::rules_dir(global));
    const std::string command = app.get_subcommands().empty() ? "" : app.get_subcommands().front()->get_name();
    if (global.format == "text" && command != "snapshot" && command != "report") gate_out.emplace(std::cout);
    gate_err.emplace(std::cerr);
    if ((global.format == "dot" || global.format == "html") && !command.empty() && command != "topology")
      throw p2paudit::InputError("--format " + global.format + " (a picture of the machine) is drawn by the audit "
                                 "(no command) and topology");
    if (global.format == "prom" && !command.empty())
      throw p2paudit::InputError("--format prom (node_exporter textfile) is written by the audit (no command)");
    if (global.diff) {
      if (command != "matrix" && command != "policy" && command != "check")
        throw p2paudit::InputError("--diff is answered by matrix, policy and check");
      if (what_if_options(global).empty())
        throw p2paudit::InputError("--diff compares the machine as read with --assume-acs-off, --assume-whitelisted, "
                                   "--kernel or --kernel-rules: give at least one");
      if (global.format == "env") throw p2paudit::InputError("--diff prints text or json, not env");
    }
    using Notes = GlobalOptions::DumpNotes;
    if (command == "matrix" || command == "explain" || command == "whitelist" || global.diff)
      global.dump_notes = Notes::kKernelNotes;
    else if (command == "policy")
      global.dump_notes = global.format == "json" ? Notes::kKernelNotes : Notes::kStderr;
    else if (command == "check" || command == "log" || command == "watch")
      global.dump_notes = Notes::kStderr;
    else
      global.dump_notes = Notes::kFindings;  // topology and the audit print the topology's findings
    // matrix, explain, policy, check and the audit's text print no name but in the texts that look
    // it up (pci_device_name(): the kernel's verdicts, the device lists of matrix and explain), so
    // pci.ids is parsed only where such a text is built.
    global.pci_names = !(command == "matrix" || command == "explain" || command == "policy" || command == "check" ||
                         command == "log" || command == "watch" ||
                         (command.empty() && global.format == "text"));
    if (!dump->count()) return;
    if (global.lspci_dump.empty()) throw p2paudit::InputError("--lspci-dump: empty file name");
    if (command == "snapshot")
      throw p2paudit::InputError("snapshot captures a machine's sysfs and /proc; an lspci dump has neither: "
                                 "send the dump itself");
    if (!global.dump_cpu.empty()) p2paudit::DumpCpu::parse(global.dump_cpu);  // a bad value fails before any work
  });

  // Each handler below prints, which allocates: out of memory there, too, must end in a message and
  // exit 2, not leave main (std::terminate).
  try {
    try {
      app.parse(argc, argv);
      if (app.get_subcommands().empty()) status = run_audit(global);
    } catch (const CLI::CallForHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
      return app.exit(e);
    } catch (const CLI::ParseError& e) {
      print_error(usage_error_message(app, e));
      return kExitError;
    } catch (const p2paudit::InputError& e) {
      print_error(e.what());
      return kExitError;
    } catch (const std::bad_alloc&) {
      return out_of_memory();
    } catch (const std::exception& e) {
      print_error(std::string("internal error: ") + e.what());
      return kExitError;
    }
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  }
  return status;
}
