// SPDX-License-Identifier: GPL-2.0-or-later
// What a GPU runtime's device-selection variable says before it meets a machine: CUDA_VISIBLE_DEVICES,
// HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, ONEAPI_DEVICE_SELECTOR and ZE_AFFINITY_MASK, each read
// from the string the caller got from its environment (the library never reads the environment).
// job_gpus.h places the result on a machine's GPUs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace p2paudit::policy {

struct RuntimeSelection {
  std::string variable;            // "CUDA_VISIBLE_DEVICES"
  std::string value;               // as given
  std::vector<unsigned> indices;   // the runtime's device indices named, in the variable's order, no repeats
  bool all = false;                // every device of the runtime (ONEAPI_DEVICE_SELECTOR level_zero:* or :gpu)
  // Names devices by something a capture does not hold (a UUID): why; the job is then taken to be
  // every device the runtime could mean.
  std::string unplaceable;
  // Nothing in the value narrows the runtime's devices (an empty value, or ONEAPI_DEVICE_SELECTOR
  // without a Level Zero term): why. The variable is then as if unset.
  std::string narrows_nothing;
  std::vector<std::string> notes;  // how the value was read, for the exports' comments
};

// Each throws InputError naming the variable and its value when the value is malformed or names
// what cannot be placed safely at all (a MIG instance).
//
// CUDA_VISIBLE_DEVICES: indices, GPU-<uuid> (or a prefix of one), MIG-... refused. CUDA makes only
// the devices before the first invalid index visible (CUDA C Programming Guide, "CUDA Environment
// Variables"): a negative index ends the list here too.
RuntimeSelection parse_cuda_visible_devices(std::string_view value);
// HIP_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES (`variable`): indices or GPU-<uuid>.
RuntimeSelection parse_rocm_visible_devices(std::string_view variable, std::string_view value);
// ONEAPI_DEVICE_SELECTOR: `[!]backend:device[,device...]` terms separated by `;`; the positive
// level_zero and `*` terms select Intel GPUs (N, N.M and N.* name device N; *, gpu and *.* every
// one); other backends' terms select nothing among them; discarding (`!`) terms are not applied,
// which leaves the job wider, never narrower.
RuntimeSelection parse_oneapi_device_selector(std::string_view value);
// ZE_AFFINITY_MASK: N or N.M (device N, sub-device M) entries separated by commas.
RuntimeSelection parse_ze_affinity_mask(std::string_view value);

}  // namespace p2paudit::policy
