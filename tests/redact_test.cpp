// SPDX-License-Identifier: GPL-2.0-or-later
// `snapshot --redact` leaves no host name anywhere in the archive (issue 18): a sysroot with the
// host name planted in every captured place that can carry it (the kernel command line in each
// form, proc/version's builder, the kernel config, the host name file) is captured with and
// without --redact; every byte of the redacted archive (each entry's name, link target and data,
// a compressed entry decompressed) is searched for the name, and the analysis of both snapshots
// gives the same answers.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "p2paudit/platform.h"
#include "p2paudit/snapshot.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::ConfigBytes;
using test::SysrootDir;

const std::string kHost = "secret-host-42";

test::CommandResult tool(const std::string& args) { return test::run_command(test::tool_file() + " " + args + " 2>/dev/null"); }

// The data of a gzip stream (a raw one-entry read), or nullopt.
std::optional<std::string> gunzip(const std::string& gz) {
  struct archive* a = archive_read_new();
  archive_read_support_filter_gzip(a);
  archive_read_support_format_raw(a);
  std::optional<std::string> out;
  struct archive_entry* e;
  if (archive_read_open_memory(a, gz.data(), gz.size()) == ARCHIVE_OK && archive_read_next_header(a, &e) == ARCHIVE_OK) {
    std::string data;
    char buf[65536];
    la_ssize_t n;
    while ((n = archive_read_data(a, buf, sizeof buf)) > 0) data.append(buf, static_cast<size_t>(n));
    if (n == 0) out = std::move(data);
  }
  archive_read_free(a);
  return out;
}

// Every entry of a snapshot: name -> name, link target and data, .gz entries decompressed.
std::map<std::string, std::string> archive_texts(const std::string& path) {
  std::map<std::string, std::string> out;
  struct archive* a = archive_read_new();
  archive_read_support_filter_gzip(a);
  archive_read_support_format_tar(a);
  EXPECT_EQ(archive_read_open_filename(a, path.c_str(), 65536), ARCHIVE_OK) << path;
  struct archive_entry* e;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
    std::string text = name + "\n";
    if (const char* link = archive_entry_symlink(e)) text += std::string(link) + "\n";
    for (const char* owner : {archive_entry_uname(e), archive_entry_gname(e)})
      if (owner) text += std::string(owner) + "\n";
    std::string data;
    char buf[65536];
    la_ssize_t n;
    while ((n = archive_read_data(a, buf, sizeof buf)) > 0) data.append(buf, static_cast<size_t>(n));
    text += data;
    if (name.ends_with(".gz")) {
      auto plain = gunzip(data);
      EXPECT_TRUE(plain) << name << ": not a gzip stream";
      if (plain) text += *plain;
    }
    out[name] = text;
  }
  archive_read_free(a);
  return out;
}

// The entries that hold the host name.
std::vector<std::string> entries_naming_host(const std::string& archive) {
  std::vector<std::string> hits;
  for (const auto& [name, text] : archive_texts(archive))
    if (text.find(kHost) != std::string::npos) hits.push_back(name);
  // The whole compressed file too (a gzip header may carry a name).
  auto raw = test::run_command("gzip -dc " + test::shell_quote(archive) + " | grep -a -c " + kHost);
  if (raw.output != "0\n") hits.push_back("(the tar stream)");
  return hits;
}

