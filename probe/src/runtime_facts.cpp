// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/probe/runtime_facts.h"

#include "copy_ceiling.h"
#include "peer_paths.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "p2paudit/device_class.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/json_input.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/quoted_input.h"
#include "p2paudit/runtime_versions.h"

namespace p2paudit::probe {

bool nvml_answers_every_pair(const RuntimeReport& nvml) {
  if (nvml.runtime != "nvml" || nvml.status != "ok") return false;
  const size_t n = nvml.devices.size();
  for (const auto& d : nvml.devices)
    if (!d.bdf) return false;  // CUDA cannot be matched to what NVML could not place either; ask it
  if (nvml.pairs.size() != n * (n > 0 ? n - 1 : 0)) return false;
  for (const auto& p : nvml.pairs) {
    const auto yes_no = [&](const char* key) {
      return p.answers.contains(key) && p.answers[key].is_string() && peer_yes_no(p.answers[key].get<std::string>());
    };
    if (!yes_no("read") || !yes_no("write")) return false;
  }
  return true;
}

namespace {

// Every runtime in turn; CUDA, where `cuda_where_nvml_cannot`, only when NVML did not answer.
std::vector<RuntimeReport> ask_runtimes(const ProbeOptions& options, bool cuda_where_nvml_cannot) {
  std::vector<RuntimeReport> reports;
  options.report_progress("nvml");
  reports.push_back(probe_nvml(options));
  if (!cuda_where_nvml_cannot || !nvml_answers_every_pair(reports.back())) {
    options.report_progress("cuda");
    // The copy's peer paths place their windows across what NVML says BAR1 exposes.
    ProbeOptions cuda_options = options;
    for (const auto& d : reports.front().devices)
      if (d.bdf && d.extra.contains("bar1_total_bytes") && d.extra["bar1_total_bytes"].is_number_unsigned())
        cuda_options.copy.bar1_bytes[d.bdf->str()] = d.extra["bar1_total_bytes"].get<std::uint64_t>();
    reports.push_back(probe_cuda(cuda_options));
  }
#ifdef P2PAUDIT_HAVE_LEVEL_ZERO
  options.report_progress("level_zero");
  reports.push_back(probe_level_zero(options));
#endif
  options.report_progress("hip");
  reports.push_back(probe_hip(options));
  return reports;
}

}  // namespace

std::vector<RuntimeReport> probe_for_decisions(const ProbeOptions& asked) {
  ProbeOptions options = asked;
  options.decisions_only = true;
  return ask_runtimes(options, true);
}

std::vector<RuntimeReport> probe_all(const ProbeOptions& options) { return ask_runtimes(options, false); }

std::map<Bdf, std::string> function_names(const Topology& topo) {
  std::map<Bdf, std::string> names;
  for (const auto& f : topo.functions) names[f.bdf] = "";
  for (const auto& nf : matrix_devices(topo, false)) names[topo.functions[nf.index].bdf] = nf.short_name;
  return names;
}

nlohmann::ordered_json probe_document(const std::vector<RuntimeReport>& reports, const Topology* topo,
                                      const std::string& source, const std::string& note, const ProbeOptions& options) {
  const std::map<Bdf, std::string> names = topo ? function_names(*topo) : std::map<Bdf, std::string>{};
  nlohmann::ordered_json j;
  j["schema_version"] = kProbeSchemaVersion;
  j["source"] = source;
  if (!note.empty()) j["note"] = note;
  j["timeout_seconds"] = options.timeout_seconds;
  if (options.copy.enabled) j["copy"] = {{"size_bytes", options.copy.size_bytes}, {"repeat", options.copy.repeat}};
  if (options.mirror) j["mirror"] = true;
  auto runtimes = nlohmann::ordered_json::array();
  for (const auto& r : reports) {
    auto rj = r.to_json();
    if (topo)
      for (size_t i = 0; i < r.devices.size() && i < rj["devices"].size(); ++i) {
        auto it = r.devices[i].bdf ? names.find(*r.devices[i].bdf) : names.end();
        rj["devices"][i]["in_topology"] = it != names.end();
        rj["devices"][i]["function"] =
            it != names.end() && !it->second.empty() ? nlohmann::ordered_json(it->second) : nlohmann::ordered_json(nullptr);
      }
    runtimes.push_back(std::move(rj));
  }
  j["runtimes"] = std::move(runtimes);
  return j;
}

std::optional<bool> peer_yes_no(const std::string& answer) {
  if (answer == "ok") return true;
  if (answer == "not_supported") return false;
  // NVML's refusals (CHIPSET/GPU/IOH_TOPOLOGY NOT_SUPPORTED, DISABLED_BY_REGKEY) are a "no".
  if (answer.starts_with("NVML_P2P_STATUS_")) return false;
  return std::nullopt;
}

bool runtime_uses_kernel_p2pdma(const std::string& runtime) { return runtime == "level_zero" || runtime == "hip"; }

namespace {

// Type-checked access to a document from outside: errors name the place.
class DocumentReader {
 public:
  explicit DocumentReader(std::string origin) : origin_(escape_text(origin)) {}

