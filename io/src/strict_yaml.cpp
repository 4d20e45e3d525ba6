// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/strict_yaml.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include "p2paudit/input_file.h"

namespace p2paudit {

namespace {

struct Decoded {
  size_t length = 0;  // 0: not a valid UTF-8 sequence
  uint32_t code_point = 0;
};

Decoded decode_utf8(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return {1, c};
  size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return {};
  uint32_t cp = c & (0x7f >> len);
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return {};
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  static const uint32_t kShortest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kShortest[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return {};  // overlong, surrogate
  return {len, cp};
}

// YAML 1.2's c-printable, less what decode_utf8 already refuses.
bool yaml_printable(uint32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r' || cp == 0x85) return true;
  if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f)) return false;
  return cp != 0xfffe && cp != 0xffff;
}

std::optional<BadCharacter> find_bad_character(std::string_view text, bool yaml) {
  for (size_t i = 0; i < text.size();) {
    Decoded d = decode_utf8(text, i);
    if (d.length == 0)
      return BadCharacter{i, fmt::format("invalid UTF-8 byte 0x{:02x}", static_cast<unsigned char>(text[i]))};
    if (yaml && !yaml_printable(d.code_point))
      return BadCharacter{i, fmt::format("control character U+{:04X}", d.code_point)};
    i += d.length;
  }
  return std::nullopt;
}

// Long keys are cut where they are quoted in messages: the message is for a person.
std::string shown_key(std::string_view key) {
  constexpr size_t kShown = 40;
  std::string shown = escape_text(key.substr(0, kShown));
  return key.size() > kShown ? shown + "..." : shown;
}

// Thrown from inside the parser to stop at the first problem that makes reading on pointless.
struct Refused {
  YAML::Mark mark;
  std::string message;
};

// Follows the parser's events to refuse, before any node is built, what load_strict_yaml() promises
// to refuse. Sizes are of the tree as a reader walks it: an alias counts as the node it names.
class StrictEvents : public YAML::EventHandler {
 public:
  explicit StrictEvents(const YamlLimits& limits) : limits_(limits) {}

  std::vector<YAML::Mark> document_starts;
  std::vector<YamlProblem> duplicate_keys;

  void OnDocumentStart(const YAML::Mark& mark) override {
    document_starts.push_back(mark);
    if (document_starts.size() > 1) throw Refused{mark, "second document"};  // the caller words it
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    count(mark, 1);
    finish_node(mark, anchor, 1, 0, Key{true, "null"});
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string& value) override {
    count(mark, 1);
    finish_node(mark, anchor, 1, 0, Key{false, value});
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) throw Refused{mark, "alias to an unknown anchor"};
    const Anchored& a = it->second;
    if (!a.complete)
      throw Refused{mark, "alias to a node that contains the alias: the node would contain itself forever"};
    if (a.alias_depth + 1 > limits_.max_alias_depth)
      throw Refused{mark, fmt::format("aliases nested deeper than {} (an alias to a node holding aliases to nodes "
                                      "holding aliases...)", limits_.max_alias_depth)};
    count(mark, a.nodes);
    finish_node(mark, 0, a.nodes, a.alias_depth + 1, a.scalar);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor, false);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    open(mark, anchor, true);
  }
  void OnMapEnd() override { close(); }

 private:
  // A mapping key as YAML compares keys: a null key differs from the string "null".
  struct Key {
    bool is_null = false;
    std::string text;
    bool operator<(const Key& o) const { return std::tie(is_null, text) < std::tie(o.is_null, o.text); }
  };
  struct Anchored {
    size_t nodes = 0;
    int alias_depth = 0;
    bool complete = false;     // false while the anchored collection is still being read
    std::optional<Key> scalar;  // for an alias used as a mapping key
  };
  struct Frame {
    bool is_map = false;
    YAML::Mark mark;
    YAML::anchor_t anchor = 0;
    size_t nodes = 1;
    int alias_depth = 0;
    std::string path;                 // "rules[0].when", for messages
    size_t children = 0;              // a mapping's keys and values alternate
    std::string current_key = "?";    // the key whose value is being read (a mapping)
    std::map<Key, int> keys;          // a mapping's scalar keys, with the line each first appears on
  };

  const YamlLimits& limits_;
  size_t total_nodes_ = 0;
  std::map<YAML::anchor_t, Anchored> anchors_;
  std::vector<Frame> open_;

  void count(const YAML::Mark& mark, size_t nodes) {
    total_nodes_ += nodes;  // each term is at most the limit, so this cannot overflow
    if (total_nodes_ > limits_.max_nodes)
      throw Refused{mark, fmt::format("more than {} nodes once aliases are expanded", limits_.max_nodes)};
  }

  std::string child_path() const {
    if (open_.empty()) return {};
    const Frame& parent = open_.back();
    if (!parent.is_map) return fmt::format("{}[{}]", parent.path, parent.children);
    if (parent.children % 2 == 0) return parent.path.empty() ? "a key" : parent.path + " (a key)";
    return parent.path.empty() ? parent.current_key : parent.path + "." + parent.current_key;
  }

  void open(const YAML::Mark& mark, YAML::anchor_t anchor, bool is_map) {
    count(mark, 1);
    if (static_cast<int>(open_.size()) >= limits_.max_depth)
      throw Refused{mark, fmt::format("collections nested deeper than {} levels", limits_.max_depth)};
    if (anchor) anchors_[anchor] = Anchored{};
    Frame f;
    f.is_map = is_map;
    f.mark = mark;
    f.anchor = anchor;
    f.path = child_path();
    open_.push_back(std::move(f));
  }

  void close() {
    Frame f = std::move(open_.back());
    open_.pop_back();
    finish_node(f.mark, f.anchor, f.nodes, f.alias_depth, std::nullopt);
  }

  void finish_node(const YAML::Mark& mark, YAML::anchor_t anchor, size_t nodes, int alias_depth,
                   const std::optional<Key>& scalar) {
    if (anchor) anchors_[anchor] = Anchored{nodes, alias_depth, true, scalar};
    if (open_.empty()) return;
    Frame& parent = open_.back();
    parent.nodes += nodes;
    parent.alias_depth = std::max(parent.alias_depth, alias_depth);
    bool is_key = parent.is_map && parent.children % 2 == 0;
    ++parent.children;
    if (!is_key) return;
    parent.current_key = scalar ? shown_key(scalar->text) : "?";
    if (!scalar) return;  // a collection as a key: the loaders refuse those by their own rules
    TextPosition here = yaml_position(mark);
    auto [first, inserted] = parent.keys.emplace(*scalar, here.line);
    if (!inserted)
      duplicate_keys.push_back(
          {here, fmt::format("duplicate key '{}' {} (first at line {})", parent.current_key,
                             parent.path.empty() ? "at the top level" : "in " + parent.path, first->second)});
  }
};

