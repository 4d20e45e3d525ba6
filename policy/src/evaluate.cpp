// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/policy/evaluate.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <filesystem>
#include <future>
#include <map>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "p2paudit/device_class.h"
#include "p2paudit/json_output.h"
#include "decision_grid.h"
#include "notes.h"

namespace p2paudit::policy {

namespace fs = std::filesystem;

std::vector<std::string> default_rule_files(const std::string& rules_dir) {
  std::vector<std::string> files = {(fs::path(rules_dir) / "policy" / "default.yaml").string()};
  std::vector<std::string> advisories;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(rules_dir) / "advisories", ec))
    if (e.path().extension() == ".yaml") advisories.push_back(e.path().string());
  std::sort(advisories.begin(), advisories.end());
  files.insert(files.end(), advisories.begin(), advisories.end());
  return files;
}

void derive_facts(FactSet& facts) {
  struct Role {
    FactId bar, memory, covers;
  };
  static const Role roles[] = {
      {*fact_id("provider.largest_bar"), *fact_id("provider.memory_size"), *fact_id("provider.bar_covers_memory")},
      {*fact_id("client.largest_bar"), *fact_id("client.memory_size"), *fact_id("client.bar_covers_memory")}};
  for (const Role& role : roles) {
    const FactValue* bar = facts.get(role.bar);
    const FactValue* memory = facts.get(role.memory);
    if (bar && memory) facts.set(role.covers, std::get<int64_t>(*bar) >= std::get<int64_t>(*memory));
  }
  // A BAR beyond the CPU's physical address width: the device's facts meet the machine's here.
  // Unknown while either is.
  static const FactId bits = *fact_id("platform.cpu_physical_address_bits");
  static const std::pair<FactId, FactId> ends[] = {
      {*fact_id("provider.bar_end"), *fact_id("provider.bar_beyond_address_width")},
      {*fact_id("client.bar_end"), *fact_id("client.bar_beyond_address_width")}};
  const FactValue* width = facts.get(bits);
  if (!width) return;
  const int64_t n = std::get<int64_t>(*width);
  for (const auto& [end_id, beyond] : ends)
    if (const FactValue* end = facts.get(end_id))
      facts.set(beyond, n < 63 && std::get<int64_t>(*end) > (int64_t{1} << n));
}

PolicyEvaluator::PolicyEvaluator(const Topology& topo, const KernelRules& kernel, const RuleSet& rules,
                                 const VendorFactsDocument* vendor)
    : topo_(topo), rules_(rules), vendor_(vendor), index_(topo, kernel),
      pair_context_(index_), machine_(machine_facts(topo, kernel)) {
  if (vendor_) {
    FactSet all = machine_;  // the vendor's facts for every pair, over the analyzer's
    for (const auto& [name, value] : vendor_->all.entries()) {
      if (value) all.set(name, *value);
      else all.set_unknown(name);
    }
    machine_ = std::move(all);
  }
  const auto& texts = kernel_text_facts();
  for (const auto& name : rules_.condition_facts()) {
    if (auto id = fact_id(name)) condition_facts_.push_back(*id);
    conditions_read_texts_ |= std::find(texts.begin(), texts.end(), name) != texts.end();
  }
  read_by_conditions_.assign(fact_catalog().size(), false);
  for (FactId id : condition_facts_) read_by_conditions_[static_cast<size_t>(id)] = true;
  pair_mask_ = PairFactValues::mask_for(read_by_conditions_);
  in_vendor_pairs_.assign(topo.functions.size(), 0);
  if (vendor_)
    for (const auto& [pair, facts] : vendor_->pairs)
      for (const Bdf& bdf : {pair.first, pair.second})
        if (auto i = topo.index_of(bdf)) in_vendor_pairs_[*i] = 1;
  provider_layers_.resize(topo.functions.size());
  client_layers_.resize(topo.functions.size());
  provider_signature_.assign(topo.functions.size(), UINT32_MAX);
  client_signature_.assign(topo.functions.size(), UINT32_MAX);
}

PolicyEvaluator::~PolicyEvaluator() = default;

