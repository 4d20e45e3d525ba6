// SPDX-License-Identifier: GPL-2.0-or-later
// `snapshot --with-log`: this boot's kernel log stored in the snapshot, redacted like the rest
// with --redact, and read back from a snapshot as `log` reads a saved dmesg.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "p2paudit/kernel_log.h"
#include "p2paudit/sysroot.h"

namespace p2paudit {

// The log inside a snapshot: /dev/kmsg's own record form, one record a line
// ("PRIO,SEQ,USEC,FLAGS;text", without the dictionary lines), which read_kernel_log() reads back
// with the sequence numbers, levels and stamps.
inline constexpr const char* kKernelLogPath = "p2paudit-kernel-log.txt";
// What a snapshot's log may hold: the capture stops there (with a note), and a larger file in a
// snapshot is refused. The sysroot's own bound on one file (SysrootLimits::max_file_bytes).
inline constexpr size_t kMaxSnapshotKernelLogBytes = 16u << 20;

// This boot's /dev/kmsg as the snapshot stores it; with redact, each line through
// redact_kernel_log_line(). Notes (records lost, bounds reached) go to *notes. Throws InputError
// when /dev/kmsg cannot be read (not root with kernel.dmesg_restrict set).
std::string capture_kernel_log(bool redact, std::string_view hostname, std::vector<std::string>* notes);

// --redact for one message of the log, as the rest of the snapshot is redacted: a kernel command
// line ("Command line: ", "Kernel command line: ") keeps only the parameters redact_cmdline()
// keeps; every user@host word becomes redacted@redacted (redact_kernel_version()); the host name
// (a whole word) becomes "redacted"; a USB serial number ("SerialNumber: X") becomes "redacted";
// a MAC address becomes xx:xx:xx:xx:xx:xx.
std::string redact_kernel_log_line(std::string_view text, std::string_view hostname);

// The snapshot's log, nullopt when it holds none (a sysroot without one, the live machine).
// Throws InputError naming the file when it is not a regular file or larger than the bound.
std::optional<std::string> read_snapshot_kernel_log(const Sysroot& root);

}  // namespace p2paudit
