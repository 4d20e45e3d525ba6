// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/kmod_index.h"

#include <fmt/format.h>

#include <cstring>
#include <unordered_set>
#include <vector>

namespace p2paudit {

namespace {

// libkmod-index.h
constexpr uint32_t kIndexMagic = 0xB007F457;
constexpr uint32_t kIndexVersionMajor = 0x0002;
constexpr uint32_t kNodePrefix = 0x80000000;
constexpr uint32_t kNodeValues = 0x40000000;
constexpr uint32_t kNodeChilds = 0x20000000;
constexpr uint32_t kNodeMask = 0x0FFFFFFF;
constexpr unsigned kChildMax = 128;
constexpr size_t kHeaderBytes = 12;

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

struct Pending {
  uint32_t offset;  // with flags
  uint64_t parent;  // the parent's position; past the end of the file for the root
  size_t depth;
};

}  // namespace

std::optional<std::string> kmod_index_problem(const uint8_t* data, size_t size) {
  if (size < kHeaderBytes) return fmt::format("{} bytes, shorter than the {}-byte index header", size, kHeaderBytes);
  if (be32(data) != kIndexMagic) return fmt::format("magic {:#010x} is not libkmod's {:#010x}", be32(data), kIndexMagic);
  if ((be32(data + 4) >> 16) != kIndexVersionMajor)
    return fmt::format("index version {:#x} is not major version {}", be32(data + 4), kIndexVersionMajor);
  if (size > kNodeMask) return fmt::format("{} bytes, more than an index offset can address", size);

  std::unordered_set<uint32_t> seen;
  std::vector<Pending> stack{{be32(data + 8), uint64_t{size} + 1, 0}};
  while (!stack.empty()) {
    Pending n = stack.back();
    stack.pop_back();
    uint32_t pos = n.offset & kNodeMask;
    if (pos == 0) continue;  // no node (libkmod's read_node returns NULL, lookups find nothing)
    // A node without prefix, children or values takes no bytes: depmod writes an empty index's
    // root at the end of the header (libkmod finds no node there, as for offset 0).
    bool empty = (n.offset & (kNodePrefix | kNodeChilds | kNodeValues)) == 0;
    if (pos < kHeaderBytes || pos > size || (pos == size && !empty)) return fmt::format("node offset {:#x} outside the file ({} bytes)", pos, size);
    if (pos >= n.parent) return fmt::format("node at {:#x} is not below its parent at {:#x}", pos, n.parent);
    if (!seen.insert(pos).second) return fmt::format("node at {:#x} is reached twice", pos);
    if (n.depth >= kKmodIndexMaxDepth) return fmt::format("node at {:#x} is deeper than {} levels", pos, kKmodIndexMaxDepth);
    size_t p = pos;
    auto string_at = [&](const char* what) -> std::optional<std::string> {
      const void* nul = std::memchr(data + p, 0, size - p);
      if (!nul) return fmt::format("{} of the node at {:#x} runs past the end of the file", what, pos);
      p = static_cast<size_t>(static_cast<const uint8_t*>(nul) - data) + 1;
      return std::nullopt;
    };
    auto need = [&](size_t bytes) { return p <= size && size - p >= bytes; };
    if (n.offset & kNodePrefix)
      if (auto bad = string_at("the prefix")) return bad;
    if (n.offset & kNodeChilds) {
      if (!need(2)) return fmt::format("children of the node at {:#x} run past the end of the file", pos);
      unsigned first = data[p], last = data[p + 1];
      p += 2;
      if (first > last || last >= kChildMax)
        return fmt::format("node at {:#x} has children {}..{} (libkmod allows 0..{})", pos, first, last, kChildMax - 1);
      size_t count = last - first + 1;
      if (!need(4 * count)) return fmt::format("children of the node at {:#x} run past the end of the file", pos);
      for (size_t i = 0; i < count; ++i) stack.push_back({be32(data + p + 4 * i), pos, n.depth + 1});
      p += 4 * count;
    }
    if (n.offset & kNodeValues) {
      if (!need(4)) return fmt::format("values of the node at {:#x} run past the end of the file", pos);
      uint32_t count = be32(data + p);
      p += 4;
      if (count > (size - p) / 5) return fmt::format("node at {:#x} claims {} values, more than the file holds", pos, count);
      for (uint32_t i = 0; i < count; ++i) {
        if (!need(4)) return fmt::format("values of the node at {:#x} run past the end of the file", pos);
        p += 4;  // priority
        if (auto bad = string_at("a value")) return bad;
      }
    }
  }
  return std::nullopt;
}

}  // namespace p2paudit
