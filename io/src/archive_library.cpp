// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/archive_library.h"

#include <atomic>
#include <mutex>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/shared_library.h"

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
  SharedLibrary lib = SharedLibrary::open({soname});
  if (!lib) {
    // glibc names the object it could not find first: the library itself, or one it needs.
    if (std::string_view(lib.error()).starts_with(fmt::format("{}: cannot open shared object file", soname)))
      out.error = fmt::format("{} is not installed (apt install {})", soname, kLibarchivePackage);
    else
      out.error = fmt::format("{} cannot be loaded (apt install {}): {}", soname, kLibarchivePackage, lib.error());
    return out;
  }
#define P2PAUDIT_ARCHIVE_RESOLVE(name) lib.get(out.functions.name, #name);
  P2PAUDIT_ARCHIVE_FUNCTIONS(P2PAUDIT_ARCHIVE_RESOLVE)
#undef P2PAUDIT_ARCHIVE_RESOLVE
  if (!lib.missing().empty()) {
    out.functions = {};
    out.error = fmt::format("{} lacks {}: it is not the libarchive 3 p2paudit needs", soname, lib.missing());
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
