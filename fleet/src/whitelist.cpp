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

// A public report about a host bridge, shown with its candidate: forcing an untested host bridge
// onto the whitelist has produced copies that "succeed" with wrong data.
struct HostBridgeReport {
  uint16_t vendor, device;
  const char* text;
};
constexpr HostBridgeReport kReports[] = {
    {0x8086, 0x4c43,
     "https://github.com/intel/compute-runtime/issues/935: with 8086:4c43 forced onto the whitelist, Arc Pro B70 "
     "peer copies between root ports reported success and delivered 100% wrong data"},
};

std::string hex_id(uint16_t vendor, uint16_t device) { return fmt::format("{:04x}:{:04x}", vendor, device); }

// The root devices whose whitelist check failed for a pair refused through the host bridge.
std::set<std::pair<uint16_t, uint16_t>> failing_roots(const Topology& topo, const PairVerdict& v) {
  std::set<std::pair<uint16_t, uint16_t>> out;
  for (const auto& check : v.host_bridges)
    if (check.passed == false && !check.refused_same_host_bridge && check.root_device) {
      const Function& root = topo.functions[*check.root_device];
      out.insert({root.vendor, root.device});
    }
  return out;
}

KernelRules with_entries(const KernelRules& kernel, const std::set<std::pair<uint16_t, uint16_t>>& ids) {
  KernelRules r = kernel;
  for (const auto& [vendor, device] : ids) {
    WhitelistEntry e;
    e.vendor = vendor;
    e.device = device;
    e.origin = "whitelist candidate";
    r.whitelist.push_back(e);
  }
  return r;
}

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
    case CandidateStatus::kRejected: return "rejected";
    case CandidateStatus::kFixedIn: return "fixed in";
  }
  return "?";
}

std::string WhitelistCandidate::id() const { return hex_id(vendor, device); }

void for_each_unlocked_pair(const Topology& topo, const KernelRules& kernel, const policy::VendorFactsDocument* evidence,
                            const WhitelistOptions& options,
                            const std::function<void(const UnlockedPair&, uint16_t, uint16_t)>& fn) {
  // Where the kernel has no P2PDMA, or no table, an entry changes nothing.
  if (!kernel.p2pdma || !kernel.whitelist_table || kernel.config_p2pdma == Known::kNo) return;
  std::vector<size_t> devices;
  for (const auto& nf : matrix_devices(topo, options.all_functions)) devices.push_back(nf.index);

  for (size_t p : devices)
    for (size_t c : devices) {
      if (p == c) continue;
      PairVerdict v = pci_p2pdma_distance(topo, kernel, p, c);
      if (!v.p2pdma_distance || *v.p2pdma_distance >= 0 || !v.through_host_bridge) continue;
      auto roots = failing_roots(topo, v);
      if (roots.empty()) continue;
      // Only where the entries alone turn the refusal into THRU_HOST_BRIDGE.
      PairVerdict after = pci_p2pdma_distance(topo, with_entries(kernel, roots), p, c);
      if (!after.p2pdma_distance || *after.p2pdma_distance < 0) continue;
      UnlockedPair pair;
      pair.provider = p, pair.client = c;
      pair.same_host_bridge = topo.functions[p].host_bridge == topo.functions[c].host_bridge;
      for (const auto& t : v.acs_tests)
        if (t.redirect == true) pair.acs_redirect.push_back(topo.functions[t.function].bdf.str());
      if (evidence) {
        policy::FactSet facts;
        evidence->apply(topo.functions[p].bdf, topo.functions[c].bdf, facts);
        // A copy over NVLink or XGMI never crossed the host bridge: no evidence about it.
        auto fabric = [&](const char* name) {
          const auto* v = facts.get(name);
          return v && std::get<bool>(*v);
        };
        if (const auto* r = facts.get("vendor.copy_result");
            r && std::get<std::string>(*r) != "not_run" && !fabric("vendor.nvlink") && !fabric("vendor.xgmi"))
          pair.copy_result = std::get<std::string>(*r);
        if (const auto* g = facts.get("vendor.copy_gbps"); g && !pair.copy_result.empty()) pair.copy_gbps = std::get<double>(*g);
        if (const auto* g = facts.get("vendor.copy_staged_gbps"); g && !pair.copy_result.empty())
          pair.staged_gbps = std::get<double>(*g);
      }
      for (const auto& id : roots) fn(pair, id.first, id.second);
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
    ++cand.pair_count;
    ++cand.copy_results[pair.copy_result];
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
    for (const auto& r : kReports)
      if (r.vendor == cand.vendor && r.device == cand.device) cand.reports.push_back(r.text);
    bool verified = cand.copy_results.count("verified") > 0;
    bool bad = cand.copy_results.count("corrupt") > 0 || cand.copy_results.count("failed") > 0;
    cand.fixed_in = fixed_in(kernel, cand.vendor, cand.device);
    if (!cand.fixed_in.empty()) {
      cand.status = CandidateStatus::kFixedIn;
    } else if (bad) {
      cand.status = CandidateStatus::kRejected;
      cand.missing.push_back("a peer copy through this host bridge failed or delivered wrong data: the entry would "
                             "enable a path that does not work");
    } else if (verified) {
      cand.status = CandidateStatus::kReadyToSubmit;
    } else {
      cand.status = CandidateStatus::kNeedsEvidence;
      cand.missing.push_back(
          "a verified peer copy through this host bridge (`p2paudit snapshot --probe --copy` on a kernel booted with "
          "the entry, or with a runtime that does not use P2PDMA): an untested host bridge may report success and "
          "deliver wrong data");
    }
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

nlohmann::ordered_json candidate_json(const Topology& topo, const WhitelistCandidate& c) {
  nlohmann::ordered_json pairs = nlohmann::ordered_json::array();
  for (const auto& p : c.pairs)
    pairs.push_back({{"provider", topo.functions[p.provider].bdf.str()},
                     {"client", topo.functions[p.client].bdf.str()},
                     {"same_host_bridge", p.same_host_bridge},
                     {"acs_redirect", p.acs_redirect},
                     {"copy_result", p.copy_result.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(p.copy_result)},
                     {"copy_gbps", p.copy_gbps ? nlohmann::ordered_json(*p.copy_gbps) : nlohmann::ordered_json(nullptr)}});
  return {{"id", c.id()},
          {"name", c.name},
          {"host_bridges", c.host_bridges},
          {"status", to_string(c.status)},
          {"fixed_in", c.fixed_in.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.fixed_in)},
          {"needs_same_host_bridge", c.needs_same_host_bridge},
          {"missing", c.missing},
          {"reports", c.reports},
          {"kernel_table_line", kernel_table_line(c)},
          {"pairs", std::move(pairs)}};
}

}  // namespace p2paudit::fleet
