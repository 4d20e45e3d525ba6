// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/probe/answer_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "p2paudit/device_class.h"
#include "p2paudit/errors.h"
#include "p2paudit/json_input.h"
#include "p2paudit/probe/runtime_facts.h"

namespace p2paudit::probe {

namespace {

// Closes on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The modules whose loading decides what the runtimes answer.
constexpr std::array kDriverModules = {"nvidia", "nvidia_uvm", "nvidia_peermem", "amdgpu", "xe", "i915"};

// What the runtimes see besides the machine: device selection, and the libraries they load.
constexpr std::array kRuntimeEnvironment = {
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",     "ZE_FLAT_DEVICE_HIERARCHY", "P2PAUDIT_NVML_LIBRARY", "P2PAUDIT_CUDA_LIBRARY",
    "P2PAUDIT_HIP_LIBRARY", "P2PAUDIT_LEVEL_ZERO_LIBRARY", "LD_LIBRARY_PATH",  "LD_PRELOAD"};

// A small pseudo-file of the live tree (at most 256 bytes), trailing whitespace trimmed; nullopt
// when absent.
std::optional<std::string> small_file(const std::string& path) {
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (f.fd < 0) return std::nullopt;
  char buf[257];
  ssize_t n = ::read(f.fd, buf, sizeof buf - 1);
  if (n < 0) return std::nullopt;
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

// Why a cache directory or file opened as `fd` may not be trusted; "" when it may: it must belong
// to the effective user and be closed to everyone else (what another user could write, they could
// have filled with answers of their choosing).
std::string untrusted(int fd, bool directory) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fmt::format("cannot stat it: {}", std::strerror(errno));
  if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
    return directory ? "not a directory" : "not a regular file";
  if (st.st_uid != ::geteuid()) return fmt::format("owned by uid {}, not by uid {}", st.st_uid, ::geteuid());
  if (st.st_mode & 077) return fmt::format("mode {:04o} lets others in ({} expected)", st.st_mode & 07777, directory ? "0700" : "0600");
  if (!directory && static_cast<unsigned long long>(st.st_size) > kMaxAnswerCacheBytes)
    return fmt::format("{} bytes, more than {}", st.st_size, kMaxAnswerCacheBytes);
  return "";
}

int open_directory(const std::string& dir) { return ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC); }

}  // namespace

std::optional<std::string> answer_cache_dir(std::string* why) {
  if (const char* test = std::getenv("P2PAUDIT_ANSWER_CACHE_DIR"); test && *test) return std::string(test);
  if (::geteuid() == 0) return std::string("/run/p2paudit");
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg == '/') return std::string(xdg) + "/p2paudit";
  // No note: a batch job without a login session is the ordinary case, documented in docs/probe.md.
  (void)why;
  return std::nullopt;
}

std::optional<nlohmann::ordered_json> answer_cache_key(const std::string& root, const Topology& topo) {
  const std::string base = root == "/" ? "" : root;
  auto boot = small_file(base + "/proc/sys/kernel/random/boot_id");
  if (!boot || boot->empty()) return std::nullopt;
  nlohmann::ordered_json key;
  key["probe_schema_version"] = kProbeSchemaVersion;
  key["boot_id"] = *boot;
  auto modules = nlohmann::ordered_json::object();
  for (const char* m : kDriverModules) {
    const std::string dir = fmt::format("{}/sys/module/{}", base, m);
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) continue;
    // A reload makes a new directory: its time is when this load's node was first looked up.
    modules[m] = {{"version", small_file(dir + "/version").value_or("")},
                  {"srcversion", small_file(dir + "/srcversion").value_or("")},
                  {"initstate", small_file(dir + "/initstate").value_or("")},
                  {"loaded_ns", static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec},
                  {"changed_ns", static_cast<long long>(st.st_ctim.tv_sec) * 1000000000LL + st.st_ctim.tv_nsec}};
  }
  key["modules"] = std::move(modules);
  auto devices = nlohmann::ordered_json::array();
  for (const auto& f : topo.functions) {
    DeviceClass c = classify_device(f);
    if (c != DeviceClass::kGpu && c != DeviceClass::kAccelerator) continue;
    devices.push_back({{"bdf", f.bdf.str()}, {"id", fmt::format("{:04x}:{:04x}", f.vendor, f.device)}, {"driver", f.driver}});
  }
  key["devices"] = std::move(devices);
  auto env = nlohmann::ordered_json::object();
  for (const char* name : kRuntimeEnvironment)
    if (const char* v = std::getenv(name)) env[name] = std::string(v);
  key["environment"] = std::move(env);
  return key;
}

