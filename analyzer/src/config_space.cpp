// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/config_space.h"

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <bitset>
#include <endian.h>
#include <atomic>
#include <cerrno>
#include <csetjmp>
#include <cstring>
#include <sstream>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <tuple>
#include <mutex>

#include <fmt/format.h>

extern "C" {
#include <pci/pci.h>
}

#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"

namespace p2paudit {

namespace {

// libpci reports fatal errors through a callback that must not return; we jump back to the
// guarded call instead of letting it exit() the process.
thread_local std::jmp_buf* g_error_jump = nullptr;
thread_local char g_error_message[512];

__attribute__((noreturn)) void on_pci_error(char* msg, ...) {  // the attribute libpci's callback type carries
  va_list args;
  va_start(args, msg);
  std::vsnprintf(g_error_message, sizeof g_error_message, msg, args);
  va_end(args);
  std::longjmp(*g_error_jump, 1);
}

void on_pci_warning(char*, ...) {}
void on_pci_debug(char*, ...) {}

// Runs one libpci call; false (with g_error_message set) when libpci reported an error.
// The callable must hold no C++ objects with destructors: longjmp skips them.
template <typename Call>
bool guarded(Call call) {
  std::jmp_buf env;
  std::jmp_buf* previous = g_error_jump;
  g_error_jump = &env;
  if (setjmp(env) != 0) {
    g_error_jump = previous;
    return false;
  }
  call();
  g_error_jump = previous;
  return true;
}

class PciAccess {
 public:
  PciAccess() : a_(pci_alloc()) {
    // No ~/.cache/pci-ids: a file outside the sysroot, and libpci's getpwuid() for it is not
    // thread-safe (aggregate reads snapshots on several threads).
    a_->id_lookup_mode &= ~PCI_LOOKUP_CACHE;
    a_->error = on_pci_error;
    a_->warning = on_pci_warning;
    a_->debug = on_pci_debug;
  }
  ~PciAccess() { pci_cleanup(a_); }
  PciAccess(const PciAccess&) = delete;
  PciAccess& operator=(const PciAccess&) = delete;
  struct pci_access* get() { return a_; }

 private:
  struct pci_access* a_;
};

uint32_t read_long(const void* ctx, int pos) {
  return pci_read_long(static_cast<struct pci_dev*>(const_cast<void*>(ctx)), pos);
}

// How many bytes of a function libpci's dump method holds, up to the last whole region: it
// answers a read only within what the dump gave, so each region is asked for whole.
size_t bytes_held_by_dump(struct pci_dev* d) {
  std::array<uint8_t, 4096> bytes;
  size_t held = 0;
  for (size_t end : {64, 256, 4096}) {
    if (!pci_read_block(d, static_cast<int>(held), bytes.data() + held, static_cast<int>(end - held))) break;
    held = end;
  }
  return held;
}

std::atomic<std::uint64_t> g_name_list_loads{0};

// The names of pci.ids, parsed once per process: one libpci context used for names only, shared
// by every read (each sysroot, dump and aggregate worker), instead of each decoding context
// parsing the 1.3 MB file again. libpci's lookups are not thread-safe (the first one parses), so
// they are made one at a time.
class PciNames {
 public:
  static PciNames& shared() {
    // Never destroyed: a thread still decoding while the process exits finds it intact.
    static PciNames* names = new PciNames;
    return *names;
  }

  std::string lookup(int flags, unsigned arg1, unsigned arg2) {
    std::lock_guard lock(mutex_);
    if (!failed_.empty()) throw InputError(failed_);
    // A machine has few distinct IDs (4,096 functions: about 30); libpci's lookup (a guarded call,
    // its hash, the name copied out) cost 1.8 k instructions each.
    auto [known, added] = answers_.try_emplace({flags, arg1, arg2});
    if (!added) return known->second;
    try {
      known->second = lookup_in_libpci(flags, arg1, arg2);
    } catch (...) {
      answers_.erase(known);
      throw;
    }
    return known->second;
  }

 private:
  std::string lookup_in_libpci(int flags, unsigned arg1, unsigned arg2) {
    struct pci_access* a = access_.get();
    const bool loaded_before = a->id_hash || a->id_load_failed;
    char buf[256];
    const char* name = nullptr;
    // libpci reports only running out of memory here (while parsing); the names it had parsed by
    // then are not all the names, so no later lookup answers from them either.
    bool ok = guarded([&] { name = pci_lookup_name(a, buf, sizeof buf, flags, arg1, arg2); });
    if (!loaded_before && (a->id_hash || a->id_load_failed)) ++g_name_list_loads;
    if (!ok) {
      failed_ = fmt::format("libpci: reading the PCI ID names: {}", g_error_message);
      throw InputError(failed_);
    }
    return name ? name : "";
  }

