// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/p2pdma_report.h"

#include "p2paudit/acs_meaning.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <iterator>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "p2paudit/acs_meaning.h"
#include "p2paudit/device_class.h"
#include "p2paudit/grouped_grid.h"
#include "p2paudit/input_file.h"
#include "p2paudit/json_output.h"
#include "p2paudit/platform.h"

namespace p2paudit {

namespace {

using nlohmann::ordered_json;

// Short names of every function in the default view, keyed by function index: each class numbered
// in BDF order (gpu0, gpu1, fpga0...).
std::vector<std::string> short_names(const Topology& topo) {
  std::vector<std::string> names(topo.functions.size());
  std::array<int, size_t(DeviceClass::kOther) + 1> next{};
  for (size_t i = 0; i < topo.functions.size(); ++i) {
    const Function& f = topo.functions[i];
    if (f.is_virtfn) continue;
    DeviceClass c = classify_device(f);
    if (in_default_view(c)) names[i] = fmt::format("{}{}", short_name_prefix(c), next[size_t(c)]++);
  }
  return names;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

ordered_json opt(const std::optional<int>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); }
ordered_json opt(const std::optional<bool>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); }
ordered_json bdf_or_null(const Topology& t, const std::optional<size_t>& i) {
  return i ? ordered_json(t.functions[*i].bdf.str()) : ordered_json(nullptr);
}

ordered_json chain_json(const Topology& t, const std::vector<size_t>& chain) {
  ordered_json out = ordered_json::array();
  for (size_t i : chain) out.push_back(t.functions[i].bdf.str());
  return out;
}

std::string describe(const Topology& t, size_t i, const std::vector<std::string>& names) {
  const Function& f = t.functions[i];
  std::string s = f.bdf.str();
  if (i < names.size() && !names[i].empty()) s += " " + names[i];
  s += fmt::format(" [{:04x}:{:04x}]", f.vendor, f.device);
  if (std::string name = pci_device_name(t, f); !name.empty()) s += " " + name;
  if (!f.driver.empty()) s += " (" + f.driver + ")";
  return s;
}

std::string chain_text(const Topology& t, const std::vector<size_t>& chain) {
  std::string s;
  for (size_t i : chain) s += (s.empty() ? "" : " -> ") + t.functions[i].bdf.str();
  if (!chain.empty()) s += " -> " + t.functions[chain.back()].host_bridge;
  return s;
}

std::string distance_text(const std::optional<int>& d) { return d ? std::to_string(*d) : "unknown"; }

Tone map_type_tone(MapType m) {
  switch (m) {
    case MapType::kBusAddr: return Tone::kGood;
    case MapType::kThruHostBridge: return Tone::kCaution;
    case MapType::kNotSupported: return Tone::kBad;
    case MapType::kUnknown: break;
  }
  return Tone::kUnknown;
}

}  // namespace

std::vector<NamedFunction> matrix_devices(const Topology& topo, bool all) {
  auto names = short_names(topo);
  std::vector<NamedFunction> out;
  if (all) {
    for (size_t i = 0; i < topo.functions.size(); ++i) out.push_back({i, names[i]});
    return out;
  }
  // Grouped by class in DeviceClass order, BDF order within a class.
  std::vector<DeviceClass> classes(topo.functions.size(), DeviceClass::kOther);
  for (size_t i = 0; i < topo.functions.size(); ++i)
    if (!names[i].empty()) classes[i] = classify_device(topo.functions[i]);
  for (size_t c = 0; c < size_t(DeviceClass::kOther); ++c)
    for (size_t i = 0; i < topo.functions.size(); ++i)
      if (!names[i].empty() && size_t(classes[i]) == c) out.push_back({i, names[i]});
  return out;
}

std::optional<size_t> resolve_function(const Topology& topo, std::string_view spec) {
  if (auto bdf = Bdf::parse(spec)) return topo.index_of(*bdf);
  auto names = short_names(topo);
  std::string want = lower(spec);
  for (size_t i = 0; i < names.size(); ++i)
    if (!names[i].empty() && names[i] == want) return i;
  return std::nullopt;
}

const char* matrix_code(const PairVerdict& v) { return matrix_code(v.map_type, v.provider == v.client); }

