// SPDX-License-Identifier: GPL-2.0-or-later
// What `probe --mirror` reads before and after one device allocation, and what it makes of the
// difference (docs/probe-level-zero.md):
//   /proc/self/fdinfo/<fd> of every fd open on /dev/dri/renderD* or /dev/dri/card*: the DRM
//     client's memory per region (drm-total-, drm-resident-, drm-shared-, drm-active-, and the older
//     drm-memory- keys), summed per device (drm-pdev) over the distinct clients (drm-client-id);
//   /proc/meminfo: MemAvailable, Committed_AS, Mlocked, AnonPages, Unevictable (the whole host);
//   /proc/self/status: VmRSS, VmPin, VmLck (this process).
// Every file is read with a size and line bound and parsed strictly: a value that is not a number
// in a known unit is unknown (nullopt, null in JSON), never 0.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace p2paudit::probe::mirror {

inline constexpr size_t kMaxProcFileBytes = 64 * 1024;  // fdinfo, meminfo and status are a few KiB
inline constexpr size_t kMaxProcLines = 1024;
inline constexpr size_t kMaxFds = 4096;                 // fds looked at in /proc/self/fd

using Bytes = std::optional<uint64_t>;  // nullopt: absent or not a number we trust

// A DRM fdinfo size: "123", "123 KiB", "4 MiB" (and "GiB"); nullopt for anything else.
Bytes parse_drm_size(std::string_view value);
// A /proc/meminfo or /proc/self/status size: "  12345 kB"; nullopt for anything else.
Bytes parse_kb(std::string_view value);

// One DRM client as its fdinfo says; nullopt when the text is not a DRM client's (no drm-driver).
struct DrmClient {
  std::string pdev;                     // drm-pdev as a BDF ("0000:03:00.0"), "" when absent or invalid
  std::string client_id;                // drm-client-id, "" when absent
  std::map<std::string, Bytes> memory;  // "drm-total-system0" -> bytes
};
std::optional<DrmClient> parse_drm_fdinfo(std::string_view text);

// The named keys of a "Key:   value kB" file; a key absent or unparsable is nullopt.
std::map<std::string, Bytes> parse_kb_lines(std::string_view text, const std::vector<std::string>& keys);

// A memory region that lives in host memory: "system", "system0", "gtt", "cpu", "stolen-system0".
bool is_system_region(std::string_view region);

struct Snapshot {
  std::map<std::string, std::map<std::string, Bytes>> drm;  // per drm-pdev: memory keys summed over its clients
  std::map<std::string, int> drm_clients;                   // per drm-pdev: distinct clients
  std::map<std::string, Bytes> meminfo;
  std::map<std::string, Bytes> status;
};
// Reads this process's DRM fds, /proc/meminfo and /proc/self/status, each bounded.
Snapshot take_snapshot();

// What moved between two snapshots around an allocation of allocation_bytes, for the devices in
// the context (their BDFs, in context order):
//   {"host_bytes", "host_bytes_per_byte", "source": "fdinfo"|"status"|"meminfo"|null,
//    "per_device": [{"bdf", "host_bytes", "host_bytes_per_byte", "fdinfo": {"before", "after"}}],
//    "meminfo_delta": {key: signed bytes|null}, "status_delta": {...}}
// host_bytes: per device, the growth of its system-memory regions (fdinfo); for the run, the larger
// of (a) that growth summed plus VmPin and VmLck growth and (b) the growth of this process's VmRSS,
// VmPin or VmLck, with source naming which; /proc/meminfo (the whole host, noisy) only when
// neither is known.
nlohmann::json growth(const Snapshot& before, const Snapshot& after, uint64_t allocation_bytes,
                      const std::vector<std::string>& device_bdfs);

}  // namespace p2paudit::probe::mirror
