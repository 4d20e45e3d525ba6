// SPDX-License-Identifier: GPL-2.0-or-later
// The kernel log's events against the tool's prediction (docs/log.md): the pair each event hit,
// the kernel's verdict and the policy's decision for that pair, whether they agree, the remedy.
#include "p2paudit/policy/log_explain.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <cctype>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "p2paudit/device_class.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/kernel_log_snapshot.h"
#include "p2paudit/sysroot.h"

namespace p2paudit::policy {

const char* to_string(LogAgreement a) {
  switch (a) {
    case LogAgreement::kAgrees: return "agrees";
    case LogAgreement::kContradicts: return "contradicts";
    case LogAgreement::kUnknown: return "unknown";
    case LogAgreement::kNotTested: return "not_tested";
  }
  return "unknown";
}

LogSource explain_log_file(const std::string& path, LogExplainer& explainer) {
  LogSource source = read_log_file(path, [&](KernelLogLine&& line) {
    if (auto e = recognise_kernel_log_line(line)) explainer.add(*e);
  });
  explainer.finish();
  return source;
}

LogSource read_log_file(const std::string& path, const std::function<void(KernelLogLine&&)>& sink) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw InputError(fmt::format("{}: {}", escape_line(path), std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw InputError(fmt::format("{}: not a regular file", escape_line(path)));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: {}", escape_line(path), std::strerror(errno)));
  LogSource source;
  source.name = path;
  source.notes = read_kernel_log(in, path, {}, [&](KernelLogLine&& line) {
    ++source.lines;
    sink(std::move(line));
  });
  return source;
}

LogSource read_machine_log(const std::string& sysroot, bool from_dump, std::optional<uint64_t> since,
                           const std::function<void(KernelLogLine&&)>& sink) {
  LogSource source;
  auto feed = [&](KernelLogLine&& line) {
    ++source.lines;
    sink(std::move(line));
  };
  if (!from_dump && sysroot == "/") {
    source.name = "/dev/kmsg";
    source.notes = read_kmsg(since, {}, feed);
  } else {
    if (since)
      throw InputError(fmt::format("{}: a position in the kernel log is this machine's, not the capture's: read the "
                                   "capture's whole log", escape_line(sysroot)));
    std::optional<std::string> carried;
    if (!from_dump) carried = read_snapshot_kernel_log(Sysroot::open(sysroot));
    if (!carried)
      throw InputError(fmt::format("{}: {} no kernel log (`p2paudit snapshot --with-log` stores one); give the "
                                   "machine's saved dmesg (`log --from FILE`)",
                                   escape_line(sysroot), from_dump ? "an lspci dump carries" : "this capture holds"));
    source.name = sysroot + ": " + kKernelLogPath;
    std::istringstream text(*carried);
    source.notes = read_kernel_log(text, source.name, {}, feed);
  }
  return source;
}

std::string contradiction_attachments() {
  return "the snapshot of this machine (`sudo p2paudit snapshot --with-log --redact -o machine.tar.gz`, taken in the "
         "same boot: it carries the log too) "
         "and these events as JSON (`p2paudit log --format json` or `watch --format json`), with the command that ran";
}

namespace {

std::string hex_id(const Function& f) { return fmt::format("{:04x}:{:04x}", f.vendor, f.device); }

// The pair's prediction (decide_in_full() builds the verdict's texts).
LogPrediction make_prediction(PolicyEvaluator& evaluator, size_t provider, size_t client) {
  const Topology& topo = evaluator.topology();
  PairDecision d = evaluator.decide_in_full(provider, client);
  LogPrediction p;
  p.distance = d.verdict.p2pdma_distance;
  p.map_type = to_string(d.verdict.map_type);
  p.kernel_reason = d.verdict.reason;
  if (const auto* v = d.facts.get("kernel.remedy"); v && std::holds_alternative<std::string>(*v))
    p.kernel_remedy = std::get<std::string>(*v);
  if (d.verdict.kernel_log_complete) {
    auto logs = [&](std::string_view text) {
      return std::any_of(d.verdict.kernel_log.begin(), d.verdict.kernel_log.end(),
                         [&](const std::string& l) { return l.find(text) != std::string::npos; });
    };
    p.logs_refusal = logs("cannot be used for peer-to-peer DMA");
    p.logs_acs = logs("ACS redirect is set between the client and provider");
  }
  p.action = d.decision.action;
  p.certain = d.decision.certain();
  p.rule = d.decision.rule;
  p.reason = d.decision.reason;
  p.remedy = d.decision.remedy;
  for (const auto& f : d.decision.fired) {
    p.fired.push_back(f.id);
    if (f.id == "iommu-translating") p.iommu_remedy = f.remedy;
  }
  for (const auto& f : d.decision.findings)
    if (std::find(p.fired.begin(), p.fired.end(), f.id) == p.fired.end()) p.fired.push_back(f.id);
  for (const auto& hb : d.verdict.host_bridges)
    if (hb.root_device && !hb.entry && hb.passed == false) {
      p.unwhitelisted_host_bridge = hex_id(topo.functions[*hb.root_device]);
      break;
    }
  return p;
}

// The Xid number at the start of an Xid event's detail ("79, pid=..., GPU has fallen off the bus").
std::optional<int> xid_number(const std::string& detail) {
  size_t i = 0;
  while (i < detail.size() && !std::isdigit(static_cast<unsigned char>(detail[i]))) {
    if (i > 8) return std::nullopt;
    ++i;
  }
  int n = 0;
  size_t digits = 0;
  for (; i < detail.size() && std::isdigit(static_cast<unsigned char>(detail[i])) && digits < 4; ++i, ++digits)
    n = n * 10 + (detail[i] - '0');
  return digits ? std::optional<int>(n) : std::nullopt;
}

// What an Xid means for peer traffic and what to do: the numbers of NVIDIA's Xid catalogue
// (https://docs.nvidia.com/deploy/xid-errors/index.html) that bear on a peer path.
std::pair<std::string, std::string> xid_meaning(std::optional<int> xid) {
  switch (xid.value_or(-1)) {
    case 79:
      return {"Xid 79: the GPU has fallen off the bus (it stopped answering on PCIe)",
              "check the link and power (`p2paudit topology` shows the link's state); reseat or move the card; a "
              "peer copy through a path the policy stages can provoke it: keep such pairs host-staged"};
    case 31:
      return {"Xid 31: the GPU's MMU faulted on an address it was given (a peer mapping that was not reachable "
              "is one cause)",
              "where the pair is not decided peer, stage its copies through host memory (NCCL_P2P_DISABLE=1 or "
              "`p2paudit policy --format env`)"};
    case 74: return {"Xid 74: an NVLink error", "check the NVLink links (`nvidia-smi nvlink -s`); reset the GPUs"};
    case 48:
    case 94:
    case 95: return {"an ECC memory error of the GPU", "follow NVIDIA's Xid catalogue for this number; not a peer-path fault"};
    case 119:
    case 120: return {"a GSP firmware error", "update the driver; reset the GPU"};
    default: return {"an NVIDIA Xid error", "look the number up in NVIDIA's Xid catalogue"};
  }
}

std::string describe(const std::optional<LogDevice>& d) {
  if (!d) return "(none)";
  if (!d->index) return d->bdf.str() + " (a device the tool does not see on this machine)";
  return d->bdf.str();
}

}  // namespace

LogExplainer::LogExplainer(PolicyEvaluator& evaluator, const KernelRules& kernel, LogExplainOptions options)
    : evaluator_(evaluator), kernel_(kernel), options_(options) {}

std::optional<std::pair<size_t, std::string>> LogExplainer::bar_owner(uint64_t address) {
  const Topology& topo = evaluator_.topology();
  if (!bar_spans_) {
    std::vector<BarSpan> spans;
    for (size_t i = 0; i < topo.functions.size(); ++i)
      for (const auto& bar : topo.functions[i].bars)
        if (!bar.io && bar.size) spans.push_back({bar.start, bar.size, i, bar.index, false});
    std::sort(spans.begin(), spans.end(), [](const BarSpan& a, const BarSpan& b) { return a.start < b.start; });
    // Overlaps: a span whose start lies before the furthest end seen so far, and that span.
    uint64_t furthest_end = 0;  // one past the last byte
    std::optional<size_t> furthest;
    for (size_t k = 0; k < spans.size(); ++k) {
      const uint64_t end = spans[k].start + std::min(spans[k].size, ~uint64_t{0} - spans[k].start);
      if (furthest && spans[k].start < furthest_end) spans[k].overlaps = spans[*furthest].overlaps = true;
      if (!furthest || end > furthest_end) furthest_end = end, furthest = k;
    }
    bar_spans_ = std::move(spans);
  }
  const auto& spans = *bar_spans_;
  auto after = std::upper_bound(spans.begin(), spans.end(), address,
                                [](uint64_t a, const BarSpan& s) { return a < s.start; });
  if (after == spans.begin()) return std::nullopt;
  const BarSpan& s = *std::prev(after);
  if (s.overlaps || address - s.start >= s.size) return std::nullopt;
  return std::pair<size_t, std::string>{
      s.function, fmt::format("the fault's address {:#x} is in BAR {} of {} ({:#x}, {} bytes)", address, s.index,
                              topo.functions[s.function].bdf.str(), s.start, s.size)};
}

// A requester printed without its PCI segment ("BB:DD.F": DMAR, AMD-Vi before segments) is the
// function of that bus, device and function in the machine's one segment that has it; where two
// segments have one, the line does not say which (nullopt, *why says so), never segment 0 guessed.
std::optional<Bdf> LogExplainer::with_segment(const Bdf& printed, std::string* why) {
  auto key = [](const Bdf& b) { return static_cast<uint16_t>((b.bus << 8) | b.devfn()); };
  if (!without_segment_) {
    std::map<uint16_t, std::vector<Bdf>> by_key;
    for (const auto& f : evaluator_.topology().functions) {
      auto& same = by_key[key(f.bdf)];
      if (same.size() < 2 && std::find(same.begin(), same.end(), f.bdf) == same.end()) same.push_back(f.bdf);
    }
    without_segment_ = std::move(by_key);
  }
  auto it = without_segment_->find(key(printed));
  if (it == without_segment_->end()) return printed;  // no segment has it: a device the tool does not see
  const std::vector<Bdf>& matches = it->second;
  if (matches.size() == 1) return matches.front();
  *why = fmt::format("the line names {:02x}:{:02x}.{} without its PCI segment, and segments {:04x} and {:04x} both "
                     "have one: the device is not known",
                     printed.bus, printed.dev, printed.fn, matches[0].domain, matches[1].domain);
  return std::nullopt;
}

void LogExplainer::predict(ExplainedEvent& e, size_t provider, size_t client) {
  // Remembered per pair: a storm of faults on one pair is predicted once. Bounded like the events.
  auto key = std::make_pair(provider, client);
  auto it = predictions_.find(key);
  if (it == predictions_.end()) {
    if (predictions_.size() >= options_.max_events) predictions_.clear();
    it = predictions_.emplace(key, make_prediction(evaluator_, provider, client)).first;
  }
  const LogPrediction& p = it->second;
  e.pair = std::make_pair(provider, client);
  e.kernel_distance = p.distance;
  e.kernel_map_type = p.map_type;
  e.kernel_reason = p.kernel_reason;
  e.decision = p.action;
  e.decision_certain = p.certain;
  e.rule = p.rule;
  e.decision_reason = p.reason;
  e.fired = p.fired;
  const Topology& topo = evaluator_.topology();
  const std::string pair = fmt::format("{} -> {}", topo.functions[provider].bdf.str(), topo.functions[client].bdf.str());
  const std::string policy_words =
      fmt::format("the policy decides {} by {}", to_string(p.action), p.rule.empty() ? "no rule" : p.rule);
  auto kernel_rule_named = [&] {
    return std::find(p.fired.begin(), p.fired.end(), "kernel-refuses") != p.fired.end() ? " (policy rule kernel-refuses)"
                                                                                           : "";
  };
  switch (e.event.kind) {
    case LogEventKind::kP2pdmaRefused:
      e.remedy = p.kernel_remedy;
      e.host_bridge_id = p.unwhitelisted_host_bridge;
      if (!p.distance) {
        e.agreement = LogAgreement::kUnknown;
        e.explanation = fmt::format("the kernel refused {}; the tool could not tell its verdict ({}): the line settles it",
                                    pair, p.kernel_reason);
      } else if (*p.distance < 0) {
        e.agreement = LogAgreement::kAgrees;
        e.predicted_by = fmt::format("pci_p2pdma_distance() for kernel {}{}", kernel_.release.version(), kernel_rule_named());
        e.explanation = fmt::format("the kernel refused {} as predicted: {}", pair, p.kernel_reason);
      } else {
        e.agreement = LogAgreement::kContradicts;
        e.predicted_by = fmt::format("pci_p2pdma_distance() for kernel {} predicted {} (distance {})",
                                     kernel_.release.version(), p.map_type, *p.distance);
        e.explanation = fmt::format("the kernel refused {}, which the tool predicted allowed: {}", pair, p.kernel_reason);
      }
      break;
    case LogEventKind::kAcsRedirect:
      e.remedy = p.kernel_remedy;
      if (!p.logs_acs) {
        e.agreement = LogAgreement::kUnknown;
        e.explanation = fmt::format("the kernel found ACS redirect on the path of {}; the tool could not read every "
                                    "port's ACS bits to predict it", pair);
      } else if (*p.logs_acs) {
        e.agreement = LogAgreement::kAgrees;
        e.predicted_by = fmt::format("pci_p2pdma_distance() for kernel {} (its ACS walk)", kernel_.release.version());
        e.explanation = fmt::format("ACS redirect on the path of {}, as predicted: peer requests go up to the root "
                                    "complex{}", pair, p.distance && *p.distance < 0 ? " and the kernel refuses the pair" : "");
      } else {
        e.agreement = LogAgreement::kContradicts;
        e.predicted_by = fmt::format("pci_p2pdma_distance() for kernel {} found no ACS redirect on the path",
                                     kernel_.release.version());
        e.explanation = fmt::format("the kernel found ACS redirect on the path of {}, which the tool did not", pair);
      }
      break;
    case LogEventKind::kIommuFault: {
      e.host_bridge_id = p.unwhitelisted_host_bridge;
      const std::string iommu = topo.platform.iommu_mode;
      if (!p.iommu_remedy.empty())
        e.remedy = p.iommu_remedy;
      else if (iommu == "translated" || iommu == "unknown" || iommu.empty())
        e.remedy = "add iommu=pt to the kernel command line (DMA of host-owned devices is then untranslated)";
      else
        e.remedy = fmt::format("the machine's IOMMU mode reads {} here: check that the snapshot is of this boot "
                               "(`p2paudit snapshot` now) and that the device is not in a VFIO or translated group",
                               iommu);
      if (p.action != Action::kPeer) {
        e.agreement = LogAgreement::kAgrees;
        e.predicted_by = fmt::format("policy rule {} ({})", p.rule.empty() ? "(fallback)" : p.rule, to_string(p.action));
        e.explanation = fmt::format("{} faulted on peer DMA ({}); {}: the rule should have kept the pair off peer DMA, "
                                    "and the workload tried it anyway", pair, e.event.source, policy_words);
        if (!p.remedy.empty() && p.iommu_remedy.empty()) e.remedy = p.remedy;
      } else {
        e.agreement = p.certain ? LogAgreement::kContradicts : LogAgreement::kUnknown;
        e.predicted_by = fmt::format("policy rule {} (peer)", p.rule);
        e.explanation = fmt::format("{} faulted on peer DMA ({}), which {}", pair, e.event.source, policy_words);
      }
      break;
    }
    case LogEventKind::kNvidiaXid:
    case LogEventKind::kAer:
    case LogEventKind::kVendorPeerMessage:
    case LogEventKind::kHostBridgeNotWhitelisted:
      if (p.action != Action::kPeer) {
        e.agreement = LogAgreement::kAgrees;
        e.predicted_by = fmt::format("policy rule {} ({})", p.rule.empty() ? "(fallback)" : p.rule, to_string(p.action));
        e.explanation += fmt::format("; for {} {}: peer DMA was not expected to work there", pair, policy_words);
      } else {
        e.agreement = LogAgreement::kNotTested;
        e.explanation += fmt::format("; for {} {}: this line alone does not show that peer DMA failed", pair, policy_words);
      }
      break;
  }
}

ExplainedEvent LogExplainer::explain(const LogEvent& event) {
  const Topology& topo = evaluator_.topology();
  ExplainedEvent e;
  e.event = event;
  auto seen = [&](const std::optional<Bdf>& b) -> std::optional<LogDevice> {
    if (!b) return std::nullopt;
    return LogDevice{*b, topo.index_of(*b)};
  };
  std::string segment_unknown;
  std::optional<Bdf> device = event.device;
  if (device && event.device_segment_unknown) device = with_segment(*device, &segment_unknown);
  e.device = seen(device);
  e.peer = seen(event.peer);
  const bool device_seen = e.device && e.device->index, peer_seen = e.peer && e.peer->index;
  auto unseen_text = [&] {
    std::vector<std::string> out;
    for (const auto* d : {&e.device, &e.peer})
      if (*d && !(*d)->index) out.push_back((*d)->bdf.str());
    return out.empty() ? std::string() : fmt::format("names {} which the tool does not see on this machine", fmt::join(out, " and "));
  };
  switch (event.kind) {
    case LogEventKind::kP2pdmaRefused:
    case LogEventKind::kAcsRedirect:
      if (device_seen && peer_seen) {
        e.pair_basis = "named by the line (client, then provider)";
        predict(e, *e.peer->index, *e.device->index);
      } else {
        e.explanation = e.device && e.peer ? "the line " + unseen_text() + ": no prediction to compare"
                                           : "the line names no pair the tool could read" +
                                                 (event.detail.empty() ? std::string() : " (" + event.detail + ")");
        e.agreement = e.device && e.peer ? LogAgreement::kUnknown : LogAgreement::kNotTested;
      }
      break;
    case LogEventKind::kHostBridgeNotWhitelisted:
      if (device_seen) {
        const Function& root = topo.functions[*e.device->index];
        e.host_bridge_id = hex_id(root);
        bool listed = whitelist_entry(kernel_, root).has_value();
        e.agreement = listed ? LogAgreement::kContradicts : LogAgreement::kAgrees;
        e.predicted_by = fmt::format("the whitelist table of kernel {} ({} entry for {})", kernel_.release.version(),
                                     listed ? "an" : "no", e.host_bridge_id);
        e.explanation = fmt::format("the kernel's whitelist has no entry for host bridge {} ({}){}", e.host_bridge_id,
                                    root.bdf.str(), listed ? ", which the tool's table for this kernel has" : ", as predicted");
        e.remedy = "`p2paudit whitelist` lists the pairs an entry for it would unlock and the evidence it needs";
      } else {
        e.explanation = "the line " + unseen_text();
      }
      break;
    case LogEventKind::kIommuFault:
      if (!device_seen) {
        e.explanation = !segment_unknown.empty() ? segment_unknown
                        : e.device             ? "the fault " + unseen_text()
                                               : "the fault names no device the tool could read";
        break;
      }
      if (!event.address) {
        e.explanation = "the fault gives no address to match against the devices' BARs: the pair is unknown";
        break;
      }
      if (auto owner = bar_owner(*event.address)) {
        if (owner->first == *e.device->index) {
          e.explanation = owner->second + ", the device's own: not a peer's memory";
          break;
        }
        e.peer = LogDevice{topo.functions[owner->first].bdf, owner->first};
        e.pair_basis = owner->second;
        predict(e, owner->first, *e.device->index);
      } else {
        e.explanation = fmt::format("the fault's address {:#x} is in no device's BAR on this machine (or in BARs that "
                                    "overlap, which name no one owner): not a peer's "
                                    "memory as this machine gives it (an address the IOMMU should have mapped, or host "
                                    "memory); the pair is unknown", *event.address);
        e.remedy = "check the driver's DMA mappings; where the IOMMU translates, iommu=pt removes the translation";
      }
      break;
    case LogEventKind::kNvidiaXid: {
      auto [meaning, remedy] = xid_meaning(xid_number(event.detail));
      e.explanation = meaning;
      e.remedy = remedy;
      e.agreement = LogAgreement::kNotTested;
      if (e.device && !device_seen) e.explanation += "; the line " + unseen_text();
      break;
    }
    case LogEventKind::kAer:
      e.explanation = "a PCIe Advanced Error Reporting error on " + describe(e.device);
      e.remedy = "check the link (`p2paudit topology` shows its speed and width); errors under peer traffic point at "
                 "the path between the pair";
      e.agreement = LogAgreement::kNotTested;
      break;
    case LogEventKind::kVendorPeerMessage:
      e.explanation = fmt::format("a {} message about peer access", event.source);
      e.agreement = LogAgreement::kNotTested;
      if (device_seen && peer_seen) {
        e.pair_basis = "named by the line";
        predict(e, *e.peer->index, *e.device->index);
      } else if (e.device && !device_seen) {
        e.explanation += "; the line " + unseen_text();
      }
      break;
  }
  return e;
}

void LogExplainer::judge(ExplainedEvent& e) {
  if (e.agreement == LogAgreement::kContradicts) ++contradictions_;
  if (e.agreement == LogAgreement::kAgrees) ++agreements_;
}

void LogExplainer::add(const LogEvent& event) {
  ++seen_;
  // "to disable ACS redirect for this path, add the kernel parameter: ..." follows the ACS warning
  // it belongs to (drivers/pci/p2pdma.c, calc_map_type_and_dist()): it is that event's remedy line,
  // not an event of its own.
  if (event.kind == LogEventKind::kAcsRedirect && !event.peer && event.device) {
    if (last_acs_ && events_[*last_acs_].event.device == event.device) {
      ExplainedEvent& warning = events_[*last_acs_];
      const std::string parameter = "pci=disable_acs_redir=";
      auto at = event.line.text.find(parameter);
      if (at != std::string::npos && warning.remedy.find(event.line.text.substr(at)) == std::string::npos)
        warning.remedy += (warning.remedy.empty() ? "" : "; the kernel says: ") + event.line.text.substr(at);
      return;
    }
  }
  // Identical events are one: kind, recogniser, devices and what the line says beyond them (an
  // Xid's number, not its pid; a fault's owner of the address, not the address).
  std::string detail = event.detail;
  if (event.kind == LogEventKind::kNvidiaXid) {
    auto n = xid_number(event.detail);
    detail = n ? std::to_string(*n) : "";
  } else if (event.kind == LogEventKind::kIommuFault) {
    detail.clear();
  }
  std::optional<size_t> owner;
  if (event.kind == LogEventKind::kIommuFault && event.address)
    if (auto o = bar_owner(*event.address)) owner = o->first;
  const std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}", static_cast<int>(event.kind), event.source,
                                      event.device ? event.device->str() : "", event.peer ? event.peer->str() : "",
                                      owner ? std::to_string(*owner) : (event.address ? "?" : ""), detail,
                                      event.driver);
  if (auto it = by_key_.find(key); it != by_key_.end()) {
    ExplainedEvent& e = events_[it->second];
    ++e.count;
    judge(e);
    if (event.kind == LogEventKind::kAcsRedirect && event.peer) last_acs_ = it->second;
    return;
  }
  ExplainedEvent e = explain(event);
  judge(e);
  if (events_.size() >= options_.max_events) {
    ++dropped_;
    return;
  }
  by_key_.emplace(key, events_.size());
  if (event.kind == LogEventKind::kAcsRedirect && event.peer) last_acs_ = events_.size();
  events_.push_back(std::move(e));
}

