// SPDX-License-Identifier: GPL-2.0-or-later
// Evidence with provenance for whitelist candidates (docs/whitelist.md, "Evidence" and "Statuses"):
// a copy counts for a host bridge only when it was measured and crossed it as peer traffic; a
// claim is shown as a claim; public reports and upstream's queued and proposed entries set the
// status; a VM's host bridge is named as the emulated one it is.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "p2paudit/errors.h"
#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/probe/runtime_facts.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "synthetic_tree.h"
#include "test_support.h"

namespace p2paudit::fleet {
namespace {

namespace fs = std::filesystem;
const fs::path kRules = fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel";
const fs::path kOracle = fs::path(P2PAUDIT_TEST_DATA) / "kernel-oracle";

// A fresh directory name under the temporary directory.
std::string fmt_dir() {
  static int n = 0;
  return "p2paudit-evidence-" + std::to_string(::getpid()) + "-" + std::to_string(++n);
}

// Two Intel GPUs (xe) on two root ports of the host bridge whose root device is vendor:device.
test::Tree two_gpus_on_root_ports(uint16_t vendor, uint16_t device, const std::string& name) {
  test::Tree tree;
  tree.host_dev(vendor, device);
  tree.t.functions.back().device_name = name;
  tree.t.functions.back().class_code = 0x060000;
  tree.rp("00:01.0");
  tree.rp("00:06.0");
  tree.describe(tree.add("03:00.0", "00:01.0", 0x8086, 0xe223, PcieType::kEndpoint), 0x030000, "xe");
  tree.describe(tree.add("07:00.0", "00:06.0", 0x8086, 0xe223, PcieType::kEndpoint), 0x030000, "xe");
  return tree;
}

KernelRules rules(const Topology& topo, const std::vector<std::string>& kernel_rules = {}) {
  KernelRuleOptions options;
  options.kernel = "7.0.0";
  options.kernel_rules = kernel_rules;
  return load_kernel_rules(kRules, topo.platform, options);
}

// A --kernel-rules file: the running kernel was booted with this entry added to its table.
std::string booted_with(uint16_t device) {
  fs::path dir = fs::temp_directory_path() / fmt_dir();
  fs::create_directories(dir);
  fs::path file = dir / "booted.yaml";
  std::ofstream(file) << "schema: 1\nentries:\n  - {vendor: \"8086\", device: \"" << std::hex << device
                      << "\", same_host_bridge: true}\n";
  return file.string();
}

// The probe's JSON as `snapshot --probe --copy` stores it: Level Zero on both GPUs, each direction's
// peer copy with `result` (failed: zeCommandListAppendMemoryCopy returned 0x70000003).
nlohmann::json level_zero_document(const std::string& result) {
  nlohmann::json copy = {{"peer", {{"result", result}}}};
  if (result == "failed") copy["peer"]["phase"] = "zeCommandListAppendMemoryCopy", copy["peer"]["error"] = "0x70000003";
  if (result == "verified") copy["peer"]["gbps"] = 24.8;
  nlohmann::json answers = {{"can_access_peer", result == "verified" ? "ok" : "not_supported"}, {"copy", copy}};
  return {{"schema_version", probe::kProbeSchemaVersion},
          {"source", "snapshot"},
          {"copy", {{"size_bytes", 268435456}, {"repeat", 3}}},
          {"runtimes",
           {{{"runtime", "level_zero"},
             {"status", "ok"},
             {"devices",
              {{{"bdf", "0000:03:00.0"}, {"pci_id", "8086:e223"}, {"name", "B70"}},
               {{"bdf", "0000:07:00.0"}, {"pci_id", "8086:e223"}, {"name", "B70"}}}},
             {"pairs",
              {{{"provider", 0}, {"client", 1}, {"answers", answers}},
               {{"provider", 1}, {"client", 0}, {"answers", answers}}}}}}}};
}

policy::VendorFactsDocument measured(const test::Tree& tree, const std::string& result) {
  auto facts = probe::runtime_facts(level_zero_document(result), "snapshot.tar.gz: probe.json", &tree.t);
  EXPECT_TRUE(facts.findings.empty());
  EXPECT_EQ(facts.facts.pairs.size(), 2u) << "both directions bound to the tree";
  return std::move(facts.facts);
}

WhitelistCandidate only(const std::vector<WhitelistCandidate>& all) {
  EXPECT_EQ(all.size(), 1u);
  return all.at(0);
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// The issue's first defect: a stored 0x70000003 under a kernel that refuses the pair counted
// against the host bridge. Nothing went through it: no evidence, never rejected.
TEST(WhitelistEvidence, StoredLevelZeroFailureUnderRefusingKernelIsNoEvidence) {
  auto tree = two_gpus_on_root_ports(0x8086, 0xa700, "Raptor Lake host bridge");
  auto failed = measured(tree, "failed");
  const auto c = only(whitelist_candidates(tree.t, rules(tree.t), &failed));
  EXPECT_EQ(c.status, CandidateStatus::kNeedsEvidence);
  EXPECT_EQ(c.failed_copies, 0u);
  EXPECT_EQ(c.measured_not_peer, 2u);
  ASSERT_EQ(c.pairs.size(), 2u);
  for (const auto& p : c.pairs) {
    EXPECT_EQ(p.copy_result, "") << "not counted";
    EXPECT_EQ(p.seen_copy_result, "failed");
    EXPECT_EQ(p.copy_provenance, "measured");
    EXPECT_EQ(p.copy_runtime, "level_zero");
    EXPECT_NE(p.copy_note.find("refuses this pair"), std::string::npos) << p.copy_note;
  }
  EXPECT_NE(joined(c.missing).find("did not cross the host bridge as peer traffic"), std::string::npos) << joined(c.missing);
  // How the stored copies were run, from the probe document (a snapshot's probe.json).
  EXPECT_EQ(copy_run_of(nlohmann::json::parse(level_zero_document("failed").dump())),
            "268435456 bytes, 3 repeat(s), every byte compared");
  EXPECT_EQ(copy_run_of(nlohmann::json::parse(R"({"copy": {"size_bytes": -1, "repeat": 3}})")), "");

  // The same failure under a kernel booted with the entry (--kernel-rules) went through the host
  // bridge as peer traffic: that one rejects it.
  KernelRules booted = rules(tree.t, {booted_with(0xa700)});
  const auto b = only(whitelist_candidates(tree.t, booted, &failed));
  EXPECT_EQ(b.status, CandidateStatus::kDoNotSubmit);
  EXPECT_EQ(b.failed_copies, 2u);
  EXPECT_EQ(b.status_reason.rfind("rejected: ", 0), 0u) << b.status_reason;
  for (const auto& p : b.pairs) EXPECT_TRUE(p.run_kernel_allowed);

  // And the Xeon E5 v4 host bridge of the issue stays queued upstream, not rejected.
  auto xeon = two_gpus_on_root_ports(0x8086, 0x6f00, "Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D DMI2");
  auto xeon_failed = measured(xeon, "failed");
  const auto x = only(whitelist_candidates(xeon.t, rules(xeon.t), &xeon_failed));
  EXPECT_EQ(x.status, CandidateStatus::kQueuedUpstream);
  EXPECT_EQ(x.failed_copies, 0u);
}

// A hand-written vendor facts file claiming verified copies both ways is shown as claimed and
// never makes a candidate ready; the same results measured under a kernel with the entry do.
TEST(WhitelistEvidence, ClaimIsShownAsClaimedAndCannotBeReady) {
  auto tree = two_gpus_on_root_ports(0x8086, 0xa700, "Raptor Lake host bridge");
  auto claim = policy::VendorFactsDocument::parse(
      R"({"schema_version": 1, "pairs": [
           {"provider": "0000:03:00.0", "client": "0000:07:00.0", "facts": {"vendor.copy_result": "verified", "vendor.copy_runtime": "level_zero"}},
           {"provider": "0000:07:00.0", "client": "0000:03:00.0", "facts": {"vendor.copy_result": "verified", "vendor.copy_runtime": "level_zero"}}]})",
      "claims.json");
  WhitelistOptions options;
  options.claimed = &claim;
  for (const auto& kernel : {rules(tree.t), rules(tree.t, {booted_with(0xa700)})}) {
    const auto c = only(whitelist_candidates(tree.t, kernel, nullptr, options));
    EXPECT_EQ(c.status, CandidateStatus::kNeedsEvidence);
    EXPECT_EQ(c.claimed_copies, 2u);
    EXPECT_TRUE(c.verified.empty());
    for (const auto& p : c.pairs) {
      EXPECT_EQ(p.copy_provenance, "claimed");
      EXPECT_EQ(p.copy_result, "");
    }
    auto j = candidate_json(tree.t, c);
    ASSERT_EQ(j["evidence"]["copies"].size(), 2u);
    EXPECT_EQ(j["evidence"]["copies"][0]["provenance"], "claimed");
    EXPECT_EQ(j["evidence"]["copies"][0]["counts"], false);
    // Counted, not kept (report, prom, aggregate): the copies are listed all the same.
    WhitelistOptions counted = options;
    counted.count_pairs_only = true;
    EXPECT_EQ(candidate_json(tree.t, only(whitelist_candidates(tree.t, kernel, nullptr, counted)))["evidence"], j["evidence"]);
    EXPECT_NE(joined(c.missing).find("a claim is not a measurement"), std::string::npos);
  }

