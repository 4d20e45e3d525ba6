// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/what_if.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "p2paudit/p2pdma_report.h"

namespace p2paudit {

namespace {

using nlohmann::ordered_json;

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : std::string(sep)) + p;
  return out;
}

// The matrix's short name of every function (gpu0, nvme1...), else its BDF.
std::vector<std::string> labels(const Topology& t) {
  std::vector<std::string> out;
  for (const auto& f : t.functions) out.push_back(f.bdf.str());
  for (const auto& d : matrix_devices(t, true))
    if (!d.short_name.empty()) out[d.index] = d.short_name;
  return out;
}

std::string state_text(const PairState& s, bool with_distance) {
  std::string out = to_string(s.map_type);
  if (with_distance)
    out += fmt::format(" (distance {})", s.p2pdma_distance ? std::to_string(*s.p2pdma_distance) : "unknown");
  if (!s.decision.empty()) out += fmt::format(", {}{}", s.decision, s.rule.empty() ? "" : " [" + s.rule + "]");
  return out;
}

std::string line(const std::vector<std::string>& names, const PairChange& c) {
  // The distance is shown only where it, and not the map type, is what changed.
  bool distance_only = c.before.map_type == c.after.map_type && c.before.p2pdma_distance != c.after.p2pdma_distance;
  return fmt::format("{} -> {}: {} -> {} ({})", names[c.provider], names[c.client], state_text(c.before, distance_only),
                     state_text(c.after, distance_only), c.why);
}

ordered_json state_json(const PairState& s) {
  return {{"map_type", to_string(s.map_type)},
          {"p2pdma_distance", s.p2pdma_distance ? ordered_json(*s.p2pdma_distance) : ordered_json(nullptr)},
          {"decision", s.decision.empty() ? ordered_json(nullptr) : ordered_json(s.decision)},
          {"rule", s.rule.empty() ? ordered_json(nullptr) : ordered_json(s.rule)}};
}

ordered_json change_json(const std::vector<std::string>& names, const Topology& t, const PairChange& c) {
  auto name = [&](size_t i) { return names[i] == t.functions[i].bdf.str() ? "" : names[i]; };
  return {{"provider", t.functions[c.provider].bdf.str()},
          {"client", t.functions[c.client].bdf.str()},
          {"provider_name", name(c.provider)},
          {"client_name", name(c.client)},
          {"before", state_json(c.before)},
          {"after", state_json(c.after)},
          {"why", c.why}};
}

std::string root_device_id(const Topology& t, const HostBridgeCheck& hb) {
  if (!hb.root_device) return "?";
  const Function& r = t.functions[*hb.root_device];
  return fmt::format("{:04x}:{:04x}", r.vendor, r.device);
}

// The devices on the pair's path whose redirect bits were set as read and are clear now.
std::vector<std::string> acs_cleared_on_path(const Topology& before_topo, const PairVerdict& before,
                                             const Topology& after_topo, const PairVerdict& after) {
  std::vector<std::string> cleared;
  if (!after.acs_considered) return cleared;  // no common upstream device: the kernel ignores ACS
  for (const auto& now : after.acs_tests) {
    const Bdf& bdf = after_topo.functions[now.function].bdf;
    for (const auto& was : before.acs_tests)
      if (before_topo.functions[was.function].bdf == bdf && was.redirect == true && now.redirect == false)
        cleared.push_back(bdf.str());
  }
  return cleared;
}

// Host bridges whose whitelist check passes now and did not (or the reverse).
void whitelist_causes(const Topology& after_topo, const KernelRules& after_rules, const PairVerdict& before,
                      const PairVerdict& after, std::vector<std::string>& causes) {
  for (const auto& hb : after.host_bridges) {
    const HostBridgeCheck* was = nullptr;
    for (const auto& b : before.host_bridges)
      if (b.host_bridge == hb.host_bridge) was = &b;
    bool passes = hb.passed.value_or(false), passed = was && was->passed.value_or(false);
    if (passes && !passed && hb.entry) {
      const WhitelistEntry& e = after_rules.whitelist[*hb.entry];
      causes.push_back(fmt::format("host bridge {}'s root device {} matches whitelist entry {} ({})", hb.host_bridge,
                                   root_device_id(after_topo, hb), e.id(),
                                   *hb.entry >= after_rules.table_entries
                                       ? e.origin
                                       : "in kernel " + after_rules.release.version() + "'s table"));
    } else if (passed && !passes) {
      causes.push_back(fmt::format("host bridge {}'s root device {} does not pass kernel {}'s whitelist{}",
                                   hb.host_bridge, root_device_id(after_topo, hb), after_rules.release.version(),
                                   hb.refused_same_host_bridge ? " across host bridges (REQ_SAME_HOST_BRIDGE)" : ""));
    }
  }
}

}  // namespace

PairState kernel_state(const PairVerdict& v) { return {v.map_type, v.p2pdma_distance, "", ""}; }

