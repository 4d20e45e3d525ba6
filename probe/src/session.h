// The parent side shared by the dlopen() backends (NVML, CUDA): runs a runtime "session" in an
// isolated child and turns its messages into a RuntimeReport, starting a new child after the pair
// a driver crashed or hung in, so the other pairs are still asked.
//
// The session (run in the child, `first_pair` = the first ordered pair to ask) sends:
//   isolated_partial({"driver_version", "devices": [{"index", "bdf"?, "name", "extra"}]}) once
//   isolated_partial({"pair": k, "provider", "client", "answers"}) per ordered pair k >= first_pair
// and returns {"absent": "why"}, {"failed": {"phase", "code", "name", "description"?}} or
// {"done": true}. Ordered pairs are numbered row by row: (0,1), (0,2)... (1,0), (1,2)...
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/probe/probe.h"

namespace p2paudit::probe::detail {

inline constexpr int kMaxPairFailures = 3;  // crashed or hung pairs before the rest are not asked

RuntimeReport run_session(const std::string& runtime, const std::string& library, const ProbeOptions& options,
                          const std::vector<std::string>& answer_keys,
                          const std::function<nlohmann::json(size_t first_pair)>& session);

// The library to open: $env_var when set and not empty, else default_name.
std::string library_path(const char* env_var, const char* default_name);

// Ordered pair k of n devices (row by row, diagonal skipped).
std::pair<int, int> ordered_pair(size_t k, int n);

}  // namespace p2paudit::probe::detail
