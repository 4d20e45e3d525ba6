// SPDX-License-Identifier: GPL-2.0-or-later
// What may start a line of text handed to git (docs/security.md, "Patch text is git's text"): the
// one rule every line of a whitelist patch's message passes, whatever field it came from. git am
// reads some lines of a mail as structure, not text: git mailsplit cuts the mbox at a `From ` line,
// git mailinfo ends the message at a patch break (`---`, `diff -`, `Index: `), drops everything
// before a scissors line (`-- >8 --`, with --scissors or mailinfo.scissors), reads `From:`,
// `Subject:`, `Date:` and `[PATCH]` at the top of the body as in-body headers, and git's trailer
// code reads `Key: value` lines. A line of ours that git would read so is changed, visibly and
// keeping its words, into a line git keeps as text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace p2paudit::fleet {

enum class GitLineForm {
  kText,          // git keeps it as a line of the message
  kMboxFrom,      // "From " or ">From " (any number of '>'): an mbox message start, or its quoted form
  kPatchBreak,    // "---", "diff -", "Index: ": git mailinfo's patchbreak(), the message ends here
  kScissors,      // a scissors line: git mailinfo --scissors drops the message above it
  kInBodyHeader,  // "[PATCH] " (the other in-body headers, From: Subject: Date:, are trailer-shaped)
  kTrailer,       // "Key: value", "Key : value": a trailer token (git's trailer.c find_separator())
};
const char* to_string(GitLineForm form);

// The form git reads in one line (without its line feed): the first that applies, kText when none.
GitLineForm git_line_form(std::string_view line);
// Whether text may start a line, judged on the text that would follow the line start (a word and
// what comes after it): false for every form git reads at a line's start. A scissors line is a
// property of the whole line and is not judged here (git_text_line() handles it).
bool may_start_git_line(std::string_view text);

// The line as text git keeps: a scissors line's marks (">8", "8<", ">%", "%<") split by a space
// ("> 8"), then a line of any other form indented by two spaces. Everything else is unchanged.
std::string git_text_line(std::string_view line);
// A message body (its lines without the trailer block) as git am records it: every line
// git_text_line(), trailing spaces dropped, runs of blank lines made one, no blank line first or
// last (git am passes the message through strbuf_stripspace()).
std::string git_text_body(std::string_view body);
// The trailer block: lines the tool writes as trailers (Link:, Signed-off-by:), one a line, with a
// scissors line's marks split (a URL or a name from input could make one).
std::string git_trailer_block(const std::vector<std::string>& trailers);
// The value of a mail header the tool writes (Subject, the From name): git mailinfo decodes an RFC
// 2047 encoded word ("=?charset?q?...?=") in a header, which could turn input into other text and
// line feeds; "=?" becomes "= ?". A scissors line's marks are split as in the body: the subject
// is the first line of the commit message, which is also handed to git as a whole (git commit -F,
// a body pasted under another mail's scissors).
std::string git_header_text(std::string_view value);

}  // namespace p2paudit::fleet
