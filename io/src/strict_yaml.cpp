// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/strict_yaml.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>

#include <fmt/format.h>
#include <yaml-cpp/anchor.h>
#include <yaml.h>

#include "p2paudit/byte_words.h"
#include "p2paudit/input_file.h"
#include "p2paudit/quoted_input.h"

namespace p2paudit {
struct YamlTreeRoot;
}

// libyaml reads the text; the consumers read yaml-cpp nodes, and a node's mark can only be set from
// inside yaml-cpp (detail::node::set_mark behind Node's private constructor). Node befriends every
// specialization of YAML::as_if, so this one, used by nothing else, is the standard way to hand a
// tree built from libyaml's events to the Node API without patching or copying yaml-cpp.
template <>
struct YAML::as_if<p2paudit::YamlTreeRoot, void> {
  static YAML::Node node(YAML::detail::node& root, const YAML::detail::shared_memory_holder& memory) {
    return YAML::Node(root, memory);
  }
};

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

// The end of the run of printable ASCII (0x20 to 0x7e), tabs and line ends that starts at `i`,
// mostly eight bytes at a time: rule files are almost all such bytes, and every check below
// accepts them.
size_t skip_printable_ascii(std::string_view text, size_t i) {
  using namespace byte_words;
  while (i < text.size()) {
    if (i + 8 <= text.size()) {
      const uint64_t bytes = load(text.data() + i);
      if (!any_high(bytes) && !any_below(bytes, 0x20) && !any_equal(bytes, 0x7f)) {
        i += 8;
        continue;
      }
    }
    // Eight bytes with a tab, a line end or something else: one at a time through them.
    for (size_t end = std::min(i + 8, text.size()); i < end; ++i) {
      char c = text[i];
      if (!((c >= 0x20 && c < 0x7f) || c == '\t' || c == '\n' || c == '\r')) return i;
    }
  }
  return i;
}

std::optional<BadCharacter> find_bad_character(std::string_view text, bool yaml) {
  for (size_t i = 0; i < text.size();) {
    i = skip_printable_ascii(text, i);
    if (i == text.size()) break;
    Decoded d = decode_utf8(text, i);
    if (d.length == 0)
      return BadCharacter{i, fmt::format("invalid UTF-8 byte 0x{:02x}", static_cast<unsigned char>(text[i]))};
    if (yaml && !yaml_printable(d.code_point))
      return BadCharacter{i, fmt::format("control character U+{:04X}", d.code_point)};
    // Invisible in an editor, and libyaml reads one past the start as neither text nor a blank.
    if (yaml && d.code_point == 0xfeff && i != 0)
      return BadCharacter{i, "byte order mark U+FEFF: only the file's first character may be one (write \\uFEFF in a "
                             "double-quoted string for the character itself)"};
    i += d.length;
  }
  return std::nullopt;
}

// The first line break that YAML 1.1 (libyaml, which reads the text) and yaml-cpp (whose reading the
// loaders and the rule files were written for) take differently: NEL, LS and PS end a line in 1.1 and
// are text in 1.2; yaml-cpp keeps a carriage return without a line feed in the text and libyaml ends
// the line there. Refused rather than read one way when its author may have meant the other.
std::optional<BadCharacter> find_ambiguous_line_break(std::string_view text) {
  // The next of each byte that starts one, each found with memchr (rule files hold few or none).
  const char kStarts[] = {'\r', '\xc2', '\xe2'};
  size_t next[3];
  auto find_from = [&](char c, size_t from) {
    const void* at = from < text.size() ? std::memchr(text.data() + from, c, text.size() - from) : nullptr;
    return at ? static_cast<size_t>(static_cast<const char*>(at) - text.data()) : text.size();
  };
  for (int k = 0; k < 3; ++k) next[k] = find_from(kStarts[k], 0);
  for (size_t i = 0; (i = std::min({next[0], next[1], next[2]})) < text.size();) {
    for (int k = 0; k < 3; ++k)
      if (next[k] == i) next[k] = find_from(kStarts[k], i + 1);
    if (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))
      return BadCharacter{i, "carriage return without a line feed: end lines with LF or CR LF"};
    std::string_view rest = text.substr(i);
    for (auto [bytes, name] : {std::pair{"\xc2\x85", "U+0085 (NEL)"}, {"\xe2\x80\xa8", "U+2028 (LS)"}, {"\xe2\x80\xa9", "U+2029 (PS)"}})
      if (rest.starts_with(bytes))
        return BadCharacter{i, fmt::format("line break {}: YAML 1.1 ends a line there and YAML 1.2 does not; write a line "
                                           "feed, or \\N, \\L or \\P in a double-quoted string", name)};
  }
  return std::nullopt;
}


