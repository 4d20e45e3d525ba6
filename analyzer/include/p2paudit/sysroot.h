// Every file the analyzer reads is read relative to a sysroot: "/" on a live machine, a captured
// snapshot directory, or a snapshot .tar.gz unpacked into a private temporary directory.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace p2paudit {

class Sysroot {
 public:
  // Opens a directory or a .tar.gz; throws InputError naming the path when missing or corrupt.
  static Sysroot open(const std::string& path);
  ~Sysroot();
  Sysroot(Sysroot&&) noexcept;
  Sysroot& operator=(Sysroot&&) noexcept;

  const std::string& origin() const { return origin_; }    // what the user named
  const std::filesystem::path& root() const { return root_; }
  bool is_live() const { return live_; }                   // the running machine's "/"
  bool is_archive() const { return !temp_dir_.empty(); }

  std::filesystem::path path(const std::string& relative) const;
  bool exists(const std::string& relative) const;
  // First line (trailing newline removed), or nullopt when the file is missing or unreadable.
  std::optional<std::string> read_line(const std::string& relative) const;
  std::optional<std::string> read_text(const std::string& relative) const;
  // Reads up to max bytes; nullopt when the file cannot be opened.
  std::optional<std::vector<uint8_t>> read_bytes(const std::string& relative, size_t max) const;
  // Target of a symlink as stored, or nullopt.
  std::optional<std::string> read_link(const std::string& relative) const;
  // Resolves symlinks inside the sysroot (absolute targets are taken relative to it) and returns
  // the path relative to the root, or nullopt when it leaves the root or does not exist.
  std::optional<std::string> resolve(const std::string& relative) const;
  std::vector<std::string> list(const std::string& relative) const;  // sorted names; empty if none

 private:
  Sysroot() = default;
  std::string origin_;
  std::filesystem::path root_;
  std::filesystem::path temp_dir_;
  bool live_ = false;
};

}  // namespace p2paudit
