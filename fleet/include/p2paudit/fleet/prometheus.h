// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit --format prom`: the machine's report (report.h) as gauges for node_exporter's
// textfile collector (docs/prometheus.md), so a fleet's dashboards and alerts see refused pairs,
// ACS redirect and whitelist candidates without parsing JSON.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "p2paudit/fleet/report.h"

namespace p2paudit::fleet {

struct PrometheusOptions {
  std::string tool_version;
  std::int64_t timestamp_seconds = 0;  // when the audit ran (Unix time): p2paudit_last_run_timestamp_seconds
  // One series per ordered pair (p2paudit_pair_decision, p2paudit_pair_kernel_verdict) only up to
  // this many pairs; past it, only the counts by kind (p2paudit_pair_decisions, ..._kernel_verdicts):
  // a machine's series stay bounded as Prometheus' cardinality needs (report.h, kMostListedPairs).
  std::uint64_t most_listed_pairs = kMostListedPairs;
};

// The whole text-format document: # HELP and # TYPE before each metric's samples, one sample per
// line, newline-terminated. write_prometheus() writes it as the pairs are decided (nothing kept
// per pair); prometheus_text() returns it in one string (small machines, tests).
void write_prometheus(std::ostream& out, const MachineAnalysis& machine, const PrometheusOptions& options);
std::string prometheus_text(const MachineAnalysis& machine, const PrometheusOptions& options);

// A label value as the exposition format quotes it (without the quotes): backslash, double quote
// and newline escaped; bytes that are not UTF-8 or are control characters shown as \xNN first.
std::string prometheus_label_value(std::string_view value);

}  // namespace p2paudit::fleet
