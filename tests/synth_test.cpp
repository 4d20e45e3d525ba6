// SPDX-License-Identifier: GPL-2.0-or-later
// The synthetic machine generator (tools/p2paudit-synth): deterministic output, exact sizes and
// shapes as the analyzer reads them back, ACS as asked, the same tree as lspci draws, and the same
// topology from the directory and the tarball.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "p2paudit/topology_report.h"
#include "synth.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using synth::Machine;
using synth::Options;

class TempDir {
 public:
  TempDir() {
    char templ[] = "/tmp/p2paudit-synth-test-XXXXXX";
    dir_ = mkdtemp(templ);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
};

std::string write_tree(const Options& o, const TempDir& tmp, const std::string& name) {
  std::string dir = tmp.path(name);
  fs::create_directory(dir);
  Machine::plan(o).write_directory(dir);
  return dir;
}

Topology read(const std::string& path) { return read_topology(Sysroot::open(path)); }

uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Every entry below dir: files by the hash of their bytes, links by their target, directories as such.
std::map<std::string, std::string> digest_tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    std::string rel = it->path().lexically_relative(dir).string();
    if (it->is_symlink()) {
      out[rel] = "-> " + fs::read_symlink(it->path()).string();
    } else if (it->is_directory()) {
      out[rel] = "dir";
    } else {
      std::ifstream in(it->path(), std::ios::binary);
      std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      out[rel] = std::to_string(fnv1a(data));
    }
  }
  return out;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string findings_text(const Topology& t) {
  std::string out;
  for (const auto& f : t.findings) out += f.path + ": " + f.message + "\n";
  return out;
}

size_t count_type(const Topology& t, PcieType type) {
  return static_cast<size_t>(std::count_if(t.functions.begin(), t.functions.end(),
                                           [&](const Function& f) { return f.pcie_type == type && !f.is_virtfn; }));
}

bool is_p2p_class(uint32_t class_code) {
  return (class_code >> 8) == 0x0302 || class_code == 0x010802 || (class_code >> 8) == 0x0200 ||
         (class_code >> 16) == 0x12;
}

TEST(Synth, SameOptionsGiveIdenticalTreesAndTarballs) {
  TempDir tmp;
  Options o;
  o.seed = 42;
  o.acs = synth::AcsMode::kMixed;
  auto first = digest_tree(write_tree(o, tmp, "a"));
  auto second = digest_tree(write_tree(o, tmp, "b"));
  EXPECT_GT(first.size(), 1000u);
  EXPECT_EQ(first, second);

  Machine::plan(o).write_tarball(tmp.path("a.tar.gz"));
  Machine::plan(o).write_tarball(tmp.path("b.tar.gz"));
  std::string a = file_bytes(tmp.path("a.tar.gz"));
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, file_bytes(tmp.path("b.tar.gz")));

  o.seed = 43;  // the seed changes the device mix, so the digest would notice
  EXPECT_NE(first, digest_tree(write_tree(o, tmp, "c")));
}

TEST(Synth, FunctionsOptionGivesExactlyThatManyFunctionsReadBack) {
  TempDir tmp;
  for (int n : {8, 16, 64, 257}) {
    Options o;
    o.functions = n;
    o.seed = static_cast<uint64_t>(n);
    Topology t = read(write_tree(o, tmp, "n" + std::to_string(n)));
    EXPECT_EQ(t.functions.size(), static_cast<size_t>(n));
    EXPECT_TRUE(t.findings.empty()) << n << ":\n" << findings_text(t);
    EXPECT_TRUE(t.config_fully_readable) << n;
    if (n >= 64) {  // the realistic mix: about a fifth are the devices P2P is about
      double share = static_cast<double>(std::count_if(t.functions.begin(), t.functions.end(), [](const Function& f) {
                       return is_p2p_class(f.class_code);
                     })) / n;
      EXPECT_GE(share, 0.15) << n;
      EXPECT_LE(share, 0.30) << n;
    }
  }
}

TEST(Synth, TooFewFunctionsForTheShapeIsAShapeError) {
  Options o;
  o.functions = 20;
  o.depth = 3;
  o.fanout = 4;  // one root port alone brings 106 bridges
  EXPECT_THROW(Machine::plan(o), synth::ShapeError);
  Options too_many_vfs;
  too_many_vfs.endpoints_per_port = 4;
  too_many_vfs.multifunction = 8;
  too_many_vfs.vfs = 8;
  EXPECT_THROW(Machine::plan(too_many_vfs), synth::ShapeError);
}

