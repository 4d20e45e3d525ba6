// SPDX-License-Identifier: GPL-2.0-or-later
// Bandwidth against the path (docs/probe.md): the ceiling of a pair's path on synthetic trees and on
// the recorded 2x H200 machine, an unknown link that leaves it unknown, and the decision when a
// verified peer copy is slower than staging through host memory (rule copy-slower-than-staged).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "p2paudit/path_ceiling.h"
#include "p2paudit/policy/device_knowledge.h"
#include "p2paudit/probe/runtime_facts.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* kH200Dir = "machines/h200x2-firecracker-vm";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// "16.0 GT/s PCIe" and x16 in sysfs for the function at sysfs_dir.
void set_link(test::SysrootDir& s, const std::string& sysfs_dir, const std::string& gts, int width) {
  s.write("sys/devices/" + sysfs_dir + "/current_link_speed", gts + " GT/s PCIe\n");
  s.write("sys/devices/" + sysfs_dir + "/current_link_width", std::to_string(width) + "\n");
}

// Host bridge, root port 00:01.0 -> switch (USP 01:00.0, DSPs 02:01.0 and 02:02.0) -> GPUs 03:00.0
// and 04:00.0, and a second root port 00:02.0 -> GPU 05:00.0. Each link as given.
class SwitchMachine {
 public:
  SwitchMachine() {
    s.function("pci0000:00/0000:00:00.0", test::ConfigBytes(0x8086, 0x1234, 0x060000, 9).bytes());
    s.function(rp, test::ConfigBytes(0x8086, 0x1235, 0x060400, test::kRootPort, true).buses(0, 1, 4).bytes());
    s.function(usp, test::ConfigBytes(0x10b5, 0xc010, 0x060400, test::kSwitchUp, true).buses(1, 2, 4).bytes());
    s.function(dsp1, test::ConfigBytes(0x10b5, 0xc010, 0x060400, test::kSwitchDown, true).buses(2, 3, 3).bytes());
    s.function(dsp2, test::ConfigBytes(0x10b5, 0xc010, 0x060400, test::kSwitchDown, true).buses(2, 4, 4).bytes());
    s.function(rp2, test::ConfigBytes(0x8086, 0x1236, 0x060400, test::kRootPort, true).buses(0, 5, 5).bytes());
    test::gpu_with_bar(s, gpu_a, 0x10de, 0x26b9, "nvidia", 1ull << 40, 1ull << 30);
    test::gpu_with_bar(s, gpu_b, 0x10de, 0x26b9, "nvidia", 2ull << 40, 1ull << 30);
    test::gpu_with_bar(s, gpu_c, 0x10de, 0x26b9, "nvidia", 3ull << 40, 1ull << 30);
    set_link(s, rp, "16.0", 4);  // the switch's uplink: x4
    set_link(s, usp, "16.0", 4);
    set_link(s, dsp1, "16.0", 16);
    set_link(s, gpu_a, "16.0", 16);
    set_link(s, dsp2, "8.0", 8);
    set_link(s, gpu_b, "8.0", 8);
    set_link(s, rp2, "32.0", 16);
    set_link(s, gpu_c, "32.0", 16);
  }
  Topology read() {
    Sysroot root = Sysroot::open(s.str());
    return read_topology(root);
  }
  size_t at(const Topology& t, const char* bdf) { return *t.index_of(*Bdf::parse(bdf)); }

  test::SysrootDir s;
  const std::string rp = "pci0000:00/0000:00:01.0", usp = rp + "/0000:01:00.0", dsp1 = usp + "/0000:02:01.0",
                    dsp2 = usp + "/0000:02:02.0", gpu_a = dsp1 + "/0000:03:00.0", gpu_b = dsp2 + "/0000:04:00.0",
                    rp2 = "pci0000:00/0000:00:02.0", gpu_c = rp2 + "/0000:05:00.0";
};

