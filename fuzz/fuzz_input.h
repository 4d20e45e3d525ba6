// SPDX-License-Identifier: GPL-2.0-or-later
// Shared by the fuzz targets: the input as text, or as a private temporary file for readers that
// take a path (snapshots, lspci dumps). InputError is the expected answer to bad bytes; any other
// exception, a crash or a sanitizer report is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace p2paudit::fuzz {

inline std::string_view text(const uint8_t* data, size_t size) { return {reinterpret_cast<const char*>(data), size}; }

class TempFile {
 public:
  TempFile(const uint8_t* data, size_t size, const char* suffix) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/p2paudit-fuzz-XXXXXX" + suffix;
    int fd = mkstemps(path_.data(), static_cast<int>(std::string_view(suffix).size()));
    if (fd < 0) std::abort();
    for (size_t done = 0; done < size;) {
      ssize_t n = write(fd, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    close(fd);
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace p2paudit::fuzz
