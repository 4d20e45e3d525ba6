// SPDX-License-Identifier: GPL-2.0-or-later
// What is known about a device by its PCI vendor and device ID, from rules/devices/*.yaml
// (docs/devices.md): its product, product line, chip, on-package fabric, what its vendor's driver
// allows for PCIe peer access, and its memory where one ID has one size. These become the device
// facts provider.X / client.X (device_facts()); an ID not in the table has none of them. The files
// are read as strictly as every other rule file: a stranger may hand one over with --rules-dir.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace p2paudit::policy {

struct DeviceRow {
  uint16_t vendor = 0;
  uint16_t first = 0, last = 0;  // device IDs, inclusive (one ID: first == last)
  std::string product;
  std::string product_line;      // consumer, workstation, datacenter, integrated; "" unknown
  std::string chip;              // "" unknown
  std::string fabric;            // none, nvlink, xgmi, xelink; "" unknown
  std::string driver_pcie_peer;  // allowed, refused; "" unknown
  std::optional<bool> vm_clique_documented;
  std::optional<int64_t> memory_size;  // bytes
  // One NVLink's payload rate per direction, GB/s, for the product's NVLink generation and link
  // width (path_ceiling.h); nullopt unknown or no NVLink.
  std::optional<double> nvlink_link_gbps;
  std::vector<std::string> sources;    // URLs
  std::string origin;                  // "FILE:LINE:COLUMN" of the row
};

class DeviceKnowledge {
 public:
  // nullptr when no row covers the ID.
  const DeviceRow* find(uint16_t vendor, uint16_t device) const;
  const std::vector<DeviceRow>& rows() const { return rows_; }
  const std::vector<std::string>& files() const { return files_; }
  // Adds a file's rows; an ID already covered by another row (of any file) is an error naming both.
  void add(std::vector<DeviceRow> rows, const std::string& file);

 private:
  std::vector<DeviceRow> rows_;  // sorted by (vendor, first), ranges disjoint
  std::vector<std::string> files_;
};

// What one file may hold; the shipped table is far below these.
inline constexpr size_t kMaxDeviceRows = 4096;
inline constexpr size_t kMaxDeviceFiles = 16;

// One file's rows; throws InputError "FILE:LINE:COLUMN: message" for anything it does not fully
// understand (unknown keys, bad IDs, a missing source, duplicate IDs, values out of bounds).
std::vector<DeviceRow> parse_device_rows(std::string_view text, const std::string& origin);
// Every RULES_DIR/devices/*.yaml in name order (regular files only, bounded reads).
DeviceKnowledge load_device_knowledge(const std::filesystem::path& rules_dir);

// The table device_facts() reads, loaded once per rules directory and kept for the process: the
// directory named by use_device_knowledge_from() (the tool's --rules-dir, the library's
// rules_dir), else the one find_rules_dir() finds. Throws InputError when the files are bad.
std::shared_ptr<const DeviceKnowledge> device_knowledge();
// Names the rules directory whose devices/ the next device_knowledge() reads; nothing is read now.
void use_device_knowledge_from(const std::filesystem::path& rules_dir);

}  // namespace p2paudit::policy
