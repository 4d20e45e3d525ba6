// SPDX-License-Identifier: GPL-2.0-or-later
// Evidence with provenance for whitelist candidates (docs/whitelist.md, "Evidence" and "Statuses"):
// which copy results count for a host bridge, and the candidate's status from them, from what
// upstream already has (rules/kernel/upstream.yaml) and from public reports.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/input_file.h"
#include "p2paudit/probe/runtime_facts.h"

namespace p2paudit::fleet {

namespace {

// The copy result a document holds for the ordered pair; "" when none, when it was not run, or when
// the copy went over NVLink or XGMI (it never crossed the host bridge: no evidence about it).
struct SeenCopy {
  std::string result, runtime;
  std::optional<double> gbps, staged_gbps, ceiling_gbps;
};
SeenCopy seen_copy(const policy::VendorFactsDocument* doc, const Bdf& provider, const Bdf& client) {
  SeenCopy out;
  if (!doc) return out;
  policy::FactSet facts;
  doc->apply(provider, client, facts);
  auto fabric = [&](const char* name) {
    const auto* v = facts.get(name);
    return v && std::holds_alternative<bool>(*v) && std::get<bool>(*v);
  };
  auto text = [&](const char* name) {
    const auto* v = facts.get(name);
    return v && std::holds_alternative<std::string>(*v) ? std::get<std::string>(*v) : std::string();
  };
  auto number = [&](const char* name) -> std::optional<double> {
    const auto* v = facts.get(name);
    if (v && std::holds_alternative<double>(*v)) return std::get<double>(*v);
    return std::nullopt;
  };
  out.result = text("vendor.copy_result");
  if (out.result == "not_run" || fabric("vendor.nvlink") || fabric("vendor.xgmi")) out.result.clear();
  if (out.result.empty()) return out;
  out.runtime = text("vendor.copy_runtime");
  out.gbps = number("vendor.copy_gbps");
  out.staged_gbps = number("vendor.copy_staged_gbps");
  out.ceiling_gbps = number("vendor.copy_ceiling_gbps");
  return out;
}

// Verified ordered pairs a candidate keeps to judge coverage (a runtime answers for GPUs: far fewer).
constexpr size_t kMaxVerifiedKept = 65536;

bool is_vm(const Platform& p) { return p.hypervisor || p.firmware_vm == Known::kYes; }


// Enough measured evidence (docs/whitelist.md): both directions of one device pair verified, and
// where the entry would also serve pairs under two host bridges (no REQ_SAME_HOST_BRIDGE), both
// directions of such a pair too. One direction copies the provider's memory into the client's, the
// other the client's into the provider's: together each device's BAR is read and written by peer
// traffic through the host bridge.
struct Coverage {
  bool same = false, cross = false;
};
Coverage coverage(const Topology& topo, const WhitelistCandidate& c) {
  std::set<std::pair<size_t, size_t>> verified(c.verified.begin(), c.verified.end());
  Coverage out;
  for (const auto& [p, q] : verified) {
    if (!verified.count({q, p})) continue;
    bool same = topo.functions[p].host_bridge == topo.functions[q].host_bridge;
    (same ? out.same : out.cross) = true;
  }
  return out;
}

}  // namespace

KernelRules without_booted_entries(const KernelRules& run) {
  KernelRules base = run;
  base.whitelist.clear();
  for (size_t i = 0; i < run.whitelist.size(); ++i)
    if (i < run.table_entries || run.whitelist[i].origin.starts_with("--assume-whitelisted"))
      base.whitelist.push_back(run.whitelist[i]);
  return base;
}

void pair_copy_evidence(const Topology& topo, const policy::VendorFactsDocument* measured,
                        const policy::VendorFactsDocument* claimed, UnlockedPair& pair) {
  const Bdf& provider = topo.functions[pair.provider].bdf;
  const Bdf& client = topo.functions[pair.client].bdf;
  SeenCopy copy = seen_copy(measured, provider, client);
  if (!copy.result.empty()) {
    pair.seen_copy_result = copy.result;
    pair.copy_provenance = "measured";
    pair.copy_runtime = copy.runtime;
    std::string runtime = copy.runtime.empty() ? "an unnamed runtime" : escape_line(copy.runtime);
    // Peer traffic through the host bridge: the kernel of the run allowed the pair (booted with
    // the entry), or the runtime's peer path does not ask P2PDMA (NVIDIA's own).
    bool bypasses = !copy.runtime.empty() && !probe::runtime_uses_kernel_p2pdma(copy.runtime);
    if (pair.run_kernel_allowed || bypasses) {
      pair.copy_result = copy.result;
      pair.copy_gbps = copy.gbps;
      pair.staged_gbps = copy.staged_gbps;
      pair.ceiling_gbps = copy.ceiling_gbps;
      pair.copy_note = pair.run_kernel_allowed
                           ? fmt::format("measured with {} under a kernel whose table has the entry", runtime)
                           : fmt::format("measured with {}, whose peer path does not use the kernel's P2PDMA", runtime);
    } else {
      pair.copy_note = fmt::format(
          "measured with {} under a kernel that refuses this pair: the copy did not cross the host bridge as "
          "peer traffic (no evidence either way)",
          runtime);
    }
    return;
  }
  SeenCopy claim = seen_copy(claimed, provider, client);
  if (claim.result.empty()) return;
  pair.seen_copy_result = claim.result;
  pair.copy_provenance = "claimed";
  pair.copy_runtime = claim.runtime;
  pair.copy_note = "claimed by a hand-written vendor facts file: not a measurement, not counted";
}

void add_pair_evidence(const UnlockedPair& pair, WhitelistCandidate& c) {
  if (pair.copy_provenance == "claimed") {
    ++c.claimed_copies;
  } else if (pair.copy_provenance == "measured") {
    if (pair.copy_result.empty()) {
      ++c.measured_not_peer;
    } else {
      ++c.measured_copies;
      // Kept up to a bound: with count_pairs_only, memory must not grow with the pairs.
      if (pair.copy_result == "verified") {
        if (c.verified.size() < kMaxVerifiedKept) c.verified.push_back({pair.provider, pair.client});
      }
      else ++c.failed_copies;
    }
  }
}

void decide_candidate_status(const Topology& topo, const KernelRules& kernel, WhitelistCandidate& c) {
  // What the rule data says (fixed in a later release, a public report of wrong data, queued or
  // proposed upstream) is decided in one place, which the kernel's remedy quotes too; this
  // machine's measured copies are weighed here.
  EntryRuleStatus data = entry_rule_status(kernel, c.vendor, c.device);
  c.fixed_in = data.fixed_in;
  c.reports = data.reports;
  c.upstream = data.upstream;
  if (is_vm(topo.platform)) {
    // A guest's host bridges are its hypervisor's, whatever hardware it runs on.
    c.emulated = "emulated by the hypervisor";
    for (const auto& b : kernel.upstream.emulated)
      if (b.vendor == c.vendor && b.device == c.device) c.emulated = b.name;
  }

  Coverage cov = coverage(topo, c);
  bool spans = !c.needs_same_host_bridge;
  bool enough = c.failed_copies == 0 && cov.same + cov.cross > 0 && (!spans || cov.cross);
  c.missing.clear();
  c.status_reason.clear();
  if (data.status == EntryDataStatus::kFixedIn) {
    c.status = CandidateStatus::kFixedIn;
  } else if (c.failed_copies > 0) {
    c.status = CandidateStatus::kDoNotSubmit;
    c.status_reason = fmt::format(
        "rejected: {} measured peer copy(ies) through this host bridge failed or delivered wrong data",
        c.failed_copies);
  } else if (data.status == EntryDataStatus::kDoNotSubmit) {
    c.status = CandidateStatus::kDoNotSubmit;
    c.status_reason = data.reason();
  } else if (data.status == EntryDataStatus::kQueued) {
    c.status = CandidateStatus::kQueuedUpstream;
  } else if (data.status == EntryDataStatus::kProposed) {
    c.status = CandidateStatus::kProposedUpstream;
  } else if (enough) {
    c.status = CandidateStatus::kReadyToSubmit;
  } else {
    c.status = CandidateStatus::kNeedsEvidence;
  }
  bool open = c.status == CandidateStatus::kNeedsEvidence || c.status == CandidateStatus::kQueuedUpstream ||
              c.status == CandidateStatus::kProposedUpstream;
  if (!open || enough) return;
  c.missing.push_back(fmt::format(
      "measured, verified peer copies through this host bridge in both directions of a device pair{} "
      "(`p2paudit snapshot --probe --copy` on a kernel booted with the entry, given with --kernel-rules, or with a "
      "runtime whose peer path does not use P2PDMA): an untested host bridge may report success and deliver wrong data",
      spans ? ", one of them with its devices under two host bridges" : ""));
  if (c.claimed_copies > 0)
    c.missing.push_back(fmt::format("{} copy result(s) come from a hand-written vendor facts file: a claim is not a "
                                    "measurement and is not counted",
                                    c.claimed_copies));
  if (c.measured_not_peer > 0)
    c.missing.push_back(fmt::format(
        "{} measured copy result(s) ran under a kernel that refuses the pair with a runtime that uses P2PDMA: they "
        "did not cross the host bridge as peer traffic (no evidence either way)",
        c.measured_not_peer));
}

std::string copy_run_of(const nlohmann::json& doc) {
  if (!doc.is_object() || !doc.contains("copy") || !doc["copy"].is_object()) return "";
  const auto& copy = doc["copy"];
  auto whole = [&](const char* key) -> std::optional<std::uint64_t> {
    if (!copy.contains(key) || !copy[key].is_number_integer() || copy[key].get<std::int64_t>() < 0) return std::nullopt;
    return copy[key].get<std::uint64_t>();
  };
  auto size = whole("size_bytes"), repeat = whole("repeat");
  if (!size || !repeat || *size > (std::uint64_t{1} << 40) || *repeat > 1000000) return "";
  return fmt::format("{} bytes, {} repeat(s), every byte compared", *size, *repeat);
}

std::vector<std::string> evidence_lines(const WhitelistCandidate& c) {
  std::vector<std::string> out;
  if (!c.status_reason.empty()) out.push_back("do not submit: " + c.status_reason);
  if (c.upstream) out.push_back(upstream_entry_text(*c.upstream));
  if (!c.emulated.empty())
    out.push_back(fmt::format("virtual machine: the VM's emulated host bridge ({}), not real hardware; an entry for "
                              "it concerns guests of this hypervisor only",
                              escape_line(c.emulated)));
  out.push_back(fmt::format("evidence: {} measured peer copy(ies) through it ({} verified, {} failed), {} measured "
                            "without peer traffic, {} claimed{}",
                            c.measured_copies, c.verified.size(), c.failed_copies, c.measured_not_peer,
                            c.claimed_copies, c.copy_run.empty() ? "" : "; copies of " + c.copy_run));
  if (c.log_read)
    out.push_back(fmt::format("kernel log: {} refusal or \"not in P2PDMA whitelist\" line(s) through it, as predicted; {} IOMMU fault line(s) on pairs "
                              "through it{}{}",
                              c.logged_refusals, c.logged_faults,
                              c.logged_faults ? " (peer traffic through it faulted: measure copies with `probe --copy` "
                                                "before submitting)"
                                              : "",
                              c.logged_contradictions
                                  ? fmt::format("; {} line(s) contradict the prediction (docs/log.md: report them)",
                                                c.logged_contradictions)
                                  : ""));
  return out;
}

void add_log_evidence(const policy::LogExplainer& log, std::vector<WhitelistCandidate>& candidates) {
  for (auto& c : candidates) {
    c.log_read = true;
    for (const auto& e : log.events()) {
      if (e.host_bridge_id != c.id()) continue;
      if (e.agreement == policy::LogAgreement::kContradicts) c.logged_contradictions += e.count;
      if (e.event.kind == LogEventKind::kIommuFault) c.logged_faults += e.count;
      else if (e.agreement == policy::LogAgreement::kAgrees &&
               (e.event.kind == LogEventKind::kP2pdmaRefused || e.event.kind == LogEventKind::kHostBridgeNotWhitelisted))
        c.logged_refusals += e.count;
    }
  }
}

nlohmann::ordered_json evidence_copies_json(const Topology& topo, const std::vector<UnlockedPair>& pairs) {
  using nlohmann::ordered_json;
  ordered_json copies = ordered_json::array();
  for (const auto& p : pairs) {
    if (p.copy_provenance.empty()) continue;
    copies.push_back({{"provider", topo.functions[p.provider].bdf.str()},
                      {"client", topo.functions[p.client].bdf.str()},
                      {"result", escape_bytes(p.seen_copy_result)},
                      {"provenance", p.copy_provenance},
                      {"runtime",
                       p.copy_runtime.empty() ? ordered_json(nullptr) : ordered_json(escape_bytes(p.copy_runtime))},
                      {"counts", !p.copy_result.empty()},
                      {"note", p.copy_note}});
  }
  return copies;
}

void add_evidence_json(const Topology& topo, const WhitelistCandidate& c, nlohmann::ordered_json& j) {
  using nlohmann::ordered_json;
  j["status_reason"] = c.status_reason.empty() ? ordered_json(nullptr) : ordered_json(c.status_reason);
  if (c.upstream)
    j["upstream"] = {{"state", c.upstream->state}, {"id", c.upstream->id},     {"date", c.upstream->date},
                     {"subject", c.upstream->subject}, {"where", c.upstream->where}, {"link", c.upstream->link}};
  else
    j["upstream"] = nullptr;
  j["emulated_host_bridge"] = c.emulated.empty() ? ordered_json(nullptr) : ordered_json(escape_bytes(c.emulated));
  // c.copies, gathered as the pairs are counted: c.pairs is empty when they were counted, not kept.
  ordered_json copies = evidence_copies_json(topo, c.copies);
  j["evidence"] = {{"measured_copies", c.measured_copies},
                   {"verified_pairs", c.verified.size()},
                   {"failed_copies", c.failed_copies},
                   {"measured_not_peer", c.measured_not_peer},
                   {"claimed_copies", c.claimed_copies},
                   {"copy_run", c.copy_run.empty() ? ordered_json(nullptr) : ordered_json(c.copy_run)},
                   {"copies", std::move(copies)}};
  if (c.log_read)
    j["evidence"]["kernel_log"] = {{"refusals", c.logged_refusals},
                                   {"faults", c.logged_faults},
                                   {"contradictions", c.logged_contradictions}};
}

}  // namespace p2paudit::fleet
