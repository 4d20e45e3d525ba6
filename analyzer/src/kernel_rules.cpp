#include "p2paudit/kernel_rules.h"

#include <charconv>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "p2paudit/errors.h"

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

// Reads one YAML file and reports every problem as "file:line:column: message" (1-based).
class YamlFile {
 public:
  explicit YamlFile(std::filesystem::path path) : path_(std::move(path)) {
    try {
      root_ = YAML::LoadFile(path_.string());
    } catch (const YAML::BadFile&) {
      throw InputError(fmt::format("{}: cannot read the rule file", path_.string()));
    } catch (const YAML::ParserException& e) {
      throw InputError(fmt::format("{}:{}:{}: {}", path_.string(), e.mark.line + 1,
                                   e.mark.column + 1, e.msg));
    }
    if (!root_.IsMap()) fail(root_, "expected a mapping at the top level");
  }

  const YAML::Node& root() const { return root_; }
  std::string where(const YAML::Node& n) const {
    auto m = n.Mark();
    if (m.line < 0) return path_.string();
    return fmt::format("{}:{}:{}", path_.string(), m.line + 1, m.column + 1);
  }
  [[noreturn]] void fail(const YAML::Node& n, std::string_view message) const {
    throw InputError(fmt::format("{}: {}", where(n), message));
  }

  void check_keys(const YAML::Node& map, std::initializer_list<std::string_view> allowed) const {
    if (!map.IsMap()) fail(map, "expected a mapping");
    for (const auto& kv : map) {
      const auto key = kv.first.Scalar();
      bool ok = false;
      for (auto a : allowed) ok = ok || key == a;
      if (!ok) fail(kv.first, fmt::format("unknown key '{}'", key));
    }
  }
  std::string scalar(const YAML::Node& map, const char* key, bool required) const {
    const YAML::Node n = map[key];
    if (!n || n.IsNull()) {
      if (required) fail(map, fmt::format("missing '{}'", key));
      return {};
    }
    if (!n.IsScalar()) fail(n, fmt::format("'{}' must be a scalar", key));
    return n.Scalar();
  }
  bool boolean(const YAML::Node& map, const char* key) const {
    const YAML::Node n = map[key];
    if (!n || n.IsNull()) return false;
    if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "false")) return n.Scalar() == "true";
    fail(n, fmt::format("'{}' must be true or false", key));
  }
  uint16_t hex_id(const YAML::Node& map, const char* key) const {
    auto text = scalar(map, key, true);
    auto v = parse_hex16(text);
    if (!v) fail(map[key], fmt::format("'{}' must be a 16-bit hex ID, got '{}'", key, text));
    return *v;
  }
  std::optional<KernelRelease> release(const YAML::Node& map, const char* key, bool required) const {
    auto text = scalar(map, key, required);
    if (text.empty()) return std::nullopt;
    auto r = KernelRelease::parse(text);
    if (!r) fail(map[key], fmt::format("'{}' is not a kernel release: '{}'", key, text));
    return r;
  }
  ReleaseRange releases(const YAML::Node& map, bool required) const {
    ReleaseRange range{release(map, "added", required), release(map, "removed", false), {}};
    const YAML::Node b = map["backports"];
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

 private:
  std::filesystem::path path_;
  YAML::Node root_;
};

void check_schema(const YamlFile& f) {
  auto v = f.scalar(f.root(), "schema", true);
  if (v != "1") f.fail(f.root()["schema"], fmt::format("unsupported schema '{}' (expected 1)", v));
}