  [[noreturn]] void refuse(const std::string& where, const std::string& problem) const {
    throw InputError(fmt::format("{}: {}: {}", origin_, where, problem));
  }
  const nlohmann::json& object(const nlohmann::json& j, const std::string& where) const {
    if (!j.is_object()) refuse(where, "expected an object");
    return j;
  }
  const nlohmann::json& array(const nlohmann::json& j, const std::string& key, const std::string& where) const {
    if (!j.contains(key)) refuse(where, fmt::format("\"{}\" is missing", key));
    if (!j[key].is_array()) refuse(where + "." + key, "expected a list");
    return j[key];
  }
  // A string member; "" when absent (every string this reader uses is optional).
  std::string text(const nlohmann::json& j, const std::string& key, const std::string& where) const {
    if (!j.contains(key) || j[key].is_null()) return "";
    if (!j[key].is_string()) refuse(where + "." + key, "expected a string");
    const auto& s = j[key].get_ref<const std::string&>();
    if (!is_clean_bytes(s) || s.size() > 4096)
      refuse(where + "." + key, "expected printable text of at most 4096 bytes");
    return s;
  }
  int index(const nlohmann::json& j, const std::string& key, const std::string& where, size_t limit) const {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<long long>() < 0 ||
        j[key].get<unsigned long long>() >= limit)
      refuse(where + "." + key, fmt::format("expected a device index below {}", limit));
    return j[key].get<int>();
  }
  std::optional<double> number(const nlohmann::json& j, const std::string& key, const std::string& where) const {
    if (!j.contains(key) || j[key].is_null()) return std::nullopt;
    if (!j[key].is_number()) refuse(where + "." + key, "expected a number");
    return j[key].get<double>();
  }

