// SPDX-License-Identifier: GPL-2.0-or-later
// The parent side shared by the dlopen() backends. run_pair_children() is the one per-pair child
// loop (NVML, CUDA, HIP and Level Zero): a new child after the pair a driver crashed or hung in, so
// the other pairs are still asked. run_session() (NVML, CUDA, HIP) runs a runtime "session" in it
// and turns its messages into a RuntimeReport; run_pair_task() asks a second question per pair.
//
// The session (run in the child, `first_pair` = the first ordered pair to ask) sends:
//   isolated_partial({"driver_version", "library"?, "devices": [{"index", "bdf"?, "name", "extra"}]}) once
//     ("library": the file it loaded, when it tried several)
//   isolated_partial({"pair": k, "provider", "client", "answers"}) per ordered pair k >= first_pair
// and returns {"absent": "why"}, {"failed": {"phase", "code", "name", "description"?}} or
// {"done": true}. Ordered pairs are numbered row by row: (0,1), (0,2)... (1,0), (1,2)...
#pragma once

#include "p2paudit/shared_library.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/probe/isolate.h"
#include "p2paudit/probe/probe.h"

namespace p2paudit::probe::detail {

inline constexpr int kMaxPairFailures = 3;  // crashed or hung pairs before the rest are not asked

// The per-pair child loop every runtime shares (run_session, run_pair_task, Level Zero's queries
// and copies): items (ordered pairs, or the pairs of a second question) asked in isolated children,
// each child from the first item not yet done on; a child that dies is charged with the item it
// died in, and a new child asks the ones after it.
struct PairChildren {
  std::string phase;                                  // run_isolated's phase until the child names one
  size_t per_child = SIZE_MAX;                        // items one child asks at most
  int max_deaths = kMaxPairFailures;                  // charged deaths before the items left are skipped
  std::function<std::optional<size_t>()> count;       // the items; nullopt until a child has said
  std::function<nlohmann::json(size_t first, size_t end)> ask;  // a child's body: items [first, end)
  // Stores what a child answered; how many items from `first` it finished, or nullopt when the
  // loop ends here (the child's result or death is the runtime's, not an item's).
  std::function<std::optional<size_t>(const IsolatedResult& child, size_t first)> take;
  // The item a child died in; true when the death counts toward max_deaths.
  std::function<bool(size_t item, const IsolatedResult& child)> charge;
  std::function<void(size_t item)> skip;              // an item the loop ends without asking (may be empty
                                                      // where none can be: one item per child, no cap)
  std::function<void(size_t first, size_t count)> progress;  // optional: before each child
};
// Runs the loop; returns the deaths counted (max_deaths when it stopped for them). A child that
// returns with items of its range left ends the loop: they are skipped; unless it answered at
// least one and its result is {"restart": true}: then a new child asks the ones after (a copy child
// whose GPU context a hung kernel left unusable).
int run_pair_children(const PairChildren& loop, int timeout_seconds);

RuntimeReport run_session(const std::string& runtime, const std::string& library, const ProbeOptions& options,
                          const std::vector<std::string>& answer_keys,
                          const std::function<nlohmann::json(size_t first_pair)>& session);

// A second question per pair, after run_session (`probe --copy`): asked of every pair whose
// questions were answered, in children of their own, and stored in the pair's answers[key]. The
// session (run in the child) gets the (provider, client) pairs to do, in order, and sends
//   isolated_partial({"item": i, "answer": ...}) per pair i of its argument;
// its result is not used but for {"restart": true} (run_pair_children). A child that crashes or
// hangs in pair i: that pair's answers[key] is "crashed"/"hung" with "phase"/"error", the runtime's
// status becomes the first such failure (when it was "ok"), and a new child does the pairs after it. A pair whose questions crashed, hung or
// were not asked gets "not_asked", like the pairs after kMaxPairFailures such failures.
void run_pair_task(RuntimeReport& report, const std::string& key, const ProbeOptions& options,
                   const std::function<nlohmann::json(const std::vector<std::pair<int, int>>& pairs)>& session);

// The first child that died (crashed, hung or failed) makes the report's status, phase and error;
// the other pairs are still asked.
void report_first_death(RuntimeReport& report, const std::string& status, const std::string& phase,
                        const std::string& error);

// Adds a sentence to report.extra["note"] (the text printer shows it).
void add_note(RuntimeReport& report, const std::string& sentence);

// A session's answer when the library lacks a function it needs (SharedLibrary::missing()).
nlohmann::json symbol_missing(const std::string& symbol);

// A session's answer for a call that failed: {"failed": {"phase", "code", "name", "description"?}}.
nlohmann::json failed_call(const std::string& phase, long long code, const std::string& name, const char* description);

// The library to open: $env_var when set and not empty, else default_name.
std::string library_path(const char* env_var, const char* default_name);

// Ordered pair k of n devices (row by row, diagonal skipped).
std::pair<int, int> ordered_pair(size_t k, int n);

}  // namespace p2paudit::probe::detail