std::optional<nlohmann::json> read_answer_cache(const std::string& dir, const nlohmann::ordered_json& key,
                                                std::string* note) {
  const std::string path = dir + "/" + kAnswerCacheFile;
  auto refuse = [&](const std::string& what, const std::string& why) -> std::optional<nlohmann::json> {
    if (note) *note = fmt::format("the answer cache {} is not used: {}", what, why);
    return std::nullopt;
  };
  Fd d(open_directory(dir));
  if (d.fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    return refuse(dir, errno == ENOTDIR || errno == ELOOP ? "not a directory (a symlink is not followed)"
                                                          : std::string(std::strerror(errno)));
  }
  if (auto why = untrusted(d.fd, true); !why.empty()) return refuse(dir, why);
  Fd f(::openat(d.fd, kAnswerCacheFile, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (f.fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    return refuse(path, errno == ELOOP ? "a symlink (not followed)" : std::string(std::strerror(errno)));
  }
  if (auto why = untrusted(f.fd, false); !why.empty()) return refuse(path, why);
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = ::read(f.fd, buf, sizeof buf)) != 0;) {
    if (n < 0) return refuse(path, std::strerror(errno));
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxAnswerCacheBytes) return refuse(path, fmt::format("more than {} bytes", kMaxAnswerCacheBytes));
  }
  return parse_answer_cache(text, path, key, note);
}

std::optional<nlohmann::json> parse_answer_cache(std::string_view text, const std::string& origin,
                                                 const nlohmann::ordered_json& key, std::string* note) {
  auto refuse = [&](const std::string& why) -> std::optional<nlohmann::json> {
    if (note) *note = fmt::format("the answer cache {} is not used: {}", origin, why);
    return std::nullopt;
  };
  if (text.size() > kMaxAnswerCacheBytes) return refuse(fmt::format("more than {} bytes", kMaxAnswerCacheBytes));
  nlohmann::json j;
  try {
    j = parse_input_json(text, origin, {16, 1u << 20, "the answer cache's JSON"});
  } catch (const InputError& e) {
    return refuse(e.what());
  }
  if (!j.is_object() || !j.contains("schema_version") || j["schema_version"] != kAnswerCacheSchemaVersion ||
      !j.contains("key") || !j.contains("document") || !j["document"].is_object())
    return refuse(fmt::format("not an answer cache of schema version {}", kAnswerCacheSchemaVersion));
  // Compared as JSON values, exactly: one differing byte of any key is a miss.
  if (j["key"] != nlohmann::json::parse(key.dump())) {
    if (note) *note = "the answer cache is from another boot, driver load or set of devices: the runtimes were asked";
    return std::nullopt;
  }
  return std::move(j["document"]);
}

std::string write_answer_cache(const std::string& dir, const nlohmann::ordered_json& key,
                               const nlohmann::ordered_json& document) {
  const std::string text = nlohmann::ordered_json{{"schema_version", kAnswerCacheSchemaVersion}, {"key", key},
                                                  {"document", document}}
                               .dump() + "\n";
  if (text.size() > kMaxAnswerCacheBytes) return fmt::format("the answers are more than {} bytes", kMaxAnswerCacheBytes);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return fmt::format("cannot create {}: {}", dir, std::strerror(errno));
  Fd d(open_directory(dir));
  if (d.fd < 0) return fmt::format("{}: {}", dir, std::strerror(errno));
  if (auto why = untrusted(d.fd, true); !why.empty()) return fmt::format("{}: {}", dir, why);
  std::random_device random;
  const std::string temp = fmt::format(".{}-{:08x}", kAnswerCacheFile, random());
  Fd f(::openat(d.fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (f.fd < 0) return fmt::format("{}/{}: {}", dir, temp, std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(f.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = std::strerror(errno);
      ::unlinkat(d.fd, temp.c_str(), 0);
      return fmt::format("{}/{}: {}", dir, temp, why);
    }
    done += static_cast<size_t>(n);
  }
  if (::renameat(d.fd, temp.c_str(), d.fd, kAnswerCacheFile) != 0) {
    std::string why = std::strerror(errno);
    ::unlinkat(d.fd, temp.c_str(), 0);
    return fmt::format("{}/{}: {}", dir, kAnswerCacheFile, why);
  }
  return "";
}

CachedAnswers ask_with_cache(const CachedAsk& how, const Topology& topo,
                             const std::function<void(const nlohmann::json&)>& use) {
  CachedAnswers out;
  std::optional<std::string> dir;
  std::optional<nlohmann::ordered_json> key;
  if (how.mode != AnswerCacheMode::kOff) {
    std::string why;
    dir = how.dir ? how.dir : answer_cache_dir(&why);
    if (!why.empty()) out.notes.push_back(why);
    if (dir) key = answer_cache_key(how.root, topo);
    if (dir && !key) out.notes.push_back("no answer cache: the boot id cannot be read");
  }
  if (dir && key && how.mode == AnswerCacheMode::kUse) {
    std::string note;
    if (auto cached = read_answer_cache(*dir, *key, &note)) {
      try {
        use(*cached);
        out.document = std::move(*cached);
        out.from_cache = true;
        return out;
      } catch (const InputError& e) {
        note = fmt::format("the answer cache is not used: {}", e.what());
      }
    }
    if (!note.empty()) out.notes.push_back(std::move(note));
  }
  nlohmann::ordered_json asked = how.ask();
  use(nlohmann::json::parse(asked.dump()));
  if (dir && key)
    if (auto why = write_answer_cache(*dir, *key, asked); !why.empty())
      out.notes.push_back("the answers were not cached: " + why);
  out.document = nlohmann::json::parse(asked.dump());
  return out;
}

}  // namespace p2paudit::probe
