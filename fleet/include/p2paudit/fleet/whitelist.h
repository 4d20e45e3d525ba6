// SPDX-License-Identifier: GPL-2.0-or-later
// Whitelist candidates for upstream (docs/whitelist.md): the host bridges whose absence from the
// kernel's P2PDMA whitelist is what refuses peer DMA for at least one pair, with the pairs an
// entry would unlock and the evidence for it, and the kernel table line and commit message a
// developer would send.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/log_explain.h"
#include "p2paudit/topology.h"

namespace p2paudit::fleet {

class PrettyWriter;

// One pair an entry would unlock: refused today, THRU_HOST_BRIDGE with the entry added.
struct UnlockedPair {
  size_t provider = 0, client = 0;          // topology indices
  bool same_host_bridge = false;            // provider and client sit under one host bridge
  std::vector<std::string> acs_redirect;    // BDFs redirecting on the path ("" list: none)
  std::string copy_result;                  // vendor.copy_result in the evidence ("" none)
  std::optional<double> copy_gbps, staged_gbps;
  std::optional<double> ceiling_gbps;       // vendor.copy_ceiling_gbps: the path's ceiling (docs/probe.md)
  // Provenance (candidate_evidence.cpp, docs/whitelist.md "Evidence"): copy_result above is set only
  // for a measured copy that crossed the host bridge as peer traffic; what else the evidence said:
  std::string seen_copy_result;             // the copy result the evidence holds, counted or not ("" none)
  std::string copy_provenance;              // "measured" (probe --copy), "claimed" (vendor facts file), ""
  std::string copy_runtime;                 // vendor.copy_runtime ("" unknown)
  bool run_kernel_allowed = false;          // the kernel of the run (with --kernel-rules entries) allowed it
  std::string copy_note;                    // why the copy counts for the host bridge or not
};

// The pairs a candidate or a set keeps in any case (first_pairs): what the text lists before "... and
// N more" (docs/whitelist.md); the rest are handed out again one at a time (for_each_unlocked_pair()).
inline constexpr size_t kPairsListed = 32;

// Hands out the pairs of one candidate or set again, one at a time, in the order they were counted.
using PairVisitor = std::function<void(const UnlockedPair&)>;
using PairSource = std::function<void(const PairVisitor&)>;

enum class CandidateStatus {
  kReadyToSubmit,     // measured peer copies through this host bridge, enough of them (docs/whitelist.md)
  kNeedsEvidence,     // not enough measured evidence (missing says what and why)
  kDoNotSubmit,       // status_reason: a measured copy through it failed, or a public report of wrong data
  kFixedIn,           // a later kernel release has the entry (fixed_in)
  kQueuedUpstream,    // a maintainer's tree has the entry queued (upstream)
  kProposedUpstream,  // the entry was proposed on the list (upstream)
};
// "ready to submit", "needs evidence", "do not submit", "fixed in", "queued upstream", "proposed upstream"
const char* to_string(CandidateStatus s);

struct WhitelistCandidate {
  uint16_t vendor = 0, device = 0;          // the host bridge's root device, as the kernel matches it
  std::string name;                         // libpci's name for it
  std::vector<std::string> host_bridges;    // "pci0000:00"... where it is the root device
  bool needs_same_host_bridge = false;      // every unlocked pair shares one host bridge: REQ_SAME_HOST_BRIDGE
  std::vector<UnlockedPair> pairs;           // empty with WhitelistOptions::count_pairs_only
  size_t pair_count = 0;                    // the pairs it unlocks, kept or not
  // Gathered while counting, bounded by the functions and the evidence, never by the pairs:
  std::vector<UnlockedPair> first_pairs;    // the first kPairsListed pairs, kept or not
  std::set<std::string> acs_redirect;       // every UnlockedPair::acs_redirect BDF of its pairs
  std::vector<UnlockedPair> copies;         // its pairs with copy evidence (copy_provenance set), in order
  std::map<std::string, size_t> copy_results;  // copy_result ("" none) -> pairs
  CandidateStatus status = CandidateStatus::kNeedsEvidence;
  std::string fixed_in;                     // kFixedIn: "7.2" (and what the entry says there)
  std::vector<std::string> missing;         // what evidence is missing and why it matters
  std::vector<std::string> reports;         // public reports about this host bridge (rules data)
  // Evidence with provenance and upstream state (candidate_evidence.cpp, docs/whitelist.md).
  std::string status_reason;                // kDoNotSubmit: "rejected: public report of wrong data (URL)"
  std::optional<UpstreamEntry> upstream;    // rules/kernel/upstream.yaml: queued or proposed already
  std::string emulated;                     // in a VM: the emulated host bridge's name ("" not a VM's)
  size_t measured_copies = 0;               // measured copies that crossed it as peer traffic
  size_t measured_not_peer = 0;             // measured under a refusing kernel with a P2PDMA runtime: no evidence
  size_t claimed_copies = 0;                // copies a hand-written vendor facts file claims: never counted
  size_t failed_copies = 0;                 // measured peer copies through it that failed or were corrupt
  std::vector<std::pair<size_t, size_t>> verified;  // ordered pairs with a measured verified peer copy
  std::string copy_run;                     // WhitelistOptions::copy_run
  // The kernel log's lines about it (`whitelist --log FILE`, add_log_evidence(), docs/log.md).
  bool log_read = false;
  uint64_t logged_refusals = 0;             // refusals (and its "not in P2PDMA whitelist" lines) as predicted
  uint64_t logged_faults = 0;               // IOMMU faults on pairs through it
  uint64_t logged_contradictions = 0;       // lines about it that contradict the prediction
  std::string id() const;                   // "8086:4c43"
};

// The machine-wide context printed with the candidates.
struct CandidateContext {
  std::string kernel_release, cpu_vendor, cpu_model_name, iommu_mode;
  std::optional<int> cpu_family, cpu_model;
};

struct WhitelistOptions {
  bool all_functions = false;  // every PCI function, not only the devices the matrix shows
  // Count the pairs (pair_count, copy_results) without keeping them: memory does not grow with
  // them; for_each_unlocked_pair() hands them out again (report, prom, html, aggregate, whitelist).
  bool count_pairs_only = false;
  // A hand-written vendor facts file (--vendor-facts): its copy results are shown as claimed and
  // never counted; `evidence` is what was measured (the runtimes' answers, probe --copy).
  const policy::VendorFactsDocument* claimed = nullptr;
  std::string copy_run;  // how the measured copies were run (copy_run_of), "" unknown
};

// Every pair a candidate's entry would unlock, one at a time, with that candidate's root-device ID
// (vendor, device); a pair that needs two entries is a set's (candidate_sets()), not here. Nothing is kept.
void for_each_unlocked_pair(const Topology& topo, const KernelRules& kernel, const policy::VendorFactsDocument* evidence,
                            const WhitelistOptions& options,
                            const std::function<void(const UnlockedPair&, uint16_t, uint16_t)>& fn);

// Candidates for this machine, by host-bridge ID. A pair counts only when the entry alone turns
// its verdict from refused to allowed: not where CONFIG_PCI_P2PDMA is off, the kernel predates
// 4.20, or the verdict is unknown. `evidence` (probe results, vendor facts) may be null.
std::vector<WhitelistCandidate> whitelist_candidates(const Topology& topo, const KernelRules& kernel,
                                                     const policy::VendorFactsDocument* evidence,
                                                     const WhitelistOptions& options = {});
CandidateContext candidate_context(const Topology& topo, const KernelRules& kernel);

// ---- Patches in upstream shape (whitelist_patch.cpp, docs/whitelist.md "The patch").
// The sender, as `git commit -s` would sign: GIT_AUTHOR_NAME/EMAIL (or GIT_COMMITTER_*) over
// user.name/user.email of ~/.gitconfig over $XDG_CONFIG_HOME/git/config (~/.config/git/config),
// EMAIL for the address last; the files through the bounded reader, git is never run ([include]
// is not followed). Empty name or email: not known, and the patch carries a FIXME placeholder.
struct GitIdentity {
  std::string name, email;
  std::string source;  // where they came from ("GIT_AUTHOR_NAME", a config file's path), "" unknown
  bool known() const { return !name.empty() && !email.empty(); }
  std::string signed_off_by() const;  // "Signed-off-by: Name <email>" or the FIXME placeholder
};
// config_files false: the environment only (whitelist --commit-message and JSON open nothing
// outside the sysroot, tests/open_confined_test.cpp; --patch reads the files).
GitIdentity git_identity(bool config_files = true);
// The platform the subject and the table comment name: pci.ids' vendor and device name of the
// root device without the function words ("Intel Rocket Lake-S 8c"), else the CPU model name
// ("Intel Xeon E5-2680 v4"), else the ID.
std::string platform_name(const Topology& topo, const CandidateContext& context, const WhitelistCandidate& c);
// How a kernel tree's table writes an entry: what follows "VENDOR," and "DEVICE,", and whether the
// flags are the 5.2 era's bool.
struct TableStyle {
  std::string vendor_sep = " ", device_sep = " ";
  bool bool_flags = false;
};
// The table line, preceded by a comment line naming the platform: "{PCI_VENDOR_ID_INTEL, 0x4c43, 0},"
// or with REQ_SAME_HOST_BRIDGE. Without a platform the comment is libpci's name (or the ID).
std::string kernel_table_line(const WhitelistCandidate& c);
std::string kernel_table_line(const WhitelistCandidate& c, const std::string& platform, const TableStyle* style);
// `lspci -tv` (pciutils ls-tree.c) of the functions in `keep` (give every ancestor too): root
// buses in order, bridges with their bus range, a leaf with its vendor and device name.
std::string lspci_tree(const Topology& topo, const std::set<size_t>& keep);
struct PatchInput {
  const Topology& topo;
  const KernelRules& kernel;                         // the rules of the kernel that refused the pairs
  CandidateContext context;
  const policy::VendorFactsDocument* evidence = nullptr;  // how each copy was run; may be null
  GitIdentity identity;
  // The candidate's pairs (candidate_pairs()); empty: WhitelistCandidate::pairs.
  PairSource pairs = {};
};
// The commit message: subject "PCI/P2PDMA: Add <platform> host bridge to allowlist", the machine
// and the booted kernel, `lspci -tv` of the paths, their ports' ACS, the kernel's log before, the
// mapping after, each copy and how it was run, Link: trailers (URLs only), Signed-off-by.
std::string commit_message(const PatchInput& in, const WhitelistCandidate& c);
std::string commit_message(const Topology& topo, const KernelRules& kernel, const CandidateContext& context,
                           const WhitelistCandidate& c);  // with git_identity(false), no evidence
// The mbox `git am` takes: with a kernel tree (kernel_source: the directory holding
// drivers/pci/p2pdma.c, read bounded) the diff inserting the table line in the table's own style
// and order; without one (""), the message alone. Throws InputError for an unreadable tree, a
// file without the table, or an entry the table already has.
struct KernelPatch {
  std::string mbox;
  bool applies = false;  // carries a diff
};
KernelPatch kernel_patch(const PatchInput& in, const WhitelistCandidate& c, const std::string& kernel_source);
// ---- end of patches

// One unlocked pair as the JSON of a candidate or a set lists it.
nlohmann::ordered_json unlocked_pair_json(const Topology& topo, const UnlockedPair& p);
nlohmann::ordered_json candidate_json(const Topology& topo, const WhitelistCandidate& c);

// ---- Candidate sets (candidate_sets.cpp; docs/whitelist.md "Sets of entries") ----
// A pair whose provider and client sit under two host bridges that are both missing from the table
// needs both entries: host_bridge_whitelist() checks the provider's host bridge, then the client's,
// each without REQ_SAME_HOST_BRIDGE. Such a pair is unlocked by no single entry; it belongs to the
// set of the two.

// One entry a refused pair needs, with the flag that is enough for it.
struct NeededEntry {
  uint16_t vendor = 0, device = 0;   // the root device's ID, as the kernel matches it
  bool same_host_bridge_ok = false;  // REQ_SAME_HOST_BRIDGE is enough: the pair shares one host bridge
  std::string id() const;            // "8086:29c0"
  auto operator<=>(const NeededEntry&) const = default;
};

// The entries the kernel needs added to allow a pair it refuses through the host bridge (`refused`,
// from pci_p2pdma_distance()): one or two IDs, sorted. Empty where no added entry can allow it:
// refused for another reason, an unknown verdict, no root device, or an entry already present with
// REQ_SAME_HOST_BRIDGE for two host bridges (the kernel stops at the first match). The kernel checks
// the second host bridge only when the first passes, so the pair is evaluated again with each
// failing root added: O(depth), at most three evaluations. The answer is checked, never assumed.
std::vector<NeededEntry> entries_needed(const Topology& topo, const KernelRules& kernel, const PairVerdict& refused);

// The rules of a kernel booted with `entries` appended to its table (REQ_SAME_HOST_BRIDGE where
// same_host_bridge_ok), as `--assume-whitelisted` adds them.
KernelRules with_whitelist_entries(const KernelRules& kernel, const std::vector<NeededEntry>& entries);

// The kernel `kernel` with entries added, one P2pdmaIndex per set of entries (not per pair): what
// entries_needed() of an outcome asks. Keeps references to both: they must outlive it.
class EntryIndexes {
 public:
  EntryIndexes(const Topology& topo, const KernelRules& kernel);
  ~EntryIndexes();
  // The index of with_whitelist_entries(kernel, entries), built on first use.
  const P2pdmaIndex& with(const std::vector<NeededEntry>& entries);

