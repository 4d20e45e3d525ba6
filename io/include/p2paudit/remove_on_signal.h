// SPDX-License-Identifier: GPL-2.0-or-later
// Temporary files and directories the tool makes (an output's twin, libkmod's private index
// copy) are removed on every way out: their owners' destructors on a return or an exception, and
// this registry when SIGINT, SIGTERM or SIGHUP ends the process, which the destructors never see.
#pragma once

#include <string>

namespace p2paudit {

// While alive, `path` is removed if one of those signals arrives in the process that made it; then
// the process dies of the signal as before. A directory is removed with the files directly in it
// (the owner made them; nothing deeper). The signal handler only reads a fixed table and calls
// unlink, rmdir, open, getdents64 and close, all async-signal-safe, from any thread. The owner
// removes the path itself (before this guard goes): the registry covers only the signal.
class RemoveOnSignal {
 public:
  enum class Kind { kFile, kDirectory };
  RemoveOnSignal() = default;
  RemoveOnSignal(const std::string& path, Kind kind) { arm(path, kind); }
  ~RemoveOnSignal() { disarm(); }
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;

  // False when the table is full (more temporaries at once than kSlots) or the path is longer
  // than a slot: the path is then not removed on a signal.
  bool arm(const std::string& path, Kind kind);
  void disarm();

  static constexpr int kSlots = 2048;  // aggregate's 1024 threads each with one index copy, and the output

 private:
  int slot_ = -1;
};

}  // namespace p2paudit
