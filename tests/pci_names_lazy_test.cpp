// SPDX-License-Identifier: GPL-2.0-or-later
// pci.ids is parsed only when a printed text needs a name (issue 21): the audit's screen, matrix,
// policy, check and explain read the tree without names (TopologyReadScope::pci_names), and the
// kernel's texts that name a device look the name up then (pci_device_name()), giving byte for
// byte what the names read with the tree give.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "p2paudit/config_space.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "temp_dir.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;

Topology read(const std::string& sysroot, bool pci_names) {
  return read_topology(Sysroot::open(sysroot), {.descriptive_attributes = false, .pci_names = pci_names});
}

KernelRules kernel_rules(const Topology& t) {
  return load_kernel_rules(fs::path(test::rules_source()) / "kernel", t.platform, {});
}

const policy::RuleSet& default_rules() {
  static const policy::RuleSet rules = policy::RuleSet::load(policy::default_rule_files(test::rules_source()));
  return rules;
}

// What the audit's text prints (its first screen) and, with verbose, `policy --verbose`'s texts.
std::string policy_text(const Topology& t, const KernelRules& kernel, bool verbose) {
  policy::PolicyEvaluator evaluator(t, kernel, default_rules(), nullptr);
  std::ostringstream out;
  auto devices = matrix_devices(t, false);
  if (verbose) policy::write_policy_text(out, evaluator, devices, true);
  else policy::write_decision_screen(out, evaluator, devices);
  return out.str();
}

// Every text the kernel's verdicts print about a machine's devices: the matrix with each pair's
// reason, kernel log and remedy (and each device's name), `explain` of each device to all others.
std::string kernel_texts(const Topology& t, const KernelRules& kernel) {
  P2pdmaIndex index(t, kernel);
  auto devices = matrix_devices(t, true);
  std::ostringstream out;
  write_matrix_json(out, index, devices, true);
  std::vector<size_t> all;
  for (const auto& d : devices) all.push_back(d.index);
  for (const auto& d : devices) {
    std::vector<size_t> others;
    for (size_t i : all)
      if (i != d.index) others.push_back(i);
    if (!others.empty()) out << explain_text(t, kernel, pci_p2pdma_distance_many(t, kernel, d.index, others));
  }
  return out.str();
}

// The case whose kernel remedy names its host bridge's root device (not in the whitelist).
std::string host_bridge_not_whitelisted() {
  return test::data_path("kernel-oracle/h-a-two-rootports-intel/sysroot.tar.gz");
}

// "[VVVV:DDDD] (name)" of every named function the text prints so.
size_t named_labels(const std::string& text, const Topology& named) {
  size_t found = 0;
  for (const Function& f : named.functions)
    if (!f.device_name.empty())
      found += text.find(fmt::format("[{:04x}:{:04x}] ({})", f.vendor, f.device, f.device_name)) != std::string::npos;
  return found;
}

// How many times a child process parsed pci.ids doing `work`: this process's count stays as it was.
std::uint64_t loads_in_child(const std::function<void()>& work) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 100;  // work threw
    try {
      work();
      code = static_cast<int>(std::min<std::uint64_t>(pci_name_list_loads(), 99));
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 200;
  return WEXITSTATUS(status);
}

// First in this file: the process must not have parsed pci.ids before (ctest runs each case alone),
// or its children would start with the names parsed.
TEST(PciNamesLazy, ParsedOnlyWhenAPrintedTextNamesADevice) {
  ASSERT_EQ(pci_name_list_loads(), 0u) << "run this case in its own process (as ctest does)";
  const auto captures = test::fixture_sysroots();
  ASSERT_GE(captures.size(), 10u);
  std::vector<std::uint64_t> screen_loads, verbose_loads;
  for (const auto& c : captures) {
    screen_loads.push_back(loads_in_child([&] {
      Topology t = read(c, false);
      if (!t.pci_names_deferred) throw std::logic_error("names read with the tree");
      for (const Function& f : t.functions)
        if (!f.vendor_name.empty() || !f.device_name.empty() || !f.class_name.empty()) throw std::logic_error("a name");
      if (pci_name_list_loads() != 0) throw std::logic_error("parsed while reading");
      (void)policy_text(t, kernel_rules(t), false);  // the audit's text
    }));
    verbose_loads.push_back(loads_in_child([&] {
      Topology t = read(c, false);
      (void)policy_text(t, kernel_rules(t), true);  // `policy --verbose`: every pair's texts
    }));
  }
  ASSERT_EQ(pci_name_list_loads(), 0u);

  // Now, with the names. A run parsed pci.ids only if a kernel verdict among the devices it decides
  // names a device ("BDF [VVVV:DDDD]", then pci.ids' name): policy builds a note's verdict whole, the
  // kernel's texts with it. And where the printed text names one, it did parse.
  size_t parsed = 0, spared = 0;
  for (size_t i = 0; i < captures.size(); ++i) {
    SCOPED_TRACE(captures[i]);
    Topology eager = read(captures[i], true);
    const KernelRules kernel = kernel_rules(eager);
    std::ostringstream verdicts;
    write_matrix_json(verdicts, P2pdmaIndex(eager, kernel), matrix_devices(eager, false), true);
    bool verdict_names_a_device = false;
    for (const Function& f : eager.functions)
      verdict_names_a_device = verdict_names_a_device ||
                               verdicts.str().find(fmt::format("{} [{:04x}:{:04x}]", f.bdf.str(), f.vendor, f.device)) !=
                                   std::string::npos;
    EXPECT_LE(screen_loads[i], verbose_loads[i]);  // the screen prints a part of those texts
    EXPECT_LE(verbose_loads[i], verdict_names_a_device ? 1u : 0u);
    if (named_labels(policy_text(eager, kernel, true), eager) > 0) {
      EXPECT_EQ(verbose_loads[i], 1u);
    }
    (verbose_loads[i] ? parsed : spared)++;
  }
  EXPECT_GT(parsed, 0u) << "no capture's texts name a device: the names' lookup went untested";
  EXPECT_GT(spared, 0u) << "every capture parsed pci.ids";
}

