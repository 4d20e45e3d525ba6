// SPDX-License-Identifier: GPL-2.0-or-later
// The C API of p2paudit.h over the analyzer and policy libraries. Nothing is thrown across the
// boundary: every entry point catches everything and answers with a status and a message.
#include "p2paudit.h"

#include <cstdlib>
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
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/rules_location.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"

namespace {

using namespace p2paudit;

// A device's strings, kept for as long as the handle so that p2paudit_device's pointers stay valid.
struct DeviceStrings {
  std::string bdf, name, device_class, vendor_name, device_name;
};

}  // namespace

struct p2paudit_machine {
  Topology topo;
  KernelRules kernel;
  policy::RuleSet rules;
  std::unique_ptr<policy::PolicyEvaluator> evaluator;  // refers to the three above
  std::vector<DeviceStrings> devices;
  std::string kernel_release;
  std::string last_error;
};

namespace {

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

std::unique_ptr<p2paudit_machine> read_machine(const char* sysroot, const char* rules_dir) {
  auto m = std::make_unique<p2paudit_machine>();
  m->topo = read_topology(Sysroot::open(sysroot));
  auto rules = find_rules_dir(rules_dir ? rules_dir : "", RulesAnchor::kSharedLibrary);
  m->kernel = load_kernel_rules(rules / "kernel", m->topo.platform, {});
  m->rules = policy::RuleSet::load(policy::default_rule_files(rules.string()));
  m->evaluator = std::make_unique<policy::PolicyEvaluator>(m->topo, m->kernel, m->rules, nullptr);
  m->kernel_release = m->kernel.release.text.empty() ? m->kernel.release.version() : m->kernel.release.text;
  for (const auto& named : matrix_devices(m->topo, true)) {
    const Function& f = m->topo.functions[named.index];
    m->devices.push_back({f.bdf.str(), named.short_name, std::string(device_class_name(classify_device(f))),
                          f.vendor_name, f.device_name});
  }
  return m;
}

p2paudit_status find_device(p2paudit_machine* m, const char* spec, const char* role, size_t* index) {
  if (!spec) return fail(m, P2PAUDIT_ERROR_ARGUMENT, fmt::format("the {} is NULL", role));
  if (auto i = resolve_function(m->topo, spec)) {
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

p2paudit_status p2paudit_open(const char* sysroot, const char* rules_dir, p2paudit_machine** machine, char** error) {
  if (error) *error = nullptr;
  Failure f{P2PAUDIT_OK, ""};
  if (!machine) {
    f = {P2PAUDIT_ERROR_ARGUMENT, "p2paudit_open: the machine pointer is NULL"};
  } else {
    *machine = nullptr;
    if (!sysroot) f = {P2PAUDIT_ERROR_ARGUMENT, "p2paudit_open: the sysroot is NULL (\"/\" is this machine)"};
  }
  if (f.status == P2PAUDIT_OK) {
    try {
      *machine = read_machine(sysroot, rules_dir).release();
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
    const Function& f = machine->topo.functions[index];
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
      auto j = policy::pair_decision_json(machine->topo, d);
      j["verdict"] = verdict_json(machine->topo, machine->kernel, d.verdict);
      *details_json = c_string(json_text(std::move(j)));
    }
    if (verdict) *verdict = to_c(d.verdict.map_type);
    if (decision) *decision = to_c(d.decision.action);
    return P2PAUDIT_OK;
  });
}

void p2paudit_string_free(char* string) { std::free(string); }

}  // extern "C"