 private:
  std::string origin_;
};

std::string answer_text(const nlohmann::json& answers, const char* key) {
  return answers.contains(key) && answers[key].is_string() ? answers[key].get<std::string>() : "";
}

// Copy results of one pair, worst first: corrupt, failed, verified.
int copy_rank(const std::string& result) { return result == "corrupt" ? 3 : result == "failed" ? 2 : result == "verified" ? 1 : 0; }

struct PairEvidence {
  // The peer answer and its runtime, by preference: cuda, nvml, hip, level_zero.
  int peer_rank = 0;
  std::optional<bool> peer;
  std::string peer_runtime, peer_answer;
  std::optional<bool> nvlink, xgmi;
  std::string copy_result, copy_runtime, copy_error;
  std::optional<double> copy_gbps, staged_gbps, mismatched;
  // copy.peer_paths (peer_paths.h): each path's worst result, and the first failure told in words.
  std::string path_results[3];
  std::string path_error;
};

int peer_preference(const std::string& runtime) {
  return runtime == "cuda" ? 4 : runtime == "nvml" ? 3 : runtime == "hip" ? 2 : runtime == "level_zero" ? 1 : 0;
}

void read_copy(const DocumentReader& in, const nlohmann::json& copy, const std::string& where, const std::string& runtime,
               const nlohmann::json& answers, PairEvidence& e) {
  std::string result, error;
  std::optional<double> gbps, staged, mismatched;
  if (copy.is_string()) {  // the copy child hung or crashed
    const std::string how = copy.get<std::string>();
    if (how != "hung" && how != "crashed" && how != "failed") return;  // "not_asked"
    result = "failed";
    error = fmt::format("the copy {} in {}", how, in.text(answers, "phase", where));
  } else {
    in.object(copy, where);
    if (!copy.contains("peer")) in.refuse(where, "\"peer\" is missing");
    const auto& peer = in.object(copy["peer"], where + ".peer");
    result = in.text(peer, "result", where + ".peer");
    if (result != "verified" && result != "corrupt" && result != "failed" && result != "not_run")
      in.refuse(where + ".peer.result", "expected verified, corrupt, failed or not_run");
    if (result == "not_run") return;
    std::string call = in.text(peer, "phase", where + ".peer"), name = in.text(peer, "error", where + ".peer");
    error = call.empty() ? name : fmt::format("{} returned {}", call, name);
    gbps = in.number(peer, "gbps", where + ".peer");
    mismatched = in.number(peer, "mismatched_bytes", where + ".peer");
    if (copy.contains("host_staged")) {
      const auto& hs = in.object(copy["host_staged"], where + ".host_staged");
      if (in.text(hs, "result", where + ".host_staged") == "verified") staged = in.number(hs, "gbps", where + ".host_staged");
    }
  }
  if (copy_rank(result) <= copy_rank(e.copy_result)) return;
  e.copy_result = result, e.copy_runtime = runtime, e.copy_error = error;
  e.copy_gbps = gbps, e.staged_gbps = staged, e.mismatched = mismatched;
}

// copy.peer_paths: kernel stores, kernel loads and atomics of the pair, each its worst result.
void read_peer_paths(const DocumentReader& in, const nlohmann::json& paths, const std::string& where,
                     const std::string& runtime, PairEvidence& e) {
  in.object(paths, where);
  const auto window_bytes = static_cast<std::uint64_t>(std::clamp(in.number(paths, "window_bytes", where).value_or(0), 0.0, 0x1p60));
  for (detail::PeerPath p : detail::kPeerPaths) {
    const std::string pw = where + "." + detail::path_name(p);
    if (!paths.contains(detail::path_name(p))) continue;
    const auto& path = in.object(paths[detail::path_name(p)], pw);
    const std::string result = in.text(path, "result", pw);
    if (result.empty() || (detail::path_rank(result) == 0 && result != "not_run"))
      in.refuse(pw + ".result", "expected verified, dropped, zeroed, wrong, hung, refused, not_supported or not_run");
    std::string& kept = e.path_results[static_cast<int>(p)];
    if (!kept.empty() && detail::path_rank(result) <= detail::path_rank(kept)) continue;
    kept = result;
    if (!detail::path_failed(result) || !e.path_error.empty()) continue;
    std::string what = fmt::format("{} {}", detail::path_words(p), result);
    if (result == "hung" || result == "refused") {
      e.path_error = fmt::format("{} ({}): {}: {}", what, runtime, in.text(path, "phase", pw), in.text(path, "error", pw));
      continue;
    }
    for (const auto& w : in.array(path, "windows", pw)) {
      in.object(w, pw + ".windows[]");
      if (in.text(w, "result", pw + ".windows[]") != result) continue;
      auto count = [&](const char* key) {
        return static_cast<std::uint64_t>(std::clamp(in.number(w, key, pw + ".windows[]").value_or(0), 0.0, 0x1p60));
      };
      e.path_error = fmt::format("{} ({}) in the window at offset {:#x}: {} of {} words wrong, the first at byte {} ({} "
                                 "still the sentinel, {} zero)",
                                 what, runtime, count("offset"), count("bad_words"), window_bytes / 4,
                                 count("first_bad_offset"), count("sentinel_words"), count("zero_words"));
      break;
    }
  }
}

// A count from the document as an integer fact; nullopt beyond what a device can hold (a double
// out of range would be undefined behaviour to convert).
std::optional<policy::FactValue> whole_bytes(std::optional<double> v) {
  if (!v || !(*v >= 0 && *v <= 0x1p60)) return std::nullopt;
  return static_cast<std::int64_t>(*v);
}

void set_if(policy::FactSet& facts, const char* name, std::optional<policy::FactValue> value) {
  if (!value) return;
  // Out of range (a corrupt number) stays unknown rather than becoming a fact.
  if (auto checked = policy::check_fact_value(*policy::find_fact(name), std::move(*value)); checked.value)
    facts.set(name, std::move(*checked.value));
}

}  // namespace

