// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/archive_library.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <type_traits>

#include <fmt/format.h>

#include "p2paudit/errors.h"

namespace p2paudit {

namespace {

// The soname of the libarchive the build found (CMakeLists.txt reads it from the library), and
// the Debian package that holds it (debian/control names it in Depends: shlibs cannot see a
// dlopen()).
constexpr const char* kLibarchiveSoname = P2PAUDIT_LIBARCHIVE_SONAME;
constexpr const char* kLibarchivePackage = P2PAUDIT_LIBARCHIVE_PACKAGE;

std::atomic<const char*> g_soname{kLibarchiveSoname};

}  // namespace

ArchiveLibraryLoad load_archive_library(const char* soname) {
  ArchiveLibraryLoad out;
  // RTLD_LOCAL keeps its symbols and its dependencies' out of the global scope. Never closed:
  // the table serves the rest of the process.
  void* handle = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    const std::string_view reason = why ? why : "";
    // glibc names the object it could not find first: the library itself, or one it needs.
    if (reason.starts_with(fmt::format("{}: cannot open shared object file", soname)))
      out.error = fmt::format("{} is not installed (apt install {})", soname, kLibarchivePackage);
    else
      out.error = fmt::format("{} cannot be loaded (apt install {}): {}", soname, kLibarchivePackage,
                              why ? why : "dlopen failed");
    return out;
  }
  auto resolve = [&](auto& function, const char* name) {
    if (!out.error.empty()) return;
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(::dlsym(handle, name));
    if (!function) out.error = fmt::format("{} lacks {}: it is not the libarchive 3 p2paudit needs", soname, name);
  };
#define P2PAUDIT_ARCHIVE_RESOLVE(name) resolve(out.functions.name, #name);
  P2PAUDIT_ARCHIVE_FUNCTIONS(P2PAUDIT_ARCHIVE_RESOLVE)
#undef P2PAUDIT_ARCHIVE_RESOLVE
  if (!out.error.empty()) {
    out.functions = {};
    ::dlclose(handle);
  }
  return out;
}

const ArchiveLibrary& archive_library(std::string_view verb, std::string_view file) {
  static std::once_flag once;
  static ArchiveLibraryLoad loaded;
  std::call_once(once, [] { loaded = load_archive_library(g_soname.load()); });
  if (!loaded.error.empty()) throw InputError(fmt::format("cannot {} {}: {}", verb, file, loaded.error));
  return loaded.functions;
}

void set_archive_library_soname_for_tests(const char* soname) { g_soname.store(soname); }

}  // namespace p2paudit
