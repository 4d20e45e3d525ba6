// SPDX-License-Identifier: GPL-2.0-or-later
// The runtimes' answers at NVML's cost, and the per-boot answer cache (docs/probe.md): NVML's
// answers decide every pair as a full NVML + CUDA probe does; a cached answer is used only while
// the boot, the driver load and the devices are the same, only from a file of the effective user's
// that nobody else can write, and never for a snapshot.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "p2paudit/kernel_rules.h"
#include "p2paudit/policy/evaluate.h"
#include "p2paudit/probe/answer_cache.h"
#include "p2paudit/probe/decision_inputs.h"
#include "p2paudit/probe/runtime_facts.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string h200_sysroot() { return test::data_path("machines/h200x2-firecracker-vm/sysroot.tar.gz"); }

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// ---- NVML first ----------------------------------------------------------------------------

struct Decided {
  std::string action, rule;
  bool operator==(const Decided&) const = default;
};

std::map<std::pair<size_t, size_t>, Decided> decide_every_pair(const std::vector<probe::RuntimeReport>& reports) {
  Sysroot root = Sysroot::open(h200_sysroot());
  Topology topo = read_topology(root);
  auto facts = probe::runtime_facts(json::parse(probe::probe_document(reports, nullptr, "/", "", {}).dump()), "test", &topo);
  KernelRules kernel = load_kernel_rules(fs::path(P2PAUDIT_SOURCE_RULES_DIR) / "kernel", topo.platform, {});
  auto rules = policy::RuleSet::load(policy::default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  std::map<std::pair<size_t, size_t>, Decided> out;
  for (size_t p = 0; p < topo.functions.size(); ++p)
    for (size_t c = 0; c < topo.functions.size(); ++c) {
      if (p == c) continue;
      auto d = policy::decide_pair(topo, kernel, rules, &facts.facts, p, c);
      out[{p, c}] = {policy::to_string(d.decision.action), d.decision.rule};
    }
  return out;
}

bool asked(const std::vector<probe::RuntimeReport>& reports, const std::string& runtime) {
  for (const auto& r : reports)
    if (r.runtime == runtime) return true;
  return false;
}

TEST(NvmlFirst, DecisionsEqualAFullProbeOnEveryPair) {
  ScopedEnv nvml("P2PAUDIT_NVML_LIBRARY", FAKE_NVML_LIBRARY), cuda("P2PAUDIT_CUDA_LIBRARY", FAKE_CUDA_LIBRARY),
      hip("P2PAUDIT_HIP_LIBRARY", "/nonexistent");
  for (const char* scenario : {"ok", "p2p_not_supported"}) {
    ScopedEnv s("FAKE_NVIDIA_SCENARIO", scenario);
    auto full = probe::probe_all({});
    auto fast = probe::probe_for_decisions({});
    EXPECT_TRUE(asked(full, "cuda")) << scenario;
    EXPECT_FALSE(asked(fast, "cuda")) << scenario << ": NVML answered every pair, CUDA is not needed";
    // The first screen asks NVML only what decisions read (a driver call per status and pair).
    for (const auto& r : fast)
      if (r.runtime == "nvml")
        for (const auto& p : r.pairs) {
          std::vector<std::string> keys;
          for (const auto& [key, value] : p.answers.items()) keys.push_back(key);
          EXPECT_EQ(keys, (std::vector<std::string>{"read", "write", "nvlink"})) << scenario;
        }
    for (const auto& r : full)
      if (r.runtime == "nvml")
        for (const auto& p : r.pairs) EXPECT_TRUE(p.answers.contains("atomics") && p.answers.contains("prop")) << scenario;
    auto a = decide_every_pair(full), b = decide_every_pair(fast);
    ASSERT_FALSE(a.empty());
    size_t driver_decided = 0;
    for (const auto& [pair, d] : a) {
      EXPECT_EQ(b.at(pair), d) << scenario << ": pair " << pair.first << " -> " << pair.second << ": " << d.rule
                               << " with CUDA, " << b.at(pair).rule << " with NVML alone";
      driver_decided += d.rule.starts_with("nvidia-driver") || d.rule == "nvlink";
    }
    EXPECT_GE(driver_decided, 2u) << scenario << ": the GPU pairs must be decided by the runtimes' answers";
  }
}

TEST(NvmlFirst, CudaIsAskedWhereNvmlCannotAnswer) {
  ScopedEnv nvml("P2PAUDIT_NVML_LIBRARY", "/nonexistent"), cuda("P2PAUDIT_CUDA_LIBRARY", FAKE_CUDA_LIBRARY),
      hip("P2PAUDIT_HIP_LIBRARY", "/nonexistent"), s("FAKE_NVIDIA_SCENARIO", "ok");
  auto fast = probe::probe_for_decisions({});
  ASSERT_TRUE(asked(fast, "cuda"));
  EXPECT_EQ(fast[1].status, "ok");
  // And the decisions are CUDA's: unknown never became a yes by NVML's silence.
  for (const auto& [pair, d] : decide_every_pair(fast)) EXPECT_NE(d.rule, "nvidia-driver-unknown");
}

TEST(NvmlFirst, AnNvmlErrorOnAPairIsNotAnAnswer) {
  probe::RuntimeReport nvml;
  nvml.runtime = "nvml";
  nvml.status = "ok";
  for (int i = 0; i < 2; ++i) nvml.devices.push_back({i, Bdf::parse(i ? "0000:00:07.0" : "0000:00:06.0"), "gpu", {}});
  nvml.pairs = {{0, 1, {{"read", "ok"}, {"write", "ok"}}}, {1, 0, {{"read", "ok"}, {"write", "ok"}}}};
  EXPECT_TRUE(probe::nvml_answers_every_pair(nvml));
  nvml.pairs[1].answers["write"] = "NVML_ERROR_UNKNOWN";
  EXPECT_FALSE(probe::nvml_answers_every_pair(nvml));
  nvml.pairs[1].answers["write"] = "NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED";  // a refusal is an answer
  EXPECT_TRUE(probe::nvml_answers_every_pair(nvml));
  nvml.pairs.pop_back();  // a pair not asked
  EXPECT_FALSE(probe::nvml_answers_every_pair(nvml));
  nvml.status = "hung";
  EXPECT_FALSE(probe::nvml_answers_every_pair(nvml));
}

// ---- the answer cache ----------------------------------------------------------------------

// A fake live tree (boot id, the nvidia module) and a cache directory in a private temporary directory.
class CacheFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/p2paudit-answer-cache-XXXXXX";
    base_ = mkdtemp(templ);
    root_ = base_ + "/root";
    cache_ = base_ + "/cache";
    fs::create_directories(root_ + "/proc/sys/kernel/random");
    fs::create_directories(root_ + "/sys/module/nvidia");
    write(root_ + "/proc/sys/kernel/random/boot_id", "0c6f1c9e-5a4b-4a43-9c7e-1f0e8c2a3b4d\n");
    write(root_ + "/sys/module/nvidia/version", "595.45.04\n");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(base_, ec);
  }
  static void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

  // One ask through the cache; `asks` counts how often the runtimes were asked.
  probe::CachedAnswers ask(probe::AnswerCacheMode mode, const std::string& answer = "ok") {
    probe::CachedAsk how;
    how.mode = mode;
    how.root = root_;
    how.dir = cache_;
    how.ask = [this, answer] {
      ++asks_;
      return nlohmann::ordered_json{{"schema_version", 1}, {"runtimes", json::array()}, {"answer", answer}};
    };
    return probe::ask_with_cache(how, topo_, [this](const json& doc) {
      probe::runtime_facts(doc, "the cache");
      used_ = doc.value("answer", "");
    });
  }
  std::string file() const { return cache_ + "/" + probe::kAnswerCacheFile; }

  std::string base_, root_, cache_, used_;
  Topology topo_;
  int asks_ = 0;
};

