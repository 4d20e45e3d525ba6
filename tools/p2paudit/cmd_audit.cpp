// SPDX-License-Identifier: GPL-2.0-or-later
// The default view, `p2paudit` with no command. In text the first screen is the decision: what the
// kernel, the IOMMU and the platform are, which runtimes were asked, then the policy's grid with
// each note's reason and fix, and where the rest is. In JSON the tree and the kernel's matrix are
// fields of one object.
#include <ctime>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "p2paudit/fleet/prometheus.h"
#include "p2paudit/json_output.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/picture.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/topology_report.h"

namespace p2paudit::cli {

namespace {

// --format prom (docs/prometheus.md): the machine's report as node_exporter textfile gauges.
int print_prometheus(const GlobalOptions& global) {
  AnalysedMachine machine = load_analysed_machine(global, global.no_probe);
  fleet::write_prometheus(std::cout, machine.analysis(),
                          {P2PAUDIT_VERSION, static_cast<std::int64_t>(std::time(nullptr))});
  return kExitOk;
}

// --format dot|html (docs/pictures.md): the tree with every pair's verdict and decision, by the
// default policy without asking the runtimes, and the whitelist candidates.
int draw_picture(const GlobalOptions& global) {
  Topology topo = load_topology(global);
  KernelRules kernel = load_kernel_rules(global, topo);
  policy::RuleSet rules = policy::RuleSet::load(policy::default_rule_files(rules_dir(global)));
  policy::PolicyEvaluator evaluator(topo, kernel, rules, nullptr);
  fleet::WhitelistOptions counted;
  counted.count_pairs_only = true;  // the HTML page hands each candidate's pairs out one at a time
  picture::Pairs pairs{&evaluator, matrix_devices(topo, false), fleet::whitelist_candidates(topo, kernel, nullptr, counted)};
  if (global.format == "dot") picture::write_dot(std::cout, topo, &pairs, global.source());
  else picture::write_html(std::cout, topo, &pairs, global.source());
  return kExitOk;
}

constexpr size_t kScreenWidth = 80;

// "name:     value", a long value (a runtime list) wrapped at words under itself.
std::string header_line(const std::string& name, const std::string& value) {
  constexpr size_t kIndent = 10;
  std::string out = fmt::format("{:<{}}", name + ":", kIndent), word;
  size_t column = kIndent;
  for (size_t i = 0; i <= value.size(); ++i) {
    if (i < value.size() && value[i] != ' ') {
      word += value[i];
      continue;
    }
    if (word.empty()) continue;
    if (column > kIndent && column + 1 + word.size() > kScreenWidth) {
      out += "\n" + std::string(kIndent, ' ');
      column = kIndent;
    } else if (column > kIndent) {
      out += ' ', ++column;
    }
    out += word;
    column += word.size();
    word.clear();
  }
  return out + "\n";
}

const char* config_text(Known k) { return k == Known::kYes ? "y" : k == Known::kNo ? "n" : "unknown"; }

// What decides before any pair is looked at: the kernel, the IOMMU, whether this is a VM, and
// whose answers the vendor rules used.
std::string machine_header(const GlobalOptions& global, const AnalysedMachine& m) {
  const Platform& p = m.topo.platform;
  // An unknown kernel config is the same open question for every pair: said here, once, not in
  // each note (notes.h unknowns_to_tell()).
  std::string out = header_line("kernel", fmt::format("{}, CONFIG_PCI_P2PDMA {}", m.kernel.release.text.empty() ? "unknown" : m.kernel.release.text,
                                                      config_text(m.kernel.config_p2pdma)) +
                                              (m.kernel.config_p2pdma == Known::kUnknown
                                                   ? " (no /proc/config.gz or /boot/config-* was read: a pair "
                                                     "the kernel's P2PDMA decides is HOST? until it is known)"
                                                   : ""));
  out += header_line("IOMMU", (p.iommu_mode.empty() ? "unknown" : p.iommu_mode) +
                                 (p.iommu_mode_source.empty() ? "" : " — " + p.iommu_mode_source));  // a source may hold parentheses
  // The CPU's hypervisor flag says a VM, not which hypervisor; a dump has no CPU flags at all.
  out += header_line("VM", global.from_dump() ? "unknown (an lspci dump does not say)"
                           : p.hypervisor   ? "yes (CPU hypervisor flag; the host's IOMMU and ACS are not visible)"
                                            : "no");
  const RuntimeEvidence& r = m.runtimes;
  std::string asked = fmt::format("{}", fmt::join(r.asked, ", "));
  out += header_line("runtimes", r.source == "live"       ? "asked: " + asked
                                 : r.source == "snapshot" ? "answers stored in the snapshot: " + asked
                                                          : r.note);
  return out;
}

// Text: the decision first (docs/policy.md, "The first screen"); --verbose every pair's.
int print_decision_screen(const GlobalOptions& global) {
  AnalysedMachine m = load_analysed_machine(global, global.no_probe);
  const policy::VendorFactsDocument* vendor = m.runtimes.facts ? &*m.runtimes.facts : nullptr;
  policy::PolicyEvaluator evaluator(m.topo, m.kernel, m.rules, vendor);
  auto devices = matrix_devices(m.topo, false);
  std::cout << machine_header(global, m) << "\n";
  if (global.verbose) policy::write_policy_text(std::cout, evaluator, devices, true, text_style(global));
  else policy::write_decision_screen(std::cout, evaluator, devices, text_style(global), {.width = kScreenWidth});
  std::cout << "\n";
  // What the reader noticed or assumed (a dump's unknowns, --assume-acs-off) qualifies every
  // decision above: said in full, as `topology` says it.
  for (const auto& f : m.topo.findings) std::cout << fmt::format("note: {}: {}\n", f.path, f.message);
  std::cout << "More: `p2paudit matrix` the kernel's own verdicts, `p2paudit topology` the tree,\n"
               "`p2paudit policy` each note in full, `p2paudit --verbose` every pair.\n";
  return kExitOk;
}

}  // namespace

int run_audit(const GlobalOptions& global) {
  if (global.format == "prom") return print_prometheus(global);
  if (global.format == "dot" || global.format == "html") return draw_picture(global);
  if (global.format != "json") return print_decision_screen(global);
  Topology topo = load_topology(global);
  KernelRules rules = load_kernel_rules(global, topo);
  P2pdmaIndex index(topo, rules);
  std::string head = json_text(nlohmann::ordered_json{{"schema_version", 1},
                                                      {"source", source_json(global)},
                                                      {"topology", topology_to_json(topo)}});
  head.resize(head.size() - 2);  // "\n}": the matrix follows, streamed
  std::cout << head << ",\n  \"matrix\": ";
  write_matrix_json(std::cout, index, matrix_devices(topo, false), false, 2, kMostListedPairs);
  std::cout << "\n}\n";
  return kExitOk;
}

}  // namespace p2paudit::cli
