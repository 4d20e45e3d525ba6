// SPDX-License-Identifier: GPL-2.0-or-later
// A per-boot cache of the runtimes' answers (docs/probe.md "The answer cache"): asking NVML and
// CUDA costs a second, and their answers cannot change until the machine reboots, a driver module
// is reloaded or the devices change. The answers of the first screen, `policy` and `check` on the
// live machine are kept in one file, keyed by all of those, and used while every key is the same.
//
// The file is input from outside like any other: it is used only when it and its directory belong
// to the effective user and nobody else can write them (a file another user planted is ignored with
// a note), it is read bounded, parsed with the strict JSON reader and checked again by
// runtime_facts(); its key is compared exactly. It is never read or written for a snapshot, a
// dump or any --sysroot other than "/".
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/topology.h"

namespace p2paudit::probe {

enum class AnswerCacheMode {
  kOff,      // --no-cache (and every library caller that does not ask for it): neither read nor written
  kUse,      // read when its key matches, written after asking
  kRefresh,  // --refresh: the runtimes are asked again, and the answers written
};

inline constexpr int kAnswerCacheSchemaVersion = 1;
inline constexpr size_t kMaxAnswerCacheBytes = 4u << 20;
inline constexpr const char* kAnswerCacheFile = "answers.json";

// The directory the cache lives in: $P2PAUDIT_ANSWER_CACHE_DIR (tests), else /run/p2paudit for
// root, else $XDG_RUNTIME_DIR/p2paudit (the user's own tmpfs, emptied at logout), else none (no
// note: a batch job without a login session is the ordinary case). `why` is kept for a reason
// worth a note.
std::optional<std::string> answer_cache_dir(std::string* why);

// What the answers depend on, as `root` shows it ("/"; a fake tree in tests): the boot id, each GPU
// driver module's version, srcversion and load time (its /sys/module directory's time: a reload
// makes a new one), the GPUs and accelerators with their addresses, IDs and drivers, the
// environment variables that change what the runtimes see, and this program's probe format.
// nullopt when the boot id cannot be read (no cache then).
std::optional<nlohmann::ordered_json> answer_cache_key(const std::string& root, const Topology& topo);

// The stored probe document when the file in `dir` is sound and its key equals `key`; otherwise
// nullopt, and `note` says why when the reason is more than "nothing stored" (planted, malformed,
// another key).
std::optional<nlohmann::json> read_answer_cache(const std::string& dir, const nlohmann::ordered_json& key,
                                                std::string* note);

// The same for the file's text (`origin` names it): the strict JSON reader, the schema version and
// the key; the document itself is checked by its user (runtime_facts()).
std::optional<nlohmann::json> parse_answer_cache(std::string_view text, const std::string& origin,
                                                 const nlohmann::ordered_json& key, std::string* note);

// Stores `document` under `key` (a 0600 file in a 0700 directory, written beside and renamed into
// place); "" when written, else why not.
std::string write_answer_cache(const std::string& dir, const nlohmann::ordered_json& key,
                               const nlohmann::ordered_json& document);

// The cache around asking: what read_runtime_evidence() does on the live machine, with the
// asking, the root and the directory given (tests pass fakes).
struct CachedAsk {
  AnswerCacheMode mode = AnswerCacheMode::kOff;
  std::string root = "/";
  std::optional<std::string> dir;                       // nullopt: answer_cache_dir()
  std::function<nlohmann::ordered_json()> ask;          // the probe document, asked now
};
struct CachedAnswers {
  nlohmann::json document;
  bool from_cache = false;
  std::vector<std::string> notes;                       // why the cache was not used or not written
};
// `use` takes the document (runtime_facts() of it, bound to the tree). When it throws InputError
// for a cached one, that file counts as malformed (a note) and the runtimes are asked; its errors
// for a document asked now go to the caller.
CachedAnswers ask_with_cache(const CachedAsk& how, const Topology& topo,
                             const std::function<void(const nlohmann::json&)>& use);

}  // namespace p2paudit::probe
