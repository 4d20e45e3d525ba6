// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/p2pdma.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "p2paudit/acs_meaning.h"
#include "p2paudit/input_file.h"
#include "p2paudit/platform.h"
#include "p2pdma_unknowns.h"

namespace p2paudit {

namespace {

// The kernel's seq_buf: vsnprintf into a fixed buffer; once a print does not fit, len becomes
// size + 1 and nothing more is written (so the printed list is cut at size - 1 characters).
struct SeqBuf {
  size_t size;
  std::string buffer;
  size_t len = 0;

  void printf(const std::string& s) {
    if (len < size) {
      buffer.append(s, 0, size - len - 1);
      if (len + s.size() < size) {
        len += s.size();
        return;
      }
    }
    len = size + 1;
  }
  // "acs_list.buffer[acs_list.len-1] = 0" drops the final ';', or writes past the end on overflow.
  std::string terminated() const { return len <= size ? buffer.substr(0, len - 1) : buffer; }
};

std::string name(const Topology& t, size_t dev) { return t.functions[dev].bdf.str(); }

bool is_x86_vendor(const std::string& v) {
  return v == "AuthenticAMD" || v == "GenuineIntel" || v == "HygonGenuine" || v == "CentaurHauls" ||
         v == "  Shanghai  ";
}

// One calc_map_type_and_dist() (or, before 5.4, upstream_bridge_distance()) call.
struct Call {
  size_t client = 0;
  MapType type = MapType::kUnknown;
  int dist = 0;
  std::optional<int> legacy;
  std::optional<size_t> common;
  std::vector<AcsTest> acs;
  bool acs_considered = false;
  bool thru = false;
  bool cpu_consulted = false;
  std::vector<HostBridgeCheck> host_bridges;
  std::vector<std::string> log, quiet;
};

// The decision code of one kernel release under one set of assumptions.
class Model {
 public:
  Model(const Topology& t, const KernelRules& r, unsigned assume) : t_(t), r_(r), assume_(assume) {}

  unsigned used = 0;           // unknowns this outcome depended on
  std::vector<Call> calls;

  // Mirrors pci_p2pdma_distance_many() in drivers/pci/p2pdma.c
  int pci_p2pdma_distance_many(size_t provider, const std::vector<size_t>& clients, bool verbose) {
    if (clients.empty()) return -1;
    bool not_supported = false;
    int total_dist = 0;
    for (size_t client : clients) {
      verbose_ = verbose;
      Call call = r_.map_types ? calc_map_type_and_dist(provider, client)
                               : upstream_bridge_distance(provider, client);
      int distance = call.dist;
      if (call.type == MapType::kNotSupported) not_supported = true;
      calls.push_back(std::move(call));
      if (not_supported && !verbose) break;
      total_dist += distance;
    }
    return not_supported ? -1 : total_dist;
  }

 private:
  std::optional<size_t> up(size_t dev) const { return pci_upstream_bridge(t_, dev); }

  // pci_warn()/dev_warn(): "<driver or bus name> <pci_name>: <text>". `always` lines are not
  // gated by verbose in the kernel.
  void warn(Call& call, size_t dev, const std::string& text, bool always = false) {
    const Function& f = t_.functions[dev];
    std::string line = fmt::format("{} {}: {}", f.log_name(), f.bdf.str(), text);
    if (always) call.quiet.push_back(line);
    if (always || verbose_) call.log.push_back(std::move(line));
  }

  bool has_acs_redir(Call& call, size_t dev, bool provider_chain) {
    const Function& f = t_.functions[dev];
    auto redirect = pci_bridge_has_acs_redir(f);
    call.acs.push_back({dev, provider_chain, f.acs, redirect});
    return redirect ? *redirect : (assume_ & kAcsUnknown) != 0;
  }

  // Mirrors the provider/client walk shared by calc_map_type_and_dist() and its predecessors:
  // the provider chain is tested for ACS redirect while looking for the first device that is
  // also on the client chain.
  void walk_provider_chain(Call& call, size_t provider, size_t client, SeqBuf& acs_list,
                           int& acs_cnt, int& dist_a, int& dist_b) {
    std::optional<size_t> a = provider;
    for (size_t guard = 0; a && guard <= t_.functions.size(); ++guard) {
      dist_b = 0;
      if (has_acs_redir(call, *a, true)) {
        acs_list.printf(name(t_, *a) + ";");
        ++acs_cnt;
      }
      std::optional<size_t> bb = client;
      for (size_t hops = 0; bb && hops <= t_.functions.size(); bb = up(*bb), ++dist_b, ++hops)
        if (*bb == *a) {
          call.common = a;
          return;
        }
      a = up(*a);
      ++dist_a;
    }
  }

