#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"

namespace p2paudit::cli {

std::string rules_dir(const GlobalOptions& global) {
  if (!global.rules_dir.empty()) return global.rules_dir;
  if (const char* env = std::getenv("P2PAUDIT_RULES_DIR"); env && *env) return env;
  if (std::filesystem::is_directory(P2PAUDIT_RULES_DIR)) return P2PAUDIT_RULES_DIR;
  return P2PAUDIT_SOURCE_RULES_DIR;
}

void print_error(const std::string& message) { std::cerr << "p2paudit: " << message << "\n"; }

Topology load_topology(const GlobalOptions& global) {
  Sysroot root = Sysroot::open(global.sysroot);
  return read_topology(root);
}

}  // namespace p2paudit::cli
