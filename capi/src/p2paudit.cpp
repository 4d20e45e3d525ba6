// SPDX-License-Identifier: GPL-2.0-or-later
// The C API of p2paudit.h over the analyzer and policy libraries. Nothing is thrown across the
// boundary: every entry point catches everything and answers with a status and a message.
#include "p2paudit.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "p2paudit/device_class.h"
#include "p2paudit/errors.h"
#include "p2paudit/json_output.h"
#include "p2paudit/kernel_log.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/log_explain.h"
#include "p2paudit/probe/decision_inputs.h"
#include "p2paudit/rules_location.h"
#include "p2paudit/topology_reader.h"

namespace {

using namespace p2paudit;

// The first versions' sizes: a caller's struct_size below them is an error, above them (a later
// header) fields this library does not know.
constexpr size_t kOptionsV1Size = offsetof(p2paudit_options, probe_runtimes) + sizeof(int);
constexpr size_t kCheckResultV1Size = offsetof(p2paudit_check_result, remedy) + sizeof(const char*);

// A device's strings, kept for as long as the handle so that p2paudit_device's pointers stay valid.
struct DeviceStrings {
  std::string bdf, name, device_class, vendor_name, device_name;
};

}  // namespace

struct p2paudit_machine {
  // Read as `check` reads them, through the same function (probe/decision_inputs.h).
  DecisionInputs inputs;
  std::unique_ptr<policy::PolicyEvaluator> evaluator;  // refers into inputs
  std::string sysroot;     // what it was read from: "/" (this machine), a capture, or a dump
  bool from_dump = false;
  std::vector<DeviceStrings> devices;
  std::string kernel_release;
  std::string last_error;
  // p2paudit_check()'s strings, valid until the next p2paudit_check().
  std::string check_rule, check_authority, check_reason, check_remedy, check_settled_by;
};

namespace {

// Options that contradict each other or a value no option takes: P2PAUDIT_ERROR_ARGUMENT.
struct ArgumentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Failure {
  p2paudit_status status;
  std::string message;
};

// The exception being handled as a status and a one-line message.
Failure current_failure() {
  try {
    throw;
  } catch (const InputError& e) {
    return {P2PAUDIT_ERROR_INPUT, e.what()};
  } catch (const ArgumentError& e) {
    return {P2PAUDIT_ERROR_ARGUMENT, e.what()};
  } catch (const std::bad_alloc&) {
    return {P2PAUDIT_ERROR_MEMORY, "out of memory"};
  } catch (const std::exception& e) {
    return {P2PAUDIT_ERROR_INTERNAL, e.what()};
  } catch (...) {
    return {P2PAUDIT_ERROR_INTERNAL, "unknown exception"};
  }
}

p2paudit_status fail(p2paudit_machine* m, p2paudit_status status, std::string message) noexcept {
  try {
    m->last_error = std::move(message);
  } catch (...) {
    m->last_error.clear();  // out of memory for the message itself: the code still says why
  }
  return status;
}

// Runs body; a throw becomes a status, its message the handle's last error.
template <typename Body>
p2paudit_status guarded(p2paudit_machine* m, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    Failure f = current_failure();
    return fail(m, f.status, std::move(f.message));
  }
}

// malloc'd so that a caller in any language can hand it back to p2paudit_string_free().
char* c_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (!out) throw std::bad_alloc();
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

// NULL-terminated strings as a vector; at most 4096 entries (a bound on a list whose NULL was
// forgotten, which is then refused before it runs far).
std::vector<std::string> string_list(const char* const* list, const char* field) {
  std::vector<std::string> out;
  if (!list) return out;
  for (size_t i = 0; list[i]; ++i) {
    if (i == 4096) throw ArgumentError(fmt::format("p2paudit_options.{}: more than 4096 entries (is it NULL-terminated?)", field));
    out.emplace_back(list[i]);
  }
  return out;
}

std::string text(const char* s) { return s ? s : ""; }

