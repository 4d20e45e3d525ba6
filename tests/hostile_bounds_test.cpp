// SPDX-License-Identifier: GPL-2.0-or-later
// Issue 18, second hostile-input pass: bounds on what a stranger's input may cost (a regex's
// subject, module version strings, the total of an archive's entry names), output names up to
// NAME_MAX, and error messages that quote file names, argv values and capture bytes escaped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <string>

#include "p2paudit/errors.h"
#include "p2paudit/policy/rules.h"
#include "p2paudit/snapshot.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using test::shell_quote;

// ---- regex conditions: bounded on subject length ----

policy::Condition site_regex(const std::string& pattern) {
  std::string text = "version: 1\nrules:\n- id: site-version\n  when: {provider.module_version: {regex: '" + pattern +
                     "'}}\n  action: deny\n  reason: site rule\n";
  return policy::parse_rule_file(text, "site.yaml").rules.at(0).when;
}

policy::FactSet with_version(const std::string& version) {
  policy::FactSet f;
  f.set("provider.module_version", version);
  return f;
}

TEST(RegexBound, AFiftyThousandByteSubjectIsUnknownNotACrash) {
  auto when = site_regex("^5.*8$");  // lint-clean: no nested repetition
  std::string subject = "5" + std::string(50'000, '0') + "8";
  EXPECT_EQ(when.evaluate(with_version(subject)), policy::Tri::kUnknown);
  std::vector<std::string> unknown;
  when.collect_unknown_facts(with_version(subject), unknown);
  EXPECT_EQ(unknown, std::vector<std::string>{"provider.module_version"});  // the report names it
}

TEST(RegexBound, SubjectsUpToTheBoundAreMatched) {
  auto when = site_regex("^5.*8$");
  const size_t bound = policy::Condition::kMaxRegexSubject;
  EXPECT_EQ(when.evaluate(with_version("5" + std::string(bound - 2, '0') + "8")), policy::Tri::kTrue);
  EXPECT_EQ(when.evaluate(with_version("5" + std::string(bound - 2, '0') + "9")), policy::Tri::kFalse);
  EXPECT_EQ(when.evaluate(with_version("5" + std::string(bound - 1, '0') + "8")), policy::Tri::kUnknown);
}

TEST(RegexBound, ALongRuleIdIsRefusedNotACrash) {
  std::string id(200'000, 'a');
  std::string text = "version: 1\nrules:\n- id: " + id + "X\n  when: always\n  action: deny\n  reason: r\n";
  try {
    policy::parse_rule_file(text, "site.yaml");
    ADD_FAILURE() << "an id with 'X' loaded";
  } catch (const policy::RuleFileError& e) {
    EXPECT_NE(std::string(e.what()).find("may only use"), std::string::npos) << e.what();
    EXPECT_LT(std::string(e.what()).size(), 1000u) << "the id is quoted shortened";
  }
}

// ---- module version strings: capped at read, with a finding ----

void nvme_with_module_version(test::SysrootDir& s, const std::string& version) {
  s.function("pci0000:00/0000:00:01.0", test::ConfigBytes(0x8086, 0x7000, 0x060400, 4, true).bytes());
  s.function("pci0000:00/0000:00:01.0/0000:01:00.0", test::ConfigBytes(0x144d, 0xa808, 0x010802, 0).bytes());
  s.link("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/driver", "../../../../bus/pci/drivers/nvme");
  s.link("sys/bus/pci/drivers/nvme/module", "../../../../module/nvme");
  s.write("sys/module/nvme/version", version + "\n");
  s.write("sys/module/nvme/srcversion", std::string(40'000, 'A') + "\n");
}

const Function* find_function(const Topology& t, const std::string& bdf) {
  for (const auto& f : t.functions)
    if (f.bdf.str() == bdf) return &f;
  return nullptr;
}

TEST(ModuleVersionBound, AFiftyThousandByteVersionIsUnknownWithAFinding) {
  test::SysrootDir s;
  nvme_with_module_version(s, "5" + std::string(50'000, '0') + "8");
  Topology t = read_topology(Sysroot::open(s.str()));
  const Function* nvme = find_function(t, "0000:01:00.0");
  ASSERT_NE(nvme, nullptr);
  EXPECT_EQ(nvme->module.name, "nvme");
  EXPECT_TRUE(nvme->module.version.empty()) << nvme->module.version.size() << " bytes kept";
  EXPECT_TRUE(nvme->module.srcversion.empty()) << nvme->module.srcversion.size() << " bytes kept";
  bool version_finding = false, srcversion_finding = false;
  for (const auto& f : t.findings) {
    version_finding |= f.path == "sys/module/nvme/version";
    srcversion_finding |= f.path == "sys/module/nvme/srcversion";
  }
  EXPECT_TRUE(version_finding);
  EXPECT_TRUE(srcversion_finding);
}

TEST(ModuleVersionBound, ARealVersionIsKept) {
  test::SysrootDir s;
  nvme_with_module_version(s, "24.10-1.1.4");
  s.write("sys/module/nvme/srcversion", "AAAABBBBCCCCDDDDEEEEFF\n");
  Topology t = read_topology(Sysroot::open(s.str()));
  const Function* nvme = find_function(t, "0000:01:00.0");
  ASSERT_NE(nvme, nullptr);
  EXPECT_EQ(nvme->module.version, "24.10-1.1.4");
  EXPECT_EQ(nvme->module.srcversion, "AAAABBBBCCCCDDDDEEEEFF");
  for (const auto& f : t.findings) EXPECT_EQ(f.path.find("sys/module/"), std::string::npos) << f.message;
}

// ---- archive entry names: bounded in total ----

struct TempDir {
  fs::path path;
  TempDir() {
    char templ[] = "/tmp/p2paudit-bounds-test-XXXXXX";
    path = mkdtemp(templ);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Directory entries under sys/ whose names are at least `length` bytes (components of 200 bytes),
// as many as make more than `total` bytes of names.
std::vector<test::TarEntry> long_names(size_t length, size_t total) {
  std::vector<test::TarEntry> entries;
  std::string stem = "sys/";
  while (stem.size() < length) stem += std::string(200, 'd') + "/";
  for (size_t i = 0, bytes = 0; bytes <= total; ++i) {
    entries.push_back({stem + std::to_string(i), AE_IFDIR, {}, {}, {}});
    bytes += entries.back().name.size();
  }
  return entries;
}

TEST(ArchiveNameBound, NamesBeyondTheDefaultTotalAreRefusedNamingTheArchive) {
  TempDir dir;
  std::string archive = (dir.path / "names.tar.gz").string();
  SysrootLimits defaults;
  // Each name within max_path_bytes, the count far below max_archive_entries: only the total is over.
  auto entries = long_names(3900, defaults.max_archive_name_bytes);
  const size_t count = entries.size(), length = entries.front().name.size();
  ASSERT_LT(count, defaults.max_archive_entries);
  ASSERT_LE(entries.back().name.size(), defaults.max_path_bytes);
  test::write_tarball(archive, entries);
  try {
    Sysroot::open(archive);
    ADD_FAILURE() << "an archive of " << count << " names of " << length << " bytes opened";
  } catch (const InputError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(archive), std::string::npos) << what;
    EXPECT_NE(what.find("entry names"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(defaults.max_archive_name_bytes)), std::string::npos) << what;
  }
}

TEST(ArchiveNameBound, SymlinkTargetsCountToo) {
  TempDir dir;
  std::string archive = (dir.path / "targets.tar.gz").string();
  std::vector<test::TarEntry> entries;
  for (int i = 0; i < 20; ++i) entries.push_back({"sys/l" + std::to_string(i), AE_IFLNK, {}, std::string(4000, 't'), {}});
  test::write_tarball(archive, entries);
  SysrootLimits small;
  small.max_archive_name_bytes = 40'000;  // the names alone are ~60 bytes: the targets go over
  EXPECT_THROW(Sysroot::open(archive, small), InputError);
  small.max_archive_name_bytes = 100'000;
  EXPECT_NO_THROW(Sysroot::open(archive, small));
}

TEST(ArchiveNameBound, EveryCaptureInTheTestDataOpens) {
  for (const auto& path : test::fixture_sysroots()) EXPECT_NO_THROW(Sysroot::open(path)) << path;
}

// ---- output names up to NAME_MAX ----

std::string tool() { return test::tool_file(); }
std::string fixture() { return test::data_path("machines/epyc-firecracker-vm/sysroot.tar.gz"); }

TEST(OutputNames, NameMaxWorksForEveryWritingCommand) {
  TempDir dir;
  struct Case {
    std::string suffix, args;
  };
  const std::vector<Case> cases = {
      {".tar.gz", "--sysroot " + shell_quote(fixture()) + " snapshot -o "},
      {".json", "--sysroot " + shell_quote(fixture()) + " report --no-probe -o "},
      {".txt", "aggregate " + shell_quote(fixture()) + " -o "},
  };
  for (const auto& c : cases) {
    std::string name = std::string(NAME_MAX - c.suffix.size(), 'n') + c.suffix;
    ASSERT_EQ(name.size(), size_t{NAME_MAX});
    fs::path out = dir.path / name;
    auto r = test::run_command(tool() + " " + c.args + shell_quote(out.string()) + " 2>&1");
    EXPECT_EQ(r.status, 0) << c.args << "\n" << r.output;
    EXPECT_TRUE(fs::is_regular_file(out)) << c.args;
    EXPECT_GT(fs::file_size(out), 0u) << c.args;
    for (const auto& e : fs::directory_iterator(dir.path))  // no temporary file left behind
      EXPECT_FALSE(e.path().filename().string().starts_with(".")) << e.path();
    fs::remove(out);
  }
}

// ---- messages escape what they quote ----

// ESC, a C1 CSI (U+009B as UTF-8) and an invalid byte: none may reach a terminal raw.
const std::string kHostile = std::string("\x1b[31mred") + "\xc2\x9b" + "2J" + "\xff" + "end";

void expect_no_raw_controls(const std::string& text, const std::string& what) {
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << what << ": raw ESC in\n" << text;
  EXPECT_EQ(text.find("\xc2\x9b"), std::string::npos) << what << ": raw C1 CSI in\n" << text;
  EXPECT_EQ(text.find('\xff'), std::string::npos) << what << ": raw invalid byte in\n" << text;
}

std::string stderr_of(const std::string& args) {
  auto r = test::run_command(tool() + " " + args + " 2>&1 >/dev/null");
  EXPECT_NE(r.status, 0) << args;
  return r.output;
}

TEST(EscapedMessages, FileNamesAndArgvValuesAreEscapedOnStandardError) {
  TempDir dir;
  std::string hostile_file = (dir.path / kHostile).string();
  {
    std::ofstream(hostile_file) << "not an archive";
  }
  const std::vector<std::string> runs = {
      "--sysroot " + shell_quote(hostile_file + ".missing") + " topology",    // a missing file
      "--sysroot " + shell_quote(hostile_file) + " topology",                 // not an archive
      "--lspci-dump " + shell_quote(hostile_file) + " topology",              // not a dump
      "--sysroot " + shell_quote(fixture()) + " explain " + shell_quote(kHostile) + " 01:00.0",  // a device
      "--sysroot " + shell_quote(fixture()) + " --kernel " + shell_quote(kHostile) + " matrix",  // a value
      "--sysroot " + shell_quote(fixture()) + " --assume-acs-off " + shell_quote(kHostile) + " matrix",
      shell_quote("topolog" + kHostile),                                      // a command (did you mean)
      "--sysroot " + shell_quote(fixture()) + " " + shell_quote("--verbos" + kHostile),  // an option
      "--format " + shell_quote(kHostile),                                    // an enumerated value
      "rules lint " + shell_quote(hostile_file),                              // a rule file
      "aggregate " + shell_quote(hostile_file + ".missing"),                  // a fleet input
  };
  for (const auto& args : runs) {
    std::string err = stderr_of(args);
    EXPECT_FALSE(err.empty()) << args;
    expect_no_raw_controls(err, args);
  }
  // The escaped form is shown, so the reader can still tell which file it was.
  EXPECT_NE(stderr_of("--sysroot " + shell_quote(hostile_file) + " topology").find("\\x1b[31mred"), std::string::npos);
}

TEST(EscapedMessages, AMalformedCaptureRecordIsQuotedEscaped) {
  test::SysrootDir s;
  s.function("pci0000:00/0000:00:01.0", test::ConfigBytes(0x8086, 0x7000, 0x060400, 4, true).bytes());
  // A C1 CSI (valid UTF-8, so the parser reads on) then a byte 0xff: the parser's message quotes
  // what it last read, both bytes included.
  s.write(kCaptureMetadataPath, "{\"schema_version\": 1, \"hostname\": \"host\xc2\x9b" "2J\xff\"}");
  try {
    read_capture_metadata(Sysroot::open(s.str()));
    ADD_FAILURE() << "a malformed capture record was accepted";
  } catch (const InputError& e) {
    expect_no_raw_controls(e.what(), "read_capture_metadata");
    EXPECT_NE(std::string(e.what()).find(std::string(kCaptureMetadataPath) + ": "), std::string::npos) << e.what();
  }
  std::string err = stderr_of("--sysroot " + shell_quote(s.str()) + " topology");
  expect_no_raw_controls(err, "topology on a malformed capture record");
}

}  // namespace
}  // namespace p2paudit