namespace {

// The bytes of a fact as a memo key: absent, unknown and each value are told apart.
void encode(const FactSet::Lookup& found, std::string& key) {
  if (!found.set) {
    key += '\0';
    return;
  }
  if (!found.value) {
    key += '\1';
    return;
  }
  const FactValue& v = *found.value;
  key += static_cast<char>(2 + v.index());
  auto add_string = [&key](const std::string& s) {
    key += std::to_string(s.size());
    key += ':';
    key += s;
  };
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) add_string(x);
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          key += std::to_string(x.size());
          for (const auto& item : x) add_string(item);
        } else {
          key.append(reinterpret_cast<const char*>(&x), sizeof x);
        }
      },
      v);
}

}  // namespace

const FactSet& PolicyEvaluator::device_layer(size_t dev, bool as_provider) {
  auto& slot = (as_provider ? provider_layers_ : client_layers_)[dev];
  if (!slot) {
    slot = std::make_unique<FactSet>(device_facts(topo_.functions[dev], as_provider, topo_.lspci_dump.empty()));
    if (vendor_) vendor_->apply_device(topo_.functions[dev].bdf, as_provider, *slot);
    // What derive_facts() makes of the device's facts and the machine's: a pair sets them as its
    // own, but they depend on nothing of the pair (no pair fact names a device's BAR or memory).
    FactSet derived;
    derived.lay_over({slot.get(), &machine_});
    derive_facts(derived);
    (as_provider ? provider_signature_ : client_signature_)[dev] = device_signature(*slot, derived);
  }
  return *slot;
}

uint32_t PolicyEvaluator::device_signature(const FactSet& device, const FactSet& derived) {
  std::string key;
  for (FactId id : condition_facts_) {
    encode(device.lookup_here(id), key);
    encode(derived.lookup_here(id), key);
  }
  return device_signatures_.try_emplace(key, static_cast<uint32_t>(device_signatures_.size())).first->second;
}

FactSet PolicyEvaluator::layered_facts(size_t provider, size_t client, const PairOutcome& outcome,
                                       const PairVerdict* verdict) {
  FactSet facts = pair_own_facts(pair_context_, provider, client, outcome);
  if (verdict) add_kernel_text_facts(topo_, *verdict, facts);
  if (vendor_) vendor_->apply_pair(topo_.functions[provider].bdf, topo_.functions[client].bdf, facts);
  facts.lay_over({&device_layer(client, false), &device_layer(provider, true), &machine_});
  derive_facts(facts);
  return facts;
}

FactSet PolicyEvaluator::facts(size_t provider, size_t client) {
  return layered_facts(provider, client, index_.outcome(provider, client), nullptr).flattened();
}

size_t PolicyEvaluator::group_of(const Decision& d, size_t provider, size_t client) {
  DecisionGroup g;
  g.action = d.action;
  g.rule = d.rule;
  g.authority = d.authority;
  for (const auto& f : d.fired) {
    g.fired.push_back(f.id);
    if (f.action == Action::kWarn) g.warnings.push_back(f.id);
  }
  for (const auto& f : d.findings) g.findings.push_back(f.id);
  g.undecided_rules = d.undecided_rules;
  g.unknown_facts = d.unknown_facts;
  g.possible = d.possible;
  g.alternatives = d.alternatives;
  g.decisive_unknown_facts = d.decisive_unknown_facts;
  std::string alternatives;
  for (const auto& a : d.alternatives) alternatives += fmt::format("{}:{},", to_string(a.action), a.rule);
  std::string key = fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}", to_string(g.action), g.rule, fmt::join(g.fired, ","),
                                fmt::join(g.findings, ","), fmt::join(g.undecided_rules, ","),
                                fmt::join(g.unknown_facts, ","), int(g.possible), alternatives,
                                fmt::join(g.decisive_unknown_facts, ","));
  auto [it, added] = group_ids_.try_emplace(key, groups_.size());
  if (added) {
    g.example = {provider, client};
    groups_.push_back(std::move(g));
  }
  return it->second;
}

namespace {

// Beyond this many distinct keys (rules reading per-pair facts) decisions are not remembered.
constexpr size_t kMaxMemo = 1 << 16;

template <typename T>
uint64_t hash_bytes(const T& value) {
  static_assert(std::has_unique_object_representations_v<T> && sizeof(T) % sizeof(uint64_t) == 0);
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < sizeof(T); i += sizeof(uint64_t)) {
    uint64_t w;
    std::memcpy(&w, reinterpret_cast<const char*>(&value) + i, sizeof w);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  return h;
}

}  // namespace

