// SPDX-License-Identifier: GPL-2.0-or-later
// Google Benchmark timings of the analyzer on synthetic machines (tools/p2paudit-synth), built
// with -DP2PAUDIT_BENCHMARKS=ON; docs/performance.md says how to run it and what it measures.
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <string>

#include "p2paudit/kernel_log.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/p2pdma.h"
#include "p2paudit/p2pdma_index.h"
#include "p2paudit/p2pdma_report.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/log_explain.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "synth.h"

namespace {

namespace fs = std::filesystem;

// Each size's machine is generated once per run, as a directory and a tarball, under /dev/shm
// when it is writable: on a disk the directory reads would time the file system as much as us.
class Machines {
 public:
  static Machines& instance() {
    static Machines machines;
    return machines;
  }
  ~Machines() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  Machines(const Machines&) = delete;
  Machines& operator=(const Machines&) = delete;

  std::string directory(int functions) { return generate(functions) + "/sysroot"; }
  std::string tarball(int functions) { return generate(functions) + "/sysroot.tar.gz"; }
  const fs::path& root() const { return root_; }

 private:
  Machines() {
    std::string base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : fs::temp_directory_path().string();
    std::string templ = base + "/p2paudit-bench-XXXXXX";
    root_ = mkdtemp(templ.data());
  }
  std::string generate(int functions) {
    auto [it, fresh] = made_.emplace(functions, (root_ / std::to_string(functions)).string());
    if (fresh) {
      p2paudit::synth::Options options;
      options.functions = functions;
      auto machine = p2paudit::synth::Machine::plan(options);
      fs::create_directories(it->second + "/sysroot");
      machine.write_directory(it->second + "/sysroot");
      machine.write_tarball(it->second + "/sysroot.tar.gz");
    }
    return it->second;
  }
  fs::path root_;
  std::map<int, std::string> made_;
};

void read_topology_from(benchmark::State& state, const std::string& path) {
  for (auto _ : state) {
    p2paudit::Topology t = p2paudit::read_topology(p2paudit::Sysroot::open(path));
    benchmark::DoNotOptimize(t.functions.data());
  }
  state.counters["functions"] = static_cast<double>(state.range(0));
}

void BM_ReadTopologyDirectory(benchmark::State& state) {
  read_topology_from(state, Machines::instance().directory(static_cast<int>(state.range(0))));
}
void BM_ReadTopologyTarball(benchmark::State& state) {
  read_topology_from(state, Machines::instance().tarball(static_cast<int>(state.range(0))));
}

// pci_p2pdma_distance() for every ordered pair of the matrix's devices: what `matrix` costs with
// the per-pair API.
void BM_P2pdmaDistanceAllPairs(benchmark::State& state) {
  auto topo = p2paudit::read_topology(p2paudit::Sysroot::open(Machines::instance().tarball(static_cast<int>(state.range(0)))));
  auto rules = p2paudit::load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo.platform, {});
  auto devices = p2paudit::matrix_devices(topo, false);
  for (auto _ : state)
    for (const auto& provider : devices)
      for (const auto& client : devices) {
        auto verdict = p2paudit::pci_p2pdma_distance(topo, rules, provider.index, client.index);
        benchmark::DoNotOptimize(verdict.p2pdma_distance);
      }
  auto pairs = static_cast<int64_t>(devices.size() * devices.size());
  state.SetItemsProcessed(state.iterations() * pairs);
  state.counters["pairs"] = static_cast<double>(pairs);
}

// The same pairs through P2pdmaIndex, what `matrix` and the audit use: map type and distance in
// O(depth) from per-function facts computed once (the index's construction is timed too).
void BM_P2pdmaIndexAllPairs(benchmark::State& state) {
  auto topo = p2paudit::read_topology(p2paudit::Sysroot::open(Machines::instance().tarball(static_cast<int>(state.range(0)))));
  auto rules = p2paudit::load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo.platform, {});
  auto devices = p2paudit::matrix_devices(topo, state.range(1) != 0);
  for (auto _ : state) {
    p2paudit::P2pdmaIndex index(topo, rules);
    for (const auto& provider : devices)
      for (const auto& client : devices) benchmark::DoNotOptimize(index.outcome(provider.index, client.index).map_type);
  }
  auto pairs = static_cast<int64_t>(devices.size() * devices.size());
  state.SetItemsProcessed(state.iterations() * pairs);
  state.counters["pairs"] = static_cast<double>(pairs);
}

// The default policy's decision for every ordered pair of the devices that matter (policy's cost
// without its output), the evaluator made anew each time.
void BM_PolicyAllPairs(benchmark::State& state) {
  auto topo = p2paudit::read_topology(p2paudit::Sysroot::open(Machines::instance().tarball(static_cast<int>(state.range(0)))));
  auto rules = p2paudit::load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo.platform, {});
  auto policy = p2paudit::policy::RuleSet::load(p2paudit::policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  auto devices = p2paudit::matrix_devices(topo, false);
  size_t groups = 0;
  for (auto _ : state) {
    p2paudit::policy::PolicyEvaluator evaluator(topo, rules, policy, nullptr);
    for (const auto& provider : devices)
      for (const auto& client : devices) benchmark::DoNotOptimize(evaluator.decide(provider.index, client.index));
    groups = evaluator.groups().size();
  }
  auto pairs = static_cast<int64_t>(devices.size() * devices.size());
  state.SetItemsProcessed(state.iterations() * pairs);
  state.counters["pairs"] = static_cast<double>(pairs);
  state.counters["groups"] = static_cast<double>(groups);
}

