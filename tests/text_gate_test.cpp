// SPDX-License-Identifier: GPL-2.0-or-later
// Issue 18, part E: one text gate. Every string a snapshot, a capture record, a stored probe
// answer or a vendor-facts file carries reaches text output only through the gate: no terminal
// control (C0 but newline and tab, DEL, C1), valid UTF-8 throughout, and no line the input
// started itself (a `Signed-off-by:` inside the draft commit message). Fields whose real size is
// known are cut, with a finding; CSV cells are guarded against formula injection.
#include <gtest/gtest.h>

#include <fstream>

#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "p2paudit/fleet/aggregate.h"
#include "p2paudit/input_file.h"
#include "p2paudit/platform.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/text_style.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

using json = nlohmann::json;
using test::ConfigBytes;
using test::SysrootDir;

// Every control a terminal acts on, a C1 CSI, an invalid byte, and lines a reviewer would read as
// the tool's (or the submitter's) own.
const std::string kHostile = "\x1b[31mRED\xc2\x9b" "2J\x07" "BEL\rCR\xff\tTAB";
// JSON documents without the invalid byte: the one JSON reader refuses ill-formed UTF-8 whole.
std::string raw_json(const nlohmann::json& j) { return j.dump(-1, ' ', false, json::error_handler_t::ignore); }
// The last three are what git am reads as structure (a patch break, an mbox From line, a diff),
// with spaces so that a wrap can put each at a line's start.
const std::string kLines = "\nSigned-off-by: Mallory <m@evil>\nReviewed-by: Mallory\nLink: https://evil/"
                           " --- Mallory cut\nFrom Mallory Mon Sep 17 00:00:00 2001 diff --git a/Mallory b/Mallory";

std::string tool() { return test::tool_file(); }

// An Intel host bridge (8086:29c0, not whitelisted) with two Root Ports, an NVIDIA GPU bound to
// nvidia behind the first and an NVMe drive behind the second: the kernel refuses the pair for the
// host bridge alone, so `whitelist` has a candidate and drafts a commit message.
void build_machine(SysrootDir& s, const std::string& vendor_id, const std::string& model_name) {
  s.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: " + vendor_id + "\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: " +
                              model_name + "\n");
  s.write("proc/sys/kernel/osrelease", "6.1.0\n");
  s.write("boot/config-6.1.0", "CONFIG_PCI_P2PDMA=y\n");
  s.write("proc/sys/kernel/hostname", "host" + kHostile + kLines + "\n");
  s.write("proc/version", "Linux version 6.1.0 (" + kHostile + ")" + kLines + "\n");
  s.write("proc/cmdline", "root=/dev/sda1 iommu=pt x=" + kHostile + kLines + "\n");
  s.function("pci0000:00/0000:00:00.0", ConfigBytes(0x8086, 0x29c0, 0x060000, 0).bytes(256));
  for (int port = 1; port <= 2; ++port) {
    std::string rp = fmt::format("pci0000:00/0000:00:0{}.0", port);
    s.function(rp, ConfigBytes(0x1b36, 0x000c, 0x060400, 4, true).buses(0, uint8_t(port), uint8_t(port)).bytes());
    std::string ep = fmt::format("{}/0000:0{}:00.0", rp, port);
    bool gpu = port == 1;
    s.function(ep, ConfigBytes(gpu ? 0x10de : 0x144d, gpu ? 0x2330 : 0xa808, gpu ? 0x030200 : 0x010802, 0).bytes());
    s.link("sys/devices/" + ep + "/driver", "../../../../bus/pci/drivers/" + std::string(gpu ? "nvidia" : "nvme"));
    s.link("sys/devices/" + ep + "/iommu_group", "../../../../kernel/iommu_groups/" + std::to_string(port));
    s.write("sys/kernel/iommu_groups/" + std::to_string(port) + "/type", "DMA" + kHostile + kLines + "\n");
  }
  // A NIC whose driver link names no real driver: a file name of the snapshot is input too.
  s.function("pci0000:00/0000:00:03.0", ConfigBytes(0x1b36, 0x000c, 0x060400, 4, true).buses(0, 3, 3).bytes());
  s.function("pci0000:00/0000:00:03.0/0000:03:00.0", ConfigBytes(0x8086, 0x10d3, 0x020000, 0).bytes());
  s.link("sys/devices/pci0000:00/0000:00:03.0/0000:03:00.0/driver", "../../../../bus/pci/drivers/e1000e" + kHostile + kLines);
  for (const char* m : {"nvidia", "nvme"}) {
    s.write(std::string("sys/module/") + m + "/initstate", "live\n");
    s.write(std::string("sys/module/") + m + "/version", "550.1" + kHostile + kLines + "\n");
  }
  json modules = json::object();
  for (const char* m : {"nvidia", "nvme"})
    modules[m] = {{"name", m + kHostile + kLines}, {"version", "550" + kHostile + kLines},
                  {"srcversion", kHostile + kLines}, {"builtin", "no"}};
  json capture = {{"schema_version", 1},
                  {"tool_version", "0.1" + kHostile + kLines},
                  {"captured_at", "2026-11-25T00:00:00Z" + kHostile + kLines},
                  {"hostname", "host" + kHostile + kLines},
                  {"privileged", true},
                  {"modules", modules}};
  s.write("p2paudit-capture.json", raw_json(capture));
  json device = {{"index", 0}, {"bdf", "0000:01:00.0"}, {"name", "NVIDIA H100" + kHostile + kLines},
                 {"pci_device_id", "233010de"}};
  json probe = {{"schema_version", 1},
                {"runtimes", json::array({{{"runtime", "nvml"}, {"status", "ok"},
                                           {"library", "libnvidia-ml.so.1" + kHostile + kLines},
                                           {"driver_version", "550" + kHostile + kLines},
                                           {"devices", json::array({device})},
                                           {"pairs", json::array()}}})}};
  s.write("p2paudit-probe.json", raw_json(probe));
}

