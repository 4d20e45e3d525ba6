// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit policy --format env`: shell exports for NCCL, llama.cpp/GGML, oneCCL and vLLM from the
// decisions of the pairs of the GPUs a job will use (job_gpus.h); docs/policy.md, "Shell exports",
// gives each consumer's own semantics.
#pragma once

#include <string>
#include <vector>

#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/job_gpus.h"

namespace p2paudit::policy {

// Whether the exports may treat the group's pairs as peer: only a decision that is peer for
// certain, since an export that turns peer DMA on is acted on without a second look.
bool decided_peer(const DecisionGroup& group);

// The exports for the job's GPU pairs (pairs of GPUs of one vendor: no runtime these variables
// steer copies between vendors), with a comment line per distinct reason a pair is not peer;
// NCCL_NET_GDR_LEVEL from the job's NVIDIA GPUs and the NICs among `devices`.
std::string env_exports(PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices, const JobGpus& job);
// The same for a job of every compute GPU (no selection).
std::string env_exports(PolicyEvaluator& evaluator, const std::vector<NamedFunction>& devices);

}  // namespace p2paudit::policy