const char* matrix_code(MapType map_type, bool self) {
  if (self) return "X";
  switch (map_type) {
    case MapType::kBusAddr: return "BUS";
    case MapType::kThruHostBridge: return "HB";
    case MapType::kNotSupported: return "NO";
    case MapType::kUnknown: return "?";
  }
  return "?";
}

ordered_json kernel_json(const KernelRules& rules) {
  ordered_json whitelist = ordered_json::array();
  for (size_t i = 0; i < rules.whitelist.size(); ++i) {
    const auto& e = rules.whitelist[i];
    whitelist.push_back({{"id", e.id()},
                         {"same_host_bridge", e.same_host_bridge},
                         {"comment", e.comment},
                         {"in_kernel_table", i < rules.table_entries},
                         {"origin", e.origin}});
  }
  return {
      {"release", rules.release.text.empty() ? rules.release.version() : rules.release.text},
      {"rules_release", rules.release.version()},
      {"release_source", rules.release_source},
      {"config_pci_p2pdma", to_string(rules.config_p2pdma)},
      {"config_source", rules.config_source},
      {"features",
       {{"p2pdma", rules.p2pdma},
        {"map_types", rules.map_types},
        {"amd_zen_root_complex", rules.amd_zen_root_complex},
        {"whitelist_table", rules.whitelist_table},
        {"cpu_supports_p2pdma", rules.cpu_supports_p2pdma},
        {"root_device_rule", to_string(rules.root_device_rule)},
        {"acs_list_buffer", rules.acs_list_size},
        {"host_bridge_whitelist_warning", rules.whitelist_warning},
        {"whitelist_any_device", rules.whitelist_any_device}}},
      {"whitelist", whitelist},
      {"rule_files", rules.rule_files},
      {"notes", rules.notes},
  };
}

namespace {

ordered_json verdict_json_named(const Topology& t, const KernelRules& rules, const PairVerdict& v,
                                const std::vector<std::string>& names) {
  ordered_json acs = ordered_json::array();
  for (const auto& test : v.acs_tests)
    acs.push_back({{"device", t.functions[test.function].bdf.str()},
                   {"chain", test.provider_chain ? "provider" : "client"},
                   {"state", to_string(test.acs.state)},
                   {"ctrl", test.acs.state == CapState::kPresent ? ordered_json(fmt::format("{:#06x}", test.acs.ctrl))
                                                                 : ordered_json(nullptr)},
                   {"redirect", opt(test.redirect)}});
  ordered_json hbs = ordered_json::array();
  for (const auto& hb : v.host_bridges) {
    ordered_json entry = nullptr;
    if (hb.entry) {
      const auto& e = rules.whitelist[*hb.entry];
      entry = {{"id", e.id()}, {"same_host_bridge", e.same_host_bridge}, {"comment", e.comment},
               {"origin", e.origin}};
    }
    ordered_json root_id = nullptr;
    if (hb.root_device) {
      const Function& r = t.functions[*hb.root_device];
      root_id = fmt::format("{:04x}:{:04x}", r.vendor, r.device);
    }
    hbs.push_back({{"host_bridge", hb.host_bridge},
                   {"first_device", bdf_or_null(t, hb.first_device)},
                   {"root_device", bdf_or_null(t, hb.root_device)},
                   {"root_device_id", root_id},
                   {"same_host_bridge", hb.same_host_bridge},
                   {"whitelist_entry", entry},
                   {"refused_same_host_bridge", hb.refused_same_host_bridge},
                   {"passed", opt(hb.passed)}});
  }
  ordered_json remedy = {
      {"disable_acs_redir", v.remedy.disable_acs_redir.empty() ? ordered_json(nullptr)
                                                                : ordered_json(v.remedy.disable_acs_redir)},
      {"kernel_parameter", v.remedy.disable_acs_redir.empty()
                               ? ordered_json(nullptr)
                               : ordered_json("pci=disable_acs_redir=" + v.remedy.disable_acs_redir)},
      {"acs_unknown", v.remedy.acs_unknown},
      {"iommu_groups_merged", v.remedy.iommu_groups_merged},
      {"whitelist", v.remedy.whitelist.empty() ? ordered_json(nullptr) : ordered_json(v.remedy.whitelist)},
      {"alternatives", v.remedy.alternatives},
  };
  return {
      {"provider", t.functions[v.provider].bdf.str()},
      {"client", t.functions[v.client].bdf.str()},
      {"provider_name", names[v.provider]},
      {"client_name", names[v.client]},
      {"map_type", to_string(v.map_type)},
      {"distance", v.distance},
      {"p2pdma_distance", opt(v.p2pdma_distance)},
      {"legacy_return", opt(v.legacy_return)},
      {"reason", v.reason},
      {"kernel_log", v.kernel_log},
      {"kernel_log_complete", v.kernel_log_complete},
      {"kernel_log_quiet", v.quiet_log},
      {"unknowns", v.unknowns},
      {"provider_chain", chain_json(t, v.provider_chain)},
      {"client_chain", chain_json(t, v.client_chain)},
      {"common_ancestor", bdf_or_null(t, v.common_ancestor)},
      {"acs_considered", v.acs_considered},
      {"acs", acs},
      {"through_host_bridge", v.through_host_bridge},
      {"cpu_supports_p2pdma", v.cpu_rule_consulted ? opt(v.cpu_supports_p2pdma) : ordered_json(nullptr)},
      {"host_bridges", hbs},
      {"remedy", remedy},
  };
}

}  // namespace

