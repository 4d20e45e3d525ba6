// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/platform.h"

#include "p2paudit/errors.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "p2paudit/input_file.h"
#include "p2paudit/kernel_cmdline.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/runtime_versions.h"

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

// "46 bits physical, 48 bits virtual" -> 46: the CPU's physical address width (x86's
// "address sizes" line). Anything else, or a width no CPU has, is unknown.
std::optional<int> physical_address_bits(const std::string& value) {
  auto words = split_words(value);
  if (words.size() < 3 || words[1] != "bits" || words[2].rfind("physical", 0) != 0 || words[0].size() > 3)
    return std::nullopt;
  auto bits = parse_int(words[0]);
  if (!bits || *bits < 32 || *bits > 64) return std::nullopt;
  return bits;
}

// Fields whose size the hardware or the kernel fixes: a longer value came from no kernel. It is cut
// (marked "…") so that it cannot flood a header or a commit message, and a finding names the file.
constexpr size_t kCpuVendorBytes = 12;  // CPUID leaf 0: EBX, EDX, ECX
constexpr size_t kCpuBrandBytes = 48;   // CPUID 0x80000002..0x80000004: the brand string
constexpr size_t kUtsFieldBytes = 64;   // struct new_utsname: nodename, release (__NEW_UTS_LEN)

std::string bounded(const std::string& value, size_t max, const char* path, const char* what,
                    std::vector<Finding>& findings) {
  bool cut = false;
  std::string out = bounded_field(value, max, &cut);
  if (cut)
    findings.push_back({path, fmt::format("{} is {} bytes, longer than the {} bytes it can be: cut to '{}'", what,
                                          value.size(), max, escape_line(out))});
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
    if (key == "vendor_id") p.cpu_vendor = bounded(value, kCpuVendorBytes, "proc/cpuinfo", "vendor_id", findings);
    else if (key == "cpu family") p.cpu_family = parse_int(value);
    else if (key == "model") p.cpu_model = parse_int(value);
    else if (key == "model name")
      p.cpu_model_name = bounded(value, kCpuBrandBytes, "proc/cpuinfo", "model name (a CPUID brand string)", findings);
    else if (key == "address sizes") p.cpu_physical_address_bits = physical_address_bits(value);
    else if (key == "flags") {
      for (const auto& flag : split_words(value))
        if (flag == "hypervisor") p.hypervisor = true;
    } else if (key == "CPU implementer" && p.arch.empty()) p.arch = "arm64";
    else if (key == "isa" && value.rfind("rv64", 0) == 0) p.arch = "riscv64";
  }
  if (!p.cpu_vendor.empty() && p.cpu_family) p.arch = "x86";
}

// Returns the config text (for the IOMMU defaults), or nullopt when none was found.
std::optional<std::string> read_kernel_config(const Sysroot& root, Platform& p, std::vector<Finding>& findings) {
  std::optional<std::string> config;
  std::string boot = "boot/config-" + p.kernel_release;
  if (is_safe_kernel_release(p.kernel_release) && (config = root.read_text(boot))) {
    p.kernel_config_source = boot;
  } else if (auto gz = root.read_text("proc/config.gz")) {
    std::string why = "cannot be decompressed";
    try {
      config = gunzip_bounded(*gz, root.limits().max_file_bytes, "proc/config.gz");
    } catch (const InputError& e) {  // no libarchive on this machine: the config is unknown, the rest is read
      why = e.what();
    }
    if (config) p.kernel_config_source = "proc/config.gz";
    else findings.push_back({"proc/config.gz", why + ": kernel config unknown"});
  }
  if (!config) return config;
  std::istringstream in(*config);
  p.config_p2pdma = Known::kNo;  // a config that does not mention it has it off
  for (std::string line; std::getline(in, line);)
    if (line == "CONFIG_PCI_P2PDMA=y") p.config_p2pdma = Known::kYes;
  return config;
}

