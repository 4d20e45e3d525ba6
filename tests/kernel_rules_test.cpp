// SPDX-License-Identifier: GPL-2.0-or-later
// Kernel releases, the whitelist table each release gets, and validation of the rule files.
#include <gtest/gtest.h>

#include <fstream>

#include "p2paudit/errors.h"
#include "p2paudit/kernel_rules.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;

const fs::path kRules = fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel";

KernelRules rules_for(const std::string& release, KernelRuleOptions options = {}) {
  Platform platform;
  platform.kernel_release = release;
  platform.config_p2pdma = Known::kYes;
  return load_kernel_rules(kRules, platform, options);
}

std::vector<std::string> table(const KernelRules& rules) {
  std::vector<std::string> ids;
  for (const auto& e : rules.whitelist) ids.push_back(e.id() + (e.same_host_bridge ? "/same" : ""));
  return ids;
}

TEST(KernelRelease, ParsesDistributionAndRcReleases) {
  struct Case {
    const char* text;
    int major, minor, patch, rc;
  } cases[] = {{"6.1.192", 6, 1, 192, 0},       {"6.18.44-cloud", 6, 18, 44, 0}, {"5.15.0-25-generic", 5, 15, 0, 0},
               {"7.3-rc7", 7, 3, 0, 7},         {"7.3.0-rc7+", 7, 3, 0, 7},      {"4.20", 4, 20, 0, 0},
               {"6.8.0-151-generic", 6, 8, 0, 0}};
  for (const auto& c : cases) {
    auto r = KernelRelease::parse(c.text);
    ASSERT_TRUE(r) << c.text;
    EXPECT_EQ(std::tie(r->major, r->minor, r->patch, r->rc), std::tie(c.major, c.minor, c.patch, c.rc)) << c.text;
  }
  for (const char* bad : {"", "6", "linux", "6..1", "6.1.2.3", ".6.1", "6.1x", "6.1.", "6.1.0 ", "6.1.0-../x"})
    EXPECT_FALSE(KernelRelease::parse(bad)) << bad;
  EXPECT_EQ(*KernelRelease::parse("7.3-rc7"), *KernelRelease::parse("7.3"));
  EXPECT_LT(*KernelRelease::parse("7.1.2"), *KernelRelease::parse("7.1.3"));
}

TEST(KernelRules, TablesPerRelease) {
  const std::vector<std::string> v61 = {"8086:3c00/same", "8086:3c01/same", "8086:2f00/same", "8086:2f01/same",
                                        "8086:2030",      "8086:2031",      "8086:2032",      "8086:2033",
                                        "8086:2020",      "8086:09a2"};
  EXPECT_EQ(table(rules_for("6.1.192")), v61);
  EXPECT_TRUE(table(rules_for("5.3")).empty());
  EXPECT_EQ(table(rules_for("5.4")),
            (std::vector<std::string>{"1022:1450", "8086:3c00/same", "8086:3c01/same", "8086:2f00/same", "8086:2f01/same"}));
  EXPECT_EQ(table(rules_for("5.8")).at(2), "1022:1630");
  EXPECT_EQ(table(rules_for("5.9")).size(), 9u);
  auto v71 = table(rules_for("7.1"));
  EXPECT_EQ(v71.back(), "1ae0:any");
  EXPECT_EQ(v71.size(), v61.size() + 1);
  auto v713 = table(rules_for("7.1.3"));
  EXPECT_EQ(v713.size(), v61.size() + 11);
  EXPECT_EQ(v713.back(), "1ae0:any");  // the accelerator IDs come before the Google entry
  auto v73 = table(rules_for("7.3-rc7"));
  EXPECT_EQ(v73.back(), "10de:2f98");
  EXPECT_EQ(v73.size(), v61.size() + 15);
}

