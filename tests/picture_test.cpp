// SPDX-License-Identifier: GPL-2.0-or-later
// --format dot and --format html (docs/pictures.md): every function drawn, exactly the ports whose
// ACS redirects marked, the pairs as the matrix and the policy give them, hostile names escaped,
// and the page self-contained. tests/html_chromium_test.sh runs the page in a browser.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

using json = nlohmann::json;

test::CommandResult tool(const std::string& args) {
  return test::run_command(std::string(P2PAUDIT_TOOL) + " " + args + " 2>/dev/null");
}

std::string fixture(const std::string& name) { return test::data_path(name + "/sysroot.tar.gz"); }

// Switches, ACS redirect, several host bridges on two NUMA nodes, the VMs with GPUs.
const std::vector<std::string> kMachines = {
    "kernel-oracle/h-d1-rp-acs-rr-cr-mf-switch", "kernel-oracle/h-f1b-nested-switches-acs-all",
    "kernel-oracle/h-d7-amd-iommu-epyc", "kernel-oracle/h-e9-two-pxb-numa-epyc", "machines/h200x2-firecracker-vm"};

json topology_json(const std::string& sysroot) {
  auto r = tool("--sysroot " + test::shell_quote(sysroot) + " topology --format json");
  EXPECT_EQ(r.status, 0) << sysroot;
  return json::parse(r.output);
}

bool graphviz_present() { return test::run_command("command -v dot >/dev/null 2>&1").status == 0; }

// The DOT's nodes: "fN" -> the first line of its label (the BDF, then the short name if any).
struct DotNode {
  std::string bdf, short_name;
  bool acs_redirect = false;
};
std::map<std::string, DotNode> dot_nodes(const std::string& dot) {
  std::map<std::string, DotNode> nodes;
  static const std::regex node(R"re(^\s*(f\d+) \[label="([0-9a-f:.]+)(  ([a-z]+\d+))?\\n.*\];$)re");
  std::istringstream in(dot);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, node)) continue;
    nodes[m[1]] = {m[2], m[4], line.find("class=\"acs-redirect\"") != std::string::npos};
  }
  return nodes;
}

// Each line of the DOT ends every string it opens: a hostile byte cannot leave one open.
void expect_strings_closed(const std::string& dot) {
  std::istringstream in(dot);
  for (std::string line; std::getline(in, line);) {
    bool open = false;
    for (size_t i = 0; i < line.size(); ++i) {
      if (open && line[i] == '\\') ++i;
      else if (line[i] == '"') open = !open;
    }
    EXPECT_FALSE(open) << line;
  }
}

void expect_graphviz_accepts(const std::string& dot) {
  if (!graphviz_present()) GTEST_SKIP() << "graphviz (dot) is not installed";
  char path[] = "/tmp/p2paudit-picture-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, dot.data(), dot.size()), static_cast<ssize_t>(dot.size()));
  close(fd);
  auto r = test::run_command("dot -Tsvg " + std::string(path) + " 2>&1 >/dev/null");
  unlink(path);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "") << "graphviz warned";
}

TEST(PictureDot, NamesEveryFunctionAndMarksExactlyTheRedirectingPorts) {
  size_t redirecting_seen = 0;
  for (const auto& machine : kMachines) {
    SCOPED_TRACE(machine);
    json topo = topology_json(fixture(machine));
    for (const char* command : {"topology --format dot", "--format dot"}) {
      auto r = tool("--sysroot " + fixture(machine) + " " + command);
      ASSERT_EQ(r.status, 0) << command;
      auto nodes = dot_nodes(r.output);
      std::set<std::string> drawn, marked, redirecting;
      for (const auto& [id, n] : nodes) {
        drawn.insert(n.bdf);
        if (n.acs_redirect) marked.insert(n.bdf);
      }
      EXPECT_EQ(nodes.size(), topo["functions"].size()) << command;
      for (const auto& f : topo["functions"]) {
        EXPECT_TRUE(drawn.count(f["bdf"])) << f["bdf"];
        // pci_bridge_has_acs_redir(): the capability read and RR, CR or EC enabled.
        if (f["acs"] == "present" && (f["acs_ctrl"].get<int>() & 0x2c)) redirecting.insert(f["bdf"].get<std::string>());
      }
      EXPECT_EQ(marked, redirecting) << command;
      redirecting_seen += redirecting.size();
      for (const auto& hb : topo["host_bridges"])
        EXPECT_NE(r.output.find("label=\"host bridge " + hb["name"].get<std::string>()), std::string::npos);
      expect_strings_closed(r.output);
      expect_graphviz_accepts(r.output);
    }
  }
  EXPECT_GT(redirecting_seen, 0u) << "no fixture exercised the ACS mark";
}