// The same pairs decided again by one evaluator: every decision remembered (a memo hit: the
// pair's outcome and fact values, O(depth), no fact set and no allocation).
void BM_PolicyAllPairsRemembered(benchmark::State& state) {
  auto topo = p2paudit::read_topology(p2paudit::Sysroot::open(Machines::instance().tarball(static_cast<int>(state.range(0)))));
  auto rules = p2paudit::load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo.platform, {});
  auto policy = p2paudit::policy::RuleSet::load(p2paudit::policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  auto devices = p2paudit::matrix_devices(topo, false);
  p2paudit::policy::PolicyEvaluator evaluator(topo, rules, policy, nullptr);
  for (const auto& provider : devices)
    for (const auto& client : devices) evaluator.decide(provider.index, client.index, false);
  for (auto _ : state)
    for (const auto& provider : devices)
      for (const auto& client : devices) benchmark::DoNotOptimize(evaluator.decide(provider.index, client.index, false));
  auto pairs = static_cast<int64_t>(devices.size() * devices.size());
  state.SetItemsProcessed(state.iterations() * pairs);
  state.counters["pairs"] = static_cast<double>(pairs);
}

// Counts what is written and keeps nothing.
class CountingBuffer : public std::streambuf {
 public:
  size_t bytes = 0;

 protected:
  std::streamsize xsputn(const char*, std::streamsize n) override {
    bytes += static_cast<size_t>(n);
    return n;
  }
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) ++bytes;
    return c;
  }
};

// `policy --all --format json` without its reading: every function's pairs decided and written.
void BM_PolicyJsonAll(benchmark::State& state) {
  auto topo = p2paudit::read_topology(p2paudit::Sysroot::open(Machines::instance().tarball(static_cast<int>(state.range(0)))));
  auto rules = p2paudit::load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo.platform, {});
  auto policy = p2paudit::policy::RuleSet::load(p2paudit::policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  auto devices = p2paudit::matrix_devices(topo, true);
  size_t bytes = 0;
  for (auto _ : state) {
    p2paudit::policy::PolicyEvaluator evaluator(topo, rules, policy, nullptr);
    CountingBuffer counter;
    std::ostream out(&counter);
    p2paudit::policy::write_policy_json(out, evaluator, devices, nlohmann::ordered_json::object(), false);
    bytes = counter.bytes;
  }
  auto pairs = static_cast<int64_t>(devices.size() * devices.size());
  state.SetItemsProcessed(state.iterations() * pairs);
  state.counters["pairs"] = static_cast<double>(pairs);
  state.counters["bytes_per_pair"] = static_cast<double>(bytes) / static_cast<double>(pairs);
}

// `log` on an IOMMU fault storm: 100,000 AMD-Vi IO_PAGE_FAULT lines, each from one endpoint into
// another's BAR (a different pair every line, so each is read, recognised and its BAR owner found),
// against a machine of state.range(0) functions. Per line: O(log BARs), not O(functions).
void BM_LogFaultStorm(benchmark::State& state) {
  auto topo = p2paudit::read_topology(p2paudit::Sysroot::open(Machines::instance().tarball(static_cast<int>(state.range(0)))));
  auto rules = p2paudit::load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo.platform, {});
  auto policy = p2paudit::policy::RuleSet::load(p2paudit::policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  std::vector<std::pair<std::string, uint64_t>> with_bar;  // a function and an address inside its first memory BAR
  for (const auto& f : topo.functions)
    for (const auto& bar : f.bars)
      if (!bar.io && bar.size) {
        with_bar.emplace_back(f.bdf.str(), bar.start + bar.size / 2);
        break;
      }
  if (with_bar.size() < 2) {
    state.SkipWithError("the synthetic machine has fewer than two functions with a memory BAR");
    return;
  }
  std::string log;
  constexpr int kLines = 100000;
  for (int i = 0; i < kLines; ++i) {
    const auto& from = with_bar[static_cast<size_t>(i) % with_bar.size()];
    const auto& to = with_bar[(static_cast<size_t>(i) * 7 + 1) % with_bar.size()];
    log += "[  " + std::to_string(100 + i) + ".000000] amdgpu " + from.first +
           ": AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x000b address=0x" +
           (std::stringstream() << std::hex << to.second).str() + " flags=0x0020]\n";
  }
  for (auto _ : state) {
    p2paudit::policy::PolicyEvaluator evaluator(topo, rules, policy, nullptr);
    p2paudit::policy::LogExplainer explainer(evaluator, rules);
    std::istringstream in(log);
    p2paudit::read_kernel_log(in, "storm", {}, [&](p2paudit::KernelLogLine&& line) {
      if (auto e = p2paudit::recognise_kernel_log_line(line)) explainer.add(*e);
    });
    explainer.finish();
    benchmark::DoNotOptimize(explainer.events_seen());
  }
  state.SetItemsProcessed(state.iterations() * kLines);
  state.counters["functions_with_bar"] = static_cast<double>(with_bar.size());
}

BENCHMARK(BM_ReadTopologyDirectory)->Arg(64)->Arg(512)->Arg(4096)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadTopologyTarball)->Arg(64)->Arg(512)->Arg(4096)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_P2pdmaDistanceAllPairs)->Arg(64)->Arg(512)->Unit(benchmark::kMillisecond);
// {functions, every function (matrix --all) or the devices that matter}
BENCHMARK(BM_P2pdmaIndexAllPairs)->Args({512, 0})->Args({4096, 0})->Args({4096, 1})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PolicyAllPairs)->Arg(512)->Arg(4096)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PolicyAllPairsRemembered)->Arg(512)->Arg(4096)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PolicyJsonAll)->Arg(512)->Arg(4096)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LogFaultStorm)->Arg(512)->Arg(4096)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("machines", Machines::instance().root().string());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