TEST(KernelRules, EraFeatures) {
  auto r420 = rules_for("4.20");
  EXPECT_TRUE(r420.p2pdma);
  EXPECT_FALSE(r420.map_types);
  EXPECT_FALSE(rules_for("4.19").p2pdma);
  EXPECT_TRUE(rules_for("5.2").amd_zen_root_complex);
  EXPECT_FALSE(rules_for("5.4").amd_zen_root_complex);
  EXPECT_FALSE(rules_for("5.8").cpu_supports_p2pdma);
  EXPECT_TRUE(rules_for("5.9").cpu_supports_p2pdma);
  EXPECT_EQ(rules_for("5.13").root_device_rule, RootDeviceRule::kSlotDevfn0);
  EXPECT_EQ(rules_for("5.13").acs_list_size, 4096u);
  EXPECT_FALSE(rules_for("5.13").whitelist_warning);
  EXPECT_EQ(rules_for("5.15.0-25-generic").root_device_rule, RootDeviceRule::kFirstAtDevfn0);
  EXPECT_EQ(rules_for("5.15").acs_list_size, 128u);
  EXPECT_EQ(rules_for("5.19").root_device_rule, RootDeviceRule::kFirstAtDevfn0OrRootPort);
  EXPECT_FALSE(rules_for("7.0").whitelist_any_device);
  EXPECT_TRUE(rules_for("7.1").whitelist_any_device);
}

TEST(KernelRules, ReleaseChoiceAndNotes) {
  auto newer = rules_for("8.2.1");
  EXPECT_EQ(newer.release.version(), "7.3-rc7");
  ASSERT_FALSE(newer.notes.empty());
  EXPECT_NE(newer.notes[0].find("newer than"), std::string::npos);

  auto missing = rules_for("");
  EXPECT_EQ(missing.release_source, "newest known");
  EXPECT_NE(missing.notes.at(0).find("osrelease"), std::string::npos);

  EXPECT_THROW(rules_for("not-a-kernel"), InputError);
  auto overridden = rules_for("not-a-kernel", {"6.1", {}, {}});
  EXPECT_EQ(overridden.release.version(), "6.1");
  EXPECT_EQ(overridden.release_source, "--kernel");
  EXPECT_THROW(rules_for("6.1", {"six", {}, {}}), InputError);

  // A distribution release hides the stable patch level: the backport is neither assumed in nor out
  // (the pairs it decides are unknown, with one note per entry a host bridge of the machine matches).
  auto ubuntu = rules_for("7.1.0-14-generic");
  EXPECT_EQ(table(ubuntu).size(), 11u);
  ASSERT_EQ(ubuntu.unknown_whitelist.size(), 10u);
  EXPECT_EQ(ubuntu.unknown_whitelist[0].id(), "8086:0b25");
  for (const auto& n : ubuntu.notes) EXPECT_EQ(n.find("8086:0b25"), std::string::npos) << n;
  EXPECT_TRUE(rules_for("7.1.3").unknown_whitelist.empty());
}

TEST(KernelRules, ConfigFromTheSysrootOnlyForItsOwnKernel) {
  Platform platform;
  platform.kernel_release = "6.1.0-13-amd64";
  platform.config_p2pdma = Known::kNo;
  platform.kernel_config_source = "boot/config-6.1.0-13-amd64";
  EXPECT_EQ(load_kernel_rules(kRules, platform, {}).config_p2pdma, Known::kNo);
  auto other = load_kernel_rules(kRules, platform, {"7.2", {}, {}});
  EXPECT_EQ(other.config_p2pdma, Known::kYes);
  EXPECT_FALSE(other.notes.empty());
  platform.config_p2pdma = Known::kUnknown;
  auto unknown = load_kernel_rules(kRules, platform, {});
  EXPECT_EQ(unknown.config_p2pdma, Known::kUnknown);
  EXPECT_NE(unknown.notes.back().find("assuming CONFIG_PCI_P2PDMA=y"), std::string::npos);
}

TEST(KernelRules, AssumedEntriesComeAfterTheTable) {
  auto r = rules_for("6.1", {"", {}, {"8086:29c0", "1b36:000c:same-host-bridge", "1ae0:any"}});
  ASSERT_EQ(r.whitelist.size(), 13u);
  EXPECT_EQ(r.table_entries, 10u);
  EXPECT_EQ(r.whitelist[10].id(), "8086:29c0");
  EXPECT_TRUE(r.whitelist[11].same_host_bridge);
  EXPECT_FALSE(r.whitelist[12].device);
  for (const char* bad : {"8086", "8086:zz", "8086:29c0:same", "18086:29c0", "8086:29c0:same-host-bridge:x"})
    EXPECT_THROW(parse_assumed_whitelisted(bad), InputError) << bad;
}