PolicyEvaluator::MemoSlot* PolicyEvaluator::find_slot(const MemoKey& key, uint64_t hash) {
  const size_t mask = memo_slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask)
    if (!memo_slots_[i].used || memo_slots_[i].key == key) return &memo_slots_[i];
}

PolicyEvaluator::MemoKey PolicyEvaluator::memo_key(size_t provider, size_t client, const PairOutcome& outcome) const {
  MemoKey key;
  key.provider_signature = provider_signature_[provider];
  key.client_signature = client_signature_[client];
  key.values = pair_fact_values(pair_context_, provider, client, outcome, &read_by_conditions_);
  key.values.apply_mask(pair_mask_);
  return key;
}

size_t PolicyEvaluator::decide_by_key(size_t provider, size_t client, const PairOutcome& outcome) {
  ensure_device_layers(provider, client);
  return group_of_key(memo_key(provider, client, outcome), provider, client, &outcome);
}

size_t PolicyEvaluator::group_of_key(const MemoKey& key, size_t provider, size_t client, const PairOutcome* outcome) {
  // Neighbouring pairs of a row often agree (devices under one switch): no hash for those.
  if (last_key_group_ != UINT32_MAX && key == last_key_) return last_key_group_;
  const uint64_t hash = hash_bytes(key);
  if (!memo_slots_.empty())
    if (MemoSlot* slot = find_slot(key, hash); slot->used) {
      last_key_ = key, last_key_group_ = slot->group;
      return slot->group;
    }
  const PairOutcome o = outcome ? *outcome : index_.outcome(provider, client);
  const size_t group = group_of(rules_.decide(layered_facts(provider, client, o, nullptr)), provider, client);
  if (memo_size_ < kMaxMemo) {
    if (2 * (memo_size_ + 1) > memo_slots_.size()) {  // at most half full
      std::vector<MemoSlot> old(std::max<size_t>(64, 2 * memo_slots_.size()));
      old.swap(memo_slots_);
      for (const MemoSlot& s : old)
        if (s.used) *find_slot(s.key, hash_bytes(s.key)) = s;
    }
    *find_slot(key, hash) = {key, static_cast<uint32_t>(group), true};
    ++memo_size_;
  }
  return group;
}

size_t PolicyEvaluator::decide_by_facts(size_t provider, size_t client, const PairOutcome& outcome) {
  std::optional<PairVerdict> verdict;  // only when a condition reads the kernel's texts
  if (conditions_read_texts_) verdict = index_.verdict(provider, client);
  FactSet facts = layered_facts(provider, client, outcome, verdict ? &*verdict : nullptr);
  key_.clear();
  key_.append(reinterpret_cast<const char*>(&provider_signature_[provider]), sizeof(uint32_t));
  key_.append(reinterpret_cast<const char*>(&client_signature_[client]), sizeof(uint32_t));
  // The pair's own facts that conditions read, with their ids: what is not listed comes from the
  // devices (their signatures) or the machine (the same for every pair).
  for (const auto& e : facts.here())
    if (read_by_conditions_[static_cast<size_t>(e.id)]) {
      key_.append(reinterpret_cast<const char*>(&e.id), sizeof e.id);
      encode({true, e.value ? &*e.value : nullptr}, key_);
    }
  if (auto it = memo_.find(key_); it != memo_.end()) return it->second;
  size_t group = group_of(rules_.decide(facts), provider, client);
  if (memo_.size() < kMaxMemo) memo_.emplace(key_, group);
  return group;
}

bool PolicyEvaluator::vendor_pair(size_t provider, size_t client) const {
  return in_vendor_pairs_[provider] && in_vendor_pairs_[client] &&
         vendor_->pairs.count({topo_.functions[provider].bdf, topo_.functions[client].bdf});
}

size_t PolicyEvaluator::decide(size_t provider, size_t client, bool count) {
  PairOutcome outcome = index_.outcome(provider, client);
  // A vendor file's facts for a pair are the pair's own, and its texts are per pair: neither is
  // in the key.
  size_t group = conditions_read_texts_ || vendor_pair(provider, client) ? decide_by_facts(provider, client, outcome)
                                                                         : decide_by_key(provider, client, outcome);
  if (count) ++groups_[group].pairs;
  return group;
}

