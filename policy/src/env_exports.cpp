// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/policy/env_exports.h"

#include <algorithm>
#include <map>
#include <variant>

#include <fmt/format.h>

#include "p2paudit/input_file.h"
#include "p2paudit/policy/nvidia_third_party.h"

namespace p2paudit::policy {

namespace {

// NCCL_NET_GDR_LEVEL from the NVIDIA GPU<->NIC pairs' decisions. NCCL uses GPUDirect RDMA for a pair
// whose path class (vendor.nccl_path_class) is at most the level (default PXB, P2C on C2C systems:
// NVIDIA/nccl src/graph/paths.cc ncclTopoCheckGdr) and stages through host memory beyond it. Where a
// pair within the default is not decided peer (the driver's gate refuses, an input is unknown, or an
// Intel client root complex forwards no peer reads), the level is set just below that pair's class,
// so NCCL stages for it and keeps GPUDirect RDMA for closer pairs; otherwise NCCL's default already
// agrees with the decisions and the variable is unset. It is never raised above the default: a
// peer decision says the driver maps the memory, not that the path through the host bridge is fast.
// Only pairs with one of the job's GPUs count: the NICs are every listed one (NCCL picks its own).
std::string gdr_level_exports(PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices,
                              const std::vector<size_t>& job_gpus) {
  static const char* const kLevels[] = {"PIX", "PXB"};  // NCCL's classes within the default level
  auto in_job = [&](size_t i) { return std::find(job_gpus.begin(), job_gpus.end(), i) != job_gpus.end(); };
  size_t pairs = 0, peer = 0;
  int lowest_refused = 2;  // index into kLevels of the closest refused pair; 2: none within the default
  for (const auto& p : devices)
    for (const auto& c : devices) {
      if (p.index == c.index) continue;
      // Only a pair with an NVIDIA GPU on the third-party path can be nvidia_third_party: the rest
      // are skipped before their facts are built.
      std::optional<size_t> gpu = nvidia_third_party_gpu(evaluator.topology(), p.index, c.index);
      if (!gpu || !in_job(*gpu)) continue;
      FactSet facts = evaluator.facts(p.index, c.index);
      const FactValue* who = facts.get("vendor.authority");
      const FactValue* path = facts.get("vendor.nccl_path_class");
      if (!who || std::get<std::string>(*who) != "nvidia_third_party" || !path) continue;
      ++pairs;
      if (decided_peer(evaluator.groups()[evaluator.decide(p.index, c.index, false)])) {
        ++peer;
        continue;
      }
      for (int i = 0; i < lowest_refused; ++i)
        if (std::get<std::string>(*path) == kLevels[i]) lowest_refused = i;
    }
  if (pairs == 0) return "";
  std::string out = fmt::format("# {} of {} ordered NVIDIA GPU<->NIC pairs may use GPUDirect RDMA\n", peer, pairs);
  if (lowest_refused == 2) return out + "unset NCCL_NET_GDR_LEVEL  # NCCL's default (up to PXB) agrees with them\n";
  return out + fmt::format("export NCCL_NET_GDR_LEVEL={}  # below {}: a pair at {} is not peer\n",
                           lowest_refused == 0 ? "LOC" : "PIX", kLevels[lowest_refused], kLevels[lowest_refused]);
}

// The pairs that are not peer, told once per distinct reason (the deciding rule and its action):
// the first pair, how many more, and the first pair's own reason.
class NotPeerReasons {
 public:
  void add(size_t provider, size_t client, const DecisionGroup& group) {
    auto [it, fresh] = reasons_.try_emplace(std::string(to_string(group.action)) + (group.certain() ? " " : "? ") + group.rule);
    if (fresh) it->second.first = {provider, client}, order_.push_back(it->first);
    ++it->second.pairs;
  }
  std::string lines(PolicyEvaluator& evaluator) const {
    const Topology& topo = evaluator.topology();
    std::string out;
    for (const auto& key : order_) {
      const Reason& r = reasons_.at(key);
      const PairDecision d = evaluator.decide_in_full(r.first.first, r.first.second);
      std::string more = r.pairs > 1 ? fmt::format(" and {} more pair{}", r.pairs - 1, r.pairs == 2 ? "" : "s") : "";
      out += "# not peer: " + escape_line(fmt::format("{} -> {}{}: {}{} [{}] {}", topo.functions[r.first.first].bdf.str(),
                                                      topo.functions[r.first.second].bdf.str(), more,
                                                      to_string(d.decision.action), d.decision.certain() ? "" : " (uncertain)",
                                                      d.decision.rule.empty() ? "no rule" : d.decision.rule,
                                                      d.decision.reason)) +
             "\n";
      // An uncertain pair is staged until the facts that settle it are known: say which.
      if (!d.decision.certain()) out += "#   settled by: " + escape_line(settle_text(d.decision)) + "\n";
    }
    return out;
  }

 private:
  struct Reason {
    std::pair<size_t, size_t> first;
    size_t pairs = 0;
  };
  std::map<std::string, Reason> reasons_;
  std::vector<std::string> order_;
};

}  // namespace

bool decided_peer(const DecisionGroup& group) {
  // Only a certain peer: where unknown facts leave the decision open, the safe side is acted on
  // (an uncertain group's action is never peer anyway; said here so that it stays so).
  return group.action == Action::kPeer && group.certain();
}

std::string env_exports(PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices, const JobGpus& job) {
  const Topology& topo = evaluator.topology();
  const std::string gdr = gdr_level_exports(evaluator, devices, job.gpus);
  size_t gpu_pairs = 0, peer = 0, nvlink = 0, across_vendors = 0;
  NotPeerReasons not_peer;
  for (size_t p : job.gpus)
    for (size_t c : job.gpus) {
      if (p == c) continue;
      if (topo.functions[p].vendor != topo.functions[c].vendor) {
        ++across_vendors;
        continue;
      }
      ++gpu_pairs;
      const DecisionGroup& group = evaluator.groups()[evaluator.decide(p, c, false)];
      if (decided_peer(group)) ++peer;
      else not_peer.add(p, c, group);
      FactSet facts = evaluator.facts(p, c);
      if (const FactValue* v = facts.get("vendor.nvlink"); v && std::get<bool>(*v)) ++nvlink;
    }
  std::string out = "# p2paudit policy --format env: exports derived from the decisions of the job's GPU pairs\n";
  for (const auto& note : job.notes) out += "# " + escape_line(note) + "\n";
  if (across_vendors)
    out += fmt::format("# {} ordered pairs of GPUs of different vendors are not counted: no runtime these variables "
                       "steer copies between vendors\n",
                       across_vendors);
  if (gpu_pairs == 0)
    return out + (gdr.empty() ? "# fewer than two GPUs of one vendor: nothing to set\n"
                              : "# fewer than two GPUs of one vendor: no peer setting\n" + gdr);
  out += fmt::format("# {} of {} ordered GPU pairs may use peer DMA\n", peer, gpu_pairs);
  out += not_peer.lines(evaluator);
  if (peer == gpu_pairs) {
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
  return out + gdr;
}

std::string env_exports(PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices) {
  return env_exports(evaluator, devices, select_job_gpus(evaluator.topology(), {}));
}

}  // namespace p2paudit::policy