TEST(PathCeiling, LaneRatesOfEveryPcieGeneration) {
  // Per lane and direction after encoding: 8b/10b below 8 GT/s, 128b/130b from 8 to 32 GT/s.
  EXPECT_DOUBLE_EQ(*pcie_lane_gbps(2.5), 2.5 * 8 / 10 / 8);
  EXPECT_DOUBLE_EQ(*pcie_lane_gbps(5.0), 5.0 * 8 / 10 / 8);
  EXPECT_NEAR(*pcie_lane_gbps(8.0), 8.0 * 128 / 130 / 8, 0.001);
  EXPECT_NEAR(*pcie_lane_gbps(16.0), 16.0 * 128 / 130 / 8, 0.001);
  EXPECT_NEAR(*pcie_lane_gbps(32.0), 32.0 * 128 / 130 / 8, 0.001);
  EXPECT_NEAR(*pcie_lane_gbps(64.0), 7.563, 0.001);
  EXPECT_FALSE(pcie_lane_gbps(128.0)) << "a rate that is not in the table is unknown, never extrapolated";
  EXPECT_FALSE(pcie_lane_gbps(0));
}

TEST(PathCeiling, BelowOneSwitchTheNarrowestLinkLimitsAndTheUplinkIsNotCrossed) {
  SwitchMachine m;
  Topology t = m.read();
  PathCeiling c = pcie_path_ceiling(t, m.at(t, "0000:03:00.0"), m.at(t, "0000:04:00.0"));
  ASSERT_TRUE(c.gbps) << c.missing;
  // GPU B's 8 GT/s x8 is narrower than GPU A's 16 GT/s x16; the switch's x4 uplink is not on the path.
  EXPECT_NEAR(*c.gbps, *pcie_lane_gbps(8.0) * 8, 1e-9);
  EXPECT_NE(c.path.find("x8"), std::string::npos) << c.path;
  EXPECT_TRUE(c.missing.empty());
  // Symmetric: the same path either way.
  EXPECT_DOUBLE_EQ(*pcie_path_ceiling(t, m.at(t, "0000:04:00.0"), m.at(t, "0000:03:00.0")).gbps, *c.gbps);
}

TEST(PathCeiling, ThroughTheRootComplexEveryLinkUpToTheRootPortsCounts) {
  SwitchMachine m;
  Topology t = m.read();
  // GPU A -> DSP -> USP (x4 uplink) -> root port ... root port 2 -> GPU C (32 GT/s x16).
  PathCeiling c = pcie_path_ceiling(t, m.at(t, "0000:03:00.0"), m.at(t, "0000:05:00.0"));
  ASSERT_TRUE(c.gbps) << c.missing;
  EXPECT_NEAR(*c.gbps, *pcie_lane_gbps(16.0) * 4, 1e-9);
  EXPECT_NE(c.path.find("x4"), std::string::npos) << c.path;
  EXPECT_FALSE(pcie_path_ceiling(t, m.at(t, "0000:03:00.0"), m.at(t, "0000:03:00.0")).gbps) << "no link to itself";
}

TEST(PathCeiling, AnUnknownLinkWidthLeavesTheCeilingUnknownAndNamesIt) {
  SwitchMachine m;
  // The switch's downstream port above GPU B exposes no width, and its Link Status says none.
  m.s.function(m.dsp2, [] {
    test::ConfigBytes b(0x10b5, 0xc010, 0x060400, test::kSwitchDown, true);
    b.buses(2, 4, 4);
    b.put16(0x52, 0x0003);  // 8 GT/s, width 0
    return b.bytes();
  }());
  std::filesystem::remove(m.s.dir() / ("sys/devices/" + m.dsp2 + "/current_link_width"));
  Topology t = m.read();
  PathCeiling c = pcie_path_ceiling(t, m.at(t, "0000:03:00.0"), m.at(t, "0000:04:00.0"));
  EXPECT_FALSE(c.gbps) << "a narrower link could hide behind the unknown one";
  EXPECT_NE(c.missing.find("width"), std::string::npos) << c.missing;
  EXPECT_NE(c.missing.find("0000:02:02.0"), std::string::npos) << c.missing;
  // A path that does not cross it stays known.
  EXPECT_TRUE(pcie_path_ceiling(t, m.at(t, "0000:03:00.0"), m.at(t, "0000:05:00.0")).gbps);
}