  auto verified = measured(tree, "verified");
  // Measured, but under the refusing kernel with a P2PDMA runtime: the copy was not peer traffic.
  EXPECT_EQ(only(whitelist_candidates(tree.t, rules(tree.t), &verified)).status, CandidateStatus::kNeedsEvidence);
  // Measured under the kernel booted with the entry, both directions: ready.
  const auto ready = only(whitelist_candidates(tree.t, rules(tree.t, {booted_with(0xa700)}), &verified));
  EXPECT_EQ(ready.status, CandidateStatus::kReadyToSubmit);
  EXPECT_EQ(ready.verified.size(), 2u);
  EXPECT_TRUE(ready.missing.empty());
}

// One direction is not enough: the other puts the other device's memory at the reading end.
TEST(WhitelistEvidence, ReadyNeedsBothDirections) {
  auto tree = two_gpus_on_root_ports(0x8086, 0xa700, "Raptor Lake host bridge");
  auto doc = level_zero_document("verified");
  doc["runtimes"][0]["pairs"].erase(1);
  auto facts = probe::runtime_facts(doc, "probe.json", &tree.t);
  const auto c = only(whitelist_candidates(tree.t, rules(tree.t, {booted_with(0xa700)}), &facts.facts));
  EXPECT_EQ(c.verified.size(), 1u);
  EXPECT_EQ(c.status, CandidateStatus::kNeedsEvidence);
  EXPECT_NE(joined(c.missing).find("both directions"), std::string::npos);
}