std::string joined(const std::vector<std::string>& notes) {
  std::string s;
  for (const auto& n : notes) s += n + "\n";
  return s;
}

TEST_F(CacheFixture, SecondAskOnTheSameBootIsAHit) {
  auto first = ask(probe::AnswerCacheMode::kUse);
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(asks_, 1);
  struct stat st {};
  ASSERT_EQ(::stat(cache_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat(file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  auto second = ask(probe::AnswerCacheMode::kUse, "changed");
  EXPECT_TRUE(second.from_cache) << joined(second.notes);
  EXPECT_EQ(asks_, 1);
  EXPECT_EQ(used_, "ok");  // the stored answer, not a new one
}

TEST_F(CacheFixture, NoCacheNeitherReadsNorWrites) {
  ask(probe::AnswerCacheMode::kUse);
  auto r = ask(probe::AnswerCacheMode::kOff, "fresh");
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(asks_, 2);
  EXPECT_EQ(used_, "fresh");
  fs::remove_all(cache_);
  ask(probe::AnswerCacheMode::kOff);
  EXPECT_FALSE(fs::exists(cache_));
}

TEST_F(CacheFixture, RefreshAsksAgainAndKeepsTheNewAnswers) {
  ask(probe::AnswerCacheMode::kUse);
  auto r = ask(probe::AnswerCacheMode::kRefresh, "fresh");
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(asks_, 2);
  EXPECT_EQ(used_, "fresh");
  ask(probe::AnswerCacheMode::kUse, "third");
  EXPECT_EQ(asks_, 2);
  EXPECT_EQ(used_, "fresh");
}

TEST_F(CacheFixture, ADriverReloadOrAnotherBootIsAMiss) {
  ask(probe::AnswerCacheMode::kUse);
  write(root_ + "/sys/module/nvidia/version", "595.58.03\n");  // another driver loaded
  ask(probe::AnswerCacheMode::kUse, "new driver");
  EXPECT_EQ(asks_, 2);
  EXPECT_EQ(used_, "new driver");
  // The same version reloaded: a new /sys/module directory, a new time.
  fs::remove_all(root_ + "/sys/module/nvidia");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fs::create_directories(root_ + "/sys/module/nvidia");
  write(root_ + "/sys/module/nvidia/version", "595.58.03\n");
  ask(probe::AnswerCacheMode::kUse, "reloaded");
  EXPECT_EQ(asks_, 3);
  EXPECT_EQ(used_, "reloaded");
  // The module unloaded.
  fs::remove_all(root_ + "/sys/module/nvidia");
  ask(probe::AnswerCacheMode::kUse, "unloaded");
  EXPECT_EQ(asks_, 4);
  write(root_ + "/proc/sys/kernel/random/boot_id", "11111111-2222-3333-4444-555555555555\n");
  auto r = ask(probe::AnswerCacheMode::kUse, "rebooted");
  EXPECT_EQ(asks_, 5);
  EXPECT_EQ(used_, "rebooted");
  EXPECT_NE(joined(r.notes).find("another boot"), std::string::npos) << joined(r.notes);
  // The devices changed.
  Function gpu;
  gpu.bdf = *Bdf::parse("0000:00:06.0");
  gpu.vendor = 0x10de, gpu.device = 0x2335, gpu.class_code = 0x030200;
  topo_.functions.push_back(gpu);
  ask(probe::AnswerCacheMode::kUse, "new gpu");
  EXPECT_EQ(asks_, 6);
  EXPECT_EQ(used_, "new gpu");
}

TEST_F(CacheFixture, WithoutABootIdThereIsNoCache) {
  fs::remove(root_ + "/proc/sys/kernel/random/boot_id");
  auto r = ask(probe::AnswerCacheMode::kUse);
  ask(probe::AnswerCacheMode::kUse);
  EXPECT_EQ(asks_, 2);
  EXPECT_FALSE(fs::exists(file()));
  EXPECT_NE(joined(r.notes).find("boot id"), std::string::npos);
}

// Poisoning: whatever another user could have written is not read.
TEST_F(CacheFixture, AFileOwnedByAnotherUserIsIgnoredWithANote) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another user";
  ask(probe::AnswerCacheMode::kUse);
  ASSERT_EQ(::chown(file().c_str(), 12345, 12345), 0);
  auto r = ask(probe::AnswerCacheMode::kUse, "fresh");
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(used_, "fresh");
  EXPECT_NE(joined(r.notes).find("owned by uid 12345"), std::string::npos) << joined(r.notes);
  // A directory of another user's: neither read nor written.
  ASSERT_EQ(::chown(file().c_str(), 0, 0), 0);
  ASSERT_EQ(::chown(cache_.c_str(), 12345, 12345), 0);
  r = ask(probe::AnswerCacheMode::kUse, "again");
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(used_, "again");
  EXPECT_NE(joined(r.notes).find("not cached"), std::string::npos) << joined(r.notes);
}

// An unprivileged user: no cache without XDG_RUNTIME_DIR, their own under it, and never root's.
TEST_F(CacheFixture, AnUnprivilegedUserNeverReadsRootsCache) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become another user";
  ask(probe::AnswerCacheMode::kUse);  // root's file, 0600 in a 0700 directory
  ASSERT_EQ(::chmod(base_.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(cache_.c_str(), 0755), 0);  // even where the directory lets others look in
  ASSERT_EQ(::chmod(file().c_str(), 0644), 0);
  const auto key = probe::answer_cache_key(root_, topo_);
  ASSERT_TRUE(key);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // In the child: 1 = no cache without XDG_RUNTIME_DIR failed, 2 = the XDG directory, 3 = root's file read.
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(9);
    ::unsetenv("P2PAUDIT_ANSWER_CACHE_DIR");
    ::unsetenv("XDG_RUNTIME_DIR");
    if (probe::answer_cache_dir(nullptr)) ::_exit(1);
    ::setenv("XDG_RUNTIME_DIR", "/run/user/65534", 1);
    if (probe::answer_cache_dir(nullptr) != std::optional<std::string>("/run/user/65534/p2paudit")) ::_exit(2);
    std::string note;
    if (probe::read_answer_cache(cache_, *key, &note) || note.find("owned by uid 0") == std::string::npos) ::_exit(3);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: a cache without XDG_RUNTIME_DIR, 2: not under XDG_RUNTIME_DIR, 3: root's file was read";
}

TEST_F(CacheFixture, AFileOrDirectoryOthersCanWriteIsIgnored) {
  ask(probe::AnswerCacheMode::kUse);
  ASSERT_EQ(::chmod(file().c_str(), 0666), 0);
  auto r = ask(probe::AnswerCacheMode::kUse, "fresh");
  EXPECT_FALSE(r.from_cache);
  EXPECT_NE(joined(r.notes).find("lets others in"), std::string::npos) << joined(r.notes);
  ASSERT_EQ(::chmod(cache_.c_str(), 0777), 0);
  r = ask(probe::AnswerCacheMode::kUse, "fresh");
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(asks_, 3);
  // A symlink in the file's place is not followed.
  ASSERT_EQ(::chmod(cache_.c_str(), 0700), 0);
  fs::remove(file());
  write(base_ + "/elsewhere.json", "{}");
  fs::create_symlink(base_ + "/elsewhere.json", file());
  r = ask(probe::AnswerCacheMode::kUse, "fresh");
  EXPECT_FALSE(r.from_cache);
  EXPECT_NE(joined(r.notes).find("symlink"), std::string::npos) << joined(r.notes);
}

TEST_F(CacheFixture, AMalformedOrOversizedFileIsAMissWithANote) {
  ask(probe::AnswerCacheMode::kUse);
  // The right key around a document the strict reader refuses.
  json stored = json::parse(std::ifstream(file()));
  stored["document"]["runtimes"] = "not a list";
  for (const std::string& text : {std::string("{\"schema_version\": 1, \"key\": "), std::string("[1, 2, 3]"),
                                  std::string(probe::kMaxAnswerCacheBytes + 1, ' '), stored.dump()}) {
    write(file(), text);
    ::chmod(file().c_str(), 0600);
    const int before = asks_;
    auto r = ask(probe::AnswerCacheMode::kUse, "fresh");
    EXPECT_FALSE(r.from_cache);
    EXPECT_EQ(asks_, before + 1);
    EXPECT_EQ(used_, "fresh");
    EXPECT_NE(joined(r.notes).find("is not used"), std::string::npos) << joined(r.notes);
  }
}

// A snapshot's or another sysroot's analysis never reads or writes the cache, even where the test
// switch lets the (fake) runtimes be asked for it.
TEST(AnswerCacheScope, OnlyTheLiveRootUsesIt) {
  MachineSource live;
  live.answer_cache = probe::AnswerCacheMode::kUse;
  EXPECT_TRUE(answer_cache_applies(live));
  MachineSource snapshot = live;
  snapshot.sysroot = h200_sysroot();
  EXPECT_FALSE(answer_cache_applies(snapshot));
  MachineSource dump = live;
  dump.lspci_dump = "lspci.txt";
  EXPECT_FALSE(answer_cache_applies(dump));
  MachineSource off;
  EXPECT_FALSE(answer_cache_applies(off));  // library callers get none unless they ask
}

TEST(AnswerCacheScope, ASnapshotNeverReadsOrWritesTheCache) {
  char templ[] = "/tmp/p2paudit-answer-cache-snap-XXXXXX";
  std::string dir = mkdtemp(templ), cache = dir + "/cache";
  std::string env = "env P2PAUDIT_PROBE_ALLOW_SYSROOT=1 P2PAUDIT_ANSWER_CACHE_DIR=" + test::shell_quote(cache) +
                    " P2PAUDIT_NVML_LIBRARY=" + test::shell_quote(FAKE_NVML_LIBRARY) +
                    " P2PAUDIT_CUDA_LIBRARY=" + test::shell_quote(FAKE_CUDA_LIBRARY) + " P2PAUDIT_HIP_LIBRARY=/nonexistent ";
  std::string tool = std::string(P2PAUDIT_TOOL) + " --sysroot " + test::shell_quote(h200_sysroot());
  auto r = test::run_command(env + tool + " policy --format json 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  auto j = json::parse(r.output);
  EXPECT_EQ(j["runtime_probe"]["source"], "live");  // asked (the test switch), yet nothing kept
  EXPECT_EQ(j["runtime_probe"]["cached"], false);
  EXPECT_EQ(j["runtime_probe"]["answered_by"], "nvml");
  EXPECT_FALSE(fs::exists(cache));
  // A cache planted there is not read either: the fake runtimes' answer decides.
  fs::create_directories(cache);
  fs::permissions(cache, fs::perms::owner_all, fs::perm_options::replace);
  std::ofstream(cache + "/" + probe::kAnswerCacheFile) << "{\"schema_version\": 1, \"key\": {}, \"document\": {}}";
  ::chmod((cache + "/" + probe::kAnswerCacheFile).c_str(), 0600);
  r = test::run_command(env + "FAKE_NVIDIA_SCENARIO=p2p_not_supported " + tool + " policy --format json 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  j = json::parse(r.output);
  EXPECT_EQ(j["runtime_probe"]["cached"], false);
  EXPECT_EQ(j["runtime_probe"]["note"].get<std::string>().find("cache"), std::string::npos);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace p2paudit
