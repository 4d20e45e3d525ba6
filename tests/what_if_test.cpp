// SPDX-License-Identifier: GPL-2.0-or-later
// --assume-acs-off and --diff, held against the kernel itself: the oracle machines booted with
// pci=disable_acs_redir= or with an extra whitelist entry, next to the same machine booted without
// (data/kernel-oracle/SOURCE.md); then the spec syntax, unknown ACS, and bad input.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "p2paudit/assumptions.h"
#include "p2paudit/errors.h"
#include "p2paudit/kernel_cmdline.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "p2paudit/what_if.h"
#include "synthetic_tree.h"
#include "oracle_cases.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kOracle = test::oracle_dir();

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// What the kernel answered for one ordered pair: verdicts.txt, and its verbose lines from dmesg.txt.
struct Recorded {
  std::string map;
  int dist = 0, distance_many = 0;
  std::vector<std::string> log;
};
using PairKey = std::pair<std::string, std::string>;  // provider, client BDF
using Records = std::map<PairKey, Recorded>;

Records read_records(const std::string& name) {
  Records out;
  for (const auto& line : read_lines(kOracle / name / "verdicts.txt")) {
    std::istringstream in(line);  // "P2P <provider> <client> map=<type> dist=<n> distance_many=<ret>"
    std::string tag, p, c, map, dist, many;
    in >> tag >> p >> c >> map >> dist >> many;
    if (tag == "P2P") out[{p, c}] = {map.substr(4), std::stoi(dist.substr(5)), std::stoi(many.substr(14)), {}};
  }
  Recorded* current = nullptr;  // between "p2poracle: pair P C verbose-begin" and "... verbose-end"
  for (auto line : read_lines(kOracle / name / "dmesg.txt")) {
    if (line.starts_with("[")) line = line.substr(line.find("] ") + 2);
    auto at = line.find("p2poracle: pair ");
    if (at == std::string::npos) {
      if (current) current->log.push_back(line);
      continue;
    }
    std::istringstream in(line.substr(at + 16));
    std::string p, c, what;
    in >> p >> c >> what;
    current = what == "verbose-begin" ? &out[{p, c}] : nullptr;
  }
  return out;
}

std::set<PairKey> keys(const Records& r) {
  std::set<PairKey> out;
  for (const auto& [k, v] : r) out.insert(k);
  return out;
}

// The pairs whose map type or pci_p2pdma_distance() differs between two recorded boots.
std::set<PairKey> differing(const Records& a, const Records& b) {
  std::set<PairKey> out;
  for (const auto& [k, v] : a)
    if (v.map != b.at(k).map || v.distance_many != b.at(k).distance_many) out.insert(k);
  return out;
}

// The value of `pci=disable_acs_redir=` on a command line as the kernel reads it, "" when absent.
std::string disable_acs_redir_value(const std::string& cmdline) {
  return kernel_pci_option(read_kernel_cmdline(cmdline), "disable_acs_redir").value_or("");
}

// The case booted with the same command line minus `pci=disable_acs_redir=VALUE`, on the same machine.
std::string booted_without(const std::string& name, const std::string& value) {
  std::string cmdline = test::read_oracle_meta(name)["cmdline"];
  std::string param = " pci=disable_acs_redir=" + value;
  cmdline.erase(cmdline.find(param), param.size());
  for (const auto& other : test::oracle_cases())
    if (test::read_oracle_meta(other)["cmdline"] == cmdline && keys(read_records(other)) == keys(read_records(name))) return other;
  return "";
}

Topology oracle_topology(const std::string& name) {
  return read_topology(Sysroot::open((kOracle / name / "sysroot.tar.gz").string()));
}

KernelRules rules_for(const Topology& topo, std::vector<std::string> assume_whitelisted = {}) {
  return load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo.platform,
                           {"", {}, std::move(assume_whitelisted)});
}

test::CommandResult tool(const std::string& args) {
  return test::run_command(std::string(P2PAUDIT_TOOL) + " " + args + " 2>/dev/null");
}
test::CommandResult tool_stderr(const std::string& args) {
  return test::run_command(std::string(P2PAUDIT_TOOL) + " " + args + " 2>&1 >/dev/null");
}
std::string sysroot(const std::string& name) { return (kOracle / name / "sysroot.tar.gz").string(); }