// What `p2paudit [OPTIONS] check` reads, from the options: the tool's global options and those of
// check (probe/decision_inputs.h turns both into the same DecisionInputs).
std::unique_ptr<p2paudit_machine> read_machine(const p2paudit_options& o) {
  MachineSource source;
  source.lspci_dump = text(o.lspci_dump);
  if (o.sysroot) source.sysroot = o.sysroot;
  if (!source.lspci_dump.empty() && o.sysroot)
    throw ArgumentError("p2paudit_options: lspci_dump and sysroot name two inputs: give one");
  if (source.lspci_dump.empty() && (o.dump_cpu || o.dump_iommu || o.dump_host_bridges))
    throw ArgumentError("p2paudit_options: dump_cpu, dump_iommu and dump_host_bridges describe an lspci dump: "
                                "they need lspci_dump");
  if (o.dump_cpu && *o.dump_cpu) source.dump_cpu = DumpCpu::parse(o.dump_cpu);
  source.dump_iommu = text(o.dump_iommu);
  if (!source.dump_iommu.empty() && source.dump_iommu != "off" && source.dump_iommu != "passthrough" &&
      source.dump_iommu != "translated")
    throw ArgumentError(fmt::format("p2paudit_options.dump_iommu '{}': expected off, passthrough or translated",
                                            escape_text(source.dump_iommu)));
  source.dump_host_bridges = string_list(o.dump_host_bridges, "dump_host_bridges");
  source.kernel = text(o.kernel);
  source.kernel_rules = string_list(o.kernel_rules, "kernel_rules");
  source.assume_whitelisted = string_list(o.assume_whitelisted, "assume_whitelisted");
  source.assume_acs_off = string_list(o.assume_acs_off, "assume_acs_off");
  source.rules_dir = find_rules_dir(text(o.rules_dir), RulesAnchor::kSharedLibrary).string();
  PolicyInputs policy;
  policy.rule_files = string_list(o.policy_rules, "policy_rules");
  policy.no_default_rules = o.no_default_rules != 0;
  policy.vendor_facts = text(o.vendor_facts);
  policy.ignore_stored_probe = o.ignore_stored_probe != 0;
  policy.ask_live = o.probe_runtimes != 0;

  auto m = std::make_unique<p2paudit_machine>();
  // The statements `check` prints on stderr about a dump's unknowns and --assume-acs-off are left
  // out (a library prints nothing); the same statements are in the topology's findings.
  std::vector<std::string> aside;
  m->inputs = read_decision_inputs(source, policy, AssumptionNotes::kAside, &aside);
  m->from_dump = !source.lspci_dump.empty();
  m->sysroot = m->from_dump ? source.lspci_dump : source.sysroot;
  const DecisionInputs& in = m->inputs;
  m->evaluator = std::make_unique<policy::PolicyEvaluator>(in.topo, in.kernel, in.rules, in.vendor_facts());
  m->kernel_release = in.kernel.release.text.empty() ? in.kernel.release.version() : in.kernel.release.text;
  for (const auto& named : matrix_devices(in.topo, true)) {
    const Function& f = in.topo.functions[named.index];
    m->devices.push_back({f.bdf.str(), named.short_name, std::string(device_class_name(classify_device(f))),
                          f.vendor_name, f.device_name});
  }
  return m;
}

// The log that tells about the machine (as `p2paudit log` without --from): this boot's /dev/kmsg
// for the live machine, a capture's own (`snapshot --with-log`); never this machine's for a capture.
policy::LogSource machine_log(p2paudit_machine* m, std::optional<uint64_t> since, policy::LogExplainer& explainer) {
  policy::LogSource source = policy::read_machine_log(m->sysroot, m->from_dump, since, [&](KernelLogLine&& line) {
    if (auto e = recognise_kernel_log_line(line)) explainer.add(*e);
  });
  explainer.finish();
  return source;
}

// p2paudit_explain_log() and p2paudit_explain_log_since(): `read` fills the explainer (finish()
// called) and says what it read; the rest is `log --format json`'s document and the count.
template <typename Read>
p2paudit_status explained_log(p2paudit_machine* machine, char** json, uint64_t* contradictions, Read&& read) {
  if (json) *json = nullptr;
  if (contradictions) *contradictions = 0;
  if (!machine || !json) return machine ? fail(machine, P2PAUDIT_ERROR_ARGUMENT, "json must not be NULL") : P2PAUDIT_ERROR_ARGUMENT;
  return guarded(machine, [&] {
    policy::LogExplainer explainer(*machine->evaluator, machine->inputs.kernel);
    const policy::LogSource source = read(explainer);
    *json = c_string(json_text(policy::log_json(machine->inputs.topo, explainer, source)));
    if (contradictions) *contradictions = explainer.contradictions();
    return P2PAUDIT_OK;
  });
}

