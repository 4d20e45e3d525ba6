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
#include "p2paudit/path_ceiling.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/p2pdma_report.h"

namespace p2paudit::fleet {

namespace {

std::string hex_id(uint16_t vendor, uint16_t device) { return fmt::format("{:04x}:{:04x}", vendor, device); }

}  // namespace

const char* to_string(CandidateStatus s) {
  switch (s) {
    case CandidateStatus::kReadyToSubmit: return "ready to submit";
    case CandidateStatus::kNeedsEvidence: return "needs evidence";
    // What the rule data alone decides is worded where it is decided (kernel_rules.h), for the
    // kernel's remedy to say the same.
    case CandidateStatus::kDoNotSubmit: return to_string(EntryDataStatus::kDoNotSubmit);
    case CandidateStatus::kFixedIn: return to_string(EntryDataStatus::kFixedIn);
    case CandidateStatus::kQueuedUpstream: return to_string(EntryDataStatus::kQueued);
    case CandidateStatus::kProposedUpstream: return to_string(EntryDataStatus::kProposed);
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

namespace {

constexpr size_t kNoIndex = SIZE_MAX;

// The device at the top of each function's upstream chain (pci_upstream_bridge() up to a root
// bus), kNoIndex where the chain loops or leaves the tree. Two functions with different tops share
// no upstream device.
std::vector<size_t> chain_tops(const Topology& topo) {
  const size_t n = topo.functions.size();
  std::vector<size_t> top(n, kNoIndex);
  for (size_t i = 0; i < n; ++i) {
    size_t d = i;
    bool regular = true;
    for (size_t steps = 0;; ++steps) {
      auto up = pci_upstream_bridge(topo, d);
      if (!up) break;
      if (*up >= n || steps >= n) {
        regular = false;
        break;
      }
      d = *up;
    }
    if (regular) top[i] = d;
  }
  return top;
}

// UnlockedPair::acs_redirect: the devices whose ACS redirects, in the order pci_p2pdma_distance()
// tests them (walk_provider_chain(), then the client's chain below the common device; the
// provider's whole chain when there is none), with the same bounds on a chain that loops.
std::vector<std::string> acs_redirect_on_walk(const Topology& topo, size_t provider, size_t client,
                                              std::optional<size_t> common) {
  std::vector<std::string> out;
  const size_t n = topo.functions.size();
  auto test = [&](size_t dev) {
    if (pci_bridge_has_acs_redir(topo.functions[dev]) == true) out.push_back(topo.functions[dev].bdf.str());
  };
  std::optional<size_t> a = provider;
  for (size_t guard = 0; a && guard <= n; ++guard) {
    test(*a);
    if (a == common) break;
    a = pci_upstream_bridge(topo, *a);
  }
  if (!common) return out;
  std::optional<size_t> b = client;
  for (size_t hops = 0; b && b != common && hops <= n; b = pci_upstream_bridge(topo, *b), ++hops) test(*b);
  return out;
}

}  // namespace

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
  // Each pair's outcome through the index (O(depth), nothing allocated); one index per rule set.
  const P2pdmaIndex base_index(topo, base);
  std::optional<P2pdmaIndex> run_index;
  if (booted) run_index.emplace(topo, kernel);
  EntryIndexes with_entries(topo, base);

  // Two functions with no upstream device in common go through the host bridge on every release,
  // and what the kernel then decides (the CPU rule, each host bridge's whitelist check, with or
  // without added entries) reads their host bridges only: one answer per pair of host bridges,
  // remembered for the provider's host bridge (devices come in BDF order, so it seldom changes).
  const std::vector<size_t> top = chain_tops(topo);
  std::vector<size_t> host_bridge(topo.functions.size(), kNoIndex);
  for (size_t i = 0; i < topo.functions.size(); ++i)
    if (const HostBridge* hb = topo.host_bridge_of(topo.functions[i]))
      host_bridge[i] = static_cast<size_t>(hb - topo.host_bridges.data());
  constexpr size_t kUnset = SIZE_MAX, kLocked = SIZE_MAX - 1;  // else an index into `needed_lists`
  std::vector<size_t> row;
  size_t row_host_bridge = kNoIndex;
  std::vector<std::vector<NeededEntry>> needed_lists;

  for (size_t p : devices) {
    if (host_bridge[p] != row_host_bridge) {
      row.assign(topo.host_bridges.size(), kUnset);
      row_host_bridge = host_bridge[p];
    }
    for (size_t c : devices) {
      if (p == c) continue;
      const bool by_host_bridges = host_bridge[p] != kNoIndex && host_bridge[c] != kNoIndex && top[p] != kNoIndex &&
                                   top[c] != kNoIndex && top[p] != top[c];
      std::optional<size_t> common;
      std::vector<NeededEntry> needed_here;
      const std::vector<NeededEntry>* needed = &needed_here;
      if (by_host_bridges) {
        size_t& known = row[host_bridge[c]];
        if (known == kUnset) {
          auto found = entries_needed(base_index, p, c, base_index.outcome(p, c), with_entries);
          known = found.empty() ? kLocked : needed_lists.size();
          if (!found.empty()) needed_lists.push_back(std::move(found));
        }
        if (known == kLocked) continue;
        needed = &needed_lists[known];
      } else {
        PairOutcome o = base_index.outcome(p, c);
        // Only where added entries alone turn the refusal into THRU_HOST_BRIDGE (candidate_sets.cpp).
        if (!o.p2pdma_distance || *o.p2pdma_distance >= 0 || !o.through_host_bridge) continue;
        needed_here = entries_needed(base_index, p, c, o, with_entries);
        if (needed_here.empty()) continue;
        common = o.common_ancestor;
      }
      UnlockedPair pair;
      pair.provider = p, pair.client = c;
      pair.same_host_bridge = topo.functions[p].host_bridge == topo.functions[c].host_bridge;
      pair.acs_redirect = acs_redirect_on_walk(topo, p, c, common);
      if (run_index) {
        PairOutcome run = run_index->outcome(p, c);
        pair.run_kernel_allowed = run.p2pdma_distance && *run.p2pdma_distance >= 0;
      }
      pair_copy_evidence(topo, evidence, options.claimed, pair);
      fn(pair, *needed);
    }
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
    if (cand.first_pairs.size() < kPairsListed) cand.first_pairs.push_back(pair);
    cand.acs_redirect.insert(pair.acs_redirect.begin(), pair.acs_redirect.end());
    if (!pair.copy_provenance.empty()) cand.copies.push_back(pair);  // as many as the evidence holds
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

PairSource candidate_pairs(const Topology& topo, const KernelRules& kernel, const policy::VendorFactsDocument* evidence,
                           const WhitelistOptions& options, const WhitelistCandidate& c) {
  if (!c.pairs.empty() || c.pair_count <= c.first_pairs.size()) {
    const std::vector<UnlockedPair>& kept = c.pairs.empty() ? c.first_pairs : c.pairs;
    return [&kept](const PairVisitor& visit) {
      for (const auto& p : kept) visit(p);
    };
  }
  const uint16_t vendor = c.vendor, device = c.device;
  return [&topo, &kernel, evidence, &options, vendor, device](const PairVisitor& visit) {
    for_each_unlocked_pair(topo, kernel, evidence, options, [&](const UnlockedPair& p, uint16_t v, uint16_t d) {
      if (v == vendor && d == device) visit(p);
    });
  };
}

nlohmann::ordered_json unlocked_pair_json(const Topology& topo, const UnlockedPair& p) {
  return {{"provider", topo.functions[p.provider].bdf.str()},
          {"client", topo.functions[p.client].bdf.str()},
          {"same_host_bridge", p.same_host_bridge},
          {"acs_redirect", p.acs_redirect},
          {"copy_result", p.copy_result.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(p.copy_result)},
          {"copy_gbps", p.copy_gbps ? nlohmann::ordered_json(*p.copy_gbps) : nlohmann::ordered_json(nullptr)},
          {"copy_ceiling_gbps", p.copy_gbps && p.ceiling_gbps ? nlohmann::ordered_json(*p.ceiling_gbps) : nlohmann::ordered_json(nullptr)},
          {"copy_ceiling_ratio", p.copy_gbps && ceiling_ratio(*p.copy_gbps, p.ceiling_gbps)
                                     ? nlohmann::ordered_json(*ceiling_ratio(*p.copy_gbps, p.ceiling_gbps))
                                     : nlohmann::ordered_json(nullptr)}};
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