// Where the text breaks the gate, or "" when it holds: a line from input (naming Mallory) may not
// start with a trailer or with what git am reads as structure.
std::string gate_breach(const std::string& out) {
  for (size_t i = 0; i < out.size();) {
    unsigned char c = static_cast<unsigned char>(out[i]);
    auto at = [&](const char* what) { return fmt::format("{} at byte {}: ...{}...", what, i, escape_text(out.substr(i > 40 ? i - 40 : 0, 80))); };
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return at("control byte");
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || (len == 2 && c < 0xc2) || i + len > out.size()) return at("invalid UTF-8");
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(out[i + k]) & 0xc0) != 0x80) return at("invalid UTF-8");
    if (c == 0xc2 && static_cast<unsigned char>(out[i + 1]) < 0xa0) return at("C1 control");
    i += len;
  }
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    for (const char* start : {"Signed-off-by:", "Reviewed-by:", "Link:", "---", "From ", "diff -"})
      if (line.starts_with(start) && line.find("Mallory") != std::string::npos) return "a line from input: " + line;
  return "";
}

std::vector<std::string> text_commands() {
  return {"",  // the audit
          "topology", "matrix", "matrix --all --details", "explain 01:00.0 02:00.0", "policy --details",
          "policy --all", "check 01:00.0 02:00.0", "whitelist --commit-message", "whitelist --all --commit-message",
          "-v", "rules facts"};
}

void expect_gated(const std::string& sysroot, const std::string& extra = "") {
  for (const auto& command : text_commands()) {
    auto r = test::run_command(tool() + " --color never --sysroot " + test::shell_quote(sysroot) + " " + extra +
                               command + " 2>&1");
    EXPECT_NE(r.status, 2) << command << ":\n" << escape_text(r.output);
    EXPECT_EQ(gate_breach(r.output), "") << "p2paudit " << command;
  }
}

