// SPDX-License-Identifier: GPL-2.0-or-later
// Large machines stay readable (issue 21): past a grid of kDeviceGridColumns, `policy` and
// `matrix` draw rows and columns as groups of devices, each cell counting its pairs; the counts
// add up to the JSON's pairs of each decision / map type, the grid does not grow with the devices,
// and --verbose / --all still give every pair.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "p2paudit/grouped_grid.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "synth.h"
#include "temp_dir.h"
#include "test_support.h"

namespace p2paudit {
namespace {

using nlohmann::json;

// A generated machine (a tarball: one file to write): `host_bridges` x `root_ports`, one switch of 4 ports below each, one
// single-function endpoint per port, no VFs: host_bridges x root_ports x 4 devices that matter.
std::string machine(const test::TempDir& dir, int host_bridges, int root_ports) {
  synth::Options options;
  options.host_bridges = host_bridges;
  options.root_ports = root_ports;
  options.depth = 1;
  options.fanout = 4;
  options.endpoints_per_port = 1;
  options.multifunction = 1;
  options.vfs = 0;
  options.acs = synth::AcsMode::kMixed;
  const std::string path = (dir / fmt::format("machine-{}x{}.tar.gz", host_bridges, root_ports)).string();
  synth::Machine::plan(options).write_tarball(path);
  return path;
}

test::CommandResult tool(const std::string& sysroot, const std::string& args) {
  return test::run_command(std::string(P2PAUDIT_TOOL) + " --no-probe --color never --sysroot " + test::shell_quote(sysroot) +
                           " " + args + " 2>/dev/null");
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The grouped grid of a text: its rows ("G<n>" and only cells) and, per cell code, the pairs counted.
struct Grid {
  size_t rows = 0, widest = 0, legend = 0, legend_devices = 0;
  std::map<std::string, size_t> counted;  // "P" -> pairs
};

Grid read_grid(const std::string& text, const std::string& codes) {
  Grid g;
  const std::regex group("G[0-9]+"), cell("(" + codes + ")([0-9]+)"), legend(R"(^ *G[0-9]+ (switch|root port|host bridge) .*\(([0-9]+) devices?\):.*)");
  for (const auto& l : lines_of(text)) {
    std::smatch m;
    if (std::regex_match(l, m, legend)) {
      ++g.legend, g.legend_devices += std::stoul(m[2]);
      g.widest = std::max(g.widest, text_columns(l));
      continue;
    }
    std::istringstream words(l);
    std::string word;
    if (!(words >> word) || !std::regex_match(word, group)) continue;
    std::map<std::string, size_t> in_row;
    bool only_cells = true;
    while (words >> word) {
      if (std::regex_match(word, m, cell)) in_row[m[1]] += std::stoul(m[2]);
      else if (word != "-") only_cells = false;
    }
    if (!only_cells) continue;
    ++g.rows;
    g.widest = std::max(g.widest, text_columns(l));
    for (const auto& [code, n] : in_row) g.counted[code] += n;
  }
  return g;
}

size_t pair_lines(const std::string& text) {
  const std::regex pair_line(R"(^\S+ -> \S+: (peer|host_staged|deny)[ ,])");
  size_t n = 0;
  for (const auto& l : lines_of(text)) n += std::regex_search(l, pair_line);
  return n;
}

// Rows of a grid of every device: a label, then one cell per device, each matching `cell`.
size_t device_rows(const std::string& text, const std::string& cell, size_t devices) {
  const std::regex cell_re(cell);
  size_t rows = 0;
  for (const auto& l : lines_of(text)) {
    std::istringstream words(l);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
    if (w.size() != devices + 1) continue;
    rows += std::all_of(w.begin() + 1, w.end(), [&](const std::string& c) { return std::regex_match(c, cell_re); });
  }
  return rows;
}

const std::string kGroupedHeading = "more than a grid of 160 columns holds: rows and columns are groups of devices";

TEST(GroupedGrid, RuleIsTheWidthOfTheDeviceGrid) {
  EXPECT_TRUE(device_grid_fits(13, 11));   // policy: 14 columns of 11
  EXPECT_FALSE(device_grid_fits(14, 11));
  EXPECT_TRUE(device_grid_fits(19, 8));    // matrix with labels such as "nvme10"
  EXPECT_FALSE(device_grid_fits(20, 8));
}

// The library: fitting merges groups, never loses or adds a pair, and every device is in one group.
TEST(GroupedGrid, FittingKeepsEveryPairAndDevice) {
  test::TempDir dir;
  Topology t = read_topology(Sysroot::open(machine(dir, 4, 4)));
  auto devices = matrix_devices(t, false);
  ASSERT_EQ(devices.size(), 64u);
  GroupedGrid grid(t, devices, kMostDeviceGroups, {{"A", Tone::kGood, 0}, {"B", Tone::kBad, 1}});
  EXPECT_EQ(grid.groups(), 16u);  // the 16 switches
  for (size_t r = 0; r < devices.size(); ++r)
    for (size_t c = 0; c < devices.size(); ++c)
      if (r != c) grid.count(r, c, (r + c) % 2);
  const auto before = grid.totals();
  EXPECT_EQ(before[0] + before[1], 64u * 63);
  grid.fit(80);
  EXPECT_LT(grid.groups(), 16u);
  EXPECT_EQ(grid.totals(), before);
  auto g = read_grid(grid.rows({}), "A|B");
  EXPECT_EQ(g.rows, grid.groups());
  EXPECT_LE(g.widest, 80u);
  EXPECT_EQ(g.counted["A"], before[0]);
  EXPECT_EQ(g.counted["B"], before[1]);
  size_t members = 0;
  for (const auto& line : grid.legend(matrix_labels(t, devices), 80)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(\(([0-9]+) devices?\))"))) << line;
    members += std::stoul(m[1]);
    EXPECT_LE(text_columns(line), 80u) << line;
  }
  EXPECT_EQ(members, devices.size());
}

// `policy`: grouped past the width, counts add up to the JSON's decisions, and the grid and its
// legend stay within the width and the group count whatever the devices.
TEST(GroupedGrid, PolicyCountsAddUpAndStayBounded) {
  test::TempDir dir;
  std::map<size_t, size_t> lines_by_devices, bytes_by_devices;
  for (auto [hb, rp] : {std::pair{2, 4}, std::pair{8, 4}}) {
    const std::string m = machine(dir, hb, rp);
    json j = json::parse(tool(m, "policy --format json").output);
    const size_t devices = j["devices"].size();
    std::map<std::string, size_t> decided;  // "?" counts the uncertain ones, whatever their decision
    for (const auto& p : j["pairs"])  // the JSON has each device with itself too; the grid does not
      if (p["provider"] != p["client"]) ++decided[p["certain"].get<bool>() ? p["decision"].get<std::string>() : "?"];
    auto r = tool(m, "policy");
    ASSERT_EQ(r.status, 0);
    auto lines = lines_of(r.output);
    ASSERT_FALSE(lines.empty());
    EXPECT_NE(lines[0].find(fmt::format("{} devices, ", devices) + kGroupedHeading), std::string::npos) << lines[0];
    Grid g = read_grid(r.output, "P|H|D|\\?");
    EXPECT_GT(g.rows, 1u) << r.output;
    EXPECT_LE(g.rows, kMostDeviceGroups);
    EXPECT_EQ(g.legend, g.rows) << r.output;
    EXPECT_EQ(g.legend_devices, devices);
    EXPECT_LE(g.widest, kDeviceGridColumns);
    EXPECT_EQ(g.counted["P"], decided["peer"]) << r.output;
    EXPECT_EQ(g.counted["H"], decided["host_staged"]) << r.output;
    EXPECT_EQ(g.counted["D"], decided["deny"]) << r.output;
    EXPECT_EQ(g.counted["?"], decided["?"]) << r.output;
    EXPECT_EQ(g.counted["P"] + g.counted["H"] + g.counted["D"] + g.counted["?"], devices * (devices - 1));
    EXPECT_NE(r.output.find(fmt::format("{} ordered pairs", devices * (devices - 1))), std::string::npos);
    // The notes still say how many pairs each covers: together every pair.
    size_t noted = 0;
    const std::regex note(R"(^\[[0-9]+\] \S+(, uncertain)? \(.*\): ([0-9]+) pairs? \()");
    for (const auto& l : lines) {
      std::smatch nm;
      if (std::regex_search(l, nm, note)) noted += std::stoul(nm[2]);
    }
    EXPECT_EQ(noted, devices * (devices - 1));
    // The grid and its legend, before the notes: the notes grow with the decision groups (at most one
    // each), not with the devices or pairs.
    const std::string grid_part = r.output.substr(0, r.output.find("\n[1] "));
    lines_by_devices[devices] = lines_of(grid_part).size();
    bytes_by_devices[devices] = grid_part.size();
    size_t notes = 0;
    for (const auto& l : lines) notes += std::regex_search(l, note);
    EXPECT_LE(notes, j["groups"].size());
    // --verbose: every pair's own decision, after a grid of every device.
    auto verbose = tool(m, "--verbose policy");
    EXPECT_EQ(pair_lines(verbose.output), devices * (devices - 1));
    EXPECT_EQ(verbose.output.find(kGroupedHeading), std::string::npos);
  }
  // Four times the devices, sixteen times the pairs: the grid grows only by its groups.
  ASSERT_EQ(lines_by_devices.size(), 2u);
  auto [small_devices, small_lines] = *lines_by_devices.begin();
  auto [large_devices, large_lines] = *lines_by_devices.rbegin();
  EXPECT_EQ(large_devices, 4 * small_devices);
  EXPECT_LE(large_lines, small_lines + 2 * kMostDeviceGroups);
  EXPECT_LE(bytes_by_devices[large_devices], bytes_by_devices[small_devices] + 2 * kMostDeviceGroups * kDeviceGridColumns);
}

// `policy --all` and a machine whose grid fits: every device's own row, as before.
TEST(GroupedGrid, PolicyAllAndSmallMachinesKeepTheDeviceGrid) {
  test::TempDir dir;
  const std::string small = machine(dir, 1, 3);  // 12 devices: 13 columns of 11
  auto r = tool(small, "policy");
  EXPECT_EQ(r.output.find(kGroupedHeading), std::string::npos) << r.output;
  EXPECT_EQ(read_grid(r.output, "P|H|D").rows, 0u);
  EXPECT_EQ(device_rows(r.output, "X|(PEER|HOST|DENY)\\??\\[[0-9]+\\]", 12), 12u) << r.output;

  const std::string large = machine(dir, 2, 2);  // 16 devices: grouped by default
  EXPECT_NE(tool(large, "policy").output.find(kGroupedHeading), std::string::npos);
  auto all = tool(large, "policy --all");
  EXPECT_EQ(all.output.find(kGroupedHeading), std::string::npos);
  const size_t functions = json::parse(tool(large, "policy --all --format json").output)["devices"].size();
  EXPECT_EQ(device_rows(all.output, "X|(PEER|HOST|DENY)\\??\\[[0-9]+\\]", functions), functions) << all.output.substr(0, 2000);
}

// `matrix`: grouped past the width, counts add up to the JSON's map types; --verbose, --details
// and --all draw every device.
TEST(GroupedGrid, MatrixCountsAddUpAndVerboseDrawsEveryDevice) {
  test::TempDir dir;
  const std::string m = machine(dir, 4, 4);
  json j = json::parse(tool(m, "matrix --format json").output);
  const size_t devices = j["devices"].size();
  ASSERT_EQ(devices, 64u);
  std::map<std::string, size_t> by_type;
  for (const auto& p : j["pairs"])
    if (p["provider"] != p["client"]) ++by_type[p["map_type"].get<std::string>()];
  auto r = tool(m, "matrix");
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.output.find(fmt::format("{} devices, ", devices) + kGroupedHeading), std::string::npos) << r.output;
  Grid g = read_grid(r.output, "BUS|HB|NO|\\?");
  EXPECT_GT(g.rows, 1u) << r.output;
  EXPECT_LE(g.rows, kMostDeviceGroups);
  EXPECT_EQ(g.legend, g.rows);
  EXPECT_EQ(g.legend_devices, devices);
  EXPECT_LE(g.widest, kDeviceGridColumns);
  EXPECT_EQ(g.counted["BUS"], by_type["BUS_ADDR"]) << r.output;
  EXPECT_EQ(g.counted["HB"], by_type["THRU_HOST_BRIDGE"]) << r.output;
  EXPECT_EQ(g.counted["NO"], by_type["NOT_SUPPORTED"]) << r.output;
  EXPECT_EQ(g.counted["?"], by_type["UNKNOWN"]) << r.output;
  EXPECT_GT(by_type["BUS_ADDR"] + by_type["NOT_SUPPORTED"], 0u) << "a machine with more than one verdict";
  EXPECT_LT(lines_of(r.output).size(), devices);

  auto verbose = tool(m, "--verbose matrix");
  EXPECT_EQ(verbose.output.find(kGroupedHeading), std::string::npos);
  EXPECT_EQ(tool(m, "matrix --details").output, verbose.output);
  EXPECT_EQ(device_rows(verbose.output, "X|BUS|HB|NO|\\?", devices), devices) << verbose.output.substr(0, 2000);
  EXPECT_EQ(tool(m, "matrix --all").output.find(kGroupedHeading), std::string::npos);
}

}  // namespace
}  // namespace p2paudit
