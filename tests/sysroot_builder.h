// SPDX-License-Identifier: GPL-2.0-or-later
// Sysroots written to disk (and packed as tarballs) for tests that need files, not a Topology:
// config space bytes the way a PCIe device presents them, sysfs directories and links.
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "p2paudit/topology.h"

namespace p2paudit::test {

namespace fs = std::filesystem;

// 4096 bytes of config space: a type 0 or type 1 header, a PCIe capability, optionally ACS.
// The PCIe Device/Port Types ConfigBytes writes (PcieType's values, p2paudit/topology.h).
inline constexpr int kEndpoint = static_cast<int>(PcieType::kEndpoint), kRootPort = static_cast<int>(PcieType::kRootPort),
                     kSwitchUp = static_cast<int>(PcieType::kSwitchUpstream),
                     kSwitchDown = static_cast<int>(PcieType::kSwitchDownstream);

struct ConfigBytes {
  std::vector<uint8_t> b = std::vector<uint8_t>(4096, 0);
  void put16(size_t at, uint16_t v) { b[at] = v & 0xff, b[at + 1] = v >> 8; }
  void put32(size_t at, uint32_t v) { put16(at, v & 0xffff), put16(at + 2, v >> 16); }

  ConfigBytes(uint16_t vendor, uint16_t device, uint32_t class_code, int pcie_type, bool bridge = false,
              bool multifunction = false) {
    put16(0x00, vendor);
    put16(0x02, device);
    put16(0x06, 0x0010);  // status: capability list
    put32(0x08, class_code << 8);
    b[0x0e] = static_cast<uint8_t>((bridge ? 1 : 0) | (multifunction ? 0x80 : 0));
    b[0x34] = 0x40;
    b[0x40] = 0x10;  // PCI Express capability, the last in the list
    put16(0x42, static_cast<uint16_t>(0x2 | (pcie_type << 4)));
    put32(0x4c, 0x00000043);  // link capabilities: 8 GT/s x4
    put16(0x52, 0x0043);      // link status
  }
  ConfigBytes& buses(uint8_t primary, uint8_t secondary, uint8_t subordinate) {
    b[0x18] = primary, b[0x19] = secondary, b[0x1a] = subordinate;
    return *this;
  }
  // cap: SV TB RR CR UF unless given; with EC in it, bits 15:8 give the Egress Control Vector's
  // size and `egress` its first 32 bits (cap+8).
  ConfigBytes& acs(uint16_t ctrl, uint16_t cap = 0x001f, uint32_t egress = 0) {
    put32(0x100, 0x0001000d);  // ACS, version 1, last
    put16(0x104, cap);
    put16(0x106, ctrl);
    put32(0x108, egress);
    return *this;
  }
  ConfigBytes& rebar(uint32_t ctrl) {
    put32(0x100, 0x00010015);  // Resizable BAR, version 1, last
    put32(0x104, 0x000000f0);  // 1-8 MB supported
    put32(0x108, ctrl);
    return *this;
  }
  std::string bytes(size_t n = 4096) const { return std::string(b.begin(), b.begin() + static_cast<long>(n)); }
};

class SysrootDir {
 public:
  SysrootDir() {
    char templ[] = "/tmp/p2paudit-sysroot-test-XXXXXX";
    dir_ = mkdtemp(templ);
    write("proc/sys/kernel/osrelease", "6.8.0\n");
    write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
                          "address sizes\t: 48 bits physical, 48 bits virtual\n");
    write("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1\n");
    write("boot/config-6.8.0", "CONFIG_PCI_P2PDMA=y\n");
    fs::create_directories(dir_ / "sys/bus/pci/devices");
  }
  ~SysrootDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  SysrootDir(const SysrootDir&) = delete;
  SysrootDir& operator=(const SysrootDir&) = delete;

  const fs::path& dir() const { return dir_; }
  std::string str() const { return dir_.string(); }