// An AMD machine whose IOMMU default comes from the kernel config (groups without a type file):
// CONFIG_IOMMU_DEFAULT_PASSTHROUGH=y, which mem_encrypt=on on the command line turns translated.
// Two endpoints below two Root Ports of an AMD host bridge; config is written as `config_rel`.
void build_machine(SysrootDir& s, const std::string& config_rel) {
  s.write("proc/sys/kernel/osrelease", "6.8.0-lab\n");
  s.write("proc/sys/kernel/hostname", kHost + "\n");
  s.write("proc/cmdline",
          "BOOT_IMAGE=/boot/vmlinuz-6.8.0-" + kHost + " root=nfs:10.0.0.1:/srv/" + kHost + ",vers=4 ro systemd.hostname=" +
              kHost + " ip=10.0.0.2::10.0.0.1:255.255.255.0:" + kHost + ":eth0:off nfsroot=" + kHost +
              ":/export/root hostname=" + kHost + " \"quoted " + kHost + "\" mem_encrypt=on amd_iommu=on"
              " pci=noaer pcie_acs_override=downstream nvidia.NVreg_GrdmaPciTopoCheckOverride=1"
              " nvidia.NVreg_TemporaryFilePath=/var/" + kHost + " console=ttyS0 " + kHost + " -- " + kHost + "\n");
  // A locally built kernel: KBUILD_BUILD_USER/HOST as people set them, spaces and all.
  s.write("proc/version", "Linux version 6.8.0-lab (kbuild@" + kHost + " (lab rack 3)) (gcc (GCC) 13.2.0, GNU ld 2.41) #1 SMP "
                          "PREEMPT_DYNAMIC Mon Jan  1 00:00:00 UTC 2024\n");
  // An NVIDIA driver built on this host: its version line names the builder.
  s.write("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
                                        "(root@" + kHost + ")  Wed Jan  1 00:00:00 UTC 2025\nGCC version:  gcc version 13.2.0\n");
  std::string config = "#\n# Automatically generated file; DO NOT EDIT.\n#\nCONFIG_PCI_P2PDMA=y\nCONFIG_AMD_IOMMU=y\n"
                       "CONFIG_IOMMU_DEFAULT_PASSTHROUGH=y\nCONFIG_AMD_MEM_ENCRYPT=y\nCONFIG_DEFAULT_HOSTNAME=\"" + kHost + "\"\n";
  fs::remove(s.dir() / "boot/config-6.8.0");
  if (config_rel.ends_with(".gz")) {
    std::string gz;
    struct archive* a = archive_write_new();
    archive_write_add_filter_gzip(a);
    archive_write_set_format_raw(a);
    archive_write_set_bytes_in_last_block(a, 1);
    std::string path = (s.dir() / config_rel).string();
    fs::create_directories((s.dir() / config_rel).parent_path());
    archive_write_open_filename(a, path.c_str());
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, "config");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_size(e, static_cast<la_int64_t>(config.size()));
    archive_write_header(a, e);
    archive_write_data(a, config.data(), config.size());
    archive_entry_free(e);
    archive_write_close(a);
    archive_write_free(a);
    // The running driver's parameters (its own list wins over the command line's): numbers and
    // quoted strings, as /proc/driver/nvidia/params prints them.
    s.write("proc/driver/nvidia/params", "ResmanDebugLevel: 4294967295\nGrdmaPciTopoCheckOverride: 1\n"
                                         "TemporaryFilePath: \"/var/lib/" + kHost + "\"\nRegistryDwords: \"host=" + kHost +
                                         "\"\nRmMsg: \"\"\nEnableResizableBar: 0\n" + kHost + ": 1\n");
  } else {
    s.write(config_rel, config);
  }
  s.function("pci0000:00/0000:00:00.0", ConfigBytes(0x1022, 0x1480, 0x060000, 0).bytes(256));
  s.function("pci0000:00/0000:00:01.1", ConfigBytes(0x1022, 0x1483, 0x060400, 4, true).buses(0, 1, 1).acs(0x001d).bytes());
  s.function("pci0000:00/0000:00:01.2", ConfigBytes(0x1022, 0x1483, 0x060400, 4, true).buses(0, 2, 2).acs(0x001d).bytes());
  test::gpu_with_bar(s, "pci0000:00/0000:00:01.1/0000:01:00.0", 0x10de, 0x2330, "nvidia", 0x20000000000, 1ull << 34);
  s.function("pci0000:00/0000:00:01.2/0000:02:00.0", ConfigBytes(0x15b3, 0x101d, 0x020000, 0).bytes());
  s.link("sys/devices/pci0000:00/0000:00:01.2/0000:02:00.0/driver", "../../../../bus/pci/drivers/mlx5_core");
  // One IOMMU group per function, linked both ways as sysfs links them (relative targets).
  auto up_to_root = [](const std::string& link) {
    std::string ups;
    for (char c : link)
      if (c == '/') ups += "../";
    return ups;
  };
  int group = 0;
  for (const char* dir : {"pci0000:00/0000:00:00.0", "pci0000:00/0000:00:01.1", "pci0000:00/0000:00:01.2",
                          "pci0000:00/0000:00:01.1/0000:01:00.0", "pci0000:00/0000:00:01.2/0000:02:00.0"}) {
    std::string d = dir, bdf = d.substr(d.rfind('/') + 1), g = "sys/kernel/iommu_groups/" + std::to_string(group++);
    s.link(g + "/devices/" + bdf, up_to_root(g + "/devices/" + bdf) + "sys/devices/" + d);
    s.link("sys/devices/" + d + "/iommu_group", up_to_root("sys/devices/" + d + "/iommu_group") + g);
  }
}