// `matrix --all --diff` on the machine booted without the parameter (or entry), with the what-if
// options that stand for it, lists exactly the pairs the kernel answered differently when booted
// with it, each before -> after as the two boots recorded.
void expect_diff_is_the_second_boot(const std::string& without, const std::string& options, const std::string& with) {
  auto run = tool("--sysroot " + sysroot(without) + " " + options + " --format json matrix --all --diff");
  ASSERT_EQ(run.status, 0) << options;
  json j = json::parse(run.output);
  Records before = read_records(without), after = read_records(with);
  std::set<PairKey> listed;
  for (const auto& c : j["changes"]) {
    PairKey k{c["provider"], c["client"]};
    listed.insert(k);
    const std::string what = without + " " + options + ": " + k.first + " -> " + k.second;
    EXPECT_EQ(c["before"]["map_type"], before.at(k).map) << what;
    EXPECT_EQ(c["before"]["p2pdma_distance"], before.at(k).distance_many) << what;
    EXPECT_EQ(c["after"]["map_type"], after.at(k).map) << what;
    EXPECT_EQ(c["after"]["p2pdma_distance"], after.at(k).distance_many) << what;
    EXPECT_FALSE(c["why"].get<std::string>().empty()) << what;
  }
  EXPECT_EQ(listed, differing(before, after)) << without << " " << options << " vs " << with;
}

// ---------------------------------------------------------------------------------------------
// The kernel booted with pci=disable_acs_redir=
// ---------------------------------------------------------------------------------------------

std::vector<std::string> cases_booted_with_disable_acs_redir() {
  std::vector<std::string> out;
  for (const auto& name : test::oracle_cases())
    if (!disable_acs_redir_value(test::read_oracle_meta(name)["cmdline"]).empty()) out.push_back(name);
  return out;
}

TEST(WhatIf, OracleHasCasesBootedWithDisableAcsRedirAndTheirSiblings) {
  auto cases = cases_booted_with_disable_acs_redir();
  EXPECT_GE(cases.size(), 2u);  // h-d5 (pci:1b36:000c) and h-d5b (0000:00:01.0), beside h-d4
  for (const auto& name : cases) {
    std::string value = disable_acs_redir_value(test::read_oracle_meta(name)["cmdline"]);
    EXPECT_EQ(disable_acs_redir_value(oracle_topology(name).platform.cmdline), value) << name << ": proc/cmdline";
    EXPECT_FALSE(booted_without(name, value).empty()) << name;
  }
}

// The strongest check: the machine booted without the parameter, with the parameter's own value
// assumed, gives every pair the kernel's answer (map, distance, return, verbose lines) when booted with it.
TEST(WhatIf, AcsOffGivesTheKernelsAnswersWhenBootedWithTheParameter) {
  for (const auto& name : cases_booted_with_disable_acs_redir()) {
    std::string value = disable_acs_redir_value(test::read_oracle_meta(name)["cmdline"]);
    std::string without = booted_without(name, value);
    ASSERT_FALSE(without.empty()) << name;
    Topology topo = oracle_topology(without);
    AcsRedirectOff off = assume_acs_redirect_off(topo, {value});
    EXPECT_FALSE(off.cleared.empty()) << name;
    KernelRules rules = rules_for(topo);
    size_t agree = 0;
    for (const auto& [k, e] : read_records(name)) {
      const std::string what = without + " --assume-acs-off " + value + " (= " + name + "): " + k.first + " -> " + k.second;
      PairVerdict v = pci_p2pdma_distance(topo, rules, *topo.index_of(*Bdf::parse(k.first)),
                                          *topo.index_of(*Bdf::parse(k.second)));
      bool same = to_string(v.map_type) == e.map && v.distance == e.dist && v.p2pdma_distance == e.distance_many &&
                  v.kernel_log == e.log;
      EXPECT_TRUE(same) << what << ": " << to_string(v.map_type) << " " << v.distance << " vs " << e.map << " "
                        << e.dist << "\n  ours: " << fmt::format("{}", fmt::join(v.kernel_log, "\n        "))
                        << "\n  kernel: " << fmt::format("{}", fmt::join(e.log, "\n          "));
      agree += same;
    }
    std::cout << "[ what-if  ] " << without << " --assume-acs-off " << value << " = " << name << ": " << agree
              << " pairs agree\n";
  }
}

TEST(WhatIf, AcsOffDiffListsExactlyThePairsTheParameterChanged) {
  for (const auto& name : cases_booted_with_disable_acs_redir()) {
    std::string value = disable_acs_redir_value(test::read_oracle_meta(name)["cmdline"]);
    expect_diff_is_the_second_boot(booted_without(name, value), "--assume-acs-off " + test::shell_quote(value), name);
  }
}

TEST(WhatIf, MachineBootedWithTheParameterHasNothingLeftToClear) {
  Topology topo = oracle_topology("h-d5-intel-iommu-on-disable-acs-redir");
  AcsRedirectOff off = assume_acs_redirect_off(topo, {"pci:1b36:000c"});
  EXPECT_TRUE(off.cleared.empty());
  EXPECT_EQ(off.already_clear.size(), 2u);  // both pcie-root-ports, cleared by the kernel at boot
  EXPECT_EQ(off.kernel_parameter(topo), "");
}

// ---------------------------------------------------------------------------------------------
// The kernel booted with an extra whitelist entry (p2poracle.extra_whitelist=), and without
// ---------------------------------------------------------------------------------------------