  PciNames() = default;
  std::mutex mutex_;
  PciAccess access_;
  std::string failed_;
  std::map<std::tuple<int, unsigned, unsigned>, std::string> answers_;
};

// A name from pci.ids, "" when it has none. Never asked of a decoding context: each would parse
// pci.ids again; the shared names parse it once, at the first name any text needs.
std::string lookup(int flags, unsigned arg1, unsigned arg2 = 0) {
  return PciNames::shared().lookup(flags | PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB, arg1, arg2);
}

std::string link_speed_name(unsigned code) {
  static const char* kSpeeds[] = {"", "2.5 GT/s PCIe", "5.0 GT/s PCIe", "8.0 GT/s PCIe", "16.0 GT/s PCIe",
                                  "32.0 GT/s PCIe", "64.0 GT/s PCIe"};
  return code < std::size(kSpeeds) ? kSpeeds[code] : fmt::format("Unknown speed ({:#x})", code);
}

void decode_bars(struct pci_dev* d, Function& f) {
  bool have_flags = d->known_fields & PCI_FILL_IO_FLAGS;
  int count = f.header_type == 0 ? 6 : f.header_type == 1 ? 2 : 0;
  for (int i = 0; i < count; ++i) {
    pciaddr_t raw = d->base_addr[i];
    if (!raw && !d->size[i]) continue;
    Bar bar;
    bar.index = i;
    bar.size = d->size[i];
    if (have_flags && d->flags[i]) {
      bar.io = d->flags[i] & PCI_IORESOURCE_IO;
      bar.prefetchable = d->flags[i] & PCI_IORESOURCE_PREFETCH;
      bar.is_64bit = d->flags[i] & PCI_IORESOURCE_MEM_64;
    } else {
      bar.io = raw & PCI_BASE_ADDRESS_SPACE_IO;
      bar.prefetchable = !bar.io && (raw & PCI_BASE_ADDRESS_MEM_PREFETCH);
      bar.is_64bit = !bar.io && (raw & PCI_BASE_ADDRESS_MEM_TYPE_MASK) == PCI_BASE_ADDRESS_MEM_TYPE_64;
    }
    bar.start = raw & (bar.io ? PCI_ADDR_IO_MASK : PCI_ADDR_MEM_MASK);
    f.bars.push_back(bar);
    if (bar.is_64bit && !have_flags) ++i;  // the upper half of a 64-bit BAR is the next register
  }
}

// Bridge windows from the type 1 header; libpci decodes BARs but not these registers.
void decode_bridge_windows(struct pci_dev* d, Function& f) {
  if (f.header_type != 1 || f.config_readable < 64) return;
  f.secondary_bus = pci_read_byte(d, PCI_SECONDARY_BUS);
  f.subordinate_bus = pci_read_byte(d, PCI_SUBORDINATE_BUS);

  BridgeWindow io{"io"};
  uint8_t io_base = pci_read_byte(d, PCI_IO_BASE), io_limit = pci_read_byte(d, PCI_IO_LIMIT);
  io.base = uint64_t(io_base & PCI_IO_RANGE_MASK) << 8;
  io.limit = (uint64_t(io_limit & PCI_IO_RANGE_MASK) << 8) | 0xfff;
  if ((io_base & PCI_IO_RANGE_TYPE_MASK) == PCI_IO_RANGE_TYPE_32) {
    io.base |= uint64_t{pci_read_word(d, PCI_IO_BASE_UPPER16)} << 16;
    io.limit |= uint64_t{pci_read_word(d, PCI_IO_LIMIT_UPPER16)} << 16;
  }
  io.enabled = io.base <= io.limit;
  f.windows.push_back(io);

  BridgeWindow mem{"mem"};
  mem.base = uint64_t(pci_read_word(d, PCI_MEMORY_BASE) & PCI_MEMORY_RANGE_MASK) << 16;
  mem.limit = (uint64_t(pci_read_word(d, PCI_MEMORY_LIMIT) & PCI_MEMORY_RANGE_MASK) << 16) | 0xfffff;
  mem.enabled = mem.base <= mem.limit;
  f.windows.push_back(mem);

  BridgeWindow pref{"prefetch"};
  uint16_t pbase = pci_read_word(d, PCI_PREF_MEMORY_BASE), plimit = pci_read_word(d, PCI_PREF_MEMORY_LIMIT);
  pref.base = uint64_t(pbase & PCI_PREF_RANGE_MASK) << 16;
  pref.limit = (uint64_t(plimit & PCI_PREF_RANGE_MASK) << 16) | 0xfffff;
  pref.is_64bit = (pbase & PCI_PREF_RANGE_TYPE_MASK) == PCI_PREF_RANGE_TYPE_64;
  if (pref.is_64bit) {
    pref.base |= uint64_t{pci_read_long(d, PCI_PREF_BASE_UPPER32)} << 32;
    pref.limit |= uint64_t{pci_read_long(d, PCI_PREF_LIMIT_UPPER32)} << 32;
  }
  pref.enabled = pref.base <= pref.limit;
  f.windows.push_back(pref);
}

void decode_pcie(struct pci_dev* d, Function& f) {
  bool trad_caps_readable = f.config_readable >= 256;
  if (struct pci_cap* pcix = pci_find_cap(d, PCI_CAP_ID_PCIX, PCI_CAP_NORMAL))
    f.pcix_mode2 = pci_read_long(d, pcix->addr + PCI_PCIX_STATUS) & (PCI_PCIX_STATUS_266MHZ | PCI_PCIX_STATUS_533MHZ);
  struct pci_cap* exp = pci_find_cap(d, PCI_CAP_ID_EXP, PCI_CAP_NORMAL);
  if (!exp) {
    bool has_cap_list = pci_read_word(d, PCI_STATUS) & PCI_STATUS_CAP_LIST;
    f.is_pcie = false;
    f.pcie_type = (trad_caps_readable || !has_cap_list) ? PcieType::kNotPcie : PcieType::kUnknown;
    return;
  }
  f.is_pcie = true;
  unsigned type = (pci_read_word(d, exp->addr + PCI_EXP_FLAGS) & PCI_EXP_FLAGS_TYPE) >> 4;
  switch (type) {
    case 0x0: case 0x1: case 0x4: case 0x5: case 0x6: case 0x7: case 0x8: case 0x9: case 0xa:
      f.pcie_type = static_cast<PcieType>(type);
      break;
    default:
      f.pcie_type = PcieType::kOther;
  }
  uint32_t lnkcap = pci_read_long(d, exp->addr + PCI_EXP_LNKCAP);
  uint16_t lnksta = pci_read_word(d, exp->addr + PCI_EXP_LNKSTA);
  if (f.link.max_speed.empty()) f.link.max_speed = link_speed_name(lnkcap & 0xf);
  if (!f.link.max_width) f.link.max_width = static_cast<int>((lnkcap >> 4) & 0x3f);
  if (f.link.current_speed.empty()) f.link.current_speed = link_speed_name(lnksta & 0xf);
  if (!f.link.current_width) f.link.current_width = (lnksta >> 4) & 0x3f;
}

void decode_ext_caps(struct pci_dev* d, Function& f, std::vector<Finding>& findings, const std::string& where) {
  // Extended capabilities live above 256 bytes: absent on conventional functions, unknown when
  // the read stopped short of them.
  bool no_ext_space = f.config_size != 0 && f.config_size <= 256;
  bool readable = f.config_readable >= 4096;
  CapState none = no_ext_space ? CapState::kAbsent : CapState::kUnknown;
  f.ari = f.rebar_state = f.acs.state = none;
  if (no_ext_space || !readable) return;

  int acs = pci_find_ext_capability(d, read_long, f.config_readable, PCI_EXT_CAP_ID_ACS);
  struct pci_cap* libpci_acs = pci_find_cap(d, PCI_EXT_CAP_ID_ACS, PCI_CAP_EXTENDED);
  if ((libpci_acs ? static_cast<int>(libpci_acs->addr) : 0) != acs)
    findings.push_back({where, fmt::format("extended capability list is malformed: the kernel's walk finds ACS at "
                                           "{:#x}, libpci's at {:#x}; the kernel's offset is used",
                                           acs, libpci_acs ? libpci_acs->addr : 0)});
  f.acs.state = acs ? CapState::kPresent : CapState::kAbsent;
  if (acs) {
    f.acs.offset = static_cast<uint16_t>(acs);
    f.acs.cap = pci_read_word(d, acs + PCI_ACS_CAP);
    f.acs.ctrl = pci_read_word(d, acs + PCI_ACS_CTRL);
    // The vector follows the control word; a capability at the very end of the space has none to read.
    if ((f.acs.cap & PCI_ACS_CAP_EGRESS) && acs + PCI_ACS_EGRESS_CTRL + 4 <= static_cast<int>(f.config_readable))
      f.acs.egress_first_word = pci_read_long(d, acs + PCI_ACS_EGRESS_CTRL);
  }
  f.ari = pci_find_cap(d, PCI_EXT_CAP_ID_ARI, PCI_CAP_EXTENDED) ? CapState::kPresent : CapState::kAbsent;
  if (struct pci_cap* sriov = pci_find_cap(d, PCI_EXT_CAP_ID_SRIOV, PCI_CAP_EXTENDED)) {
    f.sriov = Sriov{pci_read_word(d, sriov->addr + 0x0e), pci_read_word(d, sriov->addr + 0x10),
                    pci_read_word(d, sriov->addr + 0x1a)};
  }
  if (struct pci_cap* dsn = pci_find_cap(d, PCI_EXT_CAP_ID_DSN, PCI_CAP_EXTENDED))
    f.serial_number = (uint64_t{pci_read_long(d, dsn->addr + 8)} << 32) | pci_read_long(d, dsn->addr + 4);
  if (struct pci_cap* rebar = pci_find_cap(d, PCI_EXT_CAP_ID_REBAR, PCI_CAP_EXTENDED)) {
    f.rebar_state = CapState::kPresent;
    unsigned count = (pci_read_long(d, rebar->addr + 8) >> 5) & 0x7;
    for (unsigned i = 0; i < count && i < 6; ++i) {
      uint32_t cap = pci_read_long(d, rebar->addr + 4 + 8 * static_cast<int>(i));
      uint32_t ctrl = pci_read_long(d, rebar->addr + 8 + 8 * static_cast<int>(i));
      ResizableBar r;
      r.bar = static_cast<int>(ctrl & 0x7);
      // BAR Size encodes 2^(n+20) bytes; the spec defines n up to 43 (8 EB). Larger is garbage.
      unsigned encoded = (ctrl >> 8) & 0x3f;
      if (encoded > 43) {
        findings.push_back({where, fmt::format("Resizable BAR {} has size field {} (beyond the 8 EB the spec defines); "
                                               "its size is unknown", r.bar, encoded)});
        continue;
      }
      r.current_size = uint64_t{1} << (encoded + 20);
      for (int bit = 4; bit < 32; ++bit)
        if (cap & (1u << bit)) r.supported_sizes.push_back(uint64_t{1} << (bit - 4 + 20));
      f.rebar.push_back(r);
    }
  } else {
    f.rebar_state = CapState::kAbsent;
  }
}

// Where a function's bytes come from (for messages) and the config size the kernel exposes (0: unknown).
struct Source {
  std::string where;
  size_t config_size = 0;
  size_t readable = 0;  // whole_config_regions() of the bytes held
};
using Describe = std::function<Source(struct pci_dev*)>;

// NVIDIA's peer-clique capability (nvpcie.h, NV_PCI_VIRTUAL_P2P_APPROVAL_SIGNATURE): a vendor
// capability anywhere in the list, dword0[31:24] = 0x50, dword1[15:0] = 0x5032 ("P2P"),
// dword1[18:16] version 0, dword1[22:19] the clique ID.
void decode_nvidia_clique(struct pci_dev* d, Function& f) {
  if (f.vendor != 0x10de || f.bdf.fn != 0) {
    f.nvidia_clique_state = CapState::kAbsent;
    return;
  }
  if (f.config_readable < 256) return;  // the capability list lies beyond what could be read
  f.nvidia_clique_state = CapState::kAbsent;
  unsigned count = 0;
  for (struct pci_cap* cap = pci_find_cap_nr(d, PCI_CAP_ID_VNDR, PCI_CAP_NORMAL, &count); cap;) {
    uint32_t dword0 = pci_read_long(d, cap->addr), dword1 = pci_read_long(d, cap->addr + 4);
    if ((dword0 >> 24) == 0x50 && (dword1 & 0xffff) == 0x5032 && ((dword1 >> 16) & 0x7) == 0) {
      f.nvidia_clique_state = CapState::kPresent;
      f.nvidia_clique = static_cast<uint8_t>((dword1 >> 19) & 0xf);
      return;
    }
    cap = cap->next;
    while (cap && !(cap->type == PCI_CAP_NORMAL && cap->id == PCI_CAP_ID_VNDR)) cap = cap->next;
  }
}

// Without the names: fill_pci_names() gives them from the IDs once they are final (a VF's from sysfs).
Function decode_function(struct pci_dev* d, std::vector<Finding>& findings, const Source& source) {
  const std::string& where = source.where;
  Function f;
  f.config_size = source.config_size;
  f.bdf = Bdf{static_cast<uint32_t>(d->domain), d->bus, d->dev, d->func};
  f.vendor = d->vendor_id;
  f.device = d->device_id;
  f.class_code = (uint32_t{d->device_class} << 8) | d->prog_if;
  f.revision = d->rev_id;
  f.subsystem_vendor = d->subsys_vendor_id;
  f.subsystem_device = d->subsys_id;
  f.config_readable = source.readable;
  uint8_t htype = pci_read_byte(d, PCI_HEADER_TYPE);
  f.header_type = htype & 0x7f;
  f.multifunction = htype & 0x80;
  decode_bars(d, f);
  decode_bridge_windows(d, f);
  decode_pcie(d, f);
  decode_ext_caps(d, f, findings, where);
  decode_nvidia_clique(d, f);
  return f;
}

constexpr unsigned kFillFlags = PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_CLASS_EXT | PCI_FILL_SUBSYS |
                                PCI_FILL_BASES | PCI_FILL_SIZES | PCI_FILL_IO_FLAGS | PCI_FILL_CAPS |
                                PCI_FILL_EXT_CAPS | PCI_FILL_NUMA_NODE;

std::vector<Function> scan(PciAccess& access, const std::string& origin, const Describe& describe,
                           std::vector<Finding>& findings) {
  struct pci_access* a = access.get();
  if (!guarded([&] { pci_init(a); }) || !guarded([&] { pci_scan_bus(a); }))
    throw InputError(fmt::format("{}: {}", origin, g_error_message));
  std::vector<Function> out;
  for (struct pci_dev* d = a->devices; d; d = d->next) {
    if (!guarded([&] { pci_fill_info(d, kFillFlags); }))
      throw InputError(fmt::format("{}: {:04x}:{:02x}:{:02x}.{:x}: {}", origin, d->domain, d->bus, d->dev, d->func,
                                   g_error_message));
    out.push_back(decode_function(d, findings, describe(d)));
    fill_pci_names(out.back());
  }
  std::sort(out.begin(), out.end(), [](const Function& x, const Function& y) { return x.bdf < y.bdf; });
  return out;
}

}  // namespace

int pci_find_ext_capability(const void* ctx, ConfigReader read32, size_t cfg_size, int cap) {
  constexpr int kCfgSpaceSize = 256, kCfgSpaceExpSize = 4096;
  int ttl = (kCfgSpaceExpSize - kCfgSpaceSize) / 8;  // minimum 8 bytes per capability
  if (cfg_size <= kCfgSpaceSize) return 0;
  int pos = kCfgSpaceSize;
  uint32_t header = read32(ctx, pos);
  if (header == 0) return 0;  // no capabilities: ID, version and next are all zero
  while (ttl-- > 0) {
    if (static_cast<int>(header & 0xffff) == cap) return pos;
    pos = static_cast<int>((header >> 20) & 0xffc);
    if (pos < kCfgSpaceSize) break;
    header = read32(ctx, pos);
  }
  return 0;
}

namespace {

// The kernel's sysfs `resource` file: one "start end flags" line per BAR (then ROM and bridge
// windows), as libpci's sysfs method reads it.
struct ResourceLines {
  static constexpr size_t kMax = 17;  // 6 BARs, the ROM, the SR-IOV BARs and the bridge windows
  std::array<std::array<uint64_t, 3>, kMax> line{};
  size_t count = 0;
};

// C-locale white space, as an istream splits words; and each byte's hex digit value (-1: none).
constexpr bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }
constexpr std::array<int8_t, 256> kHexDigit = [] {
  std::array<int8_t, 256> t{};
  t.fill(-1);
  for (int c = 0; c < 10; ++c) t['0' + c] = static_cast<int8_t>(c);
  for (int c = 0; c < 6; ++c) t['a' + c] = t['A' + c] = static_cast<int8_t>(10 + c);
  return t;
}();

// False when malformed: a line of other than three "0x" words of 1 to 16 hex digits. By hand, as
// an istream would split it (lines at '\n', words at white space), into a fixed array: the file is
// read for every function, and an istringstream per line, then a vector and a table-less digit
// test, cost more than the rest of the function's reading.
bool parse_resource_file(std::string_view text, ResourceLines& out) {
  const char* at = text.data();
  const char* const end = at + text.size();
  out.count = 0;
  while (at < end && out.count < ResourceLines::kMax) {
    const char* eol = static_cast<const char*>(std::memchr(at, '\n', static_cast<size_t>(end - at)));
    if (!eol) eol = end;
    for (uint64_t& x : out.line[out.count]) {
      while (at < eol && is_space(*at)) ++at;
      if (eol - at < 3 || at[0] != '0' || at[1] != 'x') return false;
      at += 2;
      const char* digits = at;
      x = 0;
      for (int8_t d; at < eol && (d = kHexDigit[static_cast<unsigned char>(*at)]) >= 0; ++at) x = x << 4 | static_cast<uint64_t>(d);
      if (at == digits || at - digits > 16 || (at < eol && !is_space(*at))) return false;
    }
    while (at < eol && is_space(*at)) ++at;
    if (at != eol) return false;
    ++out.count;
    if (eol == end) break;
    at = eol + 1;
  }
  return true;
}

// Addresses, sizes and flags as the kernel assigned them, into libpci's fields exactly as its
// sysfs method would put them; without the file, the BAR registers in config space are used.
bool fill_bars_from_resource(const Sysroot& root, const std::string& dir, struct pci_dev* d,
                             std::vector<Finding>& findings) {
  auto text = root.read_text(dir + "/resource");
  if (!text) return false;
  ResourceLines lines;
  if (!parse_resource_file(*text, lines)) {
    findings.push_back({dir + "/resource", "malformed (expected \"0x... 0x... 0x...\" per line); BAR sizes unknown"});
    return false;
  }
  for (size_t i = 0; i < lines.count && i < 6; ++i) {
    auto [start, end, flags] = lines.line[i];
    d->flags[i] = flags;
    d->base_addr[i] = start | (flags & PCI_ADDR_FLAG_MASK);
    d->size[i] = end > start ? end - start + 1 : 0;
  }
  d->known_fields |= PCI_FILL_BASES | PCI_FILL_SIZES | PCI_FILL_IO_FLAGS;
  return true;
}

// sysfs "0x10de"-style ID attributes (`vendor`, `device`, `class`). For a PF or an ordinary
// function they are cross-checked against config space, never trusted blindly: config space stays
// the answer. An SR-IOV VF is different: the spec makes its Vendor and Device ID registers read
// all ones, and the kernel fills them in from the PF (drivers/pci/iov.c, pci_iov_add_virtfn()),
// so for a VF the sysfs file is the truth and all ones in config space is no mismatch. A
// malformed file is a finding naming it; the value is then left as config space gave it.
void check_id(const Sysroot& root, const std::string& dir, const char* name, unsigned& value, int digits,
              bool virtfn, std::vector<Finding>& findings) {
  const std::string path = dir + "/" + name;
  const unsigned all_ones = (1u << (4 * digits)) - 1;
  const bool vf_blank = virtfn && value == all_ones;  // what a VF's config space legitimately shows
  auto text = root.read_line(path);
  if (!text) {
    if (vf_blank) findings.push_back({path, fmt::format("missing: a VF's config space reads {:#0{}x}, so its ID is unknown",
                                                        value, digits + 2)});
    return;
  }
  const std::string& t = *text;
  bool well_formed = t.size() == size_t(digits) + 2 && t.compare(0, 2, "0x") == 0 &&
                     t.find_first_not_of("0123456789abcdef", 2) == std::string::npos;
  if (!well_formed) {
    findings.push_back({path, fmt::format("malformed ('{}'); config space gives {:#0{}x}", escape_text(t), value, digits + 2)});
    return;
  }
  unsigned sysfs = static_cast<unsigned>(std::stoul(t.substr(2), nullptr, 16));  // at most 6 hex digits: fits
  if (sysfs != value && !vf_blank)
    findings.push_back({path, fmt::format("says {} but config space gives {:#0{}x}", t, value, digits + 2)});
  if (virtfn) value = sysfs;
}

// One function decoded by libpci from bytes we hold (its config cache on a dump-method device).
template <typename FillBars>
Function decode_cached(struct pci_access* a, const Bdf& bdf, std::vector<uint8_t>& bytes, const Source& source,
                       std::vector<Finding>& findings, FillBars fill_bars) {
  struct pci_dev* d = pci_get_dev(a, static_cast<int>(bdf.domain), bdf.bus, bdf.dev, bdf.fn);
  pci_setup_cache(d, bytes.data(), static_cast<int>(source.readable));
  unsigned fill = PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_CLASS_EXT | PCI_FILL_SUBSYS | PCI_FILL_CAPS | PCI_FILL_EXT_CAPS;
  bool ok = guarded([&] { pci_fill_info(d, static_cast<int>(fill)); });
  if (ok && !fill_bars(d)) ok = guarded([&] { pci_fill_info(d, PCI_FILL_BASES); });
  if (!ok) {
    pci_free_dev(d);
    throw InputError(fmt::format("{}: {}", source.where, g_error_message));
  }
  Function f = decode_function(d, findings, source);
  pci_free_dev(d);
  return f;
}

// libpci opens its dump by name: it gets a private in-memory copy (a memfd), so neither a FIFO, a
// device nor a file swapped in meanwhile can reach it; and no device node is opened either.
class PrivateCopy {
 public:
  PrivateCopy(const std::string& origin, std::string_view bytes) : fd_(::memfd_create("p2paudit-dump", MFD_CLOEXEC)) {
    if (fd_ < 0) throw InputError(fmt::format("{}: cannot hold a private copy: {}", origin, std::strerror(errno)));
    for (size_t done = 0; done < bytes.size();) {
      ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n <= 0) {
        ::close(fd_);
        throw InputError(fmt::format("{}: cannot hold a private copy: {}", origin, std::strerror(errno)));
      }
      done += static_cast<size_t>(n);
    }
    name_ = fmt::format("/proc/self/fd/{}", fd_);
  }
  ~PrivateCopy() { ::close(fd_); }
  PrivateCopy(const PrivateCopy&) = delete;
  PrivateCopy& operator=(const PrivateCopy&) = delete;
  std::string& name() { return name_; }