p2paudit_status find_device(p2paudit_machine* m, const char* spec, const char* role, size_t* index) {
  if (!spec) return fail(m, P2PAUDIT_ERROR_ARGUMENT, fmt::format("the {} is NULL", role));
  if (auto i = resolve_function(m->inputs.topo, spec)) {
    *index = *i;
    return P2PAUDIT_OK;
  }
  return fail(m, P2PAUDIT_ERROR_NO_DEVICE,
              fmt::format("no PCI function '{}' on this machine (use DDDD:BB:DD.F, BB:DD.F, or a name such as gpu0)",
                          escape_text(spec)));
}

p2paudit_verdict to_c(MapType t) {
  switch (t) {
    case MapType::kNotSupported: return P2PAUDIT_VERDICT_NOT_SUPPORTED;
    case MapType::kBusAddr: return P2PAUDIT_VERDICT_BUS_ADDR;
    case MapType::kThruHostBridge: return P2PAUDIT_VERDICT_THRU_HOST_BRIDGE;
    case MapType::kUnknown: break;
  }
  return P2PAUDIT_VERDICT_UNKNOWN;
}

p2paudit_answer to_c(policy::Answer a) {
  switch (a) {
    case policy::Answer::kYes: return P2PAUDIT_ANSWER_YES;
    case policy::Answer::kNo: return P2PAUDIT_ANSWER_NO;
    case policy::Answer::kUnknown: break;
  }
  return P2PAUDIT_ANSWER_UNKNOWN;
}

p2paudit_decision to_c(policy::Action a) {
  switch (a) {
    case policy::Action::kPeer: return P2PAUDIT_DECISION_PEER;
    case policy::Action::kHostStaged: return P2PAUDIT_DECISION_HOST_STAGED;
    case policy::Action::kDeny: return P2PAUDIT_DECISION_DENY;
    case policy::Action::kWarn: break;  // never a decision
  }
  return P2PAUDIT_DECISION_UNKNOWN;
}

}  // namespace

