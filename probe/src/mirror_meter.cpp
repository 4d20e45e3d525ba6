// SPDX-License-Identifier: GPL-2.0-or-later
// The /proc readers and the arithmetic of `probe --mirror` (mirror_meter.h).
#include "mirror_meter.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>

#include "p2paudit/probe/probe.h"

namespace p2paudit::probe::mirror {
namespace {

using nlohmann::json;

const std::vector<std::string> kMeminfoKeys = {"MemAvailable", "Committed_AS", "Mlocked", "AnonPages", "Unevictable"};
const std::vector<std::string> kStatusKeys = {"VmRSS", "VmPin", "VmLck"};
// The fdinfo memory keys, drm-<kind>-<region> (Documentation/gpu/drm-usage-stats.rst).
constexpr std::string_view kMemoryPrefixes[] = {"drm-total-", "drm-resident-", "drm-shared-", "drm-active-",
                                                "drm-memory-"};
constexpr size_t kMaxMemoryKeys = 64;  // per client; a real one has a few regions times five kinds
constexpr size_t kMaxKeyLength = 96;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Leading decimal digits of s as a number (at most 20 digits, no overflow); s keeps the rest.
std::optional<uint64_t> take_number(std::string_view& s) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    const auto d = static_cast<uint64_t>(s[i] - '0');
    if (i >= 20 || v > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  if (i == 0) return std::nullopt;
  s.remove_prefix(i);
  return v;
}

Bytes times(uint64_t v, uint64_t unit) {
  if (v > std::numeric_limits<uint64_t>::max() / unit) return std::nullopt;
  return v * unit;
}

// Calls fn(key, value) for each "key: value" line, at most kMaxProcLines; lines without ':' or
// with an overlong key are skipped.
template <typename Fn>
void for_each_field(std::string_view text, Fn&& fn) {
  size_t lines = 0;
  while (!text.empty() && lines++ < kMaxProcLines) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon > kMaxKeyLength) continue;
    fn(line.substr(0, colon), trim(line.substr(colon + 1)));
  }
}

// Up to kMaxProcFileBytes of a /proc file, cut after its last complete line when it was longer;
// nullopt when it cannot be opened or read.
std::optional<std::string> read_proc_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::nullopt;
  std::string text(kMaxProcFileBytes, '\0');
  size_t got = 0;
  bool failed = false;
  while (got < text.size()) {
    const ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) failed = true;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (failed) return std::nullopt;
  if (got == text.size()) got = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  text.resize(got);
  return text;
}

std::optional<int64_t> diff(const Bytes& before, const Bytes& after) {
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (!before || !after || *before > kMax || *after > kMax) return std::nullopt;
  return static_cast<int64_t>(*after) - static_cast<int64_t>(*before);
}

// a + b, or nullopt when either is unknown or the sum does not fit (hostile values can be huge).
std::optional<int64_t> add(const std::optional<int64_t>& a, const std::optional<int64_t>& b) {
  int64_t sum = 0;
  if (!a || !b || __builtin_add_overflow(*a, *b, &sum)) return std::nullopt;
  return sum;
}

json number_or_null(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }
json number_or_null(const Bytes& v) { return v ? json(*v) : json(nullptr); }

json per_byte(const std::optional<int64_t>& host, uint64_t allocation_bytes) {
  if (!host || allocation_bytes == 0) return nullptr;
  return static_cast<double>(*host) / static_cast<double>(allocation_bytes);
}

const std::map<std::string, Bytes>* find_device(const Snapshot& s, const std::string& bdf) {
  const auto it = s.drm.find(bdf);
  return it == s.drm.end() ? nullptr : &it->second;
}

// The growth of a device's system-memory regions between two snapshots, by the first kind of key
// its clients give for them (allocated before resident). A client or key absent from one
// snapshot counts 0 there; a value present but unparsable makes the growth unknown.
std::optional<int64_t> system_growth(const std::map<std::string, Bytes>* before,
                                     const std::map<std::string, Bytes>* after) {
  if (!before && !after) return std::nullopt;
  for (std::string_view prefix : {std::string_view("drm-total-"), std::string_view("drm-memory-"),
                                  std::string_view("drm-resident-")}) {
    std::vector<std::string> keys;
    for (const auto* side : {before, after}) {
      if (!side) continue;
      for (const auto& [key, value] : *side) {
        if (key.compare(0, prefix.size(), prefix) == 0 && is_system_region(std::string_view(key).substr(prefix.size())) &&
            std::find(keys.begin(), keys.end(), key) == keys.end())
          keys.push_back(key);
      }
    }
    if (keys.empty()) continue;
    std::optional<int64_t> sum = 0;
    for (const auto& key : keys) {
      const auto value = [&](const std::map<std::string, Bytes>* side) -> Bytes {
        if (!side) return 0;
        const auto it = side->find(key);
        return it == side->end() ? Bytes(0) : it->second;
      };
      sum = add(sum, diff(value(before), value(after)));
      if (!sum) return std::nullopt;
    }
    return sum;
  }
  return std::nullopt;
}

