// SPDX-License-Identifier: GPL-2.0-or-later
// What a stranger's YAML makes the loaders materialise, counted in bytes; a byte order mark at the
// start of a rule file; and messages that quote a value of the input, cut to what a person reads.
// Each loader is tried (policy and advisories, kernel rules, device tables, vendor facts, JSON
// documents), and the tool itself where a file reaches it (rules lint, policy --rules, --rules-dir,
// --kernel-rules), its peak memory measured.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/json_input.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/device_knowledge.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/rules.h"
#include "p2paudit/quoted_input.h"
#include "p2paudit/strict_yaml.h"
#include "p2paudit/text_style.h"
#include "peak_rss.h"
#include "temp_dir.h"
#include "test_support.h"

namespace {

// While set, every allocation of this process fails: out of memory at a chosen moment.
std::atomic<bool> g_allocations_fail{false};

}  // namespace

void* operator new(std::size_t size) {
  if (g_allocations_fail.load()) throw std::bad_alloc();
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace p2paudit {
namespace {

namespace fs = std::filesystem;

std::string what_of(const std::function<void()>& load) {
  try {
    load();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

const std::string kBom = "\xef\xbb\xbf";
const std::string kBytesLimit = "more than 16777216 bytes of values, keys and tags once aliases are expanded";

// A megabyte scalar anchored once and named by an alias in each of `uses` items, each item as
// `item(i)` writes it with "*big" where the alias goes: under the 4 MiB size limit and under the
// node limit, gigabytes once each alias is copied.
std::string scalar_reuse(const std::string& head, const std::string& anchored, const std::function<std::string(int)>& item,
                         int uses) {
  std::string text = head + fmt::format(fmt::runtime(anchored), std::string(1 << 20, 'x'));
  for (int i = 0; i < uses; ++i) text += item(i);
  return text;
}

std::string policy_bomb() {
  return scalar_reuse("version: 1\n", "description: &big {}\nrules:\n",
                      [](int i) { return fmt::format("- {{id: r{}, when: always, action: warn, reason: *big}}\n", i); }, 3000);
}
std::string kernel_bomb() {
  return scalar_reuse("schema: 1\nentries:\n", "- {{vendor: '8086', device: '0000', comment: &big {}}}\n",
                      [](int i) { return fmt::format("- {{vendor: '8086', device: '{:04x}', comment: *big}}\n", i + 1); }, 3000);
}
std::string device_bomb() {
  return scalar_reuse("schema: 1\nsources: {a: https://example.org/a}\n", "devices:\n- {{vendor: '10de', device: '0000', product: &big {}, source: [a]}}\n",
                      [](int i) { return fmt::format("- {{vendor: '10de', device: '{:04x}', product: *big, source: [a]}}\n", i + 1); },
                      3000);
}
// Nested: a sequence of aliases to the scalar, then aliases to the sequence.
std::string nested_bomb(const std::string& head) {
  std::string text = head + "x: &big " + std::string(1 << 20, 'x') + "\ny: &row [";
  for (int i = 0; i < 64; ++i) text += i ? ", *big" : "*big";
  text += "]\nz: [";
  for (int i = 0; i < 2000; ++i) text += i ? ", *row" : "*row";
  return text + "]\n";
}

class YamlBytes : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(tmp_.path().empty()); }
  std::string write(const std::string& name, const std::string& content) const {
    test::write_file(dir_ / name, content);
    return (dir_ / name).string();
  }
  // A copy of the shipped rules with `relative` replaced by `content`.
  std::string rules_dir_with(const std::string& name, const std::string& relative, const std::string& content) const {
    fs::copy(test::rules_source(), dir_ / name, fs::copy_options::recursive);
    write(name + "/" + relative, content);
    return (dir_ / name).string();
  }
  test::TempDir tmp_;
  const fs::path& dir_ = tmp_.path();
};

// ---- the byte budget ----

TEST_F(YamlBytes, EveryLoaderRefusesAMegabyteScalarReusedByThousandsOfAliases) {
  const std::string policy = policy_bomb(), kernel = kernel_bomb(), devices = device_bomb();
  for (const std::string* text : {&policy, &kernel, &devices}) ASSERT_LT(text->size(), kMaxRuleFileBytes);
  const std::regex refused(R"(b\.yaml:\d+:\d+: more than 16777216 bytes of values, keys and tags once aliases are expanded.*)");
  for (const std::string& error : {what_of([&] { policy::parse_rule_file(policy, "b.yaml"); }),
                                   what_of([&] { parse_whitelist_file(kernel, "b.yaml"); }),
                                   what_of([&] { policy::parse_device_rows(devices, "b.yaml"); }),
                                   what_of([&] { policy::parse_rule_file(nested_bomb("version: 1\n"), "b.yaml"); }),
                                   what_of([&] { parse_whitelist_file(nested_bomb("schema: 1\n"), "b.yaml"); }),
                                   what_of([&] { policy::parse_device_rows(nested_bomb("schema: 1\n"), "b.yaml"); })})
    EXPECT_TRUE(std::regex_match(error, refused)) << error.substr(0, 400);

  // The reader's own tree shares an alias's node, but a document whose bytes fit is read whole.
  EXPECT_EQ(read_strict_yaml("a: &a " + std::string(1 << 20, 'y') + "\nb: [*a, *a, *a]\n", "t.yaml").root()["b"].size(), 3u);
  // Tags count: a %TAG prefix a megabyte long is each tag's length.
  std::string tags = "%TAG !t! tag:" + std::string(1 << 20, 't') + ":\n---\n[";
  for (int i = 0; i < 20; ++i) tags += "!t!x a, ";
  EXPECT_TRUE(contains(what_of([&] { read_strict_yaml(tags + "]\n", "t.yaml"); }), kBytesLimit));
}

TEST_F(YamlBytes, TheToolRefusesAliasBombsInBoundedMemoryWhereverARuleFileComesFrom) {
  const std::string h200 = test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz");
  const std::string policy = write("policy.yaml", policy_bomb());
  const std::string nested = write("nested.yaml", nested_bomb("version: 1\n"));
  const std::string kernel = write("kernel.yaml", kernel_bomb());
  const std::string policy_dir = rules_dir_with("with-policy", "policy/default.yaml", policy_bomb());
  const std::string advisories_dir = rules_dir_with("with-advisories", "advisories/known-problems.yaml", policy_bomb());
  const std::string devices_dir = rules_dir_with("with-devices", "devices/gpus.yaml", device_bomb());
  const std::vector<std::pair<std::vector<std::string>, std::string>> runs = {
      {{"rules", "lint", "--no-default-rules", policy}, policy},
      {{"rules", "lint", nested}, nested},
      {{"--rules-dir", policy_dir, "rules", "lint", "--no-default-rules", policy_dir + "/policy/default.yaml"},
       policy_dir + "/policy/default.yaml"},
      {{"--sysroot", h200, "policy", "--rules", policy}, policy},
      {{"--sysroot", h200, "--rules-dir", policy_dir, "policy"}, policy_dir + "/policy/default.yaml"},
      {{"--sysroot", h200, "--rules-dir", advisories_dir, "policy"}, advisories_dir + "/advisories/known-problems.yaml"},
      {{"--sysroot", h200, "--rules-dir", devices_dir, "policy"}, devices_dir + "/devices/gpus.yaml"},
      {{"--sysroot", h200, "--kernel-rules", kernel, "matrix"}, kernel},
  };
  const std::string err = (dir_ / "stderr").string();
  for (const auto& [args, file] : runs) {
    // Before the budget, each copied the scalar at each alias: gigabytes (out of memory under the cap).
    test::MeasuredRun run = test::run_measured(args, err, rlim_t{2} << 30);
    std::string message = read_input_file(err, 1 << 20);
    EXPECT_EQ(run.status, 2) << args.back() << ": " << message.substr(0, 400);
    EXPECT_LT(run.peak_rss_kib, 256 * 1024) << args.back();
    EXPECT_TRUE(std::regex_search(message, std::regex(fmt::format("{}:\\d+:\\d+: {}", std::regex_replace(file, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)"), kBytesLimit))))
        << fmt::format("{}", fmt::join(args, " ")) << "\n" << message.substr(0, 400);
    EXPECT_LT(message.size(), 2048u) << message.substr(0, 400);
  }
}

// ---- a byte order mark ----

TEST_F(YamlBytes, ALeadingByteOrderMarkIsSkippedByEveryLoaderWithPositionsUnchanged) {
  const std::string rule = "version: 1\nrules:\n- {id: a, when: always, action: warn, reason: x}\n";
  EXPECT_EQ(policy::parse_rule_file(kBom + rule, "t.yaml").rules.size(), 1u);
  const std::string whitelist = "schema: 1\nentries:\n- {vendor: '8086', device: '2030'}\n";
  EXPECT_EQ(parse_whitelist_file(kBom + whitelist, "t.yaml").size(), 1u);
  const std::string devices = "schema: 1\nsources: {a: https://example.org/a}\ndevices:\n- {vendor: '10de', device: '2335', product: H200, source: [a]}\n";
  EXPECT_EQ(policy::parse_device_rows(kBom + devices, "t.yaml").size(), 1u);

  // An error on the first line is where an editor, which hides the mark, shows it; the rule
  // loader's own positions inside a scalar ({nope}) too.
  const std::vector<std::pair<std::string, std::function<void(const std::string&)>>> cases = {
      {"version: 2\nrules: []\n", [](const std::string& t) { policy::parse_rule_file(t, "t.yaml"); }},
      {"{version: 1, rules: [{id: a, when: always, action: warn, reason: \"x {nope}\"}]}\n",
       [](const std::string& t) { policy::parse_rule_file(t, "t.yaml"); }},
      {"schema: 2\nentries: []\n", [](const std::string& t) { parse_whitelist_file(t, "t.yaml"); }},
      {"{schema: 1, colour: red}\n", [](const std::string& t) { parse_upstream_file(t, "t.yaml"); }},
      {"{schema: 1, sources: {}, devices: [{vendor: 'zz'}]}\n", [](const std::string& t) { policy::parse_device_rows(t, "t.yaml"); }},
  };
  for (const auto& c : cases) {
    const std::string& text = c.first;
    const auto& load = c.second;  // not a structured binding: clang 14 cannot capture those
    std::string plain = what_of([&] { load(text); });
    ASSERT_TRUE(plain.starts_with("t.yaml:1:")) << plain;
    EXPECT_EQ(what_of([&] { load(kBom + text); }), plain);
  }
}

TEST_F(YamlBytes, AByteOrderMarkAnywhereElseIsRefusedWithItsPlace) {
  const std::string expected = "t.yaml:2:1: byte order mark U+FEFF: only the file's first character may be one";
  EXPECT_TRUE(what_of([&] { policy::parse_rule_file("version: 1\n" + kBom + "rules: []\n", "t.yaml"); }).starts_with(expected));
  EXPECT_TRUE(what_of([&] { parse_whitelist_file("schema: 1\n" + kBom + "entries: []\n", "t.yaml"); }).starts_with(expected));
  EXPECT_TRUE(what_of([&] { policy::parse_device_rows("schema: 1\n" + kBom + "devices: []\n", "t.yaml"); }).starts_with(expected));
  // Two marks: the second is not the file's first character.
  EXPECT_TRUE(what_of([&] { policy::parse_rule_file(kBom + kBom + "version: 1\n", "t.yaml"); })
                  .starts_with("t.yaml:1:1: byte order mark U+FEFF"));
  // Inside a value, after the first line's mark: the column counts from after the leading one.
  EXPECT_TRUE(what_of([&] { policy::parse_rule_file(kBom + "version: 1\ndescription: a" + kBom + "b\n", "t.yaml"); })
                  .starts_with("t.yaml:2:15: byte order mark U+FEFF"));

  const std::string good = write("bom.yaml", kBom + "version: 1\nrules:\n- {id: a, when: always, action: warn, reason: x}\n");
  auto lint = test::run_command(test::tool_file() + " rules lint --no-default-rules " + test::shell_quote(good) + " 2>&1");
  EXPECT_EQ(lint.status, 0) << lint.output;
}

// ---- values quoted in messages ----

TEST_F(YamlBytes, AQuotedValueIsEscapedOnOneLineAndCutWithItsLength) {
  EXPECT_EQ(quoted_input("abc"), "'abc'");
  EXPECT_EQ(quoted_input("a\nb\x1b[2J", '"'), "\"a\\x0ab\\x1b[2J\"");
  const std::string cut = quoted_input(std::string(kQuotedInputBytes - 1, 'a') + "\xc3\xa9" + std::string(1000, 'b'));
  EXPECT_EQ(cut, "'" + std::string(kQuotedInputBytes - 1, 'a') + "\u2026' (1101 bytes)");  // not inside the é
  EXPECT_EQ(quoted_input(std::string(kQuotedInputBytes, 'a')), "'" + std::string(kQuotedInputBytes, 'a') + "'");
  EXPECT_EQ(quoted_input("a.b", '\0'), "a.b");  // a path's key, a placeholder: set off by the message
  EXPECT_EQ(quoted_input(std::string(200, 'k'), '\0'), std::string(kQuotedInputBytes, 'k') + "\u2026 (200 bytes)");
}

TEST_F(YamlBytes, EveryLoaderCutsAThreeMegabyteValueItQuotes) {
  const std::string big(3 << 20, 'v');
  const std::string length = "(3145728 bytes)";
  struct Case {
    std::string error, place;
  };
  const std::vector<Case> cases = {
      {what_of([&] { policy::parse_rule_file("version: 1\nrules:\n- {id: a, when: always, action: " + big + ", reason: x}\n", "t.yaml"); }),
       "t.yaml:3:33: "},
      {what_of([&] { policy::parse_rule_file("version: 1\nrules:\n- {id: a, when: {? " + big + " : 1}, action: warn, reason: x}\n", "t.yaml"); }),
       "t.yaml:3:20: unknown fact "},
      {what_of([&] { policy::parse_rule_file("version: 1\nrules:\n- {id: a, when: always, action: warn, reason: \"{" + big + "}\"}\n", "t.yaml"); }),
       "t.yaml:3:"},
      {what_of([&] { policy::parse_rule_file("version: 1\nrules:\n- {id: a, when: {kernel.allowed: " + big + "}, action: warn, reason: x}\n", "t.yaml"); }),
       "t.yaml:3:"},
      {what_of([&] { policy::parse_rule_file("version: 1\nrules:\n- {id: " + big + ", when: always, action: warn, reason: x}\n"
                                             "- {id: " + big + ", when: always, action: warn, reason: x}\n", "t.yaml"); }),
       "t.yaml:4:8: duplicate rule id "},
      {what_of([&] { parse_whitelist_file("schema: 1\nentries:\n- {vendor: '" + big + "', device: '2030'}\n", "t.yaml"); }), "t.yaml:3:12: "},
      {what_of([&] { parse_whitelist_file("schema: 1\n? " + big + "\n: 1\n", "t.yaml"); }), "t.yaml:2:3: unknown key "},
      {what_of([&] { policy::parse_device_rows("schema: 1\nsources: {a: https://example.org/a}\ndevices:\n- {vendor: '10de', device: '2335', "
                                               "product: H200, chip: " + big + ", source: [a]}\n", "t.yaml"); }),
       "t.yaml:4:"},
      {what_of([&] { policy::VendorFactsDocument::parse("{\"schema_version\": 1, \"" + big + "\": 1}", "vf.json"); }), "vf.json: "},
      {what_of([&] { policy::VendorFactsDocument::parse("{\"schema_version\": 1, \"pairs\": [{\"provider\": \"" + big +
                                                        "\", \"client\": \"0000:00:00.0\", \"facts\": {}}]}", "vf.json"); }),
       "vf.json: pairs[0].provider: "},
      {what_of([&] { parse_input_json("{\"" + big + "\": 1, \"" + big + "\": 2}", "d.json"); }), "d.json: the document: duplicate key "},
      {what_of([&] { read_strict_yaml("{? " + big + " : 1, ? " + big + " : 2}\n", "t.yaml"); }), "t.yaml:1:"},
  };
  for (const auto& [error, place] : cases) {
    EXPECT_LT(error.size(), 1024u) << error.substr(0, 300);
    EXPECT_TRUE(error.starts_with(place)) << error.substr(0, 300);
    EXPECT_TRUE(contains(error, "vvv\u2026")) << error.substr(0, 300);
    EXPECT_TRUE(contains(error, length)) << error.substr(0, 300);
  }

  // The tool's own line, for rules lint.
  const std::string file = write("big.yaml", "version: 1\nrules:\n- {id: a, when: always, action: " + big + ", reason: x}\n");
  auto lint = test::run_command(test::tool_file() + " rules lint --no-default-rules " + test::shell_quote(file) + " 2>&1");
  EXPECT_EQ(lint.status, 2);
  EXPECT_LT(lint.output.size(), 1024u) << lint.output.substr(0, 300);
  EXPECT_TRUE(contains(lint.output, file + ":3:33: 'vvv")) << lint.output.substr(0, 300);
}

// ---- out of memory ----

// A stream buffer that writes into a fixed array: it allocates nothing, so it can be written while
// every allocation fails.
class FixedBuffer : public std::streambuf {
 public:
  std::string_view text() const { return {data_, size_}; }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    size_t take = std::min(static_cast<size_t>(n), sizeof data_ - size_);
    std::copy(s, s + take, data_ + size_);
    size_ += take;
    return n;
  }
  int_type overflow(int_type ch) override {
    if (!traits_type::eq_int_type(ch, traits_type::eof()) && size_ < sizeof data_) data_[size_++] = traits_type::to_char_type(ch);
    return traits_type::not_eof(ch);
  }

 private:
  char data_[4096];
  size_t size_ = 0;
};

TEST(OutOfMemory, TheTextGateGivingBackHeldTextSaysItIsLostInsteadOfEndingTheProcess) {
  // Before: escaping the held line threw std::bad_alloc out of ~TextGate, which is noexcept:
  // std::terminate, an abort at the end of a run whose error had been printed.
  FixedBuffer fixed;
  std::ostream out(&fixed);
  {
    TextGate gate(out);
    out << "a line held until its end, longer than a short string";
    g_allocations_fail = true;
  }
  g_allocations_fail = false;
  EXPECT_EQ(fixed.text(), "\n(the rest of this output was lost: out of memory)\n");
}

TEST(OutOfMemory, TheToolSaysSoAndExitsTwo) {
  if (test::kSanitized) GTEST_SKIP() << "a sanitizer reserves terabytes of address space";
  const std::string big = ::testing::TempDir() + "/yaml-bytes-oom.yaml";
  std::ofstream(big, std::ios::binary) << "version: 1\nrules:\n- {id: a, when: always, action: " << std::string(3 << 20, 'v') << ", reason: x}\n";
  // Address-space caps from where the tool just starts to where it no longer runs short: each run
  // ends in its message or the out-of-memory line, exit 2, never an abort.
  for (int megabytes = 24; megabytes <= 48; megabytes += 2) {
    auto run = test::run_command(fmt::format("(ulimit -v {}; {} rules lint --no-default-rules {}) 2>&1", megabytes * 1024,
                                             test::tool_file(), test::shell_quote(big)));
    if (run.output.find("error while loading shared libraries") != std::string::npos) continue;  // below the loader's need
    EXPECT_EQ(run.status, 2) << megabytes << " MB: " << run.output.substr(0, 300);
    EXPECT_TRUE(contains(run.output, "out of memory") || contains(run.output, "(3145728 bytes) is not a valid action"))
        << megabytes << " MB: " << run.output.substr(0, 300);
  }
  fs::remove(big);
}

}  // namespace
}  // namespace p2paudit