bool config_has(const std::string& config, std::string_view option) {
  std::istringstream in(config);
  for (std::string line; std::getline(in, line);)
    if (line.size() == option.size() + 2 && line.starts_with(option) && line.ends_with("=y")) return true;
  return false;
}

// kstrtobool() as early_param("iommu.passthrough") reads it: y/Y/1 and "on" true, n/N/0 and "off" false.
std::optional<bool> kstrtobool(std::string_view s) {
  if (s.empty()) return std::nullopt;
  switch (s[0]) {
    case 'y': case 'Y': case '1': return true;
    case 'n': case 'N': case '0': return false;
    case 'o': case 'O':
      if (s.size() > 1 && (s[1] == 'n' || s[1] == 'N')) return true;
      if (s.size() > 1 && (s[1] == 'f' || s[1] == 'F')) return false;
      return std::nullopt;
    default: return std::nullopt;
  }
}

// The default domain the command line asks for, the last word winning as early params are parsed
// in order: iommu=pt / iommu=nopt (arch/x86/kernel/pci-dma.c iommu_setup(), each comma-separated
// option compared by prefix; nopt from 5.5) and iommu.passthrough= (drivers/iommu/iommu.c).
// Intel VT-d before 5.3 had no default domains: only iommu=pt (IDENTMAP_ALL) changed it.
// The words are the kernel's (kernel_cmdline.h): none after "--", quotes as next_arg() takes them.
struct CmdlineDefault {
  std::string mode, word;
};
std::optional<CmdlineDefault> cmdline_default_domain(const std::string& cmdline, const KernelRelease* era, bool intel_vtd) {
  auto at_least = [&](int major, int minor) { return era && std::tie(era->major, era->minor) >= std::tie(major, minor); };
  std::optional<CmdlineDefault> out;
  for (const auto& param : read_kernel_cmdline(cmdline).params) {
    if (!param.value) continue;
    if (kernel_param_name_is(param.name, "iommu")) {
      std::istringstream opts(*param.value);
      for (std::string opt; std::getline(opts, opt, ',');) {
        if (opt.starts_with("pt")) out = CmdlineDefault{"passthrough", "iommu=pt"};
        else if (opt.starts_with("nopt") && at_least(5, 5)) out = CmdlineDefault{"translated", "iommu=nopt"};
      }
    } else if (kernel_param_name_is(param.name, "iommu.passthrough")) {
      auto v = kstrtobool(*param.value);
      if (!v) continue;
      if (intel_vtd && !at_least(5, 3)) continue;  // VT-d before 5.3 ignored the default domain type
      // shown: a hostile word is escaped
      out = CmdlineDefault{*v ? "passthrough" : "translated", escape_text("iommu.passthrough=" + *param.value)};
    }
  }
  return out;
}

// The last of `choices` the comma-separated options of name= select, compared by prefix as
// iommu_setup(), intel_iommu_setup() and parse_amd_iommu_options() compare them; every name=
// word in order, so the last option wins across words too.
std::optional<std::string> last_option(const std::string& cmdline, const std::string& name,
                                       std::initializer_list<const char*> choices) {
  std::optional<std::string> out;
  for (const auto& opt : kernel_param_options(read_kernel_cmdline(cmdline), name))
    for (const char* c : choices)
      if (opt.starts_with(c)) out = c;
  return out;
}

// sys/class/iommu names the IOMMU drivers registered: dmar* (Intel VT-d), ivhd* (AMD-Vi). Without
// it, a bare-metal Intel CPU has only VT-d.
bool intel_vtd_iommu(const Sysroot& root, const Platform& p) {
  auto units = root.list("sys/class/iommu");
  if (!units.empty())
    return std::any_of(units.begin(), units.end(), [](const std::string& u) { return u.starts_with("dmar"); });
  return p.cpu_vendor == "GenuineIntel" && !p.hypervisor;
}

