// SPDX-License-Identifier: GPL-2.0-or-later
// Issue 30, class 2: characters that change what a reader sees without being seen (bidi overrides
// and isolates, zero-width characters: the Trojan Source class, CVE-2021-42574) are valid UTF-8,
// so the byte gate let them through. Planted in /proc/cpuinfo's model name, a driver link's name
// and a rule's reason, every one must reach text (the audit, --verbose, topology, policy,
// whitelist, its commit message and --patch, aggregate's text and CSV, on standard output and in
// -o files) as \u{XXXX}, and JSON literally.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "p2paudit/hidden_characters.h"
#include "p2paudit/input_file.h"
#include "p2paudit/text_style.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

using json = nlohmann::json;
using test::ConfigBytes;
using test::SysrootDir;

// The list, written out here rather than read from the table under test.
std::vector<char32_t> listed() {
  std::vector<char32_t> out = {0x00ad, 0x061c, 0x180e, 0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x2028,
                               0x2029, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2060, 0x2061, 0x2062,
                               0x2063, 0x2064, 0x2066, 0x2067, 0x2068, 0x2069, 0xfe0f, 0xfeff, 0xfff9,
                               0xfffa, 0xfffb, 0xe0001, 0xe0100};
  for (char32_t cp = 0xe0020; cp <= 0xe007f; ++cp) out.push_back(cp);
  return out;
}

std::string utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

std::string shown(char32_t cp) { return fmt::format("\\u{{{:04x}}}", static_cast<std::uint32_t>(cp)); }

// The first listed code point in `out`, as "U+XXXX at byte N: ...context...", or "".
std::string listed_in(const std::string& out) {
  for (char32_t cp : listed()) {
    size_t at = out.find(utf8(cp));
    if (at != std::string::npos)
      return fmt::format("U+{:04X} at byte {}: ...{}...", static_cast<std::uint32_t>(cp), at,
                         escape_text(out.substr(at > 60 ? at - 60 : 0, 120)));
  }
  return "";
}

TEST(HiddenCharacters, EveryListedCodePointIsEscapedInTextAndKeptForJson) {
  for (char32_t cp : listed()) {
    const std::string raw = "nvi" + utf8(cp) + "dia";
    SCOPED_TRACE(shown(cp));
    EXPECT_FALSE(is_clean_text(raw));
    EXPECT_EQ(escape_text(raw), "nvi" + shown(cp) + "dia");
    EXPECT_TRUE(is_clean_text(escape_text(raw)));
    EXPECT_EQ(escape_line(raw + "\n"), "nvi" + shown(cp) + "dia\\x0a");
    EXPECT_EQ(text_columns(raw), 6 + shown(cp).size());  // as the gate shows it
    EXPECT_TRUE(is_clean_bytes(raw));                     // JSON keeps it
    EXPECT_EQ(escape_bytes(raw), raw);
  }
  // Visible neighbours stay: spaces of other widths, letters, a hyphen, a box, an emoji.
  for (char32_t cp : {0x00a0u, 0x00e9u, 0x2010u, 0x2003u, 0x4e2du, 0xfffdu, 0x1f600u, 0x10ffffu}) {
    const std::string raw = "a" + utf8(cp) + "b";
    EXPECT_TRUE(is_clean_text(raw)) << shown(cp);
    EXPECT_EQ(text_columns(raw), 3u) << shown(cp);
  }
  // The byte classes keep their \xNN, and each escape is counted as wide as it is shown.
  EXPECT_EQ(escape_text("a\x1b\xc2\x9b\xff" + utf8(0x202e) + "b"), "a\\x1b\\xc2\\x9b\\xff\\u{202e}b");
  EXPECT_EQ(escape_bytes("a\x1b\xff" + utf8(0x202e) + "b"), "a\\x1b\\xff" + utf8(0x202e) + "b");
  EXPECT_EQ(text_columns("a\x1b" "b"), 6u);
  // Every code point of the table is escaped, and nothing just outside its ranges is.
  for (const auto& r : hidden_character_ranges()) {
    EXPECT_EQ(escape_text(utf8(r.first)), shown(r.first)) << r.why;
    EXPECT_EQ(escape_text(utf8(r.last)), shown(r.last)) << r.why;
    if (!is_hidden_character(r.last + 1)) EXPECT_TRUE(is_clean_text(utf8(r.last + 1))) << r.why;
  }
}