 private:
  int fd_;
  std::string name_;
};

// libpci set up to decode bytes we hand it: the dump method's fill_info decodes from config space
// alone; its dump is empty.
void init_for_cached_bytes(PciAccess& access, PrivateCopy& empty_dump, const std::string& origin) {
  struct pci_access* a = access.get();
  a->method = PCI_ACCESS_DUMP;
  pci_set_param(a, const_cast<char*>("dump.name"), empty_dump.name().data());
  if (!guarded([&] { pci_init(a); })) throw InputError(fmt::format("{}: libpci: {}", origin, g_error_message));
}

}  // namespace

std::uint64_t pci_name_list_loads() { return g_name_list_loads.load(); }

std::string pci_ids_device_name(uint16_t vendor, uint16_t device) { return lookup(PCI_LOOKUP_DEVICE, vendor, device); }

void fill_pci_names(Function& f) {
  f.vendor_name = lookup(PCI_LOOKUP_VENDOR, f.vendor);
  f.device_name = pci_ids_device_name(f.vendor, f.device);
  f.class_name = lookup(PCI_LOOKUP_CLASS, f.class_code >> 8);
}

std::vector<uint8_t> read_config_pieces(const Sysroot::PieceRead& read) {
  constexpr size_t kConventional = 256, kExtended = 4096;
  std::vector<uint8_t> bytes(kExtended, 0);
  const size_t head = read(0, bytes.data(), kConventional);
  // The last dword tells whether the whole extended space can be read (a conventional function's
  // file, an unprivileged read, end before it).
  if (head < kConventional || read(kExtended - 4, bytes.data() + kExtended - 4, 4) < 4) {
    bytes.resize(head);
    return bytes;
  }
  const auto dword = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    return le32toh(v);
  };
  // The bytes decode_ext_caps() reads after each capability's header.
  const auto body_size = [](unsigned id) -> size_t {
    switch (id) {
      case PCI_EXT_CAP_ID_ACS: return PCI_ACS_EGRESS_CTRL + 4;
      case PCI_EXT_CAP_ID_SRIOV: return 0x40;
      case PCI_EXT_CAP_ID_DSN: return 12;
      case PCI_EXT_CAP_ID_REBAR: return 8 + 8 * 6;
      default: return 4;
    }
  };
  // The list as libpci walks it (a next pointer below 256 is followed into conventional space;
  // the walk ends at a place seen before), which holds the kernel's walk (it stops below 256).
  std::bitset<kExtended / 4> seen;
  for (size_t where = kConventional;;) {
    if (seen[where / 4]) break;
    seen[where / 4] = true;
    if (where >= kConventional && read(where, bytes.data() + where, 4) < 4) {
      bytes.resize(kConventional);  // the read stopped inside extended space: it is unknown
      return bytes;
    }
    const uint32_t header = dword(where);
    if (where >= kConventional) {
      const size_t end = std::min(kExtended, where + body_size(header & 0xffff));
      if (end > where + 4 && read(where + 4, bytes.data() + where + 4, end - where - 4) < end - where - 4) {
        bytes.resize(kConventional);
        return bytes;
      }
    }
    where = (header >> 20) & 0xffc;
    if (where == 0) break;
  }
  return bytes;
}