std::vector<WhitelistEntry> read_entries(const YamlFile& f, bool releases_required) {
  f.check_keys(f.root(), {"schema", "entries"});
  check_schema(f);
  const YAML::Node list = f.root()["entries"];
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
  KernelRelease r;
  r.text = std::string(text);
  // Numbers up to the first character that is neither a digit nor a dot belong to the version.
  size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.'))
    ++end;
  std::string_view ver = text.substr(0, end);
  int parts[3] = {0, 0, 0};
  int n = 0;
  while (!ver.empty()) {
    auto dot = ver.find('.');
    auto v = parse_int(ver.substr(0, dot));
    if (!v || n == 3) return std::nullopt;
    parts[n++] = *v;
    if (dot == std::string_view::npos) break;
    ver.remove_prefix(dot + 1);
    if (ver.empty()) return std::nullopt;
  }
  if (n < 2) return std::nullopt;
  std::tie(r.major, r.minor, r.patch) = std::tie(parts[0], parts[1], parts[2]);
  std::string_view rest = text.substr(end);
  if (rest.starts_with("-rc")) {
    rest.remove_prefix(3);
    size_t d = 0;
    while (d < rest.size() && std::isdigit(static_cast<unsigned char>(rest[d]))) ++d;
    if (auto v = parse_int(rest.substr(0, d))) r.rc = *v;
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

std::vector<WhitelistEntry> load_whitelist_file(const std::filesystem::path& path) {
  YamlFile f(path);
  return read_entries(f, false);
}

KernelRuleData load_kernel_rule_data(const std::filesystem::path& dir) {
  KernelRuleData data;
  {
    YamlFile f(dir / "whitelist.yaml");
    data.whitelist = read_entries(f, true);
    data.files.push_back((dir / "whitelist.yaml").string());
  }
  YamlFile f(dir / "eras.yaml");
  f.check_keys(f.root(), {"schema", "newest_known_release", "features"});
  check_schema(f);
  auto newest = f.release(f.root(), "newest_known_release", true);
  data.newest_known = *newest;
  const YAML::Node list = f.root()["features"];
  if (!list || !list.IsSequence()) f.fail(f.root(), "'features' must be a list");
  for (const auto& item : list) {
    f.check_keys(item, {"id", "description", "added", "removed", "backports", "commit"});
    KernelFeature feat{f.scalar(item, "id", true), f.scalar(item, "description", false),
                       f.scalar(item, "commit", false), f.releases(item, true)};
    bool known = false;
    for (auto k : kKnownFeatures) known = known || feat.id == k;
    if (!known) f.fail(item["id"], fmt::format("unknown feature '{}'", feat.id));
    if (data.find_feature(feat.id)) f.fail(item, fmt::format("duplicate feature '{}'", feat.id));
    data.features.push_back(std::move(feat));
  }
  for (auto k : kKnownFeatures)
    if (!data.find_feature(k)) f.fail(list, fmt::format("feature '{}' is missing", k));
  data.files.push_back((dir / "eras.yaml").string());
  return data;
}

WhitelistEntry parse_assumed_whitelisted(std::string_view spec) {
  auto bad = [&]() -> InputError {
    return InputError(fmt::format(
        "--assume-whitelisted '{}': expected VVVV:DDDD[:same-host-bridge] (hex IDs, DDDD may be 'any')",
        spec));
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

KernelRules select_kernel_rules(const KernelRuleData& data, const Platform& platform,
                                const KernelRuleOptions& options) {
  KernelRules rules;
  std::optional<KernelRelease> release;
  if (!options.kernel.empty()) {
    release = KernelRelease::parse(options.kernel);
    if (!release)
      throw InputError(fmt::format("--kernel '{}': expected a release like 6.1 or 6.1.192", options.kernel));
    rules.release_source = "--kernel";
  } else if (!platform.kernel_release.empty()) {
    release = KernelRelease::parse(platform.kernel_release);
    if (!release)
      throw InputError(fmt::format(
          "cannot parse the kernel release '{}' (proc/sys/kernel/osrelease); pass --kernel X.Y[.Z]",
          platform.kernel_release));
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

  // Distribution kernels ("5.15.0-25-generic") do not say which stable patch level they carry.
  bool distro_patch_unknown = r.patch == 0 && r.rc == 0 && r.text.find('-') != std::string::npos;
  if (rules.whitelist_table) {
    for (const auto& e : data.whitelist) {
      if (e.releases.contains(r)) {
        rules.whitelist.push_back(e);
      } else if (distro_patch_unknown) {
        for (const auto& b : e.releases.backports)
          if (b.major == r.major && b.minor == r.minor)
            rules.notes.push_back(fmt::format(
                "{} has no stable patch level in its release string; whitelist entry {} is in {} and "
                "later {}.{}.y, which this kernel may or may not carry (not assumed)",
                r.text, e.id(), b.version(), b.major, b.minor));
      }
    }
  }
  rules.table_entries = rules.whitelist.size();
  rules.all_releases = data.whitelist;
  rules.rule_files = data.files;
  std::vector<WhitelistEntry> extra;
  for (const auto& file : options.kernel_rules) {
    rules.rule_files.push_back(file);
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
  rules.config_source = platform.kernel_config_source;
  auto running = KernelRelease::parse(platform.kernel_release);
  if (!options.kernel.empty() && rules.config_p2pdma != Known::kUnknown &&
      (!running || !(*running == *release))) {
    // The sysroot's config describes the kernel it runs, not the one asked about.
    rules.notes.push_back(fmt::format(
        "the sysroot's kernel config ({}) belongs to {}, not to --kernel {}: assuming "
        "CONFIG_PCI_P2PDMA=y", rules.config_source.empty() ? "unknown source" : rules.config_source,
        platform.kernel_release.empty() ? "another kernel" : platform.kernel_release, options.kernel));
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