void LogExplainer::finish() {
  const Topology& topo = evaluator_.topology();
  // The peers the log's pair events name with each device.
  std::map<size_t, std::set<size_t>> peers_of;
  for (const auto& e : events_)
    if (e.pair && e.pair->first != e.pair->second) {
      peers_of[e.pair->first].insert(e.pair->second);
      peers_of[e.pair->second].insert(e.pair->first);
    }
  auto compute = [](const Function& f) {
    DeviceClass c = classify_device(f);
    return !f.is_virtfn && (c == DeviceClass::kGpu || c == DeviceClass::kAccelerator);
  };
  for (auto& e : events_) {
    if (e.pair || !(e.event.kind == LogEventKind::kNvidiaXid || e.event.kind == LogEventKind::kAer)) continue;
    if (!e.device || !e.device->index) continue;
    size_t dev = *e.device->index;
    std::optional<size_t> peer;
    if (auto it = peers_of.find(dev); it != peers_of.end()) {
      if (it->second.size() == 1) {
        peer = *it->second.begin();
        e.pair_basis = "the only device this log's other events pair it with";
      } else {
        e.explanation += fmt::format("; the log pairs it with {} devices: the pair is unknown", it->second.size());
        continue;
      }
    } else if (compute(topo.functions[dev])) {
      std::vector<size_t> others;
      for (size_t i = 0; i < topo.functions.size() && others.size() < 2; ++i)
        if (i != dev && compute(topo.functions[i])) others.push_back(i);
      if (others.size() == 1) {
        peer = others.front();
        e.pair_basis = "the only other GPU or accelerator on this machine (if the workload used a peer, it was this one)";
      }
    }
    if (!peer) {
      e.explanation += "; one device only: the pair is unknown (no single peer was in use as far as the log shows)";
      continue;
    }
    // Counted again under the pair's verdict: take back what the event counted as not tested.
    LogAgreement before = e.agreement;
    predict(e, *peer, dev);
    for (uint64_t i = 0; i < e.count && before != e.agreement; ++i) judge(e);
  }
}

