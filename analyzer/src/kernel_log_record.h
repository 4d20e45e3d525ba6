// SPDX-License-Identifier: GPL-2.0-or-later
// One /dev/kmsg record, shared by the saved-log reader and the live reader (kernel_log.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "p2paudit/kernel_log.h"

namespace p2paudit::kernel_log_detail {

struct KmsgRecord {
  int level = -1;
  uint64_t sequence = 0;
  uint64_t usec = 0;
  std::string_view header;  // "PRIO,SEQ,USEC,FLAGS"
  std::string_view text;
};

// "PRIO,SEQ,USEC,FLAGS;text" (Documentation/ABI/testing/dev-kmsg); nullopt when s is not one.
std::optional<KmsgRecord> parse_kmsg_record(std::string_view s);
// A dictionary line " KEY=value" that follows a record.
bool is_kmsg_continuation(std::string_view s);
void fill_from_record(const KmsgRecord& r, KernelLogLine& line);

}  // namespace p2paudit::kernel_log_detail
