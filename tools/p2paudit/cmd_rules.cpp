// SPDX-License-Identifier: GPL-2.0-or-later
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "p2paudit/input_file.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/rules.h"

namespace p2paudit::cli {

namespace {

inline constexpr int kLintSchemaVersion = 1;

// Every file is checked, so one run reports all broken files; positions go to stderr in the
// compiler's FILE:LINE:COLUMN form that editors jump to. With --format json the same findings are
// one JSON document on stdout, for editors and CI annotations:
//   {"schema_version": 1, "files": [{"file", "rules"}], "diagnostics": [{"file", "line", "column", "message"}]}
// "rules" is null for a file that failed; "line" and "column" are null when the file was not read.
int run_lint(const GlobalOptions& global, const std::vector<std::string>& files) {
  if (global.format != "text" && global.format != "json") {
    print_error("rules lint: --format must be text or json");
    return kExitError;
  }
  const bool as_json = global.format == "json";
  nlohmann::ordered_json checked = nlohmann::ordered_json::array(), diagnostics = nlohmann::ordered_json::array();
  int status = kExitOk;
  for (const auto& file : files) {
    // Names from the command line need not be UTF-8; JSON strings must be.
    const std::string shown = escape_text(file);
    try {
      auto rules = policy::load_rule_file(file);
      if (as_json) checked.push_back({{"file", shown}, {"rules", rules.rules.size()}});
      else std::cout << shown << ": " << rules.rules.size() << " rules OK\n";
      continue;
    } catch (const policy::RuleFileError& e) {
      for (const auto& d : e.diagnostics())
        diagnostics.push_back({{"file", escape_text(d.file)}, {"line", d.line}, {"column", d.column}, {"message", d.message}});
      if (!as_json) std::cerr << e.what() << "\n";
    } catch (const InputError& e) {
      // Not read at all (missing, a FIFO, a directory, too large): the message names the file first.
      std::string message = escape_text(e.what());
      if (message.starts_with(shown + ": ")) message.erase(0, shown.size() + 2);
      diagnostics.push_back({{"file", shown}, {"line", nullptr}, {"column", nullptr}, {"message", message}});
      if (!as_json) std::cerr << escape_text(e.what()) << "\n";
    }
    if (as_json) checked.push_back({{"file", shown}, {"rules", nullptr}});
    status = kExitError;
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

  auto files = std::make_shared<std::vector<std::string>>();
  auto* lint = rules->add_subcommand("lint", "Check rule files: exit 0 if all are valid, else 2 with FILE:LINE:COLUMN messages (--format json: a document)");
  lint->add_option("FILE", *files, "Rule file (YAML)")->required();
  lint->callback([&global, files, status] { *status = run_lint(global, *files); });

  auto markdown = std::make_shared<bool>(false);
  auto* facts = rules->add_subcommand("facts", "List every fact a rule can test, with its type and meaning");
  facts->add_flag("--markdown", *markdown, "Print the catalogue as the Markdown tables of docs/policy-rules.md");
  facts->callback([&global, markdown, status] { *status = run_facts(global, *markdown); });
}

}  // namespace p2paudit::cli
