// SPDX-License-Identifier: GPL-2.0-or-later
// Probe results as policy facts: every runtime asked, the `probe` JSON document, and the facts
// that document establishes per pair of PCI functions (vendor.peer_supported, vendor.nvlink,
// vendor.copy_*...), in the same schema as a hand-written vendor facts file (docs/probe.md).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/policy/facts.h"
#include "p2paudit/probe/probe.h"
#include "p2paudit/topology.h"

namespace p2paudit::probe {

inline constexpr int kProbeSchemaVersion = 1;

// NVML, CUDA, Level Zero (when built in) and HIP, in that order.
std::vector<RuntimeReport> probe_all(const ProbeOptions& options);

// What a decision needs, at NVML's cost: NVML (milliseconds), then CUDA (a second: its cuInit)
// only where NVML did not answer every ordered pair of its devices with a yes or a no for both
// read and write, then Level Zero and HIP. NVML's P2P status is the NVIDIA driver's own answer,
// the one CUDA's cuDeviceCanAccessPeer also asks for; vendor.peer_runtime says which runtime
// answered (docs/probe.md). `probe` and `probe --copy` ask every runtime (probe_all).
std::vector<RuntimeReport> probe_for_decisions(const ProbeOptions& options);
// Whether NVML's report answers peer access for every ordered pair of its devices.
bool nvml_answers_every_pair(const RuntimeReport& nvml);

// What the probe calls the function a runtime device drives: the topology's short name ("gpu0"),
// "" for a function the default view leaves out; a function missing here is not in the topology.
std::map<Bdf, std::string> function_names(const Topology& topo);

// The `probe --format json` document: {"schema_version", "source", "note"?, "timeout_seconds",
// "copy"?, "mirror"?, "runtimes": [RuntimeReport::to_json() + per device "in_topology" and
// "function" (function_names(), null for "") when `topo` is given]}.
nlohmann::ordered_json probe_document(const std::vector<RuntimeReport>& reports, const Topology* topo,
                                      const std::string& source, const std::string& note, const ProbeOptions& options);

// What the runtimes said, as facts. The document may come from a stranger's snapshot: every field
// read is type-checked and a malformed one throws InputError "ORIGIN: runtimes[0].pairs[2]...:
// problem"; fields this reader does not use are ignored.
//
// With `topo` (every reader of a stored or live answer passes the tree it applies to), a runtime's
// device is bound to the tree's function at its address only when the PCI IDs the runtime recorded
// (NVML's pci_device_id, Level Zero's pci_id; otherwise the runtime's own vendor: NVIDIA for NVML
// and CUDA, AMD for HIP) match the function's and the function is a GPU or an accelerator; a device
// that does not match is a finding and its answers are dropped. The facts are then bound with
// VendorFactsDocument::bind (vendor.nvlink and vendor.xgmi on their vendor's GPUs only).
// One pair's answers as read, for the reality check (reality.h).
struct RuntimePairAnswers {
  std::string runtime;
  Bdf provider, client;
  std::string peer_answer;   // "ok", "not_supported", a refusal or error name; "" when not asked
                             // (NVML: read's, or write's when read is "ok")
  nlohmann::json copy;       // answers["copy"] (probe.h), null when no copy was asked
};

struct RuntimeFacts {
  policy::VendorFactsDocument facts;
  std::vector<RuntimePairAnswers> pairs;  // with `topo`: every pair of bound devices, in the document's order
  std::vector<std::string> asked;   // "nvml ok", "cuda absent", ... in the document's order
  std::vector<Finding> findings;    // answers not bound to the tree, and why
  size_t unbound = 0;               // runtime devices whose answers were dropped
};
inline constexpr size_t kMaxUnboundFindings = 16;
RuntimeFacts runtime_facts(const nlohmann::json& document, const std::string& origin, const Topology* topo);
// The same without a tree: nothing bound (recordings and tests of the reader itself).
RuntimeFacts runtime_facts(const nlohmann::json& document, const std::string& origin);

// A stored document's text (a snapshot's kProbeResultsPath) parsed with bounds on nesting and
// size; InputError naming `origin` when it is not such JSON.
nlohmann::json parse_probe_document(std::string_view text, const std::string& origin);

// A runtime's peer answer as a yes or no: nullopt for anything else (an error name, "hung", "unknown").
std::optional<bool> peer_yes_no(const std::string& answer);

// Which runtime's peer path goes through the kernel's P2PDMA (dma-buf import in xe, i915 and
// amdgpu): for those a kernel refusal is what the runtime meets; NVIDIA's driver never asks it.
bool runtime_uses_kernel_p2pdma(const std::string& runtime);

}  // namespace p2paudit::probe
