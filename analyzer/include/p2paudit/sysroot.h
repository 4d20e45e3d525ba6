// SPDX-License-Identifier: GPL-2.0-or-later
// Every file the analyzer reads is read relative to a sysroot: "/" on a live machine, a captured
// snapshot directory, or a snapshot .tar.gz read into memory (never unpacked onto disk).
//
// A sysroot comes from a stranger and the tool runs as root, so nothing outside it is ever
// opened: symlinks are resolved by us, inside the sysroot (an absolute target means the
// sysroot's "/", a ".." above the top is refused), every path component is opened without
// following links, only regular files are read, and every read, listing and archive is bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace p2paudit {

// Limits on what a sysroot may hold; exceeding one is an InputError naming the limit.
struct SysrootLimits {
  size_t max_file_bytes = 16u << 20;        // one file (a 1024-CPU cpuinfo is ~2 MiB)
  size_t max_archive_bytes = 512u << 20;    // all file data of an archive, uncompressed
  size_t max_archive_entries = 2'000'000;   // a 16384-function capture has ~350k
  size_t max_directory_entries = 1'000'000;
  size_t max_path_bytes = 4096;
  // All entry names, symlink and hard-link targets of an archive together: the names are kept
  // in memory beside the data (a 16384-function capture has ~350k names of ~80 bytes, ~30 MiB).
  size_t max_archive_name_bytes = 64u << 20;
  // Everything gzip hands out for an archive: headers, GNU long names, pax records, padding and
  // file data, taken or skipped (a ~1 MB archive of 1 MiB long names inflates to a GiB). A
  // 16384-function capture (p2paudit-synth --functions 16384) inflates to 386 MB.
  size_t max_archive_stream_bytes = 1u << 30;
  int max_symlinks = 40;                    // per lookup, as the kernel's MAXSYMLINKS
};

// How an archive is read. kTarWalk (the default) reads the snapshot's own tar formats straight
// from the decompressed stream and gives anything else to libarchive's tar reader, from the
// start; kLibarchive uses that reader alone: the reference the walk is compared with in tests.
enum class ArchiveReader { kTarWalk, kLibarchive };

class Sysroot {
 public:
  // Opens a directory or a .tar.gz / .tgz / .tar; throws InputError naming the path when it is
  // missing, corrupt, holds a forbidden entry or exceeds a limit.
  static Sysroot open(const std::string& path, const SysrootLimits& limits = {},
                      ArchiveReader reader = ArchiveReader::kTarWalk);
  ~Sysroot();
  Sysroot(Sysroot&&) noexcept;
  Sysroot& operator=(Sysroot&&) noexcept;

  const std::string& origin() const { return origin_; }  // what the user named
  bool is_live() const;                                  // the running machine's "/"
  bool is_archive() const;
  // Which reader gave an archive's entries: kTarWalk unless the walk gave up (or was not asked).
  ArchiveReader archive_reader() const;
  const SysrootLimits& limits() const { return limits_; }

  bool exists(const std::string& relative) const;  // the entry itself (a dangling link counts)
  // First line (trailing newline removed), or nullopt when the file is missing, not a regular
  // file, larger than the file limit, or leads outside the sysroot.
  std::optional<std::string> read_line(const std::string& relative) const;
  // read_line() of a file that is the only one read in its directory (an IOMMU group's `type`):
  // opened through the directory's parent without listing the directory first.
  std::optional<std::string> read_lone_line(const std::string& relative) const;
  std::optional<std::string> read_text(const std::string& relative) const;
  // Up to max bytes; nullopt when the file cannot be read as above.
  std::optional<std::vector<uint8_t>> read_bytes(const std::string& relative, size_t max) const;
  // A file read where the caller asks rather than whole: `use` is given a reader of up to `size`
  // bytes at `offset` (the count read; 0 at the end or on an error). The live machine's files
  // are read with pread() through one descriptor: sysfs `config` costs a config cycle per dword
  // read (a trap to the hypervisor in a VM), so a reader of a few capabilities saves most of them.
  // Other sysroots read the file whole, up to max bytes, and serve the pieces from memory. false,
  // and `use` not called, when the file cannot be read as read_bytes() reads it.
  using PieceRead = std::function<size_t(size_t offset, uint8_t* out, size_t size)>;
  bool read_pieces(const std::string& relative, size_t max, const std::function<void(const PieceRead&)>& use) const;
  // Size the file reports (sysfs gives the kernel's size of `config`), nullopt when unreadable.
  std::optional<uint64_t> file_size(const std::string& relative) const;
  // Target of a symlink as stored (its text, not followed), or nullopt.
  std::optional<std::string> read_link(const std::string& relative) const;
  // Resolves symlinks inside the sysroot and returns the path relative to the root, or nullopt
  // when it leaves the root, loops, or does not exist.
  std::optional<std::string> resolve(const std::string& relative) const;
  std::vector<std::string> list(const std::string& relative) const;  // sorted names; empty if none

  // A directory of a directory sysroot as a host path that holds no symlink below the root, for
  // libraries that open files by name (libkmod); nullopt for archives or when unsafe.
  std::optional<std::filesystem::path> confined_directory(const std::string& relative) const;

  class Backend;
  // Hashes a path's text for lookups by string_view, so that finding a directory builds no string.
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const noexcept { return std::hash<std::string_view>{}(text); }
  };

 private:
  using Resolutions = std::unordered_map<std::string, std::optional<std::string>, TextHash, std::equal_to<>>;

  Sysroot() = default;
  std::optional<std::string> resolve_path(std::string_view relative, bool follow_last) const;
  // `dir` is a path without empty or "." components; a reference into resolved_dirs_, valid until
  // the next resolve_directory() (which may clear it).
  const std::optional<std::string>& resolve_directory(std::string_view dir) const;
  // What the directory of `path` resolves to, with its last component in `name`; nullptr when
  // the path is not "DIR/NAME" with DIR plain and NAME a plain name (the caller walks it).
  const std::optional<std::string>* directory_of(std::string_view path, std::string_view& name) const;
  std::optional<std::string> read_file(const std::string& relative, size_t max, bool lone = false) const;
  std::optional<std::string> read_lone_file(std::string_view relative, size_t max, bool& handled) const;

  static constexpr size_t kMaxResolvedDirs = 1 << 20;
  std::string origin_;
  SysrootLimits limits_;
  std::unique_ptr<Backend> backend_;
  // Directory -> what it resolves to (nullopt: missing or not a directory). Not thread-safe, like
  // the backends' open-directory caches: one Sysroot is read by one thread.
  mutable Resolutions resolved_dirs_;
  // resolved paths that are real directories
  mutable std::unordered_set<std::string, TextHash, std::equal_to<>> directories_;
  // The directory text directory_of() looked up last and its entry in resolved_dirs_: reads come
  // in runs from one function's directory, and comparing the text costs less than hashing it.
  mutable std::string last_dir_text_;
  mutable const std::optional<std::string>* last_dir_ = nullptr;
};

}  // namespace p2paudit