TEST(PciNamesLazy, DeferredNamesPrintAsTheNamesReadWithTheTree) {
  size_t named = 0;
  bool have_names = false;  // this system's pci.ids named some function
  for (const auto& c : test::fixture_sysroots()) {
    SCOPED_TRACE(c);
    Topology eager = read(c, true), lazy = read(c, false);
    KernelRules kernel = kernel_rules(eager);
    ASSERT_EQ(eager.functions.size(), lazy.functions.size());
    for (size_t i = 0; i < eager.functions.size(); ++i) {
      EXPECT_EQ(pci_device_name(lazy, lazy.functions[i]), eager.functions[i].device_name);
      have_names = have_names || !eager.functions[i].device_name.empty();
    }
    const std::string texts = kernel_texts(eager, kernel);
    EXPECT_EQ(kernel_texts(lazy, kernel), texts);
    EXPECT_EQ(policy_text(lazy, kernel, true), policy_text(eager, kernel, true));
    named += named_labels(texts, eager);
  }
  if (have_names) {
    EXPECT_GT(named, 0u) << "no kernel text named a device on any capture: the comparison proves little";
  }
}

// A topology built by hand, with names of its own (as a test or a snapshot gives them), prints
// those, not pci.ids'.
TEST(PciNamesLazy, NamesReadWithTheTreeAreTheOnesPrinted) {
  Topology t = read(host_bridge_not_whitelisted(), true);
  for (Function& f : t.functions) f.device_name = "Named " + f.bdf.str();
  EXPECT_GE(named_labels(kernel_texts(t, kernel_rules(t)), t), 1u);
}

// The command line: the commands that print no field's name leave pci.ids unopened on a machine
// whose texts name no device, and open it where one does; those that print the tree's names open it.
bool have_strace() { return test::run_command("strace -V >/dev/null 2>&1").status == 0; }

bool opens_pci_ids(const std::string& args) {
  test::TempDir dir;
  const std::string trace = (dir / "trace").string();
  auto r = test::run_command("strace -f -qq -e trace=open,openat,openat2 -o " + test::shell_quote(trace) + " " +
                             test::shell_quote(test::tool_file()) + " " + args + " >/dev/null 2>&1");
  EXPECT_TRUE(r.status == 0 || r.status == 1 || r.status == 3) << args;  // check: 1 not met, 3 unknown
  std::ifstream in(trace);
  std::string line;
  bool opened = false, any = false;
  while (std::getline(in, line)) {
    any = true;
    opened = opened || line.find("pci.ids") != std::string::npos;
  }
  EXPECT_TRUE(any) << "strace wrote nothing for " << args;
  return opened;
}

TEST(PciNamesLazy, CommandsOpenPciIdsOnlyToPrintAName) {
  if (!have_strace()) GTEST_SKIP() << "strace is not installed";
  if (test::kSanitized) GTEST_SKIP() << "a sanitizer's runtime opens files of its own";
  const std::string plain = test::shell_quote(test::data_path("machines/h200x2-firecracker-vm/sysroot.tar.gz"));
  const std::string named = test::shell_quote(host_bridge_not_whitelisted());
  for (const char* command : {"", "--verbose", "policy", "policy --verbose", "policy --format json",
                              "policy --format env", "check gpu0 gpu1", "--assume-acs-off all policy --diff"})
    EXPECT_FALSE(opens_pci_ids("--sysroot " + plain + " " + command)) << "[" << command << "]";
  // Whether pci.ids is there or not, libpci tries to open it for a name: a kernel remedy's, the
  // matrix's list of devices, the tree's.
  EXPECT_TRUE(opens_pci_ids("--sysroot " + named + " policy"));
  EXPECT_TRUE(opens_pci_ids("--sysroot " + plain + " matrix"));
  EXPECT_TRUE(opens_pci_ids("--sysroot " + plain + " topology"));
  EXPECT_TRUE(opens_pci_ids("--sysroot " + plain + " --format json"));
}

}  // namespace
}  // namespace p2paudit
