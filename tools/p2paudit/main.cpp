// p2paudit: will these two PCIe devices do peer-to-peer DMA, and if not, why and what to do.
#include <iostream>

#include "commands.h"
#include "p2paudit/errors.h"

using namespace p2paudit::cli;

int main(int argc, char** argv) {
  GlobalOptions global;
  CLI::App app{"p2paudit: predicts whether PCIe devices can do peer-to-peer DMA, why not, and what to do.\n"
               "With no command, audits this machine (topology and the kernel's P2PDMA matrix)."};
  app.set_version_flag("--version", std::string("p2paudit ") + P2PAUDIT_VERSION);
  app.fallthrough();
  app.require_subcommand(0, 1);
  app.add_option("--sysroot", global.sysroot, "Machine to analyse: / (default), a snapshot directory or FILE.tar.gz");
  app.add_option("--format", global.format, "Output format")->check(CLI::IsMember({"text", "json", "env"}));
  app.add_option("--kernel", global.kernel, "Kernel release whose rules apply (X.Y[.Z]); default: the sysroot's");
  app.add_option("--kernel-rules", global.kernel_rules, "Extra kernel whitelist YAML (repeatable)");
  app.add_option("--assume-whitelisted", global.assume_whitelisted,
                 "Add a host-bridge whitelist entry VVVV:DDDD[:same-host-bridge] for this run (repeatable)");
  app.add_option("--rules-dir", global.rules_dir, "Directory of rule data (default: installed rules/)");

  int status = kExitOk;
  add_topology_command(app, global, &status);
  add_snapshot_command(app, global, &status);
  add_matrix_command(app, global, &status);
  add_explain_command(app, global, &status);
  add_rules_command(app, global, &status);
  add_policy_command(app, global, &status);

  // Checked once parsing is done and before any command runs.
  app.parse_complete_callback([&app, &global] {
    if (global.format == "env" && !app.got_subcommand("policy"))
      throw CLI::ValidationError("--format", "env (shell exports) is only printed by `policy`");
  });

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
    app.exit(e);
    return kExitError;
  } catch (const p2paudit::InputError& e) {
    print_error(e.what());
    return kExitError;
  } catch (const std::exception& e) {
    print_error(std::string("internal error: ") + e.what());
    return kExitError;
  }
  return status;
}