class RuleFile : public ::testing::Test {
 protected:
  fs::path write(const std::string& text) {
    fs::path p = fs::temp_directory_path() / ("p2paudit-rules-" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(p) << text;
    paths_.push_back(p);
    return p;
  }
  void TearDown() override {
    for (const auto& p : paths_) fs::remove(p);
  }
  std::string error_of(const std::string& text) {
    fs::path p = write(text);
    try {
      load_whitelist_file(p);
    } catch (const InputError& e) {
      std::string msg = e.what();
      EXPECT_TRUE(msg.starts_with(p.string() + ":")) << msg;
      return msg.substr(p.string().size());
    }
    ADD_FAILURE() << "no error for:\n" << text;
    return "";
  }
  std::vector<fs::path> paths_;
};

TEST_F(RuleFile, UserFileExtendsTheTable) {
  fs::path p = write("schema: 1\nentries:\n  - {vendor: \"1234\", device: \"5678\", same_host_bridge: true}\n"
                     "  - {vendor: \"1234\", device: \"9999\", added: \"7.0\"}\n");
  auto r = rules_for("6.1", {"", {p.string()}, {}});
  ASSERT_EQ(r.whitelist.size(), 11u);  // the 7.0+ entry does not apply to 6.1
  EXPECT_EQ(r.whitelist.back().id(), "1234:5678");
  EXPECT_TRUE(r.whitelist.back().same_host_bridge);
}

TEST_F(RuleFile, ErrorsNameFileLineAndColumn) {
  EXPECT_EQ(error_of("schema: 1\nentries:\n  - {vendor: \"8086\", device: \"2030\", colour: red}\n"),
            ":3:38: unknown key 'colour'");
  EXPECT_EQ(error_of("schema: 1\nentries:\n  - vendor: \"80z6\"\n    device: \"2030\"\n"),
            ":3:13: 'vendor' must be a 16-bit hex ID, got '80z6'");
  EXPECT_EQ(error_of("schema: 1\nentries:\n  - {vendor: \"8086\", device: \"2030\", same_host_bridge: maybe}\n"),
            ":3:56: 'same_host_bridge' must be true or false");
  EXPECT_EQ(error_of("schema: 1\nentries:\n  - {vendor: \"8086\", device: \"2030\"}\n  - {vendor: \"8086\", device: \"2030\"}\n"),
            ":4:5: duplicate entry 8086:2030");
  EXPECT_EQ(error_of("schema: 1\nentries:\n  - {vendor: \"8086\", device: [1]}\n"), ":3:30: 'device' must be a scalar");
  EXPECT_EQ(error_of("schema: 1\nentries:\n  - {vendor: \"8086\", device: \"1\", added: \"soon\"}\n"),
            ":3:42: 'added' is not a kernel release: 'soon'");
  EXPECT_EQ(error_of("schema: 2\nentries: []\n"), ":1:9: unsupported schema '2' (expected 1)");
  EXPECT_EQ(error_of("schema: 1\nentries: [\n"), ":3:1: the text ends before the ']' that closes the flow sequence at line 2, column 10");
  // As strict as policy files: one document, each key once.
  EXPECT_EQ(error_of("schema: 1\nentries:\n  - {vendor: \"8086\", device: \"2030\", device: \"2031\"}\n"),
            ":3:38: duplicate key 'device' in entries[0] (first at line 3)");
  EXPECT_EQ(error_of("schema: 1\nentries: []\n---\nschema: 1\n"), ":3:1: a rule file holds one YAML document; this is a second");
  EXPECT_EQ(error_of("schema: 1\nentries:\n  - {vendor: \"8086\", device: \"1\", added: \"6.1x\"}\n"),
            ":3:42: 'added' is not a kernel release: '6.1x'");
  EXPECT_EQ(error_of(""), ":1:1: expected a mapping at the top level");
}

TEST(KernelRules, ShippedDataLoads) {
  auto data = load_kernel_rule_data(kRules);
  EXPECT_EQ(data.newest_known.version(), "7.3-rc7");
  EXPECT_EQ(data.whitelist.size(), 28u);
  EXPECT_EQ(data.features.size(), 10u);
}

}  // namespace
}  // namespace p2paudit