extern "C" {

const char* p2paudit_version(void) { return P2PAUDIT_VERSION; }

const char* p2paudit_status_string(p2paudit_status status) {
  switch (status) {
    case P2PAUDIT_OK: return "ok";
    case P2PAUDIT_ERROR_ARGUMENT: return "invalid argument";
    case P2PAUDIT_ERROR_INPUT: return "bad input";
    case P2PAUDIT_ERROR_NO_DEVICE: return "no such device";
    case P2PAUDIT_ERROR_MEMORY: return "out of memory";
    case P2PAUDIT_ERROR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

p2paudit_status p2paudit_open_with(const p2paudit_options* options, p2paudit_machine** machine, char** error) {
  if (error) *error = nullptr;
  Failure f{P2PAUDIT_OK, ""};
  // The caller's struct as this library knows it: fields past its struct_size are 0/NULL; fields
  // this library does not know must be 0 (a newer caller asking for something not done here).
  p2paudit_options o{};
  o.struct_size = sizeof o;
  if (!machine) {
    f = {P2PAUDIT_ERROR_ARGUMENT, "p2paudit_open_with: the machine pointer is NULL"};
  } else {
    *machine = nullptr;
    if (options) {
      const size_t size = options->struct_size;
      if (size < kOptionsV1Size) {
        f = {P2PAUDIT_ERROR_ARGUMENT, fmt::format("p2paudit_open_with: options.struct_size {} is smaller than the "
                                                  "first version's {} (set it to sizeof(p2paudit_options))",
                                                  size, kOptionsV1Size)};
      } else {
        std::memcpy(&o, options, std::min(size, sizeof o));
        const auto* bytes = reinterpret_cast<const unsigned char*>(options);
        for (size_t i = sizeof o; i < size && f.status == P2PAUDIT_OK; ++i)
          if (bytes[i])
            f = {P2PAUDIT_ERROR_ARGUMENT, fmt::format("p2paudit_open_with: options.struct_size {} holds fields this "
                                                      "library ({}, {} bytes) does not know, set to non-zero values",
                                                      size, P2PAUDIT_VERSION, sizeof o)};
      }
    }
  }
  if (f.status == P2PAUDIT_OK) {
    try {
      *machine = read_machine(o).release();
      return P2PAUDIT_OK;
    } catch (...) {
      f = current_failure();
    }
  }
  if (error) {
    try {
      *error = c_string(f.message);
    } catch (...) {
      *error = nullptr;
    }
  }
  return f.status;
}

p2paudit_status p2paudit_open(const char* sysroot, const char* rules_dir, p2paudit_machine** machine, char** error) {
  if (!sysroot) {
    if (error) {
      *error = nullptr;
      try {
        *error = c_string("p2paudit_open: the sysroot is NULL (\"/\" is this machine)");
      } catch (...) {
      }
    }
    if (machine) *machine = nullptr;
    return P2PAUDIT_ERROR_ARGUMENT;
  }
  p2paudit_options options = P2PAUDIT_OPTIONS_INIT;
  options.sysroot = sysroot;
  options.rules_dir = rules_dir;
  return p2paudit_open_with(&options, machine, error);
}

void p2paudit_close(p2paudit_machine* machine) { delete machine; }

const char* p2paudit_last_error(const p2paudit_machine* machine) {
  return machine ? machine->last_error.c_str() : "the machine handle is NULL";
}

const char* p2paudit_kernel_release(const p2paudit_machine* machine) {
  return machine ? machine->kernel_release.c_str() : "";
}

size_t p2paudit_device_count(const p2paudit_machine* machine) { return machine ? machine->devices.size() : 0; }

p2paudit_status p2paudit_device_at(p2paudit_machine* machine, size_t index, p2paudit_device* device) {
  if (!machine) return P2PAUDIT_ERROR_ARGUMENT;
  return guarded(machine, [&] {
    if (device) *device = {};
    if (!device) return fail(machine, P2PAUDIT_ERROR_ARGUMENT, "p2paudit_device_at: the device pointer is NULL");
    if (index >= machine->devices.size())
      return fail(machine, P2PAUDIT_ERROR_ARGUMENT,
                  fmt::format("p2paudit_device_at: index {} is out of range (the machine has {} PCI functions)", index,
                              machine->devices.size()));
    const Function& f = machine->inputs.topo.functions[index];
    const DeviceStrings& s = machine->devices[index];
    *device = {s.bdf.c_str(), s.name.c_str(), s.device_class.c_str(), s.vendor_name.c_str(), s.device_name.c_str(),
               f.vendor, f.device, f.class_code};
    return P2PAUDIT_OK;
  });
}

p2paudit_status p2paudit_device_find(p2paudit_machine* machine, const char* spec, size_t* index) {
  if (!machine) return P2PAUDIT_ERROR_ARGUMENT;
  return guarded(machine, [&] {
    if (!index) return fail(machine, P2PAUDIT_ERROR_ARGUMENT, "p2paudit_device_find: the index pointer is NULL");
    return find_device(machine, spec, "device", index);
  });
}

p2paudit_status p2paudit_pair(p2paudit_machine* machine, const char* provider, const char* client,
                              p2paudit_verdict* verdict, p2paudit_decision* decision, char** details_json) {
  if (verdict) *verdict = P2PAUDIT_VERDICT_UNKNOWN;
  if (decision) *decision = P2PAUDIT_DECISION_UNKNOWN;
  if (details_json) *details_json = nullptr;
  if (!machine) return P2PAUDIT_ERROR_ARGUMENT;
  return guarded(machine, [&] {
    size_t p = 0, c = 0;
    if (auto s = find_device(machine, provider, "provider", &p); s != P2PAUDIT_OK) return s;
    if (auto s = find_device(machine, client, "client", &c); s != P2PAUDIT_OK) return s;
    policy::PairDecision d = machine->evaluator->decide_in_full(p, c);
    if (details_json) {
      // `check --format json`'s object, with the kernel's whole reasoning as `explain` gives it.
      auto j = policy::pair_decision_json(machine->inputs.topo, d);
      j["verdict"] = verdict_json(machine->inputs.topo, machine->inputs.kernel, d.verdict);
      *details_json = c_string(json_text(std::move(j)));
    }
    if (verdict) *verdict = to_c(d.verdict.map_type);
    if (decision) *decision = to_c(d.decision.action);
    return P2PAUDIT_OK;
  });
}

p2paudit_status p2paudit_check(p2paudit_machine* machine, const char* provider, const char* client,
                               p2paudit_check_result* result, char** details_json) {
  if (details_json) *details_json = nullptr;
  // The fields the caller's struct holds, zeroed first (an unset struct_size fills nothing).
  const size_t size = result ? std::min(result->struct_size, sizeof *result) : 0;
  p2paudit_check_result out{};
  out.struct_size = result ? result->struct_size : 0;
  auto deliver = [&] {
    if (result && size >= sizeof(size_t)) std::memcpy(static_cast<void*>(result), &out, size);
  };
  deliver();
  if (!machine) return P2PAUDIT_ERROR_ARGUMENT;
  return guarded(machine, [&] {
    if (!result)
      return fail(machine, P2PAUDIT_ERROR_ARGUMENT, "p2paudit_check: the result pointer is NULL");
    if (size < kCheckResultV1Size)
      return fail(machine, P2PAUDIT_ERROR_ARGUMENT,
                  fmt::format("p2paudit_check: result->struct_size {} is smaller than the first version's {} (set it "
                              "to sizeof(p2paudit_check_result))", result->struct_size, kCheckResultV1Size));
    size_t p = 0, c = 0;
    if (auto s = find_device(machine, provider, "provider", &p); s != P2PAUDIT_OK) return s;
    if (auto s = find_device(machine, client, "client", &c); s != P2PAUDIT_OK) return s;
    const DecisionInputs& in = machine->inputs;
    CheckAnswer a = check_pair(*machine->evaluator, p, c, true);
    if (details_json) {
      // `check --format json`'s object, with the kernel's whole reasoning as `explain` gives it.
      auto j = check_json(in, a, true);
      j["verdict"] = verdict_json(in.topo, in.kernel, a.pair.verdict);
      *details_json = c_string(json_text(std::move(j)));
    }
    const policy::Decision& d = a.pair.decision;
    machine->check_rule = d.rule;
    machine->check_authority = d.authority ? policy::to_string(*d.authority) : "";
    machine->check_reason = d.reason;
    machine->check_remedy = d.remedy;
    out.answer = to_c(a.answer);
    out.decision = to_c(d.action);
    out.verdict = to_c(a.pair.verdict.map_type);
    out.rule = machine->check_rule.c_str();
    out.authority = machine->check_authority.c_str();
    out.reason = machine->check_reason.c_str();
    out.remedy = machine->check_remedy.c_str();
    machine->check_settled_by = policy::settle_text(d);
    out.certain = d.certain() ? 1 : 0;
    for (policy::Action action : policy::actions_in(d.possible | policy::action_bit(d.action)))
      out.possible |= 1u << to_c(action);
    out.settled_by = machine->check_settled_by.c_str();
    deliver();
    return P2PAUDIT_OK;
  });
}

void p2paudit_string_free(char* string) { std::free(string); }


p2paudit_status p2paudit_explain_log(p2paudit_machine* machine, const char* log_path, char** json,
                                     uint64_t* contradictions) {
  // As `p2paudit log` reads it (tools/p2paudit/cmd_log.cpp): a regular file, or the machine's own log.
  return explained_log(machine, json, contradictions, [&](policy::LogExplainer& explainer) {
    return log_path ? policy::explain_log_file(log_path, explainer) : machine_log(machine, std::nullopt, explainer);
  });
}

p2paudit_status p2paudit_log_position(uint64_t* position, char** error) {
  if (error) *error = nullptr;
  if (!position) return P2PAUDIT_ERROR_ARGUMENT;
  *position = 0;
  try {
    std::string why;
    if (auto at = kmsg_position(&why)) {
      *position = *at;
      return P2PAUDIT_OK;
    }
    if (error) *error = c_string(why);
    return P2PAUDIT_ERROR_INPUT;
  } catch (const std::bad_alloc&) {
    return P2PAUDIT_ERROR_MEMORY;
  } catch (const std::exception& e) {
    if (error) *error = c_string(e.what());
    return P2PAUDIT_ERROR_INPUT;
  }
}

p2paudit_status p2paudit_explain_log_since(p2paudit_machine* machine, uint64_t position, char** json,
                                           uint64_t* contradictions) {
  return explained_log(machine, json, contradictions,
                       [&](policy::LogExplainer& explainer) { return machine_log(machine, position, explainer); });
}

}  // extern "C"
