// SPDX-License-Identifier: GPL-2.0-or-later
// The command line as scripts use it: exit codes, one-line errors, the JSON contract, snapshots.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <nlohmann/json.hpp>

#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

test::CommandResult tool(const std::string& args, bool with_stderr = false) {
  return test::run_command(test::tool_file() + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

std::string h200() { return test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz"); }

bool live_machine_has_pci() {
  std::error_code ec;
  return fs::directory_iterator("/sys/bus/pci/devices", ec) != fs::directory_iterator();
}

// Fields that describe the capture rather than the machine.
json without_capture(json j) {
  j.erase("source");
  return j;
}

TEST(Cli, HelpAndVersionExitZero) {
  auto help = tool("--help");
  EXPECT_EQ(help.status, 0);
  for (const char* cmd : {"topology", "snapshot", "matrix", "explain", "--sysroot", "--format"})
    EXPECT_NE(help.output.find(cmd), std::string::npos) << cmd;
  auto version = tool("--version");
  EXPECT_EQ(version.status, 0);
  EXPECT_NE(version.output.find("p2paudit"), std::string::npos);
}

// Text: the decision first (policy_text_test.cpp has the details); JSON: the tree and the matrix.
TEST(Cli, NoCommandAuditsWithTheDecisionFirst) {
  auto text = tool("--sysroot " + h200());
  ASSERT_EQ(text.status, 0);
  EXPECT_EQ(text.output.rfind("kernel:", 0), 0u) << text.output;
  EXPECT_NE(text.output.find("\ngpu3 "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("HOST["), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("`p2paudit topology`"), std::string::npos) << text.output;
  auto j = json::parse(tool("--sysroot " + h200() + " --format json").output);
  EXPECT_EQ(j["topology"]["functions"].size(), 10u);
  EXPECT_EQ(j["matrix"]["pairs"].size(), 25u);  // four GPUs and the NIC, every ordered pair
}

TEST(Cli, MatrixJsonCarriesEveryPairsFactsAndDetailsOnRequest) {
  auto r = tool("--sysroot " + h200() + " matrix --all --format json");
  ASSERT_EQ(r.status, 0);
  json j = json::parse(r.output);
  EXPECT_EQ(j["schema_version"], 2);
  size_t n = j["devices"].size();
  ASSERT_EQ(n, 10u);
  ASSERT_EQ(j["pairs"].size(), n * n);
  for (size_t i = 0; i < j["pairs"].size(); ++i) {
    const auto& p = j["pairs"][i];
    EXPECT_EQ(p["provider"], j["devices"][i / n]["bdf"]);  // row-major
    EXPECT_EQ(p["client"], j["devices"][i % n]["bdf"]);
    EXPECT_FALSE(p.contains("reason"));
    if (i / n == i % n) EXPECT_EQ(p["map_type"], "BUS_ADDR");
  }
  // --details: the verdict as explain gives it, for the same pairs, with the same map types.
  json d = json::parse(tool("--sysroot " + h200() + " matrix --all --format json --details").output);
  ASSERT_EQ(d["pairs"].size(), n * n);
  for (size_t i = 0; i < n * n; ++i) {
    EXPECT_EQ(d["pairs"][i]["map_type"], j["pairs"][i]["map_type"]);
    EXPECT_EQ(d["pairs"][i]["p2pdma_distance"], j["pairs"][i]["p2pdma_distance"]);
    EXPECT_EQ(d["pairs"][i]["common_ancestor"], j["pairs"][i]["common_ancestor"]);
    EXPECT_FALSE(d["pairs"][i]["reason"].get<std::string>().empty());
  }
  auto e = json::parse(tool("--sysroot " + h200() + " explain " + j["pairs"][1]["provider"].get<std::string>() + " " +
                            j["pairs"][1]["client"].get<std::string>() + " --format json").output);
  EXPECT_EQ(e["pairs"][0]["reason"], d["pairs"][1]["reason"]);
}

TEST(Cli, MatrixWithoutDevicesIsStillADocument) {
  test::SysrootDir empty;  // a host bridge and nothing P2P is asked about
  empty.function("pci0000:00/0000:00:00.0", test::ConfigBytes(0x8086, 0x29c0, 0x060000, -1).bytes());
  json j = json::parse(tool("--sysroot " + empty.str() + " matrix --format json").output);
  EXPECT_TRUE(j["pairs"].is_array());
  EXPECT_TRUE(j["pairs"].empty());
  json audit = json::parse(tool("--sysroot " + empty.str() + " --format json").output);
  EXPECT_TRUE(audit["matrix"]["pairs"].empty());
}

std::string h200_vendor_facts() { return test::data_path("machines/h200x4-firecracker-vm/vendor-facts.json"); }

TEST(Cli, CheckExitCodesForScripts) {
  // NVIDIA's answer unknown: staged for now, but the driver may allow peer: unknown.
  auto unknown = tool("--sysroot " + h200() + " check gpu0 gpu1");
  EXPECT_EQ(unknown.status, 3);
  EXPECT_TRUE(unknown.output.starts_with("unknown: ")) << unknown.output;
  EXPECT_NE(unknown.output.find("vendor.peer_supported"), std::string::npos) << unknown.output;
  EXPECT_EQ(tool("--sysroot " + h200() + " check gpu0 gpu1 --vendor-facts " + h200_vendor_facts()).status, 0);
  EXPECT_EQ(tool("--sysroot " + h200() + " check gpu0 gpu1 --require host_staged").status, 0);  // staged either way
  // A certain "no": a site rule in front of everything refuses the pair whatever else is known.
  EXPECT_EQ(tool("--sysroot " + h200() + " check gpu0 gpu1 --require host_staged --rules " +
                 test::data_path("policy/site-deny-first.yaml")).status, 1);
  EXPECT_EQ(tool("--sysroot " + h200() + " check gpu0 gpu9").status, 2);
  EXPECT_EQ(tool("--sysroot " + h200() + " check gpu0").status, 2);
  auto j = tool("--sysroot " + h200() + " --format json check gpu0 gpu1");
  EXPECT_EQ(j.status, 3);
  EXPECT_EQ(json::parse(j.output)["answer"], "unknown");
  EXPECT_EQ(json::parse(j.output)["satisfied"], false);
}

// A capture without root: config space cut at 64 bytes, so ACS and with it the kernel's verdict
// are unknown for pairs whose path the kernel checks for ACS; with root the same pairs are known.
TEST(Cli, CheckIsUnknownWhereTheKernelVerdictIs) {
  std::string dir = ::testing::TempDir() + "/unpriv-check-" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir + "/full");
  fs::create_directories(dir + "/cut");
  std::string tarball = test::data_path("kernel-oracle/h-d1-rp-acs-rr-cr-mf-switch/sysroot.tar.gz");
  ASSERT_EQ(test::run_command("tar xzf " + tarball + " -C " + dir + "/full && tar xzf " + tarball + " -C " + dir +
                              "/cut && find " + dir + "/cut -name config -type f -exec truncate -s 64 {} +").status,
            0);
  // A policy of the kernel's verdict alone, so that only the verdict can leave an answer open.
  std::string kernel_only = " --no-default-rules --rules " + test::data_path("policy/kernel-only.yaml");
  auto check = [&](const std::string& which, const std::string& pair) {
    return tool("--sysroot " + dir + "/" + which + " check " + pair + kernel_only).status;
  };
  // Below one switch (the kernel's verdict BUS_ADDR, distance 4) and across the host bridge
  // (NOT_SUPPORTED): certain with root.
  EXPECT_EQ(check("full", "0000:03:00.0 0000:04:00.0"), 0);
  EXPECT_EQ(check("full", "0000:03:00.0 0000:05:00.0"), 1);
  // Without ACS the kernel's verdict is UNKNOWN: either map type may be the truth.
  EXPECT_EQ(check("cut", "0000:03:00.0 0000:04:00.0"), 3);
  EXPECT_EQ(check("cut", "0000:03:00.0 0000:04:00.0 --require host_staged"), 0);  // staging works either way
  // The default policy says so too: kernel-verdict-unknown decides host_staged, in place of a peer
  // rule further down.
  auto text = tool("--sysroot " + dir + "/cut check 0000:03:00.0 0000:04:00.0");
  EXPECT_EQ(text.status, 3);
  EXPECT_NE(text.output.find("kernel.map_type"), std::string::npos) << text.output;
  auto j = json::parse(tool("--sysroot " + dir + "/cut --format json check 0000:03:00.0 0000:04:00.0").output);
  EXPECT_EQ(j["answer"], "unknown");
  EXPECT_EQ(j["rule"], "kernel-verdict-unknown");
  EXPECT_EQ(j["kernel"]["map_type"], "UNKNOWN");
  fs::remove_all(dir);
}

// A site deny placed before the defaults decides pairs the default policy decides peer; the same
// rule after the defaults does not. policy --fail-on turns the decisions into an exit status.
TEST(Cli, SiteDenyPlacedFirstFiresAndFailOnReportsIt) {
  std::string facts = " --vendor-facts " + h200_vendor_facts();
  std::string first = " --rules " + test::data_path("policy/site-deny-first.yaml");
  std::string after = " --rules " + test::data_path("policy/site-deny-after.yaml");
  auto decisions = [&](const std::string& options) {
    auto r = tool("--sysroot " + h200() + " --format json policy" + facts + options);
    EXPECT_EQ(r.status, 0) << options;
    std::map<std::string, int> out;
    json doc = json::parse(r.output);
    for (const auto& pair : doc["pairs"]) ++out[pair["decision"].get<std::string>() + " " + pair["rule"].dump()];
    return out;
  };
  // The JSON lists each device with itself too (host_staged by the NVIDIA rules), and the NIC's 8 pairs.
  auto defaults = decisions("");
  EXPECT_EQ(defaults["peer \"nvlink\""], 12);
  EXPECT_EQ(decisions(after), defaults);
  auto placed = decisions(first);
  EXPECT_EQ(placed["deny \"site-no-gpu-peer\""], 12 + 4);
  EXPECT_EQ(placed.count("peer \"nvlink\""), 0u);
  EXPECT_EQ(placed["host_staged \"kernel-refuses\""], defaults["host_staged \"kernel-refuses\""]);
  EXPECT_EQ(tool("--sysroot " + h200() + " check gpu0 gpu1" + facts + after).status, 0);
  EXPECT_EQ(tool("--sysroot " + h200() + " check gpu0 gpu1" + facts + first).status, 1);

  auto fail_on = [&](const std::string& options) { return tool("--sysroot " + h200() + " policy" + options).status; };
  EXPECT_EQ(fail_on(facts + " --fail-on host_staged"), 1);  // the NIC's pairs are staged
  EXPECT_EQ(fail_on(facts + " --fail-on deny"), 0);         // no default rule denies
  EXPECT_EQ(fail_on(" --fail-on deny"), 0);
  EXPECT_EQ(fail_on(facts + first + " --fail-on deny"), 1);
  EXPECT_EQ(fail_on(facts + first + " --fail-on host_staged"), 1);  // deny is worse
  EXPECT_EQ(fail_on(" --fail-on peer"), 2);
  // Unknown: a placed deny that only an unknown fact (the NVIDIA driver's answer) could trigger.
  std::string maybe = ::testing::TempDir() + "/deny-if-refused-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(maybe) << "version: 1\nplacement: before-defaults\nrules:\n"
                          "- {id: deny-if-refused, when: {provider.class: gpu, client.class: gpu, vendor.peer_supported: false},"
                          " action: deny, reason: x}\n";
  EXPECT_EQ(fail_on(" --rules " + maybe + " --fail-on deny"), 3);
  EXPECT_EQ(fail_on(facts + " --rules " + maybe + " --fail-on deny"), 0);  // the driver says yes: no deny
  fs::remove(maybe);
}

TEST(Cli, PolicyJsonNamesEachPairsGroupAndGivesEachGroupOnce) {
  auto r = tool("--sysroot " + h200() + " policy --format json --vendor-facts " + h200_vendor_facts());
  ASSERT_EQ(r.status, 0);
  json j = json::parse(r.output);
  EXPECT_EQ(j["schema_version"], 2);
  ASSERT_EQ(j["pairs"].size(), 25u);
  std::map<int, int> members;
  for (const auto& p : j["pairs"]) {
    for (const char* key : {"provider", "client", "decision", "rule", "authority", "group"})
      EXPECT_TRUE(p.contains(key)) << key;
    EXPECT_TRUE(p["decision"] == "peer" || p["decision"] == "host_staged" || p["decision"] == "deny");
    ++members[p["group"].get<int>()];
  }
  ASSERT_GE(j["groups"].size(), 2u);  // NVLink pairs and the NIC's are decided differently
  for (const auto& g : j["groups"]) {
    int id = g["group"].get<int>();
    EXPECT_EQ(g["pairs"].get<int>(), members[id]) << id;
    for (const char* key : {"decision", "rule", "authority", "rules", "warnings", "unknown_facts", "example"})
      EXPECT_TRUE(g.contains(key)) << key;
    EXPECT_FALSE(g["example"]["reason"].get<std::string>().empty());
    for (const auto& p : j["pairs"])
      if (p["group"] == id) EXPECT_EQ(p["decision"], g["decision"]);
  }
  // --details: every pair's own texts and facts, in the same groups with the same decisions.
  json d = json::parse(tool("--sysroot " + h200() + " policy --details --format json --vendor-facts " + h200_vendor_facts()).output);
  ASSERT_EQ(d["pairs"].size(), 25u);
  for (size_t i = 0; i < 25; ++i) {
    const auto& p = d["pairs"][i];
    for (const char* key : {"provider", "client", "decision", "rule", "rules", "reasons", "remedies", "authority", "facts", "group"})
      EXPECT_TRUE(p.contains(key)) << key;
    EXPECT_EQ(p["decision"], j["pairs"][i]["decision"]);
    EXPECT_EQ(p["group"], j["pairs"][i]["group"]);
    EXPECT_EQ(p["rules"], j["groups"][p["group"].get<int>() - 1]["rules"]);
  }
}

TEST(Cli, PolicyTableLabelsEveryFunction) {
  auto r = tool("--sysroot " + h200() + " --verbose policy --all");
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("00:00.0 -> gpu0: host_staged"), std::string::npos) << r.output.substr(0, 400);
  EXPECT_EQ(r.output.find("\n -> "), std::string::npos);  // no pair without a label
  // The concise grid: a row per function, each starting with its label.
  auto concise = tool("--sysroot " + h200() + " policy --all").output;
  std::istringstream in(concise);
  std::string line;
  std::getline(in, line);  // the column labels
  size_t rows = 0;
  while (std::getline(in, line) && !line.empty()) {
    EXPECT_NE(line.front(), ' ') << line;
    ++rows;
  }
  auto j = json::parse(tool("--sysroot " + h200() + " policy --all --format json").output);
  EXPECT_EQ(rows, j["devices"].size());
}

TEST(Cli, EnvExportsFollowTheGpuDecisions) {
  auto staged = tool("--sysroot " + h200() + " --format env policy");
  ASSERT_EQ(staged.status, 0);
  EXPECT_NE(staged.output.find("export NCCL_P2P_DISABLE=1"), std::string::npos);
  EXPECT_NE(staged.output.find("unset GGML_CUDA_P2P"), std::string::npos);
  auto peer = tool("--sysroot " + h200() + " --format env policy --vendor-facts " + h200_vendor_facts());
  EXPECT_NE(peer.output.find("unset NCCL_P2P_DISABLE"), std::string::npos);
  EXPECT_NE(peer.output.find("export NCCL_P2P_LEVEL=NVL"), std::string::npos);
  EXPECT_NE(peer.output.find("export GGML_CUDA_P2P=1"), std::string::npos);
  auto sh = test::run_command("bash -n <<'EOF'\n" + peer.output + "\nEOF");
  EXPECT_EQ(sh.status, 0) << "not valid shell";
}

TEST(Cli, MalformedRuleFileGivesPositionsAndExitTwo) {
  std::string bad = ::testing::TempDir() + "/bad-policy.yaml";
  std::ofstream(bad) << "version: 1\nrules:\n  - id: x\n    when: {kernel.alowed: false}\n    action: peer\n    reason: r\n";
  auto r = tool("--sysroot " + h200() + " policy --rules " + bad, true);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find(bad + ":4:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kernel.allowed"), std::string::npos) << r.output;  // the did-you-mean hint
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(tool("no-such-command").status, 2);
  EXPECT_EQ(tool("--format yaml topology").status, 2);
  EXPECT_EQ(tool("--sysroot " + h200() + " --format env topology").status, 2);
  EXPECT_EQ(tool("--sysroot " + h200() + " --format env").status, 2);
}

TEST(Cli, MissingSysrootIsOneLineAndExitTwo) {
  auto r = tool("--sysroot /nonexistent/capture.tar.gz topology", true);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output, "p2paudit: /nonexistent/capture.tar.gz: no such file or directory\n");
}

