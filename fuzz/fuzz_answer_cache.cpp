// SPDX-License-Identifier: GPL-2.0-or-later
// The per-boot answer cache's file (docs/probe.md "The answer cache"): the bounded parse, the key
// comparison, then the facts of the document it holds, as read_runtime_evidence() takes them. The
// key is the one the seeds carry, so that a mutated document behind a matching key reaches
// runtime_facts().
#include <cstdint>

#include "fuzz_input.h"
#include "p2paudit/errors.h"
#include "p2paudit/probe/answer_cache.h"
#include "p2paudit/probe/runtime_facts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json key = {{"probe_schema_version", 1}, {"boot_id", "fuzz"}};
  try {
    std::string note;
    if (auto document = p2paudit::probe::parse_answer_cache(p2paudit::fuzz::text(data, size), "answers.json", key, &note))
      (void)p2paudit::probe::runtime_facts(*document, "answers.json");
  } catch (const p2paudit::InputError&) {
  }
  return 0;
}