namespace {

std::string location(const KernelLogLine& line) {
  if (!line.stamp.empty()) return escape_line(line.stamp);
  return fmt::format("line {}", line.line_number);
}

std::string pair_text(const Topology& topo, const ExplainedEvent& e) {
  return fmt::format("{} -> {}", topo.functions[e.pair->first].bdf.str(), topo.functions[e.pair->second].bdf.str());
}

}  // namespace

void write_log_text(std::ostream& out, const Topology& topo, const LogExplainer& explained, const LogSource& source,
                    const TextStyle& style) {
  out << fmt::format("Kernel log: {} ({} lines read)\n", escape_line(source.name), source.lines);
  for (const auto& note : source.notes) out << "Note: " << escape_line(note) << "\n";
  if (!source.readable) {
    out << style.paint("not read", Tone::kUnknown) << ": " << escape_line(source.unreadable_reason)
        << "\nThe prediction could not be checked against the kernel log.\n";
    return;
  }
  const auto& events = explained.events();
  if (events.empty()) {
    out << "no events: no line about peer DMA, IOMMU faults, AER or Xid in what was read\n";
    return;
  }
  auto tone = [](LogAgreement a) {
    switch (a) {
      case LogAgreement::kAgrees: return Tone::kGood;
      case LogAgreement::kContradicts: return Tone::kBad;
      default: return Tone::kUnknown;
    }
  };
  // Pair by pair, in the order the pairs first appear; then the events without one.
  std::vector<std::pair<size_t, size_t>> order;
  for (const auto& e : events)
    if (e.pair && std::find(order.begin(), order.end(), *e.pair) == order.end()) order.push_back(*e.pair);
  auto write_event = [&](const ExplainedEvent& e) {
    out << fmt::format("  {} {}{}\n", location(e.event.line), escape_line(e.event.line.text),
                       e.count > 1 ? fmt::format(" (x{})", e.count) : "");
    if (e.event.line.truncated) out << "    (the line was cut)\n";
    if (e.device && !e.device->index) out << "    " << describe(e.device) << "\n";
    if (!e.pair_basis.empty() && e.pair) out << "    pair: " << escape_line(e.pair_basis) << "\n";
    out << "    " << style.paint(to_string(e.agreement), tone(e.agreement)) << ": " << escape_line(e.explanation) << "\n";
    if (!e.predicted_by.empty())
      out << "    " << (e.agreement == LogAgreement::kContradicts ? "missed by: " : "predicted by: ")
          << escape_line(e.predicted_by) << "\n";
    if (!e.remedy.empty()) out << "    fix: " << escape_line(e.remedy) << "\n";
    if (!e.host_bridge_id.empty())
      out << "    whitelist: evidence about host bridge " << e.host_bridge_id << " (`p2paudit whitelist --log FILE`)\n";
  };
  for (const auto& pair : order) {
    const ExplainedEvent* first = nullptr;
    for (const auto& e : events)
      if (e.pair == pair) {
        first = &e;
        break;
      }
    out << fmt::format("\n{}: kernel {} (pci_p2pdma_distance {}), policy {}{} by {}\n", pair_text(topo, *first),
                       first->kernel_map_type, first->kernel_distance ? std::to_string(*first->kernel_distance) : "unknown",
                       to_string(*first->decision), first->decision_certain ? "" : " (uncertain)",
                       first->rule.empty() ? "no rule" : first->rule);
    for (const auto& e : events)
      if (e.pair == pair) write_event(e);
  }
  bool header = false;
  for (const auto& e : events) {
    if (e.pair) continue;
    if (!header) out << "\nEvents without a pair:\n";
    header = true;
    write_event(e);
  }
  out << fmt::format("\n{} event line(s), {} distinct kept", explained.events_seen(), events.size());
  if (explained.events_dropped())
    out << fmt::format(", {} line(s) of further events counted, not kept (the limit is reached)", explained.events_dropped());
  out << fmt::format("; {} agree with the prediction, {} contradict it\n", explained.agreements(), explained.contradictions());
  if (explained.contradictions())
    out << style.paint("The tool's prediction was wrong", Tone::kBad)
        << ": this is a p2paudit bug. Please open an issue and attach " << contradiction_attachments() << ".\n";
}

