// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/kernel_rules.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/strict_yaml.h"
#include "p2paudit/yaml_fields.h"

namespace p2paudit {

namespace {

std::optional<int> parse_int(std::string_view s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<uint16_t> parse_hex16(std::string_view s) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty() || s.size() > 4) return std::nullopt;
  unsigned v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return static_cast<uint16_t>(v);
}

// One YAML rule file, read strictly: every problem is "file:line:column: message" (yaml_fields.h).
class YamlFile : public YamlFields {
 public:
  using YamlFields::YamlFields;

  bool boolean(const YamlNode& map, const char* key) const {
    const YamlNode n = map[key];
    if (!n || n.IsNull()) return false;
    if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "false")) return n.Scalar() == "true";
    fail(n, fmt::format("'{}' must be true or false", key));
  }
  uint16_t hex_id(const YamlNode& map, const char* key) const {
    auto text = scalar(map, key, true);
    auto v = parse_hex16(text);
    if (!v) fail(map[key], fmt::format("'{}' must be a 16-bit hex ID, got {}", key, quoted_input(text)));
    return *v;
  }
  std::optional<KernelRelease> release(const YamlNode& map, const char* key, bool required) const {
    auto text = scalar(map, key, required);
    if (text.empty()) return std::nullopt;
    auto r = KernelRelease::parse(text);
    if (!r) fail(map[key], fmt::format("'{}' is not a kernel release: {}", key, quoted_input(text)));
    return r;
  }
  ReleaseRange releases(const YamlNode& map, bool required) const {
    ReleaseRange range{release(map, "added", required), release(map, "removed", false), {}};
    const YamlNode b = map["backports"];
    if (b && !b.IsNull()) {
      if (!b.IsSequence()) fail(b, "'backports' must be a list of releases");
      for (const auto& item : b) {
        auto r = item.IsScalar() ? KernelRelease::parse(item.Scalar()) : std::nullopt;
        if (!r) fail(item, "backport must be a kernel release X.Y.Z");
        range.backports.push_back(*r);
      }
    }
    if (range.added && range.removed && !(*range.added < *range.removed))
      fail(map, "'removed' must be a later release than 'added'");
    return range;
  }
};

void check_schema(const YamlFile& f) {
  auto v = f.scalar(f.root(), "schema", true);
  if (v != "1") f.fail(f.root()["schema"], fmt::format("unsupported schema {} (expected 1)", quoted_input(v)));
}

std::vector<WhitelistEntry> read_entries(const YamlFile& f, bool releases_required) {
  f.check_keys(f.root(), {"schema", "entries"});
  check_schema(f);
  const YamlNode list = f.root()["entries"];
  if (!list || !list.IsSequence()) f.fail(f.root(), "'entries' must be a list");
  std::vector<WhitelistEntry> out;
  std::set<std::string> seen;
  for (const auto& item : list) {
    f.check_keys(item, {"vendor", "device", "same_host_bridge", "comment", "added", "removed",
                        "commit", "backports"});
    WhitelistEntry e;
    e.vendor = f.hex_id(item, "vendor");
    if (f.scalar(item, "device", true) != "any") e.device = f.hex_id(item, "device");
    e.same_host_bridge = f.boolean(item, "same_host_bridge");
    e.comment = f.scalar(item, "comment", false);
    e.commit = f.scalar(item, "commit", false);
    e.releases = f.releases(item, releases_required);
    e.origin = f.where(item);
    if (!seen.insert(e.id()).second) f.fail(item, fmt::format("duplicate entry {}", e.id()));
    out.push_back(std::move(e));
  }
  return out;
}

constexpr std::string_view kKnownFeatures[] = {
    feature::kP2pdma,          feature::kAmdZenRootComplex,    feature::kMapTypes,
    feature::kWhitelistTable,  feature::kCpuSupportsP2pdma,    feature::kRootDeviceFirstEntry,
    feature::kAcsListStackBuffer, feature::kWhitelistWarning,  feature::kRootPortAnyDevfn,
    feature::kWhitelistAnyDevice,
};

}  // namespace

