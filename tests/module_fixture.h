// SPDX-License-Identifier: GPL-2.0-or-later
// Kernel modules for test sysroots: objects carrying only a .modinfo section (all that depmod and
// libkmod read), and depmod run on the sysroot to build the real index libkmod is given.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_support.h"

namespace p2paudit::test {

inline bool depmod_available() {
  return run_command("command -v depmod >/dev/null || test -x /usr/sbin/depmod || test -x /sbin/depmod").status == 0;
}

// Compiles a module object at `ko` whose .modinfo holds each "key=value" of `modinfo`.
inline void make_module(const std::filesystem::path& ko, const std::vector<std::string>& modinfo) {
  std::filesystem::path src = ko.string() + ".c";
  std::ofstream out(src);
  for (size_t i = 0; i < modinfo.size(); ++i)
    out << "__attribute__((section(\".modinfo\"), used)) static const char m" << i << "[] = \"" << modinfo[i] << "\";\n";
  out.close();
  ASSERT_EQ(run_command("cc -c -x c " + src.string() + " -o " + ko.string()).status, 0);
  std::filesystem::remove(src);
}

// Writes lib/modules/RELEASE/modules.*.bin below `sysroot` for the modules placed there.
inline void run_depmod(const std::filesystem::path& sysroot, const std::string& release) {
  ASSERT_EQ(run_command("PATH=$PATH:/usr/sbin:/sbin depmod -b " + sysroot.string() + " " + release + " 2>/dev/null").status, 0);
}

}  // namespace p2paudit::test
