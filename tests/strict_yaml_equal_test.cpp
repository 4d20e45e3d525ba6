// SPDX-License-Identifier: GPL-2.0-or-later
// load_strict_yaml() reads with libyaml and builds yaml-cpp nodes; the loaders were written against
// YAML::Load's trees. Every file the project ships or tests with, and the constructs below, must give
// the very same tree: node types, scalars, tags (plain "?" or not), styles, key order and every
// node's mark (the loaders print FILE:LINE:COLUMN from it).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "p2paudit/input_file.h"
#include "p2paudit/strict_yaml.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;

std::string describe(const YAML::Mark& m) { return fmt::format("{}:{} (byte {})", m.line + 1, m.column + 1, m.pos); }

// The first difference between two trees, or "" when they are the same.
std::string difference(const YAML::Node& expected, const YAML::Node& actual, const std::string& path) {
  auto at = [&](const std::string& what) { return fmt::format("{}: {}", path.empty() ? "(root)" : path, what); };
  if (expected.Type() != actual.Type()) return at(fmt::format("type {} != {}", int(expected.Type()), int(actual.Type())));
  if (expected.Tag() != actual.Tag()) return at(fmt::format("tag '{}' != '{}'", expected.Tag(), actual.Tag()));
  const YAML::Mark em = expected.Mark(), am = actual.Mark();
  if (em.pos != am.pos || em.line != am.line || em.column != am.column)
    return at(fmt::format("mark {} != {}", describe(em), describe(am)));
  if (expected.IsScalar() && expected.Scalar() != actual.Scalar())
    return at(fmt::format("scalar '{}' != '{}'", escape_text(expected.Scalar()), escape_text(actual.Scalar())));
  if (!expected.IsMap() && !expected.IsSequence()) return "";
  if (expected.Style() != actual.Style()) return at("style");
  if (expected.size() != actual.size()) return at(fmt::format("size {} != {}", expected.size(), actual.size()));
  auto e = expected.begin();
  auto a = actual.begin();
  for (size_t i = 0; e != expected.end(); ++e, ++a, ++i) {
    std::string d = expected.IsMap() ? difference(e->first, a->first, fmt::format("{}{{key {}}}", path, i)) +
                                           difference(e->second, a->second, fmt::format("{}{{value {}}}", path, i))
                                     : difference(*e, *a, fmt::format("{}[{}]", path, i));
    if (!d.empty()) return d;
  }
  return "";
}

// "" when load_strict_yaml() accepts `text` and builds YAML::Load's tree.
std::string compare(const std::string& text) {
  YAML::Node expected;
  try {
    expected = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return fmt::format("yaml-cpp refuses it: {}", e.what());
  }
  try {
    return difference(expected, load_strict_yaml(text, "t.yaml"), "");
  } catch (const InputError& e) {
    return fmt::format("refused: {}", e.what());
  }
}

std::vector<fs::path> yaml_files_under(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && (entry.path().extension() == ".yaml" || entry.path().extension() == ".yml"))
      out.push_back(entry.path());
  return out;
}

TEST(StrictYamlEqual, EveryShippedAndTestRuleFileGivesYamlCppsTree) {
  size_t files = 0;
  for (const char* dir : {P2PAUDIT_SOURCE_RULES_DIR, P2PAUDIT_TEST_DATA}) {
    for (const fs::path& file : yaml_files_under(dir)) {
      std::string text = read_input_file(file.string(), kMaxRuleFileBytes);
      YAML::Node reference;
      try {
        reference = YAML::Load(text);
      } catch (const YAML::Exception&) {
        continue;  // a test's broken file: the error tests cover those
      }
      std::string d;
      try {
        d = difference(reference, load_strict_yaml(text, file.string()), "");
      } catch (const YamlError& e) {
        bool strict_refusal = std::string(e.what()).find("duplicate key") != std::string::npos ||
                              std::string(e.what()).find("invalid UTF-8") != std::string::npos;
        if (!strict_refusal) d = e.what();
      }
      EXPECT_EQ(d, "") << file;
      ++files;
    }
  }
  EXPECT_GT(files, 10u);  // rules/ alone holds more
}