TEST(PathCeiling, AnUnknownLinkSpeedLeavesTheCeilingUnknown) {
  SwitchMachine m;
  m.s.write("sys/devices/" + m.gpu_c + "/current_link_speed", "Unknown\n");
  Topology t = m.read();
  PathCeiling c = pcie_path_ceiling(t, m.at(t, "0000:03:00.0"), m.at(t, "0000:05:00.0"));
  EXPECT_FALSE(c.gbps);
  EXPECT_NE(c.missing.find("speed of 0000:05:00.0"), std::string::npos) << c.missing;
}

NvlinkEnd end(const char* bdf, std::vector<std::string> remotes, std::optional<double> rate) {
  NvlinkEnd e;
  e.gpu = *Bdf::parse(bdf);
  e.active_remotes = std::move(remotes);
  e.links_read = true;
  e.link_gbps = rate;
  e.rate_source = rate ? "test" : "no rate in the table";
  return e;
}

TEST(PathCeiling, NvlinkDirectLinksTimesTheRate) {
  std::set<Bdf> gpus = {*Bdf::parse("0000:01:00.0"), *Bdf::parse("0000:02:00.0"), *Bdf::parse("0000:03:00.0")};
  // Two links to the peer, one to a third GPU: only the two count.
  auto a = end("0000:01:00.0", {"0000:02:00.0", "00000000:02:00.0", "0000:03:00.0"}, 25);
  auto b = end("0000:02:00.0", {"0000:01:00.0", "0000:01:00.0"}, 25);
  PathCeiling c = nvlink_path_ceiling(a, b, gpus);
  ASSERT_TRUE(c.gbps) << c.missing;
  EXPECT_DOUBLE_EQ(*c.gbps, 2 * 25.0);
  // The slower generation of the two limits.
  b.link_gbps = 14.0625;
  EXPECT_DOUBLE_EQ(*nvlink_path_ceiling(a, b, gpus).gbps, 2 * 14.0625);
}

TEST(PathCeiling, ThroughAnNvswitchEachGpusOwnLinksLimit) {
  std::set<Bdf> gpus = {*Bdf::parse("0000:01:00.0"), *Bdf::parse("0000:02:00.0")};
  auto a = end("0000:01:00.0", std::vector<std::string>(18, "FFFFFFFF:FF:FF.0"), 25);
  auto b = end("0000:02:00.0", std::vector<std::string>(12, "0000:c0:00.0"), 25);
  PathCeiling c = nvlink_path_ceiling(a, b, gpus);
  ASSERT_TRUE(c.gbps) << c.missing;
  EXPECT_DOUBLE_EQ(*c.gbps, 12 * 25.0);
  EXPECT_NE(c.path.find("NVSwitch"), std::string::npos);
}

TEST(PathCeiling, NvlinkUnknownsAreNamed) {
  std::set<Bdf> gpus = {*Bdf::parse("0000:01:00.0"), *Bdf::parse("0000:02:00.0")};
  auto a = end("0000:01:00.0", {"0000:02:00.0"}, 25), b = end("0000:02:00.0", {"0000:01:00.0"}, std::nullopt);
  PathCeiling c = nvlink_path_ceiling(a, b, gpus);
  EXPECT_FALSE(c.gbps);
  EXPECT_NE(c.missing.find("per-link NVLink rate of 0000:02:00.0"), std::string::npos) << c.missing;
  b.link_gbps = 25;
  a.active_remotes.push_back("");  // NVML could not say where one link leads
  c = nvlink_path_ceiling(a, b, gpus);
  EXPECT_FALSE(c.gbps);
  EXPECT_NE(c.missing.find("no remote address"), std::string::npos) << c.missing;
  a.links_read = false;
  EXPECT_NE(nvlink_path_ceiling(a, b, gpus).missing.find("did not list"), std::string::npos);
}

// ---- The recorded 2x H200 machine ------------------------------------------------------------

std::string h200(const std::string& rel) { return test::data_path(std::string(kH200Dir) + "/" + rel); }

