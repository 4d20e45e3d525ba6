// SPDX-License-Identifier: GPL-2.0-or-later
// Drivers and modules through libkmod: the bound driver's module (version, srcversion, built-in),
// or, for an unbound function, the modules its modalias would load.
#pragma once

#include <memory>
#include <string>

#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"

struct kmod_ctx;

namespace p2paudit {

class ModuleResolver {
 public:
  // Live sysroot: the running kernel's module index. Otherwise libkmod is pointed at the sysroot's
  // lib/modules/<release> when present; without it module facts stay unknown.
  ModuleResolver(const Sysroot& root, const std::string& kernel_release);
  ~ModuleResolver();
  ModuleResolver(const ModuleResolver&) = delete;
  ModuleResolver& operator=(const ModuleResolver&) = delete;

  bool available() const { return ctx_ != nullptr; }
  ModuleInfo for_driver(const std::string& driver) const;
  ModuleInfo for_modalias(const std::string& modalias) const;

 private:
  bool module_file_confined(const char* path) const;
  const Sysroot& root_;
  std::string modules_dir_;   // host path libkmod was given (directory sysroots only)
  std::string modules_rel_;   // the same, relative to the sysroot
  struct kmod_ctx* ctx_ = nullptr;
};

}  // namespace p2paudit
