// SPDX-License-Identifier: GPL-2.0-or-later
// YAML from strangers (rule files, --kernel-rules) read strictly before anything is built from it.
// A YAML loader builds a document whatever it holds: aliases that expand a kilobyte into billions of
// nodes, a silently ignored second document, the last of two equal keys. load_strict_yaml() reads
// the text once with libyaml, refuses those as its events come, and builds from the same events the
// yaml-cpp tree (nodes, tags, marks) that YAML::Load would, so the loaders see one small, unambiguous
// tree. It is shared by the kernel-rules and the policy loaders, which must be equally strict.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "p2paudit/errors.h"

namespace p2paudit {

// A place in a text file, 1-based, as every "FILE:LINE:COLUMN: message" names it.
struct TextPosition {
  int line = 1;
  int column = 1;
};

// yaml-cpp marks are 0-based and -1 when unknown (an empty document): unknown is the file's start.
TextPosition yaml_position(const YAML::Mark& mark);
// The line and column of a byte offset (columns count bytes, as yaml-cpp's do).
TextPosition text_position(std::string_view text, size_t offset);

// "FILE:LINE:COLUMN", the form compilers print and editors jump to; the one formatter of positions
// in rule files. The file name is shown as escape_text() does, since it may come from a stranger.
std::string format_position(std::string_view file, TextPosition position);
std::string format_position(std::string_view file, const YAML::Mark& mark);

// The first byte of `text` that is not valid UTF-8, or that is a character YAML does not allow in a
// stream (C0 and C1 controls other than tab, line feed, carriage return and NEL; U+FFFE, U+FFFF),
// or a byte order mark (U+FEFF) anywhere but at the start.
// yaml-cpp takes 0x04 for the end of input and reads on past invalid bytes, so both are refused.
struct BadCharacter {
  size_t offset = 0;
  std::string description;  // "invalid UTF-8 byte 0xff", "control character U+0004"
};
std::optional<BadCharacter> find_bad_yaml_character(std::string_view text);
// `text` after its leading UTF-8 byte order mark, if it has one (editors on some systems write one):
// what read_strict_yaml() reads, and what the positions of its nodes and messages count from.
std::string_view without_byte_order_mark(std::string_view text);
// The same for JSON text: invalid UTF-8 only (JSON itself refuses control characters in strings).
std::optional<BadCharacter> find_invalid_utf8(std::string_view text);

// The first control character of a scalar's value other than tab and line feed: YAML escapes
// ("\e[2J") can put any of them in a value that is later printed to a terminal.
std::optional<BadCharacter> find_control_character(std::string_view value);

struct YamlProblem {
  TextPosition position;
  std::string message;
};

// what() is "FILE:LINE:COLUMN: message" per problem, one per line.
class YamlError : public InputError {
 public:
  YamlError(std::string file, std::vector<YamlProblem> problems);
  const std::string& file() const { return file_; }
  const std::vector<YamlProblem>& problems() const { return problems_; }

 private:
  std::string file_;
  std::vector<YamlProblem> problems_;
};

// What one rule file may make the reader build. The rule files shipped are far below these.
// Nodes and bytes are counted as a loader that copies what it reads materialises them: an alias
// counts as the whole node it names, its scalars' bytes included, wherever it is used. Counting
// nodes alone let a 1 MB scalar named by thousands of aliases in a 4 MiB file cost gigabytes.
struct YamlLimits {
  size_t max_nodes = 100000;  // every node, an alias counting as the whole node it names
  // The bytes of every scalar (a value or a key) and tag, an alias counting those of the node it
  // names: four times the largest rule file (kMaxRuleFileBytes), so a text may be reused a few times.
  size_t max_bytes = 16u << 20;
  int max_depth = 64;         // collections nested in collections
  int max_alias_depth = 8;    // aliases to nodes that hold aliases to nodes that hold aliases...
};

class YamlDocument;

// A node of a YamlDocument, as the loaders read it: a handle (the document and an index), cheap to
// copy, valid while its document lives. A lookup that finds nothing gives an invalid node (false).
// The names are yaml-cpp's, and every answer is what the same node of load_strict_yaml()'s tree gives.
class YamlNode {
 public:
  YamlNode() = default;
  explicit operator bool() const { return document_ != nullptr; }

  YAML::NodeType::value Type() const;
  bool IsNull() const { return Type() == YAML::NodeType::Null; }
  bool IsScalar() const { return Type() == YAML::NodeType::Scalar; }
  bool IsSequence() const { return Type() == YAML::NodeType::Sequence; }
  bool IsMap() const { return Type() == YAML::NodeType::Map; }
  std::string_view Scalar() const;  // "" unless a scalar
  std::string_view Tag() const;     // "?" for a plain scalar without a tag, "!" for a quoted one
  const YAML::Mark& Mark() const;