json fdinfo_json(const Snapshot& s, const std::string& bdf) {
  json j = json::object();
  const auto clients = s.drm_clients.find(bdf);
  j["clients"] = clients == s.drm_clients.end() ? 0 : clients->second;
  if (const auto* memory = find_device(s, bdf))
    for (const auto& [key, value] : *memory) j[key] = number_or_null(value);
  return j;
}

json deltas(const std::map<std::string, Bytes>& before, const std::map<std::string, Bytes>& after,
            const std::vector<std::string>& keys) {
  json j = json::object();
  for (const auto& key : keys) {
    const auto b = before.find(key), a = after.find(key);
    j[key] = number_or_null(b == before.end() || a == after.end() ? std::nullopt : diff(b->second, a->second));
  }
  return j;
}

std::optional<int64_t> status_delta(const Snapshot& before, const Snapshot& after, const std::string& key) {
  const auto b = before.status.find(key), a = after.status.find(key);
  if (b == before.status.end() || a == after.status.end()) return std::nullopt;
  return diff(b->second, a->second);
}

}  // namespace

Bytes parse_drm_size(std::string_view value) {
  value = trim(value);
  const auto v = take_number(value);
  if (!v) return std::nullopt;
  if (value.empty()) return v;
  if (value.front() != ' ' && value.front() != '\t') return std::nullopt;
  value = trim(value);
  if (value == "KiB") return times(*v, 1ull << 10);
  if (value == "MiB") return times(*v, 1ull << 20);
  if (value == "GiB") return times(*v, 1ull << 30);
  return std::nullopt;
}

Bytes parse_kb(std::string_view value) {
  value = trim(value);
  const auto v = take_number(value);
  if (!v || value.empty() || (value.front() != ' ' && value.front() != '\t')) return std::nullopt;
  if (trim(value) != "kB") return std::nullopt;
  return times(*v, 1024);
}

bool is_system_region(std::string_view region) {
  while (!region.empty() && region.back() >= '0' && region.back() <= '9') region.remove_suffix(1);
  return region == "system" || region == "gtt" || region == "cpu" || region == "stolen-system";
}

std::optional<DrmClient> parse_drm_fdinfo(std::string_view text) {
  DrmClient c;
  bool drm = false;
  std::vector<std::string> seen_twice;
  for_each_field(text, [&](std::string_view key, std::string_view value) {
    if (key == "drm-driver") {
      drm = true;
    } else if (key == "drm-pdev") {
      const auto bdf = parse_runtime_bus_id(value);
      c.pdev = bdf ? bdf->str() : "";
    } else if (key == "drm-client-id") {
      std::string_view rest = value;
      c.client_id = take_number(rest) && rest.empty() ? std::string(value) : "";
    } else {
      for (std::string_view prefix : kMemoryPrefixes) {
        if (key.size() <= prefix.size() || key.substr(0, prefix.size()) != prefix) continue;
        const std::string name(key);
        if (c.memory.count(name)) {
          seen_twice.push_back(name);  // which of the two is right is not ours to guess
        } else if (c.memory.size() < kMaxMemoryKeys) {
          c.memory[name] = parse_drm_size(value);
        }
        break;
      }
    }
  });
  if (!drm) return std::nullopt;
  for (const auto& name : seen_twice) c.memory[name] = std::nullopt;
  return c;
}

std::map<std::string, Bytes> parse_kb_lines(std::string_view text, const std::vector<std::string>& keys) {
  std::map<std::string, Bytes> out;
  std::map<std::string, int> seen;
  for (const auto& key : keys) out[key] = std::nullopt;
  for_each_field(text, [&](std::string_view key, std::string_view value) {
    const std::string name(key);
    if (!out.count(name)) return;
    out[name] = ++seen[name] == 1 ? parse_kb(value) : std::nullopt;  // twice: unknown
  });
  return out;
}