std::optional<KernelRelease> KernelRelease::parse(std::string_view text) {
  // uname's release field holds at most 64 bytes; what follows the version is the distribution's
  // (CONFIG_LOCALVERSION, packaging), kept for display and notes, so it is held to the characters
  // real releases use: never '/', spaces, control characters or bytes that are not UTF-8.
  constexpr size_t kMaxReleaseLength = 64;
  if (text.empty() || text.size() > kMaxReleaseLength) return std::nullopt;
  KernelRelease r;
  r.text = std::string(text);
  int parts[3] = {0, 0, 0};
  int n = 0;
  size_t pos = 0;
  for (;;) {  // "X.Y" or "X.Y.Z", every part digits
    size_t digits = pos;
    while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
    auto v = parse_int(text.substr(pos, digits - pos));
    if (!v) return std::nullopt;
    parts[n++] = *v;
    pos = digits;
    if (n == 3 || pos == text.size() || text[pos] != '.') break;
    ++pos;
  }
  if (n < 2) return std::nullopt;
  std::string_view suffix = text.substr(pos);
  auto suffix_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '+' || c == '~';
  };
  // "6.1x" or "6.1.2.3" is not a release with a suffix but a mistyped release.
  if (!suffix.empty() && suffix[0] != '-' && suffix[0] != '+' && suffix[0] != '~') return std::nullopt;
  if (!std::all_of(suffix.begin(), suffix.end(), suffix_char)) return std::nullopt;
  std::tie(r.major, r.minor, r.patch) = std::tie(parts[0], parts[1], parts[2]);
  if (suffix.starts_with("-rc")) {
    suffix.remove_prefix(3);
    size_t d = 0;
    while (d < suffix.size() && std::isdigit(static_cast<unsigned char>(suffix[d]))) ++d;
    if (auto v = parse_int(suffix.substr(0, d))) r.rc = *v;
  }
  return r;
}

std::string KernelRelease::version() const {
  std::string v = patch ? fmt::format("{}.{}.{}", major, minor, patch) : fmt::format("{}.{}", major, minor);
  if (rc) v += fmt::format("-rc{}", rc);
  return v;
}

std::strong_ordering KernelRelease::operator<=>(const KernelRelease& o) const {
  return std::tie(major, minor, patch) <=> std::tie(o.major, o.minor, o.patch);
}

bool ReleaseRange::contains(const KernelRelease& r) const {
  if (removed && !(r < *removed)) return false;
  if (!added || !(r < *added)) return true;
  for (const auto& b : backports)
    if (b.major == r.major && b.minor == r.minor && !(r < b)) return true;
  return false;
}

std::string WhitelistEntry::id() const {
  return device ? fmt::format("{:04x}:{:04x}", vendor, *device) : fmt::format("{:04x}:any", vendor);
}

const KernelFeature* KernelRuleData::find_feature(std::string_view id) const {
  for (const auto& f : features)
    if (f.id == id) return &f;
  return nullptr;
}

const char* to_string(RootDeviceRule r) {
  switch (r) {
    case RootDeviceRule::kSlotDevfn0: return "pci_get_slot(00.0)";
    case RootDeviceRule::kFirstAtDevfn0: return "first device, at 00.0";
    case RootDeviceRule::kFirstAtDevfn0OrRootPort: return "first device, at 00.0 or a Root Port";
  }
  return "";
}

std::vector<WhitelistEntry> parse_whitelist_file(std::string_view text, const std::string& origin) {
  YamlFile f(text, origin);
  return read_entries(f, false);
}

std::vector<WhitelistEntry> load_whitelist_file(const std::filesystem::path& path) {
  return parse_whitelist_file(read_input_file(path.string(), kMaxRuleFileBytes), path.string());
}