namespace {

// The PCI vendor and device IDs a runtime recorded for its device (NVML's pci_device_id
// "DDDDVVVV", Level Zero's pci_id "vvvv:dddd"); without a record, the vendor of the runtime itself
// (CUDA and NVML drive NVIDIA's devices only, HIP AMD's).
struct RecordedIds {
  std::optional<std::uint16_t> vendor, device;
};

std::optional<std::uint32_t> hex_field(std::string_view text) {
  if (text.empty() || text.size() > 8) return std::nullopt;
  std::uint32_t v = 0;
  for (char c : text) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return std::nullopt;
    v = v * 16 + static_cast<std::uint32_t>(d);
  }
  return v;
}

RecordedIds recorded_ids(const DocumentReader& in, const std::string& runtime, const nlohmann::json& dev,
                         const std::string& where) {
  RecordedIds ids;
  if (runtime == "nvml" || runtime == "cuda") ids.vendor = 0x10de;
  if (runtime == "hip") ids.vendor = 0x1002;
  if (runtime == "nvml")
    if (auto v = hex_field(in.text(dev, "pci_device_id", where)); v && in.text(dev, "pci_device_id", where).size() == 8)
      ids.vendor = static_cast<std::uint16_t>(*v & 0xffff), ids.device = static_cast<std::uint16_t>(*v >> 16);
  if (runtime == "level_zero") {
    std::string text = in.text(dev, "pci_id", where);
    auto v = text.size() == 9 && text[4] == ':' ? hex_field(text.substr(0, 4)) : std::nullopt;
    auto d = text.size() == 9 && text[4] == ':' ? hex_field(text.substr(5)) : std::nullopt;
    if (v && d) ids.vendor = static_cast<std::uint16_t>(*v), ids.device = static_cast<std::uint16_t>(*d);
  }
  return ids;
}

// Why a runtime's device cannot be the tree's function at its address; "" when it is.
std::string binding_problem(const Topology& topo, const Bdf& bdf, const RecordedIds& ids) {
  const Function* f = topo.find(bdf);
  if (!f) return "this machine has no PCI function there";
  DeviceClass c = classify_device(*f);
  std::string tree = fmt::format("the function there is {:04x}:{:04x} ({})", f->vendor, f->device, device_class_name(c));
  if (!ids.vendor) return fmt::format("the runtime recorded no PCI IDs to compare with ({})", tree);
  if (*ids.vendor != f->vendor || (ids.device && *ids.device != f->device))
    return fmt::format("the runtime's device is {:04x}:{}, {}", *ids.vendor,
                       ids.device ? fmt::format("{:04x}", *ids.device) : std::string("????"), tree);
  if (c != DeviceClass::kGpu && c != DeviceClass::kAccelerator)
    return fmt::format("a runtime drives GPUs and accelerators, and {}", tree);
  return "";
}

}  // namespace

RuntimeFacts runtime_facts(const nlohmann::json& document, const std::string& origin) {
  return runtime_facts(document, origin, nullptr);
}