void PolicyEvaluator::decide_all_pairs(const std::vector<size_t>& devices,
                                       const std::function<void(size_t, size_t, size_t)>& take) {
  const size_t n = devices.size();
  const size_t rows_a_block = std::max<size_t>(1, kPairsABlock / std::max<size_t>(1, n));
  if (conditions_read_texts_ || n * n <= 2 * kPairsABlock) {  // every pair by its facts, or too few to share
    for (size_t r = 0; r < n; ++r)
      for (size_t c = 0; c < n; ++c)
        if (r != c) take(r, c, decide(devices[r], devices[c]));
    return;
  }
  // device_layer() fills the signatures: all of them before a second thread reads them.
  for (size_t d : devices) ensure_device_layers(d, d);
  // A block of rows: each pair's key, or none where a vendor file names the pair (decided by its
  // facts, on this thread).
  struct Block {
    size_t first = 0, rows = 0;
    std::vector<MemoKey> keys;
    std::vector<uint8_t> keyed;
  };
  auto fill = [&](Block& b) {
    b.keys.resize(b.rows * n);
    b.keyed.assign(b.rows * n, 0);
    for (size_t r = b.first, at = 0; r < b.first + b.rows; ++r)
      for (size_t c = 0; c < n; ++c, ++at) {
        const size_t provider = devices[r], client = devices[c];
        if (r == c || vendor_pair(provider, client)) continue;
        b.keys[at] = memo_key(provider, client, index_.outcome(provider, client));
        b.keyed[at] = 1;
      }
  };
  auto use = [&](const Block& b) {
    for (size_t r = b.first, at = 0; r < b.first + b.rows; ++r)
      for (size_t c = 0; c < n; ++c, ++at) {
        if (r == c) continue;
        const size_t provider = devices[r], client = devices[c];
        size_t group;
        if (b.keyed[at]) {
          group = group_of_key(b.keys[at], provider, client, nullptr);
          ++groups_[group].pairs;
        } else {
          group = decide(provider, client);
        }
        take(r, c, group);
      }
  };
  // Two blocks at a time: this thread works out the first's keys and the other thread the
  // second's; the groups are then taken in row order, as decide() one pair at a time would.
  Block mine, theirs;
  for (size_t row = 0; row < n; row += 2 * rows_a_block) {
    mine.first = row;
    mine.rows = std::min(rows_a_block, n - row);
    theirs.first = mine.first + mine.rows;
    theirs.rows = std::min(rows_a_block, n - theirs.first);
    std::future<void> other;
    if (theirs.rows) other = std::async(std::launch::async | std::launch::deferred, [&] { fill(theirs); });
    fill(mine);
    use(mine);
    if (other.valid()) {
      other.get();
      use(theirs);
    }
  }
}

PairDecision PolicyEvaluator::decide_in_full(size_t provider, size_t client) {
  PairDecision d{index_.verdict(provider, client), {}, {}};
  d.facts = layered_facts(provider, client, outcome_of(topo_, d.verdict), &d.verdict).flattened();
  d.decision = rules_.decide(d.facts);
  return d;
}

PairDecision decide_pair(const Topology& topo, const KernelRules& kernel, const RuleSet& rules,
                         const VendorFactsDocument* vendor, size_t provider, size_t client) {
  return PolicyEvaluator(topo, kernel, rules, vendor).decide_in_full(provider, client);
}

nlohmann::ordered_json pair_decision_json(const Topology& topo, const PairDecision& d) {
  nlohmann::ordered_json j;
  j["provider"] = topo.functions[d.verdict.provider].bdf.str();
  j["client"] = topo.functions[d.verdict.client].bdf.str();
  nlohmann::json decision = decision_to_json(d.decision);
  for (const auto& [key, value] : decision.items()) j[key] = value;
  j["kernel"] = {{"map_type", to_string(d.verdict.map_type)},
                 {"distance", d.verdict.distance},
                 {"p2pdma_distance", d.verdict.p2pdma_distance ? nlohmann::json(*d.verdict.p2pdma_distance)
                                                               : nlohmann::json(nullptr)}};
  j["facts"] = d.facts.to_json();
  return j;
}

