// SPDX-License-Identifier: GPL-2.0-or-later
// A shared library opened with dlopen() and its functions taken by name: the one mechanism for
// every library p2paudit loads at run time (libarchive in any process; NVML, CUDA, HIP and the
// Level Zero loader in the probe's isolated children). RTLD_NOW | RTLD_LOCAL keeps their symbols
// and their dependencies' out of the global scope. A library that loaded is never closed: the
// function pointers taken from it serve the rest of the process, and runtimes leave threads and
// exit handlers behind.
#pragma once

#include <string>
#include <vector>

namespace p2paudit {

class SharedLibrary {
 public:
  enum Need { kRequired, kOptional };

  // The first of `names` that loads; when none does, error() is the first one's dlerror().
  static SharedLibrary open(const std::vector<std::string>& names);

  explicit operator bool() const { return handle_ != nullptr; }
  const std::string& name() const { return name_; }    // the one that loaded
  const std::string& error() const { return error_; }  // why none loaded

  // `out` becomes the function `symbol`, typed as `out` is (nullptr when the library lacks it). A
  // required symbol that is missing is remembered: missing() names the first one.
  template <typename Function>
  bool get(Function& out, const char* symbol, Need need = kRequired) {
    out = reinterpret_cast<Function>(address(symbol, need));
    return out != nullptr;
  }
  const std::string& missing() const { return missing_; }

 private:
  void* address(const char* symbol, Need need);

  void* handle_ = nullptr;
  std::string name_, error_, missing_;
};

}  // namespace p2paudit
