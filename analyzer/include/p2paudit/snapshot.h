// SPDX-License-Identifier: GPL-2.0-or-later
// Snapshots: a .tar.gz holding exactly the files the analyzer reads, plus capture metadata that
// cannot be read back from sysfs alone (module versions, the kernel's config-space sizes).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"

namespace p2paudit {

inline constexpr const char* kCaptureMetadataPath = "p2paudit-capture.json";

struct CaptureMetadata {
  int schema_version = 1;
  std::string tool_version;
  std::string captured_at;                       // ISO 8601, UTC
  std::string hostname;                          // empty when redacted
  bool privileged = false;                       // config space read in full
  bool redacted = false;
  std::map<std::string, size_t> config_sizes;    // BDF -> size of sysfs config (the kernel's cfg_size)
  std::map<std::string, ModuleInfo> modules;     // driver -> module facts
};

struct SnapshotOptions {
  bool redact = false;                           // drop Device Serial Numbers and the host name
  bool force = false;                            // replace an existing output file
  std::string tool_version;
  // Files stored as they are beside the capture (name inside the archive -> contents), such as
  // the runtime probe's answers (kProbeResultsPath).
  std::map<std::string, std::string> extra_files;
};

// `snapshot --probe`: the probe's JSON document (docs/probe.md), read back when the snapshot is
// analysed.
inline constexpr const char* kProbeResultsPath = "p2paudit-probe.json";

struct SnapshotReport {
  size_t files = 0;
  bool privileged = false;
};

// `snapshot -o -`: the archive goes to standard output, which must not be a terminal.
inline constexpr const char* kStandardOutput = "-";

// Throws InputError when out_path is kStandardOutput and standard output is a terminal: a gzip
// archive is not for reading on a screen. Call before any slow work (the probe).
void refuse_terminal_output(const std::string& out_path);

// Captures root (normally the live "/") described by topo into out_path, written beside it and
// renamed into place: an existing file is kept unless options.force, a symlink is never followed,
// and a failure leaves the old file intact. out_path kStandardOutput writes the archive to
// standard output instead (nothing else is written there). Throws InputError.
SnapshotReport write_snapshot(const Sysroot& root, const Topology& topo, const std::string& out_path,
                              const SnapshotOptions& options);

// --redact: the kernel command line with only the parameters that describe PCI, the IOMMU and
// ACS, and the two others the analysis reads (mem_encrypt, NVIDIA's third-party gate; docs/security.md
// lists them all); every other parameter, and everything after "--" (init's
// arguments), is dropped. Words are split as the kernel splits them (whitespace outside double
// quotes); names compare with '-' and '_' alike, as the kernel compares them.
std::string redact_cmdline(std::string_view cmdline);
// --redact: /proc/version with the builder ("(user@host)") and any other user@host word
// replaced by "redacted@redacted".
std::string redact_kernel_version(std::string_view version);

// The snapshot's metadata, nullopt for a plain sysroot; throws InputError when it is malformed.
std::optional<CaptureMetadata> read_capture_metadata(const Sysroot& root);

}  // namespace p2paudit