namespace {

constexpr size_t kFlushBytes = 1 << 16;

// why/fix/also/warning/unknown lines of one pair's decision.
std::string decision_lines(const Decision& d) {
  std::string out = fmt::format("  why: {}\n", d.reason);
  if (!d.remedy.empty()) out += fmt::format("  fix: {}\n", d.remedy);
  for (const FiredRule* f : findings_to_tell(d)) {
    out += fmt::format("  also [{}]: {}\n", f->id, f->reason);
    if (!f->remedy.empty()) out += fmt::format("    fix: {}\n", f->remedy);
  }
  for (const auto& fired : d.fired)
    if (fired.action == Action::kWarn) out += fmt::format("  warning [{}]: {}\n", fired.id, fired.reason);
  if (!d.certain()) {
    out += fmt::format("  uncertain: {}\n", also_possible_text(d));
    out += fmt::format("  settled by: {}\n", settle_text(d));
  }
  if (!d.unknown_facts.empty()) out += fmt::format("  unknown: {}\n", fmt::join(d.unknown_facts, ", "));
  return out;
}

nlohmann::ordered_json group_json(PolicyEvaluator& evaluator, size_t index) {
  const DecisionGroup& g = evaluator.groups()[index];
  const Topology& t = evaluator.topology();
  PairDecision example = evaluator.decide_in_full(g.example.first, g.example.second);
  const Decision& d = example.decision;
  // The pair's other problems with their texts: what the ids in "findings" say and how to fix each.
  nlohmann::ordered_json findings = nlohmann::ordered_json::array();
  for (const auto& f : d.findings) findings.push_back({{"id", f.id}, {"reason", f.reason}, {"remedy", f.remedy}});
  return {{"group", index + 1},
          {"decision", to_string(g.action)},
          {"certain", g.certain()},
          {"possible", possible_json(d)},
          {"if_known", if_known_json(d)},
          {"settled_by", settled_by_json(d)},
          {"rule", g.rule.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(g.rule)},
          {"authority", g.authority ? nlohmann::ordered_json(to_string(*g.authority)) : nlohmann::ordered_json(nullptr)},
          {"rules", g.fired},
          {"warnings", g.warnings},
          {"findings", g.findings},
          {"undecided_rules", g.undecided_rules},
          {"unknown_facts", g.unknown_facts},
          {"pairs", g.pairs},
          {"example", {{"provider", t.functions[g.example.first].bdf.str()},
                       {"client", t.functions[g.example.second].bdf.str()},
                       {"reason", d.reason},
                       {"remedy", d.remedy},
                       {"reasons", d.reasons()},
                       {"remedies", d.remedies()},
                       {"findings", findings}}}};
}

// --verbose/--details: every pair's own decision and texts.
void write_policy_per_pair(std::ostream& out, PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices,
                           const std::vector<std::string>& labels, const TextStyle& style) {
  PolicyGrid grid(labels, style);
  std::string buf = grid.header();
  for (size_t r = 0; r < devices.size(); ++r) {
    grid.start_row(buf, r);
    for (size_t c = 0; c < devices.size(); ++c)
      if (r == c) grid.self(buf);
      else {
        const DecisionGroup& g = evaluator.groups()[evaluator.decide(devices[r].index, devices[c].index, false)];
        grid.cell(buf, g.action, 0, g.certain());
      }
    PolicyGrid::end_row(buf);
    if (buf.size() >= kFlushBytes) out << buf, buf.clear();
  }
  buf += fmt::format("\n{}.\n\n", kGridLegend);
  for (size_t r = 0; r < devices.size(); ++r)
    for (size_t c = 0; c < devices.size(); ++c) {
      if (r == c) continue;
      const Decision d = evaluator.decide_in_full(devices[r].index, devices[c].index).decision;
      buf += fmt::format("{} -> {}: {}{} ({}{}{})\n", labels[r], labels[c], style.paint(to_string(d.action), action_tone(d.action)),
                         d.certain() ? "" : ", uncertain",
                         d.rule.empty() ? "no rule decided" : "rule " + d.rule, d.authority ? ", authority " : "",
                         d.authority ? to_string(*d.authority) : "");
      buf += decision_lines(d);
      if (buf.size() >= kFlushBytes) out << buf, buf.clear();
    }
  out << buf << machine_advisories_text(evaluator.machine_advisories());
}

// The grid of one column per device, each cell the pair's action and note, and its legend.
void write_device_grid(std::ostream& out, PolicyEvaluator& evaluator, NoteBook& book, const std::vector<NamedFunction>& devices,
                       const std::vector<std::string>& labels, const PolicyGrid& grid) {
  std::string buf = grid.header();
  for (size_t r = 0; r < devices.size(); ++r) {
    grid.start_row(buf, r);
    for (size_t c = 0; c < devices.size(); ++c) {
      if (r == c) {
        grid.self(buf);
        continue;
      }
      size_t n = book.count(evaluator.decide(devices[r].index, devices[c].index), labels[r], labels[c]);
      const Decision& d = book.notes()[n - 1].decision;
      grid.cell(buf, d.action, n, d.certain());
    }
    PolicyGrid::end_row(buf);
    if (buf.size() >= kFlushBytes) out << buf, buf.clear();
  }
  buf += book.pairs() ? fmt::format("\n{}; [N] = note N below.\n", kGridLegend)
                      : fmt::format("\nFewer than two devices: no pair to decide (`--all` lists every function).\n");
  out << buf;
}

}  // namespace