// Seed case 1: Rocket Lake-S 8086:4c43. Forcing the entry gave 100% wrong data
// (intel/compute-runtime#935): do not submit, whatever a claim or the machine says.
TEST(WhitelistEvidence, RocketLakeIsDoNotSubmitCitingTheReport) {
  auto tree = two_gpus_on_root_ports(0x8086, 0x4c43, "Rocket Lake-S 8c Host Bridge/DRAM Registers");
  for (const auto& kernel : {rules(tree.t), rules(tree.t, {booted_with(0x4c43)})}) {
    auto verified = measured(tree, "verified");
    const auto c = only(whitelist_candidates(tree.t, kernel, &verified));
    EXPECT_EQ(c.status, CandidateStatus::kDoNotSubmit);
    EXPECT_EQ(std::string(to_string(c.status)), "do not submit");
    EXPECT_EQ(c.status_reason.rfind("rejected: public report of wrong data", 0), 0u) << c.status_reason;
    EXPECT_NE(c.status_reason.find("https://github.com/intel/compute-runtime/issues/935"), std::string::npos);
    EXPECT_EQ(candidate_json(tree.t, c)["status_reason"], c.status_reason);
  }
}

// 8086:6f00 is queued on the pci tree's p2pdma branch: named with its commit, not proposed again.
TEST(WhitelistEvidence, XeonE5v4IsQueuedUpstreamWithItsCommit) {
  auto tree = two_gpus_on_root_ports(0x8086, 0x6f00, "Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D DMI2");
  const auto c = only(whitelist_candidates(tree.t, rules(tree.t), nullptr));
  EXPECT_EQ(c.status, CandidateStatus::kQueuedUpstream);
  ASSERT_TRUE(c.upstream);
  EXPECT_EQ(c.upstream->id, "e7b44579a6b4");
  EXPECT_EQ(c.upstream->date, "2026-10-07");
  auto j = candidate_json(tree.t, c);
  EXPECT_EQ(j["status"], "queued upstream");
  EXPECT_EQ(j["upstream"]["id"], "e7b44579a6b4");
  EXPECT_NE(joined(evidence_lines(c)).find("queued upstream: \"PCI/P2PDMA: Add Intel Xeon E3 v4/E5 v4/E7 v4 host bridge to allowlist\" "
                                           "(commit e7b44579a6b4"),
            std::string::npos)
      << joined(evidence_lines(c));
  EXPECT_TRUE(c.emulated.empty()) << "bare metal";
}

