// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/kernel_cmdline.h"

#include <algorithm>

namespace p2paudit {

namespace {

// isspace() of the kernel's lib/ctype.c: \t \n \v \f \r, the space and Latin-1's no-break space
// (0xa0), which the C library's isspace() in the "C" locale does not count.
bool kernel_isspace(char c) {
  auto u = static_cast<unsigned char>(c);
  return u == ' ' || (u >= '\t' && u <= '\r') || u == 0xa0;
}

constexpr size_t kNone = std::string_view::npos;

// One word at `at` (no leading space), as next_arg() in lib/cmdline.c takes it apart
// (https://github.com/torvalds/linux/blob/master/lib/cmdline.c):
// - a word that starts with '"' is entered in quotes, and that quote is not part of the name;
// - the word runs to the first whitespace outside double quotes; every '"' toggles quoting, so
//   `a="x y"` and `"a=x y"` are one word;
// - the name ends at the first '=' that is not the word's first character (next_arg()'s
//   `equals == 0` test takes an '=' at index 0 for "none yet");
// - a value that starts with '"' loses that quote, and then a '"' ending the word goes too;
//   a word that started with '"' also loses a '"' that ends it (once: the first cut already
//   made that character a NUL). There is no escape: a '"' cannot be put inside a value.
KernelArg next_arg(std::string_view text, size_t at) {
  KernelArg a;
  a.begin = at;
  size_t args = at;
  bool in_quote = false, quoted = false;
  if (text[args] == '"') {
    ++args;
    in_quote = quoted = true;
  }
  size_t i = args, equals = kNone;
  for (; i < text.size(); ++i) {
    if (kernel_isspace(text[i]) && !in_quote) break;
    if (equals == kNone && text[i] == '=' && i > args) equals = i;
    if (text[i] == '"') in_quote = !in_quote;
  }
  a.end = i;
  a.has_quote = text.substr(a.begin, a.end - a.begin).find('"') != kNone;
  size_t cut = kNone;  // a trailing quote removed, where next_arg() writes its NUL
  size_t value_at = kNone;
  if (equals != kNone) {
    value_at = equals + 1;
    if (value_at < i && text[value_at] == '"') {
      ++value_at;
      if (text[i - 1] == '"') cut = i - 1;
    }
  }
  // `args[i-1]` after the cuts above: the '=' already became a NUL, as did a quote cut once.
  if (quoted && cut == kNone && i > 0 && text[i - 1] == '"' && !(equals != kNone && i - 1 == equals)) cut = i - 1;
  size_t name_end = equals != kNone ? equals : (cut != kNone && cut < i ? std::max(cut, args) : i);
  a.name_at = args;
  a.name = std::string(text.substr(args, name_end - args));
  if (value_at != kNone) {
    size_t value_end = cut != kNone ? std::max(cut, value_at) : i;
    value_end = std::min(std::max(value_end, value_at), i);
    value_at = std::min(value_at, i);
    a.value_at = value_at;
    a.value = std::string(text.substr(value_at, value_end - value_at));
  }
  return a;
}

}  // namespace

KernelCmdline read_kernel_cmdline(std::string_view text) {
  text = text.substr(0, text.find('\0'));
  KernelCmdline out;
  size_t at = 0;
  auto skip_spaces = [&] {
    while (at < text.size() && kernel_isspace(text[at])) ++at;
  };
  skip_spaces();
  while (at < text.size()) {
    KernelArg a = next_arg(text, at);
    at = a.end < text.size() ? a.end + 1 : a.end;
    skip_spaces();
    // parse_args() in kernel/params.c: `if (!val && strcmp(param, "--") == 0) return args;` after
    // next_arg(): a bare "--" (a quoted "\"--\"" too, its quotes gone) ends the kernel's
    // parameters, and start_kernel() hands the rest to init. parse_early_param() stops there too.
    if (!out.dashes_at && !a.value && a.name == "--") {
      out.dashes_at = a.begin;
      continue;
    }
    (out.dashes_at ? out.init_args : out.params).push_back(std::move(a));
  }
  return out;
}

bool kernel_param_name_is(std::string_view name, std::string_view wanted) {
  if (name.size() != wanted.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char a = name[i] == '-' ? '_' : name[i], b = wanted[i] == '-' ? '_' : wanted[i];
    if (a != b) return false;
  }
  return true;
}

std::optional<std::string> kernel_param_last(const KernelCmdline& line, std::string_view name) {
  std::optional<std::string> out;
  for (const auto& a : line.params)
    if (kernel_param_name_is(a.name, name)) out = a.value.value_or("");
  return out;
}

std::vector<std::string> kernel_param_options(const KernelCmdline& line, std::string_view name) {
  std::vector<std::string> out;
  for (const auto& a : line.params) {
    if (!a.value || !kernel_param_name_is(a.name, name)) continue;  // setup(NULL) reads nothing
    std::string_view rest = *a.value;
    for (;;) {
      size_t comma = rest.find(',');
      out.emplace_back(rest.substr(0, comma));
      if (comma == kNone) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return out;
}

std::optional<std::string> kernel_pci_option(const KernelCmdline& line, std::string_view key) {
  std::optional<std::string> out;
  const std::string prefix = std::string(key) + "=";
  for (const auto& option : kernel_param_options(line, "pci"))
    if (option.starts_with(prefix)) out = option.substr(prefix.size());
  return out;
}

}  // namespace p2paudit