void write_policy_text(std::ostream& out, PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices,
                       bool per_pair, const TextStyle& style, bool group_wide) {
  const Topology& topo = evaluator.topology();
  auto labels = matrix_labels(topo, devices);
  if (per_pair) return write_policy_per_pair(out, evaluator, devices, labels, style);
  NoteBook book(evaluator);

  PolicyGrid grid(labels, style);
  // Note numbers are known only as pairs are decided: the grid is built before it is printed, at a
  // width fitting up to 999 notes (a machine with more has more groups than a grid can show anyway).
  grid.set_note_width(3);
  if (group_wide && !device_grid_fits(devices.size(), grid.cell_columns()))
    write_grouped_policy_grid(out, evaluator, book, devices, labels, style);
  else
    write_device_grid(out, evaluator, book, devices, labels, grid);
  const size_t pairs = book.pairs();
  for (size_t n = 1; n <= book.notes().size(); ++n) {
    const PolicyNote& note = book.notes()[n - 1];
    std::string which = fmt::format("{}", fmt::join(note.first_pairs, ", "));
    if (note.pairs > note.first_pairs.size()) which += fmt::format(" and {} more", note.pairs - note.first_pairs.size());
    out << fmt::format("\n[{}] {}: {} pair{} ({})\n{}", n, style.paint(note.heading, action_tone(note.decision.action)),
                       note.pairs, note.pairs == 1 ? "" : "s", which, NoteBook::body(note.decision, "    "));
  }
  // The machine's advisories are told once below, not as the pairs' warnings.
  const std::vector<FiredRule> machine = evaluator.machine_advisories();
  bool warnings_told = false;
  for (const auto& w : book.warnings()) {
    if (told_for_machine(machine, w.id)) continue;
    if (!warnings_told) out << "\nWarnings:\n", warnings_told = true;
    std::string scope = w.pairs == pairs ? "every pair"
                                         : fmt::format("{} of {} pairs, in notes {}", w.pairs, pairs, fmt::join(w.notes, ", "));
    out << fmt::format("  [{}] {} ({})\n", w.id, w.reason, scope);
  }
  out << machine_advisories_text(machine);
  if (devices.size() >= 2) out << "\n`--verbose`: every pair's reasons, warnings and unknown facts.\n";
}