TEST(TextGate, EveryTextCommandOnAHostileDirectory) {
  SysrootDir s;
  build_machine(s, "GenuineIntel", "Intel Xeon" + kHostile);
  expect_gated(s.str());
  // The same strings as vendor facts and in a rule file.
  json facts = {{"schema_version", 1},
                {"all", {{"vendor.copy_result", "failed"}, {"vendor.copy_error", "1" + kHostile + kLines},
                         {"vendor.copy_runtime", kHostile + kLines}}}};
  s.write("facts.json", raw_json(facts));
  s.write("rules.yaml", "version: 1\nrules:\n  - id: \"x\x1b[31m\"\n    when: {fact: provider.driver, equals: nvidia}\n"
                        "    decide: deny\n    reason: \"r\\e[2J\\u009b\\nSigned-off-by: Mallory\"\n");
  // A valid site rule whose reason and remedy render the facts from input (template values).
  s.write("site.yaml", "version: 1\nplacement: before-defaults\nrules:\n  - id: site-show\n"
                       "    when: {provider.class: gpu}\n    action: deny\n    authority: platform\n"
                       "    reason: \"module {provider.module} {provider.module_version} driver {provider.driver} cpu "
                       "{platform.cpu_vendor} copy {vendor.copy_runtime} {vendor.copy_error}\"\n"
                       "    remedy: \"run {provider.module_version}\"\n");
  for (std::string command : {"policy --details", "check 01:00.0 02:00.0", "whitelist --commit-message", "-v"}) {
    for (std::string option : {" --vendor-facts " + test::shell_quote(s.str() + "/facts.json"),
                               " --rules " + test::shell_quote(s.str() + "/rules.yaml"),
                               " --rules " + test::shell_quote(s.str() + "/site.yaml")}) {
      if ((command.starts_with("whitelist") || command == "-v") && option.starts_with(" --rules")) continue;
      auto r = test::run_command(tool() + " --color never --no-probe --sysroot " + test::shell_quote(s.str()) + " " +
                                 command + option + " 2>&1");
      EXPECT_EQ(gate_breach(r.output), "") << "p2paudit " << command << option;
      if (option.find("site.yaml") != std::string::npos) {  // the rule fired, its values shown on one line
        EXPECT_NE(r.output.find("module nvidia\\x1b[31mRED\\xc2\\x9b2J\\x07BEL\\x0dCR\\x09TAB\\x0aSigned-off-by: Mallory"),
                  std::string::npos) << command << option << "\n" << r.output;
      }
    }
  }
}

TEST(TextGate, EveryTextCommandOnAHostileArchive) {
  SysrootDir s;
  build_machine(s, "Genuine\x1b[2JIntel", "Xeon" + kHostile);
  std::string archive = s.str() + ".tar.gz";
  s.pack(archive);
  expect_gated(archive);
  std::remove(archive.c_str());
}

// aggregate's text and CSV and the inputs it skips: the same gate (a progress line, on a terminal
// only, writes its carriage return through own_controls()). A snapshot's strings reach the host-bridge and CPU
// lines; a skipped input is named by its file name, which a stranger chose.
TEST(TextGate, AggregateTextAndItsMessages) {
  SysrootDir s;
  build_machine(s, "GenuineIntel", "Xeon" + kHostile);
  std::string archive = s.str() + ".tar.gz", bad = s.str() + "-\x1b[31mbad\xc2\x9b\n.json";
  s.pack(archive);
  { std::ofstream(bad) << "{\"kind\": \"p2paudit-report\"}"; }
  for (std::string format : {"text", "csv", "csv-wide"}) {
    auto r = test::run_command(tool() + " --color never aggregate --format " + format + " " +
                               test::shell_quote(archive) + " " + test::shell_quote(bad) + " 2>&1");
    EXPECT_NE(r.output.find("skipped"), std::string::npos) << format << ":\n" << escape_text(r.output);
    EXPECT_EQ(gate_breach(r.output), "") << "p2paudit aggregate --format " << format;
  }
  std::remove(archive.c_str());
  std::remove(bad.c_str());
}