// QEMU q35's 8086:29c0 on the kernel-oracle capture of a q35 guest: proposed upstream (April 2025)
// and named as the VM's emulated host bridge. The same ID on bare metal (a G33 board) is not.
TEST(WhitelistEvidence, QemuQ35IsProposedUpstreamAndFlaggedEmulated) {
  Sysroot root = Sysroot::open((kOracle / "h-a-two-rootports-intel" / "sysroot.tar.gz").string());
  Topology topo = read_topology(root);
  ASSERT_TRUE(topo.platform.hypervisor) << "the capture is a QEMU guest";
  auto all = whitelist_candidates(topo, load_kernel_rules(kRules, topo.platform, {}), nullptr, {true});
  const WhitelistCandidate* q35 = nullptr;
  for (const auto& c : all)
    if (c.id() == "8086:29c0") q35 = &c;
  ASSERT_NE(q35, nullptr);
  EXPECT_EQ(q35->status, CandidateStatus::kProposedUpstream);
  ASSERT_TRUE(q35->upstream);
  EXPECT_EQ(q35->upstream->date, "2025-04-14");
  EXPECT_NE(q35->upstream->link.find("lore.kernel.org"), std::string::npos);
  EXPECT_NE(q35->emulated.find("QEMU q35"), std::string::npos) << q35->emulated;
  auto j = candidate_json(topo, *q35);
  EXPECT_EQ(j["status"], "proposed upstream");
  EXPECT_NE(j["emulated_host_bridge"].get<std::string>().find("emulated"), std::string::npos);
  EXPECT_NE(joined(evidence_lines(*q35)).find("virtual machine: "), std::string::npos);

  auto metal = two_gpus_on_root_ports(0x8086, 0x29c0, "82G33/G31/P35/P31 Express DRAM Controller");
  ASSERT_FALSE(metal.t.platform.hypervisor);
  EXPECT_TRUE(only(whitelist_candidates(metal.t, rules(metal.t), nullptr)).emulated.empty());
  // Any host bridge of a guest is its hypervisor's, known ID or not.
  auto guest = two_gpus_on_root_ports(0x8086, 0xa700, "Raptor Lake host bridge");
  guest.t.platform.hypervisor = true;
  EXPECT_FALSE(only(whitelist_candidates(guest.t, rules(guest.t), nullptr)).emulated.empty());
}

