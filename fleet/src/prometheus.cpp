// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/fleet/prometheus.h"

#include <map>
#include <ostream>
#include <sstream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "p2paudit/input_file.h"
#include "p2paudit/policy/evaluate.h"

namespace p2paudit::fleet {

namespace {

using ordered_json = nlohmann::ordered_json;
using Labels = std::vector<std::pair<std::string_view, std::string>>;

// A JSON string, or "" for null: absent label values are empty, as PromQL treats missing labels.
std::string text_of(const ordered_json& value) { return value.is_string() ? value.get<std::string>() : ""; }

// Written to the stream every 64 KiB: memory does not grow with the number of samples.
class Exposition {
 public:
  explicit Exposition(std::ostream& out) : stream_(out) {}
  // Every metric is declared once, before its samples, as the text format requires.
  void gauge(std::string_view name, std::string_view help) {
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
  }
  void sample(std::string_view name, const Labels& labels, std::int64_t value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      for (size_t i = 0; i < labels.size(); ++i)
        fmt::format_to(std::back_inserter(out_), "{}{}=\"{}\"", i ? "," : "", labels[i].first,
                       prometheus_label_value(labels[i].second));
      out_ += '}';
    }
    fmt::format_to(std::back_inserter(out_), " {}\n", value);
    if (out_.size() >= kFlushBytes) flush();
  }
  // A sample already in the text format, its line end included.
  void sample_text(std::string_view line) {
    out_ += line;
    if (out_.size() >= kFlushBytes) flush();
  }
  void flush() {
    stream_.write(out_.data(), static_cast<std::streamsize>(out_.size()));
    out_.clear();
  }

 private:
  static constexpr size_t kFlushBytes = 64 * 1024;
  std::ostream& stream_;
  std::string out_;
};

// "RR,CR,EC": the redirect bits pci_bridge_has_acs_redir() tests, those that are set.
std::string redirect_bits(uint16_t ctrl) {
  std::string bits;
  for (auto [bit, name] : {std::pair{kAcsRr, "RR"}, std::pair{kAcsCr, "CR"}, std::pair{kAcsEc, "EC"}})
    if (ctrl & bit) {
      if (!bits.empty()) bits += ',';
      bits += name;
    }
  return bits;
}

}  // namespace

std::string prometheus_label_value(std::string_view value) {
  std::string out;
  // A newline is kept for the exposition format's own \n; other control bytes become \xNN.
  size_t start = 0;
  for (size_t i = 0; i <= value.size(); ++i) {
    if (i < value.size() && value[i] != '\n') continue;
    for (char c : escape_text(value.substr(start, i - start))) {
      if (c == '\\' || c == '"') out += '\\';
      out += c;
    }
    if (i < value.size()) out += "\\n";
    start = i + 1;
  }
  return out;
}

std::string prometheus_text(const MachineAnalysis& machine, const PrometheusOptions& options) {
  std::ostringstream out;
  write_prometheus(out, machine, options);
  return std::move(out).str();
}