// Whether DMA is translated, from every source the capture holds, and where the answer came from.
void read_iommu(const Sysroot& root, Platform& p, const std::optional<std::string>& config) {
  auto groups = root.list("sys/kernel/iommu_groups");
  p.iommu_groups_present = !groups.empty();
  std::string mixed;  // set when the groups' type files disagree: said with the default that decides
  auto decide = [&](std::string mode, std::string source) {
    p.iommu_mode = std::move(mode);
    p.iommu_mode_source = std::move(source);
    if (!mixed.empty() && p.iommu_mode != "unknown") p.iommu_mode_source += " (" + mixed + ")";
  };
  if (!p.iommu_groups_present) {
    // No IOMMU driver registered for the PCI bus (off on the command line, not built, no hardware).
    std::vector<std::string> said;
    for (const char* name : {"iommu", "intel_iommu", "amd_iommu"}) {
      auto value = last_option(p.cmdline, name, {"on", "off"});
      if (value) said.push_back(fmt::format("{}={}", name, *value));
    }
    if (!said.empty()) return decide("off", fmt::format("no IOMMU groups (command line {})", fmt::join(said, " ")));
    // Else what the kernel config says about the x86 IOMMU drivers, where it says why.
    if (config && p.arch == "x86") {
      bool intel = config_has(*config, "CONFIG_INTEL_IOMMU"), amd = config_has(*config, "CONFIG_AMD_IOMMU");
      if (!intel && !amd) return decide("off", "no IOMMU groups (kernel built without CONFIG_INTEL_IOMMU and CONFIG_AMD_IOMMU)");
      if (intel && p.cpu_vendor == "GenuineIntel" && !config_has(*config, "CONFIG_INTEL_IOMMU_DEFAULT_ON"))
        return decide("off", "no IOMMU groups (CONFIG_INTEL_IOMMU_DEFAULT_ON not set and no intel_iommu=on)");
    }
    return decide("off", "no IOMMU groups");
  }
  // 1. The default domain of every group (sys/kernel/iommu_groups/N/type, 5.11+).
  std::map<std::string, int> types;
  for (const auto& g : groups)
    if (auto t = root.read_lone_line("sys/kernel/iommu_groups/" + g + "/type")) {  // one file a group
      std::string type = trim(*t);
      if (type == "identity") ++types["passthrough"];
      else if (type == "DMA" || type == "DMA-FQ") ++types["translated"];
    }
  if (types.size() == 1) return decide(types.begin()->first, "iommu_group type");
  if (types.size() > 1)
    mixed = fmt::format("iommu_group types differ ({} translated, {} identity)", types["translated"], types["passthrough"]);

  // 2. The command line, then 3. the kernel config's default, as the running kernel's era reads them.
  auto release = KernelRelease::parse(p.kernel_release);
  const KernelRelease* era = release ? &*release : nullptr;
  auto at_least = [&](int major, int minor) { return era && std::tie(era->major, era->minor) >= std::tie(major, minor); };
  bool intel = intel_vtd_iommu(root, p);
  if (auto c = cmdline_default_domain(p.cmdline, era, intel)) return decide(c->mode, "command line " + c->word);
  if (config) {
    if (!config_has(*config, "CONFIG_IOMMU_DEFAULT_PASSTHROUGH"))
      return decide("translated", "kernel config: CONFIG_IOMMU_DEFAULT_PASSTHROUGH not set");
    if (intel && era && !at_least(5, 3))
      return decide("translated", "Intel VT-d before 5.3 ignores CONFIG_IOMMU_DEFAULT_PASSTHROUGH=y (only iommu=pt)");
    // 5.3+ (iommu_subsys_init()): active memory encryption (SME) turns a configured passthrough
    // default back to translated unless the command line chose.
    if (p.cpu_vendor == "AuthenticAMD" && config_has(*config, "CONFIG_AMD_MEM_ENCRYPT") && (!era || at_least(5, 3))) {
      auto me = cmdline_param(p.cmdline, "mem_encrypt");
      if (me && *me == "on")
        return decide("translated", "CONFIG_IOMMU_DEFAULT_PASSTHROUGH=y overridden by mem_encrypt=on (SME)");
      if (!(me && *me == "off") && config_has(*config, "CONFIG_AMD_MEM_ENCRYPT_ACTIVE_BY_DEFAULT"))
        return decide("unknown", "CONFIG_IOMMU_DEFAULT_PASSTHROUGH=y, but SME may be active "
                                 "(CONFIG_AMD_MEM_ENCRYPT_ACTIVE_BY_DEFAULT=y), which makes it translated");
    }
    if (!era && intel) return decide("unknown", "CONFIG_IOMMU_DEFAULT_PASSTHROUGH=y, but the kernel release (VT-d honours it from 5.3) is unknown");
    return decide("passthrough", "kernel config: CONFIG_IOMMU_DEFAULT_PASSTHROUGH=y");
  }
  // 4. The era alone: VT-d before 5.3 translated every device unless iommu=pt.
  if (intel && era && !at_least(5, 3))
    return decide("translated", "Intel VT-d before 5.3: translated unless iommu=pt");
  decide("unknown", mixed.empty() ? "IOMMU groups present; no iommu_group type, command line or kernel config says the default domain"
                                  : mixed + "; no command line or kernel config says the default");
}

}  // namespace