// The gate on a stream of its own: a right-to-left override written by anyone is shown.
TEST(HiddenCharacters, StreamGateShowsThem) {
  std::ostringstream out;
  {
    TextGate gate(out);
    out << "if (admin" << utf8(0x202e) << " " << utf8(0x2066) << "// check" << utf8(0x2069) << ")\n";
    out << utf8(0xfeff) << "x" << utf8(0x200b) << "\n";
  }
  EXPECT_EQ(out.str(), "if (admin\\u{202e} \\u{2066}// check\\u{2069})\n\\u{feff}x\\u{200b}\n");
}

// Every listed code point once, in the order of the list.
std::string all_listed() {
  std::string s;
  for (char32_t cp : listed()) s += utf8(cp);
  return s;
}

// The model name (48 bytes at most: a CPUID brand string) and the driver name (a file name: 255
// bytes) each hold a share of the list; the reason holds all of it (YAML \U escapes).
const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    std::string name = "Xeon";
    for (char32_t cp : listed()) {
      if (name.size() + utf8(cp).size() > 48) {
        out.push_back(name);
        name = "Xeon";
      }
      name += utf8(cp);
    }
    out.push_back(name);
    return out;
  }();
  return names;
}

// An Intel host bridge (8086:29c0, not whitelisted) with an NVIDIA GPU and an NVMe drive behind two
// Root Ports: the kernel refuses the pair for the host bridge, so `whitelist` has a candidate. The
// GPU's driver link names a driver that holds the hidden characters.
void build_machine(SysrootDir& s, const std::string& model_name, const std::string& driver) {
  s.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: " +
                              model_name + "\n");
  s.write("proc/sys/kernel/osrelease", "6.1.0\n");
  s.write("boot/config-6.1.0", "CONFIG_PCI_P2PDMA=y\n");
  s.write("proc/cmdline", "root=/dev/sda1 iommu=pt\n");
  s.function("pci0000:00/0000:00:00.0", ConfigBytes(0x8086, 0x29c0, 0x060000, 0).bytes(256));
  for (int port = 1; port <= 2; ++port) {
    std::string rp = fmt::format("pci0000:00/0000:00:0{}.0", port);
    s.function(rp, ConfigBytes(0x1b36, 0x000c, 0x060400, 4, true).buses(0, uint8_t(port), uint8_t(port)).bytes());
    std::string ep = fmt::format("{}/0000:0{}:00.0", rp, port);
    bool gpu = port == 1;
    s.function(ep, ConfigBytes(gpu ? 0x10de : 0x144d, gpu ? 0x2330 : 0xa808, gpu ? 0x030200 : 0x010802, 0).bytes());
    s.link("sys/devices/" + ep + "/driver", "../../../../bus/pci/drivers/" + (gpu ? driver : std::string("nvme")));
    s.link("sys/devices/" + ep + "/iommu_group", "../../../../kernel/iommu_groups/" + std::to_string(port));
    s.write("sys/kernel/iommu_groups/" + std::to_string(port) + "/type", "identity\n");
  }
}

