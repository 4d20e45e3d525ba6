// SPDX-License-Identifier: GPL-2.0-or-later
// The live machine's config space read where the decoding looks (read_config_pieces()) must give
// the function the whole file gives: on every function of the recorded machines, on hostile
// capability lists (loops, pointers into conventional space, all-ones headers, a list at the end
// of the space), on random lists, and on reads that stop short; and it must read far less.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "config_fields.h"
#include "p2paudit/config_space.h"
#include "p2paudit/errors.h"
#include "p2paudit/sysroot.h"
#include "temp_dir.h"

namespace p2paudit {
namespace {

// A reader over bytes held in memory that counts what it was asked for.
struct CountingReader {
  const std::vector<uint8_t>& bytes;
  size_t bytes_read = 0, reads = 0;
  std::optional<size_t> fail_from;  // reads at or past this offset return nothing (an error)

  Sysroot::PieceRead reader() {
    return [this](size_t offset, uint8_t* out, size_t size) -> size_t {
      ++reads;
      if (fail_from && offset + size > *fail_from) return 0;
      if (offset >= bytes.size()) return 0;
      const size_t n = std::min(size, bytes.size() - offset);
      std::memcpy(out, bytes.data() + offset, n);
      bytes_read += n;
      return n;
    };
  }
};

std::string decoded(const std::vector<uint8_t>& bytes) {
  std::vector<Finding> findings;
  try {
    Function f = decode_config_bytes(Bdf{0, 1, 0, 0}, bytes, findings);
    return test::decoded_fields(f, findings);
  } catch (const InputError& e) {
    return std::string("error: ") + e.what();
  }
}

void put32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
}
void put16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v), b[at + 1] = static_cast<uint8_t>(v >> 8);
}
uint32_t ext_header(unsigned id, size_t next) { return id | (1u << 16) | static_cast<uint32_t>(next << 20); }

// A PCIe endpoint (libpci walks extended capabilities only behind a PCI Express capability).
std::vector<uint8_t> pcie_endpoint() {
  std::vector<uint8_t> b(4096, 0);
  put16(b, 0x00, 0x10de), put16(b, 0x02, 0x2330);
  put16(b, 0x06, 0x0010);  // capability list
  b[0x0b] = 0x03, b[0x0a] = 0x02;
  b[0x34] = 0x40;
  b[0x40] = 0x10, b[0x41] = 0x00;  // PCI Express, last
  put16(b, 0x42, 0x0002);          // version 2, endpoint
  put32(b, 0x4c, 0x00000045);      // 32 GT/s x4
  put16(b, 0x52, 0x0044);
  return b;
}

// The whole read and the read in pieces decode alike; the pieces read no more than the whole.
void expect_same(const std::vector<uint8_t>& whole, const std::string& label, CountingReader* counted = nullptr) {
  CountingReader local{whole, 0, 0, std::nullopt};
  CountingReader& r = counted ? *counted : local;
  std::vector<uint8_t> pieces = read_config_pieces(r.reader());
  EXPECT_EQ(pieces.size(), whole.size()) << label;
  EXPECT_EQ(decoded(pieces), decoded(whole)) << label;
  EXPECT_LE(r.bytes_read, whole.size()) << label;
}

TEST(ConfigPieces, EveryFunctionOfTheRecordedMachinesDecodesAlike) {
  size_t functions = 0, extended = 0, whole_bytes = 0, piece_bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(P2PAUDIT_TEST_DATA) + "/machines")) {
    const auto archive = entry.path() / "sysroot.tar.gz";
    if (!std::filesystem::exists(archive)) continue;
    Sysroot root = Sysroot::open(archive.string());
    for (const auto& name : root.list("sys/bus/pci/devices")) {
      auto bytes = root.read_bytes("sys/bus/pci/devices/" + name + "/config", 4096);
      if (!bytes) continue;
      CountingReader r{*bytes, 0, 0, std::nullopt};
      expect_same(*bytes, archive.string() + " " + name, &r);
      ++functions;
      if (bytes->size() == 4096) {
        ++extended;
        whole_bytes += bytes->size();
        piece_bytes += r.bytes_read;
      }
    }
  }
  ASSERT_GT(functions, 20u);
  ASSERT_GT(extended, 5u);
  // Each dword read from the live `config` is a config cycle: the pieces are a fraction of them.
  EXPECT_LT(piece_bytes * 4, whole_bytes) << piece_bytes << " of " << whole_bytes << " bytes";
}

