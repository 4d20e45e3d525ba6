// SPDX-License-Identifier: GPL-2.0-or-later
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "p2paudit/input_file.h"
#include "p2paudit/json_output.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/rule_analysis.h"
#include "p2paudit/policy/rules.h"

namespace p2paudit::cli {

namespace {

inline constexpr int kLintSchemaVersion = 1;

struct LintArgs {
  std::vector<std::string> files;
  bool alone = false;   // --no-default-rules: the files without the default policy
  bool strict = false;  // --strict/--werror: warnings fail too
};

nlohmann::ordered_json diagnostic_json(const policy::Diagnostic& d) {
  return {{"file", escape_text(d.file)}, {"line", d.line},    {"column", d.column},
          {"severity", d.warning ? "warning" : "error"},      {"message", d.message}};
}

// Every file is checked, so one run reports all broken files; positions go to stderr in the
// compiler's FILE:LINE:COLUMN form that editors jump to. Then the files that loaded are placed as
// `policy --rules F...` would place them, after the default policy unless --no-default-rules, and
// every deciding rule they shadow or that shadows one of theirs is a warning (rule_analysis.h).
// With --format json the same findings are one JSON document on stdout, for editors and CI:
//   {"schema_version": 1, "files": [{"file", "rules"}],
//    "diagnostics": [{"file", "line", "column", "severity", "message"}]}
// "rules" is null for a file that failed; "line" and "column" are null when the file was not read.
int run_lint(const GlobalOptions& global, const LintArgs& args) {
  if (global.format != "text" && global.format != "json") {
    print_error("rules lint: --format must be text or json");
    return kExitError;
  }
  const bool as_json = global.format == "json";
  nlohmann::ordered_json checked = nlohmann::ordered_json::array(), diagnostics = nlohmann::ordered_json::array();
  int status = kExitOk;
  std::vector<policy::RuleFile> loaded;
  for (const auto& file : args.files) {
    // Names from the command line need not be UTF-8; JSON strings must be.
    const std::string shown = escape_text(file);
    try {
      auto rules = policy::load_rule_file(file);
      if (as_json) checked.push_back({{"file", shown}, {"rules", rules.rules.size()}});
      else std::cout << shown << ": " << rules.rules.size() << " rules OK\n";
      loaded.push_back(std::move(rules));
      continue;
    } catch (const policy::RuleFileError& e) {
      for (const auto& d : e.diagnostics()) diagnostics.push_back(diagnostic_json(d));
      if (!as_json) std::cerr << escape_json_text(e.what()) << "\n";
    } catch (const InputError& e) {
      // Not read at all (missing, a FIFO, a directory, too large): the message names the file first.
      std::string message = escape_text(e.what());
      if (message.starts_with(shown + ": ")) message.erase(0, shown.size() + 2);
      diagnostics.push_back({{"file", shown}, {"line", nullptr}, {"column", nullptr}, {"severity", "error"}, {"message", message}});
      if (!as_json) std::cerr << escape_text(e.what()) << "\n";
    }
    if (as_json) checked.push_back({{"file", shown}, {"rules", nullptr}});
    status = kExitError;
  }
  if (!loaded.empty()) {
    // The context the files will be used in: the default policy's files (a file named on both
    // sides is read once, as the linted one), then the linted files in order.
    policy::RuleSet context;
    std::set<std::string> linted;
    for (const auto& f : loaded) linted.insert(f.path);
    if (!args.alone) {
      auto is_linted = [&](const std::string& path) {
        std::error_code ec;
        return std::any_of(linted.begin(), linted.end(), [&](const std::string& f) { return std::filesystem::equivalent(f, path, ec); });
      };
      try {
        for (const auto& path : policy::default_rule_files(rules_dir(global)))
          if (!is_linted(path)) context.add(policy::load_rule_file(path));
      } catch (const InputError& e) {
        throw InputError(fmt::format("the default policy, which the files are linted with: {} (--no-default-rules lints them alone)", e.what()));
      }
    }
    for (auto& f : loaded) context.add(std::move(f));
    for (const auto& d : policy::shadow_warnings(context, linted)) {
      diagnostics.push_back(diagnostic_json(d));
      if (!as_json) std::cerr << escape_text(d.str()) << "\n";
      if (args.strict) status = kExitError;
    }
  }
  if (as_json) {
    nlohmann::ordered_json out;
    out["schema_version"] = kLintSchemaVersion;
    out["files"] = std::move(checked);
    out["diagnostics"] = std::move(diagnostics);
    // Every string was escaped above; replace is a last guard, never an exception mid-output.
    std::cout << out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  }
  return status;
}

int run_facts(const GlobalOptions& global, bool markdown) {
  if (global.format == "json") {
    // schema_version first, as in every document (nlohmann::json would sort it after "facts").
    auto catalog = policy::fact_catalog_json();
    nlohmann::ordered_json out = {{"schema_version", catalog["schema_version"]}, {"facts", catalog["facts"]}};
    std::cout << out.dump(2) << "\n";
  } else if (global.format == "text") {
    std::cout << (markdown ? policy::fact_catalog_markdown() : policy::fact_catalog_text());
  } else {
    print_error("rules facts: --format must be text or json");
    return kExitError;
  }
  return kExitOk;
}

}  // namespace

void add_rules_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto* rules = app.add_subcommand("rules", "Check policy rule files; list the facts rules can test");
  rules->require_subcommand(1);

  auto lint_args = std::make_shared<LintArgs>();
  auto* lint = rules->add_subcommand(
      "lint", "Check rule files, placed after the default policy as policy --rules would: exit 0 if all are valid (warnings "
              "about shadowed rules too, unless --strict), else 2 with FILE:LINE:COLUMN messages (--format json: a document)");
  lint->add_option("FILE", lint_args->files, "Rule file (YAML)")->required();
  lint->add_flag("--no-default-rules", lint_args->alone, "Lint the files alone, not placed with the default policy");
  lint->add_flag("--strict,--werror", lint_args->strict, "Warnings (shadowed rules) fail too: exit 2");
  lint->callback([&global, lint_args, status] { *status = run_lint(global, *lint_args); });

  auto markdown = std::make_shared<bool>(false);
  auto* facts = rules->add_subcommand("facts", "List every fact a rule can test, with its type and meaning");
  facts->add_flag("--markdown", *markdown, "Print the catalogue as the Markdown tables of docs/policy-rules.md");
  facts->callback([&global, markdown, status] { *status = run_facts(global, *markdown); });
}

}  // namespace p2paudit::cli
