// SPDX-License-Identifier: GPL-2.0-or-later
// `p2paudit log`: this boot's kernel log (or a saved one) explained pair by pair against the
// prediction; `p2paudit watch`: the events a workload caused, with its exit status kept
// (docs/log.md).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "commands.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"
#include "p2paudit/json_output.h"
#include "p2paudit/kernel_log.h"
#include "p2paudit/policy/log_explain.h"

namespace p2paudit::cli {

namespace {

struct LogArgs : RuleOptions {
  std::string from;                 // log --from FILE|-
  bool since_boot = false;          // log --since-boot: only the last boot of a file holding several
  OutputTarget target;              // -o FILE: the JSON document
  std::optional<double> seconds;    // watch --seconds N
  std::vector<std::string> command; // watch -- COMMAND ARGS...
};

// The live log: /dev/kmsg through kernel_log.h, or for tests a file of /dev/kmsg records named by
// P2PAUDIT_KMSG_FILE (docs/log.md): its position is the number of records it holds.
const char* kmsg_file_for_tests() {
  const char* v = std::getenv("P2PAUDIT_KMSG_FILE");
  return v && *v ? v : nullptr;
}

std::optional<uint64_t> live_position(std::string* why) {
  const char* file = kmsg_file_for_tests();
  if (!file) return kmsg_position(why);
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    *why = fmt::format("{} cannot be read: {}", file, std::strerror(errno));
    return std::nullopt;
  }
  uint64_t next = 0;
  read_kernel_log(in, file, {}, [&](KernelLogLine&& l) {
    if (l.sequence) next = std::max(next, *l.sequence + 1);
  });
  return next;
}

std::vector<std::string> read_live(std::optional<uint64_t> from, const std::function<void(KernelLogLine&&)>& sink) {
  const char* file = kmsg_file_for_tests();
  if (!file) return read_kmsg(from, {}, sink);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("{} cannot be read: {}", file, std::strerror(errno)));
  return read_kernel_log(in, file, {}, [&](KernelLogLine&& l) {
    if (!from || (l.sequence && *l.sequence >= *from)) sink(std::move(l));
  });
}

// Feeds the lines to the explainer; a line that starts a boot ("Linux version ...", the kernel's
// first line) starts over when only the last boot is wanted.
class Feeder {
 public:
  Feeder(policy::PolicyEvaluator& evaluator, const KernelRules& kernel, bool since_boot)
      : evaluator_(evaluator), kernel_(kernel), since_boot_(since_boot) {
    explainer_ = std::make_unique<policy::LogExplainer>(evaluator_, kernel_);
  }
  void operator()(KernelLogLine&& line) {
    ++lines_;
    if (since_boot_ && line.text.starts_with("Linux version ")) {
      explainer_ = std::make_unique<policy::LogExplainer>(evaluator_, kernel_);
      lines_ = 1;
    }
    if (auto e = recognise_kernel_log_line(line)) explainer_->add(*e);
  }
  policy::LogExplainer& explainer() { return *explainer_; }
  uint64_t lines() const { return lines_; }

 private:
  policy::PolicyEvaluator& evaluator_;
  const KernelRules& kernel_;
  bool since_boot_;
  std::unique_ptr<policy::LogExplainer> explainer_;
  uint64_t lines_ = 0;
};

// This machine's kernel log tells about the machine analysed only when that is this machine: the
// live "/" (or, in tests, any machine with P2PAUDIT_KMSG_FILE standing in for /dev/kmsg). A
// capture's log is its own (snapshot --with-log) or a saved dmesg given with --from.
bool live_log_describes(const GlobalOptions& global) {
  return kmsg_file_for_tests() || (!global.from_dump() && global.sysroot == "/");
}

void check_format(const GlobalOptions& global, const char* command) {
  if (global.format != "text" && global.format != "json")
    throw InputError(fmt::format("{} prints text or json, not {}", command, global.format));
}

