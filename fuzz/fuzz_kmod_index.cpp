// SPDX-License-Identifier: GPL-2.0-or-later
// A libkmod index (modules.*.bin) in a stranger's directory sysroot, as the analyzer reaches it:
// the same bytes stand for each of the five index files of lib/modules/R, then ModuleResolver
// checks and copies them and libkmod answers a modalias lookup and a driver lookup. A crash inside
// libkmod here means kmod_index_problem() let through an index libkmod cannot read safely.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "p2paudit/drivers.h"
#include "p2paudit/errors.h"
#include "p2paudit/kmod_index.h"
#include "p2paudit/sysroot.h"

namespace {

const char* const kRelease = "6.1.0-fuzz";
const char* const kFiles[] = {"modules.dep.bin", "modules.alias.bin", "modules.symbols.bin", "modules.builtin.alias.bin",
                              "modules.builtin.bin"};

// Never destroyed, so that the exit handler removing it can still read its name.
const std::string& sysroot_dir() {
  static const std::string* const dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto* d = new std::string(std::string(tmp && *tmp ? tmp : "/tmp") + "/p2paudit-fuzz-kmod-XXXXXX");
    if (!mkdtemp(d->data())) std::abort();
    for (const char* sub : {"/lib", "/lib/modules", "/lib/modules/6.1.0-fuzz"})
      if (mkdir((*d + sub).c_str(), 0700) != 0) std::abort();
    return d;
  }();
  static const bool removed_at_exit = std::atexit([] { std::filesystem::remove_all(*dir); }) == 0;
  (void)removed_at_exit;
  return *dir;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  for (size_t done = 0; done < size;) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)p2paudit::kmod_index_problem(data, size);
  std::string mods = sysroot_dir() + "/lib/modules/" + kRelease + "/";
  for (const char* f : kFiles) write_file(mods + f, data, size);
  try {
    p2paudit::Sysroot root = p2paudit::Sysroot::open(sysroot_dir());
    // In this process: the tool asks a confined child, where a crash would be the child's end
    // and a finding; here it must be the fuzzer's to see.
    p2paudit::ModuleResolver resolver(root, kRelease, p2paudit::KmodQueries::kInProcess);
    (void)resolver.for_modalias("pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i00");
    (void)resolver.for_modalias("symbol:pci_p2pdma_distance");
    (void)resolver.for_driver("nvme");
  } catch (const p2paudit::InputError&) {
  }
  return 0;
}
