// SPDX-License-Identifier: GPL-2.0-or-later
// Whitelist candidates for upstream (docs/whitelist.md): the host bridges whose absence from the
// kernel's P2PDMA whitelist is what refuses peer DMA for at least one pair, with the pairs an
// entry would unlock and the evidence for it, and the kernel table line and commit message a
// developer would send.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/topology.h"

namespace p2paudit::fleet {

// One pair an entry would unlock: refused today, THRU_HOST_BRIDGE with the entry added.
struct UnlockedPair {
  size_t provider = 0, client = 0;          // topology indices
  bool same_host_bridge = false;            // provider and client sit under one host bridge
  std::vector<std::string> acs_redirect;    // BDFs redirecting on the path ("" list: none)
  std::string copy_result;                  // vendor.copy_result in the evidence ("" none)
  std::optional<double> copy_gbps, staged_gbps;
};

enum class CandidateStatus {
  kReadyToSubmit,   // a verified peer copy through this host bridge is in the evidence
  kNeedsEvidence,   // no verified copy (missing says what and why)
  kRejected,        // a copy through it delivered wrong data or failed
  kFixedIn,         // a later kernel release has the entry (fixed_in)
};
const char* to_string(CandidateStatus s);  // "ready to submit", "needs evidence", "rejected", "fixed in"

struct WhitelistCandidate {
  uint16_t vendor = 0, device = 0;          // the host bridge's root device, as the kernel matches it
  std::string name;                         // libpci's name for it
  std::vector<std::string> host_bridges;    // "pci0000:00"... where it is the root device
  bool needs_same_host_bridge = false;      // every unlocked pair shares one host bridge: REQ_SAME_HOST_BRIDGE
  std::vector<UnlockedPair> pairs;           // empty with WhitelistOptions::count_pairs_only
  size_t pair_count = 0;                    // the pairs it unlocks, kept or not
  std::map<std::string, size_t> copy_results;  // copy_result ("" none) -> pairs
  CandidateStatus status = CandidateStatus::kNeedsEvidence;
  std::string fixed_in;                     // kFixedIn: "7.2" (and what the entry says there)
  std::vector<std::string> missing;         // what evidence is missing and why it matters
  std::vector<std::string> reports;         // public reports about this host bridge (rules data)
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
  // them; for_each_unlocked_pair() hands them out again (report, prom, html, aggregate).
  bool count_pairs_only = false;
};

// Every pair a candidate's entry would unlock, one at a time, with that candidate's root-device ID
// (vendor, device); a pair unlocked by two entries comes once per entry. Nothing is kept.
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

nlohmann::ordered_json candidate_json(const Topology& topo, const WhitelistCandidate& c);

}  // namespace p2paudit::fleet
