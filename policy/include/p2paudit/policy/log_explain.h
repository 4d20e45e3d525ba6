// SPDX-License-Identifier: GPL-2.0-or-later
// The kernel log's events (kernel_log.h) explained against the tool's own prediction for the
// machine (docs/log.md): which device each line is about, which pair of devices it hit, what the
// tool predicted for that pair (the kernel's verdict from our pci_p2pdma_distance(), the policy's
// decision and its rule), whether the two agree, and what to do. An event that contradicts a
// `peer` or allowed prediction is the tool's own bug report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/kernel_log.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/text_style.h"

namespace p2paudit::policy {

inline constexpr int kLogSchemaVersion = 1;

// How the event compares with the prediction for its pair.
enum class LogAgreement {
  kAgrees,       // the tool predicted it: a logged refusal of a pair it predicted refused, a fault on a
                 // pair it kept off peer DMA
  kContradicts,  // the tool predicted `peer` or allowed: the tool's own bug (docs/log.md says what to send)
  kUnknown,      // no pair, a device the tool does not see, or a prediction that depends on unknown facts
  kNotTested,    // the event says nothing the prediction could be wrong about (an AER line, an Xid
                 // without a fault on a pair, a host bridge's note)
};
const char* to_string(LogAgreement a);  // "agrees", "contradicts", "unknown", "not_tested"

// One function the log names, as the machine knows it.
struct LogDevice {
  Bdf bdf;
  std::optional<size_t> index;  // in the topology; nullopt: a device the tool does not see
};

// An event with its pair and the prediction; identical events (same kind, source, devices and
// detail) are kept once with a count.
struct ExplainedEvent {
  LogEvent event;                        // the first line of its kind
  uint64_t count = 1;                    // lines that were this event
  std::optional<LogDevice> device, peer;  // as the line names them (peer: also a fault's BAR owner)
  // The pair the prediction is for, as (provider, client) topology indices, and how it was found
  // ("named by the line", "the fault's address is in BAR 0 of ...", "the only other GPU ...").
  std::optional<std::pair<size_t, size_t>> pair;
  std::string pair_basis;
  // The prediction for the pair: the kernel's verdict and the policy's decision.
  std::optional<int> kernel_distance;    // pci_p2pdma_distance(): -1 refused; nullopt unknown
  std::string kernel_map_type;           // "BUS_ADDR", "THRU_HOST_BRIDGE", "NOT_SUPPORTED", "UNKNOWN"
  std::string kernel_reason;
  std::optional<Action> decision;
  bool decision_certain = true;
  std::string rule;                      // the deciding rule
  std::string decision_reason;
  std::vector<std::string> fired;        // every rule that fired for the pair, warnings included
  LogAgreement agreement = LogAgreement::kUnknown;
  std::string predicted_by;              // what in the tool predicted it (agrees) or missed it (contradicts)
  std::string explanation;               // one sentence: what the event means for the pair
  std::string remedy;
  // A host bridge the event speaks for or against as a whitelist entry ("8086:29c0"; "" none): a
  // refusal through a host bridge not in the table, a fault on a pair through one.
  std::string host_bridge_id;
};

// What the tool predicted for one pair, worked out once per pair.
struct LogPrediction {
  std::optional<int> distance;
  std::string map_type, kernel_reason, kernel_remedy;
  std::optional<bool> logs_refusal, logs_acs;  // the verdict's own log has the line; nullopt: incomplete log
  Action action = Action::kHostStaged;
  bool certain = true;
  std::string rule, reason, remedy;
  std::vector<std::string> fired;              // fired and findings ids
  std::string iommu_remedy;                    // the iommu-translating warning's remedy, when it fired
  std::string unwhitelisted_host_bridge;       // a host bridge on the path without a table entry
};

struct LogExplainOptions {
  size_t max_events = 1000;  // distinct events kept; more are counted, not kept
};

// The explanation of a whole log, built one event at a time: memory grows with the distinct events
// kept (at most max_events) and the pairs predicted, never with the log's length.
class LogExplainer {
 public:
  // Keeps a reference to the evaluator (and so to what it refers to).
  LogExplainer(PolicyEvaluator& evaluator, const KernelRules& kernel, LogExplainOptions options = {});
  void add(const LogEvent& event);
  // Pairs single-device events (AER, Xid) with the peer the log's other events pair them with,
  // where there is exactly one; call once, after the last add().
  void finish();