  // The client chain below the common ancestor (which the provider walk already tested).
  void walk_client_chain(Call& call, size_t client, SeqBuf& acs_list, int& acs_cnt) {
    std::optional<size_t> bb = client;
    for (size_t hops = 0; bb && bb != call.common && hops <= t_.functions.size(); bb = up(*bb), ++hops)
      if (has_acs_redir(call, *bb, false)) {
        acs_list.printf(name(t_, *bb) + ";");
        ++acs_cnt;
      }
    // Only on this path do the redirect bits decide anything.
    for (const auto& test : call.acs)
      if (!test.redirect) used |= kAcsUnknown;
  }

  // Mirrors calc_map_type_and_dist() in drivers/pci/p2pdma.c (5.14+); for 5.4-5.13 the same
  // decision and messages of __upstream_bridge_distance()/upstream_bridge_distance{,_warn}().
  Call calc_map_type_and_dist(size_t provider, size_t client) {
    Call call;
    call.client = client;
    SeqBuf acs_list{r_.acs_list_size, {}};
    int acs_cnt = 0, dist_a = 0, dist_b = 0;
    walk_provider_chain(call, provider, client, acs_list, acs_cnt, dist_a, dist_b);
    bool acs_redirects = false;
    if (call.common) {
      call.acs_considered = true;
      walk_client_chain(call, client, acs_list, acs_cnt);
      call.dist = dist_a + dist_b;
      if (acs_cnt == 0) {
        call.type = MapType::kBusAddr;
        return call;
      }
      if (verbose_) {
        std::string list = acs_list.terminated();
        warn(call, client, fmt::format("ACS redirect is set between the client and provider ({})",
                                       name(t_, provider)));
        warn(call, client, fmt::format("to disable ACS redirect for this path, add the kernel "
                                       "parameter: pci=disable_acs_redir={}", list));
      }
      acs_redirects = true;
    } else {
      call.dist = dist_a + dist_b;  // ACS findings on this path are neither used nor printed
    }
    call.thru = true;
    call.type = MapType::kThruHostBridge;
    if (!cpu_supports(call) && !host_bridge_whitelist(call, provider, client, acs_redirects)) {
      if (verbose_)
        warn(call, client, fmt::format("cannot be used for peer-to-peer DMA as the client and provider "
                                       "({}) do not share an upstream bridge or whitelisted host bridge",
                                       name(t_, provider)));
      call.type = MapType::kNotSupported;
    }
    return call;
  }

  // Mirrors upstream_bridge_distance() and upstream_bridge_distance_warn() of 4.20-5.3: -1 with no
  // common upstream bridge, -2 with an ACS redirect, else the distance (5.2-5.3: 0x1000 + distance
  // between two AMD ZEN root complexes).
  Call upstream_bridge_distance(size_t provider, size_t client) {
    Call call;
    call.client = client;
    SeqBuf acs_list{r_.acs_list_size, {}};
    int acs_cnt = 0, dist_a = 0, dist_b = 0;
    walk_provider_chain(call, provider, client, acs_list, acs_cnt, dist_a, dist_b);
    call.dist = dist_a + dist_b;
    if (!call.common) {
      call.thru = true;
      if (r_.amd_zen_root_complex && root_complex_whitelist(call, provider) &&
          root_complex_whitelist(call, client)) {
        call.dist = 0x1000 + dist_a + dist_b;
        call.legacy = call.dist;
        call.type = MapType::kThruHostBridge;
        return call;
      }
      call.legacy = -1;
      call.type = MapType::kNotSupported;
      if (verbose_)
        warn(call, client, fmt::format("cannot be used for peer-to-peer DMA as the client and provider "
                                       "({}) do not share an upstream bridge", name(t_, provider)));
      return call;
    }
    call.acs_considered = true;
    walk_client_chain(call, client, acs_list, acs_cnt);
    if (acs_cnt == 0) {
      call.legacy = call.dist;
      call.type = MapType::kBusAddr;
      return call;
    }
    call.legacy = -2;
    call.type = MapType::kNotSupported;
    if (verbose_) {
      warn(call, client, fmt::format("cannot be used for peer-to-peer DMA as ACS redirect is set between "
                                     "the client and provider ({})", name(t_, provider)));
      warn(call, client, fmt::format("to disable ACS redirect for this path, add the kernel parameter: "
                                     "pci=disable_acs_redir={}", acs_list.terminated()));
    }
    return call;
  }

