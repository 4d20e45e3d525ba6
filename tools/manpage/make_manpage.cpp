// SPDX-License-Identifier: GPL-2.0-or-later
// Build-time tool: writes the roff man page p2paudit(1) from the usage text (what --help prints)
// and the page's own source, so the two cannot drift apart.
//
//   make_manpage USAGE.txt PAGE.txt VERSION OUT.1
//
// Both inputs are blocks separated by blank lines. In the usage text the first block is the
// synopsis; any other block may start with a heading line ("Commands:"); a block whose lines are
// indented by two spaces is a definition list: "  TERM  DESCRIPTION" (two or more spaces apart),
// or "  TERM" alone with the description on the lines below, indented further.
// The page source adds "# SECTION" and "## Subsection" lines, paragraphs, definition lists as
// above, and "@usage HEADING" lines that place the usage block starting with HEADING (the heading
// itself dropped) or the synopsis ("@usage synopsis"). Every usage block must be placed exactly
// once, so a block added to --help is never missing from the page. `word` is set in bold.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Line {
  std::string text;
  std::string where;  // FILE:LINE, for messages
};
using Block = std::vector<Line>;

struct BuildError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<Line> read_lines(const std::string& path) {
  constexpr std::streamsize kMaxBytes = 1 << 20;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BuildError(path + ": cannot open");
  std::string content(kMaxBytes + 1, '\0');
  in.read(content.data(), kMaxBytes + 1);
  content.resize(static_cast<size_t>(in.gcount()));
  if (content.size() > static_cast<size_t>(kMaxBytes)) throw BuildError(path + ": larger than 1 MiB");
  std::vector<Line> lines;
  std::istringstream stream(content);
  std::string text;
  for (int number = 1; std::getline(stream, text); ++number) {
    std::string where = path + ":" + std::to_string(number);
    for (char c : text)
      // groff reads ASCII without a preprocessor; anything else would render as garbage.
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e)
        throw BuildError(where + ": only printable ASCII is allowed (no tabs)");
    if (!text.empty() && text.back() == ' ') throw BuildError(where + ": trailing space");
    lines.push_back({text, where});
  }
  return lines;
}