TEST(PictureDot, GroupsHostBridgesByNumaNode) {
  auto machine = fixture("kernel-oracle/h-e9-two-pxb-numa-epyc");
  json topo = topology_json(machine);
  std::set<int> numa;
  for (const auto& f : topo["functions"])
    if (f["numa_node"].get<int>() >= 0) numa.insert(f["numa_node"].get<int>());
  ASSERT_GE(numa.size(), 2u);
  auto dot = tool("--sysroot " + machine + " topology --format dot").output;
  for (int n : numa) {
    auto at = dot.find("subgraph cluster_numa" + std::to_string(n) + " {");
    EXPECT_NE(at, std::string::npos) << n;
    EXPECT_NE(dot.find("label=\"NUMA node " + std::to_string(n) + "\"", at), std::string::npos) << n;
  }
}

TEST(PictureDot, AuditEdgesCarryTheMatrixVerdicts) {
  const std::map<std::string, std::string> code = {
      {"BUS_ADDR", "BUS"}, {"THRU_HOST_BRIDGE", "HB"}, {"NOT_SUPPORTED", "NO"}, {"UNKNOWN", "?"}};
  for (const auto& machine : kMachines) {
    SCOPED_TRACE(machine);
    auto dot = tool("--sysroot " + fixture(machine) + " --format dot").output;
    auto nodes = dot_nodes(dot);
    json matrix = json::parse(tool("--sysroot " + fixture(machine) + " matrix --format json").output);
    std::map<std::pair<std::string, std::string>, std::string> verdict;
    for (const auto& p : matrix["pairs"]) verdict[{p["provider"], p["client"]}] = code.at(p["map_type"]);
    size_t n = matrix["devices"].size(), edges = 0;
    static const std::regex edge(R"re(^\s*(f\d+) -> (f\d+) \[dir=none, constraint=false.*label="([^"]*)"\];$)re");
    std::istringstream in(dot);
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_match(line, m, edge)) continue;
      ++edges;
      const DotNode &a = nodes[m[1]], &b = nodes[m[2]];
      EXPECT_FALSE(a.short_name.empty() || b.short_name.empty()) << line;
      // "CODE decision", or "a: CODE decision, b: CODE decision" when the two directions differ.
      std::string label = m[3];
      std::string expected = verdict[{a.bdf, b.bdf}] + " ";
      if (label.find(':') != std::string::npos) expected = a.short_name + ": " + expected;
      EXPECT_EQ(label.rfind(expected, 0), 0u) << line;
    }
    EXPECT_EQ(edges, n * (n - 1) / 2);
  }
}

// A stranger's capture: quotes, backslashes, newlines, control and invalid bytes in a driver name;
// markup in the CPU's name, the host name and the path it was read from.
class HostileNames : public ::testing::Test {
 protected:
  void SetUp() override {
    s_.function("pci0000:00/0000:00:00.0", test::ConfigBytes(0x8086, 0x4c43, 0x060000, 0).bytes(256));
    s_.function("pci0000:00/0000:00:01.0", test::ConfigBytes(0x8086, 0x4c01, 0x060400, 4, true).buses(0, 1, 1).acs(0x000c).bytes());
    s_.function("pci0000:00/0000:00:01.0/0000:01:00.0", test::ConfigBytes(0x10de, 0x2335, 0x030200, 0).bytes());
    s_.function("pci0000:00/0000:00:02.0", test::ConfigBytes(0x10de, 0x2335, 0x030200, 0).bytes());
    s_.link("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/driver", "../../../../bus/pci/drivers/" + kDriver);
    s_.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
                             "model name\t: </script><script>alert(1)</script>\n");
    s_.write("proc/sys/kernel/hostname", "<!--host\n");
    // The path the picture is titled with holds markup too; the directories are real.
    std::filesystem::create_directories(s_.dir() / "x\"<!--</script>");
    std::filesystem::create_symlink(s_.dir(), s_.dir() / "x\"<!--</script>" / "root");
    sysroot_ = (s_.dir() / "x\"<!--</script>" / "root").string();
  }
  test::CommandResult run(const std::string& args) { return tool("--sysroot " + test::shell_quote(sysroot_) + " " + args); }

  const std::string kDriver = "nv\"q\\b\nl\x01\xff";
  test::SysrootDir s_;
  std::string sysroot_;
};

