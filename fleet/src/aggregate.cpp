// SPDX-License-Identifier: GPL-2.0-or-later
// `aggregate`: finding the inputs, and a pool of workers that each read one input into a state of
// its own; those states are merged in the order the inputs were found (whatever worker finished
// first), so that of one machine given twice the first found is counted and the other listed as a
// duplicate, the same with any --jobs.
#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/fleet/aggregate.h"
#include "p2paudit/fleet/report.h"
#include "p2paudit/input_file.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/sysroot.h"

namespace p2paudit::fleet {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr size_t kMaxJsonInputBytes = 64u << 20;   // a report of a 64-GPU machine is a few MiB
constexpr int kMaxDirectoryDepth = 32;
constexpr std::uint64_t kMaxDirectoryEntries = 10'000'000;  // every entry looked at below the inputs

enum class InputKind { kUnknown, kSnapshot, kSysrootDirectory, kJson, kPartial /* --merge */ };

struct Input {
  std::string path;
  InputKind kind = InputKind::kUnknown;
  std::uint64_t seq = 0;  // the order it was found in
};

// Hands inputs from the walk to the workers; bounded, so the walk never runs far ahead.
class InputQueue {
 public:
  explicit InputQueue(size_t capacity) : capacity_(capacity) {}
  void push(Input in) {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] { return queue_.size() < capacity_; });
    queue_.push_back(std::move(in));
    not_empty_.notify_one();
  }
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    not_empty_.notify_all();
  }
  std::optional<Input> pop() {
    std::unique_lock lock(mutex_);
    not_empty_.wait(lock, [&] { return !queue_.empty() || closed_; });
    if (queue_.empty()) return std::nullopt;
    Input in = std::move(queue_.front());
    queue_.pop_front();
    not_full_.notify_one();
    return in;
  }

 private:
  size_t capacity_;
  std::mutex mutex_;
  std::condition_variable not_empty_, not_full_;
  std::deque<Input> queue_;
  bool closed_ = false;
};

// Progress counters shared by the walk and the workers; the callbacks run under a lock, progress
// at most every 200 ms and once at the end.
class Progress {
 public:
  explicit Progress(const AggregateOptions& options) : options_(options) {}
  void found() { ++found_, maybe_report(false); }
  void read() { ++read_, maybe_report(false); }
  void skipped(const SkippedInput& s) {
    ++skipped_;
    if (options_.skipped) {
      std::lock_guard lock(mutex_);
      options_.skipped(s);
    }
    maybe_report(false);
  }
  void finish() { maybe_report(true); }

 private:
  void maybe_report(bool finished) {
    if (!options_.progress) return;
    std::lock_guard lock(mutex_);
    auto now = std::chrono::steady_clock::now();
    if (!finished && now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    options_.progress({found_.load(), read_.load(), skipped_.load(), finished});
  }
  const AggregateOptions& options_;
  std::atomic<std::uint64_t> found_{0}, read_{0}, skipped_{0};
  std::mutex mutex_;
  std::chrono::steady_clock::time_point last_{};
};

bool ends_with(const std::string& s, std::string_view suffix) { return s.ends_with(suffix); }

InputKind kind_by_name(const std::string& path) {
  if (ends_with(path, ".tar.gz") || ends_with(path, ".tgz") || ends_with(path, ".tar")) return InputKind::kSnapshot;
  if (ends_with(path, ".json")) return InputKind::kJson;
  return InputKind::kUnknown;
}

bool is_sysroot_directory(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(fs::symlink_status(dir / "sys/bus/pci/devices", ec));
}

// The message of an InputError without the input's own name in front: the name is its own column.
std::string reason_of(const std::string& message, const std::string& input) {
  std::string prefix = escape_text(input) + ": ";
  return message.starts_with(prefix) ? message.substr(prefix.size()) : message;
}

class Walk {
 public:
  Walk(InputQueue& queue, std::vector<SkippedInput>& skipped, Progress& progress)
      : queue_(queue), skipped_(skipped), progress_(progress) {}