ordered_json verdict_json(const Topology& t, const KernelRules& rules, const PairVerdict& v) {
  return verdict_json_named(t, rules, v, short_names(t));
}

ordered_json explain_json(const Topology& t, const KernelRules& rules, const ManyVerdict& many) {
  auto names = short_names(t);
  ordered_json clients = ordered_json::array();
  ordered_json pairs = ordered_json::array();
  for (const auto& v : many.clients) {
    clients.push_back(t.functions[v.client].bdf.str());
    pairs.push_back(verdict_json_named(t, rules, v, names));
  }
  return {{"schema_version", kVerdictSchemaVersion},
          {"kernel", kernel_json(rules)},
          {"provider", t.functions[many.provider].bdf.str()},
          {"clients", clients},
          {"p2pdma_distance_many", opt(many.result)},
          {"kernel_log", many.kernel_log},
          {"kernel_log_complete", many.kernel_log_complete},
          {"pairs", pairs}};
}

std::vector<std::string> matrix_labels(const Topology& t, const std::vector<NamedFunction>& devices) {
  // "BB:DD.F" is enough when every function is in domain 0.
  bool one_domain = std::all_of(t.functions.begin(), t.functions.end(), [](const Function& f) { return f.bdf.domain == 0; });
  std::vector<std::string> labels;
  for (const auto& d : devices) {
    std::string bdf = t.functions[d.index].bdf.str();
    labels.push_back(!d.short_name.empty() ? d.short_name : one_domain ? bdf.substr(5) : bdf);
  }
  return labels;
}

namespace {

std::string kernel_heading(const KernelRules& rules) {
  return fmt::format("Kernel {} ({}), P2PDMA rules of {}\n",
                     rules.release.text.empty() ? rules.release.version() : rules.release.text, rules.release_source,
                     rules.release.version());
}

ordered_json devices_json(const Topology& t, const std::vector<NamedFunction>& devices) {
  ordered_json devs = ordered_json::array();
  for (const auto& d : devices) {
    const Function& f = t.functions[d.index];
    devs.push_back({{"bdf", f.bdf.str()},
                    {"name", d.short_name},
                    {"vendor_device", fmt::format("{:04x}:{:04x}", f.vendor, f.device)},
                    {"class", fmt::format("{:06x}", f.class_code)},
                    {"device_name", pci_device_name(t, f)},
                    {"driver", f.driver},
                    {"virtfn", f.is_virtfn}});
  }
  return devs;
}

// Output is handed to the stream in blocks of about this size.
constexpr size_t kFlushBytes = 1 << 16;

}  // namespace