TEST_F(HostileNames, DotEscapesEveryString) {
  for (const char* command : {"topology --format dot", "--format dot"}) {
    SCOPED_TRACE(command);
    auto r = run(command);
    ASSERT_EQ(r.status, 0);
    expect_strings_closed(r.output);
    // The quote and backslash escaped for DOT; the newline and bad bytes shown as \xNN, escaped too.
    EXPECT_NE(r.output.find(R"(driver nv\"q\\b\\x0al\\x01\\xff)"), std::string::npos) << r.output;
    EXPECT_EQ(dot_nodes(r.output).size(), 4u);
    expect_graphviz_accepts(r.output);
  }
}

// The embedded data: the JSON between the data block's tags, with the number of "</script" in the page.
struct Page {
  json data;
  size_t script_ends = 0;
};
Page read_page(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"machine-data\">";
  Page page;
  for (size_t at = html.find("</script"); at != std::string::npos; at = html.find("</script", at + 1)) ++page.script_ends;
  auto start = html.find(open);
  EXPECT_NE(start, std::string::npos);
  if (start == std::string::npos) return page;
  start += open.size();
  page.data = json::parse(html.substr(start, html.find("</script>", start) - start));
  return page;
}

TEST_F(HostileNames, HtmlKeepsTheDataInsideItsScriptBlock) {
  for (const char* command : {"topology --format html", "--format html"}) {
    SCOPED_TRACE(command);
    auto r = run(command);
    ASSERT_EQ(r.status, 0);
    Page page = read_page(r.output);
    EXPECT_EQ(page.script_ends, 3u) << "the error hook, the data and the script: nothing else ends a script";
    EXPECT_EQ(r.output.find("<!--host"), std::string::npos);
    EXPECT_EQ(r.output.find("<script>alert"), std::string::npos);
    // Decoded, the data holds the names as they were (bytes that are not text shown as \xNN).
    EXPECT_EQ(page.data["platform"]["cpu"], "</script><script>alert(1)</script>");
    EXPECT_EQ(page.data["platform"]["hostname"], "<!--host");
    EXPECT_EQ(page.data["source"], sysroot_);
    bool found = false;
    for (const auto& f : page.data["functions"]) found |= f["driver"] == "nv\"q\\b\\x0al\\x01\\xff";
    EXPECT_TRUE(found) << page.data["functions"].dump();
  }
}

TEST(PictureHtml, SelfContainedWithTheMachineAndItsPairs) {
  for (const auto& machine : kMachines) {
    SCOPED_TRACE(machine);
    auto sysroot = fixture(machine);
    auto r = tool("--sysroot " + sysroot + " --format html");
    ASSERT_EQ(r.status, 0);
    const std::string& html = r.output;
    // Nothing is loaded from anywhere: the only URL is the SVG namespace, and the policy forbids the rest.
    std::string without_ns = std::regex_replace(html, std::regex("http://www\\.w3\\.org/2000/svg"), "");
    for (const char* external : {"http:", "https:", "src=", "href=", "url(", "@import", "fetch(", "XMLHttpRequest", "<link",
                                 "<iframe", "<img", "innerHTML", "insertAdjacentHTML", "document.write"})
      EXPECT_EQ(without_ns.find(external), std::string::npos) << external;
    EXPECT_NE(html.find("default-src 'none'"), std::string::npos);

    Page page = read_page(html);
    const json& data = page.data;
    json topo = topology_json(sysroot);
    ASSERT_EQ(data["functions"].size(), topo["functions"].size());
    for (size_t i = 0; i < topo["functions"].size(); ++i) {
      const auto &f = data["functions"][i], &t = topo["functions"][i];
      EXPECT_EQ(f["bdf"], t["bdf"]);
      EXPECT_EQ(f["redirect"] == true, t["acs"] == "present" && (t["acs_ctrl"].get<int>() & 0x2c)) << t["bdf"];
      EXPECT_EQ(f["numa"], t["numa_node"]);
      // The panel's set ACS bits are the topology's, by name; their meanings are the topology's acs_bits.
      if (t["acs_enabled"].is_null()) {
        EXPECT_TRUE(f["acs_set"].is_null()) << t["bdf"];
      } else if (t["acs"] == "present") {
        std::string names;
        for (const auto& b : t["acs_enabled"]) names += (names.empty() ? "" : " ") + b.get<std::string>();
        EXPECT_EQ(f["acs_set"], names.empty() ? "none" : names) << t["bdf"];
        EXPECT_EQ(f["acs"].get<std::string>().rfind("ACS set " + (names.empty() ? std::string("none") : names), 0), 0u)
            << f["acs"];
      }
    }
    EXPECT_EQ(data["acs_bits"], topo["acs_bits"]);
    // Every cell as the matrix (kernel) and the policy (decision) give it, without the runtimes.
    json matrix = json::parse(tool("--sysroot " + sysroot + " matrix --format json").output);
    json policy = json::parse(tool("--sysroot " + sysroot + " policy --no-probe --format json").output);
    size_t n = matrix["devices"].size();
    ASSERT_EQ(data["pairs"]["devices"].size(), n);
    ASSERT_EQ(data["pairs"]["grid"].size(), n);
    std::map<std::pair<std::string, std::string>, std::string> decision;
    for (const auto& p : policy["pairs"]) decision[{p["provider"], p["client"]}] = p["decision"];
    size_t pairs = 0;
    for (size_t r = 0; r < n; ++r)
      for (size_t c = 0; c < n; ++c) {
        int e = data["pairs"]["grid"][r][c];
        if (r == c) {
          EXPECT_EQ(e, -1);
          continue;
        }
        const json& cell = matrix["pairs"][r * n + c];
        const json& x = data["explanations"][e];
        EXPECT_EQ(data["functions"][data["pairs"]["devices"][r].get<size_t>()]["bdf"], cell["provider"]);
        EXPECT_EQ(x["map_type"], cell["map_type"]);
        EXPECT_EQ(x["decision"], (decision[{cell["provider"], cell["client"]}]));
        EXPECT_FALSE(x["kernel"]["reason"].get<std::string>().empty());
        EXPECT_FALSE(x["policy"]["reason"].get<std::string>().empty());
        ++pairs;
      }
    // Pairs decided alike share an explanation: each is counted once and carried once.
    size_t counted = 0;
    for (const auto& x : data["explanations"]) counted += x["pairs"].get<size_t>();
    EXPECT_EQ(counted, pairs);
    EXPECT_LE(data["explanations"].size(), std::max<size_t>(pairs, 1));
    json candidates = json::parse(tool("--sysroot " + sysroot + " whitelist --no-probe --format json").output)["candidates"];
    ASSERT_EQ(data["candidates"].size(), candidates.size());
    for (size_t k = 0; k < candidates.size(); ++k) EXPECT_EQ(data["candidates"][k]["id"], candidates[k]["id"]);
  }
}