bool is_safe_kernel_release(const std::string& r) {
  if (r.empty() || r.size() > 128 || r == "." || r == "..") return false;
  return std::all_of(r.begin(), r.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == '+' || c == '~';
  });
}

std::optional<std::string> cmdline_param(const std::string& cmdline, const std::string& name) {
  return kernel_param_last(read_kernel_cmdline(cmdline), name);
}

std::optional<std::string> cmdline_pci_option(const std::string& cmdline, const std::string& key) {
  return kernel_pci_option(read_kernel_cmdline(cmdline), key);
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
  // A loadable module's parameter on the command line is applied by modprobe, which reads
  // /proc/cmdline with libkmod's own parser (kmod_config_parse_kcmdline()), not the kernel's: one
  // standing after "--" may or may not reach the module, so the setting is then unknown.
  const KernelCmdline line = read_kernel_cmdline(p.cmdline);
  for (const auto& arg : line.init_args)
    if (kernel_param_name_is(arg.name, "nvidia.NVreg_" + key)) return;
  if (auto v = kernel_param_last(line, "nvidia.NVreg_" + key)) {
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
    if (p.kernel_release.size() > kUtsFieldBytes) {  // a cut release would choose another kernel's rules
      findings.push_back({"proc/sys/kernel/osrelease",
                          fmt::format("{} bytes, longer than the {} bytes of a kernel release (struct utsname): kernel "
                                      "release unknown", p.kernel_release.size(), kUtsFieldBytes)});
      p.kernel_release.clear();
    } else if (!is_safe_kernel_release(p.kernel_release)) {
      findings.push_back({"proc/sys/kernel/osrelease", fmt::format("'{}' is not a kernel release: kernel release unknown",
                                                                   escape_text(p.kernel_release))});
      p.kernel_release.clear();
    }
  } else {
    findings.push_back({"proc/sys/kernel/osrelease", "missing: kernel release unknown"});
  }
  if (auto v = root.read_line("proc/version")) p.kernel_version = trim(*v);
  if (auto v = root.read_line("proc/version_signature")) p.kernel_version_signature = trim(*v);
  if (auto c = root.read_line("proc/cmdline")) p.cmdline = trim(*c);
  if (auto h = root.read_line("proc/sys/kernel/hostname"))
    p.hostname = bounded(trim(*h), kUtsFieldBytes, "proc/sys/kernel/hostname", "the host name", findings);
  auto config = read_kernel_config(root, p, findings);
  read_iommu(root, p, config);
  read_nvidia_third_party(root, p);
  p.versions = read_runtime_versions(root, findings);
  return p;
}

}  // namespace p2paudit
