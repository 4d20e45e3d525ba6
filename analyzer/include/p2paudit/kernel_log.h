// SPDX-License-Identifier: GPL-2.0-or-later
// The kernel log as lines (/dev/kmsg records, a saved `dmesg` in each of its timestamp formats,
// the journal's kernel messages) and the lines that bear on peer DMA as events: P2PDMA's own
// refusals and ACS warnings, IOMMU faults, AER, NVIDIA Xid, amdgpu/xe/XRT peer messages.
// The log is written by drivers that print firmware strings and user data: every line is
// bounded, nothing in it is followed, and the text is escaped before it reaches a terminal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "p2paudit/topology.h"

namespace p2paudit {

struct KernelLogLimits {
  size_t max_line_bytes = 4096;        // a longer line is cut there and marked truncated
  uint64_t max_lines = 4'000'000;      // lines read before stopping, with a note
  uint64_t max_bytes = 512ull << 20;   // bytes read before stopping, with a note
};

struct KernelLogLine {
  std::string text;      // the message without the stamp, level or facility prefix (raw bytes)
  std::string stamp;     // the stamp as written ("[   12.345678]", "2026-11-28T08:53:22,123456+00:00")
  std::optional<double> seconds_since_boot;  // where the format gives the monotonic stamp
  std::optional<uint64_t> sequence;          // /dev/kmsg's record number
  int level = -1;        // syslog level where the format gives it
  uint64_t line_number = 0;  // 1-based, in the input
  bool truncated = false;    // cut at max_line_bytes, or the input ended inside the line
};

// Reads lines from a saved log in any format `dmesg` and `journalctl -k` print (plain, -T,
// --time-format iso/ctime/reltime/delta, -r raw "<N>", -x "kern  :warn  :", /dev/kmsg records
// "L,SEQ,USEC,FLAGS;text" and their continuation lines, journal short/short-iso/
// short-monotonic), detected per line, so concatenated and interleaved logs work.
// Calls sink for each line; stops at the limits and returns the notes to show (empty: all read).
// Throws InputError naming `name` only when the stream cannot be read at all.
std::vector<std::string> read_kernel_log(std::istream& in, const std::string& name,
                                         const KernelLogLimits& limits,
                                         const std::function<void(KernelLogLine&&)>& sink);

enum class LogEventKind {
  kP2pdmaRefused,            // "cannot be used for peer-to-peer DMA as the client and provider ..."
  kAcsRedirect,              // "ACS redirect is set between the client and provider (...)"
  kHostBridgeNotWhitelisted, // "Host bridge not in P2PDMA whitelist: ..."
  kIommuFault,               // AMD-Vi IO_PAGE_FAULT, Intel DMAR fault, ARM SMMU fault
  kAer,                      // AER: corrected/uncorrected errors naming a device
  kNvidiaXid,                // NVRM: Xid (PCI:...): N, ...
  kVendorPeerMessage,        // amdgpu / xe / XRT messages about peer access
};
const char* to_string(LogEventKind kind);

struct LogEvent {
  LogEventKind kind = LogEventKind::kP2pdmaRefused;
  std::string source;             // the recogniser: "p2pdma", "amd-vi", "dmar", "arm-smmu", "aer",
                                  // "nvidia-xid", "amdgpu", "xe", "xrt"
  std::optional<Bdf> device;      // the function the line is about: a refusal's client, a
                                  // fault's requester, the device an AER or Xid line names
  std::optional<Bdf> peer;        // the other function the line names: a refusal's provider
  std::optional<uint64_t> address;  // an IOMMU fault's address (what the device tried to reach)
  std::string driver;             // the dev_printk driver prefix ("nvme", "pcieport"), if any
  std::string detail;             // what the line says beyond the kind: the Xid number and text,
                                  // the AER severity and error, the fault's flags
  bool device_segment_unknown = false;  // the line printed "BB:DD.F" without its PCI segment (DMAR,
                                        // AMD-Vi before segments): device's domain 0 is not known
  KernelLogLine line;
};

// The event a line is, or nullopt for a line that does not bear on peer DMA.
std::optional<LogEvent> recognise_kernel_log_line(const KernelLogLine& line);

// Where the live log stands now (/dev/kmsg's next record number), for `watch`; nullopt with
// *why set when it cannot be read (no /dev/kmsg, dmesg_restrict for an unprivileged user).
std::optional<uint64_t> kmsg_position(std::string* why);

// The records of this boot's /dev/kmsg from sequence `from` on (all when nullopt), without
// blocking; notes as read_kernel_log(). Throws InputError when /dev/kmsg cannot be opened.
std::vector<std::string> read_kmsg(std::optional<uint64_t> from, const KernelLogLimits& limits,
                                   const std::function<void(KernelLogLine&&)>& sink);

}  // namespace p2paudit