nlohmann::ordered_json log_json(const Topology& topo, const LogExplainer& explained, const LogSource& source) {
  using J = nlohmann::ordered_json;
  auto device_json = [&](const std::optional<LogDevice>& d) -> J {
    if (!d) return nullptr;
    return J{{"bdf", d->bdf.str()}, {"seen", d->index.has_value()}};
  };
  J events = J::array();
  for (const auto& e : explained.events()) {
    const auto& l = e.event.line;
    J line = {{"text", l.text},
              {"stamp", l.stamp},
              {"seconds_since_boot", l.seconds_since_boot ? J(*l.seconds_since_boot) : J(nullptr)},
              {"sequence", l.sequence ? J(*l.sequence) : J(nullptr)},
              {"line_number", l.line_number},
              {"truncated", l.truncated}};
    J pair = nullptr, prediction = nullptr;
    if (e.pair) {
      pair = {{"provider", topo.functions[e.pair->first].bdf.str()},
              {"client", topo.functions[e.pair->second].bdf.str()},
              {"basis", e.pair_basis}};
      prediction = {{"kernel", {{"map_type", e.kernel_map_type},
                                {"p2pdma_distance", e.kernel_distance ? J(*e.kernel_distance) : J(nullptr)},
                                {"reason", e.kernel_reason}}},
                    {"policy", {{"decision", to_string(*e.decision)},
                                {"certain", e.decision_certain},
                                {"rule", e.rule.empty() ? J(nullptr) : J(e.rule)},
                                {"reason", e.decision_reason},
                                {"fired", e.fired}}}};
    }
    events.push_back(J{{"kind", to_string(e.event.kind)},
                       {"source", e.event.source},
                       {"count", e.count},
                       {"line", line},
                       {"driver", e.event.driver},
                       {"detail", e.event.detail},
                       {"device", device_json(e.device)},
                       {"peer", device_json(e.peer)},
                       {"address", e.event.address ? J(fmt::format("{:#x}", *e.event.address)) : J(nullptr)},
                       {"pair", pair},
                       {"prediction", prediction},
                       {"agreement", to_string(e.agreement)},
                       {"predicted_by", e.predicted_by},
                       {"explanation", e.explanation},
                       {"remedy", e.remedy},
                       {"host_bridge", e.host_bridge_id.empty() ? J(nullptr) : J(e.host_bridge_id)}});
  }
  return J{{"schema_version", kLogSchemaVersion},
           {"source", source.name},
           {"readable", source.readable},
           {"unreadable_reason", source.readable ? J(nullptr) : J(source.unreadable_reason)},
           {"lines", source.lines},
           {"notes", source.notes},
           {"events", events},
           {"events_seen", explained.events_seen()},
           {"events_dropped", explained.events_dropped()},
           {"agreements", explained.agreements()},
           {"contradictions", explained.contradictions()},
           {"attach", explained.contradictions() ? J(contradiction_attachments()) : J(nullptr)}};
}

}  // namespace p2paudit::policy