// The CLI: the claim is printed as such and the status stays needs evidence; JSON carries it.
TEST(WhitelistEvidence, CommandShowsProvenanceAndUpstream) {
  std::string sysroot = (kOracle / "h-a-two-rootports-intel" / "sysroot.tar.gz").string();
  auto r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(sysroot) + " whitelist");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("8086:29c0 82G33/G31/P35/P31 Express DRAM Controller [pci0000:00]: proposed upstream"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("proposed upstream: \"p2pdma: Whitelist the QEMU host bridge for x86_64\""), std::string::npos);
  EXPECT_NE(r.output.find("virtual machine: the VM's emulated host bridge (QEMU q35, emulated ICH9 MCH)"), std::string::npos)
      << r.output;

  // A hand-written file claiming verified copies both ways: printed as claimed, not counted.
  fs::path dir = fs::temp_directory_path() / fmt_dir();
  fs::create_directories(dir);
  std::string facts = (dir / "claims.json").string();
  std::ofstream(facts) << R"({"schema_version": 1, "pairs": [
      {"provider": "0000:01:00.0", "client": "0000:02:00.0", "facts": {"vendor.copy_result": "verified"}},
      {"provider": "0000:02:00.0", "client": "0000:01:00.0", "facts": {"vendor.copy_result": "verified"}}]})";
  r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(sysroot) +
                        " --format json whitelist --no-probe --vendor-facts " + test::shell_quote(facts));
  ASSERT_EQ(r.status, 0) << r.output;
  auto j = nlohmann::json::parse(r.output)["candidates"].at(0);
  EXPECT_EQ(j["status"], "proposed upstream");
  EXPECT_EQ(j["evidence"]["claimed_copies"], 2);
  EXPECT_EQ(j["evidence"]["verified_pairs"], 0);
  for (const auto& p : j["pairs"]) EXPECT_TRUE(p["copy_result"].is_null());
  r = test::run_command(std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(sysroot) +
                        " whitelist --no-probe --vendor-facts " + test::shell_quote(facts));
  EXPECT_NE(r.output.find("nvme0 -> nic0 (copy verified claimed, not counted)"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

// One text per fact: the status the kernel's remedy quotes for a refused host bridge's entry is the
// one `whitelist` gives, from the same rule data (entry_rule_status()): rejected by a public report
// (8086:4c43), queued on the PCI tree's p2pdma branch (8086:6f00), proposed on the list (8086:29c0),
// in a later release (8086:0b25, 7.2, analysed as 7.0), or nothing known (the copies decide).
TEST(WhitelistEvidence, RemedyQuotesTheStatusWhitelistGives) {
  struct Case {
    uint16_t device;
    CandidateStatus status;
  };
  for (const Case& k : {Case{0x4c43, CandidateStatus::kDoNotSubmit}, Case{0x6f00, CandidateStatus::kQueuedUpstream},
                        Case{0x29c0, CandidateStatus::kProposedUpstream}, Case{0x0b25, CandidateStatus::kFixedIn},
                        Case{0xa700, CandidateStatus::kNeedsEvidence}}) {
    auto tree = two_gpus_on_root_ports(0x8086, k.device, "host bridge");
    KernelRules kernel = rules(tree.t);
    const auto c = only(whitelist_candidates(tree.t, kernel, nullptr));
    ASSERT_EQ(c.status, k.status) << c.id();
    auto v = pci_p2pdma_distance(tree.t, kernel, tree.index("03:00.0"), tree.index("07:00.0"));
    ASSERT_EQ(v.map_type, MapType::kNotSupported) << c.id();
    std::string remedy = joined(v.remedy.alternatives);
    EntryRuleStatus data = entry_rule_status(kernel, c.vendor, c.device);
    EXPECT_NE(remedy.find(data.remedy_text()), std::string::npos) << c.id() << ": " << remedy;
    EXPECT_EQ(remedy.find("needs evidence"), std::string::npos) << c.id() << ": " << remedy;
    EXPECT_EQ(remedy.find("https://"), std::string::npos) << "no address: the page names none; " << remedy;
    if (k.status == CandidateStatus::kNeedsEvidence) {
      // Only measured copies can decide: the remedy says so and names no status of its own.
      EXPECT_EQ(data.status, EntryDataStatus::kOpen);
      EXPECT_NE(remedy.find("measured peer copies"), std::string::npos) << remedy;
      continue;
    }
    // The words `whitelist` prints for the candidate are in the remedy.
    EXPECT_NE(remedy.find(std::string(c.id()) + ": " + to_string(c.status)), std::string::npos) << c.id() << ": " << remedy;
    EXPECT_EQ(data.fixed_in, c.fixed_in);
    EXPECT_EQ(data.upstream.has_value(), c.upstream.has_value());
    EXPECT_EQ(data.reports, c.reports);
    if (k.status == CandidateStatus::kDoNotSubmit) {
      EXPECT_EQ(data.reason(), c.status_reason);
      EXPECT_NE(remedy.find("public report of wrong data: " + data.wrong_data->summary), std::string::npos) << remedy;
      EXPECT_NE(data.reason().find("https://github.com/intel/compute-runtime/issues/935"), std::string::npos);
      EXPECT_EQ(remedy.find("--assume-whitelisted 8086:4c43"), std::string::npos) << "no invitation to force it";
    }
    if (k.status == CandidateStatus::kQueuedUpstream) {
      EXPECT_NE(remedy.find("commit e7b44579a6b4"), std::string::npos) << remedy;
      EXPECT_NE(remedy.find("branch p2pdma"), std::string::npos) << remedy;
    }
    if (k.status == CandidateStatus::kFixedIn) EXPECT_NE(remedy.find("fixed in " + c.fixed_in), std::string::npos) << remedy;
  }
  // A measured copy that failed rejects the entry on this machine only: the rule data (and so the
  // remedy, which reads no copies) stays open.
  auto tree = two_gpus_on_root_ports(0x8086, 0xa700, "host bridge");
  auto failed = measured(tree, "failed");
  const auto c = only(whitelist_candidates(tree.t, rules(tree.t, {booted_with(0xa700)}), &failed));
  EXPECT_EQ(c.status, CandidateStatus::kDoNotSubmit);
  EXPECT_EQ(entry_rule_status(rules(tree.t), 0x8086, 0xa700).status, EntryDataStatus::kOpen);
}

// The queued entry reads "queued upstream" wherever a status is printed: the command's text and
// JSON, and `explain`'s remedy.
TEST(WhitelistEvidence, QueuedEntryIsQueuedEverywhere) {
  auto tree = two_gpus_on_root_ports(0x8086, 0x6f00, "Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D DMI2");
  KernelRules kernel = rules(tree.t);
  const auto c = only(whitelist_candidates(tree.t, kernel, nullptr));
  EXPECT_EQ(candidate_json(tree.t, c)["status"], "queued upstream");
  auto many = pci_p2pdma_distance_many(tree.t, kernel, tree.index("03:00.0"), {tree.index("07:00.0")});
  std::string text = explain_text(tree.t, kernel, many);
  EXPECT_NE(text.find("a whitelist entry for 8086:6f00: queued upstream"), std::string::npos) << text;
  EXPECT_EQ(text.find("needs evidence"), std::string::npos) << text;
}

// upstream.yaml is read as strictly as the other rule files.
TEST(WhitelistEvidence, UpstreamFileIsStrict) {
  auto data = load_kernel_rule_data(kRules);
  ASSERT_FALSE(data.upstream.entries.empty());
  auto error = [](const std::string& text) {
    try {
      parse_upstream_file(text, "u.yaml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string entry = R"(  - {vendor: "8086", device: "6f00", state: queued, id: e7b44579a6b4, date: "2026-10-07", subject: s, where: w, link: "https://x.org/a"})";
  const std::string tail = "\nreports: []\nemulated_host_bridges: []\n";
  EXPECT_EQ(error("schema: 1\nentries:\n" + entry + tail), "");
  EXPECT_NE(error("schema: 1\nentries:\n" + entry + "\n" + entry + tail).find("duplicate entry 8086:6f00"), std::string::npos);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string e = entry;
    e.replace(e.find(from), from.size(), to);
    return "schema: 1\nentries:\n" + e + tail;
  };
  EXPECT_NE(error(with("state: queued", "state: merged")).find("'state' must be queued or proposed"), std::string::npos);
  EXPECT_NE(error(with("2026-10-07", "7 Oct 2026")).find("'date' must be YYYY-MM-DD"), std::string::npos);
  EXPECT_NE(error(with("https://x.org/a", "http://x.org/a")).find("https:// URL"), std::string::npos);
  EXPECT_NE(error(with("subject: s", "subject: \"a\\x1b[2Jb\"")).find("write plain text"), std::string::npos);
  EXPECT_NE(error(with("subject: s", "subjekt: s")).find("unknown key"), std::string::npos);
  EXPECT_NE(error("schema: 1\nentries: []\n").find("'reports' must be a list"), std::string::npos);
}

}  // namespace
}  // namespace p2paudit::fleet