// Thrown from inside the parser to stop at the first problem that makes reading on pointless.
struct Refused {
  YAML::Mark mark;
  std::string message;
};

// Follows the parser's events, in yaml-cpp's terms (a null is not a scalar; anchors are numbered), to
// refuse what load_strict_yaml() promises to refuse. Sizes are of the tree as a reader walks it: an
// alias counts as the node it names.
class StrictEvents {
 public:
  explicit StrictEvents(const YamlLimits& limits) : limits_(limits) {}

  std::vector<YAML::Mark> document_starts;
  std::vector<YamlProblem> duplicate_keys;

  void on_document_start(const YAML::Mark& mark) {
    document_starts.push_back(mark);
    if (document_starts.size() > 1) throw Refused{mark, "a rule file holds one YAML document; this is a second"};
  }
  void on_null(const YAML::Mark& mark, YAML::anchor_t anchor) {
    count(mark, 1, 0);
    finish_node(mark, anchor, 1, 0, 0, KeyText{true, "null"});
  }
  void on_scalar(const YAML::Mark& mark, YAML::anchor_t anchor, std::string_view value, size_t tag_bytes) {
    const size_t bytes = value.size() + tag_bytes;
    count(mark, 1, bytes);
    finish_node(mark, anchor, 1, bytes, 0, KeyText{false, value});
  }
  void on_alias(const YAML::Mark& mark, YAML::anchor_t anchor) {
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) throw Refused{mark, "the referenced anchor is not defined"};
    const Anchored& a = it->second;
    if (!a.complete)
      throw Refused{mark, "alias to a node that contains the alias: the node would contain itself forever"};
    if (a.alias_depth + 1 > limits_.max_alias_depth)
      throw Refused{mark, fmt::format("aliases nested deeper than {} (an alias to a node holding aliases to nodes "
                                      "holding aliases...)", limits_.max_alias_depth)};
    count(mark, a.nodes, a.bytes);
    std::optional<KeyText> scalar;
    if (a.scalar) scalar = KeyText{a.scalar->is_null, a.scalar->text};
    finish_node(mark, 0, a.nodes, a.bytes, a.alias_depth + 1, scalar);
  }
  void on_collection_start(const YAML::Mark& mark, YAML::anchor_t anchor, bool is_map, size_t tag_bytes) {
    open(mark, anchor, is_map, tag_bytes);
  }
  void on_collection_end() { close(); }

 private:
  // A mapping key as YAML compares keys: a null key differs from the string "null".
  struct Key {
    bool is_null = false;
    std::string text;
    bool operator<(const Key& o) const { return std::tie(is_null, text) < std::tie(o.is_null, o.text); }
    bool operator==(const Key& o) const = default;
  };
  struct Anchored {
    size_t nodes = 0;
    size_t bytes = 0;  // of its scalars, keys and tags, its aliases counted as what they name
    int alias_depth = 0;
    bool complete = false;     // false while the anchored collection is still being read
    std::optional<Key> scalar;  // for an alias used as a mapping key
  };
  struct Frame {
    bool is_map = false;
    YAML::Mark mark;
    YAML::anchor_t anchor = 0;
    size_t nodes = 1;
    size_t bytes = 0;
    int alias_depth = 0;
    size_t children = 0;              // a mapping's keys and values alternate
    std::optional<std::string> current_key;  // a mapping's scalar key whose value is being read
    size_t first_key = 0;             // where a mapping's scalar keys start in keys_
    std::map<Key, int> many_keys;     // they, once there are more than a linear search should scan
  };
  static constexpr size_t kLinearKeys = 32;

  const YamlLimits& limits_;
  size_t total_nodes_ = 0;
  size_t total_bytes_ = 0;
  std::map<YAML::anchor_t, Anchored> anchors_;
  std::vector<Frame> open_;
  // The scalar keys of the open mappings, each mapping's after its parent's, with the line each
  // first appears on: most mappings have a few keys, and this costs them no allocation of their own.
  std::vector<std::pair<Key, int>> keys_;

  // Each term is at most its limit (an anchored node was counted whole before), so neither sum
  // can overflow before it is refused.
  void count(const YAML::Mark& mark, size_t nodes, size_t bytes) {
    total_nodes_ += nodes;
    if (total_nodes_ > limits_.max_nodes)
      throw Refused{mark, fmt::format("more than {} nodes once aliases are expanded", limits_.max_nodes)};
    total_bytes_ += bytes;
    if (total_bytes_ > limits_.max_bytes)
      throw Refused{mark, fmt::format("more than {} bytes of values, keys and tags once aliases are expanded (the "
                                      "limit; each alias counts the bytes of the node it names)", limits_.max_bytes)};
  }

  // The key whose value is being read, as a message quotes it (`quote`), or as a path names it ('\0').
  static std::string shown_current_key(const Frame& frame, char quote) {
    return frame.current_key ? quoted_input(*frame.current_key, quote) : "?";
  }

  // Where the collection open_[depth] stands, for messages: "rules[0].when". Built only for a
  // message, from the frames above it, which have not changed since it was opened.
  std::string path_of(size_t depth) const {
    std::string path;
    for (size_t k = 1; k <= depth; ++k) {
      const Frame& parent = open_[k - 1];
      if (!parent.is_map) path = fmt::format("{}[{}]", path, parent.children);
      else if (parent.children % 2 == 0) path = path.empty() ? "a key" : path + " (a key)";
      else path = path.empty() ? shown_current_key(parent, '\0') : path + "." + shown_current_key(parent, '\0');
    }
    return path;
  }

  void open(const YAML::Mark& mark, YAML::anchor_t anchor, bool is_map, size_t tag_bytes) {
    count(mark, 1, tag_bytes);
    if (static_cast<int>(open_.size()) >= limits_.max_depth)
      throw Refused{mark, fmt::format("collections nested deeper than {} levels", limits_.max_depth)};
    if (anchor) anchors_[anchor] = Anchored{};
    Frame& f = open_.emplace_back();
    f.is_map = is_map;
    f.mark = mark;
    f.anchor = anchor;
    f.bytes = tag_bytes;
    f.first_key = keys_.size();
  }

  void close() {
    Frame f = std::move(open_.back());
    open_.pop_back();
    keys_.erase(keys_.begin() + static_cast<std::ptrdiff_t>(f.first_key), keys_.end());
    finish_node(f.mark, f.anchor, f.nodes, f.bytes, f.alias_depth, std::nullopt);
  }

  // A scalar's key, before it is known to be a key (and copied as one).
  struct KeyText {
    bool is_null = false;
    std::string_view text;
    Key key() const { return Key{is_null, std::string(text)}; }
  };

  void finish_node(const YAML::Mark& mark, YAML::anchor_t anchor, size_t nodes, size_t bytes, int alias_depth,
                   const std::optional<KeyText>& scalar) {
    if (anchor)
      anchors_[anchor] = Anchored{nodes, bytes, alias_depth, true, scalar ? std::optional(scalar->key()) : std::nullopt};
    if (open_.empty()) return;
    Frame& parent = open_.back();
    parent.nodes += nodes;
    parent.bytes += bytes;
    parent.alias_depth = std::max(parent.alias_depth, alias_depth);
    bool is_key = parent.is_map && parent.children % 2 == 0;
    ++parent.children;
    if (!is_key) return;
    if (scalar) parent.current_key = scalar->text;
    else parent.current_key.reset();
    if (!scalar) return;  // a collection as a key: the loaders refuse those by their own rules
    TextPosition here = yaml_position(mark);
    Key key = scalar->key();
    std::optional<int> first_line;
    if (!parent.many_keys.empty()) {
      if (auto it = parent.many_keys.find(key); it != parent.many_keys.end()) first_line = it->second;
    } else {
      for (size_t k = parent.first_key; k < keys_.size() && !first_line; ++k)
        if (keys_[k].first == key) first_line = keys_[k].second;
    }
    if (first_line) {
      std::string path = path_of(open_.size() - 1);
      duplicate_keys.push_back({here, fmt::format("duplicate key {} {} (first at line {})", shown_current_key(parent, '\''),
                                                  path.empty() ? "at the top level" : "in " + path, *first_line)});
    } else if (!parent.many_keys.empty()) {
      parent.many_keys.emplace(std::move(key), here.line);
    } else {
      keys_.emplace_back(std::move(key), here.line);
      if (keys_.size() - parent.first_key > kLinearKeys) {
        for (size_t k = parent.first_key; k < keys_.size(); ++k) parent.many_keys.emplace(std::move(keys_[k]));
        keys_.erase(keys_.begin() + static_cast<std::ptrdiff_t>(parent.first_key), keys_.end());
      }
    }
  }
};


}  // namespace