RuntimeFacts runtime_facts(const nlohmann::json& document, const std::string& origin, const Topology* topo) {
  DocumentReader in(origin);
  in.object(document, "the document");
  if (!document.contains("schema_version") || document["schema_version"] != kProbeSchemaVersion)
    in.refuse("schema_version", fmt::format("expected {} (the probe JSON this p2paudit writes)", kProbeSchemaVersion));
  RuntimeFacts out;
  std::map<std::pair<Bdf, Bdf>, PairEvidence> evidence;
  std::optional<double> mirror;
  const auto& runtimes = in.array(document, "runtimes", "the document");
  for (size_t r = 0; r < runtimes.size() && r < 16; ++r) {
    std::string where = fmt::format("runtimes[{}]", r);
    const auto& rt = in.object(runtimes[r], where);
    std::string runtime = in.text(rt, "runtime", where), status = in.text(rt, "status", where);
    out.asked.push_back(fmt::format("{} {}", runtime, status));
    // The driver versions the runtimes report (NVML the kernel driver's, CUDA the CUDA version it
    // supports), as the version facts: checked as the sysroot's version files are.
    if (runtime == "nvml" || runtime == "cuda") {
      // Read as it stands (the rest of the document prints it escaped): a value that is not a version
      // is a finding here, not a refusal of the whole document.
      const auto found = rt.find("driver_version");
      const std::string version = found != rt.end() && found->is_string() ? found->get<std::string>() : "";
      if (is_version_text(version)) {
        if (runtime == "nvml") {
          set_if(out.facts.all, "runtime.nvidia_driver_version", version);
          if (auto major = version_major(version)) set_if(out.facts.all, "runtime.nvidia_driver_major", *major);
        } else {
          set_if(out.facts.all, "runtime.cuda_driver_version", version);
        }
      } else if (!version.empty()) {
        out.findings.push_back({escape_text(origin), fmt::format("{}.driver_version: {} is not a version: not used", where,
                                                                 quoted_input(version))});
      }
    }
    const auto& devices = in.array(rt, "devices", where);
    std::vector<std::optional<Bdf>> bdfs;
    for (size_t d = 0; d < devices.size() && d < 1024; ++d) {
      std::string dw = fmt::format("{}.devices[{}]", where, d);
      const auto& dev = in.object(devices[d], dw);
      std::string text = in.text(dev, "bdf", dw);
      auto bdf = text.empty() ? std::nullopt : Bdf::parse(text);
      if (!text.empty() && !bdf) in.refuse(dw + ".bdf", "expected a PCI address DDDD:BB:DD.F or null");
      if (bdf && topo)
        if (auto problem = binding_problem(*topo, *bdf, recorded_ids(in, runtime, dev, dw)); !problem.empty()) {
          if (++out.unbound <= kMaxUnboundFindings)
            out.findings.push_back({escape_text(origin), fmt::format("{} ({} {} at {}): {}: its answers are not used", dw,
                                                                     escape_text(runtime), quoted_input(in.text(dev, "name", dw), '"'),
                                                                     bdf->str(), problem)});
          bdf.reset();
        }
      bdfs.push_back(bdf);
      if (!bdf) continue;
      if (runtime == "nvml")
        if (auto bytes = in.number(dev, "memory_total_bytes", dw))
          set_if(out.facts.devices[*bdf], "provider.memory_size", whole_bytes(bytes));
      if (runtime == "level_zero") {
        if (auto v = in.text(dev, "loader_version", dw); !v.empty()) set_if(out.facts.all, "runtime.level_zero_version", v);
        if (auto v = in.text(dev, "compute_runtime_version", dw); !v.empty())
          set_if(out.facts.all, "runtime.compute_runtime_version", v);
      }
    }
    if (runtime == "level_zero" && rt.contains("mirror")) {
      const auto& m = in.object(rt["mirror"], where + ".mirror");
      if (m.contains("runs")) {
        const auto& runs = in.array(m, "runs", where + ".mirror");
        for (size_t i = 0; i < runs.size() && i < 64; ++i) {
          std::string rw = fmt::format("{}.mirror.runs[{}]", where, i);
          const auto& run = in.object(runs[i], rw);
          if (in.text(run, "visible", rw) != "all" || in.text(run, "status", rw) != "ok") continue;
          if (auto ratio = in.number(run, "host_bytes_per_byte", rw)) mirror = std::max(mirror.value_or(0), *ratio);
        }
      }
    }
    const auto& pairs = in.array(rt, "pairs", where);
    for (size_t p = 0; p < pairs.size() && p < 1024 * 1024; ++p) {
      std::string pw = fmt::format("{}.pairs[{}]", where, p);
      const auto& pair = in.object(pairs[p], pw);
      int provider = in.index(pair, "provider", pw, bdfs.size()), client = in.index(pair, "client", pw, bdfs.size());
      if (!pair.contains("answers")) in.refuse(pw, "\"answers\" is missing");
      const auto& answers = in.object(pair["answers"], pw + ".answers");
      if (!bdfs[size_t(provider)] || !bdfs[size_t(client)]) continue;
      PairEvidence& e = evidence[{*bdfs[size_t(provider)], *bdfs[size_t(client)]}];
      // The runtime's own peer answer: CUDA's is what frameworks ask (cudaDeviceCanAccessPeer);
      // NVML's read and write both have to be OK, as `nvidia-smi topo -p2p` shows them.
      std::string answer;
      std::optional<bool> peer;
      if (runtime == "nvml") {
        std::string read = answer_text(answers, "read"), write = answer_text(answers, "write");
        auto r = peer_yes_no(read), w = peer_yes_no(write);
        if (r && w) peer = *r && *w;
        answer = read != "ok" ? read : write;
        if (auto n = peer_yes_no(answer_text(answers, "nvlink"))) e.nvlink = *n;
      } else {
        answer = answer_text(answers, "can_access_peer");
        if (runtime == "cuda" || runtime == "hip" || runtime == "level_zero") peer = peer_yes_no(answer);
        if (runtime == "hip") {
          std::string link = answer_text(answers, "link_type");
          if (!link.empty() && link.find("LINK_INFO_TYPE_") != std::string::npos) e.xgmi = link.ends_with("XGMI");
        }
      }
      if (topo)
        out.pairs.push_back({runtime, *bdfs[size_t(provider)], *bdfs[size_t(client)], answer,
                             answers.contains("copy") ? answers["copy"] : nlohmann::json()});
      int rank = peer_preference(runtime);
      if (peer && rank > e.peer_rank) {
        e.peer_rank = rank, e.peer = peer, e.peer_runtime = runtime;
        e.peer_answer = answer == "ok" || answer == "not_supported" ? "" : answer;
      }
      if (answers.contains("copy")) read_copy(in, answers["copy"], pw + ".answers.copy", runtime, answers, e);
      if (answers.contains("copy") && answers["copy"].is_object() && answers["copy"].contains("peer_paths"))
        read_peer_paths(in, answers["copy"]["peer_paths"], pw + ".answers.copy.peer_paths", runtime, e);
    }
  }
  if (out.unbound > kMaxUnboundFindings)
    out.findings.push_back({escape_text(origin), fmt::format("{} more runtime devices did not match the machine's PCI "
                                                             "functions: their answers are not used",
                                                             out.unbound - kMaxUnboundFindings)});
  if (mirror) set_if(out.facts.all, "runtime.host_mirror_per_byte", *mirror);
  for (const auto& [key, e] : evidence) {
    policy::FactSet& f = out.facts.pairs[key];
    if (e.peer) {
      f.set("vendor.peer_supported", *e.peer);
      f.set("vendor.peer_runtime", e.peer_runtime);
      if (!e.peer_answer.empty()) set_if(f, "vendor.peer_answer", e.peer_answer);
    }
    if (e.nvlink) f.set("vendor.nvlink", *e.nvlink);
    if (e.xgmi) f.set("vendor.xgmi", *e.xgmi);
    if (!e.copy_result.empty()) {
      f.set("vendor.copy_result", e.copy_result);
      f.set("vendor.copy_verified", e.copy_result == "verified");
      f.set("vendor.copy_runtime", e.copy_runtime);
      if (!e.copy_error.empty()) set_if(f, "vendor.copy_error", e.copy_error);
      if (e.copy_gbps) set_if(f, "vendor.copy_gbps", *e.copy_gbps);
      if (e.staged_gbps) set_if(f, "vendor.copy_staged_gbps", *e.staged_gbps);
      set_if(f, "vendor.copy_mismatched_bytes", whole_bytes(e.mismatched));
    }
    // The peer paths of kernels, and every path of the pair that did not carry its data.
    std::vector<std::string> failed;
    if (e.copy_result == "corrupt" || e.copy_result == "failed") failed.push_back("copy_engine");
    for (detail::PeerPath p : detail::kPeerPaths) {
      const std::string& result = e.path_results[static_cast<int>(p)];
      if (result.empty()) continue;
      f.set(p == detail::PeerPath::kKernelStores ? "vendor.kernel_store_result"
            : p == detail::PeerPath::kKernelLoads ? "vendor.kernel_load_result" : "vendor.atomic_result", result);
      if (detail::path_failed(result)) failed.push_back(detail::path_name(p));
    }
    if (!e.copy_result.empty() || !failed.empty()) f.set("vendor.peer_paths_failed", failed);
    if (!e.path_error.empty()) set_if(f, "vendor.peer_path_error", e.path_error);
    if (f.entries().empty()) out.facts.pairs.erase(key);
  }
  if (topo) detail::add_copy_ceilings(document, *topo, out.facts);
  if (topo)
    for (auto& finding : out.facts.bind(*topo, origin)) out.findings.push_back(std::move(finding));
  return out;
}

nlohmann::json parse_probe_document(std::string_view text, const std::string& origin) {
  return parse_input_json(text, origin, {16, 4u << 20, "the probe's JSON"});
}

}  // namespace p2paudit::probe
