// `p2paudit probe`: what each runtime (NVML, CUDA, Level Zero) says about each pair of its devices,
// every call in an isolated child (docs/probe.md).
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "p2paudit/errors.h"
#include "p2paudit/json_output.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/probe/probe.h"

namespace p2paudit::cli {

namespace {

inline constexpr int kProbeSchemaVersion = 1;

struct ProbeArgs {
  int timeout_seconds = 20;
};

bool sysroot_allowed_for_tests() {
  const char* v = std::getenv("P2PAUDIT_PROBE_ALLOW_SYSROOT");
  return v && std::string(v) == "1";
}

// The short name of a runtime device's PCI function in the topology ("gpu0"), "" when the function
// has none, nullopt when the topology has no such function.
struct Names {
  std::map<Bdf, std::string> by_bdf;
  bool have_topology = false;
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

void print_text(const std::vector<probe::RuntimeReport>& reports, const Names& names, const std::string& note,
                int timeout) {
  std::cout << "Runtime probes of this machine (every runtime call in a child process, " << timeout
            << " s limit per phase)\n";
  if (!note.empty()) std::cout << "note: " << note << "\n";
  bool any_matrix = false;
  for (const auto& r : reports) {
    std::cout << "\n" << r.runtime << ": " << r.status;
    if (!r.phase.empty()) std::cout << " in " << r.phase;
    if (!r.error.empty()) std::cout << ": " << r.error;
    std::cout << "\n  library: " << r.library << "\n";
    if (r.status == "absent") continue;
    if (!r.driver_version.empty()) std::cout << "  driver:  " << r.driver_version << "\n";
    if (r.extra.contains("note") && r.extra["note"].is_string())
      std::cout << "  note:    " << r.extra["note"].get<std::string>() << "\n";
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
      std::cout << fmt::format("    {:<3} {:<28} {}\n", d.index, where, d.name);
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
    if (r.pairs.empty()) continue;
    // One matrix per answer, rows the provider, columns the client.
    std::vector<std::string> keys;
    for (const auto& p : r.pairs)
      for (auto it = p.answers.begin(); it != p.answers.end(); ++it)
        if (it.key() != "phase" && it.key() != "error" && std::find(keys.begin(), keys.end(), it.key()) == keys.end())
          keys.push_back(it.key());
    std::vector<std::string> labels;
    size_t width = 5;  // "CRASH"
    for (const auto& d : r.devices) {
      labels.push_back(device_label(d, names));
      width = std::max(width, labels.back().size());
    }
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
    for (const auto& p : r.pairs)
      if (p.answers.contains("phase"))
        std::cout << fmt::format("  pair {} -> {}: {} in {}\n", labels[static_cast<size_t>(p.provider)],
                                 labels[static_cast<size_t>(p.client)], p.answers.value("error", ""),
                                 p.answers.value("phase", ""));
  }
  if (any_matrix)
    std::cout << "\nLegend: X self, OK ok, NS not supported, CNS chipset not supported, GNS GPU not supported,\n"
                 "        TNS topology not supported, DIS disabled by registry key, U unknown, ERR the call failed\n"
                 "        (see --format json), HUNG/CRASH the call hung or crashed, - not asked, a number: the value\n";
}

int run_probe(const GlobalOptions& global, const ProbeArgs& args) {
  std::string note;
  bool live = !global.from_dump() && global.sysroot == "/";
  if (!live) {
    if (!sysroot_allowed_for_tests())
      throw InputError(fmt::format("the runtimes describe this machine, not {}: `probe` asks them only about the "
                                   "machine it runs on (--sysroot /, the default)", global.source()));
    note = fmt::format("P2PAUDIT_PROBE_ALLOW_SYSROOT=1: this machine's runtime devices are named after the topology of "
                       "{} (for tests)", global.source());
  }
  Names names;
  try {
    Topology topo = load_topology(global);
    for (const auto& f : topo.functions) names.by_bdf[f.bdf] = "";
    for (const auto& nf : matrix_devices(topo, false)) names.by_bdf[topo.functions[nf.index].bdf] = nf.short_name;
    names.have_topology = true;
  } catch (const InputError& e) {
    if (!live) throw;
    note = std::string("the PCI topology could not be read, devices are not named: ") + e.what();
  }

  probe::ProbeOptions options;
  options.timeout_seconds = args.timeout_seconds;
  std::vector<probe::RuntimeReport> reports;
  reports.push_back(probe::probe_nvml(options));
  reports.push_back(probe::probe_cuda(options));
#ifdef P2PAUDIT_HAVE_LEVEL_ZERO
  reports.push_back(probe::probe_level_zero(options));
#endif

  if (global.format == "json") {
    nlohmann::ordered_json j;
    j["schema_version"] = kProbeSchemaVersion;
    j["source"] = global.source();
    if (!note.empty()) j["note"] = note;
    j["timeout_seconds"] = args.timeout_seconds;
    auto runtimes = nlohmann::ordered_json::array();
    for (const auto& r : reports) {
      auto rj = r.to_json();
      for (size_t i = 0; i < r.devices.size() && i < rj["devices"].size(); ++i) {
        auto n = names.name(r.devices[i].bdf);
        rj["devices"][i]["in_topology"] = n.has_value();
        rj["devices"][i]["function"] = n && !n->empty() ? nlohmann::ordered_json(*n) : nlohmann::ordered_json(nullptr);
      }
      runtimes.push_back(std::move(rj));
    }
    j["runtimes"] = std::move(runtimes);
    std::cout << json_text(j) << "\n";
  } else {
    print_text(reports, names, note, args.timeout_seconds);
  }
  return kExitOk;
}

}  // namespace

void add_probe_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto* cmd = app.add_subcommand("probe", "Ask the runtimes (NVML, CUDA, Level Zero) about each pair of their devices");
  auto args = std::make_shared<ProbeArgs>();
  cmd->add_option("--timeout", args->timeout_seconds, "Seconds one runtime step may take before it is reported hung")
      ->check(CLI::Range(1, 3600));
  cmd->callback([&global, status, args] { *status = run_probe(global, *args); });
}

}  // namespace p2paudit::cli
