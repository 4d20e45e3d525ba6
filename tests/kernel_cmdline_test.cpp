// SPDX-License-Identifier: GPL-2.0-or-later
// The kernel command line reader against the kernel's own rules: next_arg() in lib/cmdline.c
// (https://github.com/torvalds/linux/blob/master/lib/cmdline.c: words, quotes), parse_args() in
// kernel/params.c (a bare "--" ends the kernel's parameters; parameq(): '-' and '_' alike) and
// pci_setup() in drivers/pci/pci.c (options split at ',', each pci= word applied in turn).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "p2paudit/kernel_cmdline.h"

namespace p2paudit {
namespace {

// "name" for a flag, "name=value" otherwise, after the checks every reading must pass: the name
// and value are the text at their offsets, in order, inside the word.
std::vector<std::string> shown(const std::string& text, const std::vector<KernelArg>& args) {
  std::vector<std::string> out;
  size_t last_end = 0;
  for (const auto& a : args) {
    EXPECT_LE(last_end, a.begin) << text;
    EXPECT_LE(a.begin, a.name_at) << text;
    EXPECT_LE(a.end, text.size()) << text;
    EXPECT_EQ(text.substr(a.name_at, a.name.size()), a.name) << text;
    if (a.value) {
      EXPECT_LT(a.name_at + a.name.size(), a.value_at + 1) << text;
      EXPECT_LE(a.value_at + a.value->size(), a.end) << text;
      EXPECT_EQ(text.substr(a.value_at, a.value->size()), *a.value) << text;
    }
    last_end = a.end;
    out.push_back(a.value ? a.name + "=" + *a.value : a.name);
  }
  return out;
}
std::vector<std::string> params(const std::string& text) { return shown(text, read_kernel_cmdline(text).params); }
std::vector<std::string> init(const std::string& text) { return shown(text, read_kernel_cmdline(text).init_args); }
using Words = std::vector<std::string>;

TEST(KernelCmdline, WordsSplitAtWhitespaceOutsideDoubleQuotes) {
  EXPECT_EQ(params("  ro quiet  root=/dev/sda1\n"), (Words{"ro", "quiet", "root=/dev/sda1"}));
  EXPECT_EQ(params("a=1\tb=2\vc=3\fd=4\re=5"), (Words{"a=1", "b=2", "c=3", "d=4", "e=5"}));
  // The kernel's isspace() (lib/ctype.c) counts Latin-1's no-break space 0xa0 too.
  EXPECT_EQ(params("a=1\xa0" "b=2"), (Words{"a=1", "b=2"}));
  // Inside double quotes a blank is part of the word: the value keeps it.
  EXPECT_EQ(params("dyndbg=\"file x.c +p\" quiet"), (Words{"dyndbg=file x.c +p", "quiet"}));
  // A quote anywhere toggles quoting: the word goes on past the blank.
  EXPECT_EQ(params("a=x\"y z\" b"), (Words{"a=x\"y z\"", "b"}));
  // A NUL ends the kernel's string.
  EXPECT_EQ(params(std::string("a=1 b=2\0c=3", 11)), (Words{"a=1", "b=2"}));
  EXPECT_TRUE(params("").empty());
  EXPECT_TRUE(params(" \n\t").empty());
}

TEST(KernelCmdline, QuotesAreRemovedWhereNextArgRemovesThem) {
  EXPECT_EQ(params("a=\"x y\""), (Words{"a=x y"}));          // "Don't include quotes in value."
  EXPECT_EQ(params("\"a=x y\""), (Words{"a=x y"}));          // a word that starts with a quote
  EXPECT_EQ(params("\"flag\""), (Words{"flag"}));
  EXPECT_EQ(params("a=\"x"), (Words{"a=x"}));                // unclosed: to the end of the text
  EXPECT_EQ(params("a=\"\""), (Words{"a="}));
  EXPECT_EQ(params("a=\""), (Words{"a="}));
  EXPECT_EQ(params("\""), (Words{""}));
  EXPECT_EQ(params("\"a=\"x\"\""), (Words{"a=x\""}));        // one trailing quote goes, not two
  EXPECT_EQ(params("a=x\""), (Words{"a=x\""}));              // no opening quote: the closing one stays
  // The name ends at the first '=' that is not the word's first character.
  EXPECT_EQ(params("=a=b"), (Words{"=a=b"}));
  EXPECT_EQ(read_kernel_cmdline("=a=b").params[0].name, "=a");
  EXPECT_EQ(params("="), (Words{"="}));
  EXPECT_FALSE(read_kernel_cmdline("=").params[0].value);
  EXPECT_EQ(params("a==b"), (Words{"a==b"}));
  EXPECT_EQ(read_kernel_cmdline("a==b").params[0].value, "=b");
}

TEST(KernelCmdline, BareDoubleDashEndsTheKernelsParameters) {
  auto line = read_kernel_cmdline("ro -- pci=noaer single");
  EXPECT_EQ(shown("ro -- pci=noaer single", line.params), Words{"ro"});
  EXPECT_EQ(shown("ro -- pci=noaer single", line.init_args), (Words{"pci=noaer", "single"}));
  EXPECT_EQ(line.dashes_at, 3u);
  // Compared after next_arg(): a quoted "--" is one too; "--=" and "---" are parameters.
  EXPECT_EQ(params("a \"--\" b"), Words{"a"});
  EXPECT_EQ(params("--=x ---  b"), (Words{"--=x", "---", "b"}));
  EXPECT_FALSE(read_kernel_cmdline("--=x").dashes_at);
  // Everything after the first one is init's, a second "--" too.
  EXPECT_EQ(init("a -- -- b"), (Words{"--", "b"}));
  // Inside a quoted value, "--" is no word of its own.
  EXPECT_EQ(params("a=\"x -- y\" b"), (Words{"a=x -- y", "b"}));
}

TEST(KernelCmdline, NamesCompareWithDashAndUnderscoreAlike) {
  EXPECT_TRUE(kernel_param_name_is("intel-iommu", "intel_iommu"));
  EXPECT_TRUE(kernel_param_name_is("vfio-pci.ids", "vfio_pci.ids"));
  EXPECT_FALSE(kernel_param_name_is("iommu_passthrough", "iommu.passthrough"));
  EXPECT_FALSE(kernel_param_name_is("iommu", "iommu.passthrough"));
  EXPECT_FALSE(kernel_param_name_is("Iommu", "iommu"));
  EXPECT_EQ(kernel_param_last(read_kernel_cmdline("intel-iommu=off"), "intel_iommu"), "off");
}

TEST(KernelCmdline, LastValueWins) {
  EXPECT_EQ(kernel_param_last(read_kernel_cmdline("iommu=pt quiet iommu=nopt"), "iommu"), "nopt");
  EXPECT_EQ(kernel_param_last(read_kernel_cmdline("quiet"), "quiet"), "");
  EXPECT_FALSE(kernel_param_last(read_kernel_cmdline("quiet"), "iommu"));
  EXPECT_EQ(kernel_param_last(read_kernel_cmdline("iommu=pt -- iommu=nopt"), "iommu"), "pt");
  EXPECT_EQ(kernel_param_last(read_kernel_cmdline("iommu=pt dyndbg=\"x iommu=nopt\""), "iommu"), "pt");
}

TEST(KernelCmdline, PciOptionsAcrossWords) {
  auto pci = [](const std::string& text, const std::string& key) { return kernel_pci_option(read_kernel_cmdline(text), key); };
  EXPECT_EQ(pci("pci=noaer,disable_acs_redir=A;B,realloc", "disable_acs_redir"), "A;B");
  EXPECT_EQ(pci("pci=disable_acs_redir=A,disable_acs_redir=B", "disable_acs_redir"), "B");
  // Each pci= word is its own pci_setup() call: a later one overrides, one without the option keeps it.
  EXPECT_EQ(pci("pci=disable_acs_redir=A quiet pci=disable_acs_redir=B", "disable_acs_redir"), "B");
  EXPECT_EQ(pci("pci=disable_acs_redir=A pci=noaer", "disable_acs_redir"), "A");
  EXPECT_EQ(pci("pci=\"disable_acs_redir=A\"", "disable_acs_redir"), "A");  // quotes gone from the value
  EXPECT_EQ(pci("pci=disable_acs_redir=A -- pci=disable_acs_redir=B", "disable_acs_redir"), "A");
  EXPECT_EQ(pci("pci=disable_acs_redir=A x=\"y pci=disable_acs_redir=B\"", "disable_acs_redir"), "A");
  EXPECT_FALSE(pci("pci", "disable_acs_redir"));          // pci_setup(NULL) reads nothing
  EXPECT_FALSE(pci("pci=\"noaer disable_acs_redir=A\"", "disable_acs_redir"));  // one option, not two
  EXPECT_EQ(kernel_param_options(read_kernel_cmdline("iommu=soft,pt iommu=nopt"), "iommu"),
            (Words{"soft", "pt", "nopt"}));
}

TEST(KernelCmdline, LongHostileLineIsReadInOnePass) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "a=\"b c\" \"\"\" ";
  auto line = read_kernel_cmdline(text);
  EXPECT_FALSE(line.params.empty());
  shown(text, line.params);
}

}  // namespace
}  // namespace p2paudit
