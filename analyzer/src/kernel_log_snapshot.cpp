// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/kernel_log_snapshot.h"

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/snapshot.h"

namespace p2paudit {

namespace {

// What a host name may continue with; a '.' ends it, so "gpu7.lab" (its domain name) goes too.
bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

void replace_words(std::string& text, std::string_view word, std::string_view with) {
  if (word.empty()) return;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at)) {
    bool alone = (at == 0 || !word_char(text[at - 1])) &&
                 (at + word.size() == text.size() || !word_char(text[at + word.size()]));
    if (!alone) {
      ++at;
      continue;
    }
    text.replace(at, word.size(), with);
    at += with.size();
  }
}

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// A network card's MAC address ("aa:bb:cc:dd:ee:ff", as the %pM printks write it) names the machine.
void redact_mac_addresses(std::string& text) {
  constexpr size_t kLen = 17;
  for (size_t at = 0; at + kLen <= text.size(); ++at) {
    bool mac = (at == 0 || !(is_hex(text[at - 1]) || text[at - 1] == ':')) &&
               (at + kLen == text.size() || !(is_hex(text[at + kLen]) || text[at + kLen] == ':'));
    for (size_t k = 0; mac && k < kLen; ++k) mac = k % 3 == 2 ? text[at + k] == ':' : is_hex(text[at + k]);
    if (mac) {
      text.replace(at, kLen, "xx:xx:xx:xx:xx:xx");
      at += kLen - 1;
    }
  }
}

}  // namespace

std::string redact_kernel_log_line(std::string_view text, std::string_view hostname) {
  std::string out(text);
  // arch/x86/kernel/setup.c prints "Command line: %s", init/main.c "Kernel command line: %s".
  constexpr std::string_view kCmdline = "ommand line: ";
  if (size_t at = out.find(kCmdline); at != std::string::npos) {
    size_t from = at + kCmdline.size();
    std::string kept = redact_cmdline(std::string_view(out).substr(from));
    while (!kept.empty() && kept.back() == '\n') kept.pop_back();
    out.replace(from, std::string::npos, kept);
  }
  out = redact_kernel_version(out);
  // A host name shorter than two characters would take ordinary words with it.
  if (hostname.size() >= 2) replace_words(out, hostname, "redacted");
  // drivers/usb/core/hub.c announce_device(): "SerialNumber: %s".
  constexpr std::string_view kSerial = "SerialNumber: ";
  if (size_t at = out.find(kSerial); at != std::string::npos) out.replace(at + kSerial.size(), std::string::npos, "redacted");
  redact_mac_addresses(out);
  return out;
}

std::string capture_kernel_log(bool redact, std::string_view hostname, std::vector<std::string>* notes) {
  KernelLogLimits limits;
  limits.max_bytes = kMaxSnapshotKernelLogBytes;
  std::string out;
  bool full = false;
  auto n = read_kmsg(std::nullopt, limits, [&](KernelLogLine&& line) {
    if (full) return;
    std::string text = redact ? redact_kernel_log_line(line.text, hostname) : std::move(line.text);
    // /dev/kmsg escapes control bytes itself; a line break that is there anyway would start a record.
    for (char& c : text)
      if (c == '\n' || c == '\r') c = ' ';
    std::string record = fmt::format("{};{}\n", line.stamp, text);
    if (out.size() + record.size() > kMaxSnapshotKernelLogBytes) {
      full = true;
      if (notes) notes->push_back(fmt::format("the kernel log was cut at {} bytes", kMaxSnapshotKernelLogBytes));
      return;
    }
    out += record;
  });
  if (notes) notes->insert(notes->end(), n.begin(), n.end());
  return out;
}

std::optional<std::string> read_snapshot_kernel_log(const Sysroot& root) {
  if (root.is_live() || !root.exists(kKernelLogPath)) return std::nullopt;
  auto bytes = root.read_bytes(kKernelLogPath, kMaxSnapshotKernelLogBytes + 1);
  if (!bytes)
    throw InputError(fmt::format("{}: {}: not a regular file, unreadable or larger than {} bytes",
                                 escape_text(root.origin()), kKernelLogPath, kMaxSnapshotKernelLogBytes));
  if (bytes->size() > kMaxSnapshotKernelLogBytes)
    throw InputError(fmt::format("{}: {}: larger than {} bytes", escape_text(root.origin()), kKernelLogPath,
                                 kMaxSnapshotKernelLogBytes));
  return std::string(bytes->begin(), bytes->end());
}

}  // namespace p2paudit
