// SPDX-License-Identifier: GPL-2.0-or-later
// Which P2PDMA rules a given kernel release applies: the host-bridge whitelist table and the
// era-dependent behaviour of drivers/pci/p2pdma.c, loaded from rules/kernel/*.yaml.
#pragma once

#include <compare>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "p2paudit/topology.h"

namespace p2paudit {

// A kernel release reduced to what the rules are keyed by. "7.3-rc7" is 7.3.0 with rc = 7.
struct KernelRelease {
  int major = 0, minor = 0, patch = 0;
  int rc = 0;                 // release candidate number, 0 for a release
  std::string text;           // as given ("5.15.0-25-generic")

  // X.Y or X.Y.Z (digits), then optionally a distribution suffix that starts with '-', '+' or '~'
  // and holds only letters, digits and . _ - + ~; at most 64 bytes, as uname's release field.
  // Accepts "6.1.192", "6.18.44-cloud", "5.15.0-25-generic", "7.3-rc7", "7.3.0-rc7+", "6.1";
  // refuses "6.1x", "6.1.2.3", "6.1.0-../../x" and anything that is not ASCII.
  static std::optional<KernelRelease> parse(std::string_view text);
  std::string version() const;  // "6.1.192", "7.3-rc7"
  // Rules compare (major, minor, patch); an -rc is taken as its release, as the data keys rc trees.
  std::strong_ordering operator<=>(const KernelRelease& o) const;
  bool operator==(const KernelRelease& o) const { return (*this <=> o) == 0; }
};

// Present in a release when added <= it < removed, or via a stable backport X.Y.Z (same X.Y, >= Z).
struct ReleaseRange {
  std::optional<KernelRelease> added;     // nullopt: always (user entries)
  std::optional<KernelRelease> removed;
  std::vector<KernelRelease> backports;
  bool contains(const KernelRelease& r) const;
};

// One entry of pci_p2pdma_whitelist[].
struct WhitelistEntry {
  uint16_t vendor = 0;
  std::optional<uint16_t> device;         // nullopt = PCI_ANY_ID (7.1+)
  bool same_host_bridge = false;          // REQ_SAME_HOST_BRIDGE
  std::string comment;                    // the kernel's source comment
  std::string commit;
  ReleaseRange releases;
  std::string origin;                     // "rules/kernel/whitelist.yaml:12", "--assume-whitelisted"

  std::string id() const;                 // "8086:2030", "1ae0:any"
};

// An era-dependent behaviour of the decision code, keyed by the releases that have it.
struct KernelFeature {
  std::string id;
  std::string description, commit;
  ReleaseRange releases;
};

// Feature ids the decision code asks about (rules/kernel/eras.yaml must define exactly these).
namespace feature {
inline constexpr std::string_view kP2pdma = "p2pdma";                          // 4.20
inline constexpr std::string_view kAmdZenRootComplex = "amd_zen_root_complex";  // 5.2-5.3
inline constexpr std::string_view kMapTypes = "map_types";                      // 5.4
inline constexpr std::string_view kWhitelistTable = "whitelist_table";          // 5.4
inline constexpr std::string_view kCpuSupportsP2pdma = "cpu_supports_p2pdma";   // 5.9
inline constexpr std::string_view kRootDeviceFirstEntry = "root_device_first_entry";  // 5.14
inline constexpr std::string_view kAcsListStackBuffer = "acs_list_stack_buffer";      // 5.14
inline constexpr std::string_view kWhitelistWarning = "host_bridge_whitelist_warning";  // 5.14
inline constexpr std::string_view kRootPortAnyDevfn = "root_port_any_devfn";    // 5.19
inline constexpr std::string_view kWhitelistAnyDevice = "whitelist_any_device";  // 7.1
}  // namespace feature

// rules/kernel/upstream.yaml: what is known about host-bridge IDs beyond the released tables
// (docs/whitelist.md, "Statuses"): entries queued on a maintainer tree or proposed on the list,
// public reports about forcing an entry, and the host bridges hypervisors emulate.
struct UpstreamEntry {
  uint16_t vendor = 0, device = 0;
  std::string state;                      // "queued" (on a maintainer's branch) or "proposed" (on the list)
  std::string id;                         // commit (12+ hex) or the mail's Message-ID
  std::string date;                       // YYYY-MM-DD
  std::string subject, where, link;       // the patch's subject, the tree/list, an https:// URL
  std::string origin;                     // "rules/kernel/upstream.yaml:7:5"
};
struct UpstreamReport {
  uint16_t vendor = 0, device = 0;
  std::string verdict;                    // "wrong_data": forcing the entry gave corrupt copies
  std::string link, summary, origin;
};
struct EmulatedHostBridge {
  uint16_t vendor = 0, device = 0;
  std::string name, origin;               // "QEMU q35 (ICH9 MCH)"
};
struct UpstreamData {
  std::vector<UpstreamEntry> entries;
  std::vector<UpstreamReport> reports;
  std::vector<EmulatedHostBridge> emulated;
};
// Throws InputError "file:line:column: message"; read as strictly as the other rule files.
UpstreamData parse_upstream_file(std::string_view text, const std::string& origin);

struct KernelRuleData {
  std::vector<WhitelistEntry> whitelist;  // file order = the kernel's table order
  std::vector<KernelFeature> features;
  KernelRelease newest_known;             // the newest tree the data was read from
  std::vector<std::string> files;         // what was loaded
  UpstreamData upstream;                  // upstream.yaml (load_kernel_rule_data)