TEST(PictureHtml, ExplanationsAreSharedOnALargeMachine) {
  // 16 NVMe behind one switch with ACS redirect: 240 pairs, a handful of explanations.
  test::SysrootDir s;
  s.function("pci0000:00/0000:00:00.0", test::ConfigBytes(0x8086, 0x4c43, 0x060000, 0).bytes(256));
  std::string port = "pci0000:00/0000:00:01.0";
  s.function(port, test::ConfigBytes(0x8086, 0x4c01, 0x060400, 4, true).buses(0, 1, 0x12).acs(0x000c).bytes());
  s.function(port + "/0000:01:00.0", test::ConfigBytes(0x10b5, 0x8747, 0x060400, 5, true).buses(1, 2, 0x12).bytes());
  for (int k = 0; k < 16; ++k) {
    auto dsp = fmt::format("{}/0000:01:00.0/0000:02:{:02x}.0", port, k);
    s.function(dsp, test::ConfigBytes(0x10b5, 0x8747, 0x060400, 6, true).buses(2, 3 + k, 3 + k).bytes());
    s.function(fmt::format("{}/0000:{:02x}:00.0", dsp, 3 + k), test::ConfigBytes(0x144d, 0xa808, 0x010802, 0).bytes());
  }
  auto page = read_page(tool("--sysroot " + s.str() + " --format html").output);
  ASSERT_EQ(page.data["pairs"]["devices"].size(), 16u);
  EXPECT_LE(page.data["explanations"].size(), 4u);
  size_t counted = 0;
  for (const auto& x : page.data["explanations"]) counted += x["pairs"].get<size_t>();
  EXPECT_EQ(counted, 240u);
}

TEST(PictureHtml, TopologyDrawsTheTreeAlone) {
  auto sysroot = fixture("kernel-oracle/h-e9-two-pxb-numa-epyc");
  auto page = read_page(tool("--sysroot " + sysroot + " topology --format html").output);
  EXPECT_TRUE(page.data["pairs"].is_null());
  EXPECT_TRUE(page.data["candidates"].is_null());
  json topo = topology_json(sysroot);
  EXPECT_EQ(page.data["functions"].size(), topo["functions"].size());
  EXPECT_EQ(page.data["roots"].size(), topo["host_bridges"].size());
  std::set<int> numa;
  for (const auto& r : page.data["roots"]) numa.insert(r["numa"].get<int>());
  EXPECT_TRUE(numa.count(0) && numa.count(1));
}

}  // namespace
}  // namespace p2paudit