  const std::vector<ExplainedEvent>& events() const { return events_; }
  uint64_t events_seen() const { return seen_; }
  uint64_t events_dropped() const { return dropped_; }  // event lines not kept: past max_events distinct
  uint64_t contradictions() const { return contradictions_; }  // lines, kept or not
  uint64_t agreements() const { return agreements_; }

 private:
  ExplainedEvent explain(const LogEvent& event);
  void predict(ExplainedEvent& e, size_t provider, size_t client);
  void judge(ExplainedEvent& e);
  std::optional<std::pair<size_t, std::string>> bar_owner(uint64_t address);
  std::optional<Bdf> with_segment(const Bdf& printed, std::string* why);

  // The functions' memory BARs sorted by start, built at the first fault: a fault storm costs
  // O(log BARs) a line. A BAR that overlaps another (a hostile capture) owns no address.
  struct BarSpan {
    uint64_t start, size;
    size_t function;
    int index;
    bool overlaps;
  };
  std::optional<std::vector<BarSpan>> bar_spans_;
  // Bus, device and function (bus << 8 | devfn) -> the functions that have them, at most two:
  // built at the first line that names a requester without its segment.
  std::optional<std::map<uint16_t, std::vector<Bdf>>> without_segment_;

  PolicyEvaluator& evaluator_;
  const KernelRules& kernel_;
  LogExplainOptions options_;
  std::vector<ExplainedEvent> events_;
  std::map<std::string, size_t> by_key_;
  std::map<std::pair<size_t, size_t>, LogPrediction> predictions_;
  std::optional<size_t> last_acs_;  // the last ACS warning kept: the kernel's remedy line follows it  // at most max_events, then cleared
  uint64_t seen_ = 0, dropped_ = 0, contradictions_ = 0, agreements_ = 0;
};

// What the log was and how far it was read, for the outputs.
struct LogSource {
  std::string name;                 // "/dev/kmsg", a file, "-"
  std::vector<std::string> notes;   // the reader's (limits reached) and the command's
  uint64_t lines = 0;
  bool readable = true;             // false: the log could not be read (nothing was checked)
  std::string unreadable_reason;
};

// The text `log` and `watch` print: each event pair by pair with the prediction, then the counts;
// "no events" when there were none. Every byte from the log is escaped.
void write_log_text(std::ostream& out, const Topology& topo, const LogExplainer& explained, const LogSource& source,
                    const TextStyle& style = {});
// {"schema_version", "source", "lines", "notes", "readable", "events": [...], "events_seen",
//  "events_dropped", "contradictions", "agreements", "attach"} (docs/json.md, docs/schemas/log.schema.json).
nlohmann::ordered_json log_json(const Topology& topo, const LogExplainer& explained, const LogSource& source);

// A saved log (a regular file: `dmesg`, `journalctl -k`, /dev/kmsg records) read into `explainer`
// (finish() called); throws InputError naming `path` when it is not a readable regular file.
LogSource explain_log_file(const std::string& path, LogExplainer& explainer);
// The same file, each line to `sink` (nothing explained, finish() not called).
LogSource read_log_file(const std::string& path, const std::function<void(KernelLogLine&&)>& sink);

// The log that tells about the machine read from `sysroot`, each line to `sink`: for the live
// machine ("/"), this boot's /dev/kmsg from record `since` on (all when nullopt); for a capture,
// the log it holds (`snapshot --with-log`). Never this machine's log for another machine's tree:
// throws InputError when the capture holds none (or `since` is given for one), or for an lspci
// dump (from_dump), saying that a saved log (`log --from`) settles it.
LogSource read_machine_log(const std::string& sysroot, bool from_dump, std::optional<uint64_t> since,
                           const std::function<void(KernelLogLine&&)>& sink);

// What to attach to an issue when an event contradicts the prediction.
std::string contradiction_attachments();

}  // namespace p2paudit::policy