  const KernelFeature* find_feature(std::string_view id) const;
};

// Loads DIR/whitelist.yaml, DIR/eras.yaml and DIR/upstream.yaml; throws InputError "file:line:column: message".
// Rule files are read as strictly as policy files (strict_yaml.h): one document, no duplicate
// keys, bounded aliases and nesting, UTF-8 only.
KernelRuleData load_kernel_rule_data(const std::filesystem::path& dir);
// The same for the two files' text already in memory; the origins name them in messages.
KernelRuleData parse_kernel_rule_data(std::string_view whitelist_text, const std::string& whitelist_origin,
                                      std::string_view eras_text, const std::string& eras_origin);
// A user rule file (--kernel-rules): the whitelist.yaml schema; release fields are optional.
// Only a regular file of at most kMaxRuleFileBytes is read (input_file.h).
std::vector<WhitelistEntry> load_whitelist_file(const std::filesystem::path& path);
// The same for text already in memory; `origin` names it in messages.
std::vector<WhitelistEntry> parse_whitelist_file(std::string_view text, const std::string& origin);
// "VVVV:DDDD[:same-host-bridge]" (DDDD may be "any"); throws InputError.
WhitelistEntry parse_assumed_whitelisted(std::string_view spec);

// How pci_host_bridge_dev() (or its predecessor) picks the device the whitelist is keyed by.
enum class RootDeviceRule {
  kSlotDevfn0,                // 5.2-5.13: pci_get_slot(root bus, 00.0), anywhere in the list
  kFirstAtDevfn0,             // 5.14-5.18: first device of the root bus, only if at 00.0
  kFirstAtDevfn0OrRootPort,   // 5.19+: ... or if it is a PCIe Root Port
};
const char* to_string(RootDeviceRule r);

// The rules one kernel applies, resolved from the data for a release plus the user's extras.
struct KernelRules {
  KernelRelease release;                  // the release whose rules are applied
  std::string requested;                  // the release asked for ("" when none was known)
  std::string release_source;             // "--kernel", "proc/sys/kernel/osrelease", "newest known"

  bool p2pdma = true;
  bool amd_zen_root_complex = false;
  bool map_types = true;
  bool whitelist_table = true;
  bool cpu_supports_p2pdma = true;
  RootDeviceRule root_device_rule = RootDeviceRule::kFirstAtDevfn0OrRootPort;
  size_t acs_list_size = 128;             // seq_buf size; PAGE_SIZE before 5.14
  bool whitelist_warning = true;
  bool whitelist_any_device = true;

  Known config_p2pdma = Known::kUnknown;
  std::string config_source;

