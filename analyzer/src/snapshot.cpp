// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/snapshot.h"
#include "p2paudit/runtime_versions.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <ctime>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "p2paudit/archive_library.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/json_input.h"
#include "p2paudit/kernel_cmdline.h"
#include "p2paudit/output_file.h"
#include "p2paudit/vendor_memory.h"

namespace fs = std::filesystem;

namespace p2paudit {

namespace {

// Per-function files the analyzer reads (see the core issue); nothing else is captured.
const char* const kFunctionFiles[] = {
    "config", "vendor", "device", "class", "subsystem_vendor", "subsystem_device", "revision", "resource",
    "numa_node", "local_cpulist", "current_link_speed", "current_link_width", "max_link_speed", "max_link_width",
    "modalias", "enable"};
const char* const kFunctionLinks[] = {"driver", "iommu_group", "physfn"};
const char* const kP2pmemFiles[] = {"size", "available", "published"};  // never "allocate": a 1 TiB mmap file

class TarWriter {
 public:
  TarWriter(const ArchiveLibrary& la, const std::string& path, int fd)
      : la_(la), path_(path), a_(la.archive_write_new()) {
    la_.archive_write_add_filter_gzip(a_);
    // GNU tar: names are written as the bytes they are (long ones as ././@LongLink entries). The
    // pax writer converts every name to UTF-8 through iconv, which reads the host's
    // gconv-modules.cache (docs/security.md) and fails on a name that is not UTF-8.
    la_.archive_write_set_format_gnutar(a_);
    if (la_.archive_write_open_fd(a_, fd) != ARCHIVE_OK) fail("cannot create");
  }
  ~TarWriter() {
    if (a_) la_.archive_write_free(a_);
  }
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;
  void directory(const std::string& name) {
    if (!dirs_.insert(name).second) return;
    auto slash = name.rfind('/');
    if (slash != std::string::npos) directory(name.substr(0, slash));
    entry(name, AE_IFDIR, 0755, nullptr, 0, {});
  }
  void file(const std::string& name, const std::string& data) {
    directory_of(name);
    entry(name, AE_IFREG, 0644, data.data(), data.size(), {});
    ++files_;
  }
  void symlink(const std::string& name, const std::string& target) {
    directory_of(name);
    entry(name, AE_IFLNK, 0777, nullptr, 0, target);
    ++files_;
  }
  void close() {
    if (la_.archive_write_close(a_) != ARCHIVE_OK) fail("cannot finish");
    la_.archive_write_free(a_);
    a_ = nullptr;
  }
  size_t files() const { return files_; }

 private:
  void directory_of(const std::string& name) {
    auto slash = name.rfind('/');
    if (slash != std::string::npos) directory(name.substr(0, slash));
  }
  void entry(const std::string& name, unsigned type, unsigned perm, const void* data, size_t size,
             const std::string& link_target) {
    struct archive_entry* e = la_.archive_entry_new();
    la_.archive_entry_set_pathname(e, name.c_str());
    la_.archive_entry_set_filetype(e, type);
    la_.archive_entry_set_perm(e, perm);
    la_.archive_entry_set_size(e, static_cast<la_int64_t>(size));
    la_.archive_entry_set_mtime(e, 0, 0);
    if (!link_target.empty()) la_.archive_entry_set_symlink(e, link_target.c_str());
    int r = la_.archive_write_header(a_, e);
    if (r == ARCHIVE_OK && size) r = la_.archive_write_data(a_, data, size) < 0 ? ARCHIVE_FATAL : ARCHIVE_OK;
    la_.archive_entry_free(e);
    if (r != ARCHIVE_OK) fail("cannot write");
  }
  [[noreturn]] void fail(const char* what) {
    const char* why = la_.archive_error_string(a_);
    std::string msg = fmt::format("{}: {}: {}", path_, what, why ? why : "error");
    la_.archive_write_free(a_);
    a_ = nullptr;
    throw InputError(msg);
  }

