// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/drivers.h"

#include <libkmod.h>

#include <algorithm>
#include <iterator>

namespace p2paudit {

namespace {

// The index files libkmod opens by name below its directory; a symlink among them would lead it
// out of the sysroot, so such a tree gets no libkmod at all.
const char* const kIndexFiles[] = {"modules.dep",         "modules.dep.bin",        "modules.alias",
                                   "modules.alias.bin",   "modules.symbols",        "modules.symbols.bin",
                                   "modules.builtin",     "modules.builtin.bin",    "modules.builtin.alias.bin",
                                   "modules.builtin.modinfo", "modules.softdep",    "modules.devname",
                                   "modules.order"};

bool is_plain_release(const std::string& r) {
  return !r.empty() && r != "." && r != ".." && r.find('/') == std::string::npos && r.size() < 128;
}

}  // namespace

// libkmod reads a module's .modinfo from the file named in modules.dep, which a hostile sysroot
// controls: read it only when that name is a plain relative path to a regular file inside.
bool ModuleResolver::module_file_confined(const char* path) const {
  if (root_.is_live()) return true;
  if (!path || modules_dir_.empty()) return false;
  std::string p = path, prefix = modules_dir_ + "/";
  if (p.rfind(prefix, 0) != 0) return false;
  std::string inside = modules_rel_ + "/" + p.substr(prefix.size());
  auto resolved = root_.resolve(inside);
  return resolved && *resolved == inside && root_.read_bytes(inside, 0).has_value();
}

namespace {

// Name, and whether the index holds a module file for it; the running kernel's own answer on
// built-in versus loaded comes from sysfs (see for_driver).
void fill_from_module(struct kmod_module* mod, ModuleInfo& info, bool may_open_file) {
  info.name = kmod_module_get_name(mod);
  if (kmod_module_get_path(mod)) info.builtin = Known::kNo;
  struct kmod_list* list = nullptr;
  if (may_open_file && kmod_module_get_info(mod, &list) >= 0) {
    struct kmod_list* item;
    kmod_list_foreach(item, list) {
      std::string key = kmod_module_info_get_key(item);
      const char* value = kmod_module_info_get_value(item);
      if (!value) continue;
      if (key == "version") info.version = value;
      else if (key == "srcversion") info.srcversion = value;
    }
    kmod_module_info_free_list(list);
  }
}

}  // namespace

ModuleResolver::ModuleResolver(const Sysroot& root, const std::string& kernel_release) : root_(root) {
  if (root.is_live()) {
    ctx_ = kmod_new(nullptr, nullptr);
  } else if (is_plain_release(kernel_release) && root.exists("lib/modules/" + kernel_release + "/modules.dep")) {
    std::string rel = "lib/modules/" + kernel_release;
    auto dir = root.confined_directory(rel);
    bool plain_files = dir && std::all_of(std::begin(kIndexFiles), std::end(kIndexFiles), [&](const char* name) {
                         std::string f = rel + "/" + name;
                         return !root.exists(f) || root.resolve(f) == *root.resolve(rel) + "/" + name;
                       });
    if (plain_files) {
      modules_dir_ = dir->string();
      modules_rel_ = *root.resolve(rel);
      ctx_ = kmod_new(modules_dir_.c_str(), nullptr);
    }
  }
  // Preloading the indexes only saves time; a tree without some of them (modules.builtin.bin,
  // say) still answers lookups from the ones it has.
  if (ctx_) kmod_load_resources(ctx_);
}

ModuleResolver::~ModuleResolver() {
  if (ctx_) kmod_unref(ctx_);
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
    fill_from_module(mod, info, module_file_confined(kmod_module_get_path(mod)));
    kmod_module_unref(mod);
  }
  if (root_.is_live() && root_.exists("sys/bus/pci/drivers/" + driver)) {
    bool loaded = !name.empty() && root_.exists("sys/module/" + name + "/initstate");
    info.builtin = loaded ? Known::kNo : Known::kYes;
  }
  if (!info.name.empty()) {
    if (info.version.empty())
      if (auto v = root_.read_line("sys/module/" + info.name + "/version")) info.version = *v;
    if (info.srcversion.empty())
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