struct H200 {
  H200() : root(Sysroot::open(h200("sysroot.tar.gz"))), topo(read_topology(root)) {
    policy::use_device_knowledge_from(P2PAUDIT_SOURCE_RULES_DIR);
  }
  Sysroot root;
  Topology topo;
  Bdf gpu0 = *Bdf::parse("0000:00:06.0"), gpu1 = *Bdf::parse("0000:00:07.0");
};

// Active links NVML listed for the device at `bdf` in a probe document.
int active_links(const json& doc, const std::string& bdf) {
  for (const auto& rt : doc["runtimes"])
    if (rt["runtime"] == "nvml")
      for (const auto& d : rt["devices"])
        if (d["bdf"] == bdf)
          return static_cast<int>(std::count_if(d["nvlink"].begin(), d["nvlink"].end(),
                                                [](const json& l) { return l["state"] == "active"; }));
  return -1;
}

double fact_number(const policy::FactSet& f, const char* name) {
  const auto* v = f.get(name);
  return v ? std::get<double>(*v) : -1;
}

TEST(PathCeilingRecorded, H200CopyIsJudgedAgainstItsNvlinksThroughTheSwitch) {
  H200 m;
  json doc = json::parse(read_file(h200("copy-2026-11-22/probe-copy.json")));
  auto facts = probe::runtime_facts(doc, "recording", &m.topo);
  // H200 SXM: NVLink 4, 18 links and 900 GB/s both directions (nvidia.com/en-us/data-center/h200/).
  const double per_link = 900.0 / 18 / 2;
  const int links = std::min(active_links(doc, "0000:00:06.0"), active_links(doc, "0000:00:07.0"));
  ASSERT_GT(links, 0);
  for (const auto& [p, c] : {std::pair{m.gpu0, m.gpu1}, std::pair{m.gpu1, m.gpu0}}) {
    const auto& f = facts.facts.pairs.at({p, c});
    EXPECT_DOUBLE_EQ(fact_number(f, "vendor.copy_ceiling_gbps"), links * per_link);
    const double measured = fact_number(f, "vendor.copy_gbps");
    EXPECT_NEAR(fact_number(f, "vendor.copy_ceiling_ratio"), measured / (links * per_link), 0.0005);
    EXPECT_NE(std::get<std::string>(*f.get("vendor.copy_ceiling_path")).find("NVSwitch"), std::string::npos)
        << "the remotes are FFFFFFFF:FF:FF.0: a switch the VM does not show";
    EXPECT_FALSE(f.known("vendor.copy_ceiling_missing"));
  }
}

TEST(PathCeilingRecorded, H200PcieCeilingIsTheGpusOwnGen5X16Links) {
  H200 m;
  PathCeiling c = pcie_path_ceiling(m.topo, *m.topo.index_of(m.gpu0), *m.topo.index_of(m.gpu1));
  ASSERT_TRUE(c.gbps) << c.missing;
  const Function& g = *m.topo.find(m.gpu0);
  EXPECT_NEAR(*c.gbps, *pcie_lane_gbps(32.0) * g.link.current_width, 1e-9);
  EXPECT_EQ(g.link.current_width, 16);
}

TEST(PathCeilingRecorded, H200ProbeWithoutACopyHasNoCeilingFacts) {
  H200 m;
  json doc = json::parse(read_file(h200("probe-2026-11-22/probe.json")));
  auto facts = probe::runtime_facts(doc, "recording", &m.topo);
  const auto& f = facts.facts.pairs.at({m.gpu0, m.gpu1});
  EXPECT_FALSE(f.known("vendor.copy_ceiling_gbps")) << "judged only where a copy was measured";
  // The same answers with a copy added: judged against the same NVLinks.
  for (auto& rt : doc["runtimes"])
    if (rt["runtime"] == "cuda")
      for (auto& p : rt["pairs"])
        p["answers"]["copy"] = {{"size_bytes", 1 << 20}, {"repeat", 1},
                                {"peer", {{"result", "verified"}, {"gbps", 100.0}, {"seconds", {0.1}}}},
                                {"host_staged", {{"result", "verified"}, {"gbps", 20.0}, {"seconds", {0.1}}}}};
  facts = probe::runtime_facts(doc, "recording", &m.topo);
  const int links = std::min(active_links(doc, "0000:00:06.0"), active_links(doc, "0000:00:07.0"));
  const auto& g = facts.facts.pairs.at({m.gpu0, m.gpu1});
  EXPECT_DOUBLE_EQ(fact_number(g, "vendor.copy_ceiling_gbps"), links * 25.0);
  EXPECT_NEAR(fact_number(g, "vendor.copy_ceiling_ratio"), 100.0 / (links * 25.0), 0.0005);
}