int run_log(const GlobalOptions& global, const LogArgs& args) {
  check_format(global, "log");
  DecisionInputs in = load_decision_inputs(global, args);
  policy::PolicyEvaluator evaluator(in.topo, in.kernel, in.rules, in.vendor_facts());
  Feeder feed(evaluator, in.kernel, args.since_boot);
  policy::LogSource source;
  if (args.from.empty() && !live_log_describes(global)) {
    // Never this machine's log against another machine's tree: the capture's own, or --from.
    source = policy::read_machine_log(global.source(), global.from_dump(), std::nullopt, std::ref(feed));
  } else if (args.from.empty()) {
    source.name = kmsg_file_for_tests() ? kmsg_file_for_tests() : "/dev/kmsg";
    try {
      source.notes = read_live(std::nullopt, std::ref(feed));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}; the prediction could not be checked against the kernel log (run as root, or "
                                   "save `sudo dmesg` and pass it with --from FILE)", e.what()));
    }
  } else if (args.from == "-") {
    source.name = "-";
    source.notes = read_kernel_log(std::cin, "standard input", {}, std::ref(feed));
  } else {
    source = policy::read_log_file(args.from, std::ref(feed));
  }
  source.lines = feed.lines();
  feed.explainer().finish();
  if (global.format == "json") {
    write_output(args.target, [&](std::ostream& out) {
      out << json_text(policy::log_json(in.topo, feed.explainer(), source)) << "\n";
    });
  } else {
    if (!args.target.output.empty() && args.target.output != "-")
      throw InputError("log -o writes the JSON document: add --format json");
    policy::write_log_text(std::cout, in.topo, feed.explainer(), source, text_style(global));
  }
  return feed.explainer().contradictions() ? kExitContradiction : kExitOk;
}

// ---- watch: the child runs the command; signals sent to the tool reach it.
volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_stop = 0;  // --seconds without a command: a signal ends the wait early

void forward_signal(int sig, siginfo_t* info, void*) {
  // A signal from the terminal (SI_KERNEL) reached the child's process group already; one sent to
  // the tool alone (kill, SI_USER or SI_QUEUE) is passed on.
  if (g_child > 0) {
    if (info && info->si_code <= 0) ::kill(static_cast<pid_t>(g_child), sig);
  } else {
    g_stop = 1;
  }
}

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

struct SignalForwarding {
  struct sigaction old[std::size(kForwarded)]{};
  SignalForwarding() {
    struct sigaction sa{};
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &sa, &old[i]);
  }
  ~SignalForwarding() {
    for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &old[i], nullptr);
  }
};

struct CommandOutcome {
  int status = 0;            // the tool's exit status for it: its exit code, or 128 + its signal
  std::optional<int> signal; // the signal that ended it
};

CommandOutcome run_command(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  SignalForwarding forwarding;
  pid_t pid = ::fork();
  if (pid < 0) throw InputError(fmt::format("watch: cannot start {}: {}", escape_line(command[0]), std::strerror(errno)));
  if (pid == 0) {
    for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &forwarding.old[i], nullptr);
    ::execvp(argv[0], argv.data());
    int err = errno;
    std::string message = fmt::format("p2paudit: watch: cannot run {}: {}\n", escape_line(command[0]), std::strerror(err));
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, message.data(), message.size());
    ::_exit(err == ENOENT ? 127 : 126);  // as a shell reports a command not found or not executable
  }
  g_child = pid;
  int raw = 0;
  while (::waitpid(pid, &raw, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  CommandOutcome out;
  if (WIFEXITED(raw)) {
    out.status = WEXITSTATUS(raw);
  } else if (WIFSIGNALED(raw)) {
    out.signal = WTERMSIG(raw);
    out.status = 128 + WTERMSIG(raw);
  }
  return out;
}

void wait_seconds(double seconds) {
  SignalForwarding forwarding;  // a signal ends the wait; the report follows
  g_stop = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!g_stop && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::min(std::chrono::duration<double>(0.1),
                                         std::chrono::duration<double>(until - std::chrono::steady_clock::now())));
}

