// SPDX-License-Identifier: GPL-2.0-or-later
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <streambuf>
#include <string_view>

#include <unistd.h>

#include <fmt/format.h>

#include "commands.h"
#include "p2paudit/assumptions.h"
#include "p2paudit/dump_topology.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/json_output.h"
#include "p2paudit/output_file.h"
#include "p2paudit/probe/runtime_facts.h"
#include "p2paudit/rules_location.h"
#include "p2paudit/snapshot.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"

namespace p2paudit::cli {

std::string rules_dir(const GlobalOptions& global) {
  return find_rules_dir(global.rules_dir, RulesAnchor::kExecutable).string();
}

nlohmann::ordered_json source_json(const GlobalOptions& global) {
  if (global.from_dump()) return {{"lspci_dump", global.lspci_dump}};
  return {{"sysroot", global.sysroot}};
}

namespace {

bool terminal_without_dumb(int fd) {
  const char* term = std::getenv("TERM");
  return isatty(fd) && !(term && std::string_view(term) == "dumb");
}

}  // namespace

TextStyle text_style(const GlobalOptions& global) {
  if (global.color != "auto") return {global.color == "always"};
  const char* no_color = std::getenv("NO_COLOR");
  return {terminal_without_dumb(STDOUT_FILENO) && !(no_color && *no_color)};
}

bool progress_wanted() { return terminal_without_dumb(STDERR_FILENO); }

// The one gate for error text: messages quote file names, argv values and snapshot bytes, so
// controls (C0, DEL, C1) and invalid UTF-8 are shown as \xNN; only our own line breaks stay.
void print_error(const std::string& message) { std::cerr << "p2paudit: " << escape_json_text(message) << "\n"; }

MachineSource machine_source(const GlobalOptions& global) {
  MachineSource s;
  s.sysroot = global.sysroot;
  s.lspci_dump = global.lspci_dump;
  if (!global.dump_cpu.empty()) s.dump_cpu = DumpCpu::parse(global.dump_cpu);
  s.dump_iommu = global.dump_iommu;
  s.dump_host_bridges = global.dump_host_bridges;
  s.kernel = global.kernel;
  s.kernel_rules = global.kernel_rules;
  s.assume_whitelisted = global.assume_whitelisted;
  s.assume_acs_off = global.assume_acs_off;
  s.rules_dir = rules_dir(global);
  // Only a JSON tree (topology or the audit in --format json) prints what TopologyReadScope leaves out.
  s.descriptive_attributes = global.format == "json";
  s.pci_names = global.pci_names;
  s.answer_cache = global.no_cache  ? probe::AnswerCacheMode::kOff
                   : global.refresh ? probe::AnswerCacheMode::kRefresh
                                    : probe::AnswerCacheMode::kUse;
  return s;
}

AssumptionNotes assumption_notes(const GlobalOptions& global) {
  switch (global.dump_notes) {
    case GlobalOptions::DumpNotes::kFindings: return AssumptionNotes::kFindings;
    case GlobalOptions::DumpNotes::kKernelNotes: return AssumptionNotes::kKernelNotes;
    case GlobalOptions::DumpNotes::kStderr: break;
  }
  return AssumptionNotes::kAside;
}

void print_aside(const std::vector<std::string>& aside) {
  for (const auto& note : aside) print_error(note);
}

Topology load_topology(const GlobalOptions& global, std::optional<std::string>* stored_probe) {
  std::vector<std::string> aside;
  Topology t = read_source_topology(machine_source(global), assumption_notes(global), stored_probe, &aside);
  print_aside(aside);
  return t;
}

bool probe_sysroot_allowed_for_tests() {
  const char* v = std::getenv("P2PAUDIT_PROBE_ALLOW_SYSROOT");
  return v && std::string(v) == "1";
}

bool runtimes_describe(const GlobalOptions& global) { return p2paudit::runtimes_describe(machine_source(global)); }

std::uint64_t parse_byte_size(const std::string& text, const std::string& option) {
  size_t digits = 0;
  while (digits < text.size() && digits < 15 && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  int shift = unit.empty() || unit == "B" ? 0 : unit == "KiB" ? 10 : unit == "MiB" ? 20 : unit == "GiB" ? 30 : -1;
  std::uint64_t n = digits ? std::stoull(text.substr(0, digits)) : 0;
  if (digits == 0 || shift < 0 || n == 0 || n > (std::uint64_t{1} << (40 - shift)))
    throw InputError(fmt::format("{} {}: expected bytes from 1 to 1 TiB, optionally with KiB, MiB or GiB", option,
                                 escape_text(text)));
  return n << shift;
}

void add_rule_options(CLI::App* cmd, RuleOptions& options) {
  cmd->add_option("--rules", options.rules, "Policy or advisories YAML applied after the default (repeatable)");
  cmd->add_flag("--no-default-rules", options.no_default, "Use only the --rules files");
  cmd->add_option("--vendor-facts", options.vendor_facts,
                  "JSON facts from vendor tools, laid over the runtimes' answers (docs/policy.md)");
  cmd->add_flag("--no-probe", options.no_probe, "Do not ask the runtimes (NVML, CUDA, Level Zero, HIP) on the live machine");
}

DecisionInputs load_decision_inputs(const GlobalOptions& global, const RuleOptions& options) {
  PolicyInputs policy;
  policy.rule_files = options.rules;
  policy.no_default_rules = options.no_default;
  policy.vendor_facts = options.vendor_facts;
  policy.ask_live = !(options.no_probe || global.no_probe);
  std::vector<std::string> aside;
  DecisionInputs in = read_decision_inputs(machine_source(global), policy, assumption_notes(global), &aside);
  print_aside(aside);
  return in;
}

AnalysedMachine load_analysed_machine(const GlobalOptions& global, bool no_probe) {
  // The inputs `check` reads, through the same function (the default policy, no vendor facts file).
  PolicyInputs policy;
  policy.ask_live = !no_probe;
  std::vector<std::string> aside;
  DecisionInputs in = read_decision_inputs(machine_source(global), policy, assumption_notes(global), &aside);
  print_aside(aside);
  AnalysedMachine m{std::move(in.topo), std::move(in.kernel), std::move(in.rules), std::move(in.runtimes)};
  m.runtimes.facts = std::move(in.vendor);
  return m;
}

fleet::MachineAnalysis AnalysedMachine::analysis() const {
  return {topo, kernel, rules, runtimes.facts ? &*runtimes.facts : nullptr,
          {runtimes.source, runtimes.note, runtimes.asked}};
}

KernelRules load_kernel_rules(const GlobalOptions& global, const Topology& topo) {
  std::vector<std::string> aside;
  KernelRules rules = read_source_kernel_rules(machine_source(global), topo, assumption_notes(global), &aside);
  print_aside(aside);
  return rules;
}

namespace {

// An ostream onto the temporary twin of an OutputFile: an output is written as it is computed.
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

}  // namespace

void add_output_options(CLI::App& cmd, OutputTarget& target) {
  cmd.add_option("-o,--output", target.output, "Write to FILE (atomically; an existing FILE is kept unless --force)");
  cmd.add_flag("--force", target.force, "Replace the output file if it exists (never through a symlink)");
}

void write_output(const OutputTarget& target, const std::function<void(std::ostream&)>& write) {
  if (target.output.empty() || target.output == "-") {
    write(std::cout);
    return;
  }
  OutputFile file(target.output, target.force);
  OutputFileBuf buf(file);
  std::ostream out(&buf);
  out.exceptions(std::ios::badbit);  // a failed write throws the OutputFile's InputError
  write(out);
  out.flush();
  file.commit();
}

size_t resolve_device(const Topology& topo, const GlobalOptions& global, const std::string& spec) {
  if (auto i = resolve_function(topo, spec)) return *i;
  throw InputError(fmt::format("no PCI function '{}' in {} (use DDDD:BB:DD.F, BB:DD.F, or a name such as gpu0 "
                               "or nvme0 from `p2paudit matrix`)", spec, global.source()));
}

}  // namespace p2paudit::cli