// ---- Decisions: the tool on the H200 fixture with a modified stored probe -----------------------

class UnpackedH200 {
 public:
  UnpackedH200() {
    char templ[] = "/tmp/p2paudit-ceiling-XXXXXX";
    dir_ = mkdtemp(templ);
    EXPECT_EQ(test::run_command("tar -xzf " + test::shell_quote(h200("sysroot.tar.gz")) + " -C " + test::shell_quote(dir_)).status, 0);
  }
  ~UnpackedH200() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void write_probe(const json& doc) const { std::ofstream(dir_ + "/p2paudit-probe.json") << doc.dump(); }
  std::string tool_command(const std::string& args) const {
    return std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(dir_) + " " + args;
  }
  test::CommandResult tool(const std::string& args) const { return test::run_command(tool_command(args)); }

 private:
  std::string dir_;
};

// The recorded copy document with every CUDA copy's peer and host-staged bandwidths replaced, and
// NVML's NVLink answer as given (the aikitoria/open-gpu-kernel-modules#9 shape: a PCIe peer path).
json copy_document(double peer_gbps, double staged_gbps, const std::string& nvlink) {
  json doc = json::parse(read_file(h200("copy-2026-11-22/probe-copy.json")));
  for (auto& rt : doc["runtimes"])
    for (auto& p : rt["pairs"]) {
      if (rt["runtime"] == "nvml") p["answers"]["nvlink"] = nvlink;
      if (rt["runtime"] == "cuda") {
        p["answers"]["copy"]["peer"]["gbps"] = peer_gbps;
        p["answers"]["copy"]["host_staged"]["gbps"] = staged_gbps;
      }
    }
  return doc;
}

const json& pair_of(const json& policy, const std::string& provider, const std::string& client) {
  for (const auto& p : policy["pairs"])
    if (p["provider"] == provider && p["client"] == client) return p;
  static const json none;
  ADD_FAILURE() << "no pair " << provider << " -> " << client;
  return none;
}

