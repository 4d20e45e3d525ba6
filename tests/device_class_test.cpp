// SPDX-License-Identifier: GPL-2.0-or-later
// One classifier for every output (analyzer/include/p2paudit/device_class.h): the matrix's short
// names and default view, the policy's class fact, and the command line agree, FPGAs included.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "p2paudit/device_class.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/pair_facts.h"
#include "synthetic_tree.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

Function function(uint16_t vendor, uint32_t class_code, const std::string& driver = "") {
  Function f;
  f.vendor = vendor;
  f.class_code = class_code;
  f.driver = driver;
  return f;
}

TEST(DeviceClass, FromClassVendorAndDriver) {
  struct Case {
    uint16_t vendor;
    uint32_t class_code;
    const char* driver;
    DeviceClass want;
  } cases[] = {
      {0x10de, 0x030200, "nvidia", DeviceClass::kGpu},
      {0x1002, 0x038000, "amdgpu", DeviceClass::kGpu},
      {0x10ee, 0x058000, "", DeviceClass::kFpga},          // Alveo user function, unbound
      {0x10ee, 0x120000, "xclmgmt", DeviceClass::kFpga},   // Alveo management function
      {0x1172, 0x120000, "", DeviceClass::kFpga},          // Intel FPGA card (Altera ID)
      {0x1d0f, 0x120000, "xocl", DeviceClass::kFpga},      // an XRT shell under another vendor ID
      {0x1da3, 0x120000, "habanalabs", DeviceClass::kAccelerator},  // Habana Gaudi
      {0x1e52, 0x120000, "", DeviceClass::kAccelerator},   // another 0x12xx accelerator
      {0x1234, 0x0b4000, "", DeviceClass::kAccelerator},   // co-processor
      {0x1234, 0x0b0000, "", DeviceClass::kOther},         // a 386 "processor" is not an accelerator
      {0x10ee, 0x020000, "", DeviceClass::kNic},           // a Xilinx NIC is a NIC
      {0x144d, 0x010802, "nvme", DeviceClass::kNvme},
      {0x1000, 0x010700, "mpt3sas", DeviceClass::kStorage},
      {0x15b3, 0x020700, "mlx5_core", DeviceClass::kNic},
      {0x15b3, 0x0c0600, "", DeviceClass::kInfiniband},
      {0x8086, 0x060400, "pcieport", DeviceClass::kBridge},
      {0x8086, 0x0c0330, "xhci_hcd", DeviceClass::kOther},
  };
  for (const auto& c : cases) {
    Function f = function(c.vendor, c.class_code, c.driver);
    EXPECT_EQ(classify_device(f), c.want) << std::hex << c.vendor << " " << c.class_code << " " << c.driver;
    // The policy's fact is the same classifier's name.
    auto facts = policy::device_facts(f, true);
    const policy::FactValue* fact = facts.get("provider.class");
    ASSERT_TRUE(fact && std::holds_alternative<std::string>(*fact)) << std::hex << c.class_code;
    EXPECT_EQ(std::get<std::string>(*fact), device_class_name(c.want));
  }
  EXPECT_EQ(device_class_name(DeviceClass::kInfiniband), "nic");
  EXPECT_TRUE(in_default_view(DeviceClass::kFpga));
  EXPECT_TRUE(in_default_view(DeviceClass::kAccelerator));
  EXPECT_FALSE(in_default_view(DeviceClass::kStorage));
  EXPECT_FALSE(in_default_view(DeviceClass::kBridge));
}

TEST(DeviceClass, DefaultViewNamesFpgasAndAcceleratorsInClassOrder) {
  test::Tree tree;
  for (const char* port : {"0000:00:01.0", "0000:00:02.0", "0000:00:03.0", "0000:00:04.0"}) tree.rp(port);
  size_t alveo = tree.ep("0000:01:00.0", "0000:00:01.0");
  size_t mgmt = tree.ep("0000:01:00.1", "0000:00:01.0");
  size_t gpu = tree.ep("0000:02:00.0", "0000:00:02.0");
  size_t gaudi = tree.ep("0000:03:00.0", "0000:00:03.0");
  size_t sata = tree.ep("0000:04:00.0", "0000:00:04.0");
  auto set = [&](size_t i, uint16_t vendor, uint32_t class_code, const char* driver) {
    tree.t.functions[i].vendor = vendor;
    tree.t.functions[i].class_code = class_code;
    tree.t.functions[i].driver = driver;
  };
  set(alveo, 0x10ee, 0x058000, "xocl");
  set(mgmt, 0x10ee, 0x058000, "xclmgmt");
  set(gpu, 0x10de, 0x030200, "nvidia");
  set(gaudi, 0x1da3, 0x120000, "habanalabs");
  set(sata, 0x8086, 0x010601, "ahci");
  std::vector<std::pair<size_t, std::string>> got;
  for (const auto& d : matrix_devices(tree.t, false)) got.emplace_back(d.index, d.short_name);
  std::vector<std::pair<size_t, std::string>> want = {
      {gpu, "gpu0"}, {gaudi, "accel0"}, {alveo, "fpga0"}, {mgmt, "fpga1"}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(resolve_function(tree.t, "fpga1"), mgmt);
  EXPECT_EQ(matrix_devices(tree.t, true).size(), tree.t.functions.size());  // --all: the SATA controller too
}

// The command line on a machine with an Alveo beside a GPU: both in the default matrix and policy,
// the Alveo named fpga0 and classed fpga.
TEST(DeviceClass, AlveoInTheDefaultMatrixAndPolicy) {
  test::SysrootDir s;
  s.function("pci0000:00/0000:00:01.0", test::ConfigBytes(0x1022, 0x1483, 0x060400, 4, true).buses(0, 1, 1).bytes());
  s.function("pci0000:00/0000:00:01.0/0000:01:00.0", test::ConfigBytes(0x10ee, 0x5020, 0x058000, 0).bytes());
  s.link("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/driver", "../../../../bus/pci/drivers/xocl");
  s.function("pci0000:00/0000:00:02.0", test::ConfigBytes(0x1022, 0x1483, 0x060400, 4, true).buses(0, 2, 2).bytes());
  test::gpu_with_bar(s, "pci0000:00/0000:00:02.0/0000:02:00.0", 0x1002, 0x744c, "amdgpu", 0x7000000000, 1ull << 34);
  const std::string tool = std::string(P2PAUDIT_TOOL) + " --sysroot " + s.str();
  auto matrix = nlohmann::json::parse(test::run_command(tool + " matrix --format json").output);
  std::vector<std::string> names;
  for (const auto& d : matrix["devices"]) names.push_back(d["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"gpu0", "fpga0"}));
  auto policy = test::run_command(tool + " policy --details --no-probe --format json");
  ASSERT_EQ(policy.status, 0);
  auto j = nlohmann::json::parse(policy.output);
  ASSERT_EQ(j["pairs"].size(), 4u);  // every ordered pair, each function with itself included
  for (const auto& p : j["pairs"]) {
    if (p["provider"] == p["client"]) continue;
    bool alveo_provides = p["provider"] == "0000:01:00.0";
    EXPECT_EQ(p["facts"]["provider.class"], alveo_provides ? "fpga" : "gpu");
    EXPECT_EQ(p["facts"]["client.class"], alveo_provides ? "gpu" : "fpga");
  }
  auto text = test::run_command(tool + " policy --no-probe").output;
  EXPECT_NE(text.find("fpga0"), std::string::npos) << text;
}

}  // namespace
}  // namespace p2paudit
