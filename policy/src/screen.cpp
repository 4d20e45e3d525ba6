// SPDX-License-Identifier: GPL-2.0-or-later
// The audit's first screen: the decision for every pair, said so that it fits a terminal.
#include <algorithm>
#include <array>
#include <map>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "notes.h"

namespace p2paudit::policy {

namespace {

// Terminal columns of UTF-8 text: every code point one column (rule texts are prose).
size_t columns(std::string_view s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xc0) != 0x80; }));
}

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
  if (columns(text) <= width) return text;
  for (const std::string& t : {text, without_asides(text)}) {
    if (columns(t) <= width) return t;
    size_t best = 0;
    for (size_t end : clause_ends(t))
      if (columns(std::string_view(t).substr(0, end)) <= width) best = end;
    if (best && columns(std::string_view(t).substr(0, best)) * 3 >= width) return t.substr(0, best);
  }
  std::string t = without_asides(text);
  size_t cut = 0;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] == ' ' && columns(std::string_view(t).substr(0, i)) + 1 <= width) cut = i;
  if (cut == 0) {  // one long word: cut it at a code point
    for (size_t i = 0; i < t.size(); ++i)
      if ((t[i] & 0xc0) != 0x80 && columns(std::string_view(t).substr(0, i)) + 1 <= width) cut = i;
  }
  return t.substr(0, cut) + "…";
}

// A line of the screen: the prefix, then the text shortened to what is left of the width.
std::string line(const std::string& prefix, const std::string& text, size_t width) {
  size_t room = width > columns(prefix) + 10 ? width - columns(prefix) : 10;
  return prefix + shorten(text, room) + "\n";
}

size_t action_slot(Action a) { return a == Action::kPeer ? 0 : a == Action::kHostStaged ? 1 : 2; }

// Where a device hangs: the places it can be grouped by, finest first. Each is a key that sorts
// in tree order and a description for the legend.
struct Place {
  std::string key, what;
};

std::array<Place, 3> places_of(const Topology& t, size_t dev) {
  const Function& f = t.functions[dev];
  std::string hb_key = f.host_bridge.starts_with("pci") ? f.host_bridge.substr(3) : f.host_bridge;
  Place host_bridge{hb_key, "host bridge " + f.host_bridge};
  std::optional<size_t> top, nearest_switch;
  for (auto up = f.parent; up; up = t.functions[*up].parent) {
    if (!nearest_switch && t.functions[*up].pcie_type == PcieType::kSwitchUpstream) nearest_switch = up;
    top = up;
  }
  Place root = top ? Place{t.functions[*top].bdf.str(), "root port " + t.functions[*top].bdf.str()} : host_bridge;
  Place sw = nearest_switch ? Place{t.functions[*nearest_switch].bdf.str(), "switch " + t.functions[*nearest_switch].bdf.str()}
                            : root;
  return {sw, root, host_bridge};
}

// Devices gathered into at most `most` groups, each a run of places in tree order.
struct Grouping {
  std::vector<size_t> of;                      // per entry of `devices`: its group
  std::vector<std::vector<std::string>> what;  // per group: the places it covers
  std::vector<std::vector<size_t>> members;    // per group: entries of `devices`
};

Grouping group_devices(const Topology& t, const std::vector<NamedFunction>& devices, size_t most) {
  std::vector<std::array<Place, 3>> places;
  places.reserve(devices.size());
  for (const auto& d : devices) places.push_back(places_of(t, d.index));
  // The finest place that gives at most `most` groups; past the host bridges, runs of them.
  size_t level = 0;
  std::map<std::string, std::string> keys;  // key -> description, in tree order
  for (;; ++level) {
    keys.clear();
    for (const auto& p : places) keys.emplace(p[level].key, p[level].what);
    if (keys.size() <= most || level == 2) break;
  }
  const size_t per = (keys.size() + most - 1) / most;  // 1 unless the host bridges alone are too many
  Grouping g;
  std::map<std::string, size_t> group_of_key;
  size_t i = 0;
  for (const auto& [key, what] : keys) {
    size_t n = i++ / per;
    if (n == g.what.size()) g.what.emplace_back(), g.members.emplace_back();
    g.what[n].push_back(what);
    group_of_key[key] = n;
  }
  for (size_t d = 0; d < devices.size(); ++d) {
    g.of.push_back(group_of_key.at(places[d][level].key));
    g.members[g.of.back()].push_back(d);
  }
  return g;
}

