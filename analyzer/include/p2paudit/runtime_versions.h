// SPDX-License-Identifier: GPL-2.0-or-later
// Driver and runtime versions from the machine's files (the runtime.* version facts): the NVIDIA
// driver's, amdgpu-dkms's and ROCm's. A version is a short string of the characters version
// strings use; anything else in those files (a crafted snapshot's megabytes, binary, several
// lines) is dropped with a finding, so no rule, template or regex meets it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"

namespace p2paudit {

// The files read, relative to the sysroot (the snapshot captures each one present).
inline constexpr const char* kNvidiaProcVersionPath = "proc/driver/nvidia/version";
inline constexpr const char* kNvidiaModuleVersionPath = "sys/module/nvidia/version";
inline constexpr const char* kAmdgpuModuleVersionPath = "sys/module/amdgpu/version";
inline constexpr const char* kRocmVersionPath = "opt/rocm/.info/version";

// The longest version string kept; module versions and releases are far shorter.
inline constexpr size_t kMaxVersionText = 64;

// Whether text is a version: 1 to kMaxVersionText bytes, starting with a digit, of ASCII letters,
// digits and . - _ + ~ : only.
bool is_version_text(std::string_view text);

// The leading decimal number of a version ("580" of "580.159.04"); nullopt when it does not start
// with a digit or the number has more than 6 digits.
std::optional<std::int64_t> version_major(std::string_view version);

// The version in the first line of /proc/driver/nvidia/version, which the driver writes as
// "NVRM version: NVIDIA UNIX [Open Kernel Module for ]x86_64 Kernel Module  580.159.04  <date>":
// the first word after "NVRM version:" that is digits and dots with a dot in it. nullopt when the
// line is not of that form (or holds anything but printable ASCII).
std::optional<std::string> nvidia_proc_version(std::string_view text);

// Reads the versions the sysroot holds; each file present but unusable adds a finding naming it.
RuntimeVersions read_runtime_versions(const Sysroot& root, std::vector<Finding>& findings);

}  // namespace p2paudit
