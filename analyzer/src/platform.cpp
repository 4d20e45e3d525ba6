// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/platform.h"

#include <archive.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include <fmt/format.h>

#include "p2paudit/input_file.h"

namespace p2paudit {

namespace {

std::string trim(std::string s) {
  auto b = s.find_first_not_of(" \t\r\n");
  auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::optional<int> parse_int(const std::string& s) {
  try {
    size_t used = 0;
    int v = std::stoi(s, &used, 10);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Boot CPU facts from the first "processor" block of /proc/cpuinfo (cpu_data(0) in the kernel).
void read_cpuinfo(const Sysroot& root, Platform& p, std::vector<Finding>& findings) {
  auto text = root.read_text("proc/cpuinfo");
  if (!text) {
    findings.push_back({"proc/cpuinfo", "missing: CPU vendor and family are unknown"});
    return;
  }
  std::istringstream in(*text);
  int blocks = 0;
  for (std::string line; std::getline(in, line);) {
    auto colon = line.find(':');
    std::string key = trim(line.substr(0, colon));
    std::string value = colon == std::string::npos ? "" : trim(line.substr(colon + 1));
    if (key == "processor" && ++blocks > 1) break;
    if (key == "vendor_id") p.cpu_vendor = value;
    else if (key == "cpu family") p.cpu_family = parse_int(value);
    else if (key == "model") p.cpu_model = parse_int(value);
    else if (key == "model name") p.cpu_model_name = value;
    else if (key == "flags") {
      for (const auto& flag : split_words(value))
        if (flag == "hypervisor") p.hypervisor = true;
    } else if (key == "CPU implementer" && p.arch.empty()) p.arch = "arm64";
    else if (key == "isa" && value.rfind("rv64", 0) == 0) p.arch = "riscv64";
  }
  if (!p.cpu_vendor.empty() && p.cpu_family) p.arch = "x86";
}

// Decompresses proc/config.gz in memory with libarchive's raw reader, bounded like any file.
std::optional<std::string> gunzip(const std::string& compressed, size_t max) {
  struct archive* a = archive_read_new();
  archive_read_support_filter_gzip(a);
  archive_read_support_format_raw(a);
  std::optional<std::string> out;
  struct archive_entry* entry;
  if (archive_read_open_memory(a, compressed.data(), compressed.size()) == ARCHIVE_OK &&
      archive_read_next_header(a, &entry) == ARCHIVE_OK) {
    std::string data;
    char buf[1 << 16];
    la_ssize_t n;
    while ((n = archive_read_data(a, buf, sizeof buf)) > 0 && data.size() <= max) data.append(buf, static_cast<size_t>(n));
    if (n == 0 && data.size() <= max) out = std::move(data);
  }
  archive_read_free(a);
  return out;
}

// A release names a directory (boot/config-R, lib/modules/R): one path component of the
// characters kernel releases use, so a hostile "../../etc/shadow" cannot steer a lookup.
bool is_safe_release(const std::string& r) {
  if (r.empty() || r.size() > 128 || r == "." || r == "..") return false;
  return std::all_of(r.begin(), r.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == '+' || c == '~';
  });
}

void read_kernel_config(const Sysroot& root, Platform& p, std::vector<Finding>& findings) {
  std::optional<std::string> config;
  std::string boot = "boot/config-" + p.kernel_release;
  if (is_safe_release(p.kernel_release) && (config = root.read_text(boot))) {
    p.kernel_config_source = boot;
  } else if (auto gz = root.read_text("proc/config.gz")) {
    config = gunzip(*gz, root.limits().max_file_bytes);
    if (config) p.kernel_config_source = "proc/config.gz";
    else findings.push_back({"proc/config.gz", "cannot be decompressed: kernel config unknown"});
  }
  if (!config) return;
  std::istringstream in(*config);
  p.config_p2pdma = Known::kNo;  // a config that does not mention it has it off
  for (std::string line; std::getline(in, line);)
    if (line == "CONFIG_PCI_P2PDMA=y") p.config_p2pdma = Known::kYes;
}

void read_iommu(const Sysroot& root, Platform& p) {
  auto groups = root.list("sys/kernel/iommu_groups");
  p.iommu_groups_present = !groups.empty();
  std::string type;
  for (const auto& g : groups)
    if (auto t = root.read_line("sys/kernel/iommu_groups/" + g + "/type")) {
      type = *t;
      break;
    }
  auto iommu = cmdline_param(p.cmdline, "iommu");
  auto intel = cmdline_param(p.cmdline, "intel_iommu");
  auto amd = cmdline_param(p.cmdline, "amd_iommu");
  if (type == "identity" || (iommu && *iommu == "pt")) p.iommu_mode = "passthrough";
  else if (type.rfind("DMA", 0) == 0) p.iommu_mode = "translated";
  else if (!p.iommu_groups_present) p.iommu_mode = "off";
  else if ((intel && *intel == "off") || (amd && *amd == "off") || (iommu && *iommu == "off")) p.iommu_mode = "off";
  else p.iommu_mode = "unknown";
}

}  // namespace

std::optional<std::string> cmdline_param(const std::string& cmdline, const std::string& name) {
  std::optional<std::string> value;
  for (const auto& word : split_words(cmdline)) {
    if (word == name) value = "";
    else if (word.size() > name.size() && word.compare(0, name.size() + 1, name + "=") == 0)
      value = word.substr(name.size() + 1);
  }
  return value;
}

std::optional<std::string> cmdline_pci_option(const std::string& cmdline, const std::string& key) {
  std::optional<std::string> value;
  for (const auto& word : split_words(cmdline)) {
    if (word.rfind("pci=", 0) != 0) continue;
    std::istringstream opts(word.substr(4));
    for (std::string opt; std::getline(opts, opt, ',');)
      if (opt.rfind(key + "=", 0) == 0) value = opt.substr(key.size() + 1);
  }
  return value;
}

// What NVIDIA's third-party peer paths depend on and the sysroot shows: SMBIOS's virtual-machine
// bit (type 0, byte 0x13 bit 4, NVIDIA's guest test on AArch64), nvidia_peermem and nvidia_fs loaded (/proc/modules; else a module's sysfs initstate, absent on a live /sys only when
// not loaded), and NVreg_GrdmaPciTopoCheckOverride where the driver or its configuration states it:
// /proc/driver/nvidia/params (the running driver; module parameters are mode 0, so usually not in
// /sys/module), the kernel command line, then `options nvidia` lines of /etc/modprobe.d (last wins,
// used when the module is next loaded). Nothing stated: unknown, never the default.
static void read_nvidia_third_party(const Sysroot& root, Platform& p) {
  auto modules = root.read_text("proc/modules");
  auto loaded = [&](const std::string& name) {
    if (modules) {
      std::istringstream in(*modules);
      for (std::string line; std::getline(in, line);)
        if (line.substr(0, line.find(' ')) == name) return Known::kYes;
      return Known::kNo;
    }
    if (root.exists("sys/module/" + name + "/initstate")) return Known::kYes;
    return root.is_live() ? Known::kNo : Known::kUnknown;
  };
  p.nvidia_peermem_loaded = loaded("nvidia_peermem");
  p.nvidia_fs_loaded = loaded("nvidia_fs");
  if (auto raw = root.read_bytes("sys/firmware/dmi/entries/0-0/raw", 256); raw && raw->size() > 0x13 && (*raw)[0] == 0 &&
                                                                             (*raw)[1] > 0x13)
    p.firmware_vm = ((*raw)[0x13] & 0x10) ? Known::kYes : Known::kNo;
  const std::string key = "GrdmaPciTopoCheckOverride";
  auto set = [&](const std::string& value, const std::string& source) {
    if (auto v = parse_int(trim(value))) p.nvidia_grdma_override = *v, p.nvidia_grdma_override_source = source;
  };
  if (auto params = root.read_text("proc/driver/nvidia/params")) {
    std::istringstream in(*params);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(key + ":", 0) == 0) set(line.substr(key.size() + 1), "/proc/driver/nvidia/params");
    return;  // the running driver's own list: a key it lacks is one it does not have
  }
  if (auto v = root.read_line("sys/module/nvidia/parameters/NVreg_" + key)) {
    set(*v, "/sys/module/nvidia/parameters/NVreg_" + key);
    return;
  }
  if (auto v = cmdline_param(p.cmdline, "nvidia.NVreg_" + key)) {
    set(*v, "the kernel command line");
    return;
  }
  size_t files = 0;
  for (const auto& name : root.list("etc/modprobe.d")) {
    if (name.size() < 5 || name.substr(name.size() - 5) != ".conf" || ++files > 256) continue;
    auto text = root.read_text("etc/modprobe.d/" + name);
    if (!text) continue;
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) {
      auto words = split_words(line.substr(0, line.find('#')));
      if (words.size() < 3 || words[0] != "options" || words[1] != "nvidia") continue;
      for (size_t i = 2; i < words.size(); ++i)
        if (words[i].rfind("NVreg_" + key + "=", 0) == 0)
          set(words[i].substr(key.size() + 7), "/etc/modprobe.d/" + name + " (applies when the nvidia module is loaded)");
    }
  }
}

Platform read_platform(const Sysroot& root, std::vector<Finding>& findings) {
  Platform p;
  read_cpuinfo(root, p, findings);
  if (auto r = root.read_line("proc/sys/kernel/osrelease")) {
    p.kernel_release = trim(*r);
    if (!is_safe_release(p.kernel_release)) {
      findings.push_back({"proc/sys/kernel/osrelease", fmt::format("'{}' is not a kernel release: kernel release unknown",
                                                                   escape_text(p.kernel_release))});
      p.kernel_release.clear();
    }
  } else {
    findings.push_back({"proc/sys/kernel/osrelease", "missing: kernel release unknown"});
  }
  if (auto v = root.read_line("proc/version")) p.kernel_version = trim(*v);
  if (auto c = root.read_line("proc/cmdline")) p.cmdline = trim(*c);
  if (auto h = root.read_line("proc/sys/kernel/hostname")) p.hostname = trim(*h);
  read_kernel_config(root, p, findings);
  read_iommu(root, p);
  read_nvidia_third_party(root, p);
  return p;
}

}  // namespace p2paudit