  bool cpu_supports(Call& call) {
    if (!r_.cpu_supports_p2pdma) return false;
    call.cpu_consulted = true;
    auto v = p2paudit::cpu_supports_p2pdma(t_.platform, r_);
    if (v) return *v;
    used |= kCpuUnknown;
    return (assume_ & kCpuUnknown) != 0;
  }

  std::optional<size_t> pci_host_bridge_dev(const HostBridge& host, HostBridgeCheck& check) {
    if (!host.root_bus_devices.empty()) check.first_device = host.root_bus_devices.front();
    bool root_port_unknown = false;
    auto root = p2paudit::pci_host_bridge_dev(t_, r_, host, (assume_ & kRootPortUnknown) != 0, root_port_unknown);
    if (root_port_unknown) used |= kRootPortUnknown;
    return root;
  }

  // Mirrors __host_bridge_whitelist() in drivers/pci/p2pdma.c
  bool host_bridge_whitelist_one(Call& call, const std::string& host_name, bool same_host_bridge,
                                 bool warn_missing) {
    HostBridgeCheck check;
    check.host_bridge = host_name;
    check.same_host_bridge = same_host_bridge;
    check.passed = false;
    const HostBridge* host = nullptr;
    for (const auto& hb : t_.host_bridges)
      if (hb.name == host_name) host = &hb;
    if (host) check.root_device = pci_host_bridge_dev(*host, check);
    if (check.root_device) {
      const Function& root = t_.functions[*check.root_device];
      check.entry = whitelist_entry(r_, root);
      if (check.entry) {
        check.refused_same_host_bridge = r_.whitelist[*check.entry].same_host_bridge && !same_host_bridge;
        check.passed = !check.refused_same_host_bridge;
      } else if ((check.unknown_entry = unknown_whitelist_entry(r_, root))) {
        used |= kWhitelistUnknown;
        if (assume_ & kWhitelistUnknown) {
          check.refused_same_host_bridge = r_.unknown_whitelist[*check.unknown_entry].same_host_bridge && !same_host_bridge;
          check.passed = !check.refused_same_host_bridge;
          call.host_bridges.push_back(check);
          return *check.passed;
        }
      }
      if (!check.entry && warn_missing && r_.whitelist_warning)
        warn(call, *check.root_device,
             fmt::format("Host bridge not in P2PDMA whitelist: {:04x}:{:04x}", root.vendor, root.device),
             true);
    }
    call.host_bridges.push_back(check);
    return *check.passed;
  }

  // Mirrors host_bridge_whitelist() in drivers/pci/p2pdma.c
  bool host_bridge_whitelist(Call& call, size_t provider, size_t client, bool warn_missing) {
    const std::string& host_a = t_.functions[provider].host_bridge;
    const std::string& host_b = t_.functions[client].host_bridge;
    if (host_a == host_b) return host_bridge_whitelist_one(call, host_a, true, warn_missing);
    return host_bridge_whitelist_one(call, host_a, false, warn_missing) &&
           host_bridge_whitelist_one(call, host_b, false, warn_missing);
  }

  // Mirrors root_complex_whitelist() of 5.2-5.3 (drivers/pci/p2pdma.c at 3306e99edf70)
  bool root_complex_whitelist(Call& call, size_t dev) {
    HostBridgeCheck check;
    check.host_bridge = t_.functions[dev].host_bridge;
    check.passed = false;
    if (const HostBridge* host = t_.host_bridge_of(t_.functions[dev])) {
      if (!host->root_bus_devices.empty()) check.first_device = host->root_bus_devices.front();
      check.root_device = slot_devfn0(t_, *host);
      check.passed = zen_root_complex(t_, *host);
    }
    call.host_bridges.push_back(check);
    return *check.passed;
  }