  const ArchiveLibrary& la_;
  std::string path_;
  struct archive* a_;
  std::set<std::string> dirs_;
  size_t files_ = 0;
};

// Calendar arithmetic only: gmtime_r() and strftime() call tzset(), which reads the host's
// /etc/localtime (docs/security.md).
std::string now_utc() {
  using namespace std::chrono;
  auto now = floor<seconds>(system_clock::now());
  auto day = floor<days>(now);
  year_month_day ymd{day};
  hh_mm_ss hms{now - day};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                     static_cast<unsigned>(ymd.day()), hms.hours().count(), hms.minutes().count(), hms.seconds().count());
}

nlohmann::ordered_json module_json(const ModuleInfo& m) {
  return {{"name", m.name}, {"version", m.version}, {"srcversion", m.srcversion},
          {"builtin", to_string(m.builtin)}, {"alias_matches", m.alias_matches}};
}

Known known_from(const std::string& s) { return s == "yes" ? Known::kYes : s == "no" ? Known::kNo : Known::kUnknown; }

void capture_function(const Sysroot& root, const Function& f, TarWriter& tar, const SnapshotOptions& options) {
  const std::string& dir = f.sysfs_path;
  for (const char* name : kFunctionFiles) {
    auto data = root.read_text(dir + "/" + name);
    if (!data) continue;
    if (options.redact && std::string(name) == "config" && f.serial_number) {
      // The serial number sits in the DSN capability; blank it where the capture holds it.
      for (int cap = 0x100; cap + 12 <= static_cast<int>(data->size());) {
        uint32_t header = 0;
        for (int b = 0; b < 4; ++b) header |= uint32_t{static_cast<uint8_t>((*data)[cap + b])} << (8 * b);
        if ((header & 0xffff) == 0x03) {
          for (int b = 4; b < 12; ++b) (*data)[cap + b] = 0;
          break;
        }
        int next = static_cast<int>((header >> 20) & 0xffc);
        if (next <= cap) break;
        cap = next;
      }
    }
    tar.file(dir + "/" + name, *data);
  }
  for (const char* name : kFunctionLinks)
    if (auto target = root.read_link(dir + "/" + name)) tar.symlink(dir + "/" + name, *target);
  for (const auto& entry : root.list(dir))
    if (entry.rfind("virtfn", 0) == 0)
      if (auto target = root.read_link(dir + "/" + entry)) tar.symlink(dir + "/" + entry, *target);
  if (f.has_p2pmem)
    for (const char* name : kP2pmemFiles)
      if (auto data = root.read_text(dir + "/p2pmem/" + name)) tar.file(dir + "/p2pmem/" + name, *data);
  // The bound driver's memory-size files (amdgpu mem_info_*, i915 drm/cardN/lmem_total_bytes, xe
  // tileN/physical_vram_size_bytes): vendor_memory_files() lists what read_vendor_memory() reads.
  for (const auto& rel : vendor_memory_files(root, f))
    if (auto data = root.read_text(rel)) tar.file(rel, *data);
}

void capture_if_present(const Sysroot& root, TarWriter& tar, const std::string& rel,
                        std::string (*redact)(std::string_view) = nullptr) {
  if (auto data = root.read_text(rel)) tar.file(rel, redact ? redact(*data) : *data);
}

// The kernel command line parameters --redact keeps (docs/security.md): exact names, and the
// prefixes of module parameters. Compared after '-' became '_', as the kernel's parameq() does.
// Besides PCI, the IOMMU and ACS, the analysis reads mem_encrypt (SME turns a passthrough default
// translated, platform.cpp read_iommu) and nvidia.NVreg_GrdmaPciTopoCheckOverride (NVIDIA's
// third-party peer gate, read_nvidia_third_party): dropping them would change the decisions.
const char* const kCmdlineKeep[] = {"pci", "pcie_acs_override", "pcie_aspm", "pcie_ports", "pcie_port_pm", "pcie_pme",
                                    "intel_iommu", "amd_iommu", "amd_iommu_intr", "iommu", "intremap", "mem_encrypt",
                                    "nvidia.NVreg_GrdmaPciTopoCheckOverride"};
const char* const kCmdlineKeepPrefixes[] = {"iommu.", "vfio_pci.", "vfio_iommu_type1."};

bool keep_cmdline_param(std::string_view param_name) {
  std::string name(param_name);
  for (char& c : name)
    if (c == '-') c = '_';
  for (const char* keep : kCmdlineKeep)
    if (name == keep) return true;
  for (const char* prefix : kCmdlineKeepPrefixes)
    if (name.size() > std::strlen(prefix) && name.rfind(prefix, 0) == 0) return true;
  return false;
}

bool cmdline_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

}  // namespace