 private:
  struct Built {
    KernelRules rules;
    std::unique_ptr<P2pdmaIndex> index;
  };
  const Topology& topo_;
  const KernelRules& kernel_;
  std::map<std::vector<NeededEntry>, std::unique_ptr<Built>> built_;
};

// entries_needed() from the index, with nothing built per pair: `refused` is
// base.outcome(provider, client), and each evaluation with entries asks `with_entries`, whose kernel
// must be base.rules(). The same answer as entries_needed() of the pair's full verdict.
std::vector<NeededEntry> entries_needed(const P2pdmaIndex& base, size_t provider, size_t client, const PairOutcome& refused,
                                        EntryIndexes& with_entries);

// Every pair that entries_needed() can unlock, with the entries it needs: one entry (a single
// candidate's pair) or several (a set's). Nothing is kept.
void for_each_unlocked(const Topology& topo, const KernelRules& kernel, const policy::VendorFactsDocument* evidence,
                       const WhitelistOptions& options,
                       const std::function<void(const UnlockedPair&, const std::vector<NeededEntry>&)>& fn);

// A set of entries that must all be added: the pairs it lists need every one of them (a pair
// unlocked by one entry is its single candidate's, never a set's). Each entry carries no
// REQ_SAME_HOST_BRIDGE: its pairs cross host bridges.
struct CandidateSet {
  std::vector<NeededEntry> entries;               // two or more, sorted
  std::vector<std::string> names;                 // libpci's name of each entry's root device ("" unknown)
  std::vector<std::vector<std::string>> host_bridges;  // per entry: "pci0000:00"... where it is root
  std::vector<UnlockedPair> pairs;                // empty with WhitelistOptions::count_pairs_only
  size_t pair_count = 0;
  std::vector<UnlockedPair> first_pairs;          // the first kPairsListed pairs, kept or not
  std::map<std::string, size_t> copy_results;     // copy_result ("" none) -> pairs
  CandidateStatus status = CandidateStatus::kNeedsEvidence;
  std::string fixed_in;                           // kFixedIn: the first release with every entry
  std::vector<std::string> missing;
  std::string id() const;                         // "1b36:000c+8086:29c0"
};

std::vector<CandidateSet> candidate_sets(const Topology& topo, const KernelRules& kernel,
                                         const policy::VendorFactsDocument* evidence, const WhitelistOptions& options = {});
// The table lines of every entry of the set, in the kernel's style, each after a comment line.
std::string kernel_table_lines(const CandidateSet& s);
nlohmann::ordered_json candidate_set_json(const Topology& topo, const CandidateSet& s);
// The pairs of a candidate, or of a set, handed out again: the kept ones where they are all
// (pairs, or first_pairs when pair_count fits), else again through for_each_unlocked() with the
// arguments the candidates were counted with (which must outlive the source). Nothing is kept.
PairSource candidate_pairs(const Topology& topo, const KernelRules& kernel, const policy::VendorFactsDocument* evidence,
                           const WhitelistOptions& options, const WhitelistCandidate& c);
PairSource set_pairs(const Topology& topo, const KernelRules& kernel, const policy::VendorFactsDocument* evidence,
                     const WhitelistOptions& options, const CandidateSet& s);
// ---- end of candidate sets ----
// ---- `whitelist --format json` (whitelist_json.cpp)
inline constexpr int kWhitelistSchemaVersion = 1;

// What the document says besides its candidates and sets; the pairs are handed out again with the
// arguments the candidates and sets were counted with (candidate_pairs(), set_pairs()).
struct WhitelistJsonInput {
  const Topology& topo;
  const KernelRules& kernel;
  const CandidateContext& context;
  const policy::VendorFactsDocument* measured;  // the runtimes' answers; may be null
  const WhitelistOptions& options;
  std::string probe_source, probe_note;  // where the runtimes' answers came from, and why
};
// The document json_text() prints for it (no newline at the end), every pair of each candidate and
// set streamed in: one pair's JSON is in memory at a time.
void write_whitelist_json(std::ostream& out, const WhitelistJsonInput& in, const std::vector<WhitelistCandidate>& candidates,
                          const std::vector<CandidateSet>& sets);
// `object` (a candidate's or a set's JSON) as the next element of the array `w` is writing, its
// "pairs" member (where the object holds it) streamed from `pairs`.
void write_with_pairs(PrettyWriter& w, const Topology& topo, nlohmann::ordered_json object, const PairSource& pairs);
// ---- end of whitelist --format json
// candidate_evidence.cpp: the copy evidence of one unlocked pair with its provenance (set
// run_kernel_allowed first), what a pair adds to its candidate, and the candidate's status from
// its evidence, the upstream data and public reports.
// The kernel a candidate is judged against: `run` without the entries of --kernel-rules files (the
// running kernel was booted with them; upstream has none), --assume-whitelisted entries kept.
KernelRules without_booted_entries(const KernelRules& run);
void pair_copy_evidence(const Topology& topo, const policy::VendorFactsDocument* measured,
                        const policy::VendorFactsDocument* claimed, UnlockedPair& pair);
void add_pair_evidence(const UnlockedPair& pair, WhitelistCandidate& c);
void decide_candidate_status(const Topology& topo, const KernelRules& kernel, WhitelistCandidate& c);
// The kernel log's events (log_explain.h) as evidence about each candidate's host bridge: a logged
// refusal the tool predicted shows the kernel refuses what the entry would unlock; a fault on a pair
// through an untested host bridge is a reason to measure copies before submitting.
void add_log_evidence(const policy::LogExplainer& log, std::vector<WhitelistCandidate>& candidates);
// How a stored probe document's copies were run: "268435456 bytes, 3 repeat(s), every byte compared";
// "" when it holds no copy settings.
std::string copy_run_of(const nlohmann::json& probe_document);
// The status's reason, the upstream state, the VM note and the evidence counts, one line each (text).
std::vector<std::string> evidence_lines(const WhitelistCandidate& c);
// evidence.copies of the JSON: the pairs with copy evidence among `pairs` (c.pairs, or c.copies
// where the pairs were counted, not kept).
nlohmann::ordered_json evidence_copies_json(const Topology& topo, const std::vector<UnlockedPair>& pairs);
// The candidate's evidence, upstream state and VM note as JSON members (candidate_json adds them);
// evidence.copies from c.pairs.
void add_evidence_json(const Topology& topo, const WhitelistCandidate& c, nlohmann::ordered_json& j);

}  // namespace p2paudit::fleet
