// SPDX-License-Identifier: GPL-2.0-or-later
// The parent side shared by the dlopen() backends (NVML, CUDA): runs a runtime "session" in an
// isolated child and turns its messages into a RuntimeReport, starting a new child after the pair
// a driver crashed or hung in, so the other pairs are still asked.
//
// The session (run in the child, `first_pair` = the first ordered pair to ask) sends:
//   isolated_partial({"driver_version", "library"?, "devices": [{"index", "bdf"?, "name", "extra"}]}) once
//     ("library": the file it loaded, when it tried several)
//   isolated_partial({"pair": k, "provider", "client", "answers"}) per ordered pair k >= first_pair
// and returns {"absent": "why"}, {"failed": {"phase", "code", "name", "description"?}} or
// {"done": true}. Ordered pairs are numbered row by row: (0,1), (0,2)... (1,0), (1,2)...
#pragma once

#include <dlfcn.h>

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

// A second question per pair, after run_session (`probe --copy`): asked of every pair whose
// questions were answered, in children of their own, and stored in the pair's answers[key]. The
// session (run in the child) gets the (provider, client) pairs to do, in order, and sends
//   isolated_partial({"item": i, "answer": ...}) per pair i of its argument;
// its result is not used. A child that crashes or hangs in pair i: that pair's answers[key] is
// "crashed"/"hung" with "phase"/"error", the runtime's status becomes the first such failure (when
// it was "ok"), and a new child does the pairs after it. A pair whose questions crashed, hung or
// were not asked gets "not_asked", like the pairs after kMaxPairFailures such failures.
void run_pair_task(RuntimeReport& report, const std::string& key, const ProbeOptions& options,
                   const std::function<nlohmann::json(const std::vector<std::pair<int, int>>& pairs)>& session);

// dlsym() into a typed function pointer; false when the library lacks the symbol.
template <typename F>
bool load_symbol(void* library, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(library, symbol));
  return out != nullptr;
}

// A session's answer for a call that failed: {"failed": {"phase", "code", "name", "description"?}}.
nlohmann::json failed_call(const std::string& phase, long long code, const std::string& name, const char* description);

// The library to open: $env_var when set and not empty, else default_name.
std::string library_path(const char* env_var, const char* default_name);

// Ordered pair k of n devices (row by row, diagonal skipped).
std::pair<int, int> ordered_pair(size_t k, int n);

}  // namespace p2paudit::probe::detail
