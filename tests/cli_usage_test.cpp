// SPDX-License-Identifier: GPL-2.0-or-later
// The usage text, the README, the man page and the shell completions against the binary's parser;
// usage errors as one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "test_support.h"

namespace p2paudit::test {
namespace {

const std::string kSource = P2PAUDIT_SOURCE_DIR;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string tool_path() { return shell_quote(P2PAUDIT_TOOL); }

CommandResult tool(const std::string& args) { return run_command(tool_path() + " " + args + " 2>/dev/null"); }

struct SplitRun {
  int status = -1;
  std::string out, err;
};

// Runs a shell command line, keeping stdout and stderr apart.
SplitRun run_split(const std::string& command) {
  // ctest runs the tests of this file in parallel processes: one file per process and call.
  static int calls = 0;
  std::string err_file =
      ::testing::TempDir() + "/cli_usage_stderr." + std::to_string(getpid()) + "." + std::to_string(++calls);
  auto r = run_command("{ " + command + " ; } 2>" + shell_quote(err_file));
  SplitRun split{r.status, r.output, read_file(err_file)};
  std::filesystem::remove(err_file);
  return split;
}

// The README's usage block: the fenced block after the comment that names usage.txt.
std::string readme_usage_block() {
  std::string readme = read_file(kSource + "/README.md");
  size_t marker = readme.find("<!-- The text of `p2paudit --help`");
  if (marker == std::string::npos) return "(no usage marker in README.md)";
  size_t open = readme.find("```\n", marker);
  size_t close = readme.find("\n```\n", open + 4);
  if (open == std::string::npos || close == std::string::npos) return "(no fenced block after the marker)";
  return readme.substr(open + 4, close + 1 - (open + 4));
}

// The first words of the usage text's command entries: topology, snapshot, ..., rules.
std::set<std::string> usage_commands() {
  std::set<std::string> commands;
  bool in_commands = false;
  for (const auto& line : lines_of(read_file(kSource + "/tools/p2paudit/usage.txt"))) {
    if (line == "Commands:") in_commands = true;
    else if (line.empty()) in_commands = false;
    else if (in_commands && line.size() > 2 && line[2] != ' ' && line[2] != '(')
      commands.insert(line.substr(2, line.find(' ', 2) - 2));
  }
  return commands;
}

// Option names in a CLI11 listing ("  -o,--output TEXT  Write..."), up to its subcommands.
std::set<std::string> parser_options(const std::string& help) {
  std::set<std::string> options;
  for (const auto& line : lines_of(help)) {
    if (line.rfind("Subcommands:", 0) == 0) break;
    std::istringstream words(line);
    std::string first;
    if (!(words >> first) || first[0] != '-') continue;
    std::istringstream names(first);
    for (std::string name; std::getline(names, name, ',');) options.insert(name);
  }
  return options;
}

// The commands the parser knows: the unindented lines after "Subcommands:" in --help-all.
std::set<std::string> parser_commands() {
  std::set<std::string> commands;
  bool in_subcommands = false;
  for (const auto& line : lines_of(tool("--help-all").output)) {
    if (line.rfind("Subcommands:", 0) == 0) in_subcommands = true;
    else if (in_subcommands && !line.empty() && line[0] != ' ') commands.insert(line);
  }
  return commands;
}

std::set<std::string> long_options(const std::set<std::string>& options) {
  std::set<std::string> out;
  for (const auto& o : options)
    if (o.rfind("--", 0) == 0) out.insert(o);
  return out;
}

// Where two texts first differ ("line N: 'A' vs 'B'"); empty when they are the same.
std::string first_difference(const std::string& a, const std::string& b) {
  auto la = lines_of(a), lb = lines_of(b);
  for (size_t i = 0; i < std::max(la.size(), lb.size()); ++i) {
    std::string x = i < la.size() ? "'" + la[i] + "'" : "(end)", y = i < lb.size() ? "'" + lb[i] + "'" : "(end)";
    if (x != y) return "line " + std::to_string(i + 1) + ": " + x + " vs " + y;
  }
  return a == b ? "" : "the same lines, different line ends";
}

std::string joined(const std::set<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

TEST(Usage, HelpPrintsTheUsageTextAndTheReadmeShowsTheSame) {
  std::string usage = read_file(kSource + "/tools/p2paudit/usage.txt");
  ASSERT_FALSE(usage.empty());
  auto help = tool("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_EQ(first_difference(help.output, usage), "")
      << "p2paudit --help (first) is not tools/p2paudit/usage.txt (second): rebuild, cmake embeds the file";
  EXPECT_EQ(tool("-h").output, help.output);
  EXPECT_EQ(first_difference(readme_usage_block(), usage), "")
      << "README.md's usage block (first) is not tools/p2paudit/usage.txt (second), which `p2paudit --help` "
         "prints: copy usage.txt, unchanged, between the ``` lines after the comment that names it in README.md";
}

TEST(Usage, FitsAWideTerminal) {
  for (const auto& line : lines_of(read_file(kSource + "/tools/p2paudit/usage.txt")))
    EXPECT_LE(line.size(), 100u) << line;
}

TEST(Usage, ListsEveryCommandOfTheParserAndNoOther) {
  auto parsed = parser_commands();
  ASSERT_FALSE(parsed.empty()) << "no Subcommands: section in --help-all";
  EXPECT_EQ(joined(usage_commands()), joined(parsed));
  for (const auto& command : {std::string("rules lint"), std::string("rules facts")})
    EXPECT_EQ(tool(command + " --help").status, 0) << command;
}

// Every option the parser accepts is in the usage text, and every option the text names exists.
TEST(Usage, NamesEveryOptionOfTheParserAndNoOther) {
  std::set<std::string> parsed = parser_options(tool("--help-all").output);
  ASSERT_TRUE(parsed.count("--sysroot")) << "the global options of --help-all were not found";
  for (const auto& command : usage_commands()) {
    auto help = tool(command + " --help");
    EXPECT_EQ(help.status, 0) << command;
    for (const auto& o : parser_options(help.output)) parsed.insert(o);
  }
  for (const auto& sub : {"lint", "facts"})
    for (const auto& o : parser_options(tool(std::string("rules ") + sub + " --help").output)) parsed.insert(o);
  // What-if, dump and hidden options are described together on one line: --dump-cpu... and --assume-*.
  std::string usage = read_file(kSource + "/tools/p2paudit/usage.txt");
  for (const auto& o : parsed)
    EXPECT_NE(usage.find(o), std::string::npos) << o << " is accepted but not in tools/p2paudit/usage.txt";
  std::set<std::string> named;
  for (size_t at = usage.find("--"); at != std::string::npos; at = usage.find("--", at + 2)) {
    size_t end = at + 2;
    while (end < usage.size() && (std::isalnum(static_cast<unsigned char>(usage[end])) || usage[end] == '-')) ++end;
    if (end > at + 2 && usage[end - 1] != '-') named.insert(usage.substr(at, end - at));
  }
  for (const auto& o : named) EXPECT_TRUE(parsed.count(o)) << o << " is in the usage text but not accepted";
}

// Each bad command line: exit 2, nothing on stdout, one line "p2paudit: ..." naming the mistake.
TEST(UsageErrors, AreOneLineAndExitTwo) {
  struct Case {
    std::string args, named;
  };
  const std::vector<Case> cases = {
      {"--no-such-option", "--no-such-option"},
      {"--format yaml", "yaml"},
      {"--color sometimes", "sometimes"},
      {"--kernel", "--kernel"},
      {"no-such-command", "no-such-command"},
      {"explain", "PROVIDER"},
      {"check gpu0", "pair"},
      {"snapshot", "--output"},
      {"rules", "subcommand"},
      {"policy --require peer", "--require"},
      {"matrix --details extra", "extra"},
      {"--format env topology", "env"},
  };
  for (const auto& c : cases) {
    SplitRun r = run_split(tool_path() + " " + c.args);
    EXPECT_EQ(r.status, 2) << c.args;
    EXPECT_EQ(r.out, "") << c.args;
    auto lines = lines_of(r.err);
    ASSERT_EQ(lines.size(), 1u) << c.args << ":\n" << r.err;
    EXPECT_EQ(lines[0].rfind("p2paudit: ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find(c.named), std::string::npos) << c.args << ": " << lines[0];
    EXPECT_EQ(lines[0].find("SplitRun with --help"), std::string::npos) << lines[0];
  }
}

TEST(UsageErrors, NameTheHelpOfTheCommandGiven) {
  SplitRun r = run_split(tool_path() + " policy --require peer");
  EXPECT_NE(r.err.find("policy takes no option --require"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("p2paudit policy --help"), std::string::npos) << r.err;
  r = run_split(tool_path() + " no-such-command");
  EXPECT_NE(r.err.find("p2paudit --help"), std::string::npos) << r.err;
  r = run_split(tool_path() + " --format env topology");  // a global option's mistake
  EXPECT_NE(r.err.find("see p2paudit --help"), std::string::npos) << r.err;
  r = run_split(tool_path() + " aggregate --format yaml");  // the command's own --format
  EXPECT_NE(r.err.find("see p2paudit aggregate --help"), std::string::npos) << r.err;
}

// A slip of the fingers gets the nearest name the parser has (edit distance, or the one name it
// begins), on one line, exit 2; a word near nothing gets no guess.
TEST(UsageErrors, SuggestTheNearestCommandOrOption) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"polcy", "unknown command 'polcy'; did you mean 'policy'? see p2paudit --help"},
      {"toplogy", "unknown command 'toplogy'; did you mean 'topology'? see p2paudit --help"},
      {"matirx --all", "unknown command 'matirx'; did you mean 'matrix'? see p2paudit --help"},
      {"frobnicate", "unknown command 'frobnicate'; p2paudit --help lists the commands"},
      {"--sysrot /", "unknown option --sysrot; did you mean --sysroot? see p2paudit --help"},
      {"--sysrot=/ topology", "unknown option --sysrot; did you mean --sysroot? see p2paudit --help"},
      {"--verb", "unknown option --verb; did you mean --verbose? see p2paudit --help"},
      {"--frobnicate", "unknown option --frobnicate; see p2paudit --help"},
      {"policy --al", "policy takes no option --al; did you mean --all? see p2paudit policy --help"},
      {"policy --no-prboe", "policy takes no option --no-prboe; did you mean --no-probe? see p2paudit policy --help"},
      {"policy --sysrot /", "unknown option --sysrot; did you mean --sysroot? see p2paudit --help"},
      {"--formt json topology", "unknown option --formt; did you mean --format? see p2paudit --help"},
      {"snapshot --outptu x.tar.gz", "snapshot takes no option --outptu; did you mean --output? see p2paudit snapshot --help"},
      {"rules nosuch", "unknown rules subcommand 'nosuch'; see p2paudit rules --help"},
      {"rules lnit x.yaml", "unknown rules subcommand 'lnit'; did you mean 'lint'? see p2paudit rules --help"},
      {"rules fatcs", "unknown rules subcommand 'fatcs'; did you mean 'facts'? see p2paudit rules --help"},
      {"rules", "rules needs a subcommand: lint or facts; see p2paudit rules --help"},
  };
  for (const auto& [args, message] : cases) {
    SplitRun r = run_split(tool_path() + " " + args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(r.err, "p2paudit: " + message + "\n") << args;
  }
}

TEST(ManPage, RendersWithoutWarningsAndNamesEveryCommandAndOption) {
  std::string page = shell_quote(P2PAUDIT_MANPAGE);
  SplitRun groff = run_split("groff -ww -z -man " + page);
  EXPECT_EQ(groff.status, 0);
  EXPECT_EQ(groff.err, "") << "groff warns about " << P2PAUDIT_MANPAGE;
  SplitRun man = run_split("LC_ALL=C MANWIDTH=80 MANPAGER=cat man --warnings -l " + page + " | cat");
  EXPECT_EQ(man.status, 0);
  EXPECT_EQ(man.err, "");
  for (const char* heading : {"NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "OPTIONS", "EXIT STATUS", "ENVIRONMENT",
                              "FILES", "EXAMPLES", "SEE ALSO"})
    EXPECT_NE(man.out.find(std::string("\n") + heading + "\n"), std::string::npos) << heading;
  for (const char* variable : {"P2PAUDIT_RULES_DIR", "NO_COLOR"})
    EXPECT_NE(man.out.find(std::string("\n       ") + variable + "\n"), std::string::npos) << variable;
  for (const auto& command : usage_commands()) EXPECT_NE(man.out.find("\n       " + command), std::string::npos) << command;
  for (const auto& option : long_options(parser_options(tool("--help-all").output)))
    EXPECT_NE(man.out.find(option), std::string::npos) << option;
  for (const auto& line : lines_of(man.out)) EXPECT_LE(line.size(), 80u) << line;
}

// Completes `line` (the cursor at its end) with the bash completion and returns COMPREPLY's words.
std::set<std::string> bash_complete(const std::string& line) {
  std::string script = "source " + shell_quote(kSource + "/completions/p2paudit.bash") +
                       " && COMP_LINE=" + shell_quote(line) + " && COMP_POINT=${#COMP_LINE}" +
                       " && read -ra COMP_WORDS <<<\"$COMP_LINE\" && COMP_CWORD=${#COMP_WORDS[@]}" +
                       (line.back() == ' ' ? "" : " && COMP_CWORD=$((COMP_CWORD - 1))") +
                       " && _p2paudit && printf '%s\\n' \"${COMPREPLY[@]}\"";
  auto r = run_command("bash --norc --noprofile -c " + shell_quote(script));
  std::set<std::string> words;
  for (const auto& w : lines_of(r.output))
    if (!w.empty()) words.insert(w);
  return words;
}

TEST(BashCompletion, LoadsAndRegistersTheFunction) {
  auto r = run_command("bash --norc --noprofile -c " +
                       shell_quote("source " + shell_quote(kSource + "/completions/p2paudit.bash") +
                                   " && complete -p p2paudit"));
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("-F _p2paudit p2paudit"), std::string::npos) << r.output;
}

TEST(BashCompletion, CompletesCommandsAndFormats) {
  EXPECT_EQ(joined(bash_complete("p2paudit pol")), "policy");
  EXPECT_EQ(joined(bash_complete("p2paudit ")), joined(usage_commands()));
  EXPECT_EQ(joined(bash_complete("p2paudit --format ")), "dot env html json prom text");
  EXPECT_EQ(joined(bash_complete("p2paudit --format=j")), "json");
  EXPECT_EQ(joined(bash_complete("p2paudit aggregate --format ")), "csv csv-wide json text");
  EXPECT_EQ(joined(bash_complete("p2paudit check --require ")), "host_staged peer");
  EXPECT_EQ(joined(bash_complete("p2paudit rules ")), "facts lint");
}

// Every option the parser accepts for a command (and globally), and no other.
TEST(BashCompletion, OffersEachCommandsOptions) {
  auto global = long_options(parser_options(tool("--help-all").output));
  auto listed = usage_commands();
  std::vector<std::string> commands(listed.begin(), listed.end());
  commands.push_back("rules lint");
  commands.push_back("rules facts");
  for (const auto& command : commands) {
    if (command == "rules") continue;
    auto expected = global;
    for (const auto& o : long_options(parser_options(tool(command + " --help").output))) expected.insert(o);
    EXPECT_EQ(joined(bash_complete("p2paudit " + command + " --")), joined(expected)) << command;
  }
}

TEST(BashCompletion, CompletesTheSysrootsDevices) {
  std::string root = ::testing::TempDir() + "/completion_sysroot";
  std::filesystem::create_directories(root + "/sys/bus/pci/devices");
  for (const char* bdf : {"0000:00:01.0", "0000:3b:00.0", "0001:3c:00.1"})
    std::ofstream(root + "/sys/bus/pci/devices/" + bdf);
  EXPECT_EQ(joined(bash_complete("p2paudit --sysroot " + root + " explain ")), "0000:00:01.0 0000:3b:00.0 0001:3c:00.1");
  EXPECT_EQ(joined(bash_complete("p2paudit --sysroot=" + root + " check 0000:00:01.0 000")),
            "0000:00:01.0 0000:3b:00.0 0001:3c:00.1");
  // Bash replaces what follows the last colon (a word break), so the words start there.
  EXPECT_EQ(joined(bash_complete("p2paudit --sysroot " + root + " explain 0000:3")), "3b:00.0");
  EXPECT_EQ(joined(bash_complete("p2paudit --sysroot " + root + " --assume-acs-off 0001:")), "3c:00.1");
}

TEST(ZshCompletion, ParsesAndNamesEveryCommandAndOption) {
  std::string file = kSource + "/completions/_p2paudit";
  auto r = run_command("zsh -n " + shell_quote(file) + " 2>&1");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "");
  std::string text = read_file(file);
  for (const auto& command : usage_commands()) EXPECT_NE(text.find("'" + command + ":"), std::string::npos) << command;
  std::set<std::string> options = parser_options(tool("--help-all").output);
  for (const auto& command : usage_commands())
    for (const auto& o : parser_options(tool(command + " --help").output)) options.insert(o);
  for (const auto& o : parser_options(tool("rules facts --help").output)) options.insert(o);
  for (const auto& o : long_options(options)) EXPECT_NE(text.find(o), std::string::npos) << o;
}

}  // namespace
}  // namespace p2paudit::test