UpstreamData parse_upstream_file(std::string_view text, const std::string& origin) {
  YamlFile f(text, origin);
  f.check_keys(f.root(), {"schema", "entries", "reports", "emulated_host_bridges"});
  check_schema(f);
  auto list = [&](const char* key) {
    const YamlNode n = f.root()[key];
    if (!n || !n.IsSequence()) f.fail(f.root(), fmt::format("'{}' must be a list", key));
    return n;
  };
  auto https = [&](const YamlNode& item, const char* key) {
    auto v = f.scalar(item, key, true);
    if (!v.starts_with("https://") || v.size() > 512 || v.find_first_of(" <>\"") != std::string::npos)
      f.fail(item[key], fmt::format("'{}' must be one https:// URL, got {}", key, quoted_input(v)));
    return v;
  };
  auto bounded = [&](const YamlNode& item, const char* key, size_t max) {
    auto v = f.scalar(item, key, true);
    if (v.empty() || v.size() > max) f.fail(item[key], fmt::format("'{}' must be 1 to {} bytes", key, max));
    return v;
  };
  UpstreamData out;
  std::set<std::pair<uint16_t, uint16_t>> seen;
  for (const auto& item : list("entries")) {
    f.check_keys(item, {"vendor", "device", "state", "id", "date", "subject", "where", "link"});
    UpstreamEntry e;
    e.vendor = f.hex_id(item, "vendor"), e.device = f.hex_id(item, "device");
    e.state = f.scalar(item, "state", true);
    if (e.state != "queued" && e.state != "proposed")
      f.fail(item["state"], fmt::format("'state' must be queued or proposed, got {}", quoted_input(e.state)));
    e.id = bounded(item, "id", 128);
    e.date = f.scalar(item, "date", true);
    bool date_ok = e.date.size() == 10 && e.date[4] == '-' && e.date[7] == '-';
    for (size_t i = 0; date_ok && i < e.date.size(); ++i)
      date_ok = i == 4 || i == 7 || (e.date[i] >= '0' && e.date[i] <= '9');
    if (!date_ok) f.fail(item["date"], fmt::format("'date' must be YYYY-MM-DD, got {}", quoted_input(e.date)));
    e.subject = bounded(item, "subject", 200);
    e.where = bounded(item, "where", 200);
    e.link = https(item, "link");
    e.origin = f.where(item);
    if (!seen.insert({e.vendor, e.device}).second)
      f.fail(item, fmt::format("duplicate entry {:04x}:{:04x}", e.vendor, e.device));
    out.entries.push_back(std::move(e));
  }
  for (const auto& item : list("reports")) {
    f.check_keys(item, {"vendor", "device", "verdict", "link", "summary"});
    UpstreamReport r;
    r.vendor = f.hex_id(item, "vendor"), r.device = f.hex_id(item, "device");
    r.verdict = f.scalar(item, "verdict", true);
    if (r.verdict != "wrong_data")
      f.fail(item["verdict"], fmt::format("'verdict' must be wrong_data, got {}", quoted_input(r.verdict)));
    r.link = https(item, "link");
    r.summary = bounded(item, "summary", 400);
    r.origin = f.where(item);
    out.reports.push_back(std::move(r));
  }
  std::set<std::pair<uint16_t, uint16_t>> emulated;
  for (const auto& item : list("emulated_host_bridges")) {
    f.check_keys(item, {"vendor", "device", "name"});
    EmulatedHostBridge b;
    b.vendor = f.hex_id(item, "vendor"), b.device = f.hex_id(item, "device");
    b.name = bounded(item, "name", 120);
    b.origin = f.where(item);
    if (!emulated.insert({b.vendor, b.device}).second)
      f.fail(item, fmt::format("duplicate host bridge {:04x}:{:04x}", b.vendor, b.device));
    out.emulated.push_back(std::move(b));
  }
  return out;
}

KernelRuleData parse_kernel_rule_data(std::string_view whitelist_text, const std::string& whitelist_origin,
                                      std::string_view eras_text, const std::string& eras_origin) {
  KernelRuleData data;
  {
    YamlFile f(whitelist_text, whitelist_origin);
    data.whitelist = read_entries(f, true);
    data.files.push_back(whitelist_origin);
  }
  YamlFile f(eras_text, eras_origin);
  f.check_keys(f.root(), {"schema", "newest_known_release", "features"});
  check_schema(f);
  auto newest = f.release(f.root(), "newest_known_release", true);
  data.newest_known = *newest;
  const YamlNode list = f.root()["features"];
  if (!list || !list.IsSequence()) f.fail(f.root(), "'features' must be a list");
  for (const auto& item : list) {
    f.check_keys(item, {"id", "description", "added", "removed", "backports", "commit"});
    KernelFeature feat{f.scalar(item, "id", true), f.scalar(item, "description", false),
                       f.scalar(item, "commit", false), f.releases(item, true)};
    bool known = false;
    for (auto k : kKnownFeatures) known = known || feat.id == k;
    if (!known) f.fail(item["id"], fmt::format("unknown feature {}", quoted_input(feat.id)));
    if (data.find_feature(feat.id)) f.fail(item, fmt::format("duplicate feature '{}'", feat.id));
    data.features.push_back(std::move(feat));
  }
  for (auto k : kKnownFeatures)
    if (!data.find_feature(k)) f.fail(list, fmt::format("feature '{}' is missing", k));
  data.files.push_back(eras_origin);
  return data;
}