namespace {

// The map types' codes; "?" follows, naming the input.
constexpr const char* kMapTypeLegend =
    "  BUS  = BUS_ADDR: below a common upstream bridge, no ACS redirect on the path\n"
    "  HB   = THRU_HOST_BRIDGE: allowed, routed through the host bridge\n"
    "  NO   = NOT_SUPPORTED: the kernel refuses (pci_p2pdma_distance() = -1)\n";

// The kernel's notes on how the verdicts were reached, after the grid.
void write_matrix_notes(std::ostream& out, const P2pdmaIndex& index) {
  for (const auto& note : index.rules().notes) out << "Note: " << note << "\n";
  for (const auto& note : unknown_whitelist_notes(index.topology(), index.rules())) out << "Note: " << note << "\n";
}

// The matrix by groups of devices, each cell counting its pairs by map type.
void write_grouped_matrix(std::ostream& out, const P2pdmaIndex& index, const std::vector<NamedFunction>& devices,
                          const std::vector<std::string>& labels, const TextStyle& style) {
  // Cells list BUS, HB, NO, ? in this order; a cell takes the colour of its worst.
  const MapType kinds[] = {MapType::kBusAddr, MapType::kThruHostBridge, MapType::kNotSupported, MapType::kUnknown};
  std::vector<PairKind> codes;
  std::array<size_t, 4> kind_of{};  // by MapType
  for (size_t k = 0; k < std::size(kinds); ++k) {
    codes.push_back({matrix_code(kinds[k], false), map_type_tone(kinds[k]), static_cast<int>(k)});
    kind_of[static_cast<size_t>(kinds[k])] = k;
  }
  GroupedGrid grid(index.topology(), devices, kMostDeviceGroups, codes);
  for (size_t r = 0; r < devices.size(); ++r)
    for (size_t c = 0; c < devices.size(); ++c)
      if (r != c) grid.count(r, c, kind_of[static_cast<size_t>(index.outcome(devices[r].index, devices[c].index).map_type)]);
  grid.fit(kDeviceGridColumns);
  std::string buf = grouped_grid_heading(devices.size(), "`matrix --verbose` draws every device") + "\n\n" + grid.rows(style);
  buf += fmt::format("\nRows are providers, columns clients (pci_p2pdma_distance(provider, client)); {} devices in {} groups, {} ordered pairs.\n"
                     "Each cell counts the pairs between two groups by verdict (BUS12 HB4: 12 BUS_ADDR, 4 THRU_HOST_BRIDGE; - none).\n",
                     devices.size(), grid.groups(), devices.size() * (devices.size() - 1));
  buf += "Legend:\n";
  buf += kMapTypeLegend;
  buf += fmt::format("  ?    = cannot be known from {} (see `p2paudit explain`)\n\nGroups:\n", index.topology().input_kind());
  for (const auto& line : grid.legend(labels, kDeviceGridColumns - 2)) buf += "  " + line + "\n";
  out << buf;
  write_matrix_notes(out, index);
}

}  // namespace

void write_matrix_text(std::ostream& out, const P2pdmaIndex& index, const std::vector<NamedFunction>& devices,
                       const TextStyle& style, bool every_pair) {
  const Topology& t = index.topology();
  out << kernel_heading(index.rules());
  if (devices.empty()) {
    out << "No GPU, accelerator, FPGA, NVMe, NIC or InfiniBand function found (`p2paudit matrix --all` shows every function).\n";
    return;
  }
  std::vector<std::string> labels = matrix_labels(t, devices);
  size_t width = 3;
  for (const auto& l : labels) width = std::max(width, l.size());
  if (!every_pair && !device_grid_fits(devices.size(), width + 2)) return write_grouped_matrix(out, index, devices, labels, style);
  auto cell = [&](std::string_view text) { return fmt::format("{:<{}}", text, width + 2); };
  const MapType kinds[] = {MapType::kUnknown, MapType::kNotSupported, MapType::kBusAddr, MapType::kThruHostBridge};
  std::string cells[5];  // by map type, then self
  for (MapType m : kinds) cells[static_cast<int>(m)] = style.paint(cell(matrix_code(m, false)), map_type_tone(m));
  cells[4] = cell(matrix_code(MapType::kBusAddr, true));
  auto end_row = [](std::string& row) {
    while (!row.empty() && row.back() == ' ') row.pop_back();
    row += '\n';
  };

  std::string row = "\n" + cell("");
  for (const auto& l : labels) row += cell(l);
  end_row(row);
  for (size_t r = 0; r < devices.size(); ++r) {
    row += cell(labels[r]);
    for (size_t c = 0; c < devices.size(); ++c)
      row += r == c ? cells[4] : cells[static_cast<int>(index.outcome(devices[r].index, devices[c].index).map_type)];
    end_row(row);
    if (row.size() >= kFlushBytes) out << row, row.clear();
  }
  out << row;
  out << "\nRows are providers, columns clients (pci_p2pdma_distance(provider, client)).\n"
      << "Legend:\n"
         "  X    = self\n"
      << kMapTypeLegend
      << fmt::format("  ?    = cannot be known from {} (see `p2paudit explain`)\n\nDevices:\n", t.input_kind());
  for (size_t i = 0; i < devices.size(); ++i)
    out << fmt::format("  {:<{}}  {}\n", labels[i], width, describe(t, devices[i].index, {}));
  write_matrix_notes(out, index);
}

