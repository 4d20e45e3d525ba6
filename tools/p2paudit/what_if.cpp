// SPDX-License-Identifier: GPL-2.0-or-later
// --diff: the machine as read next to the machine under the what-if options, printed as changes.
#include <iostream>

#include "commands.h"
#include "p2paudit/input_file.h"
#include "p2paudit/json_output.h"

namespace p2paudit::cli {

GlobalOptions machine_as_read(const GlobalOptions& global) {
  GlobalOptions base = global;
  base.kernel.clear();
  base.kernel_rules.clear();
  base.assume_whitelisted.clear();
  base.assume_acs_off.clear();
  base.diff = false;
  return base;
}

MachineAsRead load_machine_as_read(const GlobalOptions& global) {
  GlobalOptions base = machine_as_read(global);
  MachineAsRead m{load_topology(base), {}};
  m.kernel = load_kernel_rules(base, m.topo);
  return m;
}

std::vector<std::string> what_if_options(const GlobalOptions& global) {
  std::vector<std::string> out;  // as typed, but shown safely: a file name may hold any bytes
  if (!global.kernel.empty()) out.push_back("--kernel " + escape_text(global.kernel));
  for (const auto& f : global.kernel_rules) out.push_back("--kernel-rules " + escape_text(f));
  for (const auto& e : global.assume_whitelisted) out.push_back("--assume-whitelisted " + escape_text(e));
  for (const auto& d : global.assume_acs_off) out.push_back("--assume-acs-off " + escape_text(d));
  return out;
}

void print_changes(const GlobalOptions& global, const Topology& topo, const std::vector<PairChange>& changes,
                   const KernelRules& before, const KernelRules& after) {
  auto notes = notes_added(before, after);
  if (global.format == "json")
    std::cout << json_text(changes_json(topo, changes, what_if_options(global), notes)) << "\n";
  else
    std::cout << changes_text(topo, changes, what_if_options(global), notes);
}

}  // namespace p2paudit::cli
