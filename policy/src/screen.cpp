// SPDX-License-Identifier: GPL-2.0-or-later
// The audit's first screen: the decision for every pair, said so that it fits a terminal.
#include <algorithm>
#include <array>
#include <map>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "decision_grid.h"
#include "notes.h"

namespace p2paudit::policy {

namespace {

// Where the clauses of a sentence end: before ", ", "; " or ": " outside parentheses and `code`,
// so a cut never leaves an aside or a command half-written.
std::vector<size_t> clause_ends(const std::string& s) {
  std::vector<size_t> out;
  int depth = 0;
  bool code = false;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    char c = s[i];
    if (c == '`') code = !code;
    else if (code) continue;
    else if (c == '(') ++depth;
    else if (c == ')' && depth > 0) --depth;
    else if (depth == 0 && s[i + 1] == ' ' && (c == ',' || c == ';' || c == ':')) out.push_back(i);
  }
  return out;
}

// The text without its parenthesised asides (" (Debian 7.2+, ...)"), which a short form can lose.
std::string without_asides(const std::string& s) {
  std::string out;
  int depth = 0;
  bool code = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '`' && depth == 0) code = !code;
    if (!code && c == '(') {
      if (depth++ == 0 && !out.empty() && out.back() == ' ') out.pop_back();
      continue;
    }
    if (!code && c == ')' && depth > 0) {
      --depth;
      continue;
    }
    if (depth == 0) out += c;
  }
  return out;
}

// `text` in at most `width` columns. What a reader needs first comes first in every rule's text,
// so the short form keeps the leading clauses: whole clauses that fit, else the text without its
// asides, else as many words as fit and "…". The full text is one command away (`policy`).
std::string shorten(const std::string& text, size_t width) {
  if (text_columns(text) <= width) return text;
  for (const std::string& t : {text, without_asides(text)}) {
    if (text_columns(t) <= width) return t;
    size_t best = 0;
    for (size_t end : clause_ends(t))
      if (text_columns(std::string_view(t).substr(0, end)) <= width) best = end;
    if (best && text_columns(std::string_view(t).substr(0, best)) * 3 >= width) return t.substr(0, best);
  }
  std::string t = without_asides(text);
  size_t cut = 0;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] == ' ' && text_columns(std::string_view(t).substr(0, i)) + 1 <= width) cut = i;
  if (cut == 0) {  // one long word: cut it at a code point
    for (size_t i = 0; i < t.size(); ++i)
      if ((t[i] & 0xc0) != 0x80 && text_columns(std::string_view(t).substr(0, i)) + 1 <= width) cut = i;
  }
  return t.substr(0, cut) + "…";
}

// A line of the screen: the prefix, then the text shortened to what is left of the width.
std::string line(const std::string& prefix, const std::string& text, size_t width) {
  size_t room = width > text_columns(prefix) + 10 ? width - text_columns(prefix) : 10;
  return prefix + shorten(text, room) + "\n";
}

// A note as the screen tells it.
struct ToldNote {
  std::string head;  // "PEER by nvlink (vendor-fabric)"
  std::string body;  // its why, fix, also and unknown lines
  Action action = Action::kHostStaged;
  bool certain = true;
  size_t pairs = 0;
  std::vector<std::string> first_pairs;
};

// Room kept on a warning's line for " (123456 pairs)".
constexpr size_t kScopeWidth = 16;

}  // namespace