  const Topology& t_;
  const KernelRules& r_;
  unsigned assume_;
  bool verbose_ = true;
};

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

std::vector<size_t> chain(const Topology& t, size_t dev) {
  std::vector<size_t> out;
  for (std::optional<size_t> d = dev; d && out.size() <= t.functions.size(); d = pci_upstream_bridge(t, *d))
    out.push_back(*d);
  return out;
}

// IOMMU groups that clearing RR/CR on these devices would likely merge: a device below a port
// without ACS redirect joins the port's group, and functions of one slot join each other.
std::vector<int> groups_merged(const Topology& t, const std::vector<size_t>& devices) {
  std::set<int> groups;
  std::vector<size_t> todo;
  for (size_t d : devices) {
    todo.push_back(d);
    const Function& f = t.functions[d];
    for (size_t i = 0; i < t.functions.size(); ++i) {
      const Function& g = t.functions[i];
      if (i != d && g.bdf.domain == f.bdf.domain && g.bdf.bus == f.bdf.bus && g.bdf.dev == f.bdf.dev)
        todo.push_back(i);
    }
  }
  std::vector<bool> seen(t.functions.size());
  while (!todo.empty()) {
    size_t d = todo.back();
    todo.pop_back();
    if (seen[d]) continue;
    seen[d] = true;
    if (t.functions[d].iommu_group) groups.insert(*t.functions[d].iommu_group);
    for (size_t c : t.functions[d].children) todo.push_back(c);
  }
  if (groups.size() < 2) return {};
  return {groups.begin(), groups.end()};
}

// Earliest releases whose table trusts this root device, for the remedy.
std::vector<std::string> releases_whitelisting(const KernelRules& rules, const Function& root) {
  std::vector<std::string> out;
  for (const auto& e : rules.all_releases) {
    if (e.vendor != root.vendor || (e.device && *e.device != root.device)) continue;
    std::string when = e.releases.added ? "kernel " + e.releases.added->version() : "a kernel whose table has it";
    if (e.releases.removed) when += " to " + e.releases.removed->version() + " (exclusive)";
    else if (e.releases.added) when += "+";
    for (const auto& b : e.releases.backports) when += ", " + b.version() + "+ stable";
    out.push_back(fmt::format("boot {}, which whitelists {}{}", when, e.id(),
                              e.same_host_bridge ? " (same host bridge only)" : ""));
  }
  return out;
}

void explain(const Topology& t, const KernelRules& rules, size_t provider, const Call& call,
             PairVerdict& v) {
  const Function& p = t.functions[provider];
  const Function& c = t.functions[v.client];
  std::vector<std::string> redirecting;
  std::vector<size_t> redirecting_idx;
  if (call.acs_considered)
    for (const auto& test : call.acs) {
      if (test.redirect.value_or(false)) {
        redirecting.push_back(name(t, test.function));
        redirecting_idx.push_back(test.function);
      } else if (!test.redirect) {
        v.remedy.acs_unknown.push_back(name(t, test.function));
      }
    }
  v.remedy.disable_acs_redir = join(redirecting, ";");
  // The out-of-tree ACS override patch makes pci_acs_enabled() pretend isolation for IOMMU grouping;
  // pci_bridge_has_acs_redir() reads the ACS control register, which it leaves as it is. Said on
  // every pair, whatever decides it: a reporter booted with it to rule ACS out of a refusal that
  // had nothing to do with ACS (source: https://github.com/TSUMUGI-XE/b70-dual-tp2, two B70s on an
  // Intel client host, and https://github.com/intel/compute-runtime/issues/935, same reporter).
  if (auto override = cmdline_param(t.platform.cmdline, "pcie_acs_override"))
    v.remedy.acs_override = acs_override_text(*override);
  v.remedy.iommu_groups_merged = groups_merged(t, redirecting_idx);

  std::string path;
  if (!call.common) {
    path = "provider and client share no upstream bridge";
  } else if (!redirecting.empty() || !v.remedy.acs_unknown.empty()) {
    path = fmt::format("below their common upstream device {}, ACS redirect (RR/CR/EC) is set on {}{}",
                       name(t, *call.common), redirecting.empty() ? "no device read" : join(redirecting, ", "),
                       v.remedy.acs_unknown.empty() ? ""
                           : fmt::format(" and not readable on {}", join(v.remedy.acs_unknown, ", ")));
  }

  if (rules.config_p2pdma == Known::kNo) {
    v.reason = fmt::format("CONFIG_PCI_P2PDMA is not set in this kernel's config ({})",
                           rules.config_source.empty() ? "unknown source" : rules.config_source);
    v.remedy.alternatives.push_back("boot a kernel built with CONFIG_PCI_P2PDMA=y (Debian 7.2+, Ubuntu 6.5 HWE and later)");
    return;
  }
  if (!rules.p2pdma) {
    v.reason = fmt::format("kernel {} has no P2PDMA (added in 4.20)", rules.release.version());
    v.remedy.alternatives.push_back("boot kernel 4.20 or later built with CONFIG_PCI_P2PDMA=y");
    return;
  }

  switch (v.map_type) {
    case MapType::kBusAddr:
      v.reason = provider == v.client
                     ? "provider and client are the same function and it has no ACS redirect set"
                     : fmt::format("provider and client share the upstream device {} and no device on "
                                   "the path has ACS redirect (RR/CR/EC) set",
                                   name(t, *call.common));
      return;
    case MapType::kUnknown:
      v.reason = fmt::format("cannot be known from {}: {}", t.input_kind(), join(v.unknowns, "; "));
      break;
    case MapType::kThruHostBridge:
    case MapType::kNotSupported:
      if (!rules.map_types) {
        v.reason = call.legacy == -2
                       ? fmt::format("{}, and kernels before 5.4 refuse such a path (-2)", path)
                   : call.legacy == -1
                       ? fmt::format("{}, and kernels before 5.4 refuse such a path (-1)", path)
                       : fmt::format("{}, and both host bridges are AMD ZEN root complexes "
                                     "(1022:1450, no IOMMU): allowed with distance 0x1000 + hops", path);
        break;
      }
      if (call.cpu_consulted && v.cpu_supports_p2pdma.value_or(false)) {
        v.reason = fmt::format("{}, so the traffic goes through the host bridge, which the kernel "
                               "allows because the boot CPU is AMD family {:#x} (>= 0x17)",
                               path, t.platform.cpu_family.value_or(0));
        break;
      }
      {
        std::vector<std::string> hbs;
        for (const auto& hb : call.host_bridges) {
          if (!hb.root_device) {
            hbs.push_back(fmt::format("host bridge {} has no device the whitelist is keyed by{}", hb.host_bridge,
                                      hb.first_device ? fmt::format(" (its root bus's first device {} is "
                                                                    "not at devfn 00.0{})",
                                                                    name(t, *hb.first_device),
                                                                    rules.root_device_rule ==
                                                                            RootDeviceRule::kFirstAtDevfn0OrRootPort
                                                                        ? " and not a Root Port" : "")
                                                      : ""));
          } else if (hb.refused_same_host_bridge) {
            hbs.push_back(fmt::format("host bridge {}'s root device {} is whitelisted only within one host bridge "
                                      "(REQ_SAME_HOST_BRIDGE), and provider ({}) and client ({}) are under "
                                      "different host bridges",
                                      hb.host_bridge, device_label(t, *hb.root_device), p.host_bridge, c.host_bridge));
          } else if (hb.entry) {
            const auto& e = rules.whitelist[*hb.entry];
            hbs.push_back(fmt::format("host bridge {}'s root device {} is whitelisted ({}{})", hb.host_bridge,
                                      device_label(t, *hb.root_device), e.id(),
                                      e.comment.empty() ? "" : ", \"" + e.comment + "\""));
          } else {
            hbs.push_back(fmt::format("host bridge {}'s root device {} is not in this kernel's whitelist", hb.host_bridge,
                                      device_label(t, *hb.root_device)));
          }
        }
        if (v.map_type == MapType::kThruHostBridge)
          v.reason = fmt::format("{}, so the traffic goes through the host bridge, which the kernel allows: {}",
                                 path, join(hbs, "; "));
        else if (v.map_type == MapType::kNotSupported)
          v.reason = fmt::format("{}, so the traffic would go through the host bridge, which the kernel "
                                 "refuses: {}{}", path, join(hbs, "; "),
                                 call.cpu_consulted ? " (and the boot CPU is not AMD Zen)" : "");
      }
      break;
  }

  if (v.map_type == MapType::kThruHostBridge || !call.thru) return;
  // What would make the kernel allow it.
  if (!call.common)
    v.remedy.alternatives.push_back(
        "put both devices below one PCIe switch without ACS redirect: the traffic then stays below it "
        "(BUS_ADDR)");
  for (const auto& hb : call.host_bridges) {
    if (hb.passed.value_or(true)) continue;
    if (hb.root_device && hb.unknown_entry) {
      // In the table of the releases that carry the backport; whether this build does is the unknown.
      for (auto& r : releases_whitelisting(rules, t.functions[*hb.root_device])) v.remedy.alternatives.push_back(r);
    } else if (hb.root_device && !hb.entry) {
      const Function& root = t.functions[*hb.root_device];
      const std::string root_name = pci_device_name(t, root);
      v.remedy.whitelist = fmt::format("host bridge {:04x}:{:04x}{} is not in this kernel's whitelist",
                                       root.vendor, root.device, root_name.empty() ? "" : " (" + root_name + ")");
      for (auto& r : releases_whitelisting(rules, root)) v.remedy.alternatives.push_back(r);
      // The entry's status from the rule data, as `p2paudit whitelist` reads it (kernel_rules.h).
      EntryRuleStatus status = entry_rule_status(rules, root.vendor, root.device);
      v.remedy.alternatives.push_back(
          status.status == EntryDataStatus::kDoNotSubmit
              ? fmt::format("stage through host memory ({})", status.remedy_text())
              : fmt::format("stage through host memory ({}; `--assume-whitelisted {}` shows the answer with one)",
                            status.remedy_text(), status.id));
    } else if (!hb.root_device && hb.first_device &&
               rules.root_device_rule != RootDeviceRule::kFirstAtDevfn0OrRootPort &&
               t.functions[*hb.first_device].pcie_type == PcieType::kRootPort) {
      v.remedy.alternatives.push_back(fmt::format(
          "boot kernel 5.19+, which also keys the whitelist by a Root Port at any devfn ({})", name(t, *hb.first_device)));
    }
    break;  // the kernel stops at the first host bridge that fails
  }
  if (rules.map_types && !v.cpu_supports_p2pdma.value_or(false))
    v.remedy.alternatives.push_back("move the devices to an AMD Zen host (boot CPU family >= 0x17, kernel 5.9+), "
                                    "whose kernel allows any host-bridge path");
}

}  // namespace

std::string device_label(const Topology& t, size_t dev) {
  const Function& f = t.functions[dev];
  std::string label = fmt::format("{} [{:04x}:{:04x}]", f.bdf.str(), f.vendor, f.device);
  if (std::string name = pci_device_name(t, f); !name.empty()) label += " (" + name + ")";
  return label;
}

const char* to_string(MapType t) {
  switch (t) {
    case MapType::kBusAddr: return "BUS_ADDR";
    case MapType::kThruHostBridge: return "THRU_HOST_BRIDGE";
    case MapType::kNotSupported: return "NOT_SUPPORTED";
    case MapType::kUnknown: return "UNKNOWN";
  }
  return "UNKNOWN";
}

std::optional<size_t> pci_upstream_bridge(const Topology& topo, size_t dev) {
  const Function* f = &topo.functions[dev];
  if (f->is_virtfn && f->physfn) f = &topo.functions[*f->physfn];
  return f->parent;
}

std::optional<bool> pci_bridge_has_acs_redir(const Function& dev) {
  switch (dev.acs.state) {
    case CapState::kAbsent: return false;
    case CapState::kPresent: return (dev.acs.ctrl & kAcsRedirectBits) != 0;
    case CapState::kUnknown: return std::nullopt;
  }
  return std::nullopt;
}

std::optional<bool> cpu_supports_p2pdma(const Platform& platform, const KernelRules& rules) {
  if (!rules.cpu_supports_p2pdma) return false;
  const std::string& arch = platform.arch;
  bool x86 = arch == "x86" || arch == "x86_64" || arch == "i386" || arch == "i686";
  if (arch.empty()) {
    // Only x86 /proc/cpuinfo has vendor_id strings like these.
    if (platform.cpu_vendor.empty()) return std::nullopt;
    x86 = is_x86_vendor(platform.cpu_vendor);
  }
  if (!x86) return false;
  if (platform.cpu_vendor.empty()) return std::nullopt;
  if (platform.cpu_vendor != "AuthenticAMD") return false;
  if (!platform.cpu_family) return std::nullopt;
  return *platform.cpu_family >= 0x17;
}

std::optional<size_t> slot_devfn0(const Topology& topo, const HostBridge& host) {
  for (size_t d : host.root_bus_devices)
    if (topo.functions[d].bdf.devfn() == 0) return d;
  return std::nullopt;
}

std::optional<size_t> pci_host_bridge_dev(const Topology& topo, const KernelRules& rules, const HostBridge& host,
                                          bool assume_root_port, bool& root_port_unknown) {
  if (host.root_bus_devices.empty()) return std::nullopt;
  if (rules.root_device_rule == RootDeviceRule::kSlotDevfn0) return slot_devfn0(topo, host);
  size_t root = host.root_bus_devices.front();
  const Function& f = topo.functions[root];
  if (f.bdf.devfn() == 0) return root;
  if (rules.root_device_rule != RootDeviceRule::kFirstAtDevfn0OrRootPort) return std::nullopt;
  if (f.pcie_type == PcieType::kRootPort) return root;
  // Whether it is a Root Port, when its capability list was not readable.
  bool type_known = f.is_pcie || !f.is_bridge() || f.config_readable >= 0x100 || f.config_readable >= f.config_size;
  if (type_known) return std::nullopt;
  root_port_unknown = true;
  return assume_root_port ? std::optional<size_t>(root) : std::nullopt;
}

std::optional<size_t> whitelist_entry(const KernelRules& rules, const Function& root) {
  for (size_t i = 0; i < rules.whitelist.size(); ++i) {
    const WhitelistEntry& e = rules.whitelist[i];
    if (root.vendor == e.vendor && (!e.device || root.device == *e.device)) return i;
  }
  return std::nullopt;
}

std::optional<size_t> unknown_whitelist_entry(const KernelRules& rules, const Function& root) {
  for (size_t i = 0; i < rules.unknown_whitelist.size(); ++i) {
    const WhitelistEntry& e = rules.unknown_whitelist[i];
    if (root.vendor == e.vendor && (!e.device || root.device == *e.device)) return i;
  }
  return std::nullopt;
}

std::string unknown_whitelist_note(const KernelRules& rules, size_t i) {
  const WhitelistEntry& e = rules.unknown_whitelist[i];
  const KernelRelease& r = rules.release;
  std::string stable;
  for (const auto& b : e.releases.backports)
    if (b.major == r.major && b.minor == r.minor) stable = b.version();
  return fmt::format("whether kernel {} carries whitelist entry {} (stable {} and later {}.{}.y{}) is not known: "
                     "its release string hides the stable patch level",
                     r.text, e.id(), stable, r.major, r.minor,
                     e.releases.added ? ", mainline " + e.releases.added->version() : "");
}

std::string unknown_whitelist_action(const KernelRules& rules, size_t i) {
  const WhitelistEntry& e = rules.unknown_whitelist[i];
  const KernelRelease& r = rules.release;
  return fmt::format(
      "find the stable release kernel {0} is built from (Ubuntu: `cat /proc/version_signature`; Debian: `cat "
      "/proc/version`) or look for commit {1} in its changelog (`apt changelog linux-image-{0}`, `rpm -q "
      "--changelog kernel-core`), then pass `--kernel {2}.{3}.N` with that patch level, or "
      "`--assume-whitelisted {4}` if it carries the entry",
      r.text, e.commit.empty() ? "(unnamed)" : e.commit, r.major, r.minor, e.id());
}

std::vector<std::string> unknown_whitelist_notes(const Topology& topo, const KernelRules& rules) {
  std::vector<std::string> out;
  if (rules.unknown_whitelist.empty()) return out;
  std::set<size_t> seen;
  for (const auto& host : topo.host_bridges)
    for (bool assume_root_port : {false, true}) {
      bool root_port_unknown = false;
      auto root = pci_host_bridge_dev(topo, rules, host, assume_root_port, root_port_unknown);
      if (!root || whitelist_entry(rules, topo.functions[*root])) continue;
      if (auto i = unknown_whitelist_entry(rules, topo.functions[*root]); i && seen.insert(*i).second)
        out.push_back(unknown_whitelist_note(rules, *i) + "; to know: " + unknown_whitelist_action(rules, *i));
    }
  return out;
}

bool zen_root_complex(const Topology& topo, const HostBridge& host) {
  auto root = slot_devfn0(topo, host);  // pci_get_slot(host->bus, PCI_DEVFN(0, 0))
  // iommu_present(): an IOMMU driver registered for the PCI bus exposes IOMMU groups.
  if (topo.platform.iommu_groups_present || !root) return false;
  const Function& f = topo.functions[*root];
  return f.vendor == 0x1022 && f.device == 0x1450;
}

ManyVerdict pci_p2pdma_distance_many(const Topology& topo, const KernelRules& rules, size_t provider,
                                     const std::vector<size_t>& clients) {
  struct Run {
    unsigned assume;
    int ret;
    std::vector<Call> calls;
  };
  std::vector<Run> runs;
  unsigned explore = 0;
  for (;;) {
    runs.clear();
    unsigned used = 0;
    for (unsigned assume = 0; assume <= kAllUnknowns; ++assume) {
      if (assume & ~explore) continue;
      Model m(topo, rules, assume);
      int ret = m.pci_p2pdma_distance_many(provider, clients, true);
      used |= m.used;
      runs.push_back({assume, ret, std::move(m.calls)});
    }
    if (!(used & ~explore)) break;
    explore |= used;
  }
  const bool refused_by_config = rules.config_p2pdma == Known::kNo || !rules.p2pdma;

  ManyVerdict out;
  out.provider = provider;
  const Run& base = runs.front();
  for (size_t i = 0; i < base.calls.size(); ++i) {
    const Call& call = base.calls[i];
    PairVerdict v;
    v.provider = provider;
    v.client = call.client;
    v.distance = call.dist;
    v.legacy_return = call.legacy;
    v.provider_chain = chain(topo, provider);
    v.client_chain = chain(topo, call.client);
    v.common_ancestor = call.common;
    v.acs_tests = call.acs;
    v.acs_considered = call.acs_considered;
    v.host_bridges = call.host_bridges;
    v.cpu_rule_consulted = call.cpu_consulted;
    if (call.cpu_consulted) v.cpu_supports_p2pdma = cpu_supports_p2pdma(topo.platform, rules);

    std::set<MapType> maps;
    std::set<int> dists;
    bool logs_agree = true;
    for (const Run& run : runs) {
      const Call& other = run.calls[i];
      maps.insert(other.type);
      dists.insert(other.type == MapType::kNotSupported ? -1 : other.dist);
      v.through_host_bridge = v.through_host_bridge || other.thru;
      logs_agree = logs_agree && other.log == call.log;
      for (size_t h = 0; h < v.host_bridges.size() && h < other.host_bridges.size(); ++h)
        if (other.host_bridges[h].passed != v.host_bridges[h].passed) v.host_bridges[h].passed.reset();
    }
    v.map_type = maps.size() == 1 ? *maps.begin() : MapType::kUnknown;
    if (dists.size() == 1) v.p2pdma_distance = *dists.begin();
    v.kernel_log = call.log;
    v.quiet_log = call.quiet;
    v.kernel_log_complete = logs_agree;

    // An unknown matters when flipping only it changes this client's outcome.
    unsigned differing = 0;
    for (const Run& a : runs)
      for (const Run& b : runs) {
        unsigned flip = a.assume ^ b.assume;
        if ((flip & (flip - 1)) || !(b.assume & flip)) continue;
        if (a.calls[i].type != b.calls[i].type || a.calls[i].log != b.calls[i].log) differing |= flip;
      }
    if (differing & kAcsUnknown)
      for (const auto& test : call.acs)
        if (!test.redirect) {
          const Function& f = topo.functions[test.function];
          v.unknowns.push_back(
              topo.lspci_dump.empty()
                  ? fmt::format("the ACS control register of {} was not readable ({} of {} config bytes; run as root)",
                                f.bdf.str(), f.config_readable, f.config_size)
                  : fmt::format("the ACS control register of {} is not in the dump: it has {} bytes of config space "
                                "for {}; rerun `sudo lspci -xxxx`",
                                f.bdf.str(), f.config_readable, f.bdf.str()));
        }
    if (differing & kCpuUnknown) {
      v.remedy.cpu_unknown = true;
      v.unknowns.push_back(topo.lspci_dump.empty()
                               ? "the boot CPU (x86 AMD family >= 0x17?) is not known from this sysroot"
                               : "the boot CPU (x86 AMD family >= 0x17?) is not in the dump: pass --dump-cpu");
    }
    if (differing & kRootPortUnknown)
      v.unknowns.push_back("whether a root bus's first device is a PCIe Root Port was not readable");
    if (differing & kWhitelistUnknown)
      for (const auto& hb : call.host_bridges)
        if (hb.unknown_entry) {
          std::string note = unknown_whitelist_note(rules, *hb.unknown_entry);
          if (std::find(v.unknowns.begin(), v.unknowns.end(), note) != v.unknowns.end()) continue;
          v.unknowns.push_back(note);
          v.remedy.unknown_whitelist.push_back(unknown_whitelist_action(rules, *hb.unknown_entry));
        }

    if (refused_by_config) {
      v.map_type = MapType::kNotSupported;
      v.p2pdma_distance = -1;
      v.kernel_log.clear();
      v.quiet_log.clear();
      v.kernel_log_complete = true;
      v.unknowns.clear();
      v.remedy.cpu_unknown = false;
      v.remedy.unknown_whitelist.clear();
    }
    explain(topo, rules, provider, call, v);
    if (!v.remedy.acs_override.empty()) v.reason += " (" + v.remedy.acs_override + ")";
    out.clients.push_back(std::move(v));
  }

  std::set<int> results;
  for (const Run& run : runs) results.insert(run.ret);
  if (refused_by_config) results = {-1};
  if (results.size() == 1) out.result = *results.begin();
  for (const auto& v : out.clients) {
    out.kernel_log.insert(out.kernel_log.end(), v.kernel_log.begin(), v.kernel_log.end());
    out.kernel_log_complete = out.kernel_log_complete && v.kernel_log_complete;
  }
  return out;
}

PairVerdict pci_p2pdma_distance(const Topology& topo, const KernelRules& rules, size_t provider,
                                size_t client) {
  return std::move(pci_p2pdma_distance_many(topo, rules, provider, {client}).clients.front());
}

}  // namespace p2paudit