void write_matrix_json(std::ostream& out, const P2pdmaIndex& index, const std::vector<NamedFunction>& devices,
                       bool details, int indent, std::uint64_t most_listed_pairs) {
  const Topology& t = index.topology();
  const std::string pad(static_cast<size_t>(indent), ' ');
  const std::uint64_t pair_count = static_cast<std::uint64_t>(devices.size()) * devices.size();
  const bool grouped = pair_count > most_listed_pairs;
  ordered_json head_json{{"schema_version", kMatrixSchemaVersion},
                         {"kernel", kernel_json(index.rules())},
                         {"devices", devices_json(t, devices)}};
  // One element per kind: what the element shows, counted. The kinds are bounded by the tree's
  // depth (distances), not by the pairs.
  std::map<std::tuple<MapType, int, std::optional<int>, bool>, std::uint64_t> kinds;
  if (grouped) {
    head_json["grouped_pairs"] = {
        {"count", pair_count},
        {"most_listed", most_listed_pairs},
        {"note", fmt::format("{} ordered pairs, more than {}: \"pairs\" holds one element per kind of pair with its "
                             "\"pairs\" count (every pair counted once); `p2paudit matrix --format json` lists each "
                             "pair, `p2paudit explain` tells one",
                             pair_count, most_listed_pairs)}};
    for (const auto& p : devices)
      for (const auto& c : devices) {
        PairOutcome o = index.outcome(p.index, c.index);
        ++kinds[{o.map_type, o.distance, o.p2pdma_distance, o.through_host_bridge}];
      }
  }
  std::string head = json_text(head_json);
  head.resize(head.size() - 2);  // "\n}": the pairs follow
  std::string buf;
  for (char ch : head) buf += ch == '\n' ? "\n" + pad : std::string(1, ch);
  buf += ",\n" + pad + "  \"pairs\": [";
  if (grouped) {
    bool first = true;
    for (const auto& [kind, n] : kinds) {
      const auto& [map_type, distance, p2pdma_distance, through_host_bridge] = kind;
      fmt::format_to(std::back_inserter(buf),
                     "{}{}    {{\"pairs\": {}, \"map_type\": \"{}\", \"distance\": {}, \"p2pdma_distance\": {}, "
                     "\"through_host_bridge\": {}}}",
                     first ? "\n" : ",\n", pad, n, to_string(map_type), distance,
                     p2pdma_distance ? std::to_string(*p2pdma_distance) : "null", through_host_bridge);
      first = false;
    }
    buf += first ? "]\n" : "\n" + pad + "  ]\n";
    buf += pad + "}";
    out << buf;
    return;
  }

  auto names = short_names(t);
  std::vector<std::string> quoted(t.functions.size());
  auto bdf = [&](size_t i) -> const std::string& {
    if (quoted[i].empty()) quoted[i] = "\"" + t.functions[i].bdf.str() + "\"";
    return quoted[i];
  };
  auto out_buf = std::back_inserter(buf);
  bool first = true;
  for (const auto& p : devices)
    for (const auto& c : devices) {
      buf += first ? "\n" : ",\n";
      buf += pad;
      buf += "    ";
      first = false;
      if (details) {
        ordered_json j = verdict_json_named(t, index.rules(), index.verdict(p.index, c.index), names);
        escape_json_strings(j);
        buf += j.dump();
      } else {
        PairOutcome o = index.outcome(p.index, c.index);
        fmt::format_to(out_buf, "{{\"provider\": {}, \"client\": {}, \"map_type\": \"{}\", \"distance\": {}, "
                                "\"p2pdma_distance\": {}, \"common_ancestor\": {}, \"through_host_bridge\": {}}}",
                       bdf(p.index), bdf(c.index), to_string(o.map_type), o.distance,
                       o.p2pdma_distance ? std::to_string(*o.p2pdma_distance) : "null",
                       o.common_ancestor ? bdf(*o.common_ancestor) : "null", o.through_host_bridge);
      }
      if (buf.size() >= kFlushBytes) out << buf, buf.clear();
    }
  buf += first ? "]\n" : "\n" + pad + "  ]\n";
  buf += pad + "}";
  out << buf;
}