TEST(ConfigPieces, HostileCapabilityListsDecodeAlike) {
  struct Case {
    std::string name;
    std::function<void(std::vector<uint8_t>&)> build;
  };
  const std::vector<Case> cases = {
      {"ACS, ARI, SR-IOV, DSN, ReBAR in a row",
       [](auto& b) {
         put32(b, 0x100, ext_header(0x0d, 0x140));
         put16(b, 0x104, 0x007f), put16(b, 0x106, 0x001d), put32(b, 0x108, 0xa5a5a5a5);  // EC: the vector is read
         put32(b, 0x140, ext_header(0x0e, 0x160));
         put32(b, 0x160, ext_header(0x10, 0x200));
         put16(b, 0x16e, 16), put16(b, 0x170, 4), put16(b, 0x17a, 0x2331);
         put32(b, 0x200, ext_header(0x03, 0x300));
         put32(b, 0x204, 0x12345678), put32(b, 0x208, 0x9abcdef0);
         put32(b, 0x300, ext_header(0x15, 0));
         put32(b, 0x304, 0x000ffff0), put32(b, 0x308, 0x00000c40);
       }},
      {"a loop", [](auto& b) { put32(b, 0x100, ext_header(0x0b, 0x200)), put32(b, 0x200, ext_header(0x0d, 0x100)); }},
      {"a pointer into conventional space and back out",
       [](auto& b) {
         put32(b, 0x100, ext_header(0x0b, 0x40));
         put32(b, 0x40, 0x80000010 | 0x0000);  // the PCIe capability's first dword read as a header
         put32(b, 0x800, ext_header(0x0d, 0));
         put16(b, 0x804, 0x0040), put16(b, 0x806, 0x0001);
       }},
      {"an all-ones header", [](auto& b) { put32(b, 0x100, 0xffffffff), put32(b, 0xffc, ext_header(0x0d, 0)); }},
      {"ACS at the very end", [](auto& b) {
         put32(b, 0x100, ext_header(0x01, 0xff8));
         put32(b, 0xff8, ext_header(0x0d, 0));
         put16(b, 0xffc, 0x007f), put16(b, 0xffe, 0x0005);
       }},
      {"ReBAR across the end", [](auto& b) {
         put32(b, 0x100, ext_header(0x15, 0xfe0)), put32(b, 0x108, 0x000000a0);
         put32(b, 0xfe0, ext_header(0x15, 0)), put32(b, 0xfe8, 0x00000ca0);
       }},
      {"no extended capabilities", [](auto&) {}},
      {"a header of zero after one", [](auto& b) { put32(b, 0x100, ext_header(0x0e, 0x400)); }},
      {"a conventional function", [](auto& b) { b.resize(256); }},
      {"an unprivileged read", [](auto& b) { b.resize(64); }},
  };
  for (const auto& c : cases) {
    auto b = pcie_endpoint();
    c.build(b);
    // Bytes nobody should need, to tell a read that was skipped from one that was not.
    if (b.size() == 4096)
      for (size_t at = 0x100; at < 4096; at += 4)
        if (!b[at] && !b[at + 1] && !b[at + 2] && !b[at + 3]) put32(b, at, 0x0badf00d ^ static_cast<uint32_t>(at));
    if (c.name == "no extended capabilities") put32(b, 0x100, 0);
    if (c.name == "a header of zero after one") put32(b, 0x400, 0);
    expect_same(b, c.name);
  }
}

TEST(ConfigPieces, RandomCapabilityListsDecodeAlike) {
  std::mt19937 random(31);
  for (int n = 0; n < 2000; ++n) {
    auto b = pcie_endpoint();
    for (size_t at = 0x100; at < 4096; ++at) b[at] = static_cast<uint8_t>(random());
    // A list of random length through random places, with the capabilities the decoding reads.
    static const unsigned kIds[] = {0x0d, 0x0e, 0x10, 0x03, 0x15, 0x01, 0x0b, 0x23};
    size_t at = 0x100;
    for (int k = static_cast<int>(random() % 12); k >= 0; --k) {
      size_t next = k > 0 ? ((random() % 0xf00) + 0x100) & 0xffc : (random() % 4 == 0 ? (random() % 0x400) & 0xffc : 0);
      put32(b, at, ext_header(kIds[random() % std::size(kIds)], next));
      if (!next) break;
      at = next;
    }
    expect_same(b, "random list " + std::to_string(n));
  }
}