Snapshot take_snapshot() {
  Snapshot s;
  std::map<std::string, DrmClient> clients;  // by drm-pdev and drm-client-id: a dup()ed fd is one client
  if (DIR* dir = opendir("/proc/self/fd")) {
    size_t entries = 0;
    while (const dirent* e = readdir(dir)) {
      if (++entries > kMaxFds) break;
      const std::string_view name = e->d_name;
      if (name.empty() || name.size() > 10 || name.find_first_not_of("0123456789") != std::string_view::npos) continue;
      const std::string fd(name);
      char target[256];
      const ssize_t n = readlink(("/proc/self/fd/" + fd).c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      const std::string_view path(target, static_cast<size_t>(n));
      if (path.rfind("/dev/dri/renderD", 0) != 0 && path.rfind("/dev/dri/card", 0) != 0) continue;
      const auto text = read_proc_file("/proc/self/fdinfo/" + fd);
      if (!text) continue;
      auto client = parse_drm_fdinfo(*text);
      if (!client || client->pdev.empty()) continue;  // not attributable to a device
      const std::string id = client->pdev + "/" + (client->client_id.empty() ? "fd" + fd : client->client_id);
      clients.emplace(id, std::move(*client));
    }
    closedir(dir);
  }
  for (const auto& [id, client] : clients) {
    ++s.drm_clients[client.pdev];
    auto& sums = s.drm[client.pdev];
    for (const auto& [key, value] : client.memory) {
      auto it = sums.find(key);
      if (it == sums.end()) {
        sums[key] = value;
      } else if (it->second && value && *value <= std::numeric_limits<uint64_t>::max() - *it->second) {
        *it->second += *value;
      } else {
        it->second = std::nullopt;  // unknown in one client, or past what a sum can hold
      }
    }
  }
  if (const auto text = read_proc_file("/proc/meminfo")) s.meminfo = parse_kb_lines(*text, kMeminfoKeys);
  if (const auto text = read_proc_file("/proc/self/status")) s.status = parse_kb_lines(*text, kStatusKeys);
  return s;
}

json growth(const Snapshot& before, const Snapshot& after, uint64_t allocation_bytes,
            const std::vector<std::string>& device_bdfs) {
  json per_device = json::array();
  std::optional<int64_t> fdinfo_total;
  bool fdinfo_overflow = false;
  for (const auto& bdf : device_bdfs) {
    const auto g = system_growth(find_device(before, bdf), find_device(after, bdf));
    if (g) {
      fdinfo_total = add(fdinfo_total.value_or(0), g);
      fdinfo_overflow = fdinfo_overflow || !fdinfo_total;
    }
    per_device.push_back({{"bdf", bdf},
                          {"host_bytes", number_or_null(g)},
                          {"host_bytes_per_byte", per_byte(g, allocation_bytes)},
                          {"fdinfo", {{"before", fdinfo_json(before, bdf)}, {"after", fdinfo_json(after, bdf)}}}});
  }
  // Pinned and locked pages are host memory a region count may not show.
  const auto pin = status_delta(before, after, "VmPin"), lck = status_delta(before, after, "VmLck");
  if (fdinfo_total) fdinfo_total = add(add(fdinfo_total, pin.value_or(0)), lck.value_or(0));
  if (fdinfo_overflow) fdinfo_total = std::nullopt;
  std::optional<int64_t> status_total;
  for (const char* key : {"VmRSS", "VmPin", "VmLck"})
    if (const auto d = status_delta(before, after, key)) status_total = std::max(status_total.value_or(*d), *d);

  std::optional<int64_t> host;
  json source = nullptr;
  if (fdinfo_total && (!status_total || *fdinfo_total >= *status_total)) {
    host = fdinfo_total, source = "fdinfo";
  } else if (status_total) {
    host = status_total, source = "status";
  } else {
    const auto b = before.meminfo.find("MemAvailable"), a = after.meminfo.find("MemAvailable");
    if (b != before.meminfo.end() && a != after.meminfo.end())
      if (const auto d = diff(b->second, a->second)) host = -*d, source = "meminfo";
  }
  return {{"host_bytes", number_or_null(host)},
          {"host_bytes_per_byte", per_byte(host, allocation_bytes)},
          {"source", source},
          {"per_device", per_device},
          {"meminfo_delta", deltas(before.meminfo, after.meminfo, kMeminfoKeys)},
          {"status_delta", deltas(before.status, after.status, kStatusKeys)}};
}

}  // namespace p2paudit::probe::mirror