int run_watch(const GlobalOptions& global, const LogArgs& args) {
  check_format(global, "watch");
  if (args.command.empty() && !args.seconds)
    throw InputError("watch: give the workload after -- (watch -- COMMAND ARGS...) or a time (watch --seconds N)");
  if (args.seconds && (*args.seconds < 0 || *args.seconds > 7 * 24 * 3600))
    throw InputError("watch --seconds: expected 0 to 604800");
  if (!args.target.output.empty() && args.target.output != "-" && global.format != "json")
    throw InputError("watch -o writes the JSON document: add --format json");
  if (!live_log_describes(global))
    throw InputError(fmt::format("watch reads this machine's kernel log, which says nothing of {}: watch the live "
                                 "machine (no --sysroot or --lspci-dump), or read a capture's log with `log`",
                                 global.source()));
  // The machine first: bad input ends here, before the workload runs.
  DecisionInputs in = load_decision_inputs(global, args);
  policy::PolicyEvaluator evaluator(in.topo, in.kernel, in.rules, in.vendor_facts());
  policy::LogSource source;
  source.name = kmsg_file_for_tests() ? kmsg_file_for_tests() : "/dev/kmsg";
  std::string why;
  std::optional<uint64_t> position = live_position(&why);

  std::optional<CommandOutcome> outcome;
  if (!args.command.empty()) outcome = run_command(args.command);
  if (args.seconds) wait_seconds(*args.seconds);

  Feeder feed(evaluator, in.kernel, false);
  if (!position) {
    source.readable = false;
    source.unreadable_reason = why;
  } else {
    try {
      source.notes = read_live(position, std::ref(feed));
    } catch (const InputError& e) {
      source.readable = false;
      source.unreadable_reason = e.what();
    }
  }
  source.lines = feed.lines();
  feed.explainer().finish();
  if (outcome)
    source.notes.push_back(outcome->signal ? fmt::format("the command was ended by signal {}", *outcome->signal)
                                           : fmt::format("the command exited with status {}", outcome->status));
  if (global.format == "json") {
    auto j = policy::log_json(in.topo, feed.explainer(), source);
    nlohmann::ordered_json watch = {{"command", args.command},
                                    {"seconds", args.seconds ? nlohmann::ordered_json(*args.seconds) : nullptr},
                                    {"exit_status", outcome ? nlohmann::ordered_json(outcome->status) : nullptr},
                                    {"signal", outcome && outcome->signal ? nlohmann::ordered_json(*outcome->signal) : nullptr}};
    j["watch"] = watch;
    write_output(args.target, [&](std::ostream& out) { out << json_text(j) << "\n"; });
  } else {
    // The report goes to stderr: stdout is the workload's.
    std::cerr << "\np2paudit watch: ";
    policy::write_log_text(std::cerr, in.topo, feed.explainer(), source, TextStyle{});
  }
  if (outcome) return outcome->status;
  if (!source.readable) return kExitError;
  return feed.explainer().contradictions() ? kExitContradiction : kExitOk;
}

void add_common(CLI::App* cmd, LogArgs& args) {
  add_rule_options(cmd, args);
  add_output_options(*cmd, args.target);
}

}  // namespace

void add_log_command(CLI::App& app, const GlobalOptions& global, int* status) {
  auto args = std::make_shared<LogArgs>();
  auto* log = app.add_subcommand("log", "This boot's kernel log (or a saved one) explained pair by pair against the "
                                        "prediction (docs/log.md)");
  log->add_option("--from", args->from, "A saved `dmesg` or `journalctl -k` output (FILE, or - for standard input) "
                                        "instead of /dev/kmsg");
  log->add_flag("--since-boot", args->since_boot, "Only the last boot of a log holding several");
  add_common(log, *args);
  log->callback([&global, status, args] { *status = run_log(global, *args); });

  auto wargs = std::make_shared<LogArgs>();
  auto* watch = app.add_subcommand("watch", "Run a workload (or wait N seconds) and explain the kernel log's events of "
                                            "the run; exits with the workload's status (docs/log.md)");
  watch->add_option("--seconds", wargs->seconds, "Without a command: watch this long; with one: wait this long after it "
                                                 "ends for late messages");
  watch->add_option("command", wargs->command, "-- COMMAND ARGS...: the workload, run without a shell");
  add_common(watch, *wargs);
  watch->callback([&global, status, wargs] { *status = run_watch(global, *wargs); });
}

}  // namespace p2paudit::cli