// The YamlDocument of the events, holding what yaml-cpp's own NodeBuilder makes of them (node
// types, tags, styles and marks; aliases share the node they name). A collection's children wait
// on a stack until it ends, then move to the document's children in one piece.
class YamlDocumentBuilder {
 public:
  // Scalars and tags are about as long as the text they were read from.
  // Rule files hold about a node per 35 bytes.
  explicit YamlDocumentBuilder(size_t text_size) {
    document_.text_.reserve(text_size + text_size / 4);
    document_.nodes_.reserve(text_size / 24 + 1);
  }

  void on_null(const YAML::Mark& mark, YAML::anchor_t anchor) { attach(add(mark, anchor, YAML::NodeType::Null)); }
  void on_scalar(const YAML::Mark& mark, YAML::anchor_t anchor, std::string_view tag, std::string_view value) {
    uint32_t index = add(mark, anchor, YAML::NodeType::Scalar);
    YamlDocument::Node& node = document_.nodes_[index];
    std::tie(node.text, node.text_size) = keep(value);
    std::tie(node.tag, node.tag_size) = keep(tag);
    attach(index);
  }
  void on_alias(YAML::anchor_t anchor) { attach(anchors_.at(anchor)); }
  void on_collection_start(const YAML::Mark& mark, YAML::anchor_t anchor, std::string_view tag, bool is_map,
                           YAML::EmitterStyle::value style) {
    uint32_t index = add(mark, anchor, is_map ? YAML::NodeType::Map : YAML::NodeType::Sequence);
    YamlDocument::Node& node = document_.nodes_[index];
    std::tie(node.tag, node.tag_size) = keep(tag);
    node.style = style;
    open_.push_back({index, waiting_.size()});
  }
  void on_collection_end() {
    auto [index, first_child] = open_.back();
    open_.pop_back();
    YamlDocument::Node& node = document_.nodes_[index];
    node.children = static_cast<uint32_t>(document_.children_.size());
    node.count = static_cast<uint32_t>(waiting_.size() - first_child);
    document_.children_.insert(document_.children_.end(), waiting_.begin() + static_cast<std::ptrdiff_t>(first_child), waiting_.end());
    waiting_.resize(first_child);
    attach(index);
  }