  // An input named on the command line: followed if it is a link (the user named it).
  void named(const std::string& path) {
    std::error_code ec;
    auto status = fs::status(path, ec);
    if (ec) return skip(path, ec.message());
    if (fs::is_directory(status)) {
      if (is_sysroot_directory(path)) return found({path, InputKind::kSysrootDirectory});
      return directory(path, 0);
    }
    if (!fs::is_regular_file(status)) return skip(path, "not a regular file or a directory");
    found({path, kind_by_name(path)});
  }

  // A partial state named with --merge: a regular file (followed if it is a link), whatever its name.
  void partial(const std::string& path) {
    std::error_code ec;
    auto status = fs::status(path, ec);
    if (ec) return skip(path, ec.message());
    if (!fs::is_regular_file(status)) return skip(path, "--merge takes a regular file (an `aggregate --partial` output)");
    found({path, InputKind::kPartial});
  }

 private:
  // Below a named directory nothing is followed: a link is not a regular file.
  void directory(const fs::path& dir, int depth) {
    if (depth > kMaxDirectoryDepth)
      return skip(dir.string(), fmt::format("nested deeper than {} directories below the input; not read", kMaxDirectoryDepth));
    std::error_code ec;
    fs::directory_iterator it(dir, fs::directory_options::none, ec);
    if (ec) return skip(dir.string(), ec.message());
    std::vector<fs::directory_entry> entries;
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (ec) return skip(dir.string(), ec.message());
      if (++entries_ > kMaxDirectoryEntries)
        return skip(dir.string(), fmt::format("more than {} directory entries below the inputs; the rest was not read",
                                              kMaxDirectoryEntries));
      entries.push_back(*it);
    }
    std::sort(entries.begin(), entries.end());  // the same order on every run
    for (const auto& e : entries) {
      std::string path = e.path().string();
      auto status = e.symlink_status(ec);
      if (ec) {
        skip(path, ec.message());
      } else if (fs::is_directory(status)) {
        if (is_sysroot_directory(e.path())) found({path, InputKind::kSysrootDirectory});
        else directory(e.path(), depth + 1);
      } else if (InputKind kind = kind_by_name(path); kind != InputKind::kUnknown) {
        if (fs::is_regular_file(status)) found({path, kind});
        else skip(path, "not a regular file (links and special files below a directory are not followed)");
      }  // other files (notes, logs) beside the inputs are not inputs
    }
  }

  void found(Input in) {
    progress_.found();
    in.seq = seq_++;
    queue_.push(std::move(in));
  }
  void skip(const std::string& path, const std::string& reason) {
    skipped_.push_back({escape_bytes(path), reason});
    progress_.skipped(skipped_.back());
  }

  InputQueue& queue_;
  std::vector<SkippedInput>& skipped_;
  Progress& progress_;
  std::uint64_t entries_ = 0;
  std::uint64_t seq_ = 0;
};

struct Analysis {
  KernelRuleData kernel_data;
  policy::RuleSet rules;
  std::string tool_version;
};

// A file named without a telling suffix: a gzip or tar header is a snapshot, anything else JSON.
InputKind sniff(const std::string& text) {
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f && static_cast<unsigned char>(text[1]) == 0x8b)
    return InputKind::kSnapshot;
  if (text.size() >= 262 && text.compare(257, 5, "ustar") == 0) return InputKind::kSnapshot;
  return InputKind::kJson;
}