TEST(CopySlowerThanStaged, DecidesHostStagedWithBothNumbersInEveryOutput) {
  UnpackedH200 dir;
  dir.write_probe(copy_document(7.25, 42.5, "not_supported"));
  auto r = dir.tool("policy --details --format json");
  ASSERT_EQ(r.status, 0) << r.output;
  const json policy = json::parse(r.output);
  const auto& pair = pair_of(policy, "0000:00:06.0", "0000:00:07.0");
  EXPECT_EQ(pair["decision"], "host_staged");
  EXPECT_EQ(pair["rule"], "copy-slower-than-staged");
  EXPECT_EQ(pair["authority"], "measurement");
  const std::string reason = pair["reason"];
  EXPECT_NE(reason.find("7.25 GB/s"), std::string::npos) << reason;
  EXPECT_NE(reason.find("42.5 GB/s"), std::string::npos) << reason;
  // The PCIe path of this VM: the GPUs' own 32 GT/s x16 links.
  EXPECT_NEAR(pair["facts"]["vendor.copy_ceiling_gbps"].get<double>(), *pcie_lane_gbps(32.0) * 16, 0.001);
  EXPECT_NE(pair["facts"]["vendor.copy_ceiling_path"].get<std::string>().find("PCIe 32 GT/s x16"), std::string::npos);

  // check: not peer (exit 1), same rule; text names both numbers.
  r = dir.tool("check gpu0 gpu1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("7.25"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("42.5"), std::string::npos) << r.output;
  r = dir.tool("check --format json gpu0 gpu1");
  EXPECT_EQ(json::parse(r.output)["rule"], "copy-slower-than-staged") << r.output;
  // --format env: the pair is not a peer pair for the job.
  r = dir.tool("policy --format env --gpus gpu0,gpu1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("NCCL_P2P_DISABLE=1"), std::string::npos) << r.output;
  // The text of policy names the rule and both numbers.
  r = dir.tool("policy --details");
  EXPECT_NE(r.output.find("copy-slower-than-staged"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("42.5 GB/s"), std::string::npos) << r.output;
}

TEST(CopySlowerThanStaged, OutranksNvlinkToo) {
  // Measured on this machine: a fabric that delivers less than host memory is not the better path.
  UnpackedH200 dir;
  dir.write_probe(copy_document(12.0, 42.0, "ok"));
  auto r = dir.tool("check --format json gpu0 gpu1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(json::parse(r.output)["rule"], "copy-slower-than-staged") << r.output;
}

TEST(CopySlowerThanStaged, AVerifiedCopyThatIsNotSlowerStaysAPlainPeer) {
  UnpackedH200 dir;
  dir.write_probe(copy_document(387.5, 27.5, "ok"));
  auto r = dir.tool("check --format json gpu0 gpu1");
  EXPECT_EQ(r.status, 0) << r.output;
  const json j = json::parse(r.output);
  EXPECT_EQ(j["decision"], "peer");
  EXPECT_EQ(j["rule"], "nvlink");
  // Equal bandwidths are not slower.
  dir.write_probe(copy_document(30.0, 30.0, "ok"));
  EXPECT_EQ(json::parse(dir.tool("check --format json gpu0 gpu1").output)["rule"], "nvlink");
}

TEST(CopySlowerThanStaged, WithoutAStagedBandwidthAVerifiedCopyIsNotHeldOpen) {
  // The host-staged leg failed: nothing to compare, so the rule does not apply (false), and the
  // verified NVLink pair stays a certain peer.
  UnpackedH200 dir;
  json doc = copy_document(100.0, 0, "ok");
  for (auto& rt : doc["runtimes"])
    if (rt["runtime"] == "cuda")
      for (auto& p : rt["pairs"])
        p["answers"]["copy"]["host_staged"] = {{"result", "failed"}, {"phase", "cuMemcpyDtoH_v2"}, {"error", "CUDA_ERROR_UNKNOWN"}};
  dir.write_probe(doc);
  auto r = dir.tool("check --format json gpu0 gpu1");
  EXPECT_EQ(r.status, 0) << r.output;
  const json j = json::parse(r.output);
  EXPECT_EQ(j["rule"], "nvlink");
  EXPECT_EQ(j["certain"], true) << r.output;
}

TEST(CopyBelowHalfCeiling, WarnsWithTheRatioAndTheCeiling) {
  UnpackedH200 dir;
  // NVLink: 18 links through the switch x 25 GB/s; 100 GB/s is below half of it, and above staging.
  dir.write_probe(copy_document(100.0, 27.5, "ok"));
  auto r = dir.tool("policy --details --format json");
  ASSERT_EQ(r.status, 0) << r.output;
  const json policy = json::parse(r.output);
  const auto& pair = pair_of(policy, "0000:00:06.0", "0000:00:07.0");
  EXPECT_EQ(pair["decision"], "peer");
  const double ceiling = pair["facts"]["vendor.copy_ceiling_gbps"];
  auto fired = [](const json& p) {
    const auto& rules = p["rules"];
    return std::find(rules.begin(), rules.end(), "copy-below-half-ceiling") != rules.end();
  };
  EXPECT_TRUE(fired(pair)) << pair.dump();
  const std::string said = fmt::format("{} of its path's ceiling of {} GB/s", pair["facts"]["vendor.copy_ceiling_ratio"].get<double>(),
                                       ceiling);
  EXPECT_NE(pair.dump().find(said), std::string::npos) << said << "\n" << pair.dump();
  EXPECT_NEAR(pair["facts"]["vendor.copy_ceiling_ratio"].get<double>(), 100.0 / ceiling, 0.0005);
  // At the recorded bandwidth it does not warn.
  dir.write_probe(copy_document(387.5, 27.5, "ok"));
  const json recorded = json::parse(dir.tool("policy --details --format json").output);
  EXPECT_FALSE(fired(pair_of(recorded, "0000:00:06.0", "0000:00:07.0")));
}

TEST(CopyBelowHalfCeiling, AnUnknownCeilingNeverWarnsAndSaysWhatIsMissing) {
  UnpackedH200 dir;
  // NVML listed no NVLinks for gpu1: the ceiling is unknown, and the copy is not judged.
  json doc = copy_document(100.0, 27.5, "ok");
  for (auto& rt : doc["runtimes"])
    if (rt["runtime"] == "nvml") rt["devices"][1].erase("nvlink");
  dir.write_probe(doc);
  auto r = dir.tool("policy --details --format json");
  ASSERT_EQ(r.status, 0) << r.output;
  const json policy = json::parse(r.output);
  const auto& pair = pair_of(policy, "0000:00:06.0", "0000:00:07.0");
  EXPECT_FALSE(pair["facts"].contains("vendor.copy_ceiling_gbps"));
  EXPECT_NE(pair["facts"]["vendor.copy_ceiling_missing"].get<std::string>().find("0000:00:07.0"), std::string::npos);
  const auto& rules = pair["rules"];
  EXPECT_EQ(std::find(rules.begin(), rules.end(), "copy-below-half-ceiling"), rules.end()) << pair.dump();
}

// `probe --copy` through the fake NVML and CUDA: each verified copy's line and reality entry carry the
// ceiling of the NVLinks the fake NVML lists, and this run's share of it (the bandwidth itself is a
// timing: only the arithmetic is checked).
TEST(ProbeCeiling, ProbeTextAndJsonShowTheCeilingBesideTheBandwidth) {
  const std::string env = "env P2PAUDIT_PROBE_ALLOW_SYSROOT=1 FAKE_NVIDIA_SCENARIO=ok FAKE_NVIDIA_BDFS=0000:00:06.0,0000:00:07.0"
                          " P2PAUDIT_NVML_LIBRARY=" + test::shell_quote(FAKE_NVML_LIBRARY) +
                          " P2PAUDIT_CUDA_LIBRARY=" + test::shell_quote(FAKE_CUDA_LIBRARY) +
                          " P2PAUDIT_HIP_LIBRARY=/nonexistent ZE_ENABLE_ALT_DRIVERS=/nonexistent ";
  UnpackedH200 dir;
  auto r = test::run_command(env + dir.tool_command("probe --copy --size 64KiB --repeat 1 --format json"));
  ASSERT_EQ(r.status, 0) << r.output;
  const json doc = json::parse(r.output);
  const int links = std::min(active_links(doc, "0000:00:06.0"), active_links(doc, "0000:00:07.0"));
  ASSERT_GT(links, 0);
  // The peer GB/s of each CUDA pair, by provider BDF.
  std::map<std::string, double> peer;
  for (const auto& rt : doc["runtimes"])
    if (rt["runtime"] == "cuda")
      for (const auto& p : rt["pairs"])
        peer[rt["devices"][p["provider"].get<size_t>()]["bdf"]] = p["answers"]["copy"]["peer"]["gbps"];
  int judged = 0;
  for (const auto& c : doc["reality"]) {
    if (c["runtime"] != "cuda") continue;
    const double ceiling = c["copy_ceiling_gbps"];
    EXPECT_DOUBLE_EQ(ceiling, links * 25.0) << c.dump();  // H200: NVLink 4, 25 GB/s a link
    EXPECT_NEAR(c["copy_ceiling_ratio"].get<double>(), peer.at(c["provider"]) / ceiling, 0.0005);
    EXPECT_NE(c["copy"].get<std::string>().find(fmt::format("of the path's {:.1f} GB/s", ceiling)), std::string::npos) << c.dump();
    EXPECT_TRUE(c["copy_ceiling_missing"].is_null());
    ++judged;
  }
  EXPECT_EQ(judged, 2);
  r = test::run_command(env + dir.tool_command("probe --copy --size 64KiB --repeat 1"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(fmt::format("path ceiling {:.1f} GB/s: ", links * 25.0)), std::string::npos) << r.output;
}

}  // namespace
}  // namespace p2paudit