  YamlDocument take() { return std::move(document_); }

 private:
  YamlDocument document_;
  std::vector<std::pair<uint32_t, size_t>> open_;  // a collection being read, and where its children start in waiting_
  std::vector<uint32_t> waiting_;
  std::vector<uint32_t> anchors_{0};  // anchors are numbered from 1

  uint32_t add(const YAML::Mark& mark, YAML::anchor_t anchor, YAML::NodeType::value type) {
    auto index = static_cast<uint32_t>(document_.nodes_.size());
    YamlDocument::Node& node = document_.nodes_.emplace_back();
    node.type = type;
    node.mark = mark;
    if (anchor) anchors_.push_back(index);  // anchor == anchors_.size() - 1: numbered in order
    return index;
  }
  std::pair<uint32_t, uint32_t> keep(std::string_view text) {
    auto at = static_cast<uint32_t>(document_.text_.size());  // a rule file is far below 4 GiB
    document_.text_.append(text);
    return {at, static_cast<uint32_t>(text.size())};
  }
  void attach(uint32_t index) {
    if (open_.empty()) document_.root_ = index;
    else waiting_.push_back(index);
  }
};

namespace {

// Turns libyaml's character indexes into yaml-cpp's marks: a byte offset, the number of line feeds
// before it and the bytes since the last one (libyaml also counts CR, NEL, LS and PS as line ends and
// counts characters, not bytes). The text has no byte order mark: read_strict_yaml() reads after
// one. The events' marks come in order (differential fuzzing: only an error's marks go back,
// once), so a cursor makes the walk linear.
class MarkCounter {
 public:
  explicit MarkCounter(std::string_view text) : text_(text) { find_lines(); }