std::string redact_cmdline(std::string_view cmdline) {
  // The kernel's own words (kernel_cmdline.h): init's arguments after "--" are never among them,
  // and a word written with a double quote goes whole, whatever its name (its value may hold
  // spaces and anything a stranger should not read).
  std::string out;
  for (const auto& param : read_kernel_cmdline(cmdline).params) {
    if (param.has_quote || !keep_cmdline_param(param.name)) continue;
    if (!out.empty()) out += ' ';
    out += cmdline.substr(param.begin, param.end - param.begin);
  }
  return out + "\n";
}

std::string redact_kernel_version(std::string_view version) {
  // "Linux version R (builder@host) (compiler...) #1 ...": init/version-timestamp.c prints
  // LINUX_COMPILE_BY "@" LINUX_COMPILE_HOST as the first parenthesised group after the release,
  // and KBUILD_BUILD_HOST may hold anything (spaces, parentheses): that whole group, up to the
  // ") (" that opens the compiler's, becomes redacted@redacted.
  std::string out(version);
  constexpr std::string_view kPrefix = "Linux version ";
  if (out.starts_with(kPrefix)) {
    size_t open = out.find(" (", kPrefix.size());
    if (open != std::string::npos) {
      size_t begin = open + 2, end = out.find(") (", begin);
      if (end == std::string::npos) end = out.rfind(')');  // no compiler group: up to the last ')'
      if (end != std::string::npos && end >= begin) out.replace(begin, end - begin, "redacted@redacted");
    }
  }
  // Then each remaining user@host word (text on both sides of the '@', up to a space or
  // parenthesis) becomes redacted@redacted.
  for (size_t at = out.find('@'); at != std::string::npos; at = out.find('@', at + 1)) {
    size_t begin = at, end = at + 1;
    while (begin > 0 && !cmdline_space(out[begin - 1]) && out[begin - 1] != '(') --begin;
    while (end < out.size() && !cmdline_space(out[end]) && out[end] != ')') ++end;
    if (begin == at || end == at + 1) continue;  // not user@host ("#1 SMP @0": a build time)
    out.replace(begin, end - begin, "redacted@redacted");
    at = begin + std::strlen("redacted@redacted") - 1;
  }
  return out;
}

namespace {

// --redact: the kernel config's CONFIG_DEFAULT_HOSTNAME (the host name a kernel built in-house
// may carry) becomes "redacted"; the rest is kept for the IOMMU defaults the analysis reads.
std::string redact_config_text(std::string_view config) {
  std::string out;
  out.reserve(config.size());
  constexpr std::string_view kHostname = "CONFIG_DEFAULT_HOSTNAME=";
  for (size_t at = 0; at < config.size();) {
    size_t end = config.find('\n', at);
    end = end == std::string_view::npos ? config.size() : end + 1;
    std::string_view line = config.substr(at, end - at);
    if (line.starts_with(kHostname)) out += std::string(kHostname) + "\"redacted\"\n";
    else out += line;
    at = end;
  }
  return out;
}

// --redact: /proc/driver/nvidia/params with only its numeric parameters ("Key: 1"); the quoted
// strings (TemporaryFilePath, RegistryDwords, RmMsg...) may name paths or hosts and the analysis
// reads none of them. The file stays, so a key it lacks still means the driver lacks it.
std::string redact_nvidia_params(std::string_view params) {
  std::string out;
  for (size_t at = 0; at < params.size();) {
    size_t end = params.find('\n', at);
    end = end == std::string_view::npos ? params.size() : end + 1;
    std::string_view line = params.substr(at, end - at);
    at = end;
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) continue;
    std::string_view key = line.substr(0, colon), value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    bool name_ok = std::all_of(key.begin(), key.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    // A decimal number, or 0x and hex digits (a bare "facade" is no number: it may be a name).
    std::string_view digits = value;
    if (digits.starts_with("-")) digits.remove_prefix(1);
    bool hex = digits.starts_with("0x") || digits.starts_with("0X");
    if (hex) digits.remove_prefix(2);
    bool number = !digits.empty() && std::all_of(digits.begin(), digits.end(), [hex](char c) {
      return hex ? std::isxdigit(static_cast<unsigned char>(c)) != 0 : std::isdigit(static_cast<unsigned char>(c)) != 0;
    });
    if (name_ok && number) out += std::string(key) + ": " + std::string(value) + "\n";
  }
  return out;
}

std::optional<std::string> gzip_bytes(const std::string& data, std::string_view name) {
  const ArchiveLibrary& la = archive_library("compress", name);
  std::string out;
  struct archive* a = la.archive_write_new();
  la.archive_write_add_filter_gzip(a);
  la.archive_write_set_format_raw(a);
  la.archive_write_set_bytes_in_last_block(a, 1);  // no zero padding after the gzip stream
  auto write = [](struct archive*, void* sink, const void* buf, size_t n) -> la_ssize_t {
    static_cast<std::string*>(sink)->append(static_cast<const char*>(buf), n);
    return static_cast<la_ssize_t>(n);
  };
  bool ok = la.archive_write_open2(a, &out, nullptr, write, nullptr, nullptr) == ARCHIVE_OK;
  struct archive_entry* e = la.archive_entry_new();
  la.archive_entry_set_pathname(e, "config");
  la.archive_entry_set_filetype(e, AE_IFREG);
  la.archive_entry_set_perm(e, 0444);
  la.archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
  ok = ok && la.archive_write_header(a, e) == ARCHIVE_OK &&
       la.archive_write_data(a, data.data(), data.size()) == static_cast<la_ssize_t>(data.size());
  la.archive_entry_free(e);
  ok = la.archive_write_close(a) == ARCHIVE_OK && ok;
  la.archive_write_free(a);
  if (!ok) return std::nullopt;
  return out;
}

// The kernel config as --redact stores it: boot/config-R as text, proc/config.gz decompressed,
// redacted and compressed again. A config.gz that cannot be read is left out (the analysis could
// not read it either, so nothing it decides changes).
std::optional<std::string> redact_kernel_config(const Sysroot& root, const std::string& rel, const std::string& data) {
  if (!rel.ends_with(".gz")) return redact_config_text(data);
  auto text = gunzip_bounded(data, root.limits().max_file_bytes, rel);
  if (!text) return std::nullopt;
  return gzip_bytes(redact_config_text(*text), rel);
}

}  // namespace

