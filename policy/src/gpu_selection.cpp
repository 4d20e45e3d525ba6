// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/policy/gpu_selection.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"

namespace p2paudit::policy {

namespace {

// A selection names a few devices; anything longer is not one (and is not echoed in full).
constexpr size_t kMaxValueBytes = 4096;
constexpr unsigned kMaxIndex = 65535;

[[noreturn]] void refuse(std::string_view variable, std::string_view value, std::string_view why) {
  std::string shown = escape_line(value.substr(0, std::min<size_t>(value.size(), 200)));
  if (value.size() > 200) shown += "...";
  throw InputError(fmt::format("{}=\"{}\": {}", variable, shown, why));
}

// Every value the variables accept is plain ASCII without spaces inside an entry: whatever else
// is refused before it could reach a comment line of the exports, which a shell evaluates.
void check_bytes(std::string_view variable, std::string_view value) {
  if (value.size() > kMaxValueBytes) refuse(variable, value, fmt::format("longer than {} bytes", kMaxValueBytes));
  for (unsigned char c : value)
    if (c < 0x20 || c >= 0x7f) refuse(variable, value, "holds a byte that is not printable ASCII");
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t at = 0;;) {
    size_t end = s.find(sep, at);
    out.push_back(s.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
    if (end == std::string_view::npos) return out;
    at = end + 1;
  }
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// A decimal index, or nullopt when `s` is not one; an index past kMaxIndex is refused.
std::optional<unsigned> index_of(std::string_view variable, std::string_view value, std::string_view s) {
  if (!all_digits(s)) return std::nullopt;
  if (s.size() > 5 || std::stoul(std::string(s)) > kMaxIndex)
    refuse(variable, value, fmt::format("index {} is past any machine's devices", s));
  return static_cast<unsigned>(std::stoul(std::string(s)));
}

void add_index(RuntimeSelection& r, unsigned i) {
  if (std::find(r.indices.begin(), r.indices.end(), i) == r.indices.end()) r.indices.push_back(i);
}

RuntimeSelection start(std::string_view variable, std::string_view value) {
  check_bytes(variable, value);
  RuntimeSelection r;
  r.variable = variable;
  r.value = value;
  if (trim(value).empty()) r.narrows_nothing = "empty: read as unset";
  return r;
}

// "GPU-" and hex digits with dashes: a UUID as nvidia-smi -L and rocm-smi --showuniqueid print it.
bool is_gpu_uuid(std::string_view s) {
  if (s.size() < 5 || s.substr(0, 4) != "GPU-") return false;
  return std::all_of(s.begin() + 4, s.end(), [](unsigned char c) { return std::isxdigit(c) || c == '-'; });
}

constexpr std::string_view kUuidWhy =
    "names a GPU by its UUID, which a capture does not hold: every GPU it could mean is taken; give the job's "
    "GPUs to --gpus as BDFs to narrow it";

}  // namespace

RuntimeSelection parse_cuda_visible_devices(std::string_view value) {
  constexpr std::string_view kVar = "CUDA_VISIBLE_DEVICES";
  RuntimeSelection r = start(kVar, value);
  if (!r.narrows_nothing.empty()) return r;
  for (std::string_view entry : split(value, ',')) {
    entry = trim(entry);
    if (entry.substr(0, 4) == "MIG-")
      refuse(kVar, value,
             "names a MIG instance, which p2paudit cannot place on a PCI function; give the job's GPUs to --gpus "
             "as BDFs");
    if (is_gpu_uuid(entry)) {
      r.unplaceable = std::string(kUuidWhy);
      continue;
    }
    if (entry.size() > 1 && entry[0] == '-' && all_digits(entry.substr(1))) {
      r.notes.push_back(
          fmt::format("{}: CUDA makes only the devices before the invalid index {} visible", kVar, entry));
      break;
    }
    std::optional<unsigned> i = index_of(kVar, value, entry);
    if (!i) refuse(kVar, value, fmt::format("\"{}\" is not a device index, GPU-<uuid> or MIG-<uuid>", entry));
    add_index(r, *i);
  }
  return r;
}

RuntimeSelection parse_rocm_visible_devices(std::string_view variable, std::string_view value) {
  RuntimeSelection r = start(variable, value);
  if (!r.narrows_nothing.empty()) return r;
  for (std::string_view entry : split(value, ',')) {
    entry = trim(entry);
    if (is_gpu_uuid(entry)) {
      r.unplaceable = std::string(kUuidWhy);
      continue;
    }
    std::optional<unsigned> i = index_of(variable, value, entry);
    if (!i) refuse(variable, value, fmt::format("\"{}\" is not a device index or GPU-<uuid>", entry));
    add_index(r, *i);
  }
  return r;
}

RuntimeSelection parse_oneapi_device_selector(std::string_view value) {
  constexpr std::string_view kVar = "ONEAPI_DEVICE_SELECTOR";
  RuntimeSelection r = start(kVar, value);
  if (!r.narrows_nothing.empty()) return r;
  bool level_zero_term = false;
  for (std::string_view term : split(value, ';')) {
    term = trim(term);
    const bool discard = !term.empty() && term[0] == '!';
    if (discard) term.remove_prefix(1);
    const size_t colon = term.find(':');
    if (colon == std::string_view::npos)
      refuse(kVar, value, fmt::format("term \"{}\" is not backend:devices", term));
    std::string backend(trim(term.substr(0, colon)));
    std::transform(backend.begin(), backend.end(), backend.begin(), [](unsigned char c) { return std::tolower(c); });
    if (backend != "level_zero" && backend != "*" && backend != "opencl" && backend != "cuda" && backend != "hip" &&
        backend != "native_cpu")
      refuse(kVar, value, fmt::format("backend \"{}\" is not level_zero, opencl, cuda, hip, native_cpu or *", backend));
    const bool selects_level_zero = backend == "level_zero" || backend == "*";
    for (std::string_view device : split(term.substr(colon + 1), ',')) {
      device = trim(device);
      std::string lower(device);
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      // N, N.M, N.*, N.M.K: device N (a sub-device is part of it); *, *.*, gpu: every device.
      std::string_view root = device.substr(0, device.find('.'));
      const bool every = lower == "*" || lower == "*.*" || lower == "gpu";
      const bool other_kind = lower == "cpu" || lower == "fpga";
      std::optional<unsigned> i = every || other_kind ? std::nullopt : index_of(kVar, value, root);
      if (!every && !other_kind && !i)
        refuse(kVar, value, fmt::format("device \"{}\" is not *, gpu, cpu, fpga, N, N.M or N.*", device));
      if (i && device.size() > root.size()) {
        for (std::string_view part : split(device.substr(root.size() + 1), '.'))
          if (part != "*" && !all_digits(part))
            refuse(kVar, value, fmt::format("device \"{}\" is not *, gpu, cpu, fpga, N, N.M or N.*", device));
      }
      if (!selects_level_zero || discard || other_kind) continue;
      level_zero_term = true;
      if (every) r.all = true;
      else add_index(r, *i);
    }
    if (discard && selects_level_zero)
      r.notes.push_back(fmt::format("{}: the discarding term !{} is not applied (the job is taken wider, not narrower)",
                                    kVar, term));
  }
  if (!level_zero_term) r.narrows_nothing = "no level_zero or * term: it does not narrow the Intel GPUs";
  if (r.all) r.indices.clear();
  return r;
}

RuntimeSelection parse_ze_affinity_mask(std::string_view value) {
  constexpr std::string_view kVar = "ZE_AFFINITY_MASK";
  RuntimeSelection r = start(kVar, value);
  if (!r.narrows_nothing.empty()) return r;
  for (std::string_view entry : split(value, ',')) {
    entry = trim(entry);
    std::string_view root = entry.substr(0, entry.find('.'));
    std::optional<unsigned> i = index_of(kVar, value, root);
    if (!i || (entry.size() > root.size() && !all_digits(entry.substr(root.size() + 1))))
      refuse(kVar, value, fmt::format("\"{}\" is not a device index N or N.M", entry));
    add_index(r, *i);
  }
  return r;
}

}  // namespace p2paudit::policy