KernelRuleData load_kernel_rule_data(const std::filesystem::path& dir) {
  const std::string whitelist = (dir / "whitelist.yaml").string(), eras = (dir / "eras.yaml").string();
  KernelRuleData data = parse_kernel_rule_data(read_input_file(whitelist, kMaxRuleFileBytes), whitelist,
                                               read_input_file(eras, kMaxRuleFileBytes), eras);
  const std::string upstream = (dir / "upstream.yaml").string();
  data.upstream = parse_upstream_file(read_input_file(upstream, kMaxRuleFileBytes), upstream);
  return data;
}

WhitelistEntry parse_assumed_whitelisted(std::string_view spec) {
  auto bad = [&]() -> InputError {
    return InputError(fmt::format(
        "--assume-whitelisted {}: expected VVVV:DDDD[:same-host-bridge] (hex IDs, DDDD may be 'any')",
        quoted_input(spec)));
  };
  WhitelistEntry e;
  e.origin = fmt::format("--assume-whitelisted {}", spec);
  auto c1 = spec.find(':');
  if (c1 == std::string_view::npos) throw bad();
  auto vendor = parse_hex16(spec.substr(0, c1));
  std::string_view rest = spec.substr(c1 + 1);
  auto c2 = rest.find(':');
  std::string_view dev = rest.substr(0, c2);
  if (!vendor) throw bad();
  e.vendor = *vendor;
  if (dev != "any") {
    auto d = parse_hex16(dev);
    if (!d) throw bad();
    e.device = *d;
  }
  if (c2 != std::string_view::npos) {
    if (rest.substr(c2 + 1) != "same-host-bridge") throw bad();
    e.same_host_bridge = true;
  }
  return e;
}

// The upstream stable release a distribution kernel of release r was built from, where the
// running kernel says it: Debian's /proc/version ends "... Debian 6.1.55-1 (2023-09-29)",
// Ubuntu's /proc/version_signature is "Ubuntu 5.15.0-25.25-generic 5.15.30". Only an X.Y.Z of
// r's own X.Y counts.
std::optional<KernelRelease> stable_base(const Platform& platform, const KernelRelease& r) {
  auto of = [&](std::string_view word) -> std::optional<KernelRelease> {
    word = word.substr(0, word.find_first_of("-~+"));
    if (std::count(word.begin(), word.end(), '.') != 2) return std::nullopt;
    auto v = KernelRelease::parse(word);
    if (!v || v->major != r.major || v->minor != r.minor) return std::nullopt;
    return v;
  };
  std::string_view sig = platform.kernel_version_signature;
  if (sig.starts_with("Ubuntu ") && sig.find(' ', 7) != std::string_view::npos)
    if (auto v = of(sig.substr(sig.rfind(' ') + 1))) return v;
  std::string_view version = platform.kernel_version;
  if (auto at = version.find(" Debian "); at != std::string_view::npos) {
    std::string_view word = version.substr(at + 8);
    return of(word.substr(0, word.find(' ')));
  }
  return std::nullopt;
}