  void write(const std::string& rel, const std::string& data) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel, std::ios::binary | std::ios::trunc) << data;
  }
  void link(const std::string& rel, const std::string& target) {
    fs::create_directories((dir_ / rel).parent_path());
    fs::remove(dir_ / rel);
    fs::create_symlink(target, dir_ / rel);
  }
  // A function at sysfs_dir ("pci0000:00/0000:00:01.0/0000:01:00.0") with its config bytes.
  void function(const std::string& sysfs_dir, const std::string& config) {
    std::string bdf = sysfs_dir.substr(sysfs_dir.rfind('/') + 1);
    write("sys/devices/" + sysfs_dir + "/config", config);
    link("sys/bus/pci/devices/" + bdf, "../../../devices/" + sysfs_dir);
  }

  // The whole tree as a .tar.gz (libarchive, so tests need no tar binary).
  void pack(const std::string& out) const {
    struct archive* a = archive_write_new();
    archive_write_add_filter_gzip(a);
    archive_write_set_format_pax_restricted(a);
    archive_write_open_filename(a, out.c_str());
    for (auto it = fs::recursive_directory_iterator(dir_); it != fs::recursive_directory_iterator(); ++it) {
      std::string name = it->path().lexically_relative(dir_).string();  // relative() would follow links
      struct archive_entry* e = archive_entry_new();
      archive_entry_set_pathname(e, name.c_str());
      std::string data;
      if (it->is_symlink()) {
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_symlink(e, fs::read_symlink(it->path()).c_str());
        archive_entry_set_perm(e, 0777);
      } else if (it->is_directory()) {
        archive_entry_set_filetype(e, AE_IFDIR);
        archive_entry_set_perm(e, 0755);
      } else {
        std::ifstream in(it->path(), std::ios::binary);
        data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
      }
      archive_write_header(a, e);
      if (!data.empty()) archive_write_data(a, data.data(), data.size());
      archive_entry_free(e);
    }
    archive_write_close(a);
    archive_write_free(a);
  }

 private:
  fs::path dir_;
};

// A display controller at sysfs_dir ("pci0000:00/0000:00:02.0") bound to `driver`, whose BAR 0 is
// the kernel's `resource` line for a 64-bit prefetchable window of bar0_size at bar0_start, plus a
// 2 MiB BAR 2 and a 512 KiB BAR 5 as amdgpu dGPUs have. Vendor files are written by the test.
inline void gpu_with_bar(SysrootDir& s, const std::string& sysfs_dir, uint16_t vendor, uint16_t device,
                         const std::string& driver, uint64_t bar0_start, uint64_t bar0_size) {
  s.function(sysfs_dir, ConfigBytes(vendor, device, 0x030000, 0).bytes());
  auto line = [](uint64_t start, uint64_t size, uint64_t flags) {
    char buf[64];
    uint64_t end = size ? start + size - 1 : 0;
    std::snprintf(buf, sizeof buf, "0x%016llx 0x%016llx 0x%016llx\n", static_cast<unsigned long long>(size ? start : 0),
                  static_cast<unsigned long long>(end), static_cast<unsigned long long>(size ? flags : 0));
    return std::string(buf);
  };
  const uint64_t pref64 = 0x14220c, mem32 = 0x40200;
  s.write("sys/devices/" + sysfs_dir + "/resource",
          line(bar0_start, bar0_size, pref64) + line(0, 0, 0) + line(0xfc000000, 2u << 20, pref64) + line(0, 0, 0) +
              line(0, 0, 0) + line(0xfd000000, 512u << 10, mem32) + line(0, 0, 0));
  s.link("sys/devices/" + sysfs_dir + "/driver", "../../../bus/pci/drivers/" + driver);
}

// One entry of a hand-made archive; type is AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR, AE_IFIFO...
struct TarEntry {
  std::string name;
  unsigned type = AE_IFREG;
  std::string data;         // regular files
  std::string link;         // symlink target
  std::string hardlink;     // hard link target (type ignored)
};

inline void write_tarball(const std::string& out, const std::vector<TarEntry>& entries) {
  struct archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  archive_write_open_filename(a, out.c_str());
  for (const auto& t : entries) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, t.name.c_str());
    archive_entry_set_filetype(e, t.type);
    archive_entry_set_perm(e, 0644);
    if (!t.link.empty()) archive_entry_set_symlink(e, t.link.c_str());
    if (!t.hardlink.empty()) archive_entry_set_hardlink(e, t.hardlink.c_str());
    if (t.type == AE_IFCHR) archive_entry_set_rdev(e, makedev(1, 5));
    archive_entry_set_size(e, static_cast<la_int64_t>(t.data.size()));
    archive_write_header(a, e);
    if (!t.data.empty()) archive_write_data(a, t.data.data(), t.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

}  // namespace p2paudit::test