// A note as the screen tells it.
struct ToldNote {
  std::string head;  // "PEER by nvlink (vendor-fabric)"
  std::string body;  // its why, fix, also and unknown lines
  Action action = Action::kHostStaged;
  size_t pairs = 0;
  std::vector<std::string> first_pairs;
};

// Room kept on a warning's line for " (123456 pairs)".
constexpr size_t kScopeWidth = 16;

using Counts = std::array<size_t, 3>;  // pairs decided peer, host_staged, deny

std::string counts_text(const Counts& c) {
  std::string out;
  static constexpr const char* kLetter[] = {"P", "H", "D"};
  for (size_t a = 0; a < 3; ++a)
    if (c[a]) out += fmt::format("{}{}{}", out.empty() ? "" : " ", kLetter[a], c[a]);
  return out.empty() ? "-" : out;
}

// The worst decision in the cell sets its colour.
Tone counts_tone(const Counts& c) { return c[2] ? Tone::kBad : c[1] ? Tone::kCaution : Tone::kGood; }

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
  Grouping grouping = group_devices(topo, devices, options.max_groups);
  const size_t k = grouping.what.size();
  std::vector<Counts> counts(k * k, Counts{});
  // The plain grid keeps each cell's note; only small grids are drawn so, so this stays small.
  const bool small = devices.size() <= options.max_columns;
  std::vector<size_t> cell_note(small ? devices.size() * devices.size() : 0, 0);
  for (size_t r = 0; r < devices.size(); ++r)
    for (size_t c = 0; c < devices.size(); ++c) {
      if (r == c) continue;
      size_t n = book.count(evaluator.decide(devices[r].index, devices[c].index), labels[r], labels[c]);
      ++counts[grouping.of[r] * k + grouping.of[c]][action_slot(book.notes()[n - 1].decision.action)];
      if (small) cell_note[r * devices.size() + c] = n;
    }

  // The notes as this screen tells them: notes that differ only past what a line shows (a BDF in
  // a long reason) are told once, with their pairs added up.
  std::vector<ToldNote> told;
  std::vector<size_t> told_of(book.notes().size());
  std::map<std::string, size_t> told_by_text;
  for (size_t i = 0; i < book.notes().size(); ++i) {
    const PolicyNote& note = book.notes()[i];
    const Decision& d = note.decision;
    std::string head = fmt::format("{} by {}{}", short_code(d.action), d.rule.empty() ? "no rule" : d.rule,
                                   d.authority ? fmt::format(" ({})", to_string(*d.authority)) : "");
    std::string body = line("    why: ", d.reason, width);
    if (!d.remedy.empty()) body += line("    fix: ", d.remedy, width);
    for (const FiredRule* f : findings_to_tell(d)) {
      body += line(fmt::format("    also [{}]: ", f->id), f->reason, width);
      if (!f->remedy.empty()) body += line("      fix: ", f->remedy, width);
    }
    if (!d.decisive_unknown_facts.empty())
      body += line("    unknown, could change this: ", fmt::format("{}", fmt::join(d.decisive_unknown_facts, ", ")), width);
    auto [it, added] = told_by_text.try_emplace(head + "\n" + body, told.size());
    if (added) told.push_back({head, body, d.action, 0, {}});
    ToldNote& t = told[it->second];
    t.pairs += note.pairs;
    for (const auto& p : note.first_pairs)
      if (t.first_pairs.size() < NoteBook::kPairsNamed) t.first_pairs.push_back(p);
    told_of[i] = it->second + 1;
  }

  std::string buf;
  size_t label_width = 0;
  for (const auto& l : labels) label_width = std::max(label_width, columns(l) + 2);
  size_t cell_width = std::max(label_width, fmt::format("PEER[{}]", told.size()).size() + 2);
  if (small && label_width + devices.size() * cell_width <= width) {
    PolicyGrid grid(labels, style);
    grid.set_note_width(fmt::format("{}", told.size()).size());
    buf += grid.header();
    for (size_t r = 0; r < devices.size(); ++r) {
      grid.start_row(buf, r);
      for (size_t c = 0; c < devices.size(); ++c) {
        size_t n = r == c ? 0 : told_of[cell_note[r * devices.size() + c] - 1];
        if (r == c) grid.self(buf);
        else grid.cell(buf, told[n - 1].action, n);
      }
      PolicyGrid::end_row(buf);
    }
    buf += "\nRows provide the memory, columns do the DMA. PEER = try peer-to-peer DMA,\n"
           "HOST = stage through host memory, DENY = refuse; [N] = note N.\n";
  } else {
    // Too many devices for a grid a person reads: rows and columns are groups of devices under one
    // switch, root port or host bridge, each cell the count of its pairs by decision. Adjacent
    // groups merge until the grid fits the width.
    std::vector<std::string> cells;
    size_t gw = 0;  // every column's width, the row labels' too
    auto lay_out = [&] {
      const size_t n = grouping.what.size();
      cells.assign(n * n, "");
      gw = fmt::format("G{}", n).size() + 2;
      for (size_t i = 0; i < n * n; ++i) cells[i] = counts_text(counts[i]), gw = std::max(gw, cells[i].size() + 2);
    };
    lay_out();
    while (grouping.what.size() > 1 && gw * (grouping.what.size() + 1) > width) {
      // Merge groups 2i and 2i+1: their counts add up, nothing is decided again.
      size_t nk = (grouping.what.size() + 1) / 2, ok = grouping.what.size();
      std::vector<Counts> merged(nk * nk, Counts{});
      for (size_t r = 0; r < ok; ++r)
        for (size_t c = 0; c < ok; ++c)
          for (size_t a = 0; a < 3; ++a) merged[(r / 2) * nk + c / 2][a] += counts[r * ok + c][a];
      Grouping g;
      g.what.resize(nk), g.members.resize(nk);
      for (size_t i = 0; i < ok; ++i) {
        g.what[i / 2].insert(g.what[i / 2].end(), grouping.what[i].begin(), grouping.what[i].end());
        g.members[i / 2].insert(g.members[i / 2].end(), grouping.members[i].begin(), grouping.members[i].end());
      }
      grouping = std::move(g);
      counts = std::move(merged);
      lay_out();
    }
    const size_t n = grouping.what.size();
    std::string row = fmt::format("{:<{}}", "", gw);
    for (size_t c = 0; c < n; ++c) row += fmt::format("{:<{}}", fmt::format("G{}", c + 1), gw);
    PolicyGrid::end_row(row);
    buf += row;
    for (size_t r = 0; r < n; ++r) {
      buf += fmt::format("{:<{}}", fmt::format("G{}", r + 1), gw);
      for (size_t c = 0; c < n; ++c)
        buf += cells[r * n + c] == "-" ? fmt::format("{:<{}}", "-", gw)
                                       : style.paint(fmt::format("{:<{}}", cells[r * n + c], gw), counts_tone(counts[r * n + c]));
      PolicyGrid::end_row(buf);
    }
    buf += fmt::format("\n{} devices in {} groups, {} ordered pairs: rows provide the memory,\n", devices.size(), n,
                       book.pairs());
    buf += "columns do the DMA; each cell counts its pairs: P = PEER (try peer DMA),\n";
    buf += "H = HOST (stage through host memory), D = DENY (refuse).\n";
    for (size_t g = 0; g < n; ++g) {
      std::string where = grouping.what[g].size() == 1
                              ? grouping.what[g][0]
                              : fmt::format("{} .. {}", grouping.what[g].front(), grouping.what[g].back());
      std::string text = fmt::format("G{} {} ({} device{}):", g + 1, where, grouping.members[g].size(), grouping.members[g].size() == 1 ? "" : "s");
      // As many of its devices as the line holds.
      const auto& members = grouping.members[g];
      for (size_t i = 0; i < members.size(); ++i) {
        const std::string& name = labels[members[i]];
        bool last = i + 1 == members.size();
        if (columns(text) + 1 + name.size() + (last ? 0 : 2) > width) {
          text += " …";
          break;
        }
        text += " " + name;
      }
      buf += line("", text, width);
    }
  }
  out << buf;

  // Each note: what decided, one line of why, one of fix, the pair's other problems.
  for (size_t n = 1; n <= told.size() && n <= options.max_notes; ++n) {
    const ToldNote& note = told[n - 1];
    // The count first: the list of pairs is what gives way to the width, and says when it did.
    const std::string prefix = fmt::format("[{}] {}: ", n, note.head);
    const size_t room = width > columns(prefix) + 10 ? width - columns(prefix) : 10;
    std::string which = fmt::format("{} pair{}:", note.pairs, note.pairs == 1 ? "" : "s");
    for (size_t i = 0; i < note.first_pairs.size(); ++i) {
      const bool all_told = i + 1 == note.first_pairs.size() && note.pairs == note.first_pairs.size();
      const std::string next = (i ? ", " : " ") + note.first_pairs[i];
      if (columns(which + next) + (all_told ? 0 : 3) > room) {
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
