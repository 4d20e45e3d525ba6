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

nlohmann::json symbol_missing(const std::string& symbol) {
  return {{"failed", {{"phase", "dlsym"}, {"code", -1}, {"name", "symbol_missing"}, {"description", symbol}}}};
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

int run_pair_children(const PairChildren& loop, int timeout_seconds) {
  int deaths = 0;
  size_t first = 0;
  const auto skip_from = [&](size_t item) {
    for (size_t n = loop.count().value_or(0); loop.skip && item < n; ++item) loop.skip(item);
  };
  for (std::optional<size_t> n = loop.count(); !n || first < *n; n = loop.count()) {
    const size_t end = n ? std::min(*n, loop.per_child == SIZE_MAX ? *n : first + loop.per_child) : SIZE_MAX;
    if (loop.progress && n) loop.progress(first, *n);
    const IsolatedResult r = run_isolated(loop.phase, timeout_seconds, [&] { return loop.ask(first, end); });
    const std::optional<size_t> finished = loop.take(r, first);
    if (!finished) return deaths;
    first += *finished;
    if (first >= loop.count().value_or(0)) return deaths;
    if (r.ok()) {
      if (first >= end) continue;  // its range done: the next child asks the next ones
      // It answered some and asked for a fresh child for the rest (a GPU context it lost).
      if (*finished > 0 && r.value.is_object() && r.value.value("restart", false)) continue;
      skip_from(first);            // it returned without answering the rest
      return deaths;
    }
    // Died in item `first`: it answers the death, and a new child asks the ones after it.
    if (loop.charge(first++, r) && ++deaths >= loop.max_deaths) {
      skip_from(first);
      return deaths;
    }
  }
  return deaths;
}

void add_note(RuntimeReport& report, const std::string& sentence) {
  auto& note = report.extra["note"];
  note = note.is_string() ? note.get<std::string>() + "; " + sentence : sentence;
}

void report_first_death(RuntimeReport& report, const std::string& status, const std::string& phase,
                        const std::string& error) {
  if (report.status != "ok") return;
  report.status = status;
  report.phase = phase;
  report.error = error;
}

namespace {

void report_death(RuntimeReport& report, const IsolatedResult& r) { report_first_death(report, r.status, r.phase, r.error); }

PairAnswer ordered_pair_answer(size_t k, int n) {
  auto [provider, client] = ordered_pair(k, n);
  PairAnswer p;
  p.provider = provider;
  p.client = client;
  return p;
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
  const auto device_count = [&] { return static_cast<int>(report.devices.size()); };
  PairChildren loop;
  loop.phase = "dlopen";
  loop.count = [&]() -> std::optional<size_t> {
    if (!have_devices) return std::nullopt;
    const int n = device_count();
    return n > 1 ? static_cast<size_t>(n) * static_cast<size_t>(n - 1) : 0;
  };
  loop.ask = [&](size_t first, size_t) { return session(first); };
  loop.take = [&](const IsolatedResult& r, size_t first) -> std::optional<size_t> {
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
      return std::nullopt;
    }
    // Crashed, hung or failed before the devices were known, or after the last pair: the whole runtime.
    if (!devices_this_run || loop.count().value_or(0) == 0 || first + pairs_this_run >= *loop.count()) {
      report_death(report, r);
      return std::nullopt;
    }
    return pairs_this_run;
  };
  loop.charge = [&](size_t k, const IsolatedResult& r) {
    PairAnswer bad = ordered_pair_answer(k, device_count());
    for (const auto& key : answer_keys) bad.answers[key] = r.status;
    bad.answers["phase"] = r.phase;
    bad.answers["error"] = r.error;
    report.pairs.push_back(std::move(bad));
    report_death(report, r);
    return true;
  };
  loop.skip = [&](size_t k) {
    PairAnswer skipped = ordered_pair_answer(k, device_count());
    for (const auto& key : answer_keys) skipped.answers[key] = "not_asked";
    report.pairs.push_back(std::move(skipped));
  };
  const int deaths = run_pair_children(loop, options.timeout_seconds);
  if (deaths >= loop.max_deaths)
    report.extra["note"] = fmt::format("{} pairs crashed or hung: the remaining pairs were not asked", deaths);
  return report;
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
  PairChildren loop;
  loop.phase = key;
  loop.count = [&] { return std::optional<size_t>(todo.size()); };
  loop.progress = [&](size_t done, size_t n) {
    options.report_progress(fmt::format("{} {}: {} of {} pairs done", report.runtime, key, done, n));
  };
  loop.ask = [&](size_t first, size_t end) {
    std::vector<std::pair<int, int>> pairs;
    for (size_t i = first; i < end; ++i) pairs.emplace_back(todo[i]->provider, todo[i]->client);
    return session(pairs);
  };
  loop.take = [&](const IsolatedResult& r, size_t first) -> std::optional<size_t> {
    size_t done = 0;
    for (const auto& piece : r.partial) {
      if (!piece.contains("item") || !piece["item"].is_number_unsigned() || !piece.contains("answer")) continue;
      size_t item = piece["item"].get<size_t>();
      if (item >= todo.size() - first) continue;
      todo[first + item]->answers[key] = ordered(piece["answer"]);
      done = std::max(done, item + 1);
    }
    return done;
  };
  loop.charge = [&](size_t item, const IsolatedResult& r) {
    auto& bad = todo[item]->answers;
    bad[key] = r.status;
    bad["phase"] = r.phase;
    bad["error"] = r.error;
    report_death(report, r);
    return true;
  };
  loop.skip = [&](size_t item) { todo[item]->answers[key] = "not_asked"; };
  const int deaths = run_pair_children(loop, options.timeout_seconds);
  if (deaths >= loop.max_deaths)
    add_note(report, fmt::format("{} pairs crashed or hung in {}: the remaining pairs were not asked", deaths, key));
}

}  // namespace p2paudit::probe::detail