std::string explain_text(const Topology& t, const KernelRules& rules, const ManyVerdict& many) {
  auto names = short_names(t);
  std::string out = kernel_heading(rules);
  for (const auto& note : rules.notes) out += "Note: " + note + "\n";
  out += fmt::format("Provider: {}\n", describe(t, many.provider, names));
  for (const auto& v : many.clients) {
    out += fmt::format("\nClient: {}\n", describe(t, v.client, names));
    out += fmt::format("  Verdict: {}, distance {}, pci_p2pdma_distance() = {}\n", to_string(v.map_type), v.distance,
                       distance_text(v.p2pdma_distance));
    if (v.legacy_return) out += fmt::format("  upstream_bridge_distance() returned {}\n", *v.legacy_return);
    out += "  Why: " + v.reason + "\n";
    out += "  Provider chain: " + chain_text(t, v.provider_chain) + "\n";
    out += "  Client chain:   " + chain_text(t, v.client_chain) + "\n";
    out += "  Common upstream device: " +
           (v.common_ancestor ? t.functions[*v.common_ancestor].bdf.str() : std::string("none")) + "\n";
    if (!v.acs_tests.empty()) {
      out += fmt::format("  ACS redirect tests{}:\n", v.acs_considered ? "" : " (not used: no common upstream device)");
      uint16_t set_bits = 0;
      for (const auto& test : v.acs_tests) {
        const Function& tested = t.functions[test.function];
        std::string state = test.acs.state == CapState::kAbsent    ? "no ACS capability"
                            : test.acs.state == CapState::kUnknown ? acs_unknown_text(t, tested)
                                                                   : fmt::format("ctrl {:#06x} (set {}; implements {})",
                                                                                 test.acs.ctrl, acs_bit_names(test.acs.ctrl),
                                                                                 acs_bit_names(test.acs.cap));
        if (test.acs.state == CapState::kPresent) set_bits |= test.acs.ctrl;
        out += fmt::format("    {}  {:<8}  {}{}\n", tested.bdf.str(), test.provider_chain ? "provider" : "client", state,
                           test.redirect.value_or(false) ? "  -> redirect" : "");
      }
      // What the bits set on the tested devices do, each once (acs_meaning.h); only where the
      // kernel weighs them.
      if (auto lines = acs_set_bit_lines(v.acs_considered ? set_bits : 0); !lines.empty()) {
        out += "  What those ACS bits do to a peer request:\n";
        for (const auto& line : lines) out += "    " + line + "\n";
      }
    }
    if (v.cpu_rule_consulted)
      out += fmt::format("  CPU rule (cpu_supports_p2pdma): {} ({} family {})\n",
                         v.cpu_supports_p2pdma ? (*v.cpu_supports_p2pdma ? "yes" : "no") : "unknown",
                         t.platform.cpu_vendor.empty() ? "unknown vendor" : t.platform.cpu_vendor,
                         t.platform.cpu_family ? fmt::format("{:#x}", *t.platform.cpu_family) : "unknown");
    for (const auto& hb : v.host_bridges) {
      std::string result = !hb.passed ? "unknown" : *hb.passed ? "passes" : "fails";
      std::string root = hb.root_device ? fmt::format("root device {} [{:04x}:{:04x}]", t.functions[*hb.root_device].bdf.str(),
                                                      t.functions[*hb.root_device].vendor, t.functions[*hb.root_device].device)
                                        : "no root device";
      std::string entry = hb.entry ? " entry " + rules.whitelist[*hb.entry].id() +
                                         (hb.refused_same_host_bridge ? " (REQ_SAME_HOST_BRIDGE, different host bridges)" : "")
                                   : "";
      out += fmt::format("  Host bridge {}: {}{}: {}\n", hb.host_bridge, root, entry, result);
    }
    if (!v.unknowns.empty()) out += "  Unknown: " + fmt::format("{}", fmt::join(v.unknowns, "; ")) + "\n";
    out += fmt::format("  Kernel log (verbose){}:\n", v.kernel_log_complete ? "" : " (incomplete: depends on what could not be read)");
    if (v.kernel_log.empty()) out += "    (nothing)\n";
    for (const auto& line : v.kernel_log) out += "    " + line + "\n";
    const Remedy& rm = v.remedy;
    // The whitelist line says why, not what to do: it stands apart from the remedies, each of
    // which is an action; "or:" joins the second and later to the first.
    if (!rm.whitelist.empty()) out += "  Whitelist: " + rm.whitelist + "\n";
    if (!rm.disable_acs_redir.empty() || !rm.alternatives.empty()) {
      out += "  Remedy:\n";
      bool first = true;
      if (!rm.disable_acs_redir.empty()) {
        out += "    add the kernel parameter pci=disable_acs_redir=" + rm.disable_acs_redir + " (no redirect left: BUS_ADDR)\n";
        if (!rm.acs_override.empty()) out += "    (" + rm.acs_override + ")\n";
        if (!rm.iommu_groups_merged.empty())
          out += fmt::format("      (likely merges IOMMU groups {})\n", fmt::join(rm.iommu_groups_merged, ", "));
        first = false;
      }
      for (const auto& a : rm.alternatives) {
        out += (first ? "    " : "    or: ") + a + "\n";
        first = false;
      }
    }
  }
  if (many.clients.size() > 1)
    out += fmt::format("\npci_p2pdma_distance_many() = {}\n", distance_text(many.result));
  return out;
}

