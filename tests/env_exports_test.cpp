// SPDX-License-Identifier: GPL-2.0-or-later
// `policy --format env` per job (issue 29): the GPUs a job will use, from --gpus or the runtimes'
// selection variables, compute GPUs only, and the exports from those GPUs' pairs alone.
#include <gtest/gtest.h>

#include <filesystem>

#include "p2paudit/errors.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/env_exports.h"
#include "p2paudit/policy/gpu_selection.h"
#include "p2paudit/policy/job_gpus.h"
#include "synthetic_tree.h"
#include "test_support.h"

namespace p2paudit {
namespace {

using policy::GpuSelectionInputs;
using test::Tree;

// An Arc Pro B70 carries its own switch: port -> card upstream port -> card downstream port -> GPU.
void b70_below(Tree& tree, const std::string& port, const std::string& usp, const std::string& dsp,
               const std::string& gpu) {
  tree.add(usp, port, 0x8086, 0xe2ff, PcieType::kSwitchUpstream);
  tree.add(dsp, usp, 0x8086, 0xe2f0, PcieType::kSwitchDownstream);
  tree.describe(tree.add(gpu, dsp, 0x8086, 0xe223, PcieType::kEndpoint), 0x030000, "xe", uint64_t{32} << 30);
}

// A Rocket Lake-S host with its iGPU at 00:02.0 (a root complex integrated endpoint) and two B70
// below one Broadcom switch without ACS redirect: the kernel maps them by bus address
// (public-cases b70-dual-rocketlake-pex880xx-acs), while the iGPU's pairs cross the host bridge of
// a client root complex, which the kernel refuses.
Tree igpu_and_two_b70() {
  Tree tree;
  tree.host_dev(0x8086, 0x4c43);
  tree.rp("00:01.0");
  tree.describe(tree.add("00:02.0", "", 0x8086, 0x4c8a, PcieType::kRcIntegratedEndpoint), 0x030000, "i915");
  tree.add("0a:00.0", "00:01.0", 0x1000, 0xc030, PcieType::kSwitchUpstream);
  tree.add("0b:00.0", "0a:00.0", 0x1000, 0xc030, PcieType::kSwitchDownstream);
  tree.add("0b:10.0", "0a:00.0", 0x1000, 0xc030, PcieType::kSwitchDownstream);
  b70_below(tree, "0b:00.0", "0c:00.0", "0d:01.0", "0e:00.0");
  b70_below(tree, "0b:10.0", "10:00.0", "11:01.0", "12:00.0");
  return tree;
}

// The exports the tool prints for the tree and the selection.
class Exports {
 public:
  explicit Exports(const Tree& tree) : topo_(tree.t) {
    topo_.platform.kernel_release = "7.0.0-22-generic";
    kernel_ = load_kernel_rules(std::filesystem::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo_.platform, {});
  }
  std::string operator()(const GpuSelectionInputs& in = {}) {
    static const auto rules = policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
    policy::PolicyEvaluator evaluator(topo_, kernel_, rules, nullptr);
    return policy::env_exports(evaluator, matrix_devices(topo_, false), policy::select_job_gpus(topo_, in));
  }