// A sysroot's report folded without writing it: what add_report() counts per pair is a counter,
// so each distinct contribution goes through add_report() once, in a report holding one
// representative pair of each kind (the same reader and the same checks as a report file), and the
// other pairs of that kind are added as counts. Memory grows with the kinds (rules, host-bridge
// IDs, copy results), never with the pairs.
//
// A pair's kind is what add_report() reads of it, and nothing more is computed: of its kernel
// verdict, whether it is refused and at which host bridges' whitelist checks (the index's outcome,
// equal to the verdict's, p2pdma_index_test); of its decision, the rule and the action (the
// evaluator's memo: its group is the one decide_in_full() would give, policy tests). No verdict
// texts, no fact set per pair, no JSON per pair.
AggregateState fold_machine(const MachineAnalysis& machine, const std::string& tool_version, const std::string& origin,
                            const std::string& input_id) {
  using ordered_json = nlohmann::ordered_json;
  const Topology& topo = machine.topo;
  // With the host name: it names the machine (docs/fleet.md, "Machines"); nothing else is kept.
  ordered_json report = report_head(machine, {tool_version, false});

  // kernel_verdicts: refused ones by their refused_at list (root devices' IDs); the others count nothing.
  std::map<std::vector<std::string>, std::uint64_t> refused;
  // decisions: by rule ("" when none decided) and action.
  std::map<std::pair<std::string, std::string>, std::uint64_t> decided;
  policy::PolicyEvaluator evaluator(topo, machine.kernel, machine.rules, machine.evidence);
  const P2pdmaIndex& index = evaluator.index();
  std::vector<std::string> refused_at;
  const auto devices = matrix_devices(topo, false);
  for (const auto& p : devices)
    for (const auto& c : devices) {
      if (p.index == c.index) continue;
      PairOutcome o = index.outcome(p.index, c.index);
      if (o.p2pdma_distance && *o.p2pdma_distance < 0) {
        refused_at.clear();
        for (size_t h = 0; h < o.whitelist_check_count; ++h) {
          const WhitelistCheck& check = o.whitelist_checks[h];
          if (check.passed == false && check.root_device) {
            const Function& root = topo.functions[*check.root_device];
            refused_at.push_back(fmt::format("{:04x}:{:04x}", root.vendor, root.device));
          }
        }
        ++refused[refused_at];
      }
      const policy::DecisionGroup& group = evaluator.groups()[evaluator.decide(p.index, c.index)];
      ++decided[{group.rule, policy::to_string(group.action)}];
    }
  ordered_json verdicts = ordered_json::array(), decisions = ordered_json::array();
  for (const auto& [ids, n] : refused) verdicts.push_back({{"verdict", "refused"}, {"refused_at", ids}});
  for (const auto& [key, n] : decided)
    decisions.push_back({{"decision", key.second}, {"rule", key.first.empty() ? ordered_json(nullptr) : ordered_json(key.first)}});

  // candidates: each with one pair per distinct copy_result.
  struct Extra {
    std::string id;
    std::uint64_t pairs = 0, verified = 0, corrupt = 0, failed = 0;
  };
  std::vector<Extra> extras;
  ordered_json candidates = ordered_json::array();
  WhitelistOptions counted;
  counted.count_pairs_only = true;
  for (auto& cand : whitelist_candidates(machine.topo, machine.kernel, machine.evidence, counted)) {
    ordered_json c = candidate_head(machine.topo, cand);
    Extra extra{cand.id()};
    ordered_json kept = ordered_json::array();
    for (const auto& [result, n] : cand.copy_results) {
      // add_report() reads a pair's copy_result only.
      kept.push_back({{"copy_result", result.empty() ? ordered_json(nullptr) : ordered_json(result)}});
      extra.pairs += n - 1;
      if (result == "verified") extra.verified += n - 1;
      if (result == "corrupt") extra.corrupt += n - 1;
      if (result == "failed") extra.failed += n - 1;
    }
    c["pairs"] = std::move(kept);
    candidates.push_back(std::move(c));
    extras.push_back(std::move(extra));
  }
  report["kernel_verdicts"] = std::move(verdicts);
  report["decisions"] = std::move(decisions);
  report["candidates"] = std::move(candidates);
  report["probe"] = {{"source", machine.probe.source}, {"note", machine.probe.note}, {"asked", machine.probe.asked}};

  // Through the same reader as a report file, so a snapshot and its report count the same.
  AggregateState one;
  one.add_report(json(std::move(report)), origin, input_id);
  // The other pairs of each kind, counted under the keys add_report() chose (one kernel).
  AggregateState more;
  std::string kernel = one.kernels.begin()->first;
  for (const auto& [ids, count] : refused) {
    std::uint64_t n = count - 1;
    more.kernels[kernel].refused_pairs += n;
    for (const auto& id : ids) more.host_bridge_ids[id].refused_pairs += n;
  }
  for (const auto& [key, count] : decided) {
    DecisionCounts& d = more.decisions[key.first.empty() ? std::string(kNoRuleKey) : key.first];
    std::uint64_t n = count - 1;
    (key.second == "peer" ? d.peer : key.second == "deny" ? d.deny : d.host_staged) += n;
  }
  for (const auto& e : extras) {
    HostBridgeIdStats& s = more.host_bridge_ids[e.id];
    s.unlockable_pairs += e.pairs, s.verified_copies += e.verified, s.corrupt_copies += e.corrupt,
        s.failed_copies += e.failed;
  }
  one.merge(more);
  return one;
}

