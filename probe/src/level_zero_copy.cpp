// SPDX-License-Identifier: GPL-2.0-or-later
// `probe --copy` on Level Zero: per ordered pair, in its own child, one context holding both
// devices, device memory on each, and two legs over the same kind of random buffer:
//   peer         client_mem <- provider_mem on the client's copy engine (the transfer P2PDMA carries)
//   host_staged  provider_mem -> host -> client_mem (what a runtime falls back to)
// each repeated, timed around the copy call, downloaded and compared in full (copy_check.h).
// Immediate command lists in synchronous mode: the append returns when the copy is done, so it
// is the synchronisation point and the timed call. docs/probe-level-zero.md has the JSON.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <initializer_list>

#include "copy_check.h"
#include "level_zero_api.h"
#include "level_zero_steps.h"
#include "p2paudit/probe/isolate.h"
#include "session.h"

namespace p2paudit::probe::level_zero {
namespace {

using detail::CopyLeg;
using nlohmann::json;
using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// Everything the child created, released in reverse order however the legs end: a failed call
// ends its leg, never the cleanup.
class Held {
 public:
  explicit Held(const Api& api) : api_(api) {}
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
  ~Held() {
    for (auto it = lists_.rbegin(); it != lists_.rend(); ++it) {
      isolated_phase("zeCommandListDestroy");
      api_.CommandListDestroy(*it);
    }
    for (auto it = memory_.rbegin(); it != memory_.rend(); ++it) {
      isolated_phase("zeMemFree");
      api_.MemFree(context, *it);
    }
    if (context) {
      isolated_phase("zeContextDestroy");
      api_.ContextDestroy(context);
    }
  }
  void keep(void* memory) { memory_.push_back(memory); }
  void keep(ze_command_list_handle_t list) { lists_.push_back(list); }
  ze_context_handle_t context = nullptr;

