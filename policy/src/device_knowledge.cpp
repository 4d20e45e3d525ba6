// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/policy/device_knowledge.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <mutex>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/rules_location.h"
#include "p2paudit/strict_yaml.h"
#include "p2paudit/yaml_fields.h"

namespace p2paudit::policy {

namespace {

constexpr size_t kMaxProduct = 120, kMaxChip = 32, kMaxUrl = 512, kMaxSourcesARow = 8, kMaxSources = 256;
constexpr int64_t kMaxMemoryGib = 65536;  // 64 TiB: beyond any device by far
constexpr double kMaxNvlinkLinkGbps = 1000;  // 20 times NVLink 5's link

std::optional<uint16_t> hex16(std::string_view s) {
  if (s.size() != 4) return std::nullopt;  // exactly as lspci and sysfs write them
  unsigned v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return static_cast<uint16_t>(v);
}

class RowReader : YamlFields {
 public:
  using YamlFields::YamlFields;

  std::vector<DeviceRow> read() {
    check_keys(root(), {"schema", "sources", "devices"});
    const std::string schema = scalar(root(), "schema", true);
    if (schema != "1") fail(root()["schema"], fmt::format("unsupported schema {} (expected 1)", quoted_input(schema)));
    read_sources();
    const YamlNode list = root()["devices"];
    if (!list || !list.IsSequence()) fail(root(), "'devices' must be a list");
    if (list.size() > kMaxDeviceRows) fail(list, fmt::format("more than {} devices", kMaxDeviceRows));
    std::vector<DeviceRow> rows;
    for (const YamlNode& item : list) rows.push_back(row(item));
    return rows;
  }

 private:
  std::string one_of(const YamlNode& map, const char* key, std::initializer_list<std::string_view> values) const {
    std::string v = scalar(map, key, false);
    if (!v.empty() && std::find(values.begin(), values.end(), v) == values.end()) {
      std::string list;
      for (auto a : values) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(map[key], fmt::format("'{}' must be one of {}, got {}", key, list, quoted_input(v)));
    }
    return v;
  }
  std::string url(const YamlNode& n) const {
    std::string_view v = n.IsScalar() ? n.Scalar() : std::string_view();
    if (!v.starts_with("https://") || v.size() > kMaxUrl || v.find_first_of(" <>\"\t\n") != std::string_view::npos ||
        find_control_character(v))
      fail(n, fmt::format("a source must be one https:// URL of at most {} bytes, got {}", kMaxUrl, quoted_input(v)));
    return std::string(v);
  }

  void read_sources() {
    const YamlNode map = root()["sources"];
    if (!map || !map.IsMap()) fail(root(), "'sources' must be a mapping of names to https:// URLs");
    if (map.size() > kMaxSources) fail(map, fmt::format("more than {} sources", kMaxSources));
    for (size_t i = 0; i < map.size(); ++i) {
      const YamlNode key = map.key(i);
      if (!key.IsScalar() || key.Scalar().empty() || key.Scalar().size() > 64)
        fail(key, "a source's name must be 1 to 64 characters");
      sources_[std::string(key.Scalar())] = url(map.value(i));
    }
  }

  DeviceRow row(const YamlNode& item) {
    check_keys(item, {"vendor", "device", "product", "product_line", "chip", "fabric", "driver_pcie_peer",
                "vm_clique_documented", "memory_gib", "nvlink_link_gbps", "source"});
    DeviceRow r;
    r.origin = where(item);
    const std::string vendor = scalar(item, "vendor", true);
    auto v = hex16(vendor);
    if (!v || *v == 0xffff || *v == 0)
      fail(item["vendor"], fmt::format("'vendor' must be a PCI vendor ID of 4 hex digits, got {}", quoted_input(vendor)));
    r.vendor = *v;
    const std::string device = scalar(item, "device", true);
    const size_t dash = device.find('-');
    auto first = hex16(std::string_view(device).substr(0, dash));
    auto last = dash == std::string::npos ? first : hex16(std::string_view(device).substr(dash + 1));
    if (!first || !last || *first > *last)
      fail(item["device"], fmt::format("'device' must be a device ID of 4 hex digits or a range FIRST-LAST, got {}",
                                       quoted_input(device)));
    r.first = *first, r.last = *last;
    r.product = scalar(item, "product", true);
    if (r.product.size() > kMaxProduct) fail(item["product"], fmt::format("'product' is longer than {} bytes", kMaxProduct));
    r.product_line = one_of(item, "product_line", {"consumer", "workstation", "datacenter", "integrated"});
    r.chip = scalar(item, "chip", false);
    if (r.chip.size() > kMaxChip ||
        !std::all_of(r.chip.begin(), r.chip.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == ' ' || c == '-' || c == '_'; }))
      fail(item["chip"], fmt::format("'chip' must be at most {} letters, digits, spaces, '-' or '_', got {}", kMaxChip,
                                     quoted_input(r.chip)));
    r.fabric = one_of(item, "fabric", {"none", "nvlink", "xgmi", "xelink"});
    r.driver_pcie_peer = one_of(item, "driver_pcie_peer", {"allowed", "refused"});
    if (std::string b = one_of(item, "vm_clique_documented", {"true", "false"}); !b.empty())
      r.vm_clique_documented = b == "true";
    if (std::string m = scalar(item, "memory_gib", false); !m.empty()) {
      int64_t gib = 0;
      auto [end, ec] = std::from_chars(m.data(), m.data() + m.size(), gib);
      if (ec != std::errc() || end != m.data() + m.size() || gib < 1 || gib > kMaxMemoryGib)
        fail(item["memory_gib"], fmt::format("'memory_gib' must be a whole number from 1 to {}, got {}", kMaxMemoryGib,
                                             quoted_input(m)));
      r.memory_size = gib << 30;
    }
    if (std::string g = scalar(item, "nvlink_link_gbps", false); !g.empty()) {
      double gbps = 0;
      auto [end, ec] = std::from_chars(g.data(), g.data() + g.size(), gbps);
      if (ec != std::errc() || end != g.data() + g.size() || !(gbps > 0 && gbps <= kMaxNvlinkLinkGbps))
        fail(item["nvlink_link_gbps"], fmt::format("'nvlink_link_gbps' must be a number above 0 and at most {}, got {}",
                                                   kMaxNvlinkLinkGbps, quoted_input(g)));
      if (r.fabric != "nvlink") fail(item["nvlink_link_gbps"], "'nvlink_link_gbps' needs 'fabric: nvlink'");
      r.nvlink_link_gbps = gbps;
    }
    const YamlNode source = item["source"];
    if (!source || source.IsNull()) fail(item, "missing 'source': every row names where its values come from");
    if (!source.IsSequence() || source.size() == 0 || source.size() > kMaxSourcesARow)
      fail(source, fmt::format("'source' must be a list of 1 to {} source names", kMaxSourcesARow));
    for (const YamlNode& name : source) {
      auto it = name.IsScalar() ? sources_.find(std::string(name.Scalar())) : sources_.end();
      if (it == sources_.end()) fail(name, fmt::format("unknown source {} (name it under 'sources')", quoted_input(name.Scalar())));
      r.sources.push_back(it->second);
    }
    return r;
  }