TEST(Cli, TruncatedAndCorruptTarballsExitTwo) {
  std::string dir = ::testing::TempDir();
  std::ifstream in(h200(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 2000u);
  std::ofstream(dir + "/truncated.tar.gz", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::string corrupt = bytes;
  for (size_t i = 200; i < 400; ++i) corrupt[i] = static_cast<char>(~corrupt[i]);
  std::ofstream(dir + "/corrupt.tar.gz", std::ios::binary) << corrupt;
  std::ofstream(dir + "/text.tar.gz") << "not an archive\n";
  for (const char* name : {"truncated.tar.gz", "corrupt.tar.gz", "text.tar.gz"}) {
    std::string path = dir + "/" + name;
    auto r = tool("--sysroot " + path + " topology", true);
    EXPECT_EQ(r.status, 2) << name;
    EXPECT_EQ(r.output.rfind("p2paudit: " + path + ": ", 0), 0u) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

TEST(Cli, TopologyJsonContract) {
  auto r = tool("--sysroot " + test::data_path("kernel-oracle/h-f6-sriov-nvme/sysroot.tar.gz") + " topology --format json");
  ASSERT_EQ(r.status, 0);
  json j = json::parse(r.output);
  EXPECT_EQ(j["schema_version"], 1);
  ASSERT_TRUE(j["functions"].is_array());
  std::map<std::string, json> by_bdf;
  for (const auto& f : j["functions"]) {
    for (const char* key : {"bdf", "parent", "host_bridge", "vendor", "device", "acs_ctrl", "acs"})
      EXPECT_TRUE(f.contains(key)) << key;
    EXPECT_TRUE(std::regex_match(f["bdf"].get<std::string>(), std::regex("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]")));
    EXPECT_TRUE(std::regex_match(f["vendor"].get<std::string>(), std::regex("[0-9a-f]{4}")));
    EXPECT_TRUE(f["acs"] == "present" || f["acs"] == "absent" || f["acs"] == "unknown");
    EXPECT_EQ(f["acs_ctrl"].is_null(), f["acs"] != "present");
    by_bdf[f["bdf"]] = f;
  }
  EXPECT_TRUE(by_bdf.at("0000:00:00.0")["parent"].is_null());
  EXPECT_EQ(by_bdf.at("0000:00:00.0")["host_bridge"], "pci0000:00");
  EXPECT_EQ(by_bdf.at("0000:04:00.0")["parent"], "0000:03:00.0");
  EXPECT_EQ(by_bdf.at("0000:04:00.1")["physfn"], "0000:04:00.0");  // a VF of the NVMe behind the switch
  EXPECT_EQ(by_bdf.at("0000:00:01.0")["acs"], "present");
  EXPECT_EQ(by_bdf.at("0000:00:01.0")["pcie_type"], "Root Port");
}

TEST(Cli, SnapshotOfACaptureRoundTrips) {
  std::string out = ::testing::TempDir() + "/roundtrip-capture.tar.gz";
  std::filesystem::remove(out);  // an existing output is kept unless --force
  ASSERT_EQ(tool("--sysroot " + h200() + " snapshot -o " + out).status, 0);
  auto a = tool("--sysroot " + h200() + " topology --format json");
  auto b = tool("--sysroot " + out + " topology --format json");
  ASSERT_EQ(a.status, 0);
  ASSERT_EQ(b.status, 0);
  EXPECT_EQ(without_capture(json::parse(a.output)), without_capture(json::parse(b.output)));
}

TEST(Cli, SnapshotOfThisMachineRoundTrips) {
  if (!live_machine_has_pci()) GTEST_SKIP() << "this machine exposes no PCI devices";
  std::string out = ::testing::TempDir() + "/roundtrip-live.tar.gz";
  std::filesystem::remove(out);  // an existing output is kept unless --force
  ASSERT_EQ(tool("snapshot -o " + out).status, 0);
  auto live = tool("topology --format json");
  auto snap = tool("--sysroot " + out + " topology --format json");
  ASSERT_EQ(live.status, 0);
  ASSERT_EQ(snap.status, 0);
  EXPECT_EQ(without_capture(json::parse(live.output)), without_capture(json::parse(snap.output)));
}

TEST(Cli, SnapshotNeedsATarGzNameAndAWritablePlace) {
  EXPECT_EQ(tool("--sysroot " + h200() + " snapshot -o " + ::testing::TempDir() + "/capture.zip").status, 2);
  auto r = tool("--sysroot " + h200() + " snapshot -o /nonexistent/dir/capture.tar.gz", true);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("/nonexistent/dir/capture.tar.gz"), std::string::npos) << r.output;
}

TEST(Cli, SnapshotHoldsOnlyTheListedFiles) {
  std::string out = ::testing::TempDir() + "/listing.tar.gz";
  std::filesystem::remove(out);  // an existing output is kept unless --force
  ASSERT_EQ(tool("--sysroot " + h200() + " snapshot -o " + out).status, 0);
  auto listing = test::run_command("tar tzf " + out);
  ASSERT_EQ(listing.status, 0);
  std::istringstream in(listing.output);
  const std::regex allowed(
      "(p2paudit-capture\\.json|proc/(cpuinfo|cmdline|version|config\\.gz|sys/kernel/osrelease)|boot/config-.*|"
      "sys/bus/pci/devices/[0-9a-f:.]+|sys/class/pci_bus/[0-9a-f:]+|sys/kernel/iommu_groups/.*|"
      "(sys|sys/bus|sys/bus/pci|sys/bus/pci/devices|sys/class|sys/class/pci_bus|sys/kernel|proc|proc/sys|proc/sys/kernel|sys/devices)/?|"
      "sys/devices/(.*/)?pci[0-9a-f]+:[0-9a-f]+(/[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7])*/?"
      "(/(config|vendor|device|class|subsystem_vendor|subsystem_device|revision|resource|numa_node|local_cpulist|"
      "current_link_speed|current_link_width|max_link_speed|max_link_width|modalias|enable|driver|iommu_group|"
      "physfn|virtfn[0-9]+|p2pmem/?|p2pmem/(size|available|published)))?)");
  int entries = 0;
  for (std::string name; std::getline(in, name); ++entries) EXPECT_TRUE(std::regex_match(name, allowed)) << name;
  EXPECT_GT(entries, 10);
}

TEST(Cli, RedactedSnapshotDropsSerialNumbers) {
  std::string out = ::testing::TempDir() + "/redacted.tar.gz";
  std::filesystem::remove(out);  // an existing output is kept unless --force
  ASSERT_EQ(tool("--sysroot " + h200() + " snapshot --redact -o " + out).status, 0);
  json plain = json::parse(tool("--sysroot " + h200() + " topology --format json").output);
  json redacted = json::parse(tool("--sysroot " + out + " topology --format json").output);
  int gpus = 0;
  for (size_t i = 0; i < plain["functions"].size(); ++i) {
    if (plain["functions"][i]["serial_number"].is_null()) continue;
    ++gpus;
    EXPECT_NE(plain["functions"][i]["serial_number"], "0000000000000000");
    EXPECT_EQ(redacted["functions"][i]["serial_number"], "0000000000000000");
  }
  EXPECT_EQ(gpus, 4);
}

// `snapshot -o -`: the archive and nothing else on standard output, through a file and a pipe;
// what the command says goes to standard error; no file is created beside anything.
TEST(Cli, SnapshotToStandardOutputIsTheArchiveAlone) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("stdout-snapshot-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "cwd");
  const std::string in_cwd = "cd " + test::shell_quote((dir / "cwd").string()) + " && ";
  const std::string file = (dir / "redirected.tar.gz").string(), piped = (dir / "piped.tar.gz").string();
  const std::string err = (dir / "stderr").string(), json_err = (dir / "stderr.json").string();
  const std::string snapshot = test::tool_file() + " --sysroot " + test::shell_quote(h200()) + " snapshot -o -";
  ASSERT_EQ(test::run_command(in_cwd + snapshot + " > " + test::shell_quote(file) + " 2> " + test::shell_quote(err)).status, 0);
  ASSERT_EQ(test::run_command(in_cwd + snapshot + " --redact --format json 2> " + test::shell_quote(json_err) + " | cat > " +
                              test::shell_quote(piped)).status, 0);
  EXPECT_TRUE(fs::is_empty(dir / "cwd"));  // no temporary twin of "-"

  std::ifstream in(err);
  const std::string said{std::istreambuf_iterator<char>(in), {}};
  EXPECT_NE(said.find("wrote the archive to standard output"), std::string::npos) << said;
  std::ifstream jin(json_err);
  const json summary = json::parse(std::string{std::istreambuf_iterator<char>(jin), {}}, nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  EXPECT_EQ(summary["output"], "-");
  EXPECT_EQ(summary["redacted"], true);
  EXPECT_GT(summary["files"].get<int>(), 10);

  // Each is a whole archive that analyses like the machine it was taken of.
  const json expected = without_capture(json::parse(tool("--sysroot " + h200() + " topology --format json").output));
  for (const std::string& archive : {file, piped}) {
    auto listing = test::run_command("tar tzf " + test::shell_quote(archive) + " 2>&1");
    ASSERT_EQ(listing.status, 0) << archive << ": " << listing.output;
    EXPECT_NE(listing.output.find("p2paudit-capture.json"), std::string::npos) << archive;
    auto r = tool("--sysroot " + test::shell_quote(archive) + " topology --format json");
    ASSERT_EQ(r.status, 0) << archive;
    json got = without_capture(json::parse(r.output));
    if (archive == piped)  // redacted: serial numbers zeroed, the command line filtered
      for (auto& f : got["functions"]) f.erase("serial_number");
    json want = expected;
    if (archive == piped) {
      for (auto& f : want["functions"]) f.erase("serial_number");
      for (const char* redacted : {"cmdline", "kernel_version"}) {
        want["platform"].erase(redacted);
        got["platform"].erase(redacted);
      }
    }
    EXPECT_EQ(got, want) << archive;
  }
  fs::remove_all(dir);
}

TEST(Cli, SnapshotToStandardOutputRefusesATerminal) {
  if (test::run_command("command -v script >/dev/null").status != 0) GTEST_SKIP() << "script (util-linux) missing";
  const fs::path dir = fs::path(::testing::TempDir()) / ("tty-snapshot-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // script(1) gives the command a pseudo-terminal as standard output.
  const std::string inner = "cd " + test::shell_quote(dir.string()) + " && " + test::tool_file() + " --sysroot " +
                            test::shell_quote(h200()) + " snapshot -o - 2>&1; echo exit=$?";
  // script(1) runs $SHELL: as nobody (run_unprivileged) the login shell would be nologin.
  auto r = test::run_command("SHELL=/bin/sh script -qec " + test::shell_quote(inner) + " /dev/null < /dev/null");
  EXPECT_NE(r.output.find("p2paudit: -o -: standard output is a terminal"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exit=2"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\x1f\x8b"), std::string::npos);  // no gzip bytes on the terminal
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

// --redact keeps only the PCI, IOMMU and ACS parameters of the kernel command line and drops the
// builder of /proc/version: a host name in any of the usual places is nowhere in the archive.
TEST(Cli, RedactedSnapshotHoldsNoHostName) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("redact-cmdline-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Writable for whoever runs the test (the archive keeps read-only modes; nobody is not root).
  ASSERT_EQ(test::run_command("tar xzf " + test::shell_quote(h200()) + " -C " + test::shell_quote(dir.string()) +
                              " && chmod -R u+w " + test::shell_quote(dir.string())).status, 0);
  const fs::path root = dir / "sysroot";
  const std::string host = "zebrahost42";
  std::ofstream(root / "proc/cmdline")
      << "BOOT_IMAGE=/boot/vmlinuz-6.1.0-" + host + " root=/dev/mapper/" + host + "--vg-root ro systemd.hostname=" + host +
             " ip=10.0.0.2::10.0.0.1:255.255.255.0:" + host + ":eth0:off nfsroot=10.0.0.1:/srv/" + host +
             " hostname=" + host + " \"quoted=a " + host + "\" intel_iommu=on iommu=pt"
             " pci=disable_acs_redir=0000:00:01.0,noaer pcie_acs_override=downstream,multifunction iommu.strict=0"
             " vfio-pci.ids=10de:2335 pcie_aspm=off quiet console=ttyS0 " + host + " -- " + host + " single\n";
  std::ofstream(root / "proc/version") << "Linux version 6.1.0-18-amd64 (builder@" + host +
                                              ".example.com) (gcc-12 (Debian 12.2.0-14) 12.2.0) #1 SMP PREEMPT_DYNAMIC @0\n";
  fs::create_directories(root / "proc/sys/kernel");
  std::ofstream(root / "proc/sys/kernel/hostname") << host << "\n";

  const std::string plain = (dir / "plain.tar.gz").string(), redacted = (dir / "redacted.tar.gz").string();
  ASSERT_EQ(tool("--sysroot " + test::shell_quote(root.string()) + " snapshot -o " + test::shell_quote(plain)).status, 0);
  ASSERT_EQ(tool("--sysroot " + test::shell_quote(root.string()) + " snapshot --redact -o " + test::shell_quote(redacted)).status, 0);
  auto count = [&](const std::string& archive) {
    return test::run_command("gzip -dc " + test::shell_quote(archive) + " | grep -a -c " + host).output;
  };
  EXPECT_NE(count(plain), "0\n");  // the name is there to be found
  EXPECT_EQ(count(redacted), "0\n");

  json j = json::parse(tool("--sysroot " + test::shell_quote(redacted) + " topology --format json").output);
  EXPECT_EQ(j["platform"]["cmdline"],
            "intel_iommu=on iommu=pt pci=disable_acs_redir=0000:00:01.0,noaer pcie_acs_override=downstream,multifunction "
            "iommu.strict=0 vfio-pci.ids=10de:2335 pcie_aspm=off");
  EXPECT_EQ(j["platform"]["kernel_version"],
            "Linux version 6.1.0-18-amd64 (redacted@redacted) (gcc-12 (Debian 12.2.0-14) 12.2.0) #1 SMP PREEMPT_DYNAMIC @0");
  // What the analysis reads from the command line survives: --assume-acs-off's pci= option, the IOMMU mode.
  json plain_j = json::parse(tool("--sysroot " + test::shell_quote(plain) + " topology --format json").output);
  EXPECT_EQ(j["platform"]["iommu_mode"], plain_j["platform"]["iommu_mode"]);
  fs::remove_all(dir);
}

TEST(Cli, UnprivilegedReadShowsAcsUnknownNeverAbsent) {
  std::string as_nobody;
  if (::geteuid() == 0) {
    if (test::run_command("command -v setpriv >/dev/null").status != 0) GTEST_SKIP() << "setpriv missing";
    as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  // A root-only config read is what a live unprivileged run sees; a sysroot copy makes the test
  // independent of this machine's devices: config files cut at 64 bytes, readable by anyone.
  std::string dir = ::testing::TempDir() + "/unpriv-sysroot-" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_EQ(test::run_command("tar xzf " + test::data_path("kernel-oracle/h-d1-rp-acs-rr-cr-mf-switch/sysroot.tar.gz") +
                              " -C " + dir + " && find " + dir + " -name config -type f -exec truncate -s 64 {} + && chmod -R a+rX " +
                              dir + " && (chmod a+x " + ::testing::TempDir() + " 2>/dev/null || true)")
                .status,
            0);
  // nobody may not reach the build tree (a clone in a 0700 home directory such as /root): it runs
  // a copy of the tool, pointed at a copy of the rules beside it.
  std::string tool = test::tool_file();
  std::string rules_copy = dir + "-rules";
  if (!as_nobody.empty()) {
    tool = dir + "-p2paudit";
    fs::copy_file(test::tool_file(), tool, fs::copy_options::overwrite_existing);
    fs::permissions(tool, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    fs::remove_all(rules_copy);
    fs::copy(test::rules_source(), rules_copy, fs::copy_options::recursive);
    ASSERT_EQ(test::run_command("chmod -R a+rX " + rules_copy).status, 0);
    as_nobody = "env P2PAUDIT_RULES_DIR=" + rules_copy + " " + as_nobody;
  }
  auto r = test::run_command(as_nobody + tool + " --sysroot " + dir + " topology --format json");
  ASSERT_EQ(r.status, 0);
  json j = json::parse(r.output);
  EXPECT_FALSE(j["config_fully_readable"].get<bool>());
  for (const auto& f : j["functions"]) EXPECT_EQ(f["acs"], "unknown") << f["bdf"];
  ASSERT_FALSE(j["notes"].empty());
  EXPECT_NE(j["notes"][0].get<std::string>().find("root"), std::string::npos);
  auto text = test::run_command(as_nobody + tool + " --sysroot " + dir + " topology");
  EXPECT_NE(text.output.find("ACS unknown"), std::string::npos);
  EXPECT_EQ(text.output.find("no ACS"), std::string::npos);
  // The first screen reads the rules: as nobody it reaches them wherever the clone is.
  auto screen = test::run_command(as_nobody + tool + " --sysroot " + dir + " policy --format json");
  ASSERT_EQ(screen.status, 0) << screen.output;
  EXPECT_FALSE(json::parse(screen.output)["pairs"].empty());
  fs::remove_all(dir);
  if (!as_nobody.empty()) fs::remove(tool), fs::remove_all(rules_copy);
}

}  // namespace
}  // namespace p2paudit
