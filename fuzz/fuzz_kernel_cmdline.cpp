// SPDX-License-Identifier: GPL-2.0-or-later
// A kernel command line as a snapshot's proc/cmdline or a pasted --assume-acs-off spec brings it:
// the shared reader (kernel_cmdline.h), the redaction built on it and the --assume-acs-off reading.
// Besides crashes, it checks what every reading must hold: each name and value is the text at its
// offsets, words come in order, no kernel parameter stands after a bare "--", and a redacted line
// reads back as itself.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_input.h"
#include "p2paudit/assumptions.h"
#include "p2paudit/errors.h"
#include "p2paudit/kernel_cmdline.h"
#include "p2paudit/snapshot.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void check_words(std::string_view text, const std::vector<p2paudit::KernelArg>& args, size_t from, size_t to) {
  size_t last_end = from;
  for (const auto& a : args) {
    check(last_end <= a.begin && a.begin <= a.name_at && a.end <= to);
    check(text.substr(a.name_at, a.name.size()) == a.name && a.name_at + a.name.size() <= a.end);
    if (a.value) {
      check(a.name_at + a.name.size() <= a.value_at && a.value_at + a.value->size() <= a.end);
      check(text.substr(a.value_at, a.value->size()) == *a.value);
    }
    last_end = a.end;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = p2paudit::fuzz::text(data, size);
  const auto line = p2paudit::read_kernel_cmdline(text);
  std::string_view read = text.substr(0, text.find('\0'));
  if (line.dashes_at) {
    check_words(read, line.params, 0, *line.dashes_at);
    check_words(read, line.init_args, *line.dashes_at + 2, read.size());
  } else {
    check(line.init_args.empty());
    check_words(read, line.params, 0, read.size());
  }
  for (const auto& a : line.params) check(a.value || a.name != "--");

  const std::string redacted = p2paudit::redact_cmdline(text);
  check(redacted.find('"') == std::string::npos && p2paudit::redact_cmdline(redacted) == redacted);

  p2paudit::Topology empty;
  try {
    (void)p2paudit::assume_acs_redirect_off(empty, {std::string(text)});
  } catch (const p2paudit::InputError&) {
  }
  return 0;
}