TEST(Synth, ShapeOptionsGiveTheExpectedPortsEndpointsAndVfs) {
  TempDir tmp;
  Options o;
  o.host_bridges = 2, o.root_ports = 3, o.depth = 2, o.fanout = 3, o.endpoints_per_port = 1, o.multifunction = 2;
  o.vfs = 2;
  o.seed = 5;
  Topology t = read(write_tree(o, tmp, "shape"));
  EXPECT_TRUE(t.findings.empty()) << findings_text(t);
  const size_t root_ports = 2 * 3, upstream = root_ports * (1 + 3), downstream = upstream * 3;
  const size_t endpoint_functions = root_ports * 3 * 3 * 1 * 2;
  EXPECT_EQ(t.host_bridges.size(), 2u);
  EXPECT_EQ(count_type(t, PcieType::kRootPort), root_ports);
  EXPECT_EQ(count_type(t, PcieType::kSwitchUpstream), upstream);
  EXPECT_EQ(count_type(t, PcieType::kSwitchDownstream), downstream);
  EXPECT_EQ(count_type(t, PcieType::kEndpoint), endpoint_functions);

  size_t nic_pfs = 0, vfs = 0;
  for (const auto& f : t.functions) {
    if (f.is_virtfn) {
      ++vfs;
      ASSERT_TRUE(f.physfn.has_value()) << f.bdf.str();
      EXPECT_EQ(t.functions[*f.physfn].class_code, 0x020000u) << f.bdf.str();
      EXPECT_EQ(f.parent, t.functions[*f.physfn].parent) << f.bdf.str();  // beside its PF in sysfs
    } else if (f.class_code == 0x020000) {
      ++nic_pfs;
      EXPECT_EQ(f.virtfns.size(), 2u) << f.bdf.str();
      ASSERT_TRUE(f.sriov.has_value()) << f.bdf.str();
      EXPECT_EQ(f.sriov->num_vfs, 2);
    }
  }
  EXPECT_GT(nic_pfs, 0u);  // seed 5 draws NICs; with none the VF checks would prove nothing
  EXPECT_EQ(vfs, nic_pfs * 2);
  // Every endpoint device sits below a leaf downstream port, two switch levels under its root port.
  for (const auto& f : t.functions) {
    if (f.pcie_type != PcieType::kEndpoint || f.is_virtfn) continue;
    ASSERT_TRUE(f.parent.has_value());
    int switch_ports = 0;
    for (auto up = f.parent; up; up = t.functions[*up].parent)
      switch_ports += t.functions[*up].pcie_type == PcieType::kSwitchDownstream;
    EXPECT_EQ(switch_ports, 2) << f.bdf.str();
  }
}

void expect_acs(synth::AcsMode mode, bool want_on, bool want_off) {
  TempDir tmp;
  Options o;
  o.acs = mode;
  o.host_bridges = 2, o.root_ports = 5, o.depth = 1, o.fanout = 4;
  Topology t = read(write_tree(o, tmp, "acs"));
  size_t on = 0, off = 0;
  for (const auto& f : t.functions) {
    bool port = f.pcie_type == PcieType::kRootPort || f.pcie_type == PcieType::kSwitchDownstream;
    if (!port) {
      if (f.pcie_type == PcieType::kSwitchUpstream || f.pcie_type == PcieType::kEndpoint) {
        EXPECT_EQ(f.acs.state, CapState::kAbsent) << f.bdf.str();
      }
      continue;
    }
    EXPECT_EQ(f.acs.state, CapState::kPresent) << f.bdf.str();
    uint16_t redirect = f.acs.ctrl & (kAcsRr | kAcsCr);
    EXPECT_TRUE(redirect == 0 || redirect == (kAcsRr | kAcsCr)) << f.bdf.str() << " ctrl " << f.acs.ctrl;
    (redirect ? on : off)++;
  }
  EXPECT_EQ(on > 0, want_on);
  EXPECT_EQ(off > 0, want_off);
  EXPECT_EQ(on + off, 10u + 40u);  // 10 root ports, 40 downstream ports
}

TEST(Synth, AcsOnOffAndMixedAreReadBack) {
  expect_acs(synth::AcsMode::kOn, true, false);
  expect_acs(synth::AcsMode::kOff, false, true);
  expect_acs(synth::AcsMode::kMixed, true, true);
}

// BDFs in `lspci -tv`: "[DDDD:BB]" starts a root bus, "-[SS-EE]-" or "-[SS]-" after a bridge gives its
// children's bus, and a device "DD.F" takes the bus of the column it is drawn in.
std::set<std::string> bdfs_from_lspci_tree(const std::string& text) {
  static const std::regex token(R"(\[([0-9a-f]{4}):([0-9a-f]{2})\]|([0-9a-f]{2})\.([0-7])|\[([0-9a-f]{2})(?:-[0-9a-f]{2})?\])");
  static const std::regex name_follows(R"([0-9a-f]{2}\.[0-7]  )");
  std::set<std::string> out;
  std::map<size_t, std::string> bus_at_column;  // "DDDD:BB" for devices drawn at that column
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch named;  // -v appends "  Vendor Device" to a device: names are not part of the tree
    if (std::regex_search(line, named, name_follows)) line.resize(static_cast<size_t>(named.position(0)) + 4);
    std::string domain, pending;  // pending: the bus the next device on this line belongs to
    for (auto it = std::sregex_iterator(line.begin(), line.end(), token); it != std::sregex_iterator(); ++it) {
      const std::smatch& m = *it;
      auto column = static_cast<size_t>(m.position(0));
      if (m[1].matched) {
        domain = m[1];
        pending = m.str(1) + ":" + m.str(2);
      } else if (m[3].matched) {
        if (!pending.empty()) bus_at_column[column] = pending, pending.clear();
        const std::string& bus = bus_at_column[column];
        domain = bus.substr(0, 4);
        out.insert(bus + ":" + m.str(3) + "." + m.str(4));
      } else {
        pending = domain + ":" + m.str(5);
      }
    }
  }
  return out;
}