 private:
  const Api& api_;
  std::vector<void*> memory_;
  std::vector<ze_command_list_handle_t> lists_;
};

// A failure the child caught (CallFailed's JSON) as the failure of every leg not yet decided.
void fail_legs(const json& failure, std::initializer_list<CopyLeg*> legs) {
  const std::string call = failure.value("call", std::string("?"));
  const long long code = failure.value("value", 0LL);
  const std::string name = failure.value("name", std::string("?"));
  for (CopyLeg* leg : legs)
    if (leg->result == "not_run") leg->fail(call, code, name);
}

// One runtime call in its own phase (a hang or crash names it); on failure the leg fails with it.
template <typename Call>
bool step(const std::string& phase, CopyLeg& leg, Call&& call) {
  isolated_phase(phase);
  const ze_result_t r = call();
  if (r == ZE_RESULT_SUCCESS) return true;
  leg.fail(phase, static_cast<long long>(static_cast<uint32_t>(r)), result_text(r));
  return false;
}

// A seed per pair, leg and repeat: a stale buffer from another repeat never compares equal.
uint64_t seed_for(const DeviceSlot& provider, const DeviceSlot& client, int leg, int repeat) {
  return 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(provider.index + 1) << 40) ^
         (static_cast<uint64_t>(client.index + 1) << 24) ^ (static_cast<uint64_t>(leg) << 16) ^
         static_cast<uint64_t>(repeat + 1);
}

// answers["copy"] with the raw code in hex beside the decimal one, as the other answers show it.
json copy_json(const CopyOptions& options, const CopyLeg& peer, const CopyLeg& staged) {
  json j = detail::copy_answer(options, peer, staged);
  for (const char* leg : {"peer", "host_staged"})
    if (j[leg].value("result", "") == "failed")
      j[leg]["code_hex"] = hex_code(static_cast<uint32_t>(j[leg].value("code", 0LL)));
  return j;
}

// The measuring itself; returns with the legs decided, before Held releases what it holds.
void run_legs(const Api& api, Held& held, const Walk& w, const DeviceSlot& provider, const DeviceSlot& client,
              const CopyOptions& options, CopyLeg& peer, CopyLeg& staged) {
  ze_device_handle_t devices[2] = {w.devices[provider.driver][provider.position],
                                   w.devices[client.driver][client.position]};
  const std::string p = std::to_string(provider.index), c = std::to_string(client.index);
  const size_t n = static_cast<size_t>(options.size_bytes);

  void* provider_mem = nullptr;
  void* client_mem = nullptr;
  uint8_t* pattern = nullptr;  // the bytes sent, and what every download is compared with
  uint8_t* bounce = nullptr;   // the staging buffer of host_staged, and where downloads land
  ze_command_list_handle_t provider_list = nullptr, client_list = nullptr;
  try {
    isolated_phase("zeContextCreateEx");
    ze_context_desc_t context_desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    check("zeContextCreateEx", api.ContextCreateEx(w.drivers[provider.driver], &context_desc, 2, devices,
                                                   &held.context));
    const auto list_on = [&](ze_device_handle_t device, const std::string& which) {
      const std::string groups = "zeDeviceGetCommandQueueGroupProperties(" + which + ")";
      const int ordinal = queue_group_ordinal(api, device, ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY, groups);
      if (ordinal < 0) throw CallFailed{{{"call", groups}, {"name", "no command queue group that can copy"}}};
      ze_command_queue_desc_t queue_desc{};
      queue_desc.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC;
      queue_desc.ordinal = static_cast<uint32_t>(ordinal);
      queue_desc.mode = ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS;
      queue_desc.priority = ZE_COMMAND_QUEUE_PRIORITY_NORMAL;
      const std::string create = "zeCommandListCreateImmediate(" + which + ")";
      isolated_phase(create);
      ze_command_list_handle_t list = nullptr;
      check(create, api.CommandListCreateImmediate(held.context, device, &queue_desc, &list));
      held.keep(list);
      return list;
    };
    provider_list = list_on(devices[0], p);
    client_list = list_on(devices[1], c);
    const auto device_memory = [&](ze_device_handle_t device, const std::string& which) {
      const std::string phase = "zeMemAllocDevice(on " + which + ")";
      isolated_phase(phase);
      ze_device_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
      void* memory = nullptr;
      check(phase, api.MemAllocDevice(held.context, &desc, n, 64, device, &memory));
      held.keep(memory);
      return memory;
    };
    provider_mem = device_memory(devices[0], p);
    client_mem = device_memory(devices[1], c);
    const auto host_memory = [&] {
      isolated_phase("zeMemAllocHost");
      ze_host_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
      void* memory = nullptr;
      check("zeMemAllocHost", api.MemAllocHost(held.context, &desc, n, 64, &memory));
      held.keep(memory);
      return static_cast<uint8_t*>(memory);
    };
    pattern = host_memory();
    bounce = host_memory();
  } catch (const CallFailed& f) {
    fail_legs(f.failure, {&peer, &staged});
    return;
  }

  const auto copy = [&](ze_command_list_handle_t list, void* dst, const void* src, double* seconds) {
    const auto start = Clock::now();
    const ze_result_t r = api.CommandListAppendMemoryCopy(list, dst, src, n, nullptr, 0, nullptr);
    if (seconds) *seconds += std::chrono::duration<double>(Clock::now() - start).count();
    return r;
  };
  // A fresh random buffer in provider memory (pattern keeps it).
  const auto upload = [&](CopyLeg& leg, uint64_t seed) {
    detail::fill_random(pattern, n, seed);
    return step("zeCommandListAppendMemoryCopy(host -> " + p + ")", leg,
                [&] { return copy(provider_list, provider_mem, pattern, nullptr); });
  };
  // The client's memory back to the host, compared in full; the first repeat that differs is kept.
  const auto verify = [&](CopyLeg& leg) {
    std::memset(bounce, 0, n);  // a download that silently did nothing must not compare equal
    if (!step("zeCommandListAppendMemoryCopy(" + c + " -> host)", leg,
              [&] { return copy(client_list, bounce, client_mem, nullptr); }))
      return false;
    const detail::Mismatch m = detail::compare_buffers(pattern, bounce, n);
    if (m.any() && !leg.mismatch.any()) leg.mismatch = m;
    return true;
  };

  for (int r = 0; r < options.repeat; ++r) {
    if (!upload(peer, seed_for(provider, client, 1, r))) break;
    double seconds = 0;
    if (!step("zeCommandListAppendMemoryCopy(" + p + " -> " + c + " peer)", peer,
              [&] { return copy(client_list, client_mem, provider_mem, &seconds); }))
      break;
    peer.seconds.push_back(seconds);
    if (!verify(peer)) break;
  }
  peer.finish();

  // The host-staged leg runs whatever the peer leg did: it is what a runtime falls back to.
  for (int r = 0; r < options.repeat; ++r) {
    if (!upload(staged, seed_for(provider, client, 2, r))) break;
    double seconds = 0;
    if (!step("zeCommandListAppendMemoryCopy(" + p + " -> host)", staged,
              [&] { return copy(provider_list, bounce, provider_mem, &seconds); }))
      break;
    if (!step("zeCommandListAppendMemoryCopy(host -> " + c + ")", staged,
              [&] { return copy(client_list, client_mem, bounce, &seconds); }))
      break;
    staged.seconds.push_back(seconds);
    if (!verify(staged)) break;
  }
  staged.finish();
}

// The child's body. Returns {"copy": {...}}; the same object goes out as a partial message before
// the cleanup, so a driver that hangs or crashes while freeing does not lose the measurement.
json copy_body(const DeviceSlot& provider, const DeviceSlot& client, const CopyOptions& options) {
  CopyLeg peer, staged;
  Api api;
  if (const std::string e = open_loader(api); !e.empty()) {
    peer.error = staged.error = "the loader could not be opened: " + e;  // stays not_run, with the note
    return json{{"copy", copy_json(options, peer, staged)}};
  }
  if (!api.has_memory_calls()) {
    peer.error = staged.error = std::string(kLoaderLibrary) + " lacks the context, memory or command list calls";
    return json{{"copy", copy_json(options, peer, staged)}};
  }
  if (options.size_bytes == 0) {
    peer.error = staged.error = "--size 0: nothing to copy";
    return json{{"copy", copy_json(options, peer, staged)}};
  }
  json answer;
  {
    Held held(api);
    try {
      const Walk w = walk(api);
      const auto present = [&](const DeviceSlot& s) {
        return s.driver < w.devices.size() && s.position < w.devices[s.driver].size();
      };
      if (!present(provider) || !present(client)) {
        throw CallFailed{{{"call", "zeDeviceGet"}, {"name", "the devices changed since the enumeration"}}};
      }
      run_legs(api, held, w, provider, client, options, peer, staged);
    } catch (const CallFailed& f) {
      fail_legs(f.failure, {&peer, &staged});
    }
    answer = copy_json(options, peer, staged);
    isolated_partial(json{{"copy", answer}});
  }
  return json{{"copy", answer}};
}

ordered_json ordered_copy(const json& copy) {
  ordered_json out = in_order(copy, {"size_bytes", "repeat", "peer", "host_staged"});
  for (const char* leg : {"peer", "host_staged"})
    if (copy.contains(leg) && copy[leg].is_object())
      out[leg] = in_order(copy[leg], {"result", "gbps", "seconds", "phase", "error", "code", "code_hex",
                                      "mismatched_bytes", "first_mismatch", "note"});
  return out;
}

// --copy for one ordered pair as its child ended: `copy` is answers["copy"] (probe.h): the object,
// or the way the child died ("hung", "crashed", "failed"); status/phase/error are the child's
// (status "ok" when it returned; a child that died after measuring still gives the object).
struct CopyOutcome {
  ordered_json copy;
  std::string status = "ok";
  std::string phase;
  std::string error;
};

CopyOutcome copy_outcome(const IsolatedResult& r) {
  CopyOutcome out;
  json copy;
  if (r.ok() && r.value.is_object() && r.value.contains("copy")) copy = r.value["copy"];
  for (const json& piece : r.partial)
    if (copy.is_null() && piece.is_object() && piece.contains("copy")) copy = piece["copy"];
  if (!r.ok()) {
    out.status = r.status;
    out.phase = r.phase;
    out.error = r.error;
  } else if (!copy.is_object()) {
    out.status = "failed";
    out.phase = r.phase;
    out.error = "the copy child returned no answer";
  }
  out.copy = copy.is_object() ? ordered_copy(copy) : ordered_json(out.status);
  return out;
}

}  // namespace