VerdictReasons::VerdictReasons(const P2pdmaIndex& index)
    : index_(index), names_(index.topology().functions.size()), labels_(names_.size()) {
  const Topology& t = index.topology();
  if (auto override = cmdline_param(t.platform.cmdline, "pcie_acs_override"))
    acs_override_ = " (" + acs_override_text(*override) + ")";
  cpu_allows_ = index.rules().cpu_supports_p2pdma && cpu_supports_p2pdma(t.platform, index.rules()).value_or(false);
  cpu_allows_text_ = fmt::format(", so the traffic goes through the host bridge, which the kernel allows because the "
                                 "boot CPU is AMD family {:#x} (>= 0x17)", t.platform.cpu_family.value_or(0));
}

const std::string& VerdictReasons::name(size_t dev) {
  if (names_[dev].empty()) names_[dev] = index_.topology().functions[dev].bdf.str();
  return names_[dev];
}

const std::string& VerdictReasons::device_label(size_t dev) {
  std::string& label = labels_[dev];
  if (label.empty()) label = p2paudit::device_label(index_.topology(), dev);
  return label;
}

const std::string& VerdictReasons::reason(size_t provider, size_t client, const PairOutcome& o) {
  // Every pair's sentence ends with what pcie_acs_override= does, as pci_p2pdma_distance()'s does;
  // a sentence taken from the full verdict has it already.
  if (!reason_without_override(provider, client, o) && !acs_override_.empty()) text_ += acs_override_;
  return text_;
}