std::string join_problems(const std::string& file, const std::vector<YamlProblem>& problems) {
  std::string out;
  for (const auto& p : problems) out += fmt::format("{}{}: {}", out.empty() ? "" : "\n", format_position(file, p.position), p.message);
  return out;
}

}  // namespace

TextPosition yaml_position(const YAML::Mark& mark) { return {std::max(mark.line, 0) + 1, std::max(mark.column, 0) + 1}; }

TextPosition text_position(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  std::string_view before = text.substr(0, offset);
  size_t line_start = before.rfind('\n');
  line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
  return {static_cast<int>(std::count(before.begin(), before.end(), '\n')) + 1, static_cast<int>(offset - line_start) + 1};
}

std::string format_position(std::string_view file, TextPosition position) {
  return fmt::format("{}:{}:{}", escape_text(file), position.line, position.column);
}

std::string format_position(std::string_view file, const YAML::Mark& mark) { return format_position(file, yaml_position(mark)); }

std::optional<BadCharacter> find_bad_yaml_character(std::string_view text) { return find_bad_character(text, true); }
std::optional<BadCharacter> find_invalid_utf8(std::string_view text) { return find_bad_character(text, false); }

std::optional<BadCharacter> find_control_character(std::string_view value) {
  for (size_t i = 0; i < value.size();) {
    Decoded d = decode_utf8(value, i);
    if (d.length == 0) return BadCharacter{i, fmt::format("invalid UTF-8 byte 0x{:02x}", static_cast<unsigned char>(value[i]))};
    if (d.code_point != '\n' && !yaml_printable(d.code_point))
      return BadCharacter{i, fmt::format("control character U+{:04X}", d.code_point)};
    i += d.length;
  }
  return std::nullopt;
}

YamlError::YamlError(std::string file, std::vector<YamlProblem> problems)
    : InputError(join_problems(file, problems)), file_(std::move(file)), problems_(std::move(problems)) {}

YAML::Node load_strict_yaml(std::string_view text, const std::string& file, const YamlLimits& limits) {
  auto refuse = [&](TextPosition position, std::string message) {
    return YamlError(file, {YamlProblem{position, std::move(message)}});
  };
  if (auto bad = find_bad_yaml_character(text))
    throw refuse(text_position(text, bad->offset), bad->description + " (a YAML file is UTF-8 text)");

  std::istringstream in{std::string(text)};
  YAML::Parser parser(in);
  StrictEvents events(limits);
  try {
    while (parser.HandleNextDocument(events)) {
    }
  } catch (const Refused& r) {
    if (events.document_starts.size() > 1) {
      // yaml-cpp reports a document start again, at the same place, for a stray ',' or ']' at the
      // top level: that is the problem to name, not a second document.
      const YAML::Mark& first = events.document_starts[0];
      if (r.mark.pos == first.pos && static_cast<size_t>(first.pos) < text.size())
        throw refuse(yaml_position(first), fmt::format("unexpected '{}'", escape_text(text.substr(first.pos, 1))));
      throw refuse(yaml_position(r.mark), "a rule file holds one YAML document; this is a second");
    }
    throw refuse(yaml_position(r.mark), r.message);
  } catch (const YAML::Exception& e) {
    throw refuse(yaml_position(e.mark), e.msg);
  }
  if (!events.duplicate_keys.empty()) throw YamlError(file, std::move(events.duplicate_keys));
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {  // not expected: the same parser has just read it
    throw refuse(yaml_position(e.mark), e.msg);
  }
}

}  // namespace p2paudit