// "8086:29c0,1b36:000c:1" as --assume-whitelisted options.
std::string assume_whitelisted_options(const std::string& name) {
  std::string cmdline = test::read_oracle_meta(name)["cmdline"];
  auto at = cmdline.find("p2poracle.extra_whitelist=");
  std::istringstream entries(cmdline.substr(at + 26, cmdline.find(' ', at) - at - 26));
  std::string out;
  for (std::string e; std::getline(entries, e, ',');)
    out += " --assume-whitelisted " + (e.ends_with(":1") ? e.substr(0, 9) + ":same-host-bridge" : e);
  return out;
}

TEST(WhatIf, AssumeWhitelistedDiffIsWhatTheKernelDidWithTheEntry) {
  // Each machine booted with extra entries beside the same machine booted without (the descriptions
  // say which; d1 has RR|CR where g4/g5 have RR only: the same redirect for the kernel).
  const std::pair<const char*, const char*> siblings[] = {
      {"h-g1-whitelist-q35", "h-a-two-rootports-intel"},
      {"h-g2-whitelist-q35-req-same-host", "h-a-two-rootports-intel"},
      {"h-g3-whitelist-other-id", "h-a-two-rootports-intel"},
      {"h-f3b-rciep-whitelisted", "h-f3-rciep-intel"},
      {"h-f8b-multifunction-rootports-whitelisted", "h-f8-multifunction-rootports"},
      {"h-e2-pxb-rp-at-devfn0-whitelisted", "h-e1-pxb-rp-at-devfn0"},
      {"h-e5-pxb-whitelist-req-same-host", "h-e1-pxb-rp-at-devfn0"},
      {"h-e6-pxb-only-q35-whitelisted", "h-e1-pxb-rp-at-devfn0"},
      {"h-g4-whitelist-q35-rp-acs", "h-d1-rp-acs-rr-cr-mf-switch"},
      {"h-g5-whitelist-q35-req-same-rp-acs", "h-d1-rp-acs-rr-cr-mf-switch"},
  };
  for (const auto& [with, without] : siblings) {
    ASSERT_EQ(test::read_oracle_meta(with)["extra_whitelist_used"], "yes") << with;
    ASSERT_EQ(keys(read_records(with)), keys(read_records(without))) << with << " and " << without;
    expect_diff_is_the_second_boot(without, assume_whitelisted_options(with), with);
  }
  // The acceptance example: the q35 host bridge entry turns exactly the cross-root-port pairs
  // THRU_HOST_BRIDGE (8 functions, 52 pairs NOT_SUPPORTED before).
  auto j = json::parse(tool("--sysroot " + sysroot("h-a-two-rootports-intel") +
                            " --assume-whitelisted 8086:29c0 --format json matrix --all --diff").output);
  EXPECT_EQ(j["changes"].size(), 52u);
  for (const auto& c : j["changes"]) EXPECT_EQ(c["after"]["map_type"], "THRU_HOST_BRIDGE");
}

// ---------------------------------------------------------------------------------------------
// The library on synthetic trees
// ---------------------------------------------------------------------------------------------

