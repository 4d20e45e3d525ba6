// SPDX-License-Identifier: GPL-2.0-or-later
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string_view>

#include <unistd.h>

#include <fmt/format.h>

#include "commands.h"
#include "p2paudit/assumptions.h"
#include "p2paudit/dump_topology.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
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

void print_error(const std::string& message) { std::cerr << "p2paudit: " << message << "\n"; }

namespace {

DumpAssumptions dump_assumptions(const GlobalOptions& global) {
  DumpAssumptions a;
  if (!global.dump_cpu.empty()) a.cpu = DumpCpu::parse(global.dump_cpu);
  a.iommu = global.dump_iommu;
  a.host_bridges = global.dump_host_bridges;
  a.kernel = global.kernel;
  return a;
}

// The topology as the sysroot or the dump reads, before any what-if assumption.
Topology read_machine(const GlobalOptions& global, std::optional<std::string>* stored_probe) {
  if (global.from_dump()) {
    auto assumptions = dump_assumptions(global);
    Topology t = read_dump_topology(global.lspci_dump, assumptions);
    if (global.dump_notes == GlobalOptions::DumpNotes::kStderr)
      for (const auto& note : dump_assumption_notes(global.lspci_dump, assumptions, t)) print_error("note: " + note);
    return t;
  }
  Sysroot root = Sysroot::open(global.sysroot);
  if (stored_probe && !root.is_live() && root.exists(kProbeResultsPath)) {
    *stored_probe = root.read_text(kProbeResultsPath);
    if (!*stored_probe)
      throw InputError(fmt::format("{}: {}: not a regular file of at most {} bytes", root.origin(), kProbeResultsPath,
                                   root.limits().max_file_bytes));
  }
  return read_topology(root);
}

}  // namespace

Topology load_topology(const GlobalOptions& global, std::optional<std::string>* stored_probe) {
  Topology t = read_machine(global, stored_probe);
  if (global.assume_acs_off.empty()) return t;
  // Stated like a dump's assumptions: always in the findings; on stderr or (load_kernel_rules) in
  // the kernel notes where the command prints those instead.
  for (auto& note : assume_acs_redirect_off(t, global.assume_acs_off).notes(t)) {
    if (global.dump_notes == GlobalOptions::DumpNotes::kStderr) print_error("note: " + note);
    t.findings.push_back({std::string(kAssumeAcsOffOrigin), std::move(note)});
  }
  return t;
}

bool probe_sysroot_allowed_for_tests() {
  const char* v = std::getenv("P2PAUDIT_PROBE_ALLOW_SYSROOT");
  return v && std::string(v) == "1";
}

bool runtimes_describe(const GlobalOptions& global) {
  return !global.from_dump() && (global.sysroot == "/" || probe_sysroot_allowed_for_tests());
}

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

RuntimeEvidence runtime_evidence(const GlobalOptions& global, const std::optional<std::string>& stored_probe,
                                 bool no_probe) {
  RuntimeEvidence e;
  nlohmann::json document;
  std::string origin;
  if (stored_probe) {
    origin = fmt::format("{}: {}", global.sysroot, kProbeResultsPath);
    document = probe::parse_probe_document(*stored_probe, origin);
    e.source = "snapshot";
    e.note = "runtime answers stored in the snapshot (snapshot --probe)";
  } else if (no_probe) {
    e.note = "the runtimes were not asked (--no-probe)";
    return e;
  } else if (!runtimes_describe(global)) {
    e.note = global.from_dump() ? "the runtimes cannot be asked about an lspci dump"
                                : "the runtimes were not asked: this is not the live machine, and the snapshot holds no "
                                  "probe results (`p2paudit snapshot --probe` stores them)";
    return e;
  } else {
    origin = "the runtime probe";
    document = probe::probe_document(probe::probe_all({}), nullptr, global.source(), "", {});
    e.source = "live";
    e.note = "the runtimes were asked (queries only; --no-probe skips them)";
  }
  auto facts = probe::runtime_facts(document, origin);
  e.asked = std::move(facts.asked);
  e.facts = std::move(facts.facts);
  return e;
}

AnalysedMachine load_analysed_machine(const GlobalOptions& global, bool no_probe) {
  std::optional<std::string> stored_probe;
  AnalysedMachine m{load_topology(global, &stored_probe), {}, {}, {}};
  m.kernel = load_kernel_rules(global, m.topo);
  m.rules = policy::RuleSet::load(policy::default_rule_files(rules_dir(global)));
  m.runtimes = runtime_evidence(global, stored_probe, no_probe);
  return m;
}

fleet::MachineAnalysis AnalysedMachine::analysis() const {
  return {topo, kernel, rules, runtimes.facts ? &*runtimes.facts : nullptr,
          {runtimes.source, runtimes.note, runtimes.asked}};
}

KernelRules load_kernel_rules(const GlobalOptions& global, const Topology& topo) {
  KernelRules rules = p2paudit::load_kernel_rules(std::filesystem::path(rules_dir(global)) / "kernel", topo.platform,
                                                  {global.kernel, global.kernel_rules, global.assume_whitelisted});
  if (!global.assume_acs_off.empty()) {
    if (global.dump_notes == GlobalOptions::DumpNotes::kKernelNotes)
      for (const auto& f : topo.findings)
        if (f.path == kAssumeAcsOffOrigin) rules.notes.push_back(f.message);
    if (auto caveat = acs_redirect_off_caveat(rules.release)) {
      if (global.dump_notes == GlobalOptions::DumpNotes::kStderr) print_error("note: " + *caveat);
      else rules.notes.push_back(*caveat);
    }
  }
  if (global.from_dump()) {
    // The dump's own statement of the unknown kernel replaces the rules' notes about a sysroot
    // without osrelease or kernel config.
    std::erase_if(rules.notes, [](const std::string& note) {
      return note.starts_with("the sysroot does not say which kernel runs") ||
             note.starts_with("the kernel config was not found");
    });
    if (global.dump_notes == GlobalOptions::DumpNotes::kKernelNotes) {
      auto notes = dump_assumption_notes(global.lspci_dump, dump_assumptions(global), topo);
      rules.notes.insert(rules.notes.begin(), notes.begin(), notes.end());
    }
  }
  return rules;
}

size_t resolve_device(const Topology& topo, const GlobalOptions& global, const std::string& spec) {
  if (auto i = resolve_function(topo, spec)) return *i;
  throw InputError(fmt::format("no PCI function '{}' in {} (use DDDD:BB:DD.F, BB:DD.F, or a name such as gpu0 "
                               "or nvme0 from `p2paudit matrix`)", spec, global.source()));
}

}  // namespace p2paudit::cli