KernelRules select_kernel_rules(const KernelRuleData& data, const Platform& platform,
                                const KernelRuleOptions& options) {
  KernelRules rules;
  std::optional<KernelRelease> release;
  if (!options.kernel.empty()) {
    release = KernelRelease::parse(options.kernel);
    if (!release)
      throw InputError(fmt::format(
          "--kernel '{}': expected X.Y or X.Y.Z in digits, optionally followed by a distribution suffix "
          "that starts with '-', '+' or '~' (6.1, 6.1.192, 6.8.0-31-generic)",
          escape_text(options.kernel)));
    rules.release_source = "--kernel";
  } else if (!platform.kernel_release.empty()) {
    release = KernelRelease::parse(platform.kernel_release);
    if (!release)
      throw InputError(fmt::format(
          "cannot parse the kernel release '{}' (proc/sys/kernel/osrelease); pass --kernel X.Y[.Z]",
          escape_text(platform.kernel_release)));
    rules.release_source = "proc/sys/kernel/osrelease";
  }
  if (!release) {
    release = data.newest_known;
    rules.release_source = "newest known";
    rules.notes.push_back(fmt::format(
        "the sysroot does not say which kernel runs (no proc/sys/kernel/osrelease); using the newest "
        "rules known ({}); pass --kernel X.Y to choose", data.newest_known.version()));
  } else {
    rules.requested = release->text;
  }
  if (std::tie(release->major, release->minor) > std::tie(data.newest_known.major, data.newest_known.minor)) {
    rules.notes.push_back(fmt::format(
        "kernel {} is newer than the newest release these rules describe ({}); using that release's "
        "rules", release->version(), data.newest_known.version()));
    KernelRelease newest = data.newest_known;
    newest.text = release->text;
    release = newest;
  }
  rules.release = *release;
  const KernelRelease& r = rules.release;
  auto has = [&](std::string_view id) { return data.find_feature(id)->releases.contains(r); };

  rules.p2pdma = has(feature::kP2pdma);
  rules.amd_zen_root_complex = has(feature::kAmdZenRootComplex);
  rules.map_types = has(feature::kMapTypes);
  rules.whitelist_table = has(feature::kWhitelistTable);
  rules.cpu_supports_p2pdma = has(feature::kCpuSupportsP2pdma);
  rules.root_device_rule = has(feature::kRootPortAnyDevfn)       ? RootDeviceRule::kFirstAtDevfn0OrRootPort
                           : has(feature::kRootDeviceFirstEntry) ? RootDeviceRule::kFirstAtDevfn0
                                                                 : RootDeviceRule::kSlotDevfn0;
  rules.acs_list_size = has(feature::kAcsListStackBuffer) ? 128 : 4096;
  rules.whitelist_warning = has(feature::kWhitelistWarning);
  rules.whitelist_any_device = has(feature::kWhitelistAnyDevice);
  if (!rules.p2pdma)
    rules.notes.push_back(fmt::format("kernel {} predates P2PDMA (4.20): every pair is refused", r.version()));

  // Distribution kernels ("5.15.0-25-generic") do not say which stable patch level they carry:
  // an entry a stable release of this X.Y backported may or may not be in the build.
  bool distro_patch_unknown = r.patch == 0 && r.rc == 0 && r.text.find('-') != std::string::npos;
  // Unless the running kernel names the stable release it was built from.
  std::optional<KernelRelease> base = options.kernel.empty() && distro_patch_unknown ? stable_base(platform, r) : std::nullopt;
  if (base) distro_patch_unknown = false;
  if (rules.whitelist_table) {
    for (const auto& e : data.whitelist) {
      if (e.releases.contains(base ? *base : r)) {
        rules.whitelist.push_back(e);
      } else if (distro_patch_unknown &&
                 std::any_of(e.releases.backports.begin(), e.releases.backports.end(),
                             [&](const KernelRelease& b) { return b.major == r.major && b.minor == r.minor; })) {
        rules.unknown_whitelist.push_back(e);
      }
    }
  }
  rules.table_entries = rules.whitelist.size();
  rules.all_releases = data.whitelist;
  rules.upstream = data.upstream;
  rules.rule_files = data.files;
  std::vector<WhitelistEntry> extra;
  for (const auto& file : options.kernel_rules) {
    rules.rule_files.push_back(escape_bytes(file));  // shown and put in JSON: a name need not be UTF-8
    for (auto& e : load_whitelist_file(file))
      if (e.releases.contains(r)) extra.push_back(std::move(e));
  }
  for (const auto& spec : options.assume_whitelisted) extra.push_back(parse_assumed_whitelisted(spec));
  for (auto& e : extra) {
    if (!rules.whitelist_table) {
      rules.notes.push_back(fmt::format("kernel {} has no host-bridge whitelist; {} ({}) is ignored",
                                        r.version(), e.id(), e.origin));
      continue;
    }
    if (!e.device && !rules.whitelist_any_device)
      rules.notes.push_back(fmt::format(
          "{} ({}): kernels before 7.1 cannot express PCI_ANY_ID; treated as matching any device",
          e.id(), e.origin));
    rules.notes.push_back(fmt::format("assumed whitelisted (not in kernel {}'s table): {}{} ({})",
                                      r.version(), e.id(),
                                      e.same_host_bridge ? " REQ_SAME_HOST_BRIDGE" : "", e.origin));
    rules.whitelist.push_back(std::move(e));
  }

  rules.config_p2pdma = platform.config_p2pdma;
  rules.config_source = escape_bytes(platform.kernel_config_source);  // named after the sysroot's release
  auto running = KernelRelease::parse(platform.kernel_release);
  if (!options.kernel.empty() && rules.config_p2pdma != Known::kUnknown &&
      (!running || !(*running == *release))) {
    // The sysroot's config describes the kernel it runs, not the one asked about.
    rules.notes.push_back(fmt::format(
        "the sysroot's kernel config ({}) belongs to {}, not to --kernel {}: assuming "
        "CONFIG_PCI_P2PDMA=y", rules.config_source.empty() ? "unknown source" : rules.config_source,
        platform.kernel_release.empty() ? "another kernel" : escape_text(platform.kernel_release), options.kernel));
    rules.config_p2pdma = Known::kYes;
  } else if (rules.config_p2pdma == Known::kUnknown)
    rules.notes.push_back(
        "the kernel config was not found (/boot/config-*, /proc/config.gz): assuming "
        "CONFIG_PCI_P2PDMA=y; without it every pair is refused");
  return rules;
}