bool VerdictReasons::reason_without_override(size_t provider, size_t client, const PairOutcome& o) {
  const Topology& t = index_.topology();
  const KernelRules& rules = index_.rules();
  // Appended into text_, whose capacity stays from pair to pair: a report renders hundreds of
  // thousands of these.
  text_.clear();
  auto text = std::back_inserter(text_);
  if (rules.config_p2pdma == Known::kNo) {
    fmt::format_to(text, "CONFIG_PCI_P2PDMA is not set in this kernel's config ({})",
                   rules.config_source.empty() ? "unknown source" : rules.config_source);
    return false;
  }
  if (!rules.p2pdma) {
    fmt::format_to(text, "kernel {} has no P2PDMA (added in 4.20)", rules.release.version());
    return false;
  }
  if (o.map_type == MapType::kUnknown || (o.map_type == MapType::kBusAddr && !o.common_ancestor && provider != client)) {
    text_ = index_.verdict(provider, client).reason;
    return true;
  }
  if (o.map_type == MapType::kBusAddr) {
    if (provider == client) {
      text_ = "provider and client are the same function and it has no ACS redirect set";
    } else {
      text_ = "provider and client share the upstream device ";
      text_ += name(*o.common_ancestor);
      text_ += " and no device on the path has ACS redirect (RR/CR/EC) set";
    }
    return false;
  }

  // The ACS tests of the walk that decide (with a common upstream device only), in the kernel's
  // order: the provider's chain up to the common device, then the client's below it.
  const size_t n = t.functions.size();
  redirecting_.clear();
  unreadable_.clear();
  auto test = [&](size_t dev) {
    auto redirect = pci_bridge_has_acs_redir(t.functions[dev]);
    if (!redirect) unreadable_.push_back(dev);
    else if (*redirect) redirecting_.push_back(dev);
  };
  const std::optional<size_t> common = o.common_ancestor;
  if (common) {
    std::optional<size_t> a = provider;
    for (size_t guard = 0; a && guard <= n; ++guard) {
      test(*a);
      if (a == common) break;
      a = pci_upstream_bridge(t, *a);
    }
    std::optional<size_t> b = client;
    for (size_t hops = 0; b && b != common && hops <= n; b = pci_upstream_bridge(t, *b), ++hops) test(*b);
  }
  auto append_names = [&](const std::vector<size_t>& devs) {
    for (size_t i = 0; i < devs.size(); ++i) {
      if (i) text_ += ", ";
      text_ += name(devs[i]);
    }
  };
  if (!common) {
    text_ += "provider and client share no upstream bridge";
  } else if (!redirecting_.empty() || !unreadable_.empty()) {
    text_ += "below their common upstream device ";
    text_ += name(*common);
    text_ += ", ACS redirect (RR/CR/EC) is set on ";
    if (redirecting_.empty()) text_ += "no device read";
    else append_names(redirecting_);
    if (!unreadable_.empty()) {
      text_ += " and not readable on ";
      append_names(unreadable_);
    }
  }
  if (!rules.map_types) {
    text_ += o.legacy_return == -2   ? ", and kernels before 5.4 refuse such a path (-2)"
             : o.legacy_return == -1 ? ", and kernels before 5.4 refuse such a path (-1)"
                                     : ", and both host bridges are AMD ZEN root complexes (1022:1450, no IOMMU): "
                                       "allowed with distance 0x1000 + hops";
  } else if (o.cpu_rule_consulted && cpu_allows_) {
    text_ += cpu_allows_text_;
  } else {
    const Function& p = t.functions[provider];
    const Function& c = t.functions[client];
    const bool same = p.host_bridge == c.host_bridge;  // what host_bridge_whitelist() passes
    text_ += o.map_type == MapType::kThruHostBridge
                 ? ", so the traffic goes through the host bridge, which the kernel allows: "
                 : ", so the traffic would go through the host bridge, which the kernel refuses: ";
    for (size_t k = 0; k < o.whitelist_check_count; ++k) {
      const WhitelistCheck& check = o.whitelist_checks[k];
      // The first check is the provider's host bridge, the second the client's.
      const std::string& host = k == 0 ? p.host_bridge : c.host_bridge;
      if (k) text_ += "; ";
      text_ += "host bridge ";
      text_ += host;
      if (!check.root_device) {
        std::optional<size_t> first;
        if (check.host_bridge && !t.host_bridges[*check.host_bridge].root_bus_devices.empty())
          first = t.host_bridges[*check.host_bridge].root_bus_devices.front();
        text_ += " has no device the whitelist is keyed by";
        if (first)
          fmt::format_to(text, " (its root bus's first device {} is not at devfn 00.0{})", name(*first),
                         rules.root_device_rule == RootDeviceRule::kFirstAtDevfn0OrRootPort ? " and not a Root Port" : "");
        continue;
      }
      text_ += "'s root device ";
      text_ += device_label(*check.root_device);
      if (check.entry && rules.whitelist[*check.entry].same_host_bridge && !same) {
        fmt::format_to(text, " is whitelisted only within one host bridge (REQ_SAME_HOST_BRIDGE), and provider ({}) "
                       "and client ({}) are under different host bridges", p.host_bridge, c.host_bridge);
      } else if (check.entry) {
        const auto& e = rules.whitelist[*check.entry];
        fmt::format_to(text, " is whitelisted ({}{})", e.id(), e.comment.empty() ? "" : ", \"" + e.comment + "\"");
      } else {
        text_ += " is not in this kernel's whitelist";
      }
    }
    if (o.map_type != MapType::kThruHostBridge && o.cpu_rule_consulted) text_ += " (and the boot CPU is not AMD Zen)";
  }
  return false;
}

}  // namespace p2paudit
