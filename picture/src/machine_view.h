// SPDX-License-Identifier: GPL-2.0-or-later
// What the DOT and HTML pictures both draw: the tree as drawn (every function exactly once, even
// in a hostile capture), each node's kind and ACS state, and the pairs grouped by explanation.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "p2paudit/p2pdma.h"
#include "p2paudit/picture.h"
#include "p2paudit/policy/rules.h"

namespace p2paudit::picture {

enum class NodeKind { kRootPort, kSwitchUpstream, kSwitchDownstream, kBridge, kEndpoint };
NodeKind node_kind(const Function& f);
const char* kind_id(NodeKind k);     // "root_port", "switch_upstream", ... (HTML classes)
const char* kind_title(NodeKind k);  // "Root Port", "Switch Upstream Port", ...

// pci_bridge_has_acs_redir() of the function: nullopt when its ACS control could not be read.
std::optional<bool> acs_redirects(const Function& f);

struct DrawnRoot {
  std::string name;                  // "pci0000:00", or kNoHostBridge
  int numa_node = -1;                // of its root bus devices; -1 unknown
  std::string first_device;          // "00:00.0 [8086:29c0]" (what the whitelist is keyed by), "" none
  std::vector<size_t> functions;     // depth-first, parents before children, siblings in BDF order
};
inline constexpr const char* kNoHostBridge = "(host bridge not found)";

struct DrawnTree {
  std::vector<DrawnRoot> roots;      // host bridges by NUMA node, then name
  std::vector<std::optional<size_t>> parent;  // per function: the function drawn above it
  std::vector<size_t> root_of;       // per function: index into roots
  std::vector<size_t> depth;         // per function: 0 on a root bus
  bool numa_known = false;           // some root's NUMA node is known
};
DrawnTree drawn_tree(const Topology& topo);

// Pairs decided alike for alike kernel reasons share one explanation.
struct Explanation {
  MapType map_type = MapType::kUnknown;
  policy::Action action = policy::Action::kHostStaged;
  bool certain = true;  // false: unknown facts leave the decision open (`action` is the safe side)
  size_t policy_group = 0;
  std::pair<size_t, size_t> example{0, 0};  // its first pair (provider, client): the texts name it
  size_t pairs = 0;
};
struct PairGrid {
  static constexpr size_t kSelf = static_cast<size_t>(-1);
  std::vector<std::vector<size_t>> cell;  // [provider row][client column] -> explanation, kSelf
  std::vector<Explanation> explanations;
};
PairGrid pair_grid(Pairs& pairs);

// The grid one cell at a time (row by row, as pair_grid() fills it, gives the same numbers):
// memory grows with the explanations, not with the pairs.
class PairExplanations {
 public:
  explicit PairExplanations(Pairs& pairs);  // keeps a reference
  // The explanation of the pair (devices[r], devices[c]); PairGrid::kSelf when r == c.
  size_t cell(size_t r, size_t c);
  std::vector<Explanation> explanations;

 private:
  // What makes the kernel's reason differ between pairs that share a map type.
  using Key = std::tuple<size_t, MapType, bool, bool, bool, bool, unsigned, bool>;
  Pairs& pairs_;
  std::map<Key, size_t> explanation_of_;
};

// Short names of the devices that matter, by function index ("" for the others).
std::vector<std::string> short_names(const Topology& topo, const Pairs* pairs);

}  // namespace p2paudit::picture
