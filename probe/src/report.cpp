// SPDX-License-Identifier: GPL-2.0-or-later
// RuntimeReport::to_json: the JSON of one runtime's answers (docs/probe.md).
#include "p2paudit/probe/probe.h"

namespace p2paudit::probe {

namespace {

// Adds `extra`'s keys to `out`, never replacing a key already there.
void merge_extra(nlohmann::ordered_json& out, const nlohmann::ordered_json& extra) {
  if (!extra.is_object()) return;
  for (auto it = extra.begin(); it != extra.end(); ++it)
    if (!out.contains(it.key())) out[it.key()] = it.value();
}

}  // namespace

nlohmann::ordered_json RuntimeReport::to_json() const {
  nlohmann::ordered_json j;
  j["runtime"] = runtime;
  j["status"] = status;
  if (!phase.empty()) j["phase"] = phase;
  if (!error.empty()) j["error"] = error;
  j["library"] = library;
  j["driver_version"] = driver_version;
  merge_extra(j, extra);
  auto devs = nlohmann::ordered_json::array();
  for (const auto& d : devices) {
    nlohmann::ordered_json dj;
    dj["index"] = d.index;
    dj["bdf"] = d.bdf ? nlohmann::ordered_json(d.bdf->str()) : nlohmann::ordered_json(nullptr);
    dj["name"] = d.name;
    merge_extra(dj, d.extra);
    devs.push_back(std::move(dj));
  }
  j["devices"] = std::move(devs);
  auto prs = nlohmann::ordered_json::array();
  for (const auto& p : pairs)
    prs.push_back({{"provider", p.provider}, {"client", p.client}, {"answers", p.answers}});
  j["pairs"] = std::move(prs);
  return j;
}

}  // namespace p2paudit::probe

namespace p2paudit::probe {

std::optional<Bdf> parse_runtime_bus_id(std::string_view text) {
  while (!text.empty() && (text.back() == '\0' || text.back() == ' ' || text.back() == '\n')) text.remove_suffix(1);
  auto hex = [](std::string_view s, size_t max_digits, uint32_t max_value) -> std::optional<uint32_t> {
    if (s.empty() || s.size() > max_digits) return std::nullopt;
    uint32_t v = 0;
    for (char c : s) {
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return std::nullopt;
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > max_value) return std::nullopt;
    return v;
  };
  Bdf b;
  std::string_view rest = text;
  size_t first = rest.find(':');
  if (first == std::string_view::npos) return std::nullopt;
  if (rest.find(':', first + 1) != std::string_view::npos) {
    auto domain = hex(rest.substr(0, first), 8, 0xffffffffu);
    if (!domain) return std::nullopt;
    b.domain = *domain;
    rest.remove_prefix(first + 1);
  }
  size_t colon = rest.find(':');
  size_t dot = rest.find('.');
  if (colon == std::string_view::npos || dot == std::string_view::npos || dot < colon) return std::nullopt;
  auto bus = hex(rest.substr(0, colon), 2, 0xff);
  auto dev = hex(rest.substr(colon + 1, dot - colon - 1), 2, 0x1f);
  auto fn = hex(rest.substr(dot + 1), 1, 7);
  if (!bus || !dev || !fn) return std::nullopt;
  b.bus = static_cast<uint8_t>(*bus);
  b.dev = static_cast<uint8_t>(*dev);
  b.fn = static_cast<uint8_t>(*fn);
  return b;
}

}  // namespace p2paudit::probe