// The loaders read read_strict_yaml()'s YamlDocument through YamlNode: every answer must be that of
// the same node of load_strict_yaml()'s yaml-cpp tree, lookups by key included.
std::string node_difference(const YAML::Node& expected, const YamlNode& actual, const std::string& path) {
  auto at = [&](const std::string& what) { return fmt::format("{}: {}", path.empty() ? "(root)" : path, what); };
  if (!actual) return at("invalid node");
  if (expected.Type() != actual.Type()) return at("type");
  if (expected.Tag() != actual.Tag()) return at(fmt::format("tag '{}' != '{}'", expected.Tag(), actual.Tag()));
  const YAML::Mark em = expected.Mark(), am = actual.Mark();
  if (em.pos != am.pos || em.line != am.line || em.column != am.column) return at("mark");
  if (expected.Scalar() != actual.Scalar()) return at("scalar");
  if (expected.size() != actual.size()) return at("size");
  if (actual[std::string_view("\x01")]) return at("a key that no file can hold was found");  // refused as a control character
  size_t i = 0;
  if (expected.IsSequence()) {
    for (YamlNode item : actual) {
      if (std::string d = node_difference(expected[i], item, fmt::format("{}[{}]", path, i)); !d.empty()) return d;
      ++i;
    }
    return i == expected.size() ? "" : at("items");
  }
  for (auto it = expected.begin(); expected.IsMap() && it != expected.end(); ++it, ++i) {
    std::string d = node_difference(it->first, actual.key(i), fmt::format("{}{{key {}}}", path, i)) +
                    node_difference(it->second, actual.value(i), fmt::format("{}{{value {}}}", path, i));
    if (it->first.IsScalar()) d += node_difference(expected[it->first.Scalar()], actual[it->first.Scalar()], path + "." + it->first.Scalar());
    if (!d.empty()) return d;
  }
  return "";
}

TEST(StrictYamlEqual, YamlDocumentAnswersAsYamlCppsTree) {
  size_t files = 0;
  for (const char* dir : {P2PAUDIT_SOURCE_RULES_DIR, P2PAUDIT_TEST_DATA}) {
    for (const fs::path& file : yaml_files_under(dir)) {
      std::string text = read_input_file(file.string(), kMaxRuleFileBytes);
      try {
        YamlDocument document = read_strict_yaml(text, file.string());
        EXPECT_EQ(node_difference(load_strict_yaml(text, file.string()), document.root(), ""), "") << file;
        ++files;
      } catch (const YamlError&) {
        EXPECT_THROW(load_strict_yaml(text, file.string()), YamlError) << file;  // both refuse, with one message
      }
    }
  }
  EXPECT_GT(files, 10u);
  YamlDocument anchors = read_strict_yaml("a: &x {k: [1, 2]}\nb: *x\n", "t.yaml");
  EXPECT_EQ(node_difference(load_strict_yaml("a: &x {k: [1, 2]}\nb: *x\n", "t.yaml"), anchors.root(), ""), "");
  EXPECT_EQ(anchors.root()["b"]["k"][1].Scalar(), "2");  // an alias is the node it names
  EXPECT_FALSE(anchors.root()["c"]);
  EXPECT_FALSE(anchors.root()["a"]["k"][2]);
  EXPECT_TRUE(read_strict_yaml("", "t.yaml").root().IsNull());
}