size_t whole_config_regions(size_t bytes) { return bytes >= 4096 ? 4096 : bytes >= 256 ? 256 : bytes >= 64 ? 64 : 0; }

Function decode_config_bytes(const Bdf& bdf, std::vector<uint8_t> bytes, std::vector<Finding>& findings) {
  size_t readable = whole_config_regions(bytes.size());
  if (readable < 64) throw InputError(fmt::format("{}: {} bytes of config space cannot identify a function", bdf.str(), bytes.size()));
  // One decoding context for all calls, set up once (names come from PciNames::shared()).
  static PrivateCopy empty("libpci", "");
  static PciAccess access;
  static bool ready = (init_for_cached_bytes(access, empty, "libpci"), true);
  (void)ready;
  Function f = decode_cached(access.get(), bdf, bytes, Source{bdf.str(), 0, readable}, findings,
                             [](struct pci_dev*) { return false; });
  fill_pci_names(f);
  return f;
}

std::vector<Function> read_config_space(const Sysroot& root, std::vector<Finding>& findings,
                                        const std::function<void(Function&, const std::optional<std::string>&)>& each) {
  // libpci decodes bytes we read through the sysroot (its config cache); it is never given a
  // path into a sysroot, so it cannot follow a stranger's link out of it.
  PrivateCopy empty(root.origin(), "");
  PciAccess access;
  init_for_cached_bytes(access, empty, root.origin());
  struct pci_access* a = access.get();

  std::vector<Function> out;
  for (const auto& name : root.list("sys/bus/pci/devices")) {
    std::string dir = "sys/bus/pci/devices/" + name;
    auto bdf = Bdf::parse(name);
    if (!bdf || bdf->str() != name) {
      findings.push_back({dir, "not a PCI address (DDDD:BB:DD.F); ignored"});
      continue;
    }
    // The live machine's config is read where the decoding looks (every dword a config cycle); a
    // capture's whole.
    std::optional<std::vector<uint8_t>> bytes;
    if (root.is_live()) {
      if (!root.read_pieces(dir + "/config", 4096, [&](const Sysroot::PieceRead& read) { bytes = read_config_pieces(read); }))
        bytes.reset();
    } else {
      bytes = root.read_bytes(dir + "/config", 4096);
    }
    size_t readable = bytes ? whole_config_regions(bytes->size()) : 0;
    if (readable < 64) {
      findings.push_back({dir + "/config", fmt::format("{}: the function cannot be identified and is left out",
                                                       bytes ? fmt::format("holds only {} bytes", bytes->size())
                                                             : std::string("missing or not a regular file"))});
      continue;
    }
    Source source{dir + "/config", 0, readable};
    // On the running machine sysfs sizes `config` as the kernel's cfg_size; a copy says nothing.
    if (root.is_live())
      if (auto size = root.file_size(dir + "/config"); size && (*size == 256 || *size == 4096)) source.config_size = *size;

    out.push_back(decode_cached(a, *bdf, *bytes, source, findings, [&](struct pci_dev* d) {
      return fill_bars_from_resource(root, dir, d, findings);
    }));
    Function& f = out.back();
    // The same test place_in_sysfs() uses for is_virtfn: the kernel links a VF, and only a VF, to its PF.
    const auto physfn = root.read_link(dir + "/physfn");
    const bool virtfn = physfn.has_value();
    unsigned vendor = f.vendor, device = f.device, class_code = f.class_code;
    check_id(root, dir, "vendor", vendor, 4, virtfn, findings);
    check_id(root, dir, "device", device, 4, virtfn, findings);
    check_id(root, dir, "class", class_code, 6, virtfn, findings);
    if (vendor != f.vendor || device != f.device || class_code != f.class_code) {  // a VF's IDs from sysfs
      f.vendor = static_cast<uint16_t>(vendor);
      f.device = static_cast<uint16_t>(device);
      f.class_code = class_code;
    }
    if (each) each(f, physfn);
  }
  return out;
}