  // An event's mark. Where only ASCII comes before it on its line, libyaml's own line and column
  // give yaml-cpp's mark: a character is a byte there, and the line ends libyaml counts besides a
  // line feed (CR alone, NEL, LS, PS) were refused before reading. The counter is set there.
  YAML::Mark at(const yaml_mark_t& mark) {
    if (mark.line >= lines_.size() || mark.column > lines_[mark.line].ascii_end - lines_[mark.line].start)
      return at_character(mark.index);
    byte_ = lines_[mark.line].start + mark.column;
    characters_ = mark.index;
    line_ = mark.line;
    line_start_ = lines_[mark.line].start;
    return this->mark();
  }
  YAML::Mark at_character(size_t index) {
    if (index < characters_) rewind();
    while (characters_ < index && byte_ < text_.size()) {
      if (index - characters_ >= 8 && skip_eight()) continue;
      step();
    }
    return mark();
  }
  // The first byte after the last mark that is not a space, tab, line end or comment: where yaml-cpp's
  // next token starts, which is the mark it gives a value left empty. At the end of the text yaml-cpp
  // puts the column back to 0. The counter walks there and back, so that the events' own marks keep
  // coming in order.
  YAML::Mark next_token() {
    const auto saved = std::tuple(byte_, characters_, line_, line_start_);  // walked ahead, then put back
    MarkCounter& ahead = *this;
    bool after_blank = ahead.byte_ == 0 || std::string_view(" \t\n").find(text_[ahead.byte_ - 1]) != std::string_view::npos;
    while (ahead.byte_ < text_.size()) {
      char c = text_[ahead.byte_];
      if (c == '#' && after_blank) {
        while (ahead.byte_ < text_.size() && text_[ahead.byte_] != '\n') ahead.step();
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ahead.step();
        after_blank = true;
      } else {
        break;
      }
    }
    YAML::Mark m = ahead.mark();
    if (ahead.byte_ == text_.size()) m.column = 0;
    std::tie(byte_, characters_, line_, line_start_) = saved;
    return m;
  }
  bool at_end(const YAML::Mark& m) const { return static_cast<size_t>(m.pos) >= text_.size(); }

 private:
  std::string_view text_;
  // Each line's first byte, and the end of the ASCII bytes it starts with.
  struct Line {
    size_t start = 0, ascii_end = 0;
  };
  std::vector<Line> lines_;
  size_t byte_ = 0, characters_ = 0, line_ = 0, line_start_ = 0;

  void find_lines() {
    for (size_t start = 0;;) {
      const void* line_feed = start < text_.size() ? std::memchr(text_.data() + start, '\n', text_.size() - start) : nullptr;
      size_t end = line_feed ? static_cast<size_t>(static_cast<const char*>(line_feed) - text_.data()) : text_.size();
      size_t ascii_end = start;
      for (; ascii_end + 8 <= end; ascii_end += 8)
        if (byte_words::any_high(byte_words::load(text_.data() + ascii_end))) break;
      while (ascii_end < end && static_cast<unsigned char>(text_[ascii_end]) < 0x80) ++ascii_end;
      lines_.push_back({start, ascii_end});
      if (!line_feed) return;
      start = end + 1;
    }
  }

