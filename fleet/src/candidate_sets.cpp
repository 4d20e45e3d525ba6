// SPDX-License-Identifier: GPL-2.0-or-later
// Candidate sets (docs/whitelist.md, "Sets of entries"): the entries a pair refused through the
// host bridge needs, one or two, and the sets of entries that must all be added to unlock a pair.
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/input_file.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"

namespace p2paudit::fleet {

namespace {

bool allowed(const PairVerdict& v) { return v.p2pdma_distance && *v.p2pdma_distance >= 0; }

// The first release after the analysed one whose table has the entry, nullopt when none.
std::optional<KernelRelease> first_release_with(const KernelRules& kernel, uint16_t vendor, uint16_t device) {
  std::optional<KernelRelease> first;
  for (const auto& e : kernel.all_releases) {
    if (e.vendor != vendor || (e.device && *e.device != device) || !e.releases.added) continue;
    if (*e.releases.added <= kernel.release || (first && *first <= *e.releases.added)) continue;
    first = e.releases.added;
  }
  return first;
}

}  // namespace

std::string NeededEntry::id() const { return fmt::format("{:04x}:{:04x}", vendor, device); }

std::string CandidateSet::id() const {
  std::vector<std::string> ids;
  for (const auto& e : entries) ids.push_back(e.id());
  return fmt::format("{}", fmt::join(ids, "+"));
}

KernelRules with_whitelist_entries(const KernelRules& kernel, const std::vector<NeededEntry>& entries) {
  KernelRules r = kernel;
  for (const auto& n : entries) {
    WhitelistEntry e;
    e.vendor = n.vendor;
    e.device = n.device;
    e.same_host_bridge = n.same_host_bridge_ok;
    // Assumed, as --assume-whitelisted adds it: without_booted_entries() keeps it.
    e.origin = "--assume-whitelisted: a candidate's entry";
    r.whitelist.push_back(e);
  }
  return r;
}

std::vector<NeededEntry> entries_needed(const Topology& topo, const KernelRules& kernel, const PairVerdict& refused) {
  if (!refused.p2pdma_distance || *refused.p2pdma_distance >= 0 || !refused.through_host_bridge) return {};
  // REQ_SAME_HOST_BRIDGE is enough only where host_bridge_whitelist() passes same_host_bridge.
  const bool same = topo.functions[refused.provider].host_bridge == topo.functions[refused.client].host_bridge;
  std::set<std::pair<uint16_t, uint16_t>> ids;
  const PairVerdict* current = &refused;
  PairVerdict after;
  // Each round adds the roots whose check failed; a pair spans at most two host bridges, so a third
  // round that still finds a new root would mean a walk this code does not know: no answer.
  for (int round = 0; round < 2; ++round) {
    size_t before = ids.size();
    for (const auto& check : current->host_bridges) {
      if (check.passed != false) continue;
      // No root device, or an entry that matched with REQ_SAME_HOST_BRIDGE for two host bridges
      // (the kernel stops at the first match): no entry added after it changes the answer.
      if (check.refused_same_host_bridge || check.entry || check.unknown_entry || !check.root_device) return {};
      const Function& root = topo.functions[*check.root_device];
      ids.insert({root.vendor, root.device});
    }
    if (ids.size() == before) return {};  // refused for something no entry changes
    std::vector<NeededEntry> out;
    for (const auto& [vendor, device] : ids) out.push_back({vendor, device, same});
    after = pci_p2pdma_distance(topo, with_whitelist_entries(kernel, out), refused.provider, refused.client);
    if (!after.p2pdma_distance) return {};  // unknown with the entries: not claimed
    if (allowed(after)) return out;
    current = &after;
  }
  return {};
}

EntryIndexes::EntryIndexes(const Topology& topo, const KernelRules& kernel) : topo_(topo), kernel_(kernel) {}
EntryIndexes::~EntryIndexes() = default;

const P2pdmaIndex& EntryIndexes::with(const std::vector<NeededEntry>& entries) {
  auto& slot = built_[entries];
  if (!slot) {
    slot = std::make_unique<Built>();
    slot->rules = with_whitelist_entries(kernel_, entries);
    slot->index = std::make_unique<P2pdmaIndex>(topo_, slot->rules);
  }
  return *slot->index;
}

namespace {

// What entries_needed() reads of one check of an outcome (HostBridgeCheck's fields that
// WhitelistCheck leaves out), as pci_p2pdma_distance() fills them for the run that assumes nothing.
struct CheckState {
  bool refused_same_host_bridge = false;  // matched an entry flagged REQ_SAME_HOST_BRIDGE, two host bridges
  bool unknown_entry = false;             // keyed by an entry this build may lack
};

CheckState check_state(const Topology& topo, const KernelRules& rules, const WhitelistCheck& check, bool same) {
  CheckState s;
  // Only __host_bridge_whitelist() (5.4+) looks entries up; root_complex_whitelist() has none.
  if (!rules.map_types || !check.root_device) return s;
  if (check.entry) {
    s.refused_same_host_bridge = rules.whitelist[*check.entry].same_host_bridge && !same;
  } else {
    s.unknown_entry = unknown_whitelist_entry(rules, topo.functions[*check.root_device]).has_value();
  }
  return s;
}

}  // namespace

std::vector<NeededEntry> entries_needed(const P2pdmaIndex& base, size_t provider, size_t client, const PairOutcome& refused,
                                        EntryIndexes& with_entries) {
  if (!refused.p2pdma_distance || *refused.p2pdma_distance >= 0 || !refused.through_host_bridge) return {};
  const Topology& topo = base.topology();
  // host_bridge_whitelist() passes same_host_bridge where both names are one (p2pdma.cpp).
  const bool same = topo.functions[provider].host_bridge == topo.functions[client].host_bridge;
  std::set<std::pair<uint16_t, uint16_t>> ids;
  const PairOutcome* current = &refused;
  const KernelRules* rules = &base.rules();
  PairOutcome after;
  // As entries_needed() of a verdict: each round adds the roots whose check failed, at most two.
  for (int round = 0; round < 2; ++round) {
    size_t before = ids.size();
    for (size_t h = 0; h < current->whitelist_check_count; ++h) {
      const WhitelistCheck& check = current->whitelist_checks[h];
      if (check.passed != false) continue;
      CheckState state = check_state(topo, *rules, check, same);
      if (state.refused_same_host_bridge || check.entry || state.unknown_entry || !check.root_device) return {};
      const Function& root = topo.functions[*check.root_device];
      ids.insert({root.vendor, root.device});
    }
    if (ids.size() == before) return {};
    std::vector<NeededEntry> out;
    for (const auto& [vendor, device] : ids) out.push_back({vendor, device, same});
    const P2pdmaIndex& with = with_entries.with(out);
    after = with.outcome(provider, client);
    if (!after.p2pdma_distance) return {};
    if (*after.p2pdma_distance >= 0) return out;
    current = &after;
    rules = &with.rules();
  }
  return {};
}

std::vector<CandidateSet> candidate_sets(const Topology& topo, const KernelRules& kernel,
                                         const policy::VendorFactsDocument* evidence, const WhitelistOptions& options) {
  std::map<std::vector<NeededEntry>, CandidateSet> by_entries;
  for_each_unlocked(topo, kernel, evidence, options, [&](const UnlockedPair& pair, const std::vector<NeededEntry>& needed) {
    if (needed.size() < 2) return;  // a single entry's pair: whitelist_candidates()
    CandidateSet& s = by_entries[needed];
    s.entries = needed;
    ++s.pair_count;
    ++s.copy_results[pair.copy_result];
    if (s.first_pairs.size() < kPairsListed) s.first_pairs.push_back(pair);
    if (!options.count_pairs_only) s.pairs.push_back(pair);
  });

  std::vector<CandidateSet> out;
  for (auto& item : by_entries) {
    CandidateSet& s = item.second;
    std::optional<KernelRelease> fixed;
    bool every_fixed = true;
    for (const auto& e : s.entries) {
      std::string name;
      std::vector<std::string> bridges;
      for (const auto& hb : topo.host_bridges) {
        auto first = std::find_if(hb.root_bus_devices.begin(), hb.root_bus_devices.end(), [&](size_t i) {
          return topo.functions[i].vendor == e.vendor && topo.functions[i].device == e.device;
        });
        if (first == hb.root_bus_devices.end()) continue;
        bridges.push_back(hb.name);
        if (name.empty()) name = topo.functions[*first].device_name;
      }
      s.names.push_back(name);
      s.host_bridges.push_back(std::move(bridges));
      auto release = first_release_with(kernel, e.vendor, e.device);
      every_fixed = every_fixed && release;
      if (release && (!fixed || *fixed < *release)) fixed = release;
    }
    bool verified = s.copy_results.count("verified") > 0;
    bool bad = s.copy_results.count("corrupt") > 0 || s.copy_results.count("failed") > 0;
    if (every_fixed && fixed) {
      s.status = CandidateStatus::kFixedIn;
      s.fixed_in = fmt::format("{}.{}", fixed->major, fixed->minor);
    } else if (bad) {
      s.status = CandidateStatus::kDoNotSubmit;  // counted copies only (candidate_evidence.cpp)
      s.missing.push_back("a peer copy across these host bridges failed or delivered wrong data: the entries would "
                          "enable a path that does not work");
    } else if (verified) {
      s.status = CandidateStatus::kReadyToSubmit;
    } else {
      s.status = CandidateStatus::kNeedsEvidence;
      s.missing.push_back(
          "a verified peer copy between devices under these host bridges (`p2paudit snapshot --probe --copy` on a "
          "kernel booted with every entry of the set): each entry is a host bridge no kernel has vouched for");
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string kernel_table_lines(const CandidateSet& s) {
  std::string out;
  for (size_t i = 0; i < s.entries.size(); ++i) {
    WhitelistCandidate c;  // one entry in the kernel's style, flag as the set needs it
    c.vendor = s.entries[i].vendor;
    c.device = s.entries[i].device;
    c.name = i < s.names.size() ? s.names[i] : "";
    c.needs_same_host_bridge = s.entries[i].same_host_bridge_ok;
    out += (i ? "\n" : "") + kernel_table_line(c);
  }
  return out;
}

PairSource set_pairs(const Topology& topo, const KernelRules& kernel, const policy::VendorFactsDocument* evidence,
                     const WhitelistOptions& options, const CandidateSet& s) {
  if (!s.pairs.empty() || s.pair_count <= s.first_pairs.size()) {
    const std::vector<UnlockedPair>& kept = s.pairs.empty() ? s.first_pairs : s.pairs;
    return [&kept](const PairVisitor& visit) {
      for (const auto& p : kept) visit(p);
    };
  }
  const std::vector<NeededEntry> entries = s.entries;
  return [&topo, &kernel, evidence, &options, entries](const PairVisitor& visit) {
    for_each_unlocked(topo, kernel, evidence, options, [&](const UnlockedPair& p, const std::vector<NeededEntry>& needed) {
      if (needed == entries) visit(p);
    });
  };
}

nlohmann::ordered_json candidate_set_json(const Topology& topo, const CandidateSet& s) {
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (size_t i = 0; i < s.entries.size(); ++i)
    entries.push_back({{"id", s.entries[i].id()},
                       {"name", i < s.names.size() ? s.names[i] : ""},
                       {"host_bridges", i < s.host_bridges.size() ? s.host_bridges[i] : std::vector<std::string>{}},
                       {"same_host_bridge", s.entries[i].same_host_bridge_ok}});
  nlohmann::ordered_json pairs = nlohmann::ordered_json::array();
  for (const auto& p : s.pairs) pairs.push_back(unlocked_pair_json(topo, p));
  return {{"id", s.id()},
          {"entries", std::move(entries)},
          {"status", to_string(s.status)},
          {"fixed_in", s.fixed_in.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.fixed_in)},
          {"missing", s.missing},
          {"kernel_table_lines", kernel_table_lines(s)},
          {"pair_count", s.pair_count},
          {"pairs", std::move(pairs)}};
}

}  // namespace p2paudit::fleet