  std::vector<WhitelistEntry> whitelist;  // this release's table, then the user's entries
  // Table entries this build may or may not carry: a stable backport (X.Y.Z) behind a distribution
  // release that hides its stable patch level ("7.1.0-14-generic"). A pair they decide is unknown.
  std::vector<WhitelistEntry> unknown_whitelist;
  size_t table_entries = 0;               // how many of `whitelist` are the kernel's own
  std::vector<WhitelistEntry> all_releases;  // every release's entries, to say which has one
  std::vector<std::string> rule_files;    // what the rules were loaded from
  std::vector<std::string> notes;
  UpstreamData upstream;                  // the data's upstream.yaml, for whitelist candidates
};

// What the rule data alone says about a whitelist entry for a host-bridge ID (docs/whitelist.md,
// "Statuses"): the part of a candidate's status that needs no measurement, read by `p2paudit
// whitelist` (fleet/src/candidate_evidence.cpp adds this machine's copies) and quoted by the
// kernel's remedy (p2pdma.cpp), so both say the same. First that applies:
enum class EntryDataStatus {
  kFixedIn,      // a release after the analysed one has the entry (whitelist.yaml): upgrade
  kDoNotSubmit,  // a public report says forcing the entry delivered wrong data (upstream.yaml reports)
  kQueued,       // a maintainer's tree has it queued, e.g. the pci tree's p2pdma branch (upstream.yaml)
  kProposed,     // posted to the list (upstream.yaml)
  kOpen,         // nothing known: measured copies decide (ready to submit or needs evidence)
};
// "fixed in", "do not submit", "queued upstream", "proposed upstream", "" for kOpen: the words
// `whitelist` prints.
const char* to_string(EntryDataStatus s);

struct EntryRuleStatus {
  EntryDataStatus status = EntryDataStatus::kOpen;
  std::string id;                          // "8086:4c43"
  std::string fixed_in;                    // the first later release with the entry ("7.2"), "" none
  std::optional<UpstreamReport> wrong_data;  // the first public report of wrong data
  std::optional<UpstreamEntry> upstream;   // queued or proposed
  std::vector<std::string> reports;        // every public report about it: "URL: summary"
  // kDoNotSubmit: "rejected: public report of wrong data (URL); document the refusal instead"; else "".
  std::string reason() const;
  // The status as the kernel's remedy quotes it, with what to do and no URL (`whitelist` gives them):
  // "a whitelist entry for 8086:4c43: do not submit (rejected: public report of wrong data: ...)",
  // "...: queued upstream: ...", "...: fixed in 7.2 (...)", and for kOpen that measured peer copies
  // decide, which `p2paudit whitelist` counts.
  std::string remedy_text() const;
};
EntryRuleStatus entry_rule_status(const KernelRules& rules, uint16_t vendor, uint16_t device);
// An upstream.yaml entry as `whitelist` and the remedy cite it: "queued upstream: \"subject\" (commit
// ID, where, date) URL: do not send it again; ...", or "proposed upstream: ..." (Message-ID); the
// remedy without the URL.
std::string upstream_entry_text(const UpstreamEntry& e, bool with_link = true);

struct KernelRuleOptions {
  std::string kernel;                     // --kernel
  std::vector<std::string> kernel_rules;  // --kernel-rules FILE
  std::vector<std::string> assume_whitelisted;
};

// The upstream stable release X.Y.Z a distribution kernel of release r (same X.Y) says it was built
// from: Ubuntu's proc/version_signature, Debian's proc/version ("Debian 6.1.55-1"); else nullopt.
std::optional<KernelRelease> stable_base(const Platform& platform, const KernelRelease& r);

// Picks the release (--kernel, else the platform's, else the newest known) and resolves its rules.
// Throws InputError when a release is given but cannot be parsed.
KernelRules select_kernel_rules(const KernelRuleData& data, const Platform& platform,
                                const KernelRuleOptions& options);
// load_kernel_rule_data(dir) then select_kernel_rules().
KernelRules load_kernel_rules(const std::filesystem::path& dir, const Platform& platform,
                              const KernelRuleOptions& options);

}  // namespace p2paudit