void refuse_terminal_output(const std::string& out_path) {
  if (out_path == kStandardOutput && ::isatty(STDOUT_FILENO))
    throw InputError("-o -: standard output is a terminal; redirect it to a file or a pipe "
                     "(p2paudit snapshot -o - > FILE.tar.gz)");
}

SnapshotReport write_snapshot(const Sysroot& root, const Topology& topo, const std::string& out_path,
                              const SnapshotOptions& options) {
  const bool to_stdout = out_path == kStandardOutput;
  refuse_terminal_output(out_path);
  // Sysroot::open() recognises a snapshot by its name, so write only names it will read back.
  if (!to_stdout && !out_path.ends_with(".tar.gz") && !out_path.ends_with(".tgz"))
    throw InputError(fmt::format("{}: a snapshot is written as FILE.tar.gz (or .tgz)", out_path));
  const std::string out_name = to_stdout ? "standard output" : out_path;
  // Before the output file exists: without libarchive nothing is created.
  const ArchiveLibrary& la = archive_library("write", out_name);
  std::optional<OutputFile> output;
  if (!to_stdout) output.emplace(out_path, options.force);
  TarWriter tar(la, out_name, to_stdout ? STDOUT_FILENO : output->fd());
  CaptureMetadata meta;
  meta.tool_version = options.tool_version;
  meta.captured_at = now_utc();
  meta.redacted = options.redact;
  meta.hostname = options.redact ? "" : topo.platform.hostname;
  meta.privileged = topo.config_fully_readable;

  for (const auto& f : topo.functions) {
    std::string link = "sys/bus/pci/devices/" + f.bdf.str();
    auto target = root.read_link(link);
    if (!target) throw InputError(fmt::format("{}: {}: not a symlink; cannot record where the device sits", root.origin(), link));
    tar.symlink(link, *target);
    capture_function(root, f, tar, options);
    if (f.config_size) meta.config_sizes[f.bdf.str()] = f.config_size;
    meta.modules[f.driver.empty() ? "modalias:" + f.modalias : f.driver] = f.module;
  }
  for (const auto& bus : root.list("sys/class/pci_bus"))
    if (auto target = root.read_link("sys/class/pci_bus/" + bus)) tar.symlink("sys/class/pci_bus/" + bus, *target);
  for (const auto& group : root.list("sys/kernel/iommu_groups")) {
    std::string g = "sys/kernel/iommu_groups/" + group;
    tar.directory(g);
    capture_if_present(root, tar, g + "/type");
    for (const auto& dev : root.list(g + "/devices"))
      if (auto target = root.read_link(g + "/devices/" + dev)) tar.symlink(g + "/devices/" + dev, *target);
  }
  // Which IOMMU drivers registered (dmar*: Intel VT-d, ivhd*: AMD-Vi), for the IOMMU mode's era rules.
  for (const auto& unit : root.list("sys/class/iommu"))
    if (auto target = root.read_link("sys/class/iommu/" + unit)) tar.symlink("sys/class/iommu/" + unit, *target);
  capture_if_present(root, tar, "proc/cpuinfo");
  capture_if_present(root, tar, "proc/cmdline", options.redact ? redact_cmdline : nullptr);
  capture_if_present(root, tar, "proc/version", options.redact ? redact_kernel_version : nullptr);
  capture_if_present(root, tar, "proc/version_signature");  // Ubuntu: the stable release it is built from
  capture_if_present(root, tar, "proc/sys/kernel/osrelease");
  // NVIDIA's third-party peer paths: loaded modules, the driver's parameters, modprobe options.
  capture_if_present(root, tar, "proc/modules");
  capture_if_present(root, tar, "proc/driver/nvidia/params", options.redact ? redact_nvidia_params : nullptr);
  capture_if_present(root, tar, "sys/firmware/dmi/entries/0-0/raw");
  // Driver and runtime versions (runtime_versions.h). The NVIDIA driver's line names the user@host
  // that built it: --redact replaces that as in proc/version.
  capture_if_present(root, tar, kNvidiaProcVersionPath, options.redact ? redact_kernel_version : nullptr);
  for (const char* rel : {kNvidiaModuleVersionPath, kAmdgpuModuleVersionPath, kRocmVersionPath})
    capture_if_present(root, tar, rel);
  for (const auto& name : root.list("etc/modprobe.d"))
    if (name.size() > 5 && name.substr(name.size() - 5) == ".conf") capture_if_present(root, tar, "etc/modprobe.d/" + name);
  if (const std::string& rel = topo.platform.kernel_config_source; !rel.empty()) {
    if (!options.redact) capture_if_present(root, tar, rel);
    else if (auto data = root.read_text(rel))
      if (auto redacted = redact_kernel_config(root, rel, *data)) tar.file(rel, *redacted);
  }

  nlohmann::ordered_json j = {{"schema_version", meta.schema_version}, {"tool_version", meta.tool_version},
                              {"captured_at", meta.captured_at}, {"hostname", meta.hostname},
                              {"privileged", meta.privileged}, {"redacted", meta.redacted},
                              {"config_sizes", meta.config_sizes}, {"modules", nlohmann::ordered_json::object()}};
  for (const auto& [key, m] : meta.modules) j["modules"][key] = module_json(m);
  tar.file(kCaptureMetadataPath, j.dump(2) + "\n");
  for (const auto& [name, text] : options.extra_files) tar.file(name, text);
  SnapshotReport report{tar.files(), meta.privileged};
  tar.close();
  if (output) output->commit();
  return report;
}

