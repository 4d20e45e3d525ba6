// SPDX-License-Identifier: GPL-2.0-or-later
// Runs one piece of runtime work in a child process with a time limit, so that a driver that
// crashes or hangs is reported instead of taking the tool down with it.
//
//   IsolatedResult r = run_isolated("nvmlInit_v2", 20, [] {
//     isolated_phase("nvmlInit_v2");            // optional: names the step now running
//     ...                                       // call the runtime
//     isolated_partial({{"pair", 3}});          // optional: a piece of the answer, kept on a crash
//     return nlohmann::json{{"count", 2}};      // the result
//   });
//   r.status: "ok" (r.value is the body's JSON), "crashed" (r.error is "SIGSEGV"...), "hung"
//   (killed after timeout_seconds without a new phase; r.error says so) or "failed" (the body
//   threw, the child exited without a result, its output was too large, or fork() failed).
//   r.phase is the last phase the child announced (the `phase` argument until it announces one).
//
// The child: fork() of the caller (single-threaded callers only), its own process group, stdout
// redirected to stderr (a runtime's chatter never reaches the tool's output), no core dumps; it
// runs body, writes newline-delimited JSON messages to a pipe and _exit()s. The parent reads with
// poll(); the deadline restarts at each isolated_phase(); on timeout or oversized output it sends
// SIGKILL to the child's process group. The child is always waited for: no zombies.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace p2paudit::probe {

inline constexpr size_t kIsolatedMaxBytes = 16u << 20;  // 16 MiB of messages at most

struct IsolatedResult {
  std::string status;                  // "ok", "crashed", "hung", "failed"
  std::string phase;                   // the last phase announced
  std::string error;                   // "SIGSEGV", "no answer within 20 s", the exception text...
  nlohmann::json value;                // body's result when status == "ok"
  std::vector<nlohmann::json> partial; // isolated_partial() messages received, in order
  bool ok() const { return status == "ok"; }
};

IsolatedResult run_isolated(const std::string& phase, int timeout_seconds,
                            const std::function<nlohmann::json()>& body,
                            size_t max_bytes = kIsolatedMaxBytes);

// Inside run_isolated's body: names the step now running (the parent reports it if the child
// crashes or hangs, and the time limit starts again). Outside a child: does nothing.
void isolated_phase(const std::string& phase);
// Inside run_isolated's body: sends a piece of the answer now, so the parent keeps it even if
// the child dies later. Outside a child: does nothing.
void isolated_partial(const nlohmann::json& piece);

// "SIGSEGV", "SIGABRT"... or "signal N".
std::string signal_name(int signal);

}  // namespace p2paudit::probe
