#include "p2paudit/policy/evaluate.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

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
  for (const char* role : {"provider.", "client."}) {
    const FactValue* bar = facts.get(std::string(role) + "largest_bar");
    const FactValue* memory = facts.get(std::string(role) + "memory_size");
    if (bar && memory)
      facts.set(std::string(role) + "bar_covers_memory", std::get<int64_t>(*bar) >= std::get<int64_t>(*memory));
  }
}

namespace {

// `add_vendor_facts` lays facts from outside the sysroot over the analyzer's, before derived facts.
template <typename AddVendorFacts>
PairDecision decide_pair_with(const Topology& topo, const KernelRules& kernel, const RuleSet& rules, size_t provider,
                              size_t client, AddVendorFacts add_vendor_facts) {
  PairDecision d{pci_p2pdma_distance(topo, kernel, provider, client), {}, {}};
  d.facts = pair_facts(topo, kernel, d.verdict);
  add_vendor_facts(topo.functions[provider].bdf, topo.functions[client].bdf, d.facts);
  derive_facts(d.facts);
  d.decision = rules.decide(d.facts);
  return d;
}

}  // namespace

PairDecision decide_pair(const Topology& topo, const KernelRules& kernel, const RuleSet& rules,
                         const VendorFactsDocument* vendor, size_t provider, size_t client) {
  return decide_pair_with(topo, kernel, rules, provider, client, [&](const Bdf& p, const Bdf& c, FactSet& facts) {
    if (vendor) vendor->apply(p, c, facts);
  });
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

const char* short_code(Action a) {
  switch (a) {
    case Action::kPeer: return "PEER";
    case Action::kHostStaged: return "HOST";
    case Action::kDeny: return "DENY";
    case Action::kWarn: break;
  }
  return "?";
}

bool is_gpu(const Topology& topo, size_t i) { return device_class(topo.functions[i]) == "gpu"; }

}  // namespace

std::string policy_table_text(const Topology& topo, const std::vector<NamedFunction>& devices,
                              const std::vector<PairDecision>& pairs) {
  std::string out;
  auto labels = matrix_labels(topo, devices);
  size_t width = 6;
  for (const auto& l : labels) width = std::max(width, l.size() + 2);
  out += fmt::format("{:<{}}", "", width);
  for (const auto& l : labels) out += fmt::format("{:<{}}", l, width);
  out += "\n";
  for (size_t r = 0; r < devices.size(); ++r) {
    out += fmt::format("{:<{}}", labels[r], width);
    for (size_t c = 0; c < devices.size(); ++c)
      out += fmt::format("{:<{}}", r == c ? "X" : short_code(pairs[r * devices.size() + c].decision.action), width);
    out += "\n";
  }
  out += "\nRows are providers (whose memory is read or written), columns clients (which do the DMA).\n"
         "PEER = try peer-to-peer DMA, HOST = stage through host memory, DENY = refuse.\n\n";
  for (size_t r = 0; r < devices.size(); ++r)
    for (size_t c = 0; c < devices.size(); ++c) {
      if (r == c) continue;
      const PairDecision& p = pairs[r * devices.size() + c];
      const Decision& d = p.decision;
      out += fmt::format("{} -> {}: {} ({}{}{})\n", labels[r], labels[c], to_string(d.action),
                         d.rule.empty() ? "no rule decided" : "rule " + d.rule,
                         d.authority ? ", authority " : "", d.authority ? to_string(*d.authority) : "");
      out += fmt::format("  why: {}\n", d.reason);
      if (!d.remedy.empty()) out += fmt::format("  fix: {}\n", d.remedy);
      for (const auto& fired : d.fired)
        if (fired.action == Action::kWarn) out += fmt::format("  warning [{}]: {}\n", fired.id, fired.reason);
      if (!d.unknown_facts.empty()) {
        std::string unknown;
        for (const auto& f : d.unknown_facts) unknown += (unknown.empty() ? "" : ", ") + f;
        out += fmt::format("  unknown: {}\n", unknown);
      }
    }
  return out;
}

std::string env_exports(const Topology& topo, const std::vector<PairDecision>& pairs) {
  size_t gpu_pairs = 0, peer = 0, nvlink = 0;
  for (const auto& p : pairs) {
    if (p.verdict.provider == p.verdict.client || !is_gpu(topo, p.verdict.provider) || !is_gpu(topo, p.verdict.client))
      continue;
    ++gpu_pairs;
    if (p.decision.action == Action::kPeer) ++peer;
    if (const FactValue* v = p.facts.get("vendor.nvlink"); v && std::get<bool>(*v)) ++nvlink;
  }
  std::string out = "# p2paudit policy --format env: exports derived from the GPU pairs' decisions\n";
  if (gpu_pairs == 0) return out + "# fewer than two GPUs: nothing to set\n";
  bool all_peer = peer == gpu_pairs;
  out += fmt::format("# {} of {} ordered GPU pairs may use peer DMA\n", peer, gpu_pairs);
  if (all_peer) {
    out += "unset NCCL_P2P_DISABLE\n";
    out += nvlink == gpu_pairs ? "export NCCL_P2P_LEVEL=NVL\n" : "unset NCCL_P2P_LEVEL\n";
    out += "export GGML_CUDA_P2P=1\n";
    out += "export CCL_TOPO_P2P_ACCESS=1\n";
  } else {
    out += "export NCCL_P2P_DISABLE=1\n";
    out += "unset NCCL_P2P_LEVEL\n";
    out += "unset GGML_CUDA_P2P  # llama.cpp tests for presence, not value: GGML_CUDA_P2P=0 would enable it\n";
    out += "export CCL_TOPO_P2P_ACCESS=0\n";
    out += "# vLLM: start with --disable-custom-all-reduce (its custom all-reduce needs peer access)\n";
  }
  return out;
}

}  // namespace p2paudit::policy