void write_prometheus(std::ostream& out, const MachineAnalysis& machine, const PrometheusOptions& options) {
  const ordered_json head = report_head(machine, {options.tool_version, true});
  std::map<std::string, std::string> names;  // BDF -> gpu0...: one per device, not per pair
  for (const auto& d : head["devices"]) names[d["bdf"].get<std::string>()] = d["name"].get<std::string>();

  Exposition prom(out);
  const auto& kernel = head["kernel_rules"];
  prom.gauge("p2paudit_info", "The p2paudit that wrote this, the kernel release whose rules decided, always 1.");
  prom.sample("p2paudit_info",
              {{"version", options.tool_version}, {"kernel_release", text_of(kernel["release"])},
               {"rules_release", text_of(kernel["rules_release"])},
               {"config_pci_p2pdma", text_of(kernel["config_pci_p2pdma"])},
               {"runtime_probe", machine.probe.source}},
              1);
  prom.gauge("p2paudit_last_run_timestamp_seconds", "When the audit ran, Unix time.");
  prom.sample("p2paudit_last_run_timestamp_seconds", {}, options.timestamp_seconds);
  prom.gauge("p2paudit_audit_success", "1: the audit ran to the end (a wrapper writes 0 when it failed).");
  prom.sample("p2paudit_audit_success", {}, 1);

  // Pairs are written as they are decided; the per-decision counts follow them. A pair's sample is
  // its devices' labels and its decision's (or verdict's), each escaped once, not once per pair.
  ReportPairs pairs(machine);
  const Topology& topo = machine.topo;
  std::vector<std::string> escaped_bdf(topo.functions.size()), escaped_name(topo.functions.size());
  for (const auto& d : pairs.devices()) {
    const std::string bdf = topo.functions[d.index].bdf.str();
    escaped_bdf[d.index] = prometheus_label_value(bdf);
    escaped_name[d.index] = prometheus_label_value(names[bdf]);
  }
  std::string line;
  auto pair_line = [&](std::string_view metric, size_t p, size_t c, std::string_view tail) {
    line.assign(metric);
    line += "{provider=\"";
    line += escaped_bdf[p];
    line += "\",client=\"";
    line += escaped_bdf[c];
    line += "\",provider_name=\"";
    line += escaped_name[p];
    line += "\",client_name=\"";
    line += escaped_name[c];
    line += '"';
    line += tail;
    prom.sample_text(line);
  };
  const bool listed = pairs_listed(pairs.devices().size(), options.most_listed_pairs);
  prom.gauge("p2paudit_pairs_listed",
             fmt::format("1: each ordered pair has its own p2paudit_pair_decision and p2paudit_pair_kernel_verdict "
                         "series; 0: the machine has more than {} pairs and only their counts by kind are written.",
                         options.most_listed_pairs));
  prom.sample("p2paudit_pairs_listed", {}, listed ? 1 : 0);
  if (listed)
    prom.gauge("p2paudit_pair_decision",
               "The policy's decision for an ordered device pair (label decision: peer, host_staged, deny; label "
               "certain: false where unknown facts leave it open and the safe side is given), always 1.");
  std::map<std::string, std::int64_t> per_decision{{"peer", 0}, {"host_staged", 0}, {"deny", 0}};
  std::int64_t uncertain = 0;
  std::vector<std::string> group_tails;  // per decision group: ,decision="..",rule="..",authority=".."} 1
  std::vector<std::int64_t> group_pairs;  // per decision group: its pairs
  pairs.each_group([&](size_t p, size_t c, size_t group, const policy::DecisionGroup& g, const std::string&) {
    if (group >= group_tails.size()) group_tails.resize(group + 1), group_pairs.resize(group + 1);
    std::string& tail = group_tails[group];
    if (tail.empty())
      tail = fmt::format(",decision=\"{}\",certain=\"{}\",rule=\"{}\",authority=\"{}\"}} 1\n",
                         prometheus_label_value(policy::to_string(g.action)), g.certain() ? "true" : "false",
                         prometheus_label_value(g.rule),
                         prometheus_label_value(g.authority ? policy::to_string(*g.authority) : ""));
    ++per_decision[policy::to_string(g.action)];
    ++group_pairs[group];
    uncertain += g.certain() ? 0 : 1;
    if (listed) pair_line("p2paudit_pair_decision", p, c, tail);
  });
  prom.gauge("p2paudit_pairs", "Ordered device pairs per policy decision.");
  for (const auto& [decision, count] : per_decision) prom.sample("p2paudit_pairs", {{"decision", decision}}, count);
  prom.gauge("p2paudit_uncertain_pairs",
             "Ordered device pairs whose decision unknown facts leave open (acted on as the safe side).");
  prom.sample("p2paudit_uncertain_pairs", {}, uncertain);
  // The counts by kind, written on every machine: one series per decision group, not per pair.
  prom.gauge("p2paudit_pair_decisions",
             "Ordered device pairs per kind of decision (labels decision, certain, rule, authority as "
             "p2paudit_pair_decision's).");
  // Decision groups differ in facts the labels do not show: groups with the same labels are one series.
  std::map<std::string_view, std::int64_t> per_labels;
  for (size_t g = 0; g < group_tails.size(); ++g)
    if (!group_tails[g].empty()) per_labels[group_tails[g]] += group_pairs[g];
  for (const auto& [tail, count] : per_labels)  // ",labels} 1\n": the count replaces the 1
    prom.sample_text(fmt::format("p2paudit_pair_decisions{{{}}} {}\n", tail.substr(1, tail.size() - 5), count));

  if (listed)
    prom.gauge("p2paudit_pair_kernel_verdict",
               "The kernel's pci_p2pdma_distance() verdict for an ordered device pair (label verdict: allowed, "
               "refused, unknown), always 1.");
  std::map<std::pair<std::string_view, MapType>, std::pair<std::string, std::int64_t>> verdict_tails;
  pairs.each_outcome([&](size_t p, size_t c, const PairOutcome& o) {
    auto [it, added] = verdict_tails.try_emplace({verdict_word(o), o.map_type});
    if (added)
      it->second.first = fmt::format(",verdict=\"{}\",map_type=\"{}\"}} 1\n", prometheus_label_value(verdict_word(o)),
                                     prometheus_label_value(to_string(o.map_type)));
    ++it->second.second;
    if (listed) pair_line("p2paudit_pair_kernel_verdict", p, c, it->second.first);
  });
  prom.gauge("p2paudit_pair_kernel_verdicts",
             "Ordered device pairs per kernel verdict and map type (labels as p2paudit_pair_kernel_verdict's).");
  for (const auto& [key, tail] : verdict_tails)
    prom.sample("p2paudit_pair_kernel_verdicts", {{"verdict", std::string(key.first)}, {"map_type", to_string(key.second)}},
                tail.second);

  prom.gauge("p2paudit_acs_redirect",
             "A function whose ACS Control enables redirect (label bits: RR, CR, EC), which makes the kernel refuse "
             "P2PDMA through it; always 1.");
  for (const auto& f : machine.topo.functions)
    if (f.acs.state == CapState::kPresent && (f.acs.ctrl & kAcsRedirectBits))
      prom.sample("p2paudit_acs_redirect",
                  {{"bdf", f.bdf.str()}, {"device", fmt::format("{:04x}:{:04x}", f.vendor, f.device)},
                   {"bits", redirect_bits(f.acs.ctrl)}},
                  1);

  prom.gauge("p2paudit_whitelist_candidate",
             "A host bridge whose kernel whitelist entry would unlock refused pairs (label status as `whitelist` "
             "says); the value is how many pairs.");
  WhitelistOptions counted;
  counted.count_pairs_only = true;  // their number is the value: the pairs themselves are not kept
  for (auto& cand : whitelist_candidates(machine.topo, machine.kernel, machine.evidence, counted)) {
    const ordered_json c = candidate_head(machine.topo, cand);
    prom.sample("p2paudit_whitelist_candidate",
                {{"id", text_of(c["id"])}, {"name", text_of(c["name"])}, {"status", text_of(c["status"])},
                 {"fixed_in", text_of(c["fixed_in"])}},
                static_cast<std::int64_t>(cand.pair_count));
  }
  prom.flush();
}

}  // namespace p2paudit::fleet