TEST(ConfigPieces, AReadThatStopsInExtendedSpaceLeavesItUnknown) {
  auto b = pcie_endpoint();
  put32(b, 0x100, ext_header(0x0b, 0x600));
  put32(b, 0x600, ext_header(0x0d, 0));
  put16(b, 0x604, 0x005f), put16(b, 0x606, 0x001d);
  CountingReader r{b, 0, 0, std::nullopt};
  r.fail_from = 0x600;
  std::vector<uint8_t> pieces = read_config_pieces(r.reader());
  ASSERT_EQ(pieces.size(), 256u);
  std::vector<Finding> findings;
  Function f = decode_config_bytes(Bdf{0, 1, 0, 0}, pieces, findings);
  EXPECT_EQ(f.config_readable, 256u);
  EXPECT_EQ(f.acs.state, CapState::kUnknown);
  // Whole, ACS is there: never "absent" because a piece could not be read.
  std::vector<Finding> whole_findings;
  EXPECT_EQ(decode_config_bytes(Bdf{0, 1, 0, 0}, b, whole_findings).acs.state, CapState::kPresent);
}

// A captured tree serves the pieces from the file read whole; what read_bytes() refuses,
// read_pieces() refuses too.
TEST(ConfigPieces, ReadPiecesOfACapturedTree) {
  test::TempDir dir;
  const auto devices = dir / "sys/bus/pci/devices/0000:01:00.0";
  std::filesystem::create_directories(devices);
  std::filesystem::create_directories(dir / "proc");
  auto b = pcie_endpoint();
  std::ofstream(devices / "config", std::ios::binary).write(reinterpret_cast<const char*>(b.data()), 4096);
  ASSERT_EQ(::mkfifo((devices / "fifo").c_str(), 0600), 0);
  std::filesystem::create_symlink("/etc/passwd", devices / "outside");
  Sysroot root = Sysroot::open(dir.path().string());
  std::vector<uint8_t> got;
  ASSERT_TRUE(root.read_pieces("sys/bus/pci/devices/0000:01:00.0/config", 4096,
                               [&](const Sysroot::PieceRead& read) { got = read_config_pieces(read); }));
  EXPECT_EQ(decoded(got), decoded(b));
  for (const char* name : {"fifo", "outside", "missing"}) {
    bool called = false;
    EXPECT_FALSE(root.read_pieces(std::string("sys/bus/pci/devices/0000:01:00.0/") + name, 4096,
                                  [&](const Sysroot::PieceRead&) { called = true; }))
        << name;
    EXPECT_FALSE(called) << name;
  }
  // The reader never gives more than max bytes.
  ASSERT_TRUE(root.read_pieces("sys/bus/pci/devices/0000:01:00.0/config", 100, [&](const Sysroot::PieceRead& read) {
    uint8_t buf[256];
    EXPECT_EQ(read(0, buf, sizeof buf), 100u);
    EXPECT_EQ(read(96, buf, 8), 4u);
    EXPECT_EQ(read(100, buf, 8), 0u);
  }));
}

// This machine, where it has PCI functions: pread() through one descriptor gives the function
// the whole file gives (the link's current speed left out: a GPU changes it as it idles).
TEST(ConfigPieces, TheLiveMachineDecodesAlike) {
  Sysroot root = Sysroot::open("/");
  auto names = root.list("sys/bus/pci/devices");
  if (names.empty()) GTEST_SKIP() << "no PCI functions in /sys/bus/pci/devices";
  const auto without_link = [](std::string text) {
    auto at = text.find("\nlink ");
    return at == std::string::npos ? text : text.erase(at, text.find('\n', at + 1) - at);
  };
  for (const auto& name : names) {
    const std::string path = "sys/bus/pci/devices/" + name + "/config";
    auto whole = root.read_bytes(path, 4096);
    if (!whole) continue;
    std::vector<uint8_t> pieces;
    ASSERT_TRUE(root.read_pieces(path, 4096, [&](const Sysroot::PieceRead& read) { pieces = read_config_pieces(read); }));
    EXPECT_EQ(pieces.size(), whole->size()) << name;
    EXPECT_EQ(without_link(decoded(pieces)), without_link(decoded(*whole))) << name;
  }
}

}  // namespace
}  // namespace p2paudit
