// SPDX-License-Identifier: GPL-2.0-or-later
// The notes of the concise policy text, shared by `policy` and the audit's first screen: one note
// per distinct decision as a reader is told it, each warning once with the notes it fired in.
// Internal to the policy library.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "p2paudit/policy/evaluate.h"
#include "p2paudit/text_style.h"

namespace p2paudit::policy {

// "PEER", "HOST", "DENY".
const char* short_code(Action a);
// A grid cell's code: short_code(), with "?" when unknown facts leave the decision open ("HOST?").
std::string cell_code(Action a, bool certain);

inline Tone action_tone(Action a) {
  return a == Action::kPeer ? Tone::kGood : a == Action::kDeny ? Tone::kBad : Tone::kCaution;
}

// The grid: each cell the pair's action; with note, the footnote number of the pair's reasons.
class PolicyGrid {
 public:
  PolicyGrid(const std::vector<std::string>& labels, const TextStyle& style) : labels_(labels), style_(style) {
    for (const auto& l : labels) width_ = std::max(width_, l.size() + 2);
  }
  void set_note_width(size_t digits) { width_ = std::max(width_, 4 + digits + 2 + 2); }
  size_t cell_columns() const { return width_; }  // every cell's, the row labels' too
  std::string header() const {
    std::string row = fmt::format("{:<{}}", "", width_);
    for (const auto& l : labels_) row += fmt::format("{:<{}}", l, width_);
    return trimmed(row);
  }
  void start_row(std::string& buf, size_t r) const { buf += fmt::format("{:<{}}", labels_[r], width_); }
  void self(std::string& buf) const { buf += fmt::format("{:<{}}", "X", width_); }
  void cell(std::string& buf, Action a, size_t note, bool certain = true) const {
    std::string text = note ? fmt::format("{}[{}]", cell_code(a, certain), note) : cell_code(a, certain);
    buf += style_.paint(fmt::format("{:<{}}", text, width_), action_tone(a));
  }
  static void end_row(std::string& buf) {
    while (!buf.empty() && buf.back() == ' ') buf.pop_back();
    buf += '\n';
  }

 private:
  static std::string trimmed(std::string row) {
    end_row(row);
    return row;
  }
  const std::vector<std::string>& labels_;
  const TextStyle& style_;
  size_t width_ = 6;
};

inline constexpr const char* kGridLegend =
    "Rows are providers (whose memory is read or written), columns clients (which do the DMA).\n"
    "PEER = try peer-to-peer DMA, HOST = stage through host memory, DENY = refuse;\n"
    "HOST? or DENY? = unknown facts leave the decision open: the safe side is acted on";

// The findings a reader is told: those whose fix is not one already given (the decision's, or an
// earlier finding's: a kernel refusing because it lacks P2PDMA is the same problem twice). JSON
// lists them all.
std::vector<const FiredRule*> findings_to_tell(const Decision& d);

// The decisive unknown facts a pair's note names: all but kernel.config_p2pdma, which is the same
// for every pair and is told once, on the first screen's `kernel:` line.
std::vector<std::string> unknowns_to_tell(const Decision& d);
// settle_text() of these facts: each with how to learn it.
std::string settle_text_of(const std::vector<std::string>& facts);

// Whether `id` is one of the machine's advisories: told once for the machine, so not again among
// the pairs' warnings.
bool told_for_machine(const std::vector<FiredRule>& advisories, const std::string& id);

// The machine's advisories as `policy` tells them: a heading, then "[id] reason" and "  fix:" per
// advisory; "" when none holds.
std::string machine_advisories_text(const std::vector<FiredRule>& advisories);

// "host_staged (rule x, authority y)".
std::string group_heading(const DecisionGroup& g);

struct PolicyNote {
  std::string heading;                    // group_heading() of its first group
  Decision decision;                      // its first pair's, texts rendered
  size_t pairs = 0;
  std::vector<std::string> first_pairs;   // the first few, "gpu0 -> gpu1"
};

// A warning's text and the notes whose pairs it fired on.
struct PolicyWarning {
  std::string id;
  std::string reason;
  std::vector<size_t> notes;
  size_t pairs = 0;
};

// Notes are numbered from 1 in the order their first pair is counted. Memory grows with the
// number of decision groups, never with the pairs.
class NoteBook {
 public:
  static constexpr size_t kPairsNamed = 6;

  explicit NoteBook(PolicyEvaluator& evaluator) : evaluator_(evaluator) {}
  // The note (1-based) telling group g's decision.
  size_t note_of(size_t group);
  // Counts one pair of group g, named "provider -> client" while few are; returns its note.
  // Inline: every pair of the screen and of `policy` comes here, almost always for a known group.
  size_t count(size_t group, const std::string& provider, const std::string& client) {
    size_t n = group < note_of_group_.size() && note_of_group_[group] ? note_of_group_[group] : note_of(group);
    for (size_t w : warnings_of_group_[group]) ++warnings_[w].pairs;
    ++pairs_;
    PolicyNote& note = notes_[n - 1];
    if (++note.pairs <= kPairsNamed) note.first_pairs.push_back(provider + " -> " + client);
    return n;
  }

  const std::vector<PolicyNote>& notes() const { return notes_; }
  const std::vector<PolicyWarning>& warnings() const { return warnings_; }
  size_t pairs() const { return pairs_; }

  // why, fix, also (the findings, each with its fix) and the decisive unknown facts, each line
  // starting with indent: the text `policy` prints under a note.
  static std::string body(const Decision& d, const std::string& indent);

 private:
  PolicyEvaluator& evaluator_;
  std::vector<size_t> note_of_group_;  // 0: not yet seen
  std::vector<std::vector<size_t>> warnings_of_group_;
  std::map<std::string, size_t> note_by_text_;
  std::map<std::string, size_t> warning_by_text_;
  std::vector<PolicyNote> notes_;
  std::vector<PolicyWarning> warnings_;
  size_t pairs_ = 0;
};

}  // namespace p2paudit::policy
