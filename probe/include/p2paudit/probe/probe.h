// SPDX-License-Identifier: GPL-2.0-or-later
// Runtime probes: ask the runtime that would carry a peer transfer (Level Zero, NVML/CUDA, HIP)
// what it says about each pair of its devices. Every runtime call runs in a child process with a
// time limit (isolate.h): a driver that crashes or hangs is reported, and the parent carries on.
#pragma once

#include <cstdint>
#include <optional>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/topology.h"

namespace p2paudit::probe {

// `probe --copy`: per ordered pair, a peer copy and a host-staged copy of the same random buffer,
// compared in full and timed. Opt-in: it allocates device memory and moves data.
struct CopyOptions {
  bool enabled = false;
  std::uint64_t size_bytes = 256ull << 20;  // --size
  int repeat = 3;                           // --repeat: timed copies; the median is reported
  // The peer paths of kernels (CUDA: stores, loads, atomics; docs/probe.md "Peer paths"):
  bool thorough = false;                    // --thorough: 9 windows of 256 MiB, not 3 of 16 MiB
  std::map<std::string, std::uint64_t> bar1_bytes;  // NVML's BAR1 size by BDF: the span of the windows
};

struct ProbeOptions {
  int timeout_seconds = 20;     // per isolated phase
  CopyOptions copy;
  bool mirror = false;          // `probe --mirror` (Level Zero): host memory behind device allocations
  // The first screen's questions only: what decisions read (NVML: the read, write and NVLink P2P
  // status, not atomics or the deprecated prop; each is a driver call of ~1.6 ms per ordered pair).
  bool decisions_only = false;
  // Told what starts next ("cuda copy: pair 3 of 12"): copy tests take seconds a pair, and a person
  // at a terminal should see the work move. May be empty.
  std::function<void(const std::string& step)> progress;
  void report_progress(const std::string& step) const {
    if (progress) progress(step);
  }
};

// A raw answer of one runtime call: the code as the runtime returned it and its name.
struct CallResult {
  long long code = 0;
  std::string name;             // "NVML_SUCCESS", "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", ...
  bool ok() const { return code == 0; }
};

struct RuntimeDevice {
  int index = 0;                // the runtime's own device index
  std::optional<Bdf> bdf;       // the PCI function it drives, when the runtime says
  std::string name;             // the runtime's device name
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // runtime-specific facts
};

// The runtime's answers for one ordered pair (indices into RuntimeReport::devices). Each answer
// is a name ("read", "write", "nvlink", "atomics", "can_access_peer"...) and a value: "ok",
// "not_supported", "unknown", or the failing call's code name.
//
// With --copy, answers["copy"] is either "hung"/"crashed"/"failed"/"not_asked" (the copy child died; the
// pair's "phase"/"error" say where) or an object (copy_check.h builds it):
//   {"size_bytes": N, "repeat": R,
//    "peer":        {"result": "verified"|"corrupt"|"failed"|"not_run", "gbps": median or null,
//                    "seconds": [per repeat], "phase"?: the failing call, "error"?: its code name,
//                    "code"?: the raw code, "code_hex"?: it in hex (Level Zero), "mismatched_bytes"?: n, "first_mismatch"?: offset,
//                    "note"?: why not run},
//    "host_staged": {the same, for provider -> host memory -> client}}
// "verified": every repeat compared equal; "corrupt": a copy reported success and the data
// differs (the loudest result there is); "failed": a call returned an error.
struct PairAnswer {
  int provider = 0;
  int client = 0;
  nlohmann::ordered_json answers = nlohmann::ordered_json::object();
};

// What one runtime said. status: "ok"; "absent" (its library is not installed, exit 0);
// "failed" (a call failed: see error); "crashed" or "hung" (in `phase`, with the signal or the
// time limit in error).
struct RuntimeReport {
  std::string runtime;          // "level_zero", "nvml", "cuda", "hip"
  std::string status = "absent";
  std::string phase;            // the step that failed, crashed or hung
  std::string error;
  std::string library;          // the library file loaded (or tried)
  std::string driver_version;
  std::vector<RuntimeDevice> devices;
  std::vector<PairAnswer> pairs;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // runtime-wide facts

  // {"runtime", "status", "phase"?, "error"?, "library", "driver_version", ...extra,
  //  "devices": [{"index", "bdf" (or null), "name", ...device extra}],
  //  "pairs": [{"provider", "client", "answers": {...}}]} (docs/probe.md)
  nlohmann::ordered_json to_json() const;
};

// Each backend: dlopen()s its runtime at run time (no build dependency on CUDA or ROCm), runs
// every call in an isolated child, and never throws for the runtime's own failures.
// A runtime's PCI bus id as a Bdf: "00000000:06:00.0" (NVML's 8-digit domain), "0000:06:00.0"
// or "06:00.0", hex, any case; nullopt when it is not one.
std::optional<Bdf> parse_runtime_bus_id(std::string_view text);

RuntimeReport probe_nvml(const ProbeOptions& options);
RuntimeReport probe_cuda(const ProbeOptions& options);
RuntimeReport probe_level_zero(const ProbeOptions& options);
RuntimeReport probe_hip(const ProbeOptions& options);  // AMD HIP (libamdhip64.so), "absent" without ROCm

}  // namespace p2paudit::probe