  void rewind() { byte_ = characters_ = line_ = line_start_ = 0; }
  // Eight ASCII bytes without a line feed are eight characters on the same line.
  bool skip_eight() {
    if (byte_ + 8 > text_.size()) return false;
    const uint64_t bytes = byte_words::load(text_.data() + byte_);
    if (byte_words::any_high(bytes) || byte_words::any_equal(bytes, '\n')) return false;
    byte_ += 8;
    characters_ += 8;
    return true;
  }
  void step() {
    unsigned char c = static_cast<unsigned char>(text_[byte_]);
    byte_ += c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;  // the text is valid UTF-8
    ++characters_;
    if (c == '\n') ++line_, line_start_ = byte_;
  }
  YAML::Mark mark() const {
    YAML::Mark m;
    m.pos = static_cast<int>(byte_);
    m.line = static_cast<int>(line_);
    m.column = static_cast<int>(byte_ - line_start_);
    return m;
  }
};

// libyaml's parser and event, freed on every way out.
struct LibyamlParser {
  yaml_parser_t parser;
  explicit LibyamlParser(std::string_view text) {
    if (!yaml_parser_initialize(&parser)) throw std::bad_alloc();
    const char* data = text.empty() ? "" : text.data();  // libyaml asserts a non-null input
    yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(data), text.size());
    yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
  }
  ~LibyamlParser() { yaml_parser_delete(&parser); }
  LibyamlParser(const LibyamlParser&) = delete;
  LibyamlParser& operator=(const LibyamlParser&) = delete;
};
struct LibyamlEvent {
  yaml_event_t event{};
  ~LibyamlEvent() { yaml_event_delete(&event); }
};

// A collection being read: the character that closes it (none for a block collection), and its mark.
struct OpenCollection {
  char closer = 0;
  YAML::Mark mark;
};

// What libyaml could not read, worded as it words it, with where the construct it was in began and
// what it found instead; a text that ends inside a flow collection is named as such.
Refused parse_error(const yaml_parser_t& parser, MarkCounter& marks, std::string_view text,
                    const std::vector<OpenCollection>& open) {
  // The context comes first in the text: converted first, the marks keep coming in order.
  std::optional<YAML::Mark> context;
  if (parser.context) context = marks.at_character(parser.context_mark.index);
  YAML::Mark where = marks.at_character(parser.problem_mark.index);
  bool at_end = marks.at_end(where);
  auto flow = std::find_if(open.rbegin(), open.rend(), [](const OpenCollection& c) { return c.closer != 0; });
  if (at_end && flow != open.rend())
    return Refused{where, fmt::format("the text ends before the '{}' that closes the flow {} at line {}, column {}", flow->closer,
                                      flow->closer == ']' ? "sequence" : "mapping", flow->mark.line + 1, flow->mark.column + 1)};
  std::string message = parser.problem ? parser.problem : "not YAML";
  if (context) message += fmt::format(" {} that starts at line {}", parser.context, context->line + 1);
  std::string_view rest = at_end ? "" : text.substr(static_cast<size_t>(where.pos));
  if (rest.starts_with('\t') && message.find("tab") == std::string::npos) {
    // libyaml takes a tab on an otherwise blank line for indentation, where YAML 1.2 lets it be.
    bool blank_line = rest.find_first_not_of(" \t") == std::string_view::npos || rest[rest.find_first_not_of(" \t")] == '\n' ||
                      rest[rest.find_first_not_of(" \t")] == '\r';
    message += blank_line ? " (found a tab on a blank line: remove it; YAML indents with spaces)" : " (found a tab: YAML indents with spaces)";
  } else if (parser.error == YAML_PARSER_ERROR && !rest.empty()) {
    size_t length = 1;
    while (length < rest.size() && (static_cast<unsigned char>(rest[length]) & 0xc0) == 0x80) ++length;
    message += fmt::format(" (found '{}')", escape_text(rest.substr(0, length)));
  }
  return Refused{where, message};
}

