// SPDX-License-Identifier: GPL-2.0-or-later
// The kernel eras the equality tests compare under, and a machine's kernel rules for one of them.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/topology.h"

namespace p2paudit::test {

// One release of each era of rules/kernel (docs/kernel-rules.md), 4.20 to 7.3.
inline const std::vector<std::string> kKernelEras = {"4.20", "5.2", "5.4", "5.9", "5.14", "5.19", "6.1", "7.1", "7.3"};

// The rules of rules/kernel for `t` booted with `release`; `assume` as --assume-whitelisted.
inline KernelRules rules_for(const Topology& t, const std::string& release, std::vector<std::string> assume = {}) {
  Platform platform = t.platform;
  platform.kernel_release = release;
  return load_kernel_rules(std::filesystem::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", platform, {"", {}, std::move(assume)});
}

}  // namespace p2paudit::test