TEST(Synth, LspciDrawsTheSameFunctionsAsTheAnalyzerReads) {
  if (!fs::exists("/usr/bin/lspci")) GTEST_SKIP() << "no /usr/bin/lspci";
  TempDir tmp;
  Options o;
  o.functions = 300;
  o.multifunction = 2;
  o.vfs = 3;
  std::string dir = write_tree(o, tmp, "lspci");
  auto r = test::run_command("/usr/bin/lspci -A linux-sysfs -O sysfs.path=" + test::shell_quote(dir + "/sys/bus/pci") +
                             " -tv 2>/dev/null");
  ASSERT_EQ(r.status, 0);
  std::set<std::string> analyzer;
  for (const auto& f : read(dir).functions) analyzer.insert(f.bdf.str());
  EXPECT_EQ(analyzer.size(), 300u);
  std::set<std::string> drawn = bdfs_from_lspci_tree(r.output), only_drawn, only_read;
  std::set_difference(drawn.begin(), drawn.end(), analyzer.begin(), analyzer.end(), std::inserter(only_drawn, only_drawn.end()));
  std::set_difference(analyzer.begin(), analyzer.end(), drawn.begin(), drawn.end(), std::inserter(only_read, only_read.end()));
  EXPECT_TRUE(only_drawn.empty() && only_read.empty())
      << "only in lspci -tv: " << testing::PrintToString(only_drawn) << "\nonly read by the analyzer: "
      << testing::PrintToString(only_read);
  // And -vvv decodes every function without complaint about the files.
  auto verbose = test::run_command("/usr/bin/lspci -A linux-sysfs -O sysfs.path=" +
                                   test::shell_quote(dir + "/sys/bus/pci") + " -vvv 2>&1 >/dev/null | grep -v libkmod");
  EXPECT_EQ(verbose.output, "");
}

TEST(Synth, TarballAndDirectoryReadBackToTheSameTopology) {
  TempDir tmp;
  Options o;
  o.functions = 200;
  o.acs = synth::AcsMode::kMixed;
  o.cpu = synth::CpuVendor::kIntel;
  Machine m = Machine::plan(o);
  fs::create_directory(tmp.path("dir"));
  m.write_directory(tmp.path("dir"));
  m.write_tarball(tmp.path("snap.tar.gz"));
  Topology from_dir = read(tmp.path("dir")), from_tar = read(tmp.path("snap.tar.gz"));
  EXPECT_EQ(from_dir.functions.size(), 200u);
  EXPECT_EQ(from_dir.platform.cpu_vendor, "GenuineIntel");
  EXPECT_EQ(topology_to_json(from_dir).dump(1), topology_to_json(from_tar).dump(1));
}

// The command line: usage errors exit 2 with one line, and an existing tree is kept without --force.
TEST(Synth, CommandLineRefusesBadArgumentsAndNonEmptyDirectories) {
  TempDir tmp;
  const std::string tool = test::shell_quote(P2PAUDIT_SYNTH_TOOL);
  EXPECT_EQ(test::run_command(tool + " --help >/dev/null").status, 0);
  EXPECT_EQ(test::run_command(tool + " 2>/dev/null").status, 2);  // nothing to write
  EXPECT_EQ(test::run_command(tool + " -o " + tmp.path("x") + " --acs sometimes 2>/dev/null").status, 2);
  EXPECT_EQ(test::run_command(tool + " -o " + tmp.path("x") + " --kernel ../etc 2>/dev/null").status, 2);
  EXPECT_EQ(test::run_command(tool + " -o " + tmp.path("x") + " --functions 2 2>/dev/null").status, 2);
  EXPECT_FALSE(fs::exists(tmp.path("x")));  // checked before anything is written

  std::string dir = tmp.path("out");
  EXPECT_EQ(test::run_command(tool + " -q -o " + dir + " --functions 32").status, 0);
  auto again = test::run_command(tool + " -q -o " + dir + " --functions 40 2>&1");
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.output.find("not empty"), std::string::npos) << again.output;
  EXPECT_EQ(read(dir).functions.size(), 32u);
  EXPECT_EQ(test::run_command(tool + " -q --force -o " + dir + " --functions 40 --tar " + tmp.path("t.tar.gz")).status, 0);
  EXPECT_EQ(read(dir).functions.size(), 40u);
  EXPECT_EQ(read(tmp.path("t.tar.gz")).functions.size(), 40u);
}

}  // namespace
}  // namespace p2paudit
