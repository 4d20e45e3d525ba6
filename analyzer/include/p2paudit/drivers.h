// SPDX-License-Identifier: GPL-2.0-or-later
// Drivers and modules through libkmod: the bound driver's module (version, srcversion, built-in),
// or, for an unbound function, the modules its modalias would load.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "p2paudit/remove_on_signal.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology.h"

struct kmod_ctx;

namespace p2paudit {

// Where a directory sysroot's libkmod lookups run. kConfinedChild: a forked child (no exec) that
// first confines itself to the private index copy (a new user namespace where allowed, then
// chroot), so that libkmod's unconditional read of /proc/cmdline finds nothing of the host, and a
// crash inside libkmod ends the child, not the analysis; where neither fork nor chroot is possible
// the child (or, without fork, this process) reads the host's /proc/cmdline as libkmod 30 always
// does. kInProcess: this process, for fuzzing libkmod itself and for tests of its context.
enum class KmodQueries { kConfinedChild, kInProcess };

// One deadline for every libkmod lookup of one analysis (one ModuleResolver: one sysroot, so one
// per input of `aggregate`), counted from the resolver's start: a stranger's index can make each
// lookup slow (a modalias is matched with fnmatch against every wildcard alias of an index of up
// to 16 MiB), and a limit per lookup would restart for every function. Past it the child is ended and the remaining functions keep unknown module
// facts, with one finding. The lookups of a real index take milliseconds.
struct KmodBudget {
  std::chrono::milliseconds total = std::chrono::seconds(10);
  std::chrono::milliseconds child_delay{0};  // tests only: the child waits this long before each answer
};

class ModuleResolver {
 public:
  // Live sysroot: the running kernel's module index, in this process. A directory sysroot: the
  // index files of its lib/modules/<release>, checked and copied to a private directory (removed
  // by the destructor), with no modprobe.d configuration; without them, or when one is refused,
  // module facts stay unknown.
  ModuleResolver(const Sysroot& root, const std::string& kernel_release,
                 KmodQueries where = KmodQueries::kConfinedChild, KmodBudget budget = {});
  ~ModuleResolver();
  ModuleResolver(const ModuleResolver&) = delete;
  ModuleResolver& operator=(const ModuleResolver&) = delete;

  bool available() const { return ctx_ != nullptr || child_ > 0; }
  ModuleInfo for_driver(const std::string& driver) const;
  ModuleInfo for_modalias(const std::string& modalias) const;
  // Index files refused or not copied, and a child that stopped answering, for the topology's
  // findings (read them after the lookups).
  const std::vector<Finding>& findings() const { return findings_; }
  struct kmod_ctx* context() const { return ctx_; }  // for tests: what configuration libkmod holds
  bool confined() const { return confined_; }        // for tests: the child chrooted into the copy

 private:
  void copy_indexes(const Sysroot& root, const std::string& rel, KmodQueries where);
  bool start_child();
  void stop_child(const std::string& why) const;
  bool ask(char op, const std::string& arg, std::vector<std::string>& answer, bool& flag) const;
  bool in_time() const;
  std::string out_of_time() const;
  // The private copy of the index, removed with its files on every way out: by its destructor on
  // a return, on an exception (even one thrown by the resolver's constructor) and after the child
  // ended, and by RemoveOnSignal on SIGINT, SIGTERM or SIGHUP. The child never removes it.
  struct PrivateCopy {
    std::string dir;                       // where the sysroot's checked index files were copied
    std::vector<std::string> files;
    RemoveOnSignal on_signal;
    PrivateCopy() = default;
    PrivateCopy(const PrivateCopy&) = delete;
    PrivateCopy& operator=(const PrivateCopy&) = delete;
    ~PrivateCopy();
  };
  const Sysroot& root_;
  KmodBudget budget_;
  std::chrono::steady_clock::time_point deadline_;  // of every lookup together
  PrivateCopy copy_;
  std::string index_rel_;                  // lib/modules/<release> of the sysroot, for findings
  mutable std::vector<Finding> findings_;
  struct kmod_ctx* ctx_ = nullptr;
  mutable int child_ = -1;                 // the confined child's pid, -1 when none answers
  mutable int sock_ = -1;                  // its end of the socket pair
  mutable bool timed_out_ = false;         // the deadline passed: no more lookups, one finding said so
  bool confined_ = false;
};

}  // namespace p2paudit
