// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/fleet/whitelist.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "p2paudit/input_file.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"

namespace p2paudit::fleet {

namespace {

std::string hex_id(uint16_t vendor, uint16_t device) { return fmt::format("{:04x}:{:04x}", vendor, device); }

// The first release after the analysed one whose table has the entry, "" when none.
std::string fixed_in(const KernelRules& kernel, uint16_t vendor, uint16_t device) {
  std::optional<KernelRelease> first;
  for (const auto& e : kernel.all_releases) {
    if (e.vendor != vendor || (e.device && *e.device != device) || !e.releases.added) continue;
    if (*e.releases.added <= kernel.release || (first && *first <= *e.releases.added)) continue;
    first = e.releases.added;
  }
  return first ? fmt::format("{}.{}", first->major, first->minor) : "";
}

}  // namespace

const char* to_string(CandidateStatus s) {
  switch (s) {
    case CandidateStatus::kReadyToSubmit: return "ready to submit";
    case CandidateStatus::kNeedsEvidence: return "needs evidence";
    case CandidateStatus::kDoNotSubmit: return "do not submit";
    case CandidateStatus::kFixedIn: return "fixed in";
    case CandidateStatus::kQueuedUpstream: return "queued upstream";
    case CandidateStatus::kProposedUpstream: return "proposed upstream";
  }
  return "?";
}

std::string WhitelistCandidate::id() const { return hex_id(vendor, device); }

void for_each_unlocked_pair(const Topology& topo, const KernelRules& kernel, const policy::VendorFactsDocument* evidence,
                            const WhitelistOptions& options,
                            const std::function<void(const UnlockedPair&, uint16_t, uint16_t)>& fn) {
  // A pair that needs two entries is a set's (candidate_sets()), never a single entry's.
  for_each_unlocked(topo, kernel, evidence, options, [&](const UnlockedPair& pair, const std::vector<NeededEntry>& needed) {
    if (needed.size() == 1) fn(pair, needed.front().vendor, needed.front().device);
  });
}

void for_each_unlocked(const Topology& topo, const KernelRules& kernel, const policy::VendorFactsDocument* evidence,
                       const WhitelistOptions& options,
                       const std::function<void(const UnlockedPair&, const std::vector<NeededEntry>&)>& fn) {
  // Where the kernel has no P2PDMA, or no table, an entry changes nothing.
  if (!kernel.p2pdma || !kernel.whitelist_table || kernel.config_p2pdma == Known::kNo) return;
  std::vector<size_t> devices;
  for (const auto& nf : matrix_devices(topo, options.all_functions)) devices.push_back(nf.index);

  // Judged against the released table (and --assume-whitelisted entries): an entry the running
  // kernel was booted with (--kernel-rules) is still a candidate, and its copies were peer traffic.
  const KernelRules base = without_booted_entries(kernel);
  const bool booted = base.whitelist.size() != kernel.whitelist.size();
  for (size_t p : devices)
    for (size_t c : devices) {
      if (p == c) continue;
      PairVerdict v = pci_p2pdma_distance(topo, base, p, c);
      if (!v.p2pdma_distance || *v.p2pdma_distance >= 0 || !v.through_host_bridge) continue;
      // Only where added entries alone turn the refusal into THRU_HOST_BRIDGE (candidate_sets.cpp).
      auto needed = entries_needed(topo, base, v);
      if (needed.empty()) continue;
      UnlockedPair pair;
      pair.provider = p, pair.client = c;
      pair.same_host_bridge = topo.functions[p].host_bridge == topo.functions[c].host_bridge;
      for (const auto& t : v.acs_tests)
        if (t.redirect == true) pair.acs_redirect.push_back(topo.functions[t.function].bdf.str());
      if (booted) {
        PairVerdict run = pci_p2pdma_distance(topo, kernel, p, c);
        pair.run_kernel_allowed = run.p2pdma_distance && *run.p2pdma_distance >= 0;
      }
      pair_copy_evidence(topo, evidence, options.claimed, pair);
      fn(pair, needed);
    }
}

std::vector<WhitelistCandidate> whitelist_candidates(const Topology& topo, const KernelRules& kernel,
                                                     const policy::VendorFactsDocument* evidence,
                                                     const WhitelistOptions& options) {
  std::map<std::pair<uint16_t, uint16_t>, WhitelistCandidate> by_id;
  std::map<std::pair<uint16_t, uint16_t>, bool> all_same_host_bridge;
  for_each_unlocked_pair(topo, kernel, evidence, options, [&](const UnlockedPair& pair, uint16_t vendor, uint16_t device) {
    WhitelistCandidate& cand = by_id[{vendor, device}];
    cand.vendor = vendor, cand.device = device;
    cand.copy_run = options.copy_run;
    ++cand.pair_count;
    ++cand.copy_results[pair.copy_result];
    add_pair_evidence(pair, cand);
    auto [same, added] = all_same_host_bridge.try_emplace({vendor, device}, true);
    same->second = same->second && pair.same_host_bridge;
    if (!options.count_pairs_only) cand.pairs.push_back(pair);
  });

  std::vector<WhitelistCandidate> out;
  for (auto& entry : by_id) {
    WhitelistCandidate& cand = entry.second;  // named: clang 14 cannot capture a structured binding
    for (const auto& hb : topo.host_bridges) {
      auto first = std::find_if(hb.root_bus_devices.begin(), hb.root_bus_devices.end(), [&](size_t i) {
        return topo.functions[i].vendor == cand.vendor && topo.functions[i].device == cand.device;
      });
      if (first == hb.root_bus_devices.end()) continue;
      cand.host_bridges.push_back(hb.name);
      if (cand.name.empty()) cand.name = topo.functions[*first].device_name;
    }
    cand.needs_same_host_bridge = all_same_host_bridge[entry.first];
    cand.fixed_in = fixed_in(kernel, cand.vendor, cand.device);
    decide_candidate_status(topo, kernel, cand);
    out.push_back(std::move(cand));
  }
  return out;
}

CandidateContext candidate_context(const Topology& topo, const KernelRules& kernel) {
  CandidateContext c;
  c.kernel_release = kernel.release.text.empty() ? kernel.release.version() : kernel.release.text;
  c.cpu_vendor = topo.platform.cpu_vendor;
  c.cpu_family = topo.platform.cpu_family;
  c.cpu_model = topo.platform.cpu_model;
  c.cpu_model_name = topo.platform.cpu_model_name;
  c.iommu_mode = topo.platform.iommu_mode.empty() ? "unknown" : topo.platform.iommu_mode;
  return c;
}

nlohmann::ordered_json unlocked_pair_json(const Topology& topo, const UnlockedPair& p) {
  return {{"provider", topo.functions[p.provider].bdf.str()},
          {"client", topo.functions[p.client].bdf.str()},
          {"same_host_bridge", p.same_host_bridge},
          {"acs_redirect", p.acs_redirect},
          {"copy_result", p.copy_result.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(p.copy_result)},
          {"copy_gbps", p.copy_gbps ? nlohmann::ordered_json(*p.copy_gbps) : nlohmann::ordered_json(nullptr)}};
}

nlohmann::ordered_json candidate_json(const Topology& topo, const WhitelistCandidate& c) {
  nlohmann::ordered_json pairs = nlohmann::ordered_json::array();
  for (const auto& p : c.pairs) pairs.push_back(unlocked_pair_json(topo, p));
  nlohmann::ordered_json j = {{"id", c.id()},
                               {"name", c.name},
                               {"host_bridges", c.host_bridges},
                               {"status", to_string(c.status)},
                               {"fixed_in", c.fixed_in.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.fixed_in)},
                               {"needs_same_host_bridge", c.needs_same_host_bridge},
                               {"missing", c.missing},
                               {"reports", c.reports},
                               {"kernel_table_line", kernel_table_line(c)}};
  add_evidence_json(topo, c, j);
  j["pairs"] = std::move(pairs);
  return j;
}

}  // namespace p2paudit::fleet
