// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/policy/job_gpus.h"

#include <algorithm>
#include <array>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "p2paudit/device_class.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/gpu_selection.h"

namespace p2paudit::policy {

namespace {

constexpr uint16_t kVendorNvidia = 0x10de, kVendorAmd = 0x1002, kVendorIntel = 0x8086;
// Under this, every memory BAR of a display controller is a framebuffer or registers: a GPU that
// runs compute maps its memory through a BAR of 256 MiB or more (a 64 MiB one at the least).
constexpr uint64_t kDisplayOnlyBarBytes = uint64_t{32} << 20;

// A vendor whose GPUs a runtime steered by the exports drives, and the drivers under which it
// enumerates them.
struct RuntimeVendor {
  uint16_t vendor;
  std::string_view name;
  std::string_view runtime;
  std::array<std::string_view, 2> drivers;
};
constexpr std::array<RuntimeVendor, 3> kRuntimeVendors = {{
    {kVendorNvidia, "NVIDIA", "CUDA", {"nvidia", ""}},
    {kVendorAmd, "AMD", "ROCm", {"amdgpu", ""}},
    {kVendorIntel, "Intel", "Level Zero", {"i915", "xe"}},
}};

bool runtime_vendor(uint16_t vendor) {
  return std::any_of(kRuntimeVendors.begin(), kRuntimeVendors.end(), [&](const auto& v) { return v.vendor == vendor; });
}

bool in_a_vm(const Topology& topo) { return topo.platform.hypervisor || topo.platform.firmware_vm == Known::kYes; }

// Names as the tool prints devices elsewhere: "gpu1 0000:03:00.0".
class Labels {
 public:
  explicit Labels(const Topology& topo) : topo_(topo), names_(topo.functions.size()) {
    for (const auto& d : matrix_devices(topo, true)) names_[d.index] = d.short_name;
  }
  std::string operator()(size_t i) const {
    const std::string bdf = topo_.functions[i].bdf.str();
    return names_[i].empty() ? bdf : names_[i] + " " + bdf;
  }
  std::string list(const std::vector<size_t>& devices) const {
    if (devices.empty()) return "none";
    std::vector<std::string> out;
    for (size_t i : devices) out.push_back((*this)(i));
    return fmt::format("{}", fmt::join(out, ", "));
  }