TEST(StrictYamlEqual, EveryConstructGivesYamlCppsTree) {
  const char* const cases[] = {
      // empty values: yaml-cpp marks them where the next token starts
      "a:\nb: 1\n",
      "a:\n",
      "a:",
      "a:   # comment\n\n  # more\nb: x\n",
      "- \n- a\n-\n",
      "a:\n  - \n  -\nb:\n",
      "{a: , b: 1, c}\n",
      // Not "? a\n: 1\n? b\n": yaml-cpp marks b's missing value at b's '?', which the events do not
      // give; the loaders mark a null value at its key (rule_loader's value_mark).
      "? a\n: 1\n? b\n: 2\n",
      "a: !!str\nb: &x\nc: *x\n",
      "a: ~\nb: null\nc: Null\nd: NULL\ne: nULL\nf: '~'\ng: \"null\"\nh: !!null ~\n~: 1\n",
      // scalars
      "a: 'it''s'\nb: \"tab\\there \\u00e9 \\x41 \\e\"\nc: plain text   \nd: multi\n  line\n\n  plain\n",
      "a: |\n  keep\n   indent\n\nb: >-\n  folded\n  text\n\n  para\nc: |+\n  x\n\n",
      "a: \"multi\n  line \\\n  escaped\"\nb: 'single\n\n  quoted'\n",
      "a: café # non-ASCII before a mark\nb: ünïcödé x\n",
      "- é\n- {ü: [1, 2]}\n- \"日本\"\n",
      "a: 0x1f\nb: 1.5e3\nc: yes\nd: on\ne: 010\n",
      "a: -1\nb: -x\nc: a:b\n",
      // tags, anchors, styles
      "a: !!str 1\nb: !local x\nc: ! x\nd: !!map {x: 1}\ne: !!seq [1]\n",
      "base: &b {x: 1, y: [1, 2]}\nuse: *b\nalso: *b\n",
      "a: &a 1\nb: *a\na2: &a 2\nc: *a\n",
      "[a, b]: 1\n{c: d}: 2\n",
      "a: {x: [1, {y: z}], w: []}\nb: []\nc: {}\n",
      "a:\n- x\n- y\nb:\n  - z\n",
      "- - a\n  - b\n- - c\n",
      "- a: 1\n  b: 2\n- c: 3\n",
      "[a: 1, b]\n",
      // documents, directives, comments, line ends
      "",
      "# only a comment\n",
      "---\n",
      "--- a\n",
      "---\na: 1\n...\n",
      "%YAML 1.2\n---\na: 1\n",
      "%TAG !e! tag:example.com,2000:\n---\na: !e!x 1\n",
      "a: 1\r\nb:\r\n  - x\r\n",
      "a: 1\n\n\n# trailing\n\n",
      "\xef\xbb\xbf" "a: 1\n",
      "key with spaces: value with:colon\n'quoted key': \"quoted value\"\n",
      "a: 'x' # comment\nb: \"y\"# not a comment?\n",
      "a: \t1\n",
  };
  for (const char* text : cases) EXPECT_EQ(compare(text), "") << escape_text(text);
}

// Where yaml-cpp strays from YAML and libyaml does not, the tree follows libyaml (differential fuzzing
// of the two readers on mutated rule files found these; every other difference is a refusal).
TEST(StrictYamlEqual, WhereYamlCppStraysFromYamlTheTreeFollowsTheSpecification) {
  // "\_" is U+00A0; yaml-cpp wrote the lone byte 0xa0, which is not UTF-8.
  EXPECT_EQ(YAML::Load("a: \"PCI\\_ANY_ID\"\n")["a"].Scalar(), "PCI\xa0" "ANY_ID");
  EXPECT_EQ(load_strict_yaml("a: \"PCI\\_ANY_ID\"\n", "t.yaml")["a"].Scalar(), "PCI\xc2\xa0" "ANY_ID");
  // A last line of indentation only, with no line feed, is an empty line of the block scalar.
  EXPECT_EQ(YAML::Load("a: >-\n  x\n  ")["a"].Scalar(), "x ");
  EXPECT_EQ(load_strict_yaml("a: >-\n  x\n  ", "t.yaml")["a"].Scalar(), "x");
  // "? " inside a plain scalar of a flow mapping is text; yaml-cpp refused the file.
  EXPECT_THROW(YAML::Load("{a? b: 1}\n"), YAML::Exception);
  EXPECT_EQ(load_strict_yaml("{a? b: 1}\n", "t.yaml")["a? b"].Scalar(), "1");
  // YAML has no empty flow entry ("[a, , b]"); yaml-cpp read a null there.
  EXPECT_EQ(YAML::Load("[a, , b]\n").size(), 3u);
  EXPECT_THROW(load_strict_yaml("[a, , b]\n", "t.yaml"), YamlError);
}

TEST(StrictYamlEqual, AnEmptyViewIsAnEmptyDocument) {
  EXPECT_TRUE(load_strict_yaml(std::string_view(), "t.yaml").IsNull());
}

}  // namespace
}  // namespace p2paudit