// With colour on, the tool's own escapes reach the terminal and the input's still do not: the
// gate knows the tool's by a secret, not by their bytes (the input's ESC[31m is the tool's red).
TEST(TextGate, ColourPassesAndInputEscapesStillDoNot) {
  SysrootDir s;
  build_machine(s, "Genuine\x1b[31mIntel", "Xeon" + kHostile);
  for (std::string command : {"matrix", "policy --details", "explain 01:00.0 02:00.0", "whitelist --commit-message", ""}) {
    auto r = test::run_command(tool() + " --color always --sysroot " + test::shell_quote(s.str()) + " " + command + " 2>&1");
    EXPECT_EQ(r.output.find("\x1b[31mIntel"), std::string::npos) << command;
    EXPECT_EQ(r.output.find("\x1b[31mRED"), std::string::npos) << command;
    EXPECT_EQ(r.output.find("\xc2\x9b"), std::string::npos) << command;
    EXPECT_EQ(r.output.find("\x07"), std::string::npos) << command;
    EXPECT_EQ(r.output.find("\r"), std::string::npos) << command;
    if (command == "matrix") {
      EXPECT_NE(r.output.find("\x1b[0m"), std::string::npos) << "no colour at all:\n" << r.output;
    }
    // Every ESC left is one of the tool's own colours.
    for (size_t at = 0; (at = r.output.find('\x1b', at)) != std::string::npos; ++at) {
      std::string seq = r.output.substr(at, r.output.find('m', at) - at + 1);
      EXPECT_TRUE(seq == "\x1b[0m" || seq == "\x1b[1m" || seq == "\x1b[31m" || seq == "\x1b[32m" || seq == "\x1b[33m" ||
                  seq == "\x1b[35m")
          << command << ": " << escape_text(seq);
    }
  }
}

// The gate itself, on a stream of its own: what it holds back is judged whole (a UTF-8 sequence
// split over two writes, a flush in the middle of a line), and only own_controls() pass.
TEST(TextGate, StreamGateJudgesWholeSequences) {
  std::ostringstream out;
  {
    TextGate gate(out);
    out << "a\xc3" << "\xa9" "b\n";                              // é written in two halves
    out << "in: \x1b[2J\x9b\xc2\x9b\x7f\r\a\tend\n";          // the input's controls
    out << own_controls("\x1b[31m") << "red" << own_controls("\x1b[0m") << "\n";
    out << own_controls("\r") << std::flush << "x\n";
    std::string fake = own_controls("\x1b");                      // ESC, the secret, ESC
    out << fake.substr(0, fake.size() / 2) << "\n";              // half a marker is text
    out << std::string(100000, 'y') << "\xff\n";                 // more than the gate holds
  }
  std::string text = out.str();
  EXPECT_TRUE(text.starts_with("a\xc3\xa9" "b\nin: \\x1b[2J\\x9b\\xc2\\x9b\\x7f\\x0d\\x07\tend\n\x1b[31mred\x1b[0m\n\rx\n\\x1b"))
      << escape_text(text.substr(0, 200));
  EXPECT_EQ(gate_breach(text.substr(text.find("\rx\n") + 3)), "");  // after the own controls
  EXPECT_TRUE(text.ends_with(std::string(100000, 'y') + "\\xff\n"));
  // Without a gate, own_controls() changes nothing: library callers' streams get plain escapes.
  EXPECT_EQ(own_controls("\x1b[0m"), "\x1b[0m");
}

// The rendered commit message names the machine as read: the candidate exists, and the values
// from input are there, escaped, on their line.
TEST(TextGate, CommitMessageKeepsTheValuesOnTheirLine) {
  SysrootDir s;
  build_machine(s, "GenuineIntel", "Intel Xeon" + kHostile);
  auto r = test::run_command(tool() + " --color never --no-probe --sysroot " + test::shell_quote(s.str()) +
                             " whitelist --commit-message 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("PCI/P2PDMA: Add"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Xeon\\x1b[31mRED\\xc2\\x9b2J\\x07BEL\\x0dCR\\xff\\x09TAB), IOMMU"), std::string::npos) << r.output;
  // The one Signed-off-by line is the tool's own.
  size_t n = 0;
  for (size_t at = 0; (at = r.output.find("\nSigned-off-by:", at)) != std::string::npos; ++at) ++n;
  EXPECT_EQ(n, 1u) << r.output;
}