  std::map<std::string, std::string> sources_;
};

std::string id_text(const DeviceRow& r) {
  return r.first == r.last ? fmt::format("{:04x}:{:04x}", r.vendor, r.first)
                           : fmt::format("{:04x}:{:04x}-{:04x}", r.vendor, r.first, r.last);
}

}  // namespace

const DeviceRow* DeviceKnowledge::find(uint16_t vendor, uint16_t device) const {
  // The last row starting at or before (vendor, device): ranges are disjoint, so it is the only
  // candidate.
  auto after = std::upper_bound(rows_.begin(), rows_.end(), std::pair{vendor, device}, [](const auto& key, const DeviceRow& r) {
    return key < std::pair{r.vendor, r.first};
  });
  if (after == rows_.begin()) return nullptr;
  const DeviceRow& r = *(after - 1);
  return r.vendor == vendor && device >= r.first && device <= r.last ? &r : nullptr;
}

void DeviceKnowledge::add(std::vector<DeviceRow> rows, const std::string& file) {
  for (auto& r : rows) rows_.push_back(std::move(r));
  std::stable_sort(rows_.begin(), rows_.end(),
                   [](const DeviceRow& a, const DeviceRow& b) { return std::pair{a.vendor, a.first} < std::pair{b.vendor, b.first}; });
  for (size_t i = 1; i < rows_.size(); ++i) {
    const DeviceRow &a = rows_[i - 1], &b = rows_[i];
    if (a.vendor == b.vendor && b.first <= a.last) {
      const DeviceRow& later = a.origin < b.origin ? b : a;
      const DeviceRow& earlier = a.origin < b.origin ? a : b;
      throw InputError(fmt::format("{}: device {} is already covered by {} ({})", later.origin, id_text(later),
                                   earlier.origin, id_text(earlier)));
    }
  }
  files_.push_back(file);
}

std::vector<DeviceRow> parse_device_rows(std::string_view text, const std::string& origin) {
  return RowReader(text, origin).read();
}

DeviceKnowledge load_device_knowledge(const std::filesystem::path& rules_dir) {
  namespace fs = std::filesystem;
  const fs::path dir = rules_dir / "devices";
  std::vector<fs::path> files;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw InputError(fmt::format("{}: cannot read the device table directory: {}", dir.string(), ec.message()));
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw InputError(fmt::format("{}: {}", dir.string(), ec.message()));
    if (it->path().extension() != ".yaml") continue;
    if (files.size() == kMaxDeviceFiles)
      throw InputError(fmt::format("{}: more than {} device files", dir.string(), kMaxDeviceFiles));
    files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  DeviceKnowledge known;
  // read_input_file() refuses what is not a regular file and reads at most the bound.
  for (const auto& f : files) known.add(parse_device_rows(read_input_file(f.string(), kMaxRuleFileBytes), f.string()), f.string());
  return known;
}

namespace {

struct Tables {
  std::mutex mutex;
  std::optional<std::filesystem::path> named;  // use_device_knowledge_from()
  std::map<std::filesystem::path, std::shared_ptr<const DeviceKnowledge>> loaded;
};

Tables& tables() {
  static Tables t;
  return t;
}

}  // namespace

void use_device_knowledge_from(const std::filesystem::path& rules_dir) {
  Tables& t = tables();
  std::lock_guard lock(t.mutex);
  t.named = rules_dir;
}

std::shared_ptr<const DeviceKnowledge> device_knowledge() {
  Tables& t = tables();
  std::lock_guard lock(t.mutex);
  const std::filesystem::path dir = t.named ? *t.named : find_rules_dir("", RulesAnchor::kExecutable);
  auto& slot = t.loaded[dir];
  if (!slot) slot = std::make_shared<const DeviceKnowledge>(load_device_knowledge(dir));
  return slot;
}

}  // namespace p2paudit::policy
