// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/fleet/prometheus.h"

#include <map>
#include <ostream>
#include <sstream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "p2paudit/input_file.h"

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
  auto pair_labels = [&](const ordered_json& pair) {
    std::string provider = pair["provider"], client = pair["client"];
    return Labels{{"provider", provider}, {"client", client}, {"provider_name", names[provider]},
                  {"client_name", names[client]}};
  };

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

  // Pairs are written as they are decided; the per-decision counts follow them.
  ReportPairs pairs(machine);
  prom.gauge("p2paudit_pair_decision",
             "The policy's decision for an ordered device pair (label decision: peer, host_staged, deny), always 1.");
  std::map<std::string, int> per_decision{{"peer", 0}, {"host_staged", 0}, {"deny", 0}};
  pairs.each_decision([&](const ordered_json& d, const std::string&) {
    Labels labels = pair_labels(d);
    std::string decision = d["decision"];
    ++per_decision[decision];
    labels.insert(labels.end(), {{"decision", decision}, {"rule", text_of(d["rule"])},
                                 {"authority", text_of(d["authority"])}});
    prom.sample("p2paudit_pair_decision", labels, 1);
  });
  prom.gauge("p2paudit_pairs", "Ordered device pairs per policy decision.");
  for (const auto& [decision, count] : per_decision) prom.sample("p2paudit_pairs", {{"decision", decision}}, count);

  prom.gauge("p2paudit_pair_kernel_verdict",
             "The kernel's pci_p2pdma_distance() verdict for an ordered device pair (label verdict: allowed, refused, "
             "unknown), always 1.");
  pairs.each_verdict([&](const ordered_json& v) {
    Labels labels = pair_labels(v);
    labels.insert(labels.end(), {{"verdict", text_of(v["verdict"])}, {"map_type", text_of(v["map_type"])}});
    prom.sample("p2paudit_pair_kernel_verdict", labels, 1);
  });

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
