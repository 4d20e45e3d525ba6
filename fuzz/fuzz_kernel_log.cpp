// SPDX-License-Identifier: GPL-2.0-or-later
// A kernel log from anyone (`log --from FILE`, a snapshot's log, a pasted dmesg): the reader of
// every line form and the recognisers. Besides crashes, it checks what every reading must hold:
// line numbers only grow, no line passes the length bound, each message is bytes of the input,
// the bounds on lines hold, every event keeps its line and a detail no longer than it needs, and
// the snapshot's redaction of a line redacts to itself.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "fuzz_input.h"
#include "p2paudit/input_file.h"
#include "p2paudit/kernel_log.h"
#include "p2paudit/kernel_log_snapshot.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = p2paudit::fuzz::text(data, size);
  p2paudit::KernelLogLimits limits;
  limits.max_line_bytes = 512;
  limits.max_lines = 2000;
  std::istringstream in{std::string(text)};
  uint64_t last = 0, lines = 0;
  auto notes = p2paudit::read_kernel_log(in, "fuzz", limits, [&](p2paudit::KernelLogLine&& line) {
    check(line.line_number > last && line.line_number <= limits.max_lines);
    last = line.line_number;
    ++lines;
    check(line.text.size() <= limits.max_line_bytes);
    check(text.find(line.text) != std::string_view::npos);
    if (line.seconds_since_boot) check(*line.seconds_since_boot >= 0);
    if (line.level != -1) check(line.level >= 0 && line.level <= 7);
    const std::string redacted = p2paudit::redact_kernel_log_line(line.text, "gpu7");
    check(p2paudit::redact_kernel_log_line(redacted, "gpu7") == redacted);
    if (auto e = p2paudit::recognise_kernel_log_line(line)) {
      check(e->line.text == line.text && !e->source.empty());
      check(e->detail.size() <= line.text.size() + 256);
      (void)p2paudit::escape_text(e->detail);
      (void)p2paudit::to_string(e->kind);
    }
  });
  check(lines <= limits.max_lines);
  check(notes.size() <= 2);
  return 0;
}
