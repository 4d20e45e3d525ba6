#include <iostream>
#include <memory>

#include "commands.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/rules.h"

namespace p2paudit::cli {

namespace {

// Every file is checked, so one run reports all broken files; positions go to stderr in the
// compiler's FILE:LINE:COLUMN form that editors jump to.
int run_lint(const std::vector<std::string>& files) {
  int status = kExitOk;
  for (const auto& file : files) {
    try {
      auto rules = policy::load_rule_file(file);
      std::cout << file << ": " << rules.rules.size() << " rules OK\n";
    } catch (const InputError& e) {
      std::cerr << e.what() << "\n";
      status = kExitError;
    }
  }
  return status;
}

int run_facts(const GlobalOptions& global, bool markdown) {
  if (global.format == "json") std::cout << policy::fact_catalog_json().dump(2) << "\n";
  else if (global.format == "text") std::cout << (markdown ? policy::fact_catalog_markdown() : policy::fact_catalog_text());
  else {
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
  auto* lint = rules->add_subcommand("lint", "Check rule files: exit 0 if all are valid, else 2 with FILE:LINE:COLUMN messages");
  lint->add_option("FILE", *files, "Rule file (YAML)")->required();
  lint->callback([files, status] { *status = run_lint(*files); });

  auto markdown = std::make_shared<bool>(false);
  auto* facts = rules->add_subcommand("facts", "List every fact a rule can test, with its type and meaning");
  facts->add_flag("--markdown", *markdown, "Print the catalogue as the Markdown tables of docs/policy-rules.md");
  facts->callback([&global, markdown, status] { *status = run_facts(global, *markdown); });
}

}  // namespace p2paudit::cli