 private:
  Topology topo_;
  KernelRules kernel_;
};

bool peer_on(const std::string& env) {
  return env.find("\nunset NCCL_P2P_DISABLE\n") != std::string::npos &&
         env.find("\nexport CCL_TOPO_P2P_ACCESS=1\n") != std::string::npos;
}
bool peer_off(const std::string& env) {
  return env.find("\nexport NCCL_P2P_DISABLE=1\n") != std::string::npos &&
         env.find("\nexport CCL_TOPO_P2P_ACCESS=0\n") != std::string::npos;
}

std::vector<std::string> bdfs(const Topology& t, const std::vector<size_t>& devices) {
  std::vector<std::string> out;
  for (size_t i : devices) out.push_back(t.functions[i].bdf.str());
  return out;
}
std::vector<std::string> chosen(const Tree& tree, const GpuSelectionInputs& in) {
  return bdfs(tree.t, policy::select_job_gpus(tree.t, in).gpus);
}
using Bdfs = std::vector<std::string>;

// The acceptance criterion: the iGPU no longer pulls the two B70, which can peer, off.
TEST(EnvExports, TwoDiscreteGpusBelowOneSwitchArePeerDespiteTheIgpu) {
  Tree tree = igpu_and_two_b70();
  Exports exports(tree);
  std::string env = exports();
  EXPECT_TRUE(peer_on(env)) << env;
  EXPECT_NE(env.find("# 2 of 2 ordered GPU pairs may use peer DMA\n"), std::string::npos) << env;
  EXPECT_NE(env.find("left out gpu0 0000:00:02.0: integrated GPU"), std::string::npos) << env;
  // The iGPU, once named, is in the job, and its pairs are not peer: each reason told once.
  GpuSelectionInputs named;
  named.gpus = "gpu0,0e:00.0,0000:12:00.0";
  env = exports(named);
  EXPECT_TRUE(peer_off(env)) << env;
  EXPECT_NE(env.find("# 2 of 6 ordered GPU pairs may use peer DMA\n"), std::string::npos) << env;
  EXPECT_NE(env.find("# not peer: 0000:00:02.0 -> 0000:0e:00.0 and 3 more pairs: host_staged [kernel-refuses]"),
            std::string::npos)
      << env;
  size_t lines = 0;
  for (size_t at = env.find("# not peer:"); at != std::string::npos; at = env.find("# not peer:", at + 1)) ++lines;
  EXPECT_EQ(lines, 1u) << env;
}

TEST(EnvExports, AJobOfOneGpuSetsNothing) {
  Tree tree = igpu_and_two_b70();
  GpuSelectionInputs one;
  one.gpus = "gpu2";
  std::string env = Exports(tree)(one);
  EXPECT_NE(env.find("# fewer than two GPUs of one vendor: nothing to set\n"), std::string::npos) << env;
  EXPECT_EQ(env.find("NCCL_P2P_DISABLE"), std::string::npos) << env;
  EXPECT_EQ(env.find("\nexport "), std::string::npos) << env;
}

TEST(EnvExports, GpusWinsOverTheVariables) {
  Tree tree = igpu_and_two_b70();
  GpuSelectionInputs in;
  in.gpus = "gpu1,gpu2";
  in.ze_affinity_mask = "not a mask";  // not read at all
  in.ze_enable_pci_id_device_order = "1";
  in.ze_flat_device_hierarchy = "COMPOSITE";
  EXPECT_EQ(chosen(tree, in), (Bdfs{"0000:0e:00.0", "0000:12:00.0"}));
  in.gpus = "gpu0";
  EXPECT_EQ(chosen(tree, in), (Bdfs{"0000:00:02.0"}));
  in.gpus = "nvme7";
  EXPECT_THROW(policy::select_job_gpus(tree.t, in), InputError);
  in.gpus = "0a:00.0";  // a switch port, not a GPU
  try {
    policy::select_job_gpus(tree.t, in);
    ADD_FAILURE() << "a bridge accepted as a GPU";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--gpus: 0000:0a:00.0 is not a GPU"), std::string::npos) << e.what();
  }
}

// Level Zero numbers its devices (the iGPU too) in PCI bus order only with
// ZE_ENABLE_PCI_ID_DEVICE_ORDER=1 and one device per GPU only with ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE.
TEST(EnvExports, LevelZeroVariablesSelectIntelGpus) {
  Tree tree = igpu_and_two_b70();
  Exports exports(tree);
  GpuSelectionInputs in;
  in.ze_enable_pci_id_device_order = "1";
  in.ze_flat_device_hierarchy = "COMPOSITE";
  in.ze_affinity_mask = "1,2";
  EXPECT_EQ(chosen(tree, in), (Bdfs{"0000:0e:00.0", "0000:12:00.0"}));
  EXPECT_TRUE(peer_on(exports(in)));
  in.ze_affinity_mask = "0,2.0";  // the iGPU, named by its index, and a B70's sub-device
  EXPECT_EQ(chosen(tree, in), (Bdfs{"0000:00:02.0", "0000:12:00.0"}));
  EXPECT_TRUE(peer_off(exports(in)));
  // Without the order, "1,2" may be any two of the three: all three are taken.
  in.ze_enable_pci_id_device_order.reset();
  in.ze_affinity_mask = "1,2";
  EXPECT_EQ(chosen(tree, in), (Bdfs{"0000:00:02.0", "0000:0e:00.0", "0000:12:00.0"}));
  std::string env = exports(in);
  EXPECT_TRUE(peer_off(env));
  EXPECT_NE(env.find("ZE_ENABLE_PCI_ID_DEVICE_ORDER=1"), std::string::npos) << env;
  // ...unless it names every device.
  in.ze_affinity_mask = "2,0,1";
  EXPECT_EQ(chosen(tree, in).size(), 3u);

  GpuSelectionInputs oneapi;
  oneapi.ze_enable_pci_id_device_order = "1";
  oneapi.ze_flat_device_hierarchy = "COMPOSITE";
  oneapi.oneapi_device_selector = "level_zero:1,2";
  EXPECT_EQ(chosen(tree, oneapi), (Bdfs{"0000:0e:00.0", "0000:12:00.0"}));
  oneapi.oneapi_device_selector = "opencl:gpu;level_zero:2";
  EXPECT_EQ(chosen(tree, oneapi), (Bdfs{"0000:12:00.0"}));
  // Every Level Zero GPU: the compute ones, as with no selection.
  oneapi.oneapi_device_selector = "level_zero:*";
  EXPECT_EQ(chosen(tree, oneapi), (Bdfs{"0000:0e:00.0", "0000:12:00.0"}));
  // No Level Zero term: it narrows nothing here.
  oneapi.oneapi_device_selector = "opencl:0";
  EXPECT_EQ(chosen(tree, oneapi), (Bdfs{"0000:0e:00.0", "0000:12:00.0"}));
  // A mask first, then the selector numbers what it left; in an order not known once masked.
  oneapi.ze_affinity_mask = "0,1";
  oneapi.oneapi_device_selector = "level_zero:1";
  EXPECT_EQ(chosen(tree, oneapi), (Bdfs{"0000:00:02.0", "0000:0e:00.0"}));
}

// Three NVIDIA GPUs bound to nvidia and one bound to vfio-pci (not CUDA's), each on a root port.
Tree four_nvidia_gpus() {
  Tree tree;
  tree.host_dev(0x8086, 0x2020);
  for (int n = 1; n <= 4; ++n) tree.rp(fmt::format("00:{:02x}.0", n));
  for (int n = 1; n <= 4; ++n) {
    std::string port = fmt::format("00:{:02x}.0", n), gpu = fmt::format("{:02x}:00.0", n * 0x10);
    tree.describe(tree.add(gpu, port, 0x10de, 0x2335, PcieType::kEndpoint), 0x030200, n == 2 ? "vfio-pci" : "nvidia");
  }
  return tree;
}

TEST(EnvExports, CudaVisibleDevicesCountsCudasGpusInPciBusOrder) {
  Tree tree = four_nvidia_gpus();
  GpuSelectionInputs in;
  in.cuda_device_order = "PCI_BUS_ID";
  in.cuda_visible_devices = "2,0";  // CUDA's third and first: 40:00.0 and 10:00.0 (20:00.0 is not CUDA's)
  EXPECT_EQ(chosen(tree, in), (Bdfs{"0000:10:00.0", "0000:40:00.0"}));
  in.cuda_visible_devices = "0,-1,2";  // CUDA stops at the invalid index
  EXPECT_EQ(chosen(tree, in), (Bdfs{"0000:10:00.0"}));
  in.cuda_visible_devices = "1,7,0";
  EXPECT_EQ(chosen(tree, in), (Bdfs{"0000:30:00.0"}));
  in.cuda_visible_devices = "-1";
  EXPECT_TRUE(chosen(tree, in).empty());
  // FASTEST_FIRST (the default) is decided at run time: every CUDA GPU is taken...
  in.cuda_device_order.reset();
  in.cuda_visible_devices = "1";
  EXPECT_EQ(chosen(tree, in), (Bdfs{"0000:10:00.0", "0000:30:00.0", "0000:40:00.0"}));
  auto notes = policy::select_job_gpus(tree.t, in).notes;
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(),
                          [](const std::string& n) { return n.find("CUDA_DEVICE_ORDER=PCI_BUS_ID") != n.npos; }));
  // ...which is exact when the list names them all.
  in.cuda_visible_devices = "2,1,0";
  EXPECT_EQ(chosen(tree, in), (Bdfs{"0000:10:00.0", "0000:30:00.0", "0000:40:00.0"}));
  // A UUID cannot be placed: every CUDA GPU.
  in.cuda_visible_devices = "GPU-8f6c3a2e-1b2c";
  EXPECT_EQ(chosen(tree, in).size(), 3u);
  // An empty value is read as unset: every compute GPU, vfio-pci's too.
  in.cuda_visible_devices = "";
  EXPECT_EQ(chosen(tree, in).size(), 4u);
  for (const char* bad : {"0,,1", "one", "MIG-GPU-8f6c3a2e/1/0", "0\n1", "99999999"}) {
    in.cuda_visible_devices = bad;
    try {
      policy::select_job_gpus(tree.t, in);
      ADD_FAILURE() << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("CUDA_VISIBLE_DEVICES=\"", 0), 0u) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
}

// Two AMD GPUs: ROCm numbers them in KFD topology order, which a capture does not show.
TEST(EnvExports, RocmVariablesSelectAmdGpus) {
  Tree tree;
  tree.amd_zen();
  tree.host_dev(0x1022, 0x14a4);
  tree.rp("00:01.1");
  tree.rp("00:03.1");
  tree.describe(tree.add("03:00.0", "00:01.1", 0x1002, 0x74a1, PcieType::kEndpoint), 0x120000, "amdgpu");
  tree.describe(tree.add("05:00.0", "00:03.1", 0x1002, 0x74a1, PcieType::kEndpoint), 0x120000, "amdgpu");
  GpuSelectionInputs in;
  in.rocr_visible_devices = "1";
  EXPECT_EQ(chosen(tree, in), (Bdfs{"0000:03:00.0", "0000:05:00.0"}));  // which one is not known
  in.rocr_visible_devices = "1,0";
  in.hip_visible_devices = "0";  // HIP numbers what ROCR left: again not known which
  EXPECT_EQ(chosen(tree, in).size(), 2u);
  in.hip_visible_devices = "3";
  try {
    policy::select_job_gpus(tree.t, in);
    ADD_FAILURE() << "HIP_VISIBLE_DEVICES=3 of two GPUs accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("HIP_VISIBLE_DEVICES=3"), std::string::npos) << e.what();
  }
  in.hip_visible_devices.reset();
  in.rocr_visible_devices = "0:1";
  EXPECT_THROW(policy::select_job_gpus(tree.t, in), InputError);
  // A ROCm machine of one GPU needs no order.
  Tree one;
  one.host_dev(0x1022, 0x14a4);
  one.rp("00:01.1");
  one.describe(one.add("03:00.0", "00:01.1", 0x1002, 0x74a1, PcieType::kEndpoint), 0x038000, "amdgpu");
  GpuSelectionInputs hip;
  hip.hip_visible_devices = "0";
  auto job = policy::select_job_gpus(one.t, hip);
  EXPECT_EQ(bdfs(one.t, job.gpus), (Bdfs{"0000:03:00.0"}));
}

TEST(EnvExports, EveryVariableNamesItselfInItsError) {
  EXPECT_THROW(policy::parse_rocm_visible_devices("ROCR_VISIBLE_DEVICES", "x"), InputError);
  for (auto [variable, parse] :
       std::initializer_list<std::pair<const char*, policy::RuntimeSelection (*)(std::string_view)>>{
           {"CUDA_VISIBLE_DEVICES", policy::parse_cuda_visible_devices},
           {"ONEAPI_DEVICE_SELECTOR", policy::parse_oneapi_device_selector},
           {"ZE_AFFINITY_MASK", policy::parse_ze_affinity_mask}}) {
    for (const char* bad : {"0;rm -rf", "level_zero:0x", "\x1b[31m"}) {
      try {
        parse(bad);
        ADD_FAILURE() << variable << "=" << bad << " accepted";
      } catch (const InputError& e) {
        EXPECT_EQ(std::string(e.what()).rfind(std::string(variable) + "=\"", 0), 0u) << e.what();
        EXPECT_EQ(std::string(e.what()).find('\x1b'), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_THROW(policy::parse_oneapi_device_selector("vulkan:0"), InputError);
  EXPECT_THROW(policy::parse_oneapi_device_selector("level_zero"), InputError);
  EXPECT_EQ(policy::parse_oneapi_device_selector("!level_zero:0;level_zero:*").all, true);
}

// A BMC's VGA (ASPEED) and a display controller whose BARs are all small are not compute GPUs; in a
// VM a GPU on the root bus is not an integrated one.
TEST(EnvExports, DisplayOnlyCardsAreLeftOut) {
  Tree tree = igpu_and_two_b70();
  tree.add("13:00.0", "", 0x1a03, 0x2000, PcieType::kEndpoint, std::nullopt, "pci0000:13");
  tree.describe(tree.index("13:00.0"), 0x030000, "ast", 16u << 20);
  EXPECT_EQ(policy::gpu_role(tree.t, tree.index("13:00.0")).role, policy::GpuRole::kDisplayOnly);
  std::string env = Exports(tree)();
  EXPECT_TRUE(peer_on(env)) << env;
  EXPECT_NE(env.find("left out gpu3 0000:13:00.0: display-only: vendor 1a03"), std::string::npos) << env;

  Function& small = tree.t.functions[tree.index("0e:00.0")];
  small.bars = {Bar{0, 1u << 30, 16u << 20, false, false, false}};
  EXPECT_EQ(policy::gpu_role(tree.t, tree.index("0e:00.0")).role, policy::GpuRole::kDisplayOnly);
  small.bars.push_back(Bar{2, uint64_t{1} << 36, uint64_t{16} << 30, false, true, true});
  EXPECT_EQ(policy::gpu_role(tree.t, tree.index("0e:00.0")).role, policy::GpuRole::kCompute);

  EXPECT_EQ(policy::gpu_role(tree.t, tree.index("00:02.0")).role, policy::GpuRole::kIntegrated);
  tree.t.platform.hypervisor = true;
  EXPECT_EQ(policy::gpu_role(tree.t, tree.index("00:02.0")).role, policy::GpuRole::kCompute);
}

// The tool: the variables of its environment, --gpus first, a bad value exit 2 naming it.
TEST(EnvExportsCli, ReadsTheVariablesAndGpusWins) {
  const std::string sysroot = test::data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz");
  const std::string clean =
      "env -u CUDA_VISIBLE_DEVICES -u HIP_VISIBLE_DEVICES -u ROCR_VISIBLE_DEVICES -u ONEAPI_DEVICE_SELECTOR "
      "-u ZE_AFFINITY_MASK CUDA_DEVICE_ORDER=PCI_BUS_ID ";
  auto run = [&](const std::string& variables, const std::string& options) {
    return test::run_command(clean + variables + " " + test::tool_file() + " --sysroot " + sysroot +
                             " --format env policy --no-probe " + options + " 2>&1");
  };
  auto two = run("CUDA_VISIBLE_DEVICES=3,1", "");
  EXPECT_EQ(two.status, 0) << two.output;
  EXPECT_NE(two.output.find("# the job's GPUs: gpu1 0000:00:07.0, gpu3 0000:00:09.0\n"), std::string::npos)
      << two.output;
  EXPECT_NE(two.output.find("ordered GPU pairs"), std::string::npos) << two.output;
  auto bad = run("CUDA_VISIBLE_DEVICES=1,gpu2", "");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("p2paudit: CUDA_VISIBLE_DEVICES=\"1,gpu2\": "), std::string::npos) << bad.output;
  // Every variable is read, whether or not the machine has GPUs of its vendor.
  for (const char* variable :
       {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ONEAPI_DEVICE_SELECTOR", "ZE_AFFINITY_MASK"}) {
    auto refused = run(std::string(variable) + "=0x", "");
    EXPECT_EQ(refused.status, 2) << variable << ": " << refused.output;
    EXPECT_NE(refused.output.find(std::string("p2paudit: ") + variable + "=\"0x\": "), std::string::npos)
        << refused.output;
  }
  auto wins = run("CUDA_VISIBLE_DEVICES=1,gpu2", "--gpus gpu0,gpu2");
  EXPECT_EQ(wins.status, 0) << wins.output;
  EXPECT_NE(wins.output.find("named by --gpus"), std::string::npos) << wins.output;
  // --gpus is for the exports alone.
  auto text = test::run_command(test::tool_file() + " --sysroot " + sysroot + " policy --no-probe --gpus gpu0 2>&1");
  EXPECT_EQ(text.status, 2) << text.output;
}

}  // namespace
}  // namespace p2paudit