KernelRules load_kernel_rules(const std::filesystem::path& dir, const Platform& platform,
                              const KernelRuleOptions& options) {
  return select_kernel_rules(load_kernel_rule_data(dir), platform, options);
}

}  // namespace p2paudit

namespace p2paudit {

const char* to_string(EntryDataStatus s) {
  switch (s) {
    case EntryDataStatus::kFixedIn: return "fixed in";
    case EntryDataStatus::kDoNotSubmit: return "do not submit";
    case EntryDataStatus::kQueued: return "queued upstream";
    case EntryDataStatus::kProposed: return "proposed upstream";
    case EntryDataStatus::kOpen: return "";
  }
  return "";
}

EntryRuleStatus entry_rule_status(const KernelRules& rules, uint16_t vendor, uint16_t device) {
  EntryRuleStatus out;
  out.id = fmt::format("{:04x}:{:04x}", vendor, device);
  // The first release after the analysed one whose table has the entry.
  std::optional<KernelRelease> first;
  for (const auto& e : rules.all_releases) {
    if (e.vendor != vendor || (e.device && *e.device != device) || !e.releases.added) continue;
    if (*e.releases.added <= rules.release || (first && *first <= *e.releases.added)) continue;
    first = e.releases.added;
  }
  if (first) out.fixed_in = fmt::format("{}.{}", first->major, first->minor);
  for (const auto& r : rules.upstream.reports)
    if (r.vendor == vendor && r.device == device) {
      out.reports.push_back(fmt::format("{}: {}", r.link, escape_line(r.summary)));
      if (r.verdict == "wrong_data" && !out.wrong_data) out.wrong_data = r;
    }
  for (const auto& e : rules.upstream.entries)
    if (e.vendor == vendor && e.device == device) out.upstream = e;
  out.status = !out.fixed_in.empty()                          ? EntryDataStatus::kFixedIn
               : out.wrong_data                               ? EntryDataStatus::kDoNotSubmit
               : out.upstream && out.upstream->state == "queued" ? EntryDataStatus::kQueued
               : out.upstream                                 ? EntryDataStatus::kProposed
                                                              : EntryDataStatus::kOpen;
  return out;
}

std::string EntryRuleStatus::reason() const {
  if (status != EntryDataStatus::kDoNotSubmit || !wrong_data) return "";
  return fmt::format("rejected: public report of wrong data ({}); document the refusal instead", wrong_data->link);
}

std::string upstream_entry_text(const UpstreamEntry& e, bool with_link) {
  const bool queued = e.state == "queued";
  return fmt::format("{}: \"{}\" ({} {}, {}, {}){}: {}", to_string(queued ? EntryDataStatus::kQueued : EntryDataStatus::kProposed),
                     escape_line(e.subject), queued ? "commit" : "Message-ID", escape_line(e.id), escape_line(e.where),
                     e.date, with_link ? " " + e.link : "",
                     queued ? "do not send it again; test it and reply with Tested-by"
                            : "reply to the proposal with Tested-by and the copies rather than sending a new patch");
}

std::string EntryRuleStatus::remedy_text() const {
  // No address: the remedy is also drawn on the self-contained page, which names none; `whitelist`
  // gives the links.
  switch (status) {
    case EntryDataStatus::kFixedIn:
      return fmt::format("a whitelist entry for {}: fixed in {} (Linux {} and later have it: upgrade rather than submit)",
                         id, fixed_in, fixed_in);
    case EntryDataStatus::kDoNotSubmit:
      return fmt::format("a whitelist entry for {}: do not submit (rejected: public report of wrong data: {}; "
                         "`p2paudit whitelist` cites it; document the refusal instead)",
                         id, escape_line(wrong_data ? wrong_data->summary : ""));
    case EntryDataStatus::kQueued:
    case EntryDataStatus::kProposed:
      return fmt::format("a whitelist entry for {}: {}", id, upstream_entry_text(*upstream, false));
    case EntryDataStatus::kOpen: break;
  }
  return fmt::format("a whitelist entry for {} needs measured peer copies through this host bridge before it is "
                     "submitted: `p2paudit whitelist` says whether this machine's are enough",
                     id);
}

}  // namespace p2paudit
