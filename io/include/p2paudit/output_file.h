// SPDX-License-Identifier: GPL-2.0-or-later
// Files the tool writes (snapshot -o, report -o): written as a temporary file beside the output
// and renamed into place, so readers never see half a file and an interrupt leaves the old one.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/remove_on_signal.h"

namespace p2paudit {

// The output file is written as a temporary file beside it and renamed into place, so a failure
// or an interrupt leaves any old file as it was; the name is never followed if it is a symlink.
class OutputFile {
 public:
  OutputFile(const std::string& path, bool force) : path_(path), force_(force) {
    struct stat st{};
    if (::lstat(path.c_str(), &st) == 0) {
      if (S_ISLNK(st.st_mode)) throw InputError(fmt::format("{}: is a symlink; refusing to write through it", path));
      if (!S_ISREG(st.st_mode)) throw InputError(fmt::format("{}: exists and is not a regular file", path));
      if (!force) throw InputError(fmt::format("{}: exists; use --force to replace it", path));
    }
    std::filesystem::path p(path);
    std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
    // A fixed short name, not ".NAME.XXXXXX": an output name up to NAME_MAX must work, and the
    // twin lives in the same directory so the rename is atomic.
    temp_ = fmt::format("{}/.p2paudit-XXXXXX", dir);
    fd_ = ::mkostemp(temp_.data(), O_CLOEXEC);  // O_EXCL, mode 0600: nobody else reads a half-written capture
    if (fd_ < 0) throw InputError(fmt::format("{}: cannot create a file in {}: {}", path, dir, std::strerror(errno)));
    remove_on_signal_.arm(temp_, RemoveOnSignal::Kind::kFile);
  }
  ~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  int fd() const { return fd_; }

  // All of `data`, retried on short writes and EINTR.
  void write(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw InputError(fmt::format("{}: cannot write: {}", path_, std::strerror(n < 0 ? errno : EIO)));
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  void commit() {
    if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
      fd_ = -1;
      throw InputError(fmt::format("{}: cannot write: {}", path_, std::strerror(errno)));
    }
    fd_ = -1;
    // Without --force a file that appeared meanwhile is still kept: rename only if absent.
    int r = force_ ? ::rename(temp_.c_str(), path_.c_str())
                   : ::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE);
    if (r != 0) {
      if (errno == EEXIST) throw InputError(fmt::format("{}: exists; use --force to replace it", path_));
      throw InputError(fmt::format("{}: cannot rename into place: {}", path_, std::strerror(errno)));
    }
    committed_ = true;
    remove_on_signal_.disarm();
  }

 private:
  std::string path_;
  bool force_;
  std::string temp_;
  int fd_ = -1;
  bool committed_ = false;
  RemoveOnSignal remove_on_signal_;  // SIGINT, SIGTERM or SIGHUP while writing: the twin goes too
};

}  // namespace p2paudit