// What the analysis answers for a snapshot, less the two fields redaction rewrites by design.
json analysis(const std::string& snapshot) {
  auto topo = tool("--sysroot " + test::shell_quote(snapshot) + " topology --format json");
  EXPECT_EQ(topo.status, 0) << snapshot;
  json t = json::parse(topo.output, nullptr, false);
  if (t.is_discarded()) return nullptr;
  t["platform"].erase("cmdline");
  t["platform"].erase("kernel_version");
  auto policy = tool("--sysroot " + test::shell_quote(snapshot) + " policy --all --details --no-probe --format json");
  json p = json::parse(policy.output, nullptr, false);
  auto matrix = tool("--sysroot " + test::shell_quote(snapshot) + " matrix --all --details --format json");
  json m = json::parse(matrix.output, nullptr, false);
  json out = {{"topology", t}, {"policy", p}, {"matrix", m}};
  for (auto& [name, doc] : out.items())
    if (doc.is_object()) doc.erase("source");  // the snapshot's own file name
  return out;
}

void check_redaction(const std::string& config_rel) {
  SysrootDir s;
  build_machine(s, config_rel);
  const std::string plain = s.str() + "-plain.tar.gz", redacted = s.str() + "-redacted.tar.gz";
  ASSERT_EQ(tool("--sysroot " + test::shell_quote(s.str()) + " snapshot -o " + test::shell_quote(plain)).status, 0);
  ASSERT_EQ(tool("--sysroot " + test::shell_quote(s.str()) + " snapshot --redact -o " + test::shell_quote(redacted)).status, 0);

  // The name is there to be found without --redact (in the command line, version and config)...
  auto plain_hits = entries_naming_host(plain);
  std::vector<std::string> planted = {"proc/cmdline", "proc/version", "proc/driver/nvidia/version", config_rel};
  if (config_rel.ends_with(".gz")) planted.push_back("proc/driver/nvidia/params");
  for (const std::string& where : planted)
    EXPECT_NE(std::find(plain_hits.begin(), plain_hits.end(), where), plain_hits.end()) << where;
  // ... and nowhere with it.
  auto hits = entries_naming_host(redacted);
  EXPECT_TRUE(hits.empty()) << "the host name survives in: " << testing::PrintToString(hits);
  // The config stays in the snapshot, so what the analysis reads from it stays known.
  EXPECT_TRUE(archive_texts(redacted).count(config_rel)) << config_rel;

  // Same answers: the IOMMU mode (mem_encrypt=on made it translated), every pair's decision.
  json a = analysis(plain), b = analysis(redacted);
  EXPECT_EQ(a["topology"]["platform"]["iommu_mode"], "translated");
  // NVIDIA's third-party gate read its override (command line or driver parameters) in both.
  EXPECT_NE(a["policy"].dump().find("\"vendor.nvidia_grdma_override\":1"), std::string::npos);
  EXPECT_EQ(a["topology"]["platform"]["iommu_mode_source"], b["topology"]["platform"]["iommu_mode_source"]);
  EXPECT_FALSE(a["policy"].is_discarded());
  EXPECT_TRUE(a == b) << json::diff(a, b).dump(1);
  std::error_code ec;
  fs::remove(plain, ec);
  fs::remove(redacted, ec);
}

