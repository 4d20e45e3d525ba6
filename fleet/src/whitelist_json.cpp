// SPDX-License-Identifier: GPL-2.0-or-later
// `whitelist --format json` (docs/whitelist.md): the candidates and sets with every pair they
// unlock, the pairs streamed as they are handed out again.
#include <stdexcept>

#include "p2paudit/fleet/pretty_writer.h"
#include "p2paudit/fleet/whitelist.h"

namespace p2paudit::fleet {

void write_with_pairs(PrettyWriter& w, const Topology& topo, nlohmann::ordered_json object, const PairSource& pairs) {
  if (!object.contains("pairs")) throw std::logic_error("write_with_pairs: the object has no \"pairs\" member");
  w.open_element_object();
  for (auto& [key, value] : object.items()) {
    if (key != "pairs") {
      w.member(key, std::move(value));
      continue;
    }
    w.key(key);
    w.open_array();
    pairs([&](const UnlockedPair& p) { w.element(unlocked_pair_json(topo, p)); });
    w.close_array();
  }
  w.close_object();
}

void write_whitelist_json(std::ostream& out, const WhitelistJsonInput& in, const std::vector<WhitelistCandidate>& candidates,
                          const std::vector<CandidateSet>& sets) {
  using ordered_json = nlohmann::ordered_json;
  const CandidateContext& context = in.context;
  auto or_null = [](const std::optional<int>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); };
  PrettyWriter w(out);
  w.open_object();
  w.member("schema_version", kWhitelistSchemaVersion);
  w.member("kernel_release", context.kernel_release);
  w.member("cpu", {{"vendor", context.cpu_vendor},
                   {"family", or_null(context.cpu_family)},
                   {"model", or_null(context.cpu_model)},
                   {"model_name", context.cpu_model_name}});
  w.member("iommu_mode", context.iommu_mode);
  w.member("notes", in.kernel.notes);
  w.member("runtime_probe", {{"source", in.probe_source}, {"note", in.probe_note}});
  w.key("candidates");
  w.open_array();
  for (const auto& c : candidates) {
    PairSource pairs = candidate_pairs(in.topo, in.kernel, in.measured, in.options, c);
    ordered_json j = candidate_json(in.topo, c);
    j["kernel_table_line"] = kernel_table_line(c, platform_name(in.topo, context, c), nullptr);
    j["commit_message"] =
        commit_message(PatchInput{in.topo, in.kernel, context, nullptr, git_identity(false), pairs}, c);
    write_with_pairs(w, in.topo, std::move(j), pairs);
  }
  w.close_array();
  w.key("candidate_sets");
  w.open_array();
  for (const auto& s : sets)
    write_with_pairs(w, in.topo, candidate_set_json(in.topo, s), set_pairs(in.topo, in.kernel, in.measured, in.options, s));
  w.close_array();
  w.close_object();
}

}  // namespace p2paudit::fleet