void write_decision_screen(std::ostream& out, PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices,
                           const TextStyle& style, const ScreenOptions& options) {
  const Topology& topo = evaluator.topology();
  const size_t width = options.width;
  // The machine's advisories: once, whatever the pairs, and with one device too.
  const std::vector<FiredRule> machine = evaluator.machine_advisories();
  auto tell_machine = [&] {
    for (const auto& a : machine) {
      out << line(fmt::format("advisory [{}]: ", a.id), a.reason, width);
      if (!a.remedy.empty()) out << line("  fix: ", a.remedy, width);
    }
  };
  if (devices.size() < 2) {
    out << "Fewer than two devices: no pair to decide (`p2paudit policy --all` lists every function).\n";
    if (!machine.empty()) out << "\n";
    tell_machine();
    return;
  }
  auto labels = matrix_labels(topo, devices);
  NoteBook book(evaluator);
  GroupedGrid grouped = decision_grid(topo, devices, options.max_groups);
  // The plain grid keeps each cell's note; only small grids are drawn so, so this stays small.
  const bool small = devices.size() <= options.max_columns;
  std::vector<size_t> cell_note(small ? devices.size() * devices.size() : 0, 0);
  std::vector<size_t> indices;
  indices.reserve(devices.size());
  for (const auto& d : devices) indices.push_back(d.index);
  evaluator.decide_all_pairs(indices, [&](size_t r, size_t c, size_t group) {
    size_t n = book.count(group, labels[r], labels[c]);
    grouped.count(r, c, decision_kind(book.notes()[n - 1].decision));
    if (small) cell_note[r * devices.size() + c] = n;
  });

  // The notes as this screen tells them: notes that differ only past what a line shows (a BDF in
  // a long reason) are told once, with their pairs added up.
  std::vector<ToldNote> told;
  std::vector<size_t> told_of(book.notes().size());
  std::map<std::string, size_t> told_by_text;
  for (size_t i = 0; i < book.notes().size(); ++i) {
    const PolicyNote& note = book.notes()[i];
    const Decision& d = note.decision;
    std::string head = fmt::format("{} by {}{}", cell_code(d.action, d.certain()), d.rule.empty() ? "no rule" : d.rule,
                                   d.authority ? fmt::format(" ({})", to_string(*d.authority)) : "");
    std::string body = line("    why: ", d.reason, width);
    if (!d.remedy.empty()) body += line("    fix: ", d.remedy, width);
    for (const FiredRule* f : findings_to_tell(d)) {
      body += line(fmt::format("    also [{}]: ", f->id), f->reason, width);
      if (!f->remedy.empty()) body += line("      fix: ", f->remedy, width);
    }
    if (!d.certain()) {
      body += line("    uncertain: ", also_possible_text(d), width);
      // The kernel's config is told once, on the `kernel:` line.
      const std::vector<std::string> facts = unknowns_to_tell(d);
      std::string settle = facts.empty() ? std::string("kernel.config_p2pdma (the `kernel:` line above)") : settle_text_of(facts);
      if (!facts.empty() && facts.size() < d.decisive_unknown_facts.size()) settle += "; kernel.config_p2pdma (above)";
      body += line("    settle: ", settle, width);
    }
    auto [it, added] = told_by_text.try_emplace(head + "\n" + body, told.size());
    if (added) told.push_back({head, body, d.action, d.certain(), 0, {}});
    ToldNote& t = told[it->second];
    t.pairs += note.pairs;
    for (const auto& p : note.first_pairs)
      if (t.first_pairs.size() < NoteBook::kPairsNamed) t.first_pairs.push_back(p);
    told_of[i] = it->second + 1;
  }

  std::string buf;
  size_t label_width = 0;
  for (const auto& l : labels) label_width = std::max(label_width, text_columns(l) + 2);
  size_t cell_width = std::max(label_width, fmt::format("HOST?[{}]", told.size()).size() + 2);
  if (small && label_width + devices.size() * cell_width <= width) {
    PolicyGrid grid(labels, style);
    grid.set_note_width(fmt::format("{}", told.size()).size());
    buf += grid.header();
    for (size_t r = 0; r < devices.size(); ++r) {
      grid.start_row(buf, r);
      for (size_t c = 0; c < devices.size(); ++c) {
        size_t n = r == c ? 0 : told_of[cell_note[r * devices.size() + c] - 1];
        if (r == c) grid.self(buf);
        else grid.cell(buf, told[n - 1].action, n, told[n - 1].certain);
      }
      PolicyGrid::end_row(buf);
    }
    buf += "\nRows provide the memory, columns do the DMA. PEER = try peer-to-peer DMA,\n"
           "HOST = stage through host memory, DENY = refuse; [N] = note N.\n";
    if (std::any_of(told.begin(), told.end(), [](const ToldNote& t) { return !t.certain; }))
      buf += "HOST? = unknown facts leave it open: staged until they are known.\n";
  } else {
    // Too many devices for a grid a person reads: rows and columns are groups of devices under one
    // switch, root port or host bridge, each cell the count of its pairs by decision. Adjacent
    // groups merge until the grid fits the width.
    grouped.fit(width);
    buf += grouped.rows(style);
    buf += fmt::format("\n{} devices in {} groups, {} ordered pairs: rows provide the memory,\n", devices.size(),
                       grouped.groups(), book.pairs());
    buf += "columns do the DMA; each cell counts its pairs: P = PEER (try peer DMA),\n";
    buf += "H = HOST (stage through host memory), D = DENY (refuse), ? = uncertain\n";
    buf += "(unknown facts leave it open: acted on as HOST or DENY, the safe side).\n";
    for (const auto& text : grouped.legend(labels, width)) buf += line("", text, width);
  }
  out << buf;

  // Each note: what decided, one line of why, one of fix, the pair's other problems.
  for (size_t n = 1; n <= told.size() && n <= options.max_notes; ++n) {
    const ToldNote& note = told[n - 1];
    // The count first: the list of pairs is what gives way to the width, and says when it did.
    const std::string prefix = fmt::format("[{}] {}: ", n, note.head);
    const size_t room = width > text_columns(prefix) + 10 ? width - text_columns(prefix) : 10;
    std::string which = fmt::format("{} pair{}:", note.pairs, note.pairs == 1 ? "" : "s");
    for (size_t i = 0; i < note.first_pairs.size(); ++i) {
      const bool all_told = i + 1 == note.first_pairs.size() && note.pairs == note.first_pairs.size();
      const std::string next = (i ? ", " : " ") + note.first_pairs[i];
      if (text_columns(which + next) + (all_told ? 0 : 3) > room) {
        which += i ? ", …" : " …";
        break;
      }
      which += next;
      if (i + 1 == note.first_pairs.size() && !all_told) which += ", …";
    }
    std::string text = line(prefix, which, width);
    out << "\n" << style.paint(text.substr(0, text.size() - 1), action_tone(note.action)) << "\n" << note.body;
  }
  if (told.size() > options.max_notes)
    out << fmt::format("\n... and {} more notes: `p2paudit policy` gives them all.\n", told.size() - options.max_notes);
  // Each warning as a line shows it, with how many pairs it fired on.
  std::vector<std::pair<std::string, size_t>> warnings;
  std::map<std::string, size_t> warning_by_text;
  for (const auto& w : book.warnings()) {
    if (told_for_machine(machine, w.id)) continue;  // told once below
    std::string text = line(fmt::format("warning [{}]: ", w.id), w.reason, width - kScopeWidth);
    text.pop_back();
    auto [it, added] = warning_by_text.try_emplace(text, warnings.size());
    if (added) warnings.emplace_back(text, 0);
    warnings[it->second].second += w.pairs;
  }
  if (!warnings.empty()) out << "\n";
  for (size_t i = 0; i < warnings.size() && i < options.max_warnings; ++i) {
    const auto& [text, pairs] = warnings[i];
    out << text << (pairs == book.pairs() ? " (every pair)" : fmt::format(" ({} pairs)", pairs)) << "\n";
  }
  if (warnings.size() > options.max_warnings)
    out << fmt::format("... and {} more warnings: `p2paudit policy` gives them all.\n", warnings.size() - options.max_warnings);
  if (!machine.empty()) out << "\n";
  tell_machine();
}

}  // namespace p2paudit::policy
