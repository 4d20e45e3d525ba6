// SPDX-License-Identifier: GPL-2.0-or-later
// The kernel command line read as the kernel reads it: one reader for every place that takes one
// (/proc/cmdline of a machine or snapshot, its redaction, a line pasted into --assume-acs-off).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace p2paudit {

// One word as next_arg() (lib/cmdline.c) leaves it: the name before the first '=', the value after
// it (nullopt when the word has no '='), double quotes removed where next_arg() removes them.
// Offsets are into the text read: the word as written is text.substr(begin, end - begin).
struct KernelArg {
  std::string name;
  std::optional<std::string> value;
  size_t begin = 0, end = 0;
  size_t name_at = 0, value_at = 0;
  bool has_quote = false;  // the word as written holds a double quote
};

struct KernelCmdline {
  std::vector<KernelArg> params;     // the kernel's parameters, in order
  std::vector<KernelArg> init_args;  // after a bare "--" (parse_args() stops there; init gets them)
  std::optional<size_t> dashes_at;   // where that "--" word begins
};

// Reads text up to its end or a NUL byte (the kernel's string ends there). Linear in the text.
KernelCmdline read_kernel_cmdline(std::string_view text);

// parameq() in kernel/params.c: names compare with '-' and '_' alike.
bool kernel_param_name_is(std::string_view name, std::string_view wanted);

// The value of the last parameter of that name ("" for a bare flag), as the kernel keeps the last
// one it sets; nullopt when there is none.
std::optional<std::string> kernel_param_last(const KernelCmdline& line, std::string_view name);

// The comma-separated options of every `name=` parameter in order, across repeated words: each
// word is its own call of the parameter's setup function (iommu_setup(), pci_setup()...), so a
// later option overrides an earlier one.
std::vector<std::string> kernel_param_options(const KernelCmdline& line, std::string_view name);

// The value of a `pci=KEY=VALUE` option, the last one winning (pci_setup() compares the option's
// start with "KEY=").
std::optional<std::string> kernel_pci_option(const KernelCmdline& line, std::string_view key);

}  // namespace p2paudit