std::string yaml_escaped_list() {
  std::string s;
  for (char32_t cp : listed()) s += fmt::format("\\U{:08x}", static_cast<std::uint32_t>(cp));
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The driver link's name holds the list after "nv" (the rest of a file name stays plain).
std::string planted_driver() { return "nv" + all_listed(); }

TEST(HiddenCharacters, ReachTextEscapedAndJsonLiteral) {
  const std::string tool = test::tool_file();
  for (const auto& model : model_names()) {
    SysrootDir s;
    build_machine(s, model, planted_driver());
    s.write("site.yaml", "version: 1\nplacement: before-defaults\nrules:\n  - id: site-hidden\n"
                         "    when: {provider.class: gpu}\n    action: deny\n    authority: platform\n"
                         "    reason: \"admin only" + yaml_escaped_list() + " ok\"\n"
                         "    remedy: \"ask" + yaml_escaped_list() + "\"\n");
    const std::string sys = test::shell_quote(s.str()), rules = " --rules " + test::shell_quote(s.str() + "/site.yaml");
    const std::string patch = s.str() + "/out.patch", csv = s.str() + "/out.csv", text = s.str() + "/out.txt";
    const std::string archive = s.str() + ".tar.gz";
    s.pack(archive);
    struct Case {
      std::string command;
      std::string file;  // where the output is written, "" for standard output
    };
    const std::vector<Case> cases = {
        {"--no-probe", ""},
        {"--no-probe -v", ""},
        {"topology", ""},
        {"matrix --all --details", ""},
        {"explain 01:00.0 02:00.0", ""},
        {"policy --details --no-probe" + rules, ""},
        {"check 01:00.0 02:00.0 --no-probe" + rules, ""},
        {"whitelist --no-probe", ""},
        {"whitelist --all --commit-message --no-probe", ""},
        {"whitelist --no-probe --candidate 8086:29c0 --force --patch " + test::shell_quote(patch), patch},
        // Pages and exports a person reads: escaped too (the HTML page's data shows its strings).
        {"--format html --no-probe", ""},
        {"--format dot topology", ""},
        {"--format prom --no-probe", ""},
        {"policy --format env --no-probe" + rules, ""},
        {"aggregate --format text " + test::shell_quote(archive), ""},
        {"aggregate --format csv " + test::shell_quote(archive), ""},
        {"aggregate --format csv-wide " + test::shell_quote(archive), ""},
        {"aggregate --format csv -o " + test::shell_quote(csv) + " --force " + test::shell_quote(archive), csv},
        {"aggregate --format text -o " + test::shell_quote(text) + " --force " + test::shell_quote(archive), text},
    };
    bool model_shown = false, driver_shown = false, reason_shown = false;
    for (const auto& c : cases) {
      auto r = test::run_command(tool + " --color never --sysroot " + sys + " " + c.command + " 2>&1");
      EXPECT_NE(r.status, 2) << c.command << ":\n" << escape_text(r.output);
      std::string out = c.file.empty() ? r.output : read_file(c.file);
      EXPECT_FALSE(out.empty()) << c.command;
      EXPECT_EQ(listed_in(out), "") << "p2paudit " << c.command;
      model_shown |= out.find(escape_text(model)) != std::string::npos;
      driver_shown |= out.find(escape_text(planted_driver())) != std::string::npos;
      reason_shown |= out.find("admin only" + escape_text(all_listed()) + " ok") != std::string::npos;
      if (c.command.find("--patch") != std::string::npos)
        EXPECT_NE(out.find(escape_text(model)), std::string::npos) << "the patch names the CPU:\n" << out;
    }
    EXPECT_TRUE(model_shown) << "the model name, escaped, in no output";
    EXPECT_TRUE(driver_shown) << "the driver name, escaped, in no output";
    EXPECT_TRUE(reason_shown) << "the rule's reason, escaped, in no output";

    // JSON: the values as the input had them.
    auto audit = test::run_command(tool + " --format json --no-probe --sysroot " + sys + " 2>/dev/null");
    ASSERT_EQ(audit.status, 0) << audit.output;
    EXPECT_NE(audit.output.find(model), std::string::npos) << "model name literal in JSON";
    EXPECT_EQ(audit.output.find("\\u{"), std::string::npos) << "no text escape in JSON";
    auto policy = test::run_command(tool + " --format json --sysroot " + sys + " policy --details --no-probe" + rules +
                                    " 2>/dev/null");
    EXPECT_NE(policy.output.find("admin only" + all_listed() + " ok"), std::string::npos) << "reason literal in JSON";
    EXPECT_EQ(policy.output.find("\\u{"), std::string::npos) << "no text escape in JSON";
    auto topology = test::run_command(tool + " --format json --sysroot " + sys + " topology 2>/dev/null");
    ASSERT_EQ(topology.status, 0) << topology.output;
    EXPECT_NE(topology.output.find("\"" + planted_driver() + "\""), std::string::npos) << "driver literal in JSON";
    EXPECT_EQ(topology.output.find("\\u{"), std::string::npos) << "no text escape in JSON";
    EXPECT_NO_THROW((void)json::parse(topology.output));
    std::remove(archive.c_str());
  }
}

// A kernel tree whose p2pdma.c holds a Trojan Source line is not the kernel's source: --patch
// refuses to diff against it.
TEST(HiddenCharacters, PatchRefusesAKernelSourceThatHidesText) {
  SysrootDir s;
  build_machine(s, "Intel Xeon", "nvidia");
  s.write("linux/drivers/pci/p2pdma.c", "static const struct pci_p2pdma_whitelist_entry {\n"
                                        "} pci_p2pdma_whitelist[] = {\n\t/* ok" + utf8(0x202e) + " */\n\t{}\n};\n");
  auto r = test::run_command(test::tool_file() + " --color never --no-probe --sysroot " + test::shell_quote(s.str()) +
                             " whitelist --candidate 8086:29c0 --force --patch " +
                             test::shell_quote(s.str() + "/x.patch") + " --kernel-source " + test::shell_quote(s.str() + "/linux") + " 2>&1");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("p2pdma.c: line 3 is not text"), std::string::npos) << r.output;
  EXPECT_EQ(listed_in(r.output), "");
}

}  // namespace
}  // namespace p2paudit
