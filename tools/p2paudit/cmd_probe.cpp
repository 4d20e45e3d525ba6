// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit probe`: what each runtime (NVML, CUDA, Level Zero) says about each pair of its devices,
// every call in an isolated child (docs/probe.md).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <map>
#include <tuple>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/text_style.h"
#include "p2paudit/json_output.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/probe/probe.h"
#include "p2paudit/probe/reality.h"
#include "p2paudit/probe/runtime_facts.h"

namespace p2paudit::cli {

namespace {

struct ProbeArgs {
  int timeout_seconds = 20;
  bool copy = false;
  std::string size = "256MiB";
  int repeat = 3;
  bool thorough = false;
  bool mirror = false;
};

// The short name of a runtime device's PCI function in the topology (probe::function_names(), as
// the JSON document names it), nullopt when the topology has no such function.
struct Names {
  std::map<Bdf, std::string> by_bdf;
  bool have_topology = false;
  // A verified copy against its path, by (runtime, provider, client): "path ceiling 450.0 GB/s: 86%".
  std::map<std::tuple<std::string, Bdf, Bdf>, std::string> copy_ceilings;
  std::optional<std::string> name(const std::optional<Bdf>& bdf) const {
    if (!bdf) return std::nullopt;
    auto it = by_bdf.find(*bdf);
    if (it == by_bdf.end()) return std::nullopt;
    return it->second;
  }
};

// The matrix cell for one answer, like `nvidia-smi topo -p2p`.
std::string cell(const nlohmann::ordered_json& answer) {
  if (answer.is_number()) return answer.dump();
  if (!answer.is_string()) return "?";
  const std::string s = answer.get<std::string>();
  if (s == "ok") return "OK";
  if (s == "not_supported") return "NS";
  if (s == "unknown") return "U";
  if (s == "hung") return "HUNG";
  if (s == "crashed") return "CRASH";
  if (s == "not_asked") return "-";
  if (s.find("CHIPSET_NOT_SUPPOR") != std::string::npos) return "CNS";
  if (s.find("GPU_NOT_SUPPORTED") != std::string::npos) return "GNS";
  if (s.find("TOPOLOGY_NOT_SUPPORTED") != std::string::npos) return "TNS";
  if (s.find("DISABLED_BY_REGKEY") != std::string::npos) return "DIS";
  return "ERR";
}

std::string device_label(const probe::RuntimeDevice& d, const Names& names) {
  if (auto n = names.name(d.bdf); n && !n->empty()) return *n;
  if (d.bdf) return d.bdf->str();
  return fmt::format("dev{}", d.index);
}

// The peer paths of kernels under a pair's copy line: each path's result, then where it looked.
void print_peer_paths(const nlohmann::ordered_json& paths) {
  std::vector<std::string> parts;
  for (const char* name : {"kernel_stores", "kernel_loads", "atomics"}) {
    const auto& p = paths.value(name, nlohmann::ordered_json());
    std::string result = p.value("result", "?"), words = name;
    std::replace(words.begin(), words.end(), '_', ' ');
    std::string part = words + ": " + result;
    if (result == "dropped" || result == "zeroed" || result == "wrong") {
      for (const auto& w : p.value("windows", nlohmann::ordered_json::array()))
        if (w.value("result", "") != "verified") {
          std::string loud = result;
          std::transform(loud.begin(), loud.end(), loud.begin(), [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
          part = fmt::format("{}: {} ({} words at offset {:#x})", words, loud, w.value("bad_words", 0ULL),
                             w.value("offset", 0ULL));
          break;
        }
    } else if (result == "hung" || result == "refused") {
      part += fmt::format(" in {}: {}", p.value("phase", "?"), p.value("error", "?"));
    } else if (result != "verified" && p.contains("note")) {
      part += " (" + p.value("note", "") + ")";
    }
    parts.push_back(part);
  }
  std::vector<std::string> offsets;
  for (const auto& o : paths.value("offsets", nlohmann::ordered_json::array()))
    if (o.is_number_unsigned()) offsets.push_back(policy::render_size(o.get<std::uint64_t>()));
  std::cout << fmt::format("      kernels: {}\n", fmt::join(parts, "; "));
  std::cout << fmt::format("      windows of {} at {} of {} ({}){}\n", policy::render_size(paths.value("window_bytes", 0ULL)),
                           offsets.empty() ? "none" : fmt::format("{}", fmt::join(offsets, ", ")),
                           policy::render_size(paths.value("span_bytes", 0ULL)),
                           paths.value("span_source", "?") == "bar1" ? "BAR1" : "device memory",
                           paths.contains("note") ? "; " + paths.value("note", "") : "");
}

void print_copies(const probe::RuntimeReport& r, const std::vector<std::string>& labels, const Names& names);
void print_mirror(const probe::RuntimeReport& r, const std::vector<std::string>& labels);

void print_text(const std::vector<probe::RuntimeReport>& reports, const Names& names, const std::string& note,
                int timeout) {
  std::cout << "Runtime probes of this machine (every runtime call in a child process, " << timeout
            << " s limit per phase)\n";
  if (!note.empty()) std::cout << "note: " << note << "\n";
  bool any_matrix = false;
  for (const auto& r : reports) {
    std::cout << "\n" << r.runtime << ": " << r.status;
    if (!r.phase.empty()) std::cout << " in " << r.phase;
    if (!r.error.empty()) std::cout << ": " << escape_line(r.error);
    std::cout << "\n  library: " << escape_line(r.library) << "\n";
    if (r.status == "absent") continue;
    if (!r.driver_version.empty()) std::cout << "  driver:  " << escape_line(r.driver_version) << "\n";
    if (r.extra.contains("note") && r.extra["note"].is_string())
      std::cout << "  note:    " << escape_line(r.extra["note"].get<std::string>()) << "\n";
    if (r.devices.empty()) {
      if (r.status == "ok") std::cout << "  no devices\n";
      continue;
    }
    std::cout << "  devices:\n";
    for (const auto& d : r.devices) {
      std::string where;
      if (!d.bdf) where = "(no PCI address)";
      else if (!names.have_topology) where = d.bdf->str();
      else if (auto n = names.name(d.bdf)) where = d.bdf->str() + (n->empty() ? "" : " " + *n);
      else where = d.bdf->str() + " (not in the topology)";
      std::cout << fmt::format("    {:<3} {:<28} {}\n", d.index, where, escape_line(d.name));
      if (d.extra.contains("nvlink") && d.extra["nvlink"].is_array() && !d.extra["nvlink"].empty()) {
        std::map<std::string, int> remotes;
        int active = 0;
        for (const auto& l : d.extra["nvlink"]) {
          if (l.value("state", "") != "active") continue;
          ++active;
          std::string remote = l.value("remote_bdf", "?");
          if (auto rb = Bdf::parse(remote))
            if (auto n = names.name(*rb); n && !n->empty()) remote = *n;
          ++remotes[remote];
        }
        std::string to;
        for (const auto& [remote, n] : remotes) to += fmt::format("{}{} x{}", to.empty() ? "" : ", ", remote, n);
        std::cout << fmt::format("        NVLink: {} of {} links active{}\n", active, d.extra["nvlink"].size(),
                                 to.empty() ? "" : " (to " + to + ")");
      }
    }
    std::vector<std::string> labels;
    size_t width = 5;  // "CRASH"
    for (const auto& d : r.devices) {
      labels.push_back(device_label(d, names));
      width = std::max(width, labels.back().size());
    }
    if (r.pairs.empty()) {
      print_mirror(r, labels);
      continue;
    }
    // One matrix per answer, rows the provider, columns the client.
    std::vector<std::string> keys;
    for (const auto& p : r.pairs)
      for (auto it = p.answers.begin(); it != p.answers.end(); ++it)
        if (it.key() != "phase" && it.key() != "error" && it.key() != "status" && it.key() != "copy" &&
            !it.key().ends_with("_code") && !it.value().is_object() &&
            std::find(keys.begin(), keys.end(), it.key()) == keys.end())
          keys.push_back(it.key());
    for (const auto& key : keys) {
      std::cout << "  " << key << " (row: provider, column: client):\n    " << std::string(width, ' ');
      for (const auto& l : labels) std::cout << "  " << fmt::format("{:<{}}", l, width);
      std::cout << "\n";
      for (size_t i = 0; i < r.devices.size(); ++i) {
        std::cout << "    " << fmt::format("{:<{}}", labels[i], width);
        for (size_t j = 0; j < r.devices.size(); ++j) {
          std::string c = i == j ? "X" : "?";
          for (const auto& p : r.pairs)
            if (p.provider == static_cast<int>(i) && p.client == static_cast<int>(j) && p.answers.contains(key))
              c = cell(p.answers[key]);
          std::cout << "  " << fmt::format("{:<{}}", c, width);
        }
        std::cout << "\n";
      }
      any_matrix = true;
    }
    print_copies(r, labels, names);
    print_mirror(r, labels);
    for (const auto& p : r.pairs)
      if (p.answers.contains("phase") && !(p.answers.contains("copy") && p.answers["copy"].is_string()))
        std::cout << fmt::format("  pair {} -> {}: {} in {}\n", labels[static_cast<size_t>(p.provider)],
                                 labels[static_cast<size_t>(p.client)], p.answers.value("error", ""),
                                 p.answers.value("phase", ""));
  }
  if (any_matrix)
    std::cout << "\nLegend: X self, OK ok, NS not supported, CNS chipset not supported, GNS GPU not supported,\n"
                 "        TNS topology not supported, DIS disabled by registry key, U unknown, ERR the call failed\n"
                 "        (see --format json), HUNG/CRASH the call hung or crashed, - not asked, a number: the value\n";
}

void print_copies(const probe::RuntimeReport& r, const std::vector<std::string>& labels, const Names& names) {
  bool header = false;
  for (const auto& p : r.pairs) {
    if (!p.answers.contains("copy")) continue;
    const auto& copy = p.answers["copy"];
    if (!header) {
      std::cout << "  copy test (peer and through host memory, compared in full; median GB/s):\n";
      header = true;
    }
    std::string pair = fmt::format("{} -> {}", labels[static_cast<size_t>(p.provider)], labels[static_cast<size_t>(p.client)]);
    if (copy.is_string()) {
      std::cout << fmt::format("    {:<16} {} in {}: {}\n", pair, copy.get<std::string>(), p.answers.value("phase", "?"),
                               p.answers.value("error", ""));
      continue;
    }
    auto leg = [](const nlohmann::ordered_json& l) -> std::string {
      std::string result = l.value("result", "?");
      if (result == "verified" && l.contains("gbps") && l["gbps"].is_number())
        return fmt::format("verified {:.1f} GB/s", l["gbps"].get<double>());
      if (result == "corrupt") return fmt::format("CORRUPT ({} bytes wrong)", l.value("mismatched_bytes", 0LL));
      if (result == "failed") return fmt::format("failed: {} returned {}", l.value("phase", "?"), l.value("error", "?"));
      return result + (l.contains("note") ? ": " + l.value("note", "") : "");
    };
    std::string ceiling;
    const auto& pd = r.devices[static_cast<size_t>(p.provider)].bdf, &cd = r.devices[static_cast<size_t>(p.client)].bdf;
    if (pd && cd)
      if (auto it = names.copy_ceilings.find({r.runtime, *pd, *cd}); it != names.copy_ceilings.end()) ceiling = "; " + it->second;
    std::cout << fmt::format("    {:<16} peer: {:<28} host-staged: {}{}\n", pair, leg(copy.value("peer", nlohmann::ordered_json())),
                             leg(copy.value("host_staged", nlohmann::ordered_json())), ceiling);
    if (copy.contains("peer_paths") && copy["peer_paths"].is_object()) print_peer_paths(copy["peer_paths"]);
  }
}

void print_mirror(const probe::RuntimeReport& r, const std::vector<std::string>& labels) {
  if (!r.extra.contains("mirror") || !r.extra["mirror"].is_object()) return;
  const auto& m = r.extra["mirror"];
  std::cout << fmt::format("  host memory behind a device allocation of {}:\n",
                           policy::render_size(m.value("allocation_bytes", 0LL)));
  if (!m.contains("runs") || !m["runs"].is_array()) return;
  for (const auto& run : m["runs"]) {
    std::string visible = run.value("visible", "?");
    int on = run.value("allocated_on", -1);
    std::string device = on >= 0 && static_cast<size_t>(on) < labels.size() ? labels[static_cast<size_t>(on)] : "?";
    std::string what = visible == "all" ? fmt::format("{} devices in the context", run.value("devices_in_context", 0))
                                        : "only device " + visible + " visible (ZE_AFFINITY_MASK)";
    if (run.value("status", "") != "ok") {
      std::cout << fmt::format("    on {}, {}: {} {}\n", device, what, run.value("status", "?"), run.value("error", ""));
      continue;
    }
    std::string ratio = run.contains("host_bytes_per_byte") && run["host_bytes_per_byte"].is_number()
                            ? fmt::format("{:.2f}", run["host_bytes_per_byte"].get<double>()) : "unknown";
    std::cout << fmt::format("    on {}, {}: {} host bytes per allocated byte (from {})\n", device, what, ratio,
                             run.value("source", "?"));
  }
}

void print_reality(const Topology& topo, const Names& names, const std::vector<probe::RealityCheck>& checks) {
  if (checks.empty()) return;
  auto name = [&](size_t i) {
    auto n = names.name(topo.functions[i].bdf);
    return n && !n->empty() ? *n : topo.functions[i].bdf.str();
  };
  std::cout << "\nPrediction against reality (kernel verdict, offline decision, runtime's answer, copy, decision now):\n";
  for (const auto& c : checks) {
    std::cout << fmt::format("  {}{} -> {} [{}]: kernel {}; predicted {}; runtime says {}{}; decided {}\n",
                             c.corrupt ? "!!! " : c.disagreement ? "! " : "", name(c.provider), name(c.client), c.runtime,
                             c.kernel, c.predicted, c.runtime_says, c.copy.empty() ? "" : "; copy " + c.copy, c.decided);
    std::cout << "      " << (c.disagreement ? "disagreement: " : "") << c.explanation << "\n";
    for (const auto& line : c.kernel_log) std::cout << "      kernel: " << line << "\n";
  }
}

// The loudest lines there are: a copy that reported success with wrong data.
std::vector<std::string> corruption_lines(const std::vector<probe::RuntimeReport>& reports) {
  std::vector<std::string> lines;
  for (const auto& r : reports)
    for (const auto& p : r.pairs) {
      if (!p.answers.contains("copy") || !p.answers["copy"].is_object()) continue;
      for (const char* leg : {"peer", "host_staged"}) {
        const auto& l = p.answers["copy"].value(leg, nlohmann::ordered_json());
        if (l.value("result", "") != "corrupt") continue;
        auto bdf = [&](int i) {
          const auto& d = r.devices[static_cast<size_t>(i)];
          return d.bdf ? d.bdf->str() : fmt::format("device {}", i);
        };
        lines.push_back(fmt::format("DATA CORRUPTION: {} {} copy {} -> {} reported success and {} of {} bytes differ "
                                    "(first at offset {})", r.runtime, leg == std::string("peer") ? "peer" : "host-staged",
                                    bdf(p.provider), bdf(p.client), l.value("mismatched_bytes", 0LL),
                                    p.answers["copy"].value("size_bytes", 0LL), l.value("first_mismatch", -1LL)));
      }
      // A kernel's peer accesses that lost or changed data without an error are as loud.
      const auto& paths = p.answers["copy"].value("peer_paths", nlohmann::ordered_json());
      for (const char* name : {"kernel_stores", "kernel_loads", "atomics"}) {
        if (!paths.is_object()) break;
        const auto& path = paths.value(name, nlohmann::ordered_json());
        const std::string result = path.is_object() ? path.value("result", "") : "";
        if (result != "dropped" && result != "zeroed" && result != "wrong") continue;
        const auto& d = r.devices[static_cast<size_t>(p.provider)], &c = r.devices[static_cast<size_t>(p.client)];
        std::string words = name;
        std::replace(words.begin(), words.end(), '_', ' ');
        lines.push_back(fmt::format("DATA CORRUPTION: {} {} of {} on the memory of {} completed without an error and "
                                    "the data came out {}", r.runtime, words, c.bdf ? c.bdf->str() : fmt::format("device {}", p.client),
                                    d.bdf ? d.bdf->str() : fmt::format("device {}", p.provider), result));
      }
    }
  return lines;
}

int run_probe(const GlobalOptions& global, const ProbeArgs& args) {
  std::string note;
  bool live = !global.from_dump() && global.sysroot == "/";
  if (!live) {
    if (!probe_sysroot_allowed_for_tests())
      throw InputError(fmt::format("the runtimes describe this machine, not {}: `probe` asks them only about the "
                                   "machine it runs on (--sysroot /, the default)", global.source()));
    note = fmt::format("P2PAUDIT_PROBE_ALLOW_SYSROOT=1: this machine's runtime devices are named after the topology of "
                       "{} (for tests)", global.source());
  }
  probe::ProbeOptions options;
  options.timeout_seconds = args.timeout_seconds;
  options.copy.enabled = args.copy;
  options.copy.size_bytes = parse_byte_size(args.size, "--size");
  options.copy.repeat = args.repeat;
  options.copy.thorough = args.thorough;
  options.mirror = args.mirror;
  if (progress_wanted())
    options.progress = [](const std::string& step) {
      std::cerr << own_controls("\r") << "probe: " << escape_line(step) << own_controls("\033[K") << std::flush;
    };

  std::optional<Topology> topo;
  try {
    topo = load_topology(global);
  } catch (const InputError& e) {
    if (!live) throw;
    note = std::string("the PCI topology could not be read, devices are not named: ") + e.what();
  }
  Names names;
  if (topo) {
    names.by_bdf = probe::function_names(*topo);
    names.have_topology = true;
  }

  std::vector<probe::RuntimeReport> reports = probe::probe_all(options);
  if (options.progress) std::cerr << own_controls("\r\033[K") << std::flush;
  nlohmann::ordered_json document = probe::probe_document(reports, topo ? &*topo : nullptr, global.source(), note, options);

  // The prediction each answer is checked against: the kernel's rules and the default policy.
  std::vector<probe::RealityCheck> checks;
  if (topo) {
    KernelRules kernel = load_kernel_rules(global, *topo);
    auto rules = policy::RuleSet::load(policy::default_rule_files(rules_dir(global)));
    checks = probe::check_predictions(*topo, kernel, rules, probe::runtime_facts(document, "the probe", &*topo));
  }
  auto corrupt = corruption_lines(reports);
  // Every copy asked for and not verified: corrupt, failed, not run, or a child that died.
  bool copy_not_verified = false;
  for (const auto& r : reports)
    for (const auto& p : r.pairs) {
      if (!p.answers.contains("copy")) continue;
      const auto& copy = p.answers["copy"];
      if (!copy.is_object()) copy_not_verified = true;
      else
        for (const char* leg : {"peer", "host_staged"})
          copy_not_verified |= copy.value(leg, nlohmann::ordered_json()).value("result", "") != "verified";
      if (copy.is_object() && copy.contains("peer_paths") && copy["peer_paths"].is_object())
        for (const char* path : {"kernel_stores", "kernel_loads", "atomics"}) {
          const std::string result = copy["peer_paths"].value(path, nlohmann::ordered_json()).value("result", "");
          copy_not_verified |= result != "verified" && result != "not_supported";
        }
    }

  if (global.format == "json") {
    auto reality = nlohmann::ordered_json::array();
    for (const auto& c : checks) reality.push_back(probe::reality_json(*topo, c));
    document["reality"] = std::move(reality);
    document["data_corruption"] = corrupt;
    std::cout << json_text(document) << "\n";
  } else {
    for (const auto& line : corrupt) std::cout << "!!! " << line << " !!!\n";
    for (const auto& c : checks)
      if (c.copy_ceiling_gbps && c.copy_ceiling_ratio)
        names.copy_ceilings[{c.runtime, topo->functions[c.provider].bdf, topo->functions[c.client].bdf}] =
            fmt::format("path ceiling {:.1f} GB/s: {:.0f}%", *c.copy_ceiling_gbps, *c.copy_ceiling_ratio * 100);
    print_text(reports, names, note, args.timeout_seconds);
    if (topo) print_reality(*topo, names, checks);
    for (const auto& line : corrupt) std::cout << "\n!!! " << line << " !!!\n";
  }
  // Scripts: 1 when a copy test was asked and did not verify (corrupt, failed, hung, crashed).
  return copy_not_verified ? kExitNo : kExitOk;
}

}  // namespace

void add_probe_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto* cmd = app.add_subcommand("probe", "Ask the runtimes (NVML, CUDA, Level Zero) about each pair of their devices");
  auto args = std::make_shared<ProbeArgs>();
  cmd->add_option("--timeout", args->timeout_seconds, "Seconds one runtime step may take before it is reported hung")
      ->check(CLI::Range(1, 3600));
  cmd->add_flag("--copy", args->copy,
                "Per pair, a peer copy and a host-staged copy of one random buffer, compared in full and timed "
                "(allocates device memory; never run by default)");
  cmd->add_option("--size", args->size, "Bytes per copy for --copy: a number with an optional KiB, MiB or GiB "
                                        "(default 256MiB)");
  cmd->add_option("--repeat", args->repeat, "Timed copies per leg for --copy; the median is reported (default 3)")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--thorough", args->thorough,
                "With --copy: the kernel peer paths in 9 windows of 256 MiB, not 3 of 16 MiB, within 120 s a pair, not 4")
      ->needs(cmd->get_option("--copy"));
  cmd->add_flag("--mirror", args->mirror,
                "Level Zero: measure the host memory the runtime commits or pins for a device allocation");
  cmd->callback([&global, status, args] { *status = run_probe(global, *args); });
}

}  // namespace p2paudit::cli