TEST(Redact, NoHostNameInAnySnapshotByteWithBootConfig) { check_redaction("boot/config-6.8.0-lab"); }

TEST(Redact, NoHostNameInAnySnapshotByteWithProcConfigGz) { check_redaction("proc/config.gz"); }

// Each command line parameter the analysis reads (platform.cpp, p2pdma.cpp) reads the same in the
// redacted command line: dropping one would change a decision.
TEST(Redact, KeepsEveryCommandLineParameterTheAnalysisReads) {
  const std::string cmdline =
      "BOOT_IMAGE=/vmlinuz root=/dev/sda1 iommu=pt,nopt intel_iommu=on,sm_on amd_iommu=off iommu.passthrough=1 "
      "mem_encrypt=on nvidia.NVreg_GrdmaPciTopoCheckOverride=2 pcie_acs_override=downstream,multifunction "
      "pci=noats,disable_acs_redir=0000:00:01.0;0000:00:02.0,config_acs=xx0000@0000:00:03.0 quiet";
  const std::string redacted = redact_cmdline(cmdline);
  for (const char* name : {"iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "mem_encrypt",
                           "nvidia.NVreg_GrdmaPciTopoCheckOverride", "pcie_acs_override", "pci"}) {
    EXPECT_TRUE(cmdline_param(cmdline, name)) << name;
    EXPECT_EQ(cmdline_param(redacted, name), cmdline_param(cmdline, name)) << name;
  }
  for (const char* key : {"disable_acs_redir", "config_acs"})
    EXPECT_EQ(cmdline_pci_option(redacted, key), cmdline_pci_option(cmdline, key)) << key;
  EXPECT_FALSE(cmdline_param(redacted, "root"));
  EXPECT_FALSE(cmdline_param(redacted, "BOOT_IMAGE"));
}

// docs/security.md: a word written with a double quote goes whole, and so does everything after a
// bare "--" (init's arguments, which may name anything), the words being the kernel's own.
TEST(Redact, CommandLineDropsQuotedWordsAndInitsArguments) {
  EXPECT_EQ(redact_cmdline("iommu=pt \"pci=noaer " + kHost + "\" -- pci=noaer " + kHost + "\n"), "iommu=pt\n");
  EXPECT_EQ(redact_cmdline("iommu=pt pci=\"noaer\" dyndbg=\"x pci=noaer\" intel-iommu=on\n"), "iommu=pt intel-iommu=on\n");
  EXPECT_EQ(redact_cmdline("pci=noaer \"--\" iommu=pt " + kHost), "pci=noaer\n");  // a quoted "--" ends them too
  EXPECT_EQ(redact_cmdline("pci=noaer --=x iommu=pt"), "pci=noaer iommu=pt\n");   // "--=x" is a parameter
  EXPECT_EQ(redact_cmdline("root=/dev/sda\xa0pci=noaer"), "pci=noaer\n");          // the kernel's 0xa0 blank
  EXPECT_EQ(redact_cmdline(std::string("pci=noaer\0iommu=pt", 18)), "pci=noaer\n");  // its string ends at a NUL
}

// The builder group of proc/version whatever KBUILD_BUILD_HOST holds.
TEST(Redact, KernelVersionBuilderGoesWhole) {
  for (const std::string& builder : {"kbuild@" + kHost, "kbuild@" + kHost + " (lab rack 3)", "@" + kHost, kHost + "@",
                                     "kbuild@" + kHost + ") (x"})
    EXPECT_EQ(redact_kernel_version("Linux version 6.8.0 (" + builder + ") (gcc (GCC) 13.2.0) #1 SMP @0\n").find(kHost),
              std::string::npos)
        << builder;
  EXPECT_EQ(redact_kernel_version("Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) "
                                  "12.2.0) #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)\n"),
            "Linux version 6.1.0-18-amd64 (redacted@redacted) (gcc-12 (Debian 12.2.0-14) 12.2.0) #1 SMP PREEMPT_DYNAMIC "
            "Debian 6.1.76-1 (2024-02-01)\n");
}

}  // namespace
}  // namespace p2paudit