void write_policy_json(std::ostream& out, PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices,
                       const nlohmann::ordered_json& head, bool details, std::uint64_t most_listed_pairs) {
  const Topology& topo = evaluator.topology();
  nlohmann::ordered_json document = {{"schema_version", kPolicySchemaVersion}};
  for (const auto& [key, value] : head.items()) document[key] = value;
  nlohmann::ordered_json devs = nlohmann::ordered_json::array();
  for (const auto& d : devices) devs.push_back({{"name", d.short_name}, {"bdf", topo.functions[d.index].bdf.str()}});
  document["devices"] = devs;
  // The advisories about the machine: they hold whatever the pairs, and with one device too.
  nlohmann::ordered_json advisories = nlohmann::ordered_json::array();
  for (const auto& a : evaluator.machine_advisories())
    advisories.push_back({{"id", a.id}, {"reason", a.reason}, {"remedy", a.remedy},
                          {"authority", a.authority ? nlohmann::ordered_json(to_string(*a.authority)) : nlohmann::ordered_json(nullptr)},
                          {"source", a.source}});
  escape_json_strings(advisories);
  document["advisories"] = advisories;
  const std::uint64_t pair_count = static_cast<std::uint64_t>(devices.size()) * devices.size();
  const bool grouped = pair_count > most_listed_pairs;
  std::vector<std::uint64_t> per_group;  // grouped: each decision group's pairs
  if (grouped) {
    document["grouped_pairs"] = {
        {"count", pair_count},
        {"most_listed", most_listed_pairs},
        {"note", fmt::format("{} ordered pairs, more than {}: \"pairs\" holds one element per decision group with its "
                             "\"pairs\" count (every pair decided and counted once); `p2paudit check` or `explain` "
                             "tells one pair",
                             pair_count, most_listed_pairs)}};
    for (const auto& p : devices)
      for (const auto& c : devices) {
        size_t g = evaluator.decide(p.index, c.index);
        if (g >= per_group.size()) per_group.resize(g + 1);
        ++per_group[g];
      }
  }
  std::string buf = json_text(document);
  buf.resize(buf.size() - 2);  // "\n}": the pairs follow, written as they are decided
  buf += ",\n  \"pairs\": [";
  std::vector<std::string> bdf(topo.functions.size());
  for (const auto& d : devices) bdf[d.index] = topo.functions[d.index].bdf.str();
  // What follows the client in a pair's object is its group's alone: made once per group, so that
  // a pair costs its decision and a few appends.
  std::vector<std::string> pair_tails;
  auto pair_tail = [&](size_t g) -> const std::string& {
    while (pair_tails.size() <= g) {
      const DecisionGroup& group = evaluator.groups()[pair_tails.size()];
      pair_tails.push_back(fmt::format("\", \"decision\": \"{}\", \"certain\": {}, \"rule\": {}, \"authority\": {}, \"group\": {}}}",
                                       to_string(group.action), group.certain(),
                                       group.rule.empty() ? "null" : "\"" + group.rule + "\"",
                                       group.authority ? fmt::format("\"{}\"", to_string(*group.authority)) : "null",
                                       pair_tails.size() + 1));
    }
    return pair_tails[g];
  };
  bool first = true;
  for (size_t g = 0; g < per_group.size(); ++g) {
    if (per_group[g] == 0) continue;
    buf += first ? "\n    " : ",\n    ";
    first = false;
    buf += fmt::format("{{\"pairs\": {}, ", per_group[g]);
    buf += pair_tail(g).substr(3);  // the group's members after the client: "decision": ...
  }
  for (const auto& p : devices)
    for (const auto& c : devices) {
      if (grouped) break;
      buf += first ? "\n    " : ",\n    ";
      first = false;
      size_t g = evaluator.decide(p.index, c.index);
      if (details) {
        auto j = pair_decision_json(topo, evaluator.decide_in_full(p.index, c.index));
        j["group"] = g + 1;
        escape_json_strings(j);
        buf += j.dump();
      } else {
        buf += "{\"provider\": \"";
        buf += bdf[p.index];
        buf += "\", \"client\": \"";
        buf += bdf[c.index];
        buf += pair_tail(g);
      }
      if (buf.size() >= kFlushBytes) out << buf, buf.clear();
    }
  buf += first ? "],\n  \"groups\": [" : "\n  ],\n  \"groups\": [";
  for (size_t g = 0; g < evaluator.groups().size(); ++g) {
    auto j = group_json(evaluator, g);
    escape_json_strings(j);
    buf += (g ? ",\n    " : "\n    ") + j.dump();
  }
  buf += evaluator.groups().empty() ? "]\n}\n" : "\n  ]\n}\n";
  out << buf;
}

}  // namespace p2paudit::policy
