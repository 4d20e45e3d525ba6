// SPDX-License-Identifier: GPL-2.0-or-later
// Hostile and broken input to the files the tool reads for its user, who runs it as root on files
// from strangers: rule files (policy, advisories, --kernel-rules), vendor facts, --kernel values.
// Each case was a real bug: a hang, memory exhaustion, an "internal error", or a silent misreading.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/rules.h"
#include "p2paudit/strict_yaml.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using policy::VendorFactsDocument;

// A fresh directory per test, removed afterwards.
class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/yaml-hostile-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& content) const {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::string fifo(const std::string& name) const {
    std::string path = (dir_ / name).string();
    EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
    return path;
  }
  std::string subdir(const std::string& name) const {
    fs::create_directory(dir_ / name);
    return (dir_ / name).string();
  }
  fs::path dir_;
};

#if defined(__SANITIZE_ADDRESS__)
#define P2PAUDIT_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define P2PAUDIT_UNDER_ASAN 1
#endif
#endif

// The tool under `timeout` and a memory cap, so that a regression fails instead of hanging CI or
// eating the machine's memory. AddressSanitizer reserves terabytes of address space, so a build
// with it (scripts/ci-sanitizers) is capped by its own resident-memory limit instead of ulimit -v.
std::string capped(const std::string& args) {
#ifdef P2PAUDIT_UNDER_ASAN
  const std::string cap = "export ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=4000\"; ";
#else
  const std::string cap = "ulimit -v 4000000; ";
#endif
  return cap + "timeout 20 " + std::string(P2PAUDIT_TOOL) + " " + args;
}
// stderr is captured with stdout.
test::CommandResult tool(const std::string& args) { return test::run_command(capped(args) + " 2>&1"); }
test::CommandResult tool_stdout(const std::string& args) { return test::run_command(capped(args) + " 2>/dev/null"); }