// An input's own id, naming a machine whose input has no host name: FNV-1a 64 of a snapshot's
// bytes (read in blocks, nothing kept), of a sysroot directory's absolute path.
std::string input_id(const std::string& path, bool directory) {
  std::error_code ec;
  if (directory) return fnv1a64("sysroot:" + fs::absolute(path, ec).lexically_normal().string());
  std::ifstream in(path, std::ios::binary);
  std::uint64_t hash = 0xcbf29ce484222325u;
  std::vector<char> block(1 << 16);
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    for (std::streamsize i = 0; i < in.gcount(); ++i) hash = (hash ^ static_cast<unsigned char>(block[i])) * 0x100000001b3u;
  }
  if (in.bad()) throw InputError(fmt::format("{}: cannot be read again to name the machine", escape_text(path)));
  return fmt::format("fnv1a64:{:016x}", hash);
}

// Reads one input into a state of its own: a report's or partial's counts, or a sysroot's.
AggregateState read_input(const Input& in, const Analysis& analysis) {
  AggregateState one;
  InputKind kind = in.kind;
  std::string text;
  if (kind == InputKind::kJson || kind == InputKind::kUnknown || kind == InputKind::kPartial) {
    text = read_input_file(in.path, kMaxJsonInputBytes);
    if (kind == InputKind::kUnknown) kind = sniff(text);
  }
  if (kind == InputKind::kJson || kind == InputKind::kPartial) {
    json doc = parse_fleet_json(text, in.path);
    std::string id = fnv1a64(text);
    text.clear();
    one.add_document(doc, in.path, kind == InputKind::kPartial, id);  // a partial only with --merge
    return one;
  }
  Sysroot root = Sysroot::open(in.path);
  with_sysroot_analysis(root, analysis.kernel_data, analysis.rules, [&](const MachineAnalysis& machine) {
    std::string id = machine.topo.platform.hostname.empty()
                         ? input_id(in.path, kind == InputKind::kSysrootDirectory)
                         : std::string();
    one = fold_machine(machine, analysis.tool_version, in.path, id);
  });
  return one;
}

// One input read: its state, or why it was skipped.
struct Outcome {
  std::string path;
  std::optional<AggregateState> state;
  std::string reason;
};

// Merges the inputs' states in the order they were found, whichever worker finishes first: of a
// machine given twice, the first found is counted (merge_new_machines) and the other skipped as a
// duplicate, the same with any --jobs. States that finished early wait here (one machine's counts
// each, not its pairs), at most `window` of them: a worker that ran that far ahead of a slow input
// waits for it (the slow input's own worker never waits, so this cannot deadlock).
class OrderedMerge {
 public:
  OrderedMerge(AggregateState& state, Progress& progress, std::uint64_t window)
      : state_(state), progress_(progress), window_(window) {}
  void done(std::uint64_t seq, Outcome outcome) {
    std::unique_lock lock(mutex_);
    caught_up_.wait(lock, [&] { return seq < next_ + window_; });
    waiting_.try_emplace(seq, std::move(outcome));
    std::uint64_t before = next_;
    for (auto it = waiting_.begin(); it != waiting_.end() && it->first == next_; it = waiting_.erase(it), ++next_) {
      Outcome& o = it->second;
      std::optional<std::string> duplicate;
      if (o.state && !(duplicate = state_.merge_new_machines(*o.state))) {
        ++read_;
        progress_.read();
        continue;
      }
      state_.skipped.push_back({escape_bytes(o.path), duplicate ? *duplicate : std::move(o.reason)});
      progress_.skipped(state_.skipped.back());
    }
    if (next_ != before) caught_up_.notify_all();
  }
  std::uint64_t read() const { return read_; }

