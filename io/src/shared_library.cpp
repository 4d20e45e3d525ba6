// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/shared_library.h"

#include <dlfcn.h>

namespace p2paudit {

SharedLibrary SharedLibrary::open(const std::vector<std::string>& names) {
  SharedLibrary lib;
  for (const auto& name : names) {
    ::dlerror();
    lib.handle_ = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib.handle_) {
      lib.name_ = name;
      lib.error_.clear();
      return lib;
    }
    const char* why = ::dlerror();
    if (lib.error_.empty()) lib.error_ = why ? why : name + ": dlopen failed";
  }
  if (lib.error_.empty()) lib.error_ = "no library named";
  return lib;
}

void* SharedLibrary::address(const char* symbol, Need need) {
  void* found = handle_ ? ::dlsym(handle_, symbol) : nullptr;
  if (!found && need == kRequired && missing_.empty()) missing_ = symbol;
  return found;
}

}  // namespace p2paudit