std::optional<CaptureMetadata> read_capture_metadata(const Sysroot& root) {
  auto text = root.read_text(kCaptureMetadataPath);
  if (!text) return std::nullopt;
  CaptureMetadata meta;
  try {
    auto j = parse_input_json(*text, fmt::format("{}: {}", escape_text(root.origin()), kCaptureMetadataPath));
    meta.schema_version = j.at("schema_version").get<int>();
    meta.tool_version = j.value("tool_version", "");
    meta.captured_at = j.value("captured_at", "");
    meta.hostname = j.value("hostname", "");
    meta.privileged = j.value("privileged", false);
    meta.redacted = j.value("redacted", false);
    meta.config_sizes = j.value("config_sizes", std::map<std::string, size_t>{});
    const auto modules = j.value("modules", nlohmann::json::object());
    for (const auto& [key, m] : modules.items()) {
      ModuleInfo info;
      info.name = m.value("name", "");
      info.version = m.value("version", "");
      info.srcversion = m.value("srcversion", "");
      info.builtin = known_from(m.value("builtin", "unknown"));
      info.alias_matches = m.value("alias_matches", std::vector<std::string>{});
      meta.modules[key] = info;
    }
  } catch (const nlohmann::json::exception& e) {
    // The parser's message quotes the offending bytes of a stranger's file: escaped, as the name is.
    throw InputError(fmt::format("{}: {}: malformed capture metadata: {}", escape_text(root.origin()), kCaptureMetadataPath,
                                 escape_text(e.what())));
  }
  return meta;
}

}  // namespace p2paudit