// Root port, a PLX-like switch whose downstream ports redirect (RR|CR, as the kernel sets them
// under an IOMMU), and an endpoint below each downstream port.
test::Tree switch_with_redirect(std::optional<uint16_t> dsp_acs = 0x001d) {
  test::Tree tree;
  tree.rp("00:01.0");
  tree.add("01:00.0", "00:01.0", 0x10b5, 0x8747, PcieType::kSwitchUpstream);
  tree.add("02:00.0", "01:00.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream, dsp_acs);
  tree.add("02:01.0", "01:00.0", 0x10b5, 0x8747, PcieType::kSwitchDownstream, dsp_acs);
  tree.ep("03:00.0", "02:00.0");
  tree.ep("04:00.0", "02:01.0");
  return tree;
}

TEST(WhatIf, AcsOffOnASwitchWithRedirectTurnsThePairBusAddr) {
  test::Tree tree = switch_with_redirect();
  Topology as_read = tree.t;
  KernelRules rules = rules_for(as_read);
  size_t a = tree.index("03:00.0"), b = tree.index("04:00.0");
  EXPECT_EQ(pci_p2pdma_distance(as_read, rules, a, b).map_type, MapType::kNotSupported);

  AcsRedirectOff off = assume_acs_redirect_off(tree.t, {"all"});
  ASSERT_EQ(off.cleared.size(), 2u);
  EXPECT_EQ(off.cleared[0].ctrl_before, 0x001d);
  EXPECT_EQ(off.cleared[0].ctrl_after, 0x0011);  // SV and UF stay: only RR, CR and EC are cleared
  EXPECT_TRUE(off.without_acs.empty());          // `all` names only devices with ACS
  EXPECT_EQ(off.kernel_parameter(tree.t), "pci=disable_acs_redir=0000:02:00.0;0000:02:01.0");
  PairVerdict v = pci_p2pdma_distance(tree.t, rules, a, b);
  EXPECT_EQ(v.map_type, MapType::kBusAddr);
  EXPECT_EQ(v.p2pdma_distance, 4);

  auto devices = matrix_devices(tree.t, true);
  auto changes = kernel_verdict_changes(P2pdmaIndex(as_read, rules), P2pdmaIndex(tree.t, rules), devices);
  auto it = std::find_if(changes.begin(), changes.end(), [&](const PairChange& c) { return c.provider == a && c.client == b; });
  ASSERT_NE(it, changes.end());
  EXPECT_EQ(change_line(tree.t, *it).substr(0, 69),
            "nvme0 -> nvme1: NOT_SUPPORTED -> BUS_ADDR (ACS redirect off on 0000:0");
  EXPECT_NE(it->why.find("ACS redirect off on 0000:02:00.0, 0000:02:01.0 (--assume-acs-off): "), std::string::npos)
      << it->why;
}

TEST(WhatIf, DevicesAreNamedAsTheKernelParameterNamesThem) {
  auto cleared = [](const std::vector<std::string>& specs) {
    test::Tree tree = switch_with_redirect();
    std::vector<std::string> out;
    for (const auto& c : assume_acs_redirect_off(tree.t, specs).cleared) out.push_back(tree.t.functions[c.function].bdf.str());
    return out;
  };
  const std::vector<std::string> first{"0000:02:00.0"}, both{"0000:02:00.0", "0000:02:01.0"};
  EXPECT_EQ(cleared({"02:00.0"}), first);                      // domain 0 when left out
  EXPECT_EQ(cleared({"0000:02:00.0;0000:02:01.0"}), both);     // the kernel's separator
  EXPECT_EQ(cleared({"0000:02:00.0,02:01.0"}), both);          // the other one pci_disable_acs_redir() takes
  EXPECT_EQ(cleared({"02:00.0", "0000:02:01.0"}), both);       // repeated
  EXPECT_EQ(cleared({"02:00.0;02:00.0"}), first);              // named twice, cleared once
  EXPECT_EQ(cleared({"0000:00:01.0/00.0/00.0"}), first);       // path below a device (lspci -t)
  EXPECT_EQ(cleared({"pci:10b5:8747"}), both);                 // vendor:device
  EXPECT_EQ(cleared({"pci:10b5:0"}), both);                    // 0 matches any device ID
}

// What --assume-acs-off makes of a pasted spec on the switch with redirect: the devices cleared and
// the notes.
std::pair<std::vector<std::string>, std::vector<std::string>> read_pasted(const std::string& spec) {
  test::Tree tree = switch_with_redirect();
  AcsRedirectOff off = assume_acs_redirect_off(tree.t, {spec});
  std::vector<std::string> out;
  for (const auto& c : off.cleared) out.push_back(tree.t.functions[c.function].bdf.str());
  return {out, off.notes(tree.t)};
}

TEST(WhatIf, TheKernelParameterIsTakenAsPasted) {
  const std::vector<std::string> first{"0000:02:00.0"}, second{"0000:02:01.0"}, both{"0000:02:00.0", "0000:02:01.0"};
  EXPECT_EQ(read_pasted("pci=disable_acs_redir=0000:02:00.0;0000:02:01.0").first, both);
  EXPECT_EQ(read_pasted("disable_acs_redir=0000:02:00.0;02:01.0").first, both);
  EXPECT_EQ(read_pasted("BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=0b1c ro quiet splash "
                 "pci=noaer,disable_acs_redir=0000:02:00.0;0000:02:01.0,realloc iommu=pt")
                .first,
            both);
  // GRUB's default file quotes the line and may escape the ';'.
  EXPECT_EQ(read_pasted("GRUB_CMDLINE_LINUX_DEFAULT=\"quiet pci=disable_acs_redir=0000:02:00.0\\;pci:10b5:8747\"").first, both);
  // pci_setup() keeps the last disable_acs_redir= it sees.
  EXPECT_EQ(read_pasted("pci=disable_acs_redir=0000:02:00.0 quiet pci=disable_acs_redir=0000:02:01.0").first, second);
  // ',' ends a pci= option: the kernel takes only the first device and says why.
  auto comma = read_pasted("pci=disable_acs_redir=0000:02:00.0,0000:02:01.0");
  EXPECT_EQ(comma.first, first);
  ASSERT_FALSE(comma.second.empty());
  EXPECT_EQ(comma.second[0], "pci= options are separated by ',': the kernel ends disable_acs_redir= at the ',' before "
                             "0000:02:01.0 and reports \"PCI: Unknown option `0000:02:01.0'\"; separate the devices "
                             "with ';'");
  // The option alone in a longer command line is no kernel parameter.
  auto bare = read_pasted("quiet disable_acs_redir=0000:02:01.0 pci=disable_acs_redir=0000:02:00.0");
  EXPECT_EQ(bare.first, first);
  EXPECT_NE(bare.second[0].find("'disable_acs_redir=0000:02:01.0' is not a kernel parameter on its own"),
            std::string::npos)
      << bare.second[0];
}

// The kernel reads its parameters up to a bare "--" (parse_args() hands the rest to init) and keeps
// a double-quoted stretch inside one parameter (next_arg()): a pci=disable_acs_redir= there names
// nothing, and the note says why.
TEST(WhatIf, OnlyTheKernelsOwnParametersNameDevices) {
  const std::vector<std::string> first{"0000:02:00.0"}, both{"0000:02:00.0", "0000:02:01.0"};
  auto dashes = read_pasted("pci=disable_acs_redir=0000:02:00.0 quiet -- pci=disable_acs_redir=0000:02:01.0");
  EXPECT_EQ(dashes.first, first);
  ASSERT_FALSE(dashes.second.empty());
  EXPECT_EQ(dashes.second[0], "'pci=disable_acs_redir=0000:02:01.0' stands after \"--\": the kernel stops reading its "
                              "parameters there and hands the rest to init; ignored");
  auto quoted = read_pasted("pci=disable_acs_redir=0000:02:00.0 dyndbg=\"file x.c +p pci=disable_acs_redir=0000:02:01.0\"");
  EXPECT_EQ(quoted.first, first);
  ASSERT_FALSE(quoted.second.empty());
  EXPECT_EQ(quoted.second[0], "'dyndbg=\"file x.c +p pci=disable_acs_redir=0000:02:01.0\"' is one kernel parameter, "
                              "dyndbg (the kernel keeps a double-quoted stretch inside one word): the "
                              "disable_acs_redir= in it is part of that parameter's value, not a pci= option; ignored");
  // Quotes the kernel removes: around the value, around the whole word; '-' for '_' in the name.
  EXPECT_EQ(read_pasted("quiet pci=\"disable_acs_redir=0000:02:00.0;0000:02:01.0\"").first, both);
  EXPECT_EQ(read_pasted("quiet \"pci=noaer,disable_acs_redir=0000:02:00.0\" ro").first, first);
  // Nothing the kernel would apply: the error says why each one is not.
  for (const std::string spec : {"quiet -- pci=disable_acs_redir=0000:02:00.0",
                                 "quiet x=\"pci=disable_acs_redir=0000:02:00.0\"",
                                 "quiet \"--\" pci=disable_acs_redir=0000:02:00.0"}) {
    test::Tree tree = switch_with_redirect();
    try {
      assume_acs_redirect_off(tree.t, {spec});
      ADD_FAILURE() << "accepted: " << spec;
    } catch (const InputError& e) {
      std::string message = e.what();
      EXPECT_NE(message.find("no pci=disable_acs_redir= in this kernel command line"), std::string::npos) << message;
      EXPECT_NE(message.find("; ignored"), std::string::npos) << message;
    }
    EXPECT_EQ(tree.t.functions[tree.index("02:00.0")].acs.ctrl, 0x001d) << spec;
  }
}

// /etc/default/grub's line: the shell's quotes first, then GRUB's words, which reach the kernel
// with a word holding a blank in double quotes.
TEST(WhatIf, GrubLineIsReadThroughTheShellAndGrub) {
  auto cleared = [](const std::string& spec) {
    test::Tree tree = switch_with_redirect();
    std::vector<std::string> out;
    for (const auto& c : assume_acs_redirect_off(tree.t, {spec}).cleared) out.push_back(tree.t.functions[c.function].bdf.str());
    return out;
  };
  const std::vector<std::string> first{"0000:02:00.0"}, both{"0000:02:00.0", "0000:02:01.0"};
  EXPECT_EQ(cleared("GRUB_CMDLINE_LINUX='quiet pci=disable_acs_redir=0000:02:00.0\\;0000:02:01.0'"), both);
  EXPECT_EQ(cleared("GRUB_CMDLINE_LINUX=\"pci=disable_acs_redir='0000:02:00.0;0000:02:01.0'\""), both);
  EXPECT_EQ(cleared("GRUB_CMDLINE_LINUX_DEFAULT=\"pci=disable_acs_redir=0000:02:00.0 -- "
                    "pci=disable_acs_redir=0000:02:01.0\""),
            first);
  // A GRUB word with a blank is one kernel word: what it holds names nothing.
  EXPECT_EQ(cleared("GRUB_CMDLINE_LINUX=\"pci=disable_acs_redir=0000:02:00.0 "
                    "dyndbg='x pci=disable_acs_redir=0000:02:01.0'\""),
            first);
  for (const std::string spec : {"GRUB_CMDLINE_LINUX=\"quiet", "GRUB_CMDLINE_LINUX=\"a='b\"",
                                 "GRUB_CMDLINE_LINUX='pci=disable_acs_redir=0000:02:00.0 x=\\\"y'"}) {
    test::Tree tree = switch_with_redirect();
    EXPECT_THROW(assume_acs_redirect_off(tree.t, {spec}), InputError) << spec;
  }
}

TEST(WhatIf, OracleCommandLinesAsPastedNameTheSameDevices) {
  // Each case booted with the parameter: its whole /proc/cmdline, pasted, clears what the value does.
  for (const auto& name : cases_booted_with_disable_acs_redir()) {
    std::string cmdline = test::read_oracle_meta(name)["cmdline"];
    std::string value = disable_acs_redir_value(cmdline);
    std::string without = booted_without(name, value);
    Topology by_value = oracle_topology(without), by_cmdline = oracle_topology(without);
    auto a = assume_acs_redirect_off(by_value, {value}), b = assume_acs_redirect_off(by_cmdline, {cmdline});
    EXPECT_EQ(a.kernel_parameter(by_value), b.kernel_parameter(by_cmdline)) << name << ": " << cmdline;
    EXPECT_FALSE(b.cleared.empty()) << name;
  }
}

TEST(WhatIf, NamedDevicesWithoutAcsOrUnreadableAcsAreStatedNotGuessed) {
  test::Tree tree = switch_with_redirect();
  tree.t.functions[tree.index("02:01.0")].acs.state = CapState::kUnknown;  // an unprivileged read
  Topology as_read = tree.t;
  AcsRedirectOff off = assume_acs_redirect_off(tree.t, {"pci:10b5:0"});
  EXPECT_EQ(off.cleared.size(), 1u);
  EXPECT_EQ(off.without_acs, std::vector<size_t>{tree.index("01:00.0")});
  EXPECT_EQ(off.unreadable, std::vector<size_t>{tree.index("02:01.0")});
  EXPECT_EQ(tree.t.functions[tree.index("02:01.0")].acs.state, CapState::kUnknown);
  KernelRules rules = rules_for(tree.t);
  EXPECT_EQ(pci_p2pdma_distance(tree.t, rules, tree.index("03:00.0"), tree.index("04:00.0")).map_type,
            MapType::kUnknown);
  auto notes = off.notes(tree.t);
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_EQ(notes[0], "assumed booted with pci=disable_acs_redir=0000:02:00.0: ACS redirect (RR/CR/EC) cleared on "
                      "0000:02:00.0 (ACS control 0x001d -> 0x0011)");
  EXPECT_NE(notes[1].find("no ACS capability on 0000:01:00.0: the kernel would warn"), std::string::npos);
  EXPECT_EQ(notes[2], "the ACS control register of 0000:02:01.0 was not readable: left unknown (run as root)");
}

TEST(WhatIf, IntelSunrisePointRootPortKeepsWhatP2pdmaReads) {
  test::Tree tree;
  tree.add("00:1c.0", "", 0x8086, 0xa110, PcieType::kRootPort, 0x001d);
  AcsRedirectOff off = assume_acs_redirect_off(tree.t, {"all"});
  EXPECT_EQ(off.pch_quirk.size(), 1u);
  EXPECT_EQ(tree.t.functions[0].acs.ctrl, 0x001d);
}

TEST(WhatIf, BadSpecsAreInputErrorsNamingThem) {
  for (const std::vector<std::string>& specs :
       std::vector<std::vector<std::string>>{{}, {""}, {";"}, {"02:00.0;"}, {"0000:09:00.0"}, {"zz"}, {"02:00"},
                                             {"pci:1b36"}, {"pci:12345:1"}, {"pci:10b5:8747:1"}, {"00:01.0/20.0"},
                                             {"00:01.0/00.0/03.0"}, {"pci:1234:5678"}, {"PCI:10b5:8747"}, {"ALL"},
                                             {"all;"}, {"pci=noaer"}, {"pci=disable_acs_redir="},
                                             {"quiet disable_acs_redir=02:00.0"}, {"pci=disable_acs_redir=zz"}}) {
    test::Tree tree = switch_with_redirect();
    try {
      assume_acs_redirect_off(tree.t, specs);
      ADD_FAILURE() << "accepted: " << fmt::format("{}", fmt::join(specs, " | "));
    } catch (const InputError& e) {
      std::string message = e.what();
      EXPECT_TRUE(message.starts_with("--assume-acs-off")) << message;
      if (!specs.empty()) {
        EXPECT_NE(message.find(specs.front()), std::string::npos) << message;
      }
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
}

TEST(WhatIf, CaveatForKernelsThatRestoreTheFirmwareBits) {
  EXPECT_FALSE(acs_redirect_off_caveat(*KernelRelease::parse("6.10.14")));
  EXPECT_TRUE(acs_redirect_off_caveat(*KernelRelease::parse("6.11")));
  EXPECT_TRUE(acs_redirect_off_caveat(*KernelRelease::parse("6.14.11")));
  EXPECT_FALSE(acs_redirect_off_caveat(*KernelRelease::parse("6.15")));
}

// ---------------------------------------------------------------------------------------------
// The command line
// ---------------------------------------------------------------------------------------------

const std::string kD4 = "--sysroot " + sysroot("h-d4-intel-iommu-on");

TEST(WhatIfCli, EveryCommandStatesTheAssumption) {
  const std::string stated = "assumed booted with pci=disable_acs_redir=0000:00:01.0: ACS redirect (RR/CR/EC) cleared "
                             "on 0000:00:01.0 (ACS control 0x001d -> 0x0011)";
  const std::string off = kD4 + " --assume-acs-off 00:01.0 ";
  EXPECT_NE(tool(off + "topology").output.find("note: --assume-acs-off: " + stated), std::string::npos);
  EXPECT_NE(tool(off).output.find("note: --assume-acs-off: " + stated), std::string::npos);  // the audit's tree
  EXPECT_NE(tool(off + "matrix").output.find("Note: " + stated), std::string::npos);
  EXPECT_NE(tool(off + "explain nvme0 nvme1").output.find("Note: " + stated), std::string::npos);
  auto policy = json::parse(tool(off + "--format json policy --no-probe").output);
  EXPECT_NE(std::find(policy["kernel"]["notes"].begin(), policy["kernel"]["notes"].end(), stated),
            policy["kernel"]["notes"].end());
  EXPECT_EQ(tool_stderr(off + "check nvme0 nvme1 --no-probe").output, "p2paudit: note: " + stated + "\n");
  auto topology = json::parse(tool(off + "--format json topology").output);
  EXPECT_EQ(topology["functions"][1]["bdf"], "0000:00:01.0");
  EXPECT_EQ(topology["functions"][1]["acs_ctrl"], 0x0011);  // the topology itself is the assumed one
  EXPECT_EQ(topology["findings"][0]["path"], "--assume-acs-off");
}

TEST(WhatIfCli, AcsOffChangesTheAnswerOfEveryCommand) {
  const std::string off = kD4 + " --assume-acs-off 0000:00:01.0 ";
  EXPECT_EQ(tool(kD4 + " check nvme0 nvme1 --no-probe").status, 1);
  // The decision turns to peer, a plain yes: the capture holds no kernel config, but its NVMe drive's
  // p2pmem directory shows a kernel built with CONFIG_PCI_P2PDMA (only that kernel makes one).
  auto after = tool(off + "--format json check nvme0 nvme1 --no-probe");
  EXPECT_EQ(after.status, 0);
  EXPECT_EQ(json::parse(after.output)["certain"], true);
  EXPECT_EQ(json::parse(after.output)["decision"], "peer");
  auto explain = json::parse(tool(off + "--format json explain nvme0 nvme1").output);
  EXPECT_EQ(explain["pairs"][0]["map_type"], "BUS_ADDR");
}

// A whole command line pasted into --assume-acs-off: a pci=disable_acs_redir= after "--" or inside
// another parameter's quoted value is not the kernel's, so the pair the kernel refuses stays refused
// (01:00.0, the one the kernel would apply, changes nothing here).
TEST(WhatIfCli, PastedCommandLineIsReadAsTheKernelReadsIt) {
  EXPECT_EQ(tool(kD4 + " --assume-acs-off 00:01.0 check nvme0 nvme1 --no-probe").status, 0);  // the parameter works
  for (const std::string line : {"pci=disable_acs_redir=0000:01:00.0 quiet -- pci=disable_acs_redir=0000:00:01.0",
                                 "pci=disable_acs_redir=0000:01:00.0 dyndbg=\"file x.c +p "
                                 "pci=disable_acs_redir=0000:00:01.0\""}) {
    auto run = test::run_command(std::string(P2PAUDIT_TOOL) + " " + kD4 + " --assume-acs-off " + test::shell_quote(line) +
                                 " --format json check nvme0 nvme1 --no-probe 2>&1");
    EXPECT_EQ(run.status, 1) << line << ": " << run.output;
    EXPECT_NE(run.output.find("ignored"), std::string::npos) << line << ": " << run.output;
    auto j = json::parse(run.output.substr(run.output.find('{')));
    EXPECT_EQ(j["decision"], "host_staged") << line;
  }
  auto none = test::run_command(std::string(P2PAUDIT_TOOL) + " " + kD4 + " --assume-acs-off " +
                                test::shell_quote("quiet -- pci=disable_acs_redir=0000:00:01.0") +
                                " check nvme0 nvme1 --no-probe 2>&1 >/dev/null; echo \"rc=$?\"");
  EXPECT_TRUE(none.output.ends_with("rc=2\n")) << none.output;
  EXPECT_NE(none.output.find("stands after"), std::string::npos) << none.output;
}

TEST(WhatIfCli, CheckDiffShowsThePairBeforeAndAfter) {
  auto text = tool(kD4 + " --assume-acs-off 00:01.0 --diff check nvme0 nvme1 --no-probe");
  EXPECT_EQ(text.status, 0);  // peer after; a p2pmem directory shows CONFIG_PCI_P2PDMA
  EXPECT_NE(text.output.find("\nwhat-if: nvme0 -> nvme1: NOT_SUPPORTED, host_staged [kernel-refuses] -> BUS_ADDR, "
                             "peer [same-switch] (ACS redirect off on 0000:00:01.0 (--assume-acs-off): "),
            std::string::npos)
      << text.output;
  EXPECT_NE(text.output.find("\nNote: assumed booted with pci=disable_acs_redir=0000:00:01.0"), std::string::npos);
  auto j = json::parse(tool(kD4 + " --assume-acs-off 00:01.0 --diff --format json check nvme0 nvme1 --no-probe").output);
  EXPECT_EQ(j["what_if"]["changed"], true);
  EXPECT_EQ(j["what_if"]["change"]["before"]["decision"], "host_staged");
  EXPECT_EQ(j["what_if"]["change"]["after"]["decision"], "peer");
  auto same = tool(kD4 + " --assume-acs-off 00:01.0 --diff check nvme1 nic0 --no-probe");  // below the switch
  EXPECT_NE(same.output.find("\nwhat-if: unchanged against the machine as read\n"), std::string::npos) << same.output;
}

TEST(WhatIfCli, PolicyDiffComparesDecisions) {
  auto j = json::parse(tool(kD4 + " --assume-acs-off all --diff --format json policy --no-probe").output);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["what_if"], json::array({"--assume-acs-off all"}));
  ASSERT_FALSE(j["changes"].empty());
  for (const auto& c : j["changes"]) {
    EXPECT_TRUE(c["before"]["decision"].is_string()) << c.dump();
    EXPECT_EQ(c["after"]["map_type"], "BUS_ADDR") << c.dump();
    EXPECT_EQ(c["after"]["decision"], "peer") << c.dump();
  }
  auto text = tool(kD4 + " --assume-acs-off all --diff policy --no-probe").output;
  EXPECT_TRUE(text.starts_with("What changes with --assume-acs-off all against the machine as read (")) << text;
  auto nothing = tool(kD4 + " --assume-acs-off 01:00.0 --diff matrix");
  EXPECT_EQ(nothing.status, 0);
  EXPECT_TRUE(nothing.output.starts_with("Nothing changes with --assume-acs-off 01:00.0 against the machine as read.\n"));
}

TEST(WhatIfCli, BadInputIsOneLineAndExitTwo) {
  const std::pair<std::string, std::string> cases[] = {
      {"--assume-acs-off 0000:09:00.0 matrix", "0000:09:00.0"},
      {"--assume-acs-off '' matrix", "empty"},
      {"--assume-acs-off ';' matrix", "empty"},
      {"--assume-acs-off junk matrix", "junk"},
      {"--assume-acs-off pci:zz:1 policy --no-probe", "pci:zz:1"},
      {"--diff matrix", "--diff"},
      {"--assume-acs-off all --diff topology", "--diff"},
      {"--assume-acs-off all --diff explain nvme0 nvme1", "--diff"},
      {"--assume-acs-off all --diff --format env policy --no-probe", "env"},
  };
  for (const auto& [args, named] : cases) {
    auto run = test::run_command(std::string(P2PAUDIT_TOOL) + " " + kD4 + " " + args + " 2>&1 >/dev/null; echo \"rc=$?\"");
    EXPECT_TRUE(run.output.ends_with("rc=2\n")) << args << ": " << run.output;
    std::string message = run.output.substr(0, run.output.rfind("rc="));
    EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1) << args << ": " << message;
    EXPECT_TRUE(message.starts_with("p2paudit: ")) << args << ": " << message;
    EXPECT_NE(message.find(named), std::string::npos) << args << ": " << message;
  }
}

TEST(WhatIfCli, KernelReleaseDiffNamesTheRules) {
  auto j = json::parse(tool("--sysroot " + sysroot("h-b-two-rootports-epyc") + " --kernel 5.8 --diff --format json matrix").output);
  ASSERT_FALSE(j["changes"].empty());
  for (const auto& c : j["changes"]) {
    EXPECT_EQ(c["before"]["map_type"], "THRU_HOST_BRIDGE");
    EXPECT_EQ(c["after"]["map_type"], "NOT_SUPPORTED");
    EXPECT_TRUE(c["why"].get<std::string>().starts_with("kernel 5.8's rules instead of 6.1.192's; kernel 5.8 predates "
                                                        "the AMD Zen CPU rule (5.9+): "))
        << c["why"];
  }
}

}  // namespace
}  // namespace p2paudit
