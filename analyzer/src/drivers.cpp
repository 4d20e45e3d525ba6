// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/drivers.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <libkmod.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "p2paudit/kmod_index.h"

namespace p2paudit {

namespace {

// The index files libkmod reads for the lookups below (libkmod.c's index_files[]): modules.dep.bin
// for a module's path, the alias, symbol and built-in indexes for modalias lookups. Nothing else
// of lib/modules is handed to libkmod.
const char* const kIndexFiles[] = {"modules.dep.bin", "modules.alias.bin", "modules.symbols.bin",
                                   "modules.builtin.alias.bin", "modules.builtin.bin"};

// Given NULL, libkmod reads /etc, /run, /usr/local/lib and /lib modprobe.d: the analyst's own
// machine. A context for a sysroot gets an empty list (libkmod's "no configuration") instead.
const char* const kNoConfiguration[] = {nullptr};

bool is_plain_release(const std::string& r) {
  return !r.empty() && r != "." && r != ".." && r.find('/') == std::string::npos && r.size() < 128;
}

bool write_all(int fd, const std::vector<uint8_t>& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Name, and whether the index holds a module file for it. The module file itself is never opened
// (libkmod would decompress a .ko.zst/.ko.xz whole to read its .modinfo): version and srcversion
// come from the running kernel's sys/module (see for_driver).
void fill_from_module(struct kmod_module* mod, ModuleInfo& info) {
  info.name = kmod_module_get_name(mod);
  if (kmod_module_get_path(mod)) info.builtin = Known::kNo;
}

}  // namespace

// A sysroot's index files are read through the Sysroot (regular files inside the root, bounded),
// walked by kmod_index_problem(), and copied into a private directory that libkmod is given:
// libkmod opens no path of the sysroot, and every index it reads has been checked with bounds.
// One refused index leaves libkmod out altogether: a lookup missing an index would read as "no
// module", where the answer is unknown.
void ModuleResolver::copy_indexes(const Sysroot& root, const std::string& rel) {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> copies;
  const size_t limit = root.limits().max_file_bytes;
  for (const char* name : kIndexFiles) {
    std::string f = rel + "/" + name;
    if (!root.exists(f)) continue;
    auto data = root.read_bytes(f, limit + 1);
    std::optional<std::string> problem;
    if (!data) problem = "not a regular file inside the snapshot";
    else if (data->size() > limit) problem = fmt::format("larger than the {}-byte file limit", limit);
    else if (!data->empty()) problem = kmod_index_problem(data->data(), data->size());
    if (!problem && data->empty()) continue;  // depmod's empty file: libkmod opens none, as if absent
    if (problem) {
      findings_.push_back({f, fmt::format("libkmod index refused: {}; module facts stay unknown", *problem)});
      return;
    }
    copies.emplace_back(name, std::move(*data));
  }
  if (copies.empty() || copies.front().first != "modules.dep.bin") return;  // nothing libkmod could look up

  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/p2paudit-kmod-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) {
    findings_.push_back({rel, fmt::format("no private directory for libkmod's index ({}); module facts stay unknown",
                                          std::strerror(errno))});
    return;
  }
  private_dir_ = buf.data();
  for (auto& [name, data] : copies) {
    std::string path = private_dir_ + "/" + name;
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) private_files_.push_back(path);
    bool ok = fd >= 0 && write_all(fd, data);
    if (fd >= 0 && ::close(fd) != 0) ok = false;
    if (!ok) {
      findings_.push_back({rel + "/" + name, "libkmod index not copied to a private directory; module facts stay unknown"});
      return;
    }
  }
  ctx_ = kmod_new(private_dir_.c_str(), kNoConfiguration);
}

ModuleResolver::ModuleResolver(const Sysroot& root, const std::string& kernel_release) : root_(root) {
  if (root.is_live()) {
    ctx_ = kmod_new(nullptr, nullptr);
  } else if (!root.is_archive() && is_plain_release(kernel_release)) {
    std::string rel = "lib/modules/" + kernel_release;
    if (auto resolved = root.resolve(rel)) copy_indexes(root, *resolved);
  }
  // Preloading the indexes only saves time; a tree without some of them (modules.builtin.bin,
  // say) still answers lookups from the ones it has.
  if (ctx_) kmod_load_resources(ctx_);
}

ModuleResolver::~ModuleResolver() {
  if (ctx_) kmod_unref(ctx_);
  for (const auto& f : private_files_) ::unlink(f.c_str());
  if (!private_dir_.empty()) ::rmdir(private_dir_.c_str());
}

ModuleInfo ModuleResolver::for_driver(const std::string& driver) const {
  ModuleInfo info;
  if (driver.empty()) return info;
  // The kernel links a driver to its module's sysfs entry (built-in drivers with a module name
  // too); only a loaded module has an initstate there.
  std::string name;
  if (auto link = root_.read_link("sys/bus/pci/drivers/" + driver + "/module")) name = link->substr(link->rfind('/') + 1);
  info.name = name;
  struct kmod_module* mod = nullptr;
  if (ctx_ && kmod_module_new_from_name(ctx_, name.empty() ? driver.c_str() : name.c_str(), &mod) >= 0) {
    fill_from_module(mod, info);
    kmod_module_unref(mod);
  }
  if (root_.is_live() && root_.exists("sys/bus/pci/drivers/" + driver)) {
    bool loaded = !name.empty() && root_.exists("sys/module/" + name + "/initstate");
    info.builtin = loaded ? Known::kNo : Known::kYes;
  }
  if (!info.name.empty()) {
    if (auto v = root_.read_line("sys/module/" + info.name + "/version")) info.version = *v;
    if (auto v = root_.read_line("sys/module/" + info.name + "/srcversion")) info.srcversion = *v;
  }
  return info;
}
ModuleInfo ModuleResolver::for_modalias(const std::string& modalias) const {
  ModuleInfo info;
  if (!ctx_ || modalias.empty()) return info;
  struct kmod_list* list = nullptr;
  if (kmod_module_new_from_lookup(ctx_, modalias.c_str(), &list) < 0 || !list) return info;
  struct kmod_list* item;
  kmod_list_foreach(item, list) {
    struct kmod_module* mod = kmod_module_get_module(item);
    info.alias_matches.push_back(kmod_module_get_name(mod));
    kmod_module_unref(mod);
  }
  kmod_module_unref_list(list);
  return info;
}

}  // namespace p2paudit