std::vector<Block> split_blocks(const std::vector<Line>& lines) {
  std::vector<Block> blocks(1);
  for (const auto& line : lines) {
    if (line.text.empty()) {
      if (!blocks.back().empty()) blocks.emplace_back();
    } else {
      blocks.back().push_back(line);
    }
  }
  if (blocks.back().empty()) blocks.pop_back();
  return blocks;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// Text for a roff text line: backslashes and minus signs escaped, `code` in bold.
std::string escape(const std::string& text, const std::string& where) {
  std::string out;
  bool in_code = false;
  for (char c : text) {
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else if (c == '`') {
      out += in_code ? "\\fR" : "\\fB";
      in_code = !in_code;
    } else out += c;
  }
  if (in_code) throw BuildError(where + ": unbalanced `");
  // A line starting with . or ' would be a roff request.
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out = "\\&" + out;
  return out;
}

// A synopsis or a definition's term: literal words bold, placeholders (no lower-case letter:
// FILE, P, X.Y[.Z]) italic, words inside parentheses and the punctuation between words roman.
std::string format_term(const std::string& term, const std::string& where) {
  std::string out;
  int depth = 0;
  size_t i = 0;
  auto is_separator = [](char c) { return c == ' ' || c == '[' || c == ']' || c == '|' || c == ',' || c == '(' || c == ')'; };
  while (i < term.size()) {
    if (is_separator(term[i])) {
      if (term[i] == '(') ++depth;
      if (term[i] == ')') --depth;
      out += term[i++];
      continue;
    }
    size_t end = i;
    while (end < term.size() && !is_separator(term[end])) ++end;
    std::string word = term.substr(i, end - i);
    bool has_lower = false, has_upper = false;
    for (char c : word) {
      has_lower |= c >= 'a' && c <= 'z';
      has_upper |= c >= 'A' && c <= 'Z';
    }
    std::string font = depth > 0 ? "" : (has_upper && !has_lower) ? "\\fI" : "\\fB";
    out += font + escape(word, where) + (font.empty() ? "" : "\\fR");
    i = end;
  }
  return !out.empty() && (out[0] == '.' || out[0] == '\'') ? "\\&" + out : out;
}

std::string trim_left(const std::string& s) { return s.substr(std::min(s.find_first_not_of(' '), s.size())); }

// "  TERM  DESCRIPTION" or "  TERM" followed by indented description lines.
void write_definitions(std::ostream& out, const Block& block) {
  for (const auto& line : block) {
    if (!starts_with(line.text, "  ")) throw BuildError(line.where + ": a definition list's lines are indented");
    bool new_term = line.text.size() > 2 && line.text[2] != ' ';
    std::string rest = line.text.substr(2);
    if (!new_term) {
      out << escape(trim_left(rest), line.where) << "\n";
      continue;
    }
    size_t gap = rest.find("  ");
    out << ".TP\n" << format_term(rest.substr(0, gap), line.where) << "\n";
    if (gap != std::string::npos) out << escape(trim_left(rest.substr(gap)), line.where) << "\n";
  }
}

void write_block(std::ostream& out, const Block& block, bool* paragraph_open) {
  if (block.empty()) return;
  if (starts_with(block.front().text, "  ")) {
    write_definitions(out, block);
    *paragraph_open = false;  // the next paragraph must leave the list's indentation
    return;
  }
  if (*paragraph_open) out << ".PP\n";
  for (const auto& line : block) out << escape(line.text, line.where) << "\n";
  *paragraph_open = true;
}

struct Usage {
  Block synopsis;
  std::vector<Block> blocks;
  std::vector<bool> placed;
};

Usage read_usage(const std::string& path) {
  auto blocks = split_blocks(read_lines(path));
  if (blocks.empty()) throw BuildError(path + ": empty");
  Usage usage{blocks.front(), {blocks.begin() + 1, blocks.end()}, {}};
  usage.placed.assign(usage.blocks.size(), false);
  return usage;
}

// The usage block starting with heading, the heading removed (a heading alone on its line goes).
Block take_usage_block(Usage& usage, const std::string& heading, const std::string& where) {
  for (size_t i = 0; i < usage.blocks.size(); ++i) {
    Block block = usage.blocks[i];
    if (!starts_with(block.front().text, heading)) continue;
    if (usage.placed[i]) throw BuildError(where + ": usage block '" + heading + "' placed twice");
    usage.placed[i] = true;
    std::string rest = trim_left(block.front().text.substr(heading.size()));
    if (rest.empty()) block.erase(block.begin());
    else block.front().text = rest;
    return block;
  }
  throw BuildError(where + ": the usage text has no block starting with '" + heading + "'");
}

void write_page(std::ostream& out, Usage& usage, const std::string& page_path, const std::string& version) {
  out << ".\\\" Generated by tools/manpage/make_manpage.cpp from tools/p2paudit/usage.txt and\n"
      << ".\\\" tools/p2paudit/manpage.txt: edit those.\n"
      << ".TH P2PAUDIT 1 \"\" \"p2paudit " << version << "\" \"User Commands\"\n"
      << ".nh\n.ad l\n";
  bool synopsis_placed = false, paragraph_open = false;
  for (const auto& block : split_blocks(read_lines(page_path))) {
    Block text;  // the lines between directives, written as one block
    auto flush = [&] {
      write_block(out, text, &paragraph_open);
      text.clear();
    };
    for (const auto& line : block) {
      if (starts_with(line.text, "## ") || starts_with(line.text, "# ")) {
        flush();
        out << (line.text[1] == '#' ? ".SS " : ".SH ") << escape(trim_left(line.text.substr(line.text.find(' '))), line.where)
            << "\n";
        paragraph_open = false;
      } else if (starts_with(line.text, "@usage ")) {
        flush();
        std::string heading = line.text.substr(7);
        if (heading == "synopsis") {
          if (synopsis_placed) throw BuildError(line.where + ": the synopsis is placed twice");
          synopsis_placed = true;
          for (const auto& l : usage.synopsis) out << format_term(l.text, l.where) << "\n.br\n";
          paragraph_open = true;
        } else {
          write_block(out, take_usage_block(usage, heading, line.where), &paragraph_open);
        }
      } else {
        text.push_back(line);
      }
    }
    flush();
  }
  if (!synopsis_placed) throw BuildError(page_path + ": no '@usage synopsis'");
  for (size_t i = 0; i < usage.blocks.size(); ++i)
    if (!usage.placed[i])
      throw BuildError(usage.blocks[i].front().where + ": this usage block is not placed in " + page_path +
                       " (add an '@usage' line)");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "make_manpage: usage: make_manpage USAGE.txt PAGE.txt VERSION OUT.1\n";
    return 2;
  }
  try {
    Usage usage = read_usage(argv[1]);
    std::ostringstream page;
    write_page(page, usage, argv[2], argv[3]);
    std::ofstream out(argv[4], std::ios::binary | std::ios::trunc);
    out << page.str();
    out.close();
    if (!out) throw BuildError(std::string(argv[4]) + ": cannot write");
  } catch (const BuildError& e) {
    std::cerr << "make_manpage: " << e.what() << "\n";
    std::remove(argv[4]);
    return 1;
  }
  return 0;
}