bool is_null_text(std::string_view s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

// Reads `text` with libyaml and gives each event, in yaml-cpp's terms, to `strict` and `tree`.
void read_events(std::string_view text, StrictEvents& strict, YamlDocumentBuilder& tree) {
  LibyamlParser reader(text);
  MarkCounter marks(text);
  std::map<std::string, YAML::anchor_t, std::less<>> anchor_numbers;
  YAML::anchor_t last_anchor = 0;
  auto define_anchor = [&](const yaml_char_t* name) -> YAML::anchor_t {
    if (!name) return 0;
    anchor_numbers.insert_or_assign(reinterpret_cast<const char*>(name), ++last_anchor);
    return last_anchor;
  };
  std::vector<OpenCollection> open;
  auto tag_of = [](const yaml_char_t* tag, bool plain) -> std::string_view {
    return tag ? reinterpret_cast<const char*>(tag) : plain ? "?" : "!";
  };
  for (;;) {
    LibyamlEvent e;
    if (!yaml_parser_parse(&reader.parser, &e.event)) {
      if (reader.parser.error == YAML_MEMORY_ERROR) throw std::bad_alloc();  // not the text's fault: no position
      throw parse_error(reader.parser, marks, text, open);
    }
    const yaml_event_t& ev = e.event;
    YAML::Mark mark = marks.at(ev.start_mark);
    switch (ev.type) {
      case YAML_STREAM_END_EVENT:
        return;
      case YAML_DOCUMENT_START_EVENT:
        strict.on_document_start(mark);
        break;
      case YAML_SCALAR_EVENT: {
        const auto& s = ev.data.scalar;
        std::string_view value(reinterpret_cast<const char*>(s.value), s.length);
        bool plain = s.style == YAML_PLAIN_SCALAR_STYLE;
        if (!s.tag && plain && is_null_text(value)) {
          // An empty value with no anchor or tag: libyaml marks the end of the ':' or '-' before it.
          if (value.empty() && !s.anchor && ev.start_mark.index == ev.end_mark.index) mark = marks.next_token();
          YAML::anchor_t anchor = define_anchor(s.anchor);
          strict.on_null(mark, anchor);
          tree.on_null(mark, anchor);
        } else {
          YAML::anchor_t anchor = define_anchor(s.anchor);
          std::string_view tag = tag_of(s.tag, plain);
          strict.on_scalar(mark, anchor, value, tag.size());
          tree.on_scalar(mark, anchor, tag, value);
        }
        break;
      }
      case YAML_ALIAS_EVENT: {
        auto it = anchor_numbers.find(reinterpret_cast<const char*>(ev.data.alias.anchor));
        strict.on_alias(mark, it == anchor_numbers.end() ? 0 : it->second);  // refuses an unknown one
        tree.on_alias(it->second);
        break;
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        bool is_map = ev.type == YAML_MAPPING_START_EVENT;
        const yaml_char_t* anchor_name = is_map ? ev.data.mapping_start.anchor : ev.data.sequence_start.anchor;
        const yaml_char_t* tag = is_map ? ev.data.mapping_start.tag : ev.data.sequence_start.tag;
        bool flow = is_map ? ev.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE
                           : ev.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE;
        YAML::anchor_t anchor = define_anchor(anchor_name);
        std::string_view tag_text = tag_of(tag, true);
        strict.on_collection_start(mark, anchor, is_map, tag_text.size());
        open.push_back({flow ? (is_map ? '}' : ']') : '\0', mark});
        tree.on_collection_start(mark, anchor, tag_text, is_map,
                                 flow ? YAML::EmitterStyle::Flow : YAML::EmitterStyle::Block);
        break;
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        strict.on_collection_end();
        tree.on_collection_end();
        open.pop_back();
        break;
      default:  // stream start, document end
        break;
    }
  }
}

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

std::string_view without_byte_order_mark(std::string_view text) {
  constexpr std::string_view kByteOrderMark = "\xef\xbb\xbf";
  return text.starts_with(kByteOrderMark) ? text.substr(kByteOrderMark.size()) : text;
}
std::optional<BadCharacter> find_invalid_utf8(std::string_view text) { return find_bad_character(text, false); }

std::optional<BadCharacter> find_control_character(std::string_view value) {
  for (size_t i = 0; i < value.size();) {
    i = skip_printable_ascii(value, i);
    if (i == value.size()) break;
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

std::string_view YamlNode::Tag() const {
  if (!document_) return {};
  const YamlDocument::Node& node = document_->nodes_[index_];
  return std::string_view(document_->text_).substr(node.tag, node.tag_size);
}

const YAML::Mark& YamlNode::Mark() const {
  static const YAML::Mark kNone = YAML::Mark::null_mark();
  return document_ ? document_->nodes_[index_].mark : kNone;
}

YamlNode YamlNode::operator[](size_t item) const {
  if (!IsSequence() || item >= size()) return {};
  return YamlNode(document_, document_->children_[document_->nodes_[index_].children + item]);
}

YamlNode YamlNode::operator[](std::string_view wanted) const {
  for (size_t entry = 0; entry < size(); ++entry)
    if (YamlNode k = key(entry); k.IsScalar() && k.Scalar() == wanted) return value(entry);
  return {};
}

// yaml-cpp's tree of a YamlDocument: the same nodes (set in the order yaml-cpp's NodeBuilder sets
// them), an alias's node shared as YAML::Load shares it.
class YamlCppTreeBuilder {
 public:
  explicit YamlCppTreeBuilder(const YamlDocument& document)
      : document_(document), memory_(std::make_shared<YAML::detail::memory_holder>()), made_(document.nodes_.size()) {}

  // A null node when the text held no document, as YAML::Load returns.
  YAML::Node root() {
    if (document_.root_ == 0) return YAML::Node();
    return YAML::as_if<YamlTreeRoot, void>::node(node_of(document_.root_), memory_);
  }

 private:
  const YamlDocument& document_;
  YAML::detail::shared_memory_holder memory_;
  std::vector<YAML::detail::node*> made_;  // per index of the document: an alias is the node it names

  YAML::detail::node& node_of(uint32_t index) {  // recursion as deep as the limits let collections nest
    if (made_[index]) return *made_[index];
    const YamlDocument::Node& from = document_.nodes_[index];
    YAML::detail::node& node = memory_->create_node();
    made_[index] = &node;
    node.set_mark(from.mark);
    std::string_view text = document_.text_;
    std::string tag(text.substr(from.tag, from.tag_size));
    if (from.type == YAML::NodeType::Null) {
      node.set_null();
    } else if (from.type == YAML::NodeType::Scalar) {
      node.set_scalar(std::string(text.substr(from.text, from.text_size)));
      node.set_tag(tag);
    } else {
      node.set_type(from.type);
      node.set_tag(tag);
      node.set_style(from.style);
      for (uint32_t i = 0; i < from.count; ++i) {
        YAML::detail::node& child = node_of(document_.children_[from.children + i]);
        if (from.type == YAML::NodeType::Sequence) node.push_back(child, memory_);
        else if (i % 2 == 1) node.insert(node_of(document_.children_[from.children + i - 1]), child, memory_);
      }
    }
    return node;
  }
};

YamlDocument read_strict_yaml(std::string_view whole, const std::string& file, const YamlLimits& limits) {
  // Positions count from the character after a byte order mark, as an editor that hides it shows them.
  const std::string_view text = without_byte_order_mark(whole);
  auto refuse = [&](TextPosition position, std::string message) {
    return YamlError(file, {YamlProblem{position, std::move(message)}});
  };
  if (auto bad = find_bad_yaml_character(whole))
    throw refuse(text_position(text, bad->offset - (whole.size() - text.size())), bad->description + " (a YAML file is UTF-8 text)");
  if (auto ambiguous = find_ambiguous_line_break(text)) throw refuse(text_position(text, ambiguous->offset), ambiguous->description);

  StrictEvents events(limits);
  YamlDocumentBuilder tree(text.size());
  try {
    read_events(text, events, tree);
  } catch (const Refused& r) {
    throw refuse(yaml_position(r.mark), r.message);
  }
  if (!events.duplicate_keys.empty()) throw YamlError(file, std::move(events.duplicate_keys));
  return tree.take();
}

YAML::Node load_strict_yaml(std::string_view text, const std::string& file, const YamlLimits& limits) {
  return YamlCppTreeBuilder(read_strict_yaml(text, file, limits)).root();
}

}  // namespace p2paudit