 private:
  AggregateState& state_;
  Progress& progress_;
  std::uint64_t window_;
  std::mutex mutex_;
  std::condition_variable caught_up_;
  std::map<std::uint64_t, Outcome> waiting_;
  std::uint64_t next_ = 0, read_ = 0;
};

// Reads one input into a state of its own, complete or not at all: an input that fails half-way
// (bad data, out of memory) adds nothing but its line in `skipped`.
Outcome fold(const Input& in, const Analysis& analysis, const AggregateOptions& options) {
  std::string reason;
  try {
    AggregateState one = read_input(in, analysis);
    if (options.fail_input) options.fail_input(in.path);
    return {in.path, std::move(one), ""};
  } catch (const InputError& e) {
    reason = reason_of(e.what(), in.path);
  } catch (const std::bad_alloc&) {
    reason = "cannot be read: out of memory while reading it";
  } catch (const std::exception& e) {
    // Never fatal: an input that trips anything else is still one bad input among thousands.
    reason = std::string("cannot be read: ") + escape_text(e.what());
  }
  return {in.path, std::nullopt, std::move(reason)};
}

// The CPUs this process may run on, from its affinity mask: unlike hardware_concurrency(), which
// reads the host's /sys/devices/system/cpu/online, no file is opened (docs/security.md).
unsigned usable_cpus() {
  for (size_t cpus = 1024; cpus <= 65536; cpus *= 4) {
    cpu_set_t* set = CPU_ALLOC(cpus);
    if (!set) return 1;
    size_t size = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(size, set);
    int got = sched_getaffinity(0, size, set) == 0 ? CPU_COUNT_S(size, set) : -1;
    CPU_FREE(set);
    if (got > 0) return static_cast<unsigned>(got);
    if (got == 0 || errno != EINVAL) return 1;
  }
  return 1;
}

}  // namespace

AggregateResult aggregate(const std::vector<std::string>& inputs, const AggregateOptions& options) {
  Analysis analysis{load_kernel_rule_data(fs::path(options.rules_dir) / "kernel"),
                    policy::RuleSet::load(policy::default_rule_files(options.rules_dir)), options.tool_version};
  unsigned jobs = options.jobs ? options.jobs : usable_cpus();

  Progress progress(options);
  InputQueue queue(4 * size_t{jobs});
  AggregateResult result;
  OrderedMerge merged(result.state, progress, 64 * std::uint64_t{jobs});
  std::vector<SkippedInput> walk_skipped;
  std::vector<std::thread> workers;
  for (unsigned w = 0; w < jobs; ++w)
    workers.emplace_back([&] {
      while (auto in = queue.pop()) {
        try {
          merged.done(in->seq, fold(*in, analysis, options));
        } catch (...) {
          // Only when even naming the skipped input failed (memory still short): an exception
          // leaving a thread would end the whole run, so the input is dropped with what can be said.
          try {
            merged.done(in->seq, {in->path, std::nullopt, "cannot be read: out of memory"});
          } catch (...) {
          }
        }
      }
    });

  auto stop_workers = [&] {
    queue.close();
    for (auto& t : workers) t.join();
  };
  try {
    Walk walk(queue, walk_skipped, progress);
    for (const auto& path : inputs) walk.named(path);
    for (const auto& path : options.partials) walk.partial(path);
  } catch (...) {
    stop_workers();  // a thread still joinable at unwinding would end the process
    throw;
  }
  stop_workers();
  result.state.skipped.insert(result.state.skipped.end(), walk_skipped.begin(), walk_skipped.end());
  result.inputs_read = merged.read();
  progress.finish();
  return result;
}

}  // namespace p2paudit::fleet
