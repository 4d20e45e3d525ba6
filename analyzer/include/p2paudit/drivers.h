// SPDX-License-Identifier: GPL-2.0-or-later
// Drivers and modules through libkmod: the bound driver's module (version, srcversion, built-in),
// or, for an unbound function, the modules its modalias would load.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"

struct kmod_ctx;

namespace p2paudit {

class ModuleResolver {
 public:
  // Live sysroot: the running kernel's module index. A directory sysroot: the index files of its
  // lib/modules/<release>, checked and copied to a private directory (removed by the destructor),
  // with no modprobe.d configuration; without them, or when one is refused, module facts stay unknown.
  ModuleResolver(const Sysroot& root, const std::string& kernel_release);
  ~ModuleResolver();
  ModuleResolver(const ModuleResolver&) = delete;
  ModuleResolver& operator=(const ModuleResolver&) = delete;

  bool available() const { return ctx_ != nullptr; }
  ModuleInfo for_driver(const std::string& driver) const;
  ModuleInfo for_modalias(const std::string& modalias) const;
  // Index files refused or not copied, for the topology's findings.
  const std::vector<Finding>& findings() const { return findings_; }
  struct kmod_ctx* context() const { return ctx_; }  // for tests: what configuration libkmod holds

 private:
  void copy_indexes(const Sysroot& root, const std::string& rel);
  const Sysroot& root_;
  std::string private_dir_;                // where the sysroot's checked index files were copied
  std::vector<std::string> private_files_;
  std::vector<Finding> findings_;
  struct kmod_ctx* ctx_ = nullptr;
};

}  // namespace p2paudit