std::vector<std::string> what_if_causes(const Topology& before_topo, const KernelRules& before_rules,
                                        const PairVerdict& before, const Topology& after_topo,
                                        const KernelRules& after_rules, const PairVerdict& after) {
  std::vector<std::string> causes;
  const std::string release = after_rules.release.version();
  if (release != before_rules.release.version())
    causes.push_back(fmt::format("kernel {}'s rules instead of {}'s", release, before_rules.release.version()));
  if (before_rules.config_p2pdma != after_rules.config_p2pdma)
    causes.push_back(fmt::format("CONFIG_PCI_P2PDMA {} instead of {}", to_string(after_rules.config_p2pdma),
                                 to_string(before_rules.config_p2pdma)));
  if (before_rules.p2pdma && !after_rules.p2pdma)
    causes.push_back(fmt::format("kernel {} predates P2PDMA (4.20)", release));
  if (before_rules.cpu_supports_p2pdma != after_rules.cpu_supports_p2pdma &&
      (before.cpu_supports_p2pdma.value_or(false) || after.cpu_supports_p2pdma.value_or(false)))
    causes.push_back(fmt::format("kernel {} {} the AMD Zen CPU rule (5.9+)", release,
                                 after_rules.cpu_supports_p2pdma ? "has" : "predates"));
  if (auto cleared = acs_cleared_on_path(before_topo, before, after_topo, after); !cleared.empty())
    causes.push_back(fmt::format("ACS redirect off on {} (--assume-acs-off)", join(cleared, ", ")));
  whitelist_causes(after_topo, after_rules, before, after, causes);
  return causes;
}

std::string what_if_why(const std::vector<std::string>& causes, const std::string& reason) {
  return causes.empty() ? reason : join(causes, "; ") + ": " + reason;
}

std::vector<std::optional<size_t>> functions_as_read(const Topology& before_topo, const Topology& after_topo,
                                                     const std::vector<NamedFunction>& devices) {
  std::vector<std::optional<size_t>> as_read;
  as_read.reserve(devices.size());
  for (const auto& d : devices) as_read.push_back(before_topo.index_of(after_topo.functions[d.index].bdf));
  return as_read;
}

std::vector<PairChange> kernel_verdict_changes(const P2pdmaIndex& before, const P2pdmaIndex& after,
                                               const std::vector<NamedFunction>& devices) {
  const Topology& before_topo = before.topology();
  const Topology& after_topo = after.topology();
  auto state = [](const PairOutcome& o) { return PairState{o.map_type, o.p2pdma_distance, "", ""}; };
  return changes_against_as_read(
      before_topo, after_topo, devices,
      [&](size_t before_p, size_t before_c, size_t after_p, size_t after_c) -> std::optional<PairChange> {
        PairChange change{after_p, after_c, state(before.outcome(before_p, before_c)), state(after.outcome(after_p, after_c)), ""};
        if (change.before == change.after) return std::nullopt;
        PairVerdict was = before.verdict(before_p, before_c);
        PairVerdict now = after.verdict(after_p, after_c);
        change.why = what_if_why(what_if_causes(before_topo, before.rules(), was, after_topo, after.rules(), now), now.reason);
        return change;
      });
}

std::vector<std::string> notes_added(const KernelRules& before, const KernelRules& after) {
  std::vector<std::string> out;
  for (const auto& note : after.notes)
    if (std::find(before.notes.begin(), before.notes.end(), note) == before.notes.end()) out.push_back(note);
  return out;
}

std::string change_line(const Topology& topo, const PairChange& change) { return line(labels(topo), change); }

std::string changes_text(const Topology& topo, const std::vector<PairChange>& changes,
                         const std::vector<std::string>& what_if, const std::vector<std::string>& notes) {
  std::string out;
  if (changes.empty())
    out = fmt::format("Nothing changes with {} against the machine as read.\n", join(what_if, " "));
  else
    out = fmt::format("What changes with {} against the machine as read ({} pair{}):\n", join(what_if, " "),
                      changes.size(), changes.size() == 1 ? "" : "s");
  auto names = labels(topo);
  for (const auto& c : changes) out += line(names, c) + "\n";
  for (const auto& note : notes) out += "Note: " + note + "\n";
  return out;
}

ordered_json change_json(const Topology& topo, const PairChange& change) {
  return change_json(labels(topo), topo, change);
}

ordered_json changes_json(const Topology& topo, const std::vector<PairChange>& changes,
                          const std::vector<std::string>& what_if, const std::vector<std::string>& notes) {
  auto names = labels(topo);
  ordered_json list = ordered_json::array();
  for (const auto& c : changes) list.push_back(change_json(names, topo, c));
  return {{"schema_version", kWhatIfSchemaVersion}, {"what_if", what_if}, {"notes", notes}, {"changes", list}};
}

}  // namespace p2paudit
