// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/probe/reality.h"

#include <map>

#include <fmt/format.h>

#include "p2paudit/path_ceiling.h"
#include "p2paudit/probe/runtime_facts.h"

namespace p2paudit::probe {

namespace {

std::string str(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// The runtime's peer answer for the pair, as a person reads it.
std::string runtime_answer(const std::string& answer) {
  if (answer == "ok") return "yes";
  if (answer == "not_supported") return "no";
  if (answer.starts_with("NVML_P2P_STATUS_")) return "no (" + answer + ")";
  return answer.empty() ? "not asked" : answer;
}

bool is_out_of_device_memory(const std::string& error) {
  return error.find("OUT_OF_DEVICE_MEMORY") != std::string::npos || error.find("0x70000003") != std::string::npos;
}

std::string decision_text(const policy::Decision& d) {
  return d.rule.empty() ? policy::to_string(d.action) : fmt::format("{} ({})", policy::to_string(d.action), d.rule);
}

std::string kernel_reason(const policy::PairDecision& d) {
  const auto* reason = d.facts.get("kernel.reason");
  const auto* remedy = d.facts.get("kernel.remedy");
  std::string out = reason ? policy::render_fact_value(*reason) : d.verdict.reason;
  if (remedy) out += "; to change it: " + policy::render_fact_value(*remedy);
  return out;
}

void explain(RealityCheck& c, const policy::PairDecision& offline, std::optional<bool> yes,
             const nlohmann::json& copy) {
  const bool kernel_refuses = offline.verdict.p2pdma_distance && *offline.verdict.p2pdma_distance < 0;
  const bool kernel_allows = offline.verdict.p2pdma_distance && *offline.verdict.p2pdma_distance >= 0;
  const bool via_p2pdma = runtime_uses_kernel_p2pdma(c.runtime);
  const bool predicted_peer = offline.decision.action == policy::Action::kPeer;
  const nlohmann::json& peer = copy.is_object() && copy.contains("peer") ? copy["peer"] : nlohmann::json();
  const std::string result = copy.is_string() ? "failed" : str(peer, "result");
  const std::string error = copy.is_string() ? "the copy " + copy.get<std::string>() : str(peer, "error");

  if (result == "corrupt") {
    c.corrupt = c.disagreement = true;
    c.explanation = "DATA CORRUPTION: the peer copy reported success and delivered wrong data; this overrides every "
                    "\"yes\" (the runtime's and the prediction's): stage through host memory";
    return;
  }
  if (result == "failed") {
    if (is_out_of_device_memory(error) && kernel_refuses) {
      c.explanation = "the kernel refused the peer mapping: " + kernel_reason(offline) +
                      " (Level Zero reports this refusal as ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY, 0x70000003)";
      c.kernel_log = offline.verdict.kernel_log;
      c.disagreement = yes == true;  // the runtime offered what the kernel refuses
      if (c.disagreement) c.explanation = "the runtime says peer access works, but " + c.explanation;
    } else if (kernel_refuses && via_p2pdma) {
      c.explanation = fmt::format("the copy failed ({}), as predicted: {}", error, kernel_reason(offline));
      c.kernel_log = offline.verdict.kernel_log;
    } else {
      c.disagreement = true;
      c.explanation = fmt::format("the peer copy failed ({}) although {}", error,
                                  kernel_allows && via_p2pdma ? "the kernel allows P2PDMA for the pair: look at the vendor "
                                                                "gates (BAR size, driver version, IOMMU)"
                                                              : "nothing predicted it");
    }
    return;
  }
  if (result == "verified") {
    if (!predicted_peer && !via_p2pdma && offline.decision.authority == policy::Authority::kVendorDriver &&
        !offline.facts.known("vendor.peer_supported")) {
      c.explanation = "the copy confirms the driver's answer, which the offline prediction could not know (its "
                      "chipset table is in GSP firmware)";
    } else if (!predicted_peer) {
      c.disagreement = true;
      c.explanation = kernel_refuses && via_p2pdma
                          ? "the copy was right although the kernel refuses P2PDMA for the pair: the runtime may have "
                            "staged it through host memory itself (compare its bandwidth with the host-staged copy)"
                          : fmt::format("a verified copy contradicts the offline prediction ({}): it is decided peer now",
                                        offline.decision.rule);
    } else {
      c.explanation = "the copy confirms the prediction";
    }
    return;
  }
  // No copy test: the runtime's answer against the prediction.
  if (!yes) {
    c.explanation = "the runtime gave no yes or no for the pair";
    return;
  }
  if (via_p2pdma) {
    if (*yes && kernel_refuses) {
      c.disagreement = true;
      c.kernel_log = offline.verdict.kernel_log;
      c.explanation = "the runtime offers peer access that the kernel refuses when the peer memory is mapped: copies "
                      "will fail (Level Zero: ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY, 0x70000003). " +
                      kernel_reason(offline);
    } else if (!*yes && kernel_allows) {
      c.disagreement = true;
      c.explanation = "the runtime refuses what the kernel allows: a vendor gate decides (BAR size, driver or runtime "
                      "version, XGMI/fabric policy); offline: " + offline.decision.reason;
    } else {
      c.explanation = *yes ? "the runtime agrees with the kernel" : "the runtime refuses, as the kernel does";
    }
    return;
  }
  // NVIDIA: the driver never asks the kernel's P2PDMA, so its answer is not checked against it.
  if (*yes != predicted_peer && offline.decision.authority == policy::Authority::kVendorDriver &&
      !offline.facts.known("vendor.peer_supported")) {
    c.explanation = "the offline prediction could not know the driver's answer (its chipset table is in GSP "
                    "firmware); the driver's answer decides";
  } else if (*yes != predicted_peer) {
    c.disagreement = true;
    c.explanation = fmt::format("the driver says {} where the offline prediction was {}", *yes ? "yes" : "no",
                                decision_text(offline.decision));
  } else {
    c.explanation = "the driver agrees with the prediction";
  }
  if (*yes && kernel_refuses) c.explanation += " (the kernel's refusal does not apply: NVIDIA's driver does not use P2PDMA)";
}

std::string copy_text(const nlohmann::json& copy) {
  if (copy.is_string()) return "failed: the copy " + copy.get<std::string>();
  if (!copy.is_object() || !copy.contains("peer")) return "";
  const auto& peer = copy["peer"];
  std::string result = str(peer, "result");
  if (result == "verified") {
    double gbps = peer.contains("gbps") && peer["gbps"].is_number() ? peer["gbps"].get<double>() : 0;
    return fmt::format("verified, {:.1f} GB/s", gbps);
  }
  if (result == "corrupt") {
    long long n = peer.contains("mismatched_bytes") && peer["mismatched_bytes"].is_number_integer()
                      ? peer["mismatched_bytes"].get<long long>() : -1;
    return fmt::format("CORRUPT: success reported, {} bytes wrong", n);
  }
  if (result == "failed") return fmt::format("failed: {} returned {}", str(peer, "phase"), str(peer, "error"));
  return "";
}

// The path's ceiling for a verified copy, and this runtime's share of it.
void judge_against_path(RealityCheck& c, const policy::VendorFactsDocument& facts, const RuntimePairAnswers& p) {
  const nlohmann::json& peer = p.copy.is_object() && p.copy.contains("peer") ? p.copy["peer"] : nlohmann::json();
  if (str(peer, "result") != "verified") return;
  auto pair = facts.pairs.find({p.provider, p.client});
  if (pair == facts.pairs.end()) return;
  auto text = [&](const char* name) {
    const auto* v = pair->second.get(name);
    return v ? policy::render_fact_value(*v) : std::string();
  };
  c.copy_ceiling_path = text("vendor.copy_ceiling_path");
  c.copy_ceiling_missing = text("vendor.copy_ceiling_missing");
  if (const auto* ceiling = pair->second.get("vendor.copy_ceiling_gbps"); ceiling && std::get<double>(*ceiling) > 0) {
    c.copy_ceiling_gbps = std::get<double>(*ceiling);
    if (peer.contains("gbps") && peer["gbps"].is_number()) {
      c.copy_ceiling_ratio = ceiling_ratio(peer["gbps"].get<double>(), c.copy_ceiling_gbps);
      c.copy += fmt::format(", {:.0f}% of the path's {:.1f} GB/s ({})", *c.copy_ceiling_ratio * 100, *c.copy_ceiling_gbps,
                            c.copy_ceiling_path);
    }
  } else if (!c.copy_ceiling_missing.empty()) {
    c.copy += "; the path's ceiling is unknown: " + c.copy_ceiling_missing;
  }
}

}  // namespace

std::vector<RealityCheck> check_predictions(const Topology& topo, const KernelRules& kernel,
                                            const policy::RuleSet& rules, const RuntimeFacts& runtime_facts) {
  // A pair two runtimes answered is decided once: offline, and with every runtime's answers.
  std::map<std::pair<size_t, size_t>, std::pair<policy::PairDecision, policy::PairDecision>> decided;
  std::vector<RealityCheck> out;
  for (const auto& p : runtime_facts.pairs) {
    const auto provider = topo.index_of(p.provider), client = topo.index_of(p.client);
    if (!provider || !client) continue;  // bound answers are the tree's functions': never here
    RealityCheck c;
    c.runtime = p.runtime;
    c.provider = *provider;
    c.client = *client;
    auto it = decided.find({c.provider, c.client});
    if (it == decided.end())
      it = decided
               .emplace(std::pair{c.provider, c.client},
                        std::pair{policy::decide_pair(topo, kernel, rules, nullptr, c.provider, c.client),
                                  policy::decide_pair(topo, kernel, rules, &runtime_facts.facts, c.provider, c.client)})
               .first;
    const auto& [offline, with] = it->second;
    c.kernel = to_string(offline.verdict.map_type);
    c.predicted = decision_text(offline.decision);
    c.decided = decision_text(with.decision);
    c.runtime_says = runtime_answer(p.peer_answer);
    c.copy = copy_text(p.copy);
    judge_against_path(c, runtime_facts.facts, p);
    explain(c, offline, peer_yes_no(p.peer_answer), p.copy);
    out.push_back(std::move(c));
  }
  return out;
}

nlohmann::ordered_json reality_json(const Topology& topo, const RealityCheck& c) {
  return {{"runtime", c.runtime},
          {"provider", topo.functions[c.provider].bdf.str()},
          {"client", topo.functions[c.client].bdf.str()},
          {"kernel", c.kernel},
          {"predicted", c.predicted},
          {"runtime_says", c.runtime_says},
          {"copy", c.copy.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.copy)},
          {"copy_ceiling_gbps", c.copy_ceiling_gbps ? nlohmann::ordered_json(*c.copy_ceiling_gbps) : nlohmann::ordered_json(nullptr)},
          {"copy_ceiling_ratio", c.copy_ceiling_ratio ? nlohmann::ordered_json(*c.copy_ceiling_ratio) : nlohmann::ordered_json(nullptr)},
          {"copy_ceiling_path", c.copy_ceiling_path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.copy_ceiling_path)},
          {"copy_ceiling_missing", c.copy_ceiling_missing.empty() ? nlohmann::ordered_json(nullptr)
                                                                  : nlohmann::ordered_json(c.copy_ceiling_missing)},
          {"decided", c.decided},
          {"disagreement", c.disagreement},
          {"corrupt", c.corrupt},
          {"explanation", c.explanation},
          {"kernel_log", c.kernel_log}};
}

}  // namespace p2paudit::probe
