// SPDX-License-Identifier: GPL-2.0-or-later
// What git reads as structure in a patch mail, from git's own sources (git/git, master of
// 2026-08-20, commit 1a3e64c6c4a6):
//   builtin/mailsplit.c is_from_line(): a line starting "From " that ends in something like a date
//     starts the next message of the mbox; with --patch-format=mboxrd, is_gtfrom() takes one '>'
//     off any ">...>From " line, so a quoted line does not come back as written.
//   mailinfo.c patchbreak(): the message ends at a line starting "diff -" or "Index: ", or "---"
//     followed by a space and a non-space ("--- a/file") or by nothing but whitespace.
//   mailinfo.c is_scissors_line(): with --scissors (or mailinfo.scissors) everything above a line
//     such as "-- >8 --" is dropped: a line with a mark (">8", "8<", ">%", "%<"), at least 8
//     visible columns, where dashes, marks and the spaces between them (the perforation) are more
//     than a third of the visible width, and those spaces less than half of the perforation.
//   mailinfo.c check_inbody_header(), is_inbody_header(): at the top of the body, "From:",
//     "Subject:", "Date:" (any case) and "[PATCH] " replace the mail's headers, ">From " shaped as
//     format-patch's separator is dropped, and a line starting with whitespace continues the
//     in-body header above it.
//   trailer.c find_separator(): "Token: value" (letters, digits and '-', optional blanks, then the
//     separator ':') is a trailer where git looks for them (interpret-trailers, am -s, commit -s).
//   builtin/am.c parse_mail(): the message is passed through strbuf_stripspace(): trailing
//     whitespace of each line dropped, runs of blank lines made one, none first or last.
// The forms here are a superset where that keeps the rule short ("---" followed by anything, every
// "From " line, "[PATCH]" anywhere): a line that is text to git but not to this rule is only
// indented. A line that starts with whitespace is never one of the forms; since no in-body header
// survives, it has nothing to continue either.
#include "p2paudit/fleet/git_text.h"

#include <algorithm>
#include <cctype>

namespace p2paudit::fleet {

namespace {

// git's own isspace (ctype.c): space, tab, line feed, carriage return, and nothing else.
bool git_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool starts(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool is_mark(std::string_view line, size_t at) {
  std::string_view two = line.substr(at, 2);
  return two == ">8" || two == "8<" || two == ">%" || two == "%<";
}

// git mailinfo's measure of a scissors line (the header comment), for the line as git reads it:
// with its line feed, which counts as a space of the perforation when one is open.
bool scissors_measure(std::string_view line) {
  size_t marks = 0, perforation = 0, gaps = 0;
  bool in_perforation = false;
  size_t first = std::string_view::npos, last = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (git_space(line[i])) {
      if (in_perforation) ++perforation, ++gaps;
      continue;
    }
    if (first == std::string_view::npos) first = i;
    last = i;  // a mark counts from its first character, as in git
    if (line[i] == '-') {
      in_perforation = true;
      ++perforation;
    } else if (is_mark(line, i)) {
      in_perforation = true;
      perforation += 2;
      marks += 2;
      ++i;
    } else {
      in_perforation = false;
    }
  }
  size_t visible = first == std::string_view::npos ? 0 : last - first + 1;
  return marks > 0 && visible >= 8 && visible < perforation * 3 && gaps * 2 < perforation;
}

bool scissors_line(std::string_view line) {
  return scissors_measure(std::string(line) + "\n") || scissors_measure(line);
}

// A trailer token at the start: trailer.c find_separator() with git's default separator ':'.
bool trailer_start(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '-')) ++i;
  if (i == 0) return false;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  return i < line.size() && line[i] == ':';
}

GitLineForm start_form(std::string_view line) {
  std::string_view unquoted = line.substr(std::min(line.find_first_not_of('>'), line.size()));
  if (starts(unquoted, "From ")) return GitLineForm::kMboxFrom;
  if (starts(line, "---") || starts(line, "diff -") || starts(line, "Index: ")) return GitLineForm::kPatchBreak;
  if (starts(line, "[PATCH]") && (line.size() == 7 || git_space(line[7]))) return GitLineForm::kInBodyHeader;
  if (trailer_start(line)) return GitLineForm::kTrailer;
  return GitLineForm::kText;
}

std::string without_trailing_space(std::string_view line) {
  size_t end = line.size();
  while (end > 0 && git_space(line[end - 1])) --end;
  return std::string(line.substr(0, end));
}

// Every mark split by a space: the words stay, the line is no longer a scissors line (a split
// never makes a new mark: the space sits between the two characters that were one).
std::string unscissored(std::string_view line) {
  if (!scissors_line(line)) return std::string(line);
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    out += line[i];
    if (is_mark(line, i)) out += ' ';
  }
  return out;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace

const char* to_string(GitLineForm form) {
  switch (form) {
    case GitLineForm::kText: return "text";
    case GitLineForm::kMboxFrom: return "an mbox From line";
    case GitLineForm::kPatchBreak: return "a patch break";
    case GitLineForm::kScissors: return "a scissors line";
    case GitLineForm::kInBodyHeader: return "an in-body header";
    case GitLineForm::kTrailer: return "a trailer";
  }
  return "text";
}

GitLineForm git_line_form(std::string_view line) {
  GitLineForm form = start_form(line);
  if (form == GitLineForm::kText && scissors_line(line)) return GitLineForm::kScissors;
  return form;
}

bool may_start_git_line(std::string_view text) { return start_form(text) == GitLineForm::kText; }

std::string git_text_line(std::string_view line) {
  std::string out = unscissored(line);
  if (start_form(out) != GitLineForm::kText) out.insert(0, "  ");
  return out;
}

std::string git_text_body(std::string_view body) {
  std::string out;
  bool blank_pending = false;
  for (std::string_view raw : lines_of(body)) {
    std::string line = git_text_line(without_trailing_space(raw));
    if (line.empty()) {
      blank_pending = !out.empty();
      continue;
    }
    if (blank_pending) out += '\n';
    blank_pending = false;
    out += line + '\n';
  }
  return out;
}

std::string git_trailer_block(const std::vector<std::string>& trailers) {
  std::string out;
  for (const auto& t : trailers)
    for (std::string_view line : lines_of(t)) out += without_trailing_space(unscissored(line)) + '\n';
  return out;
}

std::string git_header_text(std::string_view value) {
  const std::string line = unscissored(value);
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    out += line[i];
    if (line[i] == '=' && i + 1 < line.size() && line[i + 1] == '?') out += ' ';
  }
  return out;
}

}  // namespace p2paudit::fleet
