// SPDX-License-Identifier: GPL-2.0-or-later
#include "session.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "p2paudit/probe/isolate.h"

namespace p2paudit::probe::detail {

std::string library_path(const char* env_var, const char* default_name) {
  const char* v = std::getenv(env_var);
  return v && *v ? std::string(v) : std::string(default_name);
}

nlohmann::json failed_call(const std::string& phase, long long code, const std::string& name, const char* description) {
  nlohmann::json f = {{"phase", phase}, {"code", code}, {"name", name}};
  if (description && *description) f["description"] = description;
  return {{"failed", f}};
}

std::pair<int, int> ordered_pair(size_t k, int n) {
  int row = static_cast<int>(k / static_cast<size_t>(n - 1));
  int col = static_cast<int>(k % static_cast<size_t>(n - 1));
  if (col >= row) ++col;
  return {row, col};
}

namespace {

nlohmann::ordered_json ordered(const nlohmann::json& j) { return nlohmann::ordered_json::parse(j.dump()); }

void take_devices(RuntimeReport& report, const nlohmann::json& piece) {
  if (piece.contains("driver_version") && piece["driver_version"].is_string())
    report.driver_version = piece["driver_version"].get<std::string>();
  if (piece.contains("library") && piece["library"].is_string()) report.library = piece["library"].get<std::string>();
  if (!piece.contains("devices") || !piece["devices"].is_array()) return;
  for (const auto& d : piece["devices"]) {
    RuntimeDevice dev;
    dev.index = d.value("index", 0);
    if (d.contains("bdf") && d["bdf"].is_string()) dev.bdf = parse_runtime_bus_id(d["bdf"].get<std::string>());
    dev.name = d.value("name", "");
    if (d.contains("extra") && d["extra"].is_object()) dev.extra = ordered(d["extra"]);
    report.devices.push_back(std::move(dev));
  }
}

}  // namespace

RuntimeReport run_session(const std::string& runtime, const std::string& library, const ProbeOptions& options,
                          const std::vector<std::string>& answer_keys,
                          const std::function<nlohmann::json(size_t first_pair)>& session) {
  RuntimeReport report;
  report.runtime = runtime;
  report.library = library;
  report.status = "ok";
  bool have_devices = false;
  size_t first = 0;
  int pair_failures = 0;
  for (;;) {
    IsolatedResult r = run_isolated("dlopen", options.timeout_seconds, [&] { return session(first); });
    bool devices_this_run = false;
    size_t pairs_this_run = 0;
    for (const auto& piece : r.partial) {
      if (piece.contains("devices")) {
        devices_this_run = true;
        if (!have_devices) take_devices(report, piece);
        have_devices = true;
      } else if (piece.contains("pair")) {
        ++pairs_this_run;
        PairAnswer p;
        p.provider = piece.value("provider", 0);
        p.client = piece.value("client", 0);
        if (piece.contains("answers") && piece["answers"].is_object()) {
          const auto& a = piece["answers"];
          for (const auto& key : answer_keys)  // the runtime's own order, not the child's sorted keys
            if (a.contains(key)) p.answers[key] = ordered(a[key]);
          for (auto it = a.begin(); it != a.end(); ++it)
            if (!p.answers.contains(it.key())) p.answers[it.key()] = ordered(it.value());
        }
        report.pairs.push_back(std::move(p));
      }
    }
    if (r.ok()) {
      const auto& v = r.value;
      if (v.contains("absent")) {
        report.status = "absent";
        report.error = v["absent"].is_string() ? v["absent"].get<std::string>() : "";
      } else if (v.contains("failed")) {
        const auto& f = v["failed"];
        report.status = "failed";
        report.phase = f.value("phase", "");
        std::string name = f.value("name", "");
        report.error = fmt::format("{} ({})", name, f.value("code", 0LL));
        if (f.contains("description") && f["description"].is_string() && !f["description"].get<std::string>().empty())
          report.error += ": " + f["description"].get<std::string>();
        report.extra["error_code"] = f.value("code", 0LL);
        report.extra["error_name"] = name;
      }
      return report;
    }
    // Crashed, hung or failed. Before the devices were known: the whole runtime.
    int n = static_cast<int>(report.devices.size());
    size_t total = n > 1 ? static_cast<size_t>(n) * static_cast<size_t>(n - 1) : 0;
    if (!devices_this_run || total == 0 || first + pairs_this_run >= total) {
      if (report.status == "ok") {
        report.status = r.status;
        report.phase = r.phase;
        report.error = r.error;
      }
      return report;
    }
    // In a pair: that pair answers "crashed"/"hung", and a new child asks the next ones.
    size_t k = first + pairs_this_run;
    auto [prov, cli] = ordered_pair(k, n);
    PairAnswer bad;
    bad.provider = prov;
    bad.client = cli;
    for (const auto& key : answer_keys) bad.answers[key] = r.status;
    bad.answers["phase"] = r.phase;
    bad.answers["error"] = r.error;
    report.pairs.push_back(std::move(bad));
    if (report.status == "ok") {
      report.status = r.status;
      report.phase = r.phase;
      report.error = r.error;
    }
    first = k + 1;
    if (++pair_failures >= kMaxPairFailures) {
      for (size_t rest = first; rest < total; ++rest) {
        auto [p2, c2] = ordered_pair(rest, n);
        PairAnswer skipped;
        skipped.provider = p2;
        skipped.client = c2;
        for (const auto& key : answer_keys) skipped.answers[key] = "not_asked";
        report.pairs.push_back(std::move(skipped));
      }
      report.extra["note"] = fmt::format("{} pairs crashed or hung: the remaining pairs were not asked", pair_failures);
      return report;
    }
    if (first >= total) return report;
  }
}

namespace {

// False when the pair's questions crashed or hung (it has "phase") or were not asked.
bool answered(const PairAnswer& p) {
  if (p.answers.contains("phase")) return false;
  for (const auto& value : p.answers)
    if (value == "not_asked") return false;
  return true;
}

}  // namespace

void run_pair_task(RuntimeReport& report, const std::string& key, const ProbeOptions& options,
                   const std::function<nlohmann::json(const std::vector<std::pair<int, int>>& pairs)>& session) {
  std::vector<PairAnswer*> todo;
  for (auto& p : report.pairs) {
    if (answered(p)) todo.push_back(&p);
    else p.answers[key] = "not_asked";
  }
  size_t next = 0;  // the first pair of todo not yet done
  int failures = 0;
  while (next < todo.size()) {
    std::vector<std::pair<int, int>> pairs;
    for (size_t i = next; i < todo.size(); ++i) pairs.emplace_back(todo[i]->provider, todo[i]->client);
    options.report_progress(fmt::format("{} {}: {} of {} pairs done", report.runtime, key, next, todo.size()));
    IsolatedResult r = run_isolated(key, options.timeout_seconds, [&] { return session(pairs); });
    size_t done = 0;
    for (const auto& piece : r.partial) {
      if (!piece.contains("item") || !piece["item"].is_number_unsigned() || !piece.contains("answer")) continue;
      size_t item = piece["item"].get<size_t>();
      if (item >= pairs.size()) continue;
      todo[next + item]->answers[key] = ordered(piece["answer"]);
      done = std::max(done, item + 1);
    }
    next += done;
    if (next >= todo.size()) return;
    if (r.ok()) break;  // the child finished without answering the rest: they stay not asked
    // Died in pair `next`: it answers the failure, and a new child does the ones after it.
    auto& bad = todo[next++]->answers;
    bad[key] = r.status;
    bad["phase"] = r.phase;
    bad["error"] = r.error;
    if (report.status == "ok") {
      report.status = r.status;
      report.phase = r.phase;
      report.error = r.error;
    }
    if (++failures >= kMaxPairFailures) {
      std::string note = fmt::format("{} pairs crashed or hung in {}: the remaining pairs were not asked", failures, key);
      if (report.extra.contains("note") && report.extra["note"].is_string())
        note = report.extra["note"].get<std::string>() + "; " + note;
      report.extra["note"] = note;
      break;
    }
  }
  for (size_t i = next; i < todo.size(); ++i) todo[i]->answers[key] = "not_asked";
}

}  // namespace p2paudit::probe::detail