// Mirrors pci_cfg_space_size() and pci_bridge_child_ext_cfg_accessible() in drivers/pci/probe.c:
// where the kernel would give a function 4096 bytes, a copy holding 256 is cut short, and the
// extended capabilities (ACS among them) are unknown rather than absent.
void settle_config_sizes(Topology& t) {
  std::vector<int> ext_reachable(t.functions.size(), -1);  // -1 unknown, 0 no, 1 yes: the secondary side
  auto reaches_ext = [&](size_t i) {
    // Walk up to the nearest bridge whose answer is known; bounded by the number of functions.
    std::optional<size_t> up = t.functions[i].parent;
    for (size_t steps = 0; up && steps < t.functions.size(); ++steps) {
      const Function& b = t.functions[*up];
      if (b.config_readable < 256) return -1;  // cannot tell what kind of bridge it is
      bool pcie_on_both_sides = b.pcie_type == PcieType::kRootPort || b.pcie_type == PcieType::kSwitchUpstream ||
                                b.pcie_type == PcieType::kSwitchDownstream;
      if (!pcie_on_both_sides && !b.pcix_mode2) return 0;
      up = b.parent;
    }
    return 1;  // a root bus: whether the host bridge offers ECAM is settled by the size seen
  };
  for (size_t i = 0; i < t.functions.size(); ++i) {
    Function& f = t.functions[i];
    size_t kernel_size;
    if (f.config_size) {
      kernel_size = f.config_size;  // the kernel said so (live sysfs, capture record)
    } else {
      if (f.config_readable < 256) continue;  // the header's capabilities were not seen
      int reach = reaches_ext(i);
      // The kernel also probes a conventional host bridge's extended space (class 0x0600); a copy
      // cannot tell what that probe found, and only pairs with the host bridge itself depend on
      // it, so a conventional function is taken at the 256 bytes its header defines.
      bool ext_capable = f.is_pcie || f.pcix_mode2;
      if (reach == 0 || (reach == 1 && !ext_capable)) kernel_size = 256;
      else if (f.config_readable >= 4096) kernel_size = 4096;
      else kernel_size = 0;  // 256 bytes of a function the kernel may well give 4096
      // Only a PCIe function's extended capabilities (a port's ACS) matter to the P2PDMA rules.
      if (kernel_size == 0 && reach != -1 && f.is_pcie)
        t.findings.push_back({f.sysfs_path + "/config",
                              "holds 256 bytes where the kernel gives a PCIe function 4096: cut short (or no ECAM); "
                              "ACS and the other extended capabilities are unknown"});
      f.config_size = kernel_size;
    }
    if (kernel_size && kernel_size <= 256) {
      f.acs = Acs{CapState::kAbsent};
      f.ari = f.rebar_state = CapState::kAbsent;
      f.rebar.clear();
    }
  }
}

std::vector<Function> read_config_dump(const std::string& dump_file, std::vector<Finding>& findings) {
  PrivateCopy copy(dump_file, read_input_file(dump_file, kMaxDumpFileBytes));
  PciAccess access;
  struct pci_access* a = access.get();
  a->method = PCI_ACCESS_DUMP;
  pci_set_param(a, const_cast<char*>("dump.name"), copy.name().data());
  return scan(access, dump_file, [&](struct pci_dev* d) { return Source{dump_file, 0, whole_config_regions(bytes_held_by_dump(d))}; },
              findings);
}

}  // namespace p2paudit
