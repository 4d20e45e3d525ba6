// SPDX-License-Identifier: GPL-2.0-or-later
// The top-level --help text and the one-line usage errors of the p2paudit command line.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace p2paudit::cli {

// `p2paudit --help` prints the usage text (tools/p2paudit/usage.txt, embedded at build time; the
// README and the man page carry the same text); `COMMAND --help` and `--help-all` print CLI11's
// listing of the parser's options. Call before any subcommand is added: they inherit the formatter.
void use_usage_text(CLI::App& app);

// A parse error as one line, without the "p2paudit: " prefix: the message, and which --help to read.
std::string usage_error_message(const CLI::App& app, const CLI::ParseError& error);

}  // namespace p2paudit::cli