// A model name within its 48 bytes that holds a trailer key where the paragraph would wrap: the
// wrap never puts it at the start of a line (git would read it as the patch's own trailer).
TEST(TextGate, CommitMessageNeverWrapsIntoATrailer) {
  for (std::string model : {"Intel Xeon Signed-off-by: Mallory", "Intel Xeo Reviewed-by: Mallory", "Intel X Link: Mallory"}) {
    SysrootDir s;
    build_machine(s, "GenuineIntel", model);
    auto r = test::run_command(tool() + " --color never --sysroot " + test::shell_quote(s.str()) +
                               " whitelist --commit-message 2>&1");
    ASSERT_NE(r.output.find("Tested on:"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("(" + model.substr(0, model.find(':') + 1)), std::string::npos) << r.output;  // one line
    EXPECT_EQ(gate_breach(r.output), "") << model;
  }
}

// Known sizes: a CPUID brand string is 48 bytes, the vendor 12, a host name 64 (HOST_NAME_MAX),
// a kernel release 64 (struct utsname). A longer value is cut, marked, and a finding names the file.
TEST(TextGate, FieldsOfKnownSizeAreCutWithAFinding) {
  SysrootDir s;
  std::string long_model(5000, 'x');
  for (size_t i = 60; i < long_model.size(); i += 80) long_model.replace(i, 22, " Signed-off-by: Mallory");
  build_machine(s, "GenuineIntel" + std::string(20, 'I'), long_model);
  s.write("proc/sys/kernel/hostname", std::string(300, 'h') + "\n");
  s.write("proc/sys/kernel/osrelease", "6.1.0-" + std::string(200, 'r') + "\n");
  std::vector<Finding> findings;
  Platform p = read_platform(Sysroot::open(s.str()), findings);
  EXPECT_LE(p.cpu_model_name.size(), 48u + 3);
  EXPECT_TRUE(p.cpu_model_name.ends_with("…")) << p.cpu_model_name;
  EXPECT_LE(p.cpu_vendor.size(), 12u + 3);
  EXPECT_LE(p.hostname.size(), 64u + 3);
  auto finding_for = [&](const std::string& path) {
    for (const auto& f : findings)
      if (f.path == path && f.message.find("longer than") != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(finding_for("proc/cpuinfo"));
  EXPECT_TRUE(finding_for("proc/sys/kernel/hostname"));
  EXPECT_TRUE(finding_for("proc/sys/kernel/osrelease"));
  // A value within its bound is kept whole, without a finding.
  SysrootDir ok;
  build_machine(ok, "GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+ @ 2.0GHz xxxxxx");  // 48 bytes
  findings.clear();
  p = read_platform(Sysroot::open(ok.str()), findings);
  EXPECT_EQ(p.cpu_model_name, "Intel(R) Xeon(R) Platinum 8480+ @ 2.0GHz xxxxxx");
  EXPECT_EQ(p.cpu_vendor, "GenuineIntel");
  EXPECT_FALSE(finding_for("proc/cpuinfo"));
  // The 5,000-byte name does not wrap into lines of its own in the commit message.
  auto r = test::run_command(tool() + " --color never --no-probe --sysroot " + test::shell_quote(s.str()) +
                             " whitelist --commit-message 2>&1");
  EXPECT_EQ(gate_breach(r.output), "");
  EXPECT_EQ(r.output.find("\nSigned-off-by: Mallory"), std::string::npos) << r.output;
}

// OWASP CSV injection: a cell starting with = + - @ TAB or CR is made text; CR, LF, quotes and
// commas are quoted.
TEST(TextGate, CsvCellsAreGuarded) {
  using fleet::csv_cell;
  for (std::string lead : {"=", "+", "-", "@", "\t", "\r"}) {
    std::string cell = csv_cell(lead + "cmd|' /C calc'!A0");
    std::string unquoted = cell.starts_with("\"") ? cell.substr(1) : cell;
    EXPECT_EQ(unquoted.front(), '\'') << escape_text(cell);
  }
  EXPECT_EQ(csv_cell("plain"), "plain");
  EXPECT_EQ(csv_cell("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_cell("a\nb"), "\"a\nb\"");
  EXPECT_EQ(csv_cell("a\rb"), "\"a\rb\"");
  EXPECT_EQ(csv_cell("\r=1"), "\"'\r=1\"");
}

}  // namespace
}  // namespace p2paudit