ordered_json in_order(const json& j, std::initializer_list<const char*> first) {
  if (!j.is_object()) return ordered_json::parse(j.dump());
  ordered_json out = ordered_json::object();
  for (const char* key : first)
    if (j.contains(key)) out[key] = ordered_json::parse(j[key].dump());
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!out.contains(it.key())) out[it.key()] = ordered_json::parse(it.value().dump());
  return out;
}

void copy_pairs(RuntimeReport& report, const std::vector<DeviceSlot>& slots, const ProbeOptions& options) {
  CopyOptions bounded = options.copy;
  bounded.repeat = std::clamp(bounded.repeat, 1, kMaxCopyRepeat);
  // A driver that already died on a pair's queries is not asked to copy: each death costs up to a
  // time limit and says nothing new.
  std::vector<PairAnswer*> todo;
  for (auto& pair : report.pairs) {
    if (pair.answers.contains("status")) pair.answers["copy"] = "not_asked";
    else todo.push_back(&pair);
  }
  detail::PairChildren copies;
  copies.phase = "zeInit";
  copies.per_child = 1;
  copies.count = [&] { return std::optional<size_t>(todo.size()); };
  copies.ask = [&](size_t item, size_t) {
    return copy_body(slots[static_cast<size_t>(todo[item]->provider)], slots[static_cast<size_t>(todo[item]->client)],
                     bounded);
  };
  // The copy's answer, or how its child died; true when it crashed or hung.
  const auto store = [&](size_t item, const IsolatedResult& r) {
    const CopyOutcome copy = copy_outcome(r);
    auto& answers = todo[item]->answers;
    answers["copy"] = copy.copy;
    if (copy.status == "ok") return false;
    answers["phase"] = copy.phase;
    answers["error"] = copy.error;
    if (copy.status != "crashed" && copy.status != "hung") return false;
    detail::report_first_death(report, copy.status, copy.phase, copy.error);
    return true;
  };
  copies.take = [&](const IsolatedResult& r, size_t item) -> std::optional<size_t> {
    if (!r.ok()) return 0;
    store(item, r);
    return 1;
  };
  copies.charge = store;
  copies.skip = [&](size_t item) { todo[item]->answers["copy"] = "not_asked"; };
  const int deaths = detail::run_pair_children(copies, options.timeout_seconds);
  if (deaths >= copies.max_deaths)
    detail::add_note(report, std::to_string(deaths) + " copy children crashed or hung: the remaining pairs' copies "
                             "were not asked");
}

}  // namespace p2paudit::probe::level_zero