std::string h200() { return test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz"); }
std::string q(const std::string& s) { return test::shell_quote(s); }

std::string what_of(const std::function<void()>& load) {
  try {
    load();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// "Billion laughs": eight anchored conditions, each all: of nine aliases to the one before; the
// rule's `when` names the last, 9^8 conditions once expanded. Before the strict reader, linting
// these 700 bytes ran for minutes and took gigabytes.
std::string alias_bomb() {
  std::string out = "version: 1\na: &a {all: [";
  for (int i = 0; i < 9; ++i) out += i ? ", {kernel.allowed: true}" : "{kernel.allowed: true}";
  out += "]}\n";
  for (char level = 'b'; level <= 'h'; ++level) {
    out += fmt::format("{}: &{} {{all: [", level, level);
    for (int i = 0; i < 9; ++i) out += fmt::format("{}*{} ", i ? ", " : "", char(level - 1));
    out += "]}\n";
  }
  return out + "rules:\n- {id: r, action: warn, reason: x, when: *h }\n";
}

const char kWhitelistEntry[] = "schema: 1\nentries:\n- vendor: '8086'\n  device: '2030'\n";

// ---- the strict YAML reader, through both loaders ----

TEST_F(Hostile, AliasBombIsRefusedQuicklyWithItsPosition) {
  std::string bomb = alias_bomb();
  ASSERT_LT(bomb.size(), 1024u);
  auto start = std::chrono::steady_clock::now();
  std::string policy_error = what_of([&] { policy::parse_rule_file(bomb, "bomb.yaml"); });
  size_t anchors = bomb.find("a: &a"), rules = bomb.find("rules:");
  std::string kernel_bomb = kWhitelistEntry + bomb.substr(anchors, rules - anchors);
  std::string kernel_error = what_of([&] { parse_whitelist_file(kernel_bomb, "bomb.yaml"); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(std::regex_match(policy_error, std::regex(R"(bomb\.yaml:\d+:\d+: more than 100000 nodes once aliases are expanded)")))
      << policy_error;
  EXPECT_TRUE(std::regex_match(kernel_error, std::regex(R"(bomb\.yaml:\d+:\d+: more than 100000 nodes once aliases are expanded)")))
      << kernel_error;

  std::string path = write("bomb.yaml", bomb);
  auto lint = tool("rules lint " + q(path));
  EXPECT_EQ(lint.status, 2) << lint.output;  // 124: still expanding after 20 s
  EXPECT_TRUE(contains(lint.output, path + ":")) << lint.output;
}

TEST_F(Hostile, AliasCyclesDeepAliasChainsAndDeepNestingAreRefused) {
  EXPECT_TRUE(contains(what_of([] { load_strict_yaml("a: &a [*a]\n", "t.yaml"); }), "t.yaml:1:8: alias to a node that contains the alias"));
  std::string chain = "a0: &a0 x\n";
  for (int i = 1; i <= 10; ++i) chain += fmt::format("a{}: &a{} [*a{}]\n", i, i, i - 1);
  EXPECT_TRUE(contains(what_of([&] { load_strict_yaml(chain, "t.yaml"); }), "aliases nested deeper than 8")) << chain;

  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string error = what_of([&] { load_strict_yaml(deep, "t.yaml"); });
  EXPECT_EQ(error, "t.yaml:1:65: collections nested deeper than 64 levels");

  std::string wide = "[";
  for (int i = 0; i < 150000; ++i) wide += "x,";
  EXPECT_TRUE(contains(what_of([&] { load_strict_yaml(wide + "]", "t.yaml"); }), "more than 100000 nodes"));

  // Aliases within the limits read as the document they stand for.
  YAML::Node ok = load_strict_yaml("a: &a [1, 2]\nb: *a\n", "t.yaml");
  EXPECT_EQ(ok["b"].size(), 2u);
}

TEST_F(Hostile, DuplicateKeysAreRefusedByBothLoadersWithTheSecondsPosition) {
  std::string kernel = what_of([] {
    parse_whitelist_file("schema: 1\nentries:\n- vendor: '8086'\n  device: '2030'\n  vendor: '10de'\n", "dup.yaml");
  });
  EXPECT_EQ(kernel, "dup.yaml:5:3: duplicate key 'vendor' in entries[0] (first at line 3)");
  std::string top = what_of([] { parse_whitelist_file("schema: 1\nentries: []\nschema: 2\n", "dup.yaml"); });
  EXPECT_EQ(top, "dup.yaml:3:1: duplicate key 'schema' at the top level (first at line 1)");

  std::string policy = what_of([] {
    policy::parse_rule_file("version: 1\nrules:\n- id: a\n  when: always\n  action: warn\n  reason: x\n  action: peer\n", "dup.yaml");
  });
  EXPECT_EQ(policy, "dup.yaml:7:3: duplicate key 'action' in rules[0] (first at line 5)");
}

// libyaml (YAML 1.1) reads the text; the rule files were written for yaml-cpp (1.2). Where the two
// would read a line break differently, the file is refused with the break's position.
TEST_F(Hostile, LineBreaksThatYaml11And12ReadDifferentlyAreRefused) {
  EXPECT_EQ(what_of([] { load_strict_yaml("a: 1\nb: x\ry\n", "t.yaml"); }),
            "t.yaml:2:5: carriage return without a line feed: end lines with LF or CR LF");
  EXPECT_EQ(what_of([] { load_strict_yaml("a: 1\r\nb: 2\r", "t.yaml"); }),
            "t.yaml:2:5: carriage return without a line feed: end lines with LF or CR LF");
  for (const auto& [break_bytes, name] :
       {std::pair{"\xc2\x85", "U+0085 (NEL)"}, {"\xe2\x80\xa8", "U+2028 (LS)"}, {"\xe2\x80\xa9", "U+2029 (PS)"}}) {
    const char* bytes = break_bytes;  // a lambda may not capture a structured binding before clang 16
    std::string error = what_of([&] { load_strict_yaml(fmt::format("a: 1\nb: \"x{}y\"\n", bytes), "t.yaml"); });
    EXPECT_TRUE(contains(error, fmt::format("t.yaml:2:6: line break {}: YAML 1.1 ends a line there", name))) << error;
    error = what_of([&] { load_strict_yaml(fmt::format("a: 1 # x{}y\n", bytes), "t.yaml"); });  // in a comment too
    EXPECT_TRUE(contains(error, "t.yaml:1:9: line break")) << error;
  }
  EXPECT_EQ(load_strict_yaml("a: \"x\\Ly\"\r\nb: 2\r\n", "t.yaml")["a"].Scalar(), "x\xe2\x80\xa8y");  // written as an escape
}

TEST_F(Hostile, UnclosedFlowCollectionsAndStrayIndicatorsNameWhatIsMissingOrFound) {
  EXPECT_EQ(what_of([] { load_strict_yaml("a: [1, {b: 2}\n", "t.yaml"); }),
            "t.yaml:2:1: the text ends before the ']' that closes the flow sequence at line 1, column 4");
  EXPECT_EQ(what_of([] { load_strict_yaml("a: [1, {b: 2\n", "t.yaml"); }),
            "t.yaml:2:1: the text ends before the '}' that closes the flow mapping at line 1, column 8");
  EXPECT_EQ(what_of([] { load_strict_yaml("a: [1, , 2]\n", "t.yaml"); }),
            "t.yaml:1:8: did not find expected node content while parsing a flow node that starts at line 1 (found ',')");
  EXPECT_EQ(what_of([] { load_strict_yaml("a: 'open\n", "t.yaml"); }),
            "t.yaml:2:1: found unexpected end of stream while scanning a quoted scalar that starts at line 1");
}

TEST_F(Hostile, ASecondDocumentIsRefusedByBothLoaders) {
  EXPECT_EQ(what_of([] { parse_whitelist_file(std::string(kWhitelistEntry) + "---\nschema: 1\nentries: []\n", "two.yaml"); }),
            "two.yaml:5:1: a rule file holds one YAML document; this is a second");
  EXPECT_EQ(what_of([] { policy::parse_rule_file("version: 1\nrules: []\n---\nversion: 1\n", "two.yaml"); }),
            "two.yaml:3:1: a rule file holds one YAML document; this is a second");
}

TEST_F(Hostile, BytesThatAreNotUtf8TextAreRefusedWithTheirPosition) {
  EXPECT_EQ(what_of([] { policy::parse_rule_file("version: 1\nrules: []\ndescription: caf\xe9\n", "latin1.yaml"); }),
            "latin1.yaml:3:17: invalid UTF-8 byte 0xe9 (a YAML file is UTF-8 text)");
  // yaml-cpp takes 0x04 for the end of the input: what follows would be silently dropped.
  EXPECT_EQ(what_of([] { parse_whitelist_file(std::string(kWhitelistEntry) + "\x04- vendor: zzzz\n", "eot.yaml"); }),
            "eot.yaml:5:1: control character U+0004 (a YAML file is UTF-8 text)");
  // YAML escapes spell control characters that would reach the terminal in reasons and comments.
  EXPECT_EQ(what_of([] { policy::parse_rule_file("version: 1\nrules:\n- {id: a, when: always, action: warn, reason: \"x\\e[2J\"}\n", "esc.yaml"); }),
            "esc.yaml:3:47: 'reason' holds a control character U+001B: write plain text");
  EXPECT_EQ(what_of([] { parse_whitelist_file(std::string(kWhitelistEntry) + "  comment: \"\\e]0;pwned\\a\"\n", "esc.yaml"); }),
            "esc.yaml:5:12: 'comment' holds a control character U+001B: write plain text");
  // The file's name itself is shown escaped.
  EXPECT_EQ(format_position("bad\xff.yaml", TextPosition{2, 3}), "bad\\xff.yaml:2:3");
}

TEST_F(Hostile, RegexesThatCrashOrTakeExponentialTimeAreRefused) {
  auto regex_error = [](const std::string& pattern) {
    return what_of([&] {
      policy::parse_rule_file("version: 1\nrules:\n- {id: a, action: warn, reason: x, when: {kernel.release: {regex: '" + pattern + "'}}}\n",
                              "re.yaml");
    });
  };
  // std::regex compiles by recursion: this one overflowed the stack (SIGSEGV) in rules lint.
  EXPECT_TRUE(contains(regex_error(std::string(30000, '(') + "a" + std::string(30000, ')')), "longer than 512 characters"));
  EXPECT_TRUE(contains(regex_error(std::string(9, '(') + "a" + std::string(9, ')')), "groups nested deeper than 8"));
  for (const char* exponential : {"^(a+)+$", "(a|a)*b", "((ab)*c)+", "(x{2,})*"})
    EXPECT_TRUE(contains(regex_error(exponential), "can take exponential time")) << exponential;
  EXPECT_TRUE(contains(regex_error("a{1,100000}"), "a repeat count above 1000"));
  // What the shipped advisories use stays valid.
  for (const char* fine : {R"(^(26\.(09|[1-9][0-9])|2[7-9]\.[0-9]+|[3-9][0-9]\.[0-9]+)\.)", R"(^([0-6]\.|7\.0([.-]|$)))", "(?:ab)+",
                           "[(]+x"})
    EXPECT_EQ(regex_error(fine), "(no error)") << fine;
}

// ---- what is not a regular file: each loader names the file and returns ----

TEST_F(Hostile, DirectoriesAreRefusedByEveryLoader) {
  std::string d = subdir("rules.yaml");
  for (const auto& error : {what_of([&] { policy::load_rule_file(d); }), what_of([&] { load_whitelist_file(d); }),
                            what_of([&] { VendorFactsDocument::load(d); })})
    EXPECT_EQ(error, d + ": a directory, not a regular file");
  auto cli = tool("--sysroot " + h200() + " --kernel-rules " + q(d) + " matrix");
  EXPECT_EQ(cli.status, 2) << cli.output;
  EXPECT_EQ(cli.output, "p2paudit: " + d + ": a directory, not a regular file\n");
}

TEST_F(Hostile, DevZeroAndFifosAreRefusedWithoutReadingForever) {
  std::string pipe = fifo("rules.fifo");
  for (const std::string& args : std::vector<std::string>{"rules lint /dev/zero", "--sysroot " + h200() + " policy --rules /dev/zero",
                           "--sysroot " + h200() + " policy --rules " + q(pipe),
                           "--sysroot " + h200() + " --kernel-rules /dev/zero matrix",
                           "--sysroot " + h200() + " --kernel-rules " + q(pipe) + " matrix",
                           "--sysroot " + h200() + " policy --vendor-facts /dev/zero",
                           "--sysroot " + h200() + " policy --vendor-facts " + q(pipe)}) {
    auto r = tool(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;  // 124: timed out; other: killed by the memory cap
    bool named = contains(r.output, "/dev/zero: a device node, not a regular file") ||
                 contains(r.output, pipe + ": a FIFO, not a regular file");
    EXPECT_TRUE(named) << args << "\n" << r.output;
  }
}

// ---- vendor facts ----

std::string pair_with(const std::string& facts, const std::string& extra = "") {
  return R"({"schema_version": 1, "pairs": [{"provider": "0000:00:06.0", "client": "0000:00:07.0", )" + extra +
         R"("facts": )" + facts + "}]}";
}

TEST_F(Hostile, VendorFactsOfTheWrongTypeNameTheFileEntryAndType) {
  auto error = [](const std::string& text) { return what_of([&] { VendorFactsDocument::parse(text, "vf.json"); }); };
  EXPECT_EQ(error(pair_with(R"({"vendor.nvlink": "yes"})")),
            "vf.json: pairs[0].facts: fact 'vendor.nvlink': expected true or false, got the string \"yes\"");
  EXPECT_EQ(error(pair_with(R"({"provider.memory_size": 1.5})")),
            "vf.json: pairs[0].facts: fact 'provider.memory_size': expected an integer, got the number 1.5");
  EXPECT_EQ(error(pair_with(R"({"runtime.compute_runtime_version": ["26"]})")),
            "vf.json: pairs[0].facts: fact 'runtime.compute_runtime_version': expected a string, got a list");
  // These were "internal error: [json.exception.type_error.302]".
  EXPECT_EQ(error(R"({"schema_version": "1"})"),
            "vf.json: schema_version: expected 1 (the only version this p2paudit reads), got the string \"1\"");
  EXPECT_EQ(error(pair_with("{}", R"("symmetric": "yes", )")), "vf.json: pairs[0].symmetric: expected true or false, got the string \"yes\"");
  EXPECT_EQ(error(R"({"schema_version": 1, "pairs": {}})"), "vf.json: pairs: expected a list of {provider, client, facts}, got an object");
  EXPECT_EQ(error(pair_with("[]")), "vf.json: pairs[0].facts: expected an object of \"fact\": value, got a list");
  EXPECT_EQ(error(R"({"schema_version": 1, "pairs": [{"provider": 6, "client": "0000:00:07.0", "facts": {}}]})"),
            "vf.json: pairs[0].provider: expected a PCI address DDDD:BB:DD.F, got the integer 6");
}

TEST_F(Hostile, VendorFactsOutOfRangeAreRefused) {
  auto error = [](const std::string& text) { return what_of([&] { VendorFactsDocument::parse(text, "vf.json"); }); };
  EXPECT_TRUE(contains(error(pair_with(R"({"provider.memory_size": -1})")), "vf.json: pairs[0].facts: fact 'provider.memory_size': -1 is out of range"));
  EXPECT_TRUE(contains(error(pair_with(R"({"client.memory_size": 18446744073709551615})")),
                       "fact 'client.memory_size': 18446744073709551615 is out of range"));
  EXPECT_TRUE(contains(error(pair_with(R"({"runtime.level_zero_version": "1.\u001b[31m"})")), "must be printable text"));
  // nlohmann's parser throws out_of_range, not parse_error, for this one: it was an internal error.
  EXPECT_TRUE(contains(error(pair_with(R"({"provider.memory_size": 1e999})")), "vf.json: not JSON this reader takes:"));
  std::string ok = pair_with(R"({"provider.memory_size": 150323855360, "vendor.nvlink": true, "vendor.xgmi": null})");
  VendorFactsDocument doc = VendorFactsDocument::parse(ok, "vf.json");
  policy::FactSet facts;
  doc.apply(*Bdf::parse("0000:00:06.0"), *Bdf::parse("0000:00:07.0"), facts);
  EXPECT_EQ(std::get<std::int64_t>(*facts.get("provider.memory_size")), 150323855360);
  EXPECT_FALSE(facts.known("vendor.xgmi"));
  // A hand-written facts file (FactSet::from_json) no longer wraps a huge integer to -1.
  EXPECT_THROW(policy::FactSet::from_json(json::parse(R"({"kernel.distance": 18446744073709551615})"), "f.json"), InputError);
}

TEST_F(Hostile, VendorFactsMayNotSetWhatTheAnalyzerComputes) {
  auto error = [](const std::string& text) { return what_of([&] { VendorFactsDocument::parse(text, "vf.json"); }); };
  std::string all = error(R"({"schema_version": 1, "all": {"kernel.allowed": true}})");
  EXPECT_TRUE(contains(all, "vf.json: all: fact 'kernel.allowed' is computed by the analyzer")) << all;
  EXPECT_TRUE(contains(all, "vendor.nvlink")) << all;  // says what may be set
  EXPECT_TRUE(contains(error(pair_with(R"({"vendor.authority": "kernel"})")), "pairs[0].facts: fact 'vendor.authority' is computed"));
  EXPECT_TRUE(contains(error(pair_with(R"({"provider.bar_covers_memory": true})")), "is computed by the analyzer"));

  // Through the command line: a kernel refusal is not flipped, the run stops with the reason.
  std::string path = write("computed.json", R"({"schema_version": 1, "all": {"kernel.allowed": true, "vendor.peer_supported": true}})");
  auto r = tool("--sysroot " + h200() + " check gpu0 gpu1 --vendor-facts " + q(path));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "p2paudit: " + path + ": all: fact 'kernel.allowed' is computed by the analyzer")) << r.output;
}

TEST_F(Hostile, VendorFactsThatAreNotJsonOrNotUtf8) {
  auto error = [](const std::string& text) { return what_of([&] { VendorFactsDocument::parse(text, "vf.json"); }); };
  EXPECT_TRUE(contains(error("{\"schema_version\": 1,"), "vf.json: byte 22: not JSON")) << error("{\"schema_version\": 1,");
  EXPECT_EQ(error("{\"schema_version\": 1,\n \"all\": {\"runtime.level_zero_version\": \"1.\xff\"}}"),
            "vf.json:2:43: invalid UTF-8 byte 0xff (byte 64) (a JSON file is UTF-8 text)");
  EXPECT_EQ(error(R"({"schema_version": 1, "all": {"vendor.nvlink": true, "vendor.nvlink": false}})"),
            "vf.json: all: duplicate key \"vendor.nvlink\" in one object: which one is meant?");
  EXPECT_EQ(error(std::string(100, '[') + std::string(100, ']')), "vf.json: nested deeper than 8 levels");

  // --format json never meets the bytes: the run stops with one line on stderr, not an internal error.
  std::string path = write("latin1.json", "{\"schema_version\": 1, \"all\": {\"runtime.level_zero_version\": \"caf\xe9\"}}");
  auto r = tool("--sysroot " + h200() + " --format json policy --vendor-facts " + q(path));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_FALSE(contains(r.output, "internal error")) << r.output;
  EXPECT_TRUE(contains(r.output, path + ":1:65: invalid UTF-8 byte 0xe9")) << r.output;
}

TEST_F(Hostile, TheShippedVendorFactsStillDecidePeer) {
  auto r = tool("--sysroot " + h200() + " check gpu0 gpu1 --vendor-facts " +
                q(test::data_path("machines/h200x4-firecracker-vm/vendor-facts.json")));
  EXPECT_EQ(r.status, 0) << r.output;
}

// ---- rule files that are not UTF-8, through the command line ----

TEST_F(Hostile, RuleFilesThatAreNotUtf8NeverCrashJsonOutput) {
  std::string rules = write("latin1.yaml", "version: 1\nrules:\n- {id: a, when: always, action: warn, reason: caf\xe9}\n");
  auto policy = tool("--sysroot " + h200() + " --format json policy --rules " + q(rules));
  EXPECT_EQ(policy.status, 2) << policy.output;
  EXPECT_FALSE(contains(policy.output, "internal error")) << policy.output;
  EXPECT_TRUE(contains(policy.output, rules + ":3:50: invalid UTF-8 byte 0xe9")) << policy.output;

  std::string kernel = write("latin1-kernel.yaml", std::string(kWhitelistEntry) + "  comment: caf\xe9\n");
  auto matrix = tool("--sysroot " + h200() + " --format json --kernel-rules " + q(kernel) + " matrix");
  EXPECT_EQ(matrix.status, 2) << matrix.output;
  EXPECT_TRUE(contains(matrix.output, kernel + ":5:15: invalid UTF-8 byte 0xe9")) << matrix.output;
}

TEST_F(Hostile, LintAsJsonListsEveryDiagnostic) {
  std::string broken = test::data_path("policy/broken.yaml");
  std::string latin1 = write("latin1\xff.yaml", "version: 1\nrules: []\ndescription: caf\xe9\n");
  auto r = tool_stdout("--format json rules lint " + q(broken) + " " + q(latin1) + " " + q(test::data_path("policy/valid.yaml")));
  EXPECT_EQ(r.status, 2);
  json j = json::parse(r.output);  // throws (fails the test) on anything but one JSON document
  EXPECT_EQ(j["schema_version"], 1);
  ASSERT_EQ(j["diagnostics"].size(), 4u) << j.dump(2);
  EXPECT_EQ(j["diagnostics"][0], json({{"file", broken}, {"line", 4}, {"column", 12},
                                        {"message", "unknown fact 'kernel.alowed' (did you mean 'kernel.allowed'?)"},
                                        {"severity", "error"}}));
  EXPECT_EQ(j["diagnostics"][3]["file"], escape_text(latin1));
  EXPECT_EQ(j["diagnostics"][3]["line"], 3);
  EXPECT_EQ(j["files"][2], json({{"file", test::data_path("policy/valid.yaml")}, {"rules", 5}}));
  EXPECT_TRUE(j["files"][0]["rules"].is_null());

  auto missing = tool_stdout("--format json rules lint /nonexistent/rules.yaml");
  EXPECT_EQ(missing.status, 2);
  json m = json::parse(missing.output);
  EXPECT_TRUE(m["diagnostics"][0]["line"].is_null());
  EXPECT_EQ(m["diagnostics"][0]["message"], "cannot open: No such file or directory");
}

// ---- kernel releases ----

TEST(HostileKernelRelease, OnlyDigitsAndADistributionSuffix) {
  for (const char* good : {"6.1.0-18-amd64", "6.18.44", "7.1.0-14-generic", "4.18.0-513.el8.x86_64", "6.1.21-v8+", "6.6.0+",
                           "6.5.0~rc1", "5.14.0-362.8.1.el9_3.x86_64"})
    EXPECT_TRUE(KernelRelease::parse(good)) << good;
  for (const char* bad : {"6.1x", "6.1.2x", "6.1 ", "6.1.0-../../etc", "6.1.0/x", "6.1.0-\xff", "6.1.0-a b", "6.1_0"})
    EXPECT_FALSE(KernelRelease::parse(bad)) << bad;
  EXPECT_FALSE(KernelRelease::parse("6.1.0-" + std::string(60, 'a')));  // longer than uname's 64 bytes
}

TEST(HostileKernelRelease, KernelOptionIsRefusedUnlessItIsARelease) {
  auto r = tool("--sysroot " + h200() + " --kernel 6.1x matrix");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "p2paudit: --kernel '6.1x': expected X.Y or X.Y.Z")) << r.output;
  EXPECT_EQ(tool_stdout("--sysroot " + h200() + " --kernel 6.1.0-18-amd64 matrix").status, 0);
}

TEST(HostileKernelRelease, AGarbageReleaseFromTheSysrootIsNamedNotFollowed) {
  const fs::path rules = fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel";
  Platform platform;
  platform.kernel_release = "6.1.0-../../\xff\x1b[2J";
  platform.kernel_config_source = "boot/config-" + platform.kernel_release;
  platform.config_p2pdma = Known::kYes;
  std::string error = what_of([&] { load_kernel_rules(rules, platform, {}); });
  EXPECT_TRUE(contains(error, "cannot parse the kernel release '6.1.0-../../\\xff\\x1b[2J'")) << error;
  EXPECT_TRUE(is_clean_text(error)) << error;
  // With --kernel the run goes on; every note stays printable and valid JSON.
  KernelRules chosen = load_kernel_rules(rules, platform, {"6.1", {}, {}});
  EXPECT_EQ(chosen.release.version(), "6.1");
  for (const auto& note : chosen.notes) EXPECT_TRUE(is_clean_text(note)) << note;
  EXPECT_TRUE(is_clean_text(chosen.config_source));
}

}  // namespace
}  // namespace p2paudit