  size_t size() const;                     // a sequence's items, a mapping's entries; else 0
  YamlNode operator[](size_t item) const;  // a sequence's item
  YamlNode key(size_t entry) const;        // a mapping's entry
  YamlNode value(size_t entry) const;
  // The value of the mapping's entry whose key is the scalar `key` (yaml-cpp's const lookup).
  YamlNode operator[](std::string_view key) const;

  // A sequence's items in order (for a range-for over the node, which outlives the loop).
  class Iterator {
   public:
    YamlNode operator*() const { return (*sequence_)[at_]; }
    Iterator& operator++() { return ++at_, *this; }
    bool operator!=(const Iterator& o) const { return at_ != o.at_; }

   private:
    friend class YamlNode;
    Iterator(const YamlNode* sequence, size_t at) : sequence_(sequence), at_(at) {}
    const YamlNode* sequence_;
    size_t at_;
  };
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, IsSequence() ? size() : 0}; }

 private:
  friend class YamlDocument;
  YamlNode(const YamlDocument* document, uint32_t index) : document_(document), index_(index) {}
  const YamlDocument* document_ = nullptr;
  uint32_t index_ = 0;
};

// A document read strictly (read_strict_yaml()): nodes in one array, a collection's children in
// another, scalars in one text. An alias is the node it names, shared as yaml-cpp shares it.
class YamlDocument {
 public:
  // The document's node; a null node when the text held no document, as YAML::Load returns.
  YamlNode root() const { return YamlNode(this, root_); }

 private:
  friend class YamlNode;
  friend class YamlDocumentBuilder;
  friend class YamlCppTreeBuilder;
  struct Node {
    YAML::NodeType::value type = YAML::NodeType::Null;
    YAML::EmitterStyle::value style = YAML::EmitterStyle::Default;
    YAML::Mark mark;
    uint32_t text = 0, text_size = 0;  // a scalar's value in text_
    uint32_t tag = 0, tag_size = 0;    // the tag in text_
    uint32_t children = 0, count = 0;  // in children_: a sequence's items; a mapping's keys and values, alternating
  };
  std::vector<Node> nodes_ = {Node{.mark = YAML::Mark::null_mark()}};  // nodes_[0]: no document (root_ 0)
  std::vector<uint32_t> children_;
  std::string text_;
  uint32_t root_ = 0;
};

// The accessors the loaders call for every node, inline.
inline YAML::NodeType::value YamlNode::Type() const {
  return document_ ? document_->nodes_[index_].type : YAML::NodeType::Undefined;
}
inline std::string_view YamlNode::Scalar() const {
  if (!IsScalar()) return {};
  const YamlDocument::Node& node = document_->nodes_[index_];
  return std::string_view(document_->text_).substr(node.text, node.text_size);
}
inline size_t YamlNode::size() const {
  if (!document_) return 0;
  const YamlDocument::Node& node = document_->nodes_[index_];
  return node.type == YAML::NodeType::Map ? node.count / 2 : node.type == YAML::NodeType::Sequence ? node.count : 0;
}
inline YamlNode YamlNode::key(size_t entry) const {
  if (!IsMap() || entry >= size()) return {};
  return YamlNode(document_, document_->children_[document_->nodes_[index_].children + 2 * entry]);
}
inline YamlNode YamlNode::value(size_t entry) const {
  if (!IsMap() || entry >= size()) return {};
  return YamlNode(document_, document_->children_[document_->nodes_[index_].children + 2 * entry + 1]);
}

// Reads `text`, the content of `file`, strictly as load_strict_yaml() does (the same refusals with
// the same messages), into a YamlDocument: the loaders' reader, without yaml-cpp's nodes.
YamlDocument read_strict_yaml(std::string_view text, const std::string& file, const YamlLimits& limits = {});

// Parses `text`, the content of `file`, into its one document (a null node when the text holds
// none). A leading byte order mark is skipped. Throws YamlError when the text is not UTF-8 or not YAML, holds a line break that YAML 1.1
// and 1.2 read differently (NEL, LS, PS, a CR without LF), holds a second document, exceeds
// `limits`, or has an alias to a node that contains it; and, after reading the whole document,
// with every mapping key that repeats an earlier key of the same mapping.
YAML::Node load_strict_yaml(std::string_view text, const std::string& file, const YamlLimits& limits = {});

}  // namespace p2paudit