 private:
  const Topology& topo_;
  std::vector<std::string> names_;
};

struct Placed {
  std::vector<size_t> devices;
  bool exact = false;  // the devices the runtime will use; false: every one it could mean
};

// What `sel`'s indices name among `space`, the runtime's devices in PCI bus order. The indices
// are the runtime's own numbering: they name exactly these devices only where its order is known
// to be PCI bus order and every member of `space` is known to be the runtime's; otherwise the
// job is every device of `space` (a listing of all of them, or a runtime of one device, needs no
// order).
Placed place(const RuntimeSelection& sel, const std::vector<size_t>& space, bool members_known, bool order_known,
             std::string_view runtime, std::string_view settle, bool truncates_at_invalid, const Labels& label,
             std::vector<std::string>& notes) {
  const std::string given = fmt::format("{}={}", sel.variable, sel.value);
  for (const auto& n : sel.notes) notes.push_back(n);
  if (!sel.unplaceable.empty()) {
    notes.push_back(fmt::format("{} {}: {}", given, sel.unplaceable, label.list(space)));
    return {space, false};
  }
  std::vector<unsigned> indices = sel.indices;
  if (members_known)
    for (size_t k = 0; k < indices.size(); ++k) {
      if (indices[k] < space.size()) continue;
      if (!truncates_at_invalid)
        throw InputError(fmt::format("{}: index {} names no device: {} has {} GPU{} here", given, indices[k], runtime,
                                     space.size(), space.size() == 1 ? "" : "s"));
      notes.push_back(fmt::format("{}: index {} is past the {} {} GPU{} here: {} makes only the devices before it "
                                  "visible",
                                  given, indices[k], space.size(), runtime, space.size() == 1 ? "" : "s", runtime));
      indices.resize(k);
      break;
    }
  if (indices.empty()) {
    notes.push_back(fmt::format("{}: no {} GPU", given, runtime));
    return {{}, true};
  }
  std::vector<unsigned> sorted = indices;
  std::sort(sorted.begin(), sorted.end());
  const bool every_one = members_known && sorted.size() == space.size() && sorted.back() + 1 == space.size();
  if (members_known && (order_known || every_one || space.size() == 1)) {
    std::vector<size_t> devices;
    for (unsigned i : indices) devices.push_back(space[i]);
    notes.push_back(fmt::format("{}: {}", given, label.list(devices)));
    std::sort(devices.begin(), devices.end());
    return {devices, true};
  }
  notes.push_back(fmt::format("{}: {}'s device order is not known here ({}): every GPU it could mean is taken: {}",
                              given, runtime, settle, label.list(space)));
  return {space, false};
}

std::optional<RuntimeSelection> parsed(const std::optional<std::string>& value,
                                       RuntimeSelection (*parse)(std::string_view), std::vector<std::string>& notes) {
  if (!value) return std::nullopt;
  RuntimeSelection sel = parse(*value);
  if (sel.narrows_nothing.empty()) return sel;
  notes.push_back(fmt::format("{}={}: {}", sel.variable, sel.value, sel.narrows_nothing));
  return std::nullopt;
}

RuntimeSelection parse_hip(std::string_view v) { return parse_rocm_visible_devices("HIP_VISIBLE_DEVICES", v); }
RuntimeSelection parse_rocr(std::string_view v) { return parse_rocm_visible_devices("ROCR_VISIBLE_DEVICES", v); }

// --gpus LIST: BDFs or short names, separated by commas.
std::vector<size_t> named_gpus(const Topology& topo, std::string_view list) {
  std::vector<size_t> out;
  size_t at = 0;
  for (;;) {
    size_t end = list.find(',', at);
    std::string_view spec = list.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    while (!spec.empty() && spec.front() == ' ') spec.remove_prefix(1);
    while (!spec.empty() && spec.back() == ' ') spec.remove_suffix(1);
    if (spec.empty()) throw InputError("--gpus: an empty entry (give BDFs or names such as gpu0, separated by commas)");
    std::optional<size_t> i = resolve_function(topo, spec);
    if (!i)
      throw InputError(fmt::format("--gpus: \"{}\" names no function of {}", escape_line(spec), topo.input_kind()));
    const Function& f = topo.functions[*i];
    if (!is_runtime_gpu(f))
      throw InputError(fmt::format("--gpus: {} is not a GPU (PCI class {:06x})", f.bdf.str(), f.class_code));
    if (std::find(out.begin(), out.end(), *i) == out.end()) out.push_back(*i);
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

bool is_runtime_gpu(const Function& f) {
  if (f.is_virtfn) return false;
  const DeviceClass c = classify_device(f);
  return c == DeviceClass::kGpu || (c == DeviceClass::kAccelerator && f.vendor == kVendorAmd && f.driver == "amdgpu");
}

GpuRoleReason gpu_role(const Topology& topo, size_t index) {
  const Function& f = topo.functions[index];
  if (!in_a_vm(topo) && !f.parent) {
    if (f.pcie_type == PcieType::kRcIntegratedEndpoint)
      return {GpuRole::kIntegrated, "integrated GPU: a root complex integrated endpoint on the root bus"};
    if (f.pcie_type == PcieType::kNotPcie)
      return {GpuRole::kIntegrated, "integrated GPU: on the root bus, with no PCIe capability (no link)"};
  }
  if (!runtime_vendor(f.vendor))
    return {GpuRole::kDisplayOnly,
            fmt::format("display-only: vendor {:04x} makes no GPU that CUDA, ROCm or Level Zero drives", f.vendor)};
  // A dump holds no BAR sizes; a sysroot's come from the kernel's `resource` file.
  uint64_t largest = 0;
  for (const auto& bar : f.bars)
    if (!bar.io && bar.index < 6) largest = std::max(largest, bar.size);
  if (topo.lspci_dump.empty() && largest > 0 && largest < kDisplayOnlyBarBytes)
    return {GpuRole::kDisplayOnly, fmt::format("display-only: its largest memory BAR is {} KiB", largest >> 10)};
  return {};
}

JobGpus select_job_gpus(const Topology& topo, const GpuSelectionInputs& in) {
  const Labels label(topo);
  JobGpus job;
  std::vector<size_t> all;
  for (size_t i = 0; i < topo.functions.size(); ++i)
    if (is_runtime_gpu(topo.functions[i])) all.push_back(i);

  if (in.gpus) {
    job.gpus = named_gpus(topo, *in.gpus);
    job.notes.push_back(
        fmt::format("the job's GPUs, named by --gpus (the runtimes' selection variables are not read): {}",
                    label.list(job.gpus)));
    return job;
  }

  std::vector<std::string> how;
  // A dump names no drivers: which GPUs a runtime enumerates (and so what its indices count) is unknown.
  const bool drivers_known = topo.lspci_dump.empty();
  for (const RuntimeVendor& v : kRuntimeVendors) {
    std::vector<size_t> compute, space;
    for (size_t i : all) {
      const Function& f = topo.functions[i];
      if (f.vendor != v.vendor) continue;
      if (gpu_role(topo, i).role == GpuRole::kCompute) compute.push_back(i);
      if (!drivers_known || std::find(v.drivers.begin(), v.drivers.end(), f.driver) != v.drivers.end())
        space.push_back(i);
    }
    std::vector<std::string> notes;
    std::optional<Placed> placed;
    if (v.vendor == kVendorNvidia) {
      if (auto sel = parsed(in.cuda_visible_devices, parse_cuda_visible_devices, notes)) {
        const bool bus_order = in.cuda_device_order && *in.cuda_device_order == "PCI_BUS_ID";
        placed = place(*sel, space, drivers_known, bus_order, v.runtime,
                       "CUDA's default FASTEST_FIRST order is decided at run time: set CUDA_DEVICE_ORDER=PCI_BUS_ID "
                       "or give --gpus",
                       true, label, notes);
      }
    } else if (v.vendor == kVendorAmd) {
      // ROCR_VISIBLE_DEVICES is applied first and HIP_VISIBLE_DEVICES numbers what it leaves. ROCm
      // numbers GPUs in KFD topology order, and a partitioned GPU is several: not in a capture.
      constexpr std::string_view kSettle = "ROCm numbers GPUs in KFD topology order: give --gpus";
      if (auto sel = parsed(in.rocr_visible_devices, parse_rocr, notes))
        placed = place(*sel, space, drivers_known, false, v.runtime, kSettle, false, label, notes);
      if (auto sel = parsed(in.hip_visible_devices, parse_hip, notes)) {
        const bool known = placed ? placed->exact : drivers_known;
        placed = place(*sel, placed ? placed->devices : space, known, false, v.runtime, kSettle, false, label, notes);
      }
    } else {
      // ZE_AFFINITY_MASK is applied by Level Zero itself; ONEAPI_DEVICE_SELECTOR numbers what it
      // leaves. Level Zero numbers in PCI bus order only with ZE_ENABLE_PCI_ID_DEVICE_ORDER=1, and
      // one device per GPU only with ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE (FLAT counts each tile).
      const bool bus_order = in.ze_enable_pci_id_device_order && *in.ze_enable_pci_id_device_order == "1" &&
                             in.ze_flat_device_hierarchy && *in.ze_flat_device_hierarchy == "COMPOSITE";
      constexpr std::string_view kSettle =
          "set ZE_ENABLE_PCI_ID_DEVICE_ORDER=1 and ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE, or give --gpus";
      if (auto sel = parsed(in.ze_affinity_mask, parse_ze_affinity_mask, notes))
        placed = place(*sel, space, drivers_known, bus_order, v.runtime, kSettle, false, label, notes);
      if (auto sel = parsed(in.oneapi_device_selector, parse_oneapi_device_selector, notes)) {
        if (sel->all) {
          for (const auto& n : sel->notes) notes.push_back(n);
          notes.push_back(fmt::format("{}={}: every compute GPU", sel->variable, sel->value));
          if (!placed) placed = Placed{compute, true};
        } else {
          // What a mask left is renumbered from 0; its order is known only where nothing was masked.
          const bool known = placed ? placed->exact : drivers_known;
          placed = place(*sel, placed ? placed->devices : space, known, bus_order && !placed, v.runtime, kSettle, false,
                         label, notes);
        }
      }
    }
    if (compute.empty() && !placed && notes.empty()) continue;
    const std::vector<size_t>& chosen = placed ? placed->devices : compute;
    job.gpus.insert(job.gpus.end(), chosen.begin(), chosen.end());
    if (!placed) notes.push_back(fmt::format("every compute GPU (no selection variable): {}", label.list(compute)));
    for (const auto& n : notes) how.push_back(fmt::format("{}: {}", v.name, n));
  }
  std::sort(job.gpus.begin(), job.gpus.end());
  job.notes.push_back(fmt::format("the job's GPUs: {}", label.list(job.gpus)));
  job.notes.insert(job.notes.end(), how.begin(), how.end());
  for (size_t i : all) {
    if (std::find(job.gpus.begin(), job.gpus.end(), i) != job.gpus.end()) continue;
    const GpuRoleReason role = gpu_role(topo, i);
    if (role.role != GpuRole::kCompute)
      job.notes.push_back(fmt::format("left out {}: {} (name it in --gpus to count it)", label(i), role.why));
  }
  return job;
}

}  // namespace p2paudit::policy
