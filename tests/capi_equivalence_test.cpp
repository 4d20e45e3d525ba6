// SPDX-License-Identifier: GPL-2.0-or-later
// One answer from every interface: for every capture in tests/data (kernel-oracle sysroots, the
// machines' snapshots including those with stored runtime answers, every lspci dump), and with
// the inputs `check` takes besides the machine (vendor facts, kernel release and rule overrides,
// assumed whitelist entries, --assume-acs-off, site rules), libp2paudit's p2paudit_check() gives
// the decision, rule, authority and certainty that `p2paudit policy --format json` gives for every
// ordered pair (and the grid's text and `report` give the same), and the answer, reason, remedy and
// what would settle an uncertain decision that `p2paudit check --format json` gives for a sample.
// Nothing here names a decision: whatever the rules decide, both interfaces must decide it alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit.h"
#include "capi_names.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using p2paudit::test::answer_name;
using p2paudit::test::decision_name;
using p2paudit::test::verdict_name;
using json = nlohmann::json;
using p2paudit::test::data_path;
using p2paudit::test::shell_quote;

struct Closer {
  void operator()(p2paudit_machine* m) const { p2paudit_close(m); }
};
using Machine = std::unique_ptr<p2paudit_machine, Closer>;
struct StringFree {
  void operator()(char* s) const { p2paudit_string_free(s); }
};
using CString = std::unique_ptr<char, StringFree>;

// The inputs of one comparison, given to the tool as options and to the library as
// p2paudit_options from this one description.
struct Inputs {
  std::string label;
  std::string sysroot, lspci_dump, dump_cpu, dump_iommu, kernel, vendor_facts;
  std::vector<std::string> kernel_rules, assume_whitelisted, assume_acs_off, policy_rules;
  bool no_default_rules = false;

  // Global options (before the command).
  std::string global_args() const {
    std::string a = " --rules-dir " + shell_quote(p2paudit::test::rules_source());
    if (!sysroot.empty()) a += " --sysroot " + shell_quote(sysroot);
    if (!lspci_dump.empty()) a += " --lspci-dump " + shell_quote(lspci_dump);
    if (!dump_cpu.empty()) a += " --dump-cpu " + shell_quote(dump_cpu);
    if (!dump_iommu.empty()) a += " --dump-iommu " + shell_quote(dump_iommu);
    if (!kernel.empty()) a += " --kernel " + shell_quote(kernel);
    for (const auto& f : kernel_rules) a += " --kernel-rules " + shell_quote(f);
    for (const auto& w : assume_whitelisted) a += " --assume-whitelisted " + shell_quote(w);
    for (const auto& s : assume_acs_off) a += " --assume-acs-off " + shell_quote(s);
    return a;
  }
  // policy's and check's own options; the library asks no runtime unless told, so --no-probe.
  std::string command_args() const {
    std::string a = " --no-probe";
    for (const auto& f : policy_rules) a += " --rules " + shell_quote(f);
    if (no_default_rules) a += " --no-default-rules";
    if (!vendor_facts.empty()) a += " --vendor-facts " + shell_quote(vendor_facts);
    return a;
  }
};

// gtest names a case by its label, not by its bytes.
void PrintTo(const Inputs& in, std::ostream* os) { *os << in.label; }

// NULL-terminated arrays over an Inputs' strings, alive as long as this object.
struct CList {
  std::vector<const char*> items;
  explicit CList(const std::vector<std::string>& v) {
    for (const auto& s : v) items.push_back(s.c_str());
    items.push_back(nullptr);
  }
  const char* const* get() const { return items.size() > 1 ? items.data() : nullptr; }
};

const char* or_null(const std::string& s) { return s.empty() ? nullptr : s.c_str(); }

struct Opened {
  p2paudit_status status = P2PAUDIT_ERROR_INTERNAL;
  std::string error;
  Machine machine;
};

Opened open_library(const Inputs& in) {
  CList kernel_rules(in.kernel_rules), whitelisted(in.assume_whitelisted), acs_off(in.assume_acs_off),
      policy_rules(in.policy_rules);
  const std::string rules_dir = p2paudit::test::rules_source();
  p2paudit_options o = P2PAUDIT_OPTIONS_INIT;
  o.sysroot = or_null(in.sysroot);
  o.lspci_dump = or_null(in.lspci_dump);
  o.dump_cpu = or_null(in.dump_cpu);
  o.dump_iommu = or_null(in.dump_iommu);
  o.rules_dir = rules_dir.c_str();
  o.kernel = or_null(in.kernel);
  o.kernel_rules = kernel_rules.get();
  o.assume_whitelisted = whitelisted.get();
  o.assume_acs_off = acs_off.get();
  o.policy_rules = policy_rules.get();
  o.no_default_rules = in.no_default_rules;
  o.vendor_facts = or_null(in.vendor_facts);
  Opened r;
  p2paudit_machine* m = nullptr;
  char* error = nullptr;
  r.status = p2paudit_open_with(&o, &m, &error);
  CString owned(error);
  r.error = error ? error : "";
  r.machine.reset(m);
  return r;
}

struct ToolRun {
  int status = -1;
  json output;
};

ToolRun tool(const Inputs& in, const std::string& command) {
  auto r = p2paudit::test::run_command(p2paudit::test::tool_file() + in.global_args() + " " + command +
                                       in.command_args() + " --format json 2>/dev/null");
  ToolRun t{r.status, json()};
  if (!r.output.empty()) t.output = json::parse(r.output, nullptr, false);
  return t;
}

// The same command's text (no --format): what a person reads.
std::string tool_text(const Inputs& in, const std::string& command) {
  return p2paudit::test::run_command(p2paudit::test::tool_file() + in.global_args() + " " + command +
                                     in.command_args() + " --color never 2>/dev/null")
      .output;
}

// `policy --all --verbose`'s per-pair lines, "gpu0 -> gpu1: host_staged, uncertain (rule ...)": the
// decision and whether it is certain, by (provider name, client name).
std::map<std::pair<std::string, std::string>, std::pair<std::string, bool>> text_decisions(const std::string& text) {
  std::map<std::pair<std::string, std::string>, std::pair<std::string, bool>> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    size_t arrow = line.find(" -> "), colon = line.find(": "), paren = line.find(" (");
    if (line.empty() || line[0] == ' ' || arrow == std::string::npos || colon == std::string::npos ||
        paren == std::string::npos || !(arrow < colon && colon < paren))
      continue;
    std::string decision = line.substr(colon + 2, paren - colon - 2);
    bool certain = true;
    if (decision.ends_with(", uncertain")) decision.resize(decision.size() - 11), certain = false;
    out[{line.substr(0, arrow), line.substr(arrow + 4, colon - arrow - 4)}] = {decision, certain};
  }
  return out;
}

// A decision set as p2paudit_check_result.possible gives it: a bit per p2paudit_decision.
unsigned possible_bits(const json& names) {
  unsigned bits = 0;
  for (const auto& n : names)
    bits |= 1u << (n == "peer" ? P2PAUDIT_DECISION_PEER : n == "host_staged" ? P2PAUDIT_DECISION_HOST_STAGED
                                                                            : P2PAUDIT_DECISION_DENY);
  return bits;
}

int exit_status(p2paudit_answer a) { return a == P2PAUDIT_ANSWER_YES ? 0 : a == P2PAUDIT_ANSWER_NO ? 1 : 3; }

// A JSON string, or "" for null (no rule decided, a rule without authority).
std::string text_or_empty(const json& j) { return j.is_string() ? j.get<std::string>() : ""; }

struct Compared {
  size_t pairs = 0, checked = 0;
};

// The whole comparison for one set of inputs; *n counts what was compared.
void compare_into(const Inputs& in, Compared* out, size_t check_sample) {
  Compared& n = *out;
  ToolRun policy = tool(in, "policy --all");
  Opened lib = open_library(in);
  if (policy.status != 0) {
    // What the tool refuses, the library refuses too (an unreadable dump, a bad option).
    EXPECT_EQ(policy.status, 2) << in.label;
    EXPECT_EQ(lib.status, P2PAUDIT_ERROR_INPUT) << in.label << ": the tool refused the input: " << lib.error;
    return;
  }
  EXPECT_EQ(lib.status, P2PAUDIT_OK) << in.label << ": " << lib.error;
  if (!lib.machine) return;
  EXPECT_EQ(p2paudit_device_count(lib.machine.get()), policy.output["devices"].size()) << in.label;

  // The grid's text and the report, for the same pairs (the report takes no rule options).
  // The text's labels (matrix_labels()): the short name, else the BDF, without its domain when every
  // device is in domain 0.
  std::map<std::string, std::string> name_of_bdf;
  bool one_domain = true;
  for (const json& d : policy.output["devices"]) one_domain &= d["bdf"].get<std::string>().starts_with("0000:");
  for (const json& d : policy.output["devices"]) {
    const std::string name = d["name"], bdf = d["bdf"];
    name_of_bdf[bdf] = !name.empty() ? name : one_domain ? bdf.substr(5) : bdf;
  }
  const auto text = text_decisions(tool_text(in, "policy --all --verbose"));
  std::map<std::pair<std::string, std::string>, json> reported;
  const bool report_comparable = in.policy_rules.empty() && !in.no_default_rules && in.vendor_facts.empty();
  if (report_comparable) {
    auto r = p2paudit::test::run_command(p2paudit::test::tool_file() + in.global_args() + " report --no-probe 2>/dev/null");
    json report = json::parse(r.output, nullptr, false);
    if (report.is_object() && report.contains("decisions"))
      for (const json& d : report["decisions"]) reported[{d["provider"], d["client"]}] = d;
  }

  // --format env: each pair it says is not peer is not a certain peer in the JSON, told uncertain
  // exactly where the JSON says so; peer access is turned on only where no pair is told.
  std::map<std::pair<std::string, std::string>, const json*> by_bdf;
  for (const json& pair : policy.output["pairs"]) by_bdf[{pair["provider"], pair["client"]}] = &pair;
  {
    const std::string env = p2paudit::test::run_command(
        "env -u CUDA_VISIBLE_DEVICES -u HIP_VISIBLE_DEVICES -u ROCR_VISIBLE_DEVICES -u ONEAPI_DEVICE_SELECTOR -u "
        "ZE_AFFINITY_MASK " + p2paudit::test::tool_file() + in.global_args() + " policy" + in.command_args() +
        " --format env 2>/dev/null").output;
    size_t told = 0;
    for (size_t at = env.find("# not peer: "); at != std::string::npos; at = env.find("# not peer: ", at + 1)) {
      const std::string line = env.substr(at, env.find('\n', at) - at);
      const std::string p = line.substr(12, 12), c = line.substr(28, 12);
      auto it = by_bdf.find({p, c});
      if (it == by_bdf.end()) {
        ADD_FAILURE() << in.label << ": env names a pair policy does not list: " << line;
        continue;
      }
      const json& pair = *it->second;
      EXPECT_FALSE(pair["decision"] == "peer" && pair["certain"] == true) << in.label << ": " << line;
      EXPECT_EQ(line.find("(uncertain)") != std::string::npos, !pair["certain"].get<bool>()) << in.label << ": " << line;
      ++told;
    }
    if (env.find("unset NCCL_P2P_DISABLE") != std::string::npos) EXPECT_EQ(told, 0u) << in.label << "\n" << env;
  }

  // Every ordered pair policy lists: decision, rule, authority and whether it is certain.
  size_t reported_and_listed = 0;
  std::set<std::tuple<std::string, std::string, bool>> sampled_groups;
  std::vector<std::pair<std::string, std::string>> sample;
  for (const json& pair : policy.output["pairs"]) {
    auto p = pair["provider"].get<std::string>(), c = pair["client"].get<std::string>();
    const std::string where = in.label + ": " + p + " -> " + c;
    p2paudit_check_result r = P2PAUDIT_CHECK_INIT;
    ASSERT_EQ(p2paudit_check(lib.machine.get(), p.c_str(), c.c_str(), &r, nullptr), P2PAUDIT_OK)
        << in.label << ": " << p2paudit_last_error(lib.machine.get());
    EXPECT_EQ(decision_name(r.decision), pair["decision"].get<std::string>()) << where;
    EXPECT_EQ(r.rule, text_or_empty(pair["rule"])) << where;
    EXPECT_EQ(r.authority, text_or_empty(pair["authority"])) << where;
    const bool certain = pair["certain"].get<bool>();
    EXPECT_EQ(r.certain != 0, certain) << where;
    const json& group = policy.output["groups"][pair["group"].get<size_t>() - 1];
    EXPECT_EQ(r.possible, possible_bits(group["possible"])) << where;
    // What is acted on is the safest of what is possible: the first listed, never a peer in doubt.
    EXPECT_EQ(group["possible"][0], pair["decision"]) << where;
    EXPECT_EQ(certain, group["possible"].size() == 1) << where;
    if (!certain) EXPECT_NE(pair["decision"], "peer") << where;
    EXPECT_EQ(std::string(r.settled_by).empty(), certain) << where;
    // The grid's text says the same (a device with itself is in the JSON alone).
    auto told = p == c ? text.end() : text.find({name_of_bdf[p], name_of_bdf[c]});
    if (p == c) {
    } else if (told == text.end()) ADD_FAILURE() << where << ": not in policy --verbose";
    else EXPECT_EQ(told->second, std::make_pair(pair["decision"].get<std::string>(), certain)) << where;
    // And the report, for the pairs of its devices (the default view's).
    if (auto it = reported.find({p, c}); it != reported.end()) {
      EXPECT_EQ(it->second["decision"], pair["decision"]) << where;
      EXPECT_EQ(it->second["certain"], pair["certain"]) << where;
      EXPECT_EQ(it->second["rule"], pair["rule"]) << where;
      ++reported_and_listed;
    }
    ++n.pairs;
    // check's sample: the first pair of each (decision, rule, certain) the policy gives, a few per capture.
    if (sample.size() < check_sample && sampled_groups.insert({pair["decision"], text_or_empty(pair["rule"]), certain}).second)
      sample.emplace_back(p, c);
  }

  EXPECT_EQ(reported_and_listed, reported.size()) << in.label << ": every pair of the report is one policy lists";

  // The sample through `check`: the same object, the answer and the exit status.
  for (const auto& [p, c] : sample) {
    ToolRun check = tool(in, "check " + shell_quote(p) + " " + shell_quote(c));
    p2paudit_check_result r = P2PAUDIT_CHECK_INIT;
    char* raw = nullptr;
    ASSERT_EQ(p2paudit_check(lib.machine.get(), p.c_str(), c.c_str(), &r, &raw), P2PAUDIT_OK);
    CString details(raw);
    ASSERT_NE(raw, nullptr);
    ASSERT_TRUE(check.output.is_object()) << in.label << ": check " << p << " " << c;
    const std::string where = in.label + ": check " + p + " " + c;
    EXPECT_EQ(check.status, exit_status(r.answer)) << where;
    EXPECT_EQ(answer_name(r.answer), check.output["answer"].get<std::string>()) << where;
    EXPECT_EQ(decision_name(r.decision), check.output["decision"].get<std::string>()) << where;
    EXPECT_EQ(verdict_name(r.verdict), check.output["kernel"]["map_type"].get<std::string>()) << where;
    EXPECT_EQ(r.rule, text_or_empty(check.output["rule"])) << where;
    EXPECT_EQ(r.authority, text_or_empty(check.output["authority"])) << where;
    EXPECT_EQ(r.reason, text_or_empty(check.output["reason"])) << where;
    EXPECT_EQ(r.remedy, text_or_empty(check.output["remedy"])) << where;
    EXPECT_EQ(r.certain != 0, check.output["certain"].get<bool>()) << where;
    EXPECT_EQ(r.possible, possible_bits(check.output["possible"])) << where;
    // The library's settled_by names every fact check's JSON names.
    for (const json& s : check.output["settled_by"])
      EXPECT_NE(std::string(r.settled_by).find(s["fact"].get<std::string>()), std::string::npos) << where;
    json lib_json = json::parse(raw);
    for (const char* key : {"schema_version", "provider", "client", "decision", "certain", "possible", "if_known",
                            "settled_by", "rule", "authority", "reason", "remedy", "rules", "reasons", "remedies",
                            "fired", "undecided_rules", "unknown_facts", "kernel", "facts", "require", "satisfied",
                            "answer", "runtime_probe"})
      EXPECT_EQ(lib_json[key], check.output[key]) << where << ": " << key;
    EXPECT_TRUE(lib_json["verdict"].is_object()) << where;
    ++n.checked;
  }
}

Compared compare(const Inputs& in, size_t check_sample = 4) {
  Compared n;
  compare_into(in, &n, check_sample);
  return n;
}

// Every capture in tests/data a machine can be read from, found on disk rather than listed (a
// capture added later is compared too): every .tar.gz anywhere (sysroots and snapshots, those with
// stored runtime answers included) and every file of an lspci-dumps folder but its SOURCE.md.
std::vector<Inputs> every_capture() {
  std::vector<fs::path> archives, dumps;
  for (const auto& e : fs::recursive_directory_iterator(data_path(""))) {
    if (!e.is_regular_file()) continue;
    const std::string path = e.path().string();
    if (path.ends_with(".tar.gz")) archives.push_back(e.path());
    else if (path.find("/lspci-dumps/") != std::string::npos && e.path().filename() != "SOURCE.md")
      dumps.push_back(e.path());
  }
  std::sort(archives.begin(), archives.end());
  std::sort(dumps.begin(), dumps.end());
  std::vector<Inputs> out;
  for (const auto& p : archives) {
    Inputs in;
    in.label = fs::relative(p, data_path("")).string();
    in.sysroot = p.string();
    out.push_back(in);
  }
  for (const auto& p : dumps) {
    Inputs in;
    in.label = fs::relative(p, data_path("")).string();
    in.lspci_dump = p.string();
    out.push_back(in);
  }
  return out;
}

std::string name_of(const std::string& label) {
  std::string name = label;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

class LibraryEqualsCheck : public testing::TestWithParam<Inputs> {};

TEST_P(LibraryEqualsCheck, EveryPairsDecisionRuleAndAuthority) { compare(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Captures, LibraryEqualsCheck, testing::ValuesIn(every_capture()),
                         [](const auto& info) { return name_of(info.param.label); });

// The comparison above is only worth its name if it reaches every kind of capture.
TEST(CApiEquivalence, EveryKindOfCaptureIsCompared) {
  size_t archives = 0, stored_probe = 0, dumps = 0;
  for (const auto& in : every_capture()) {
    if (!in.lspci_dump.empty()) ++dumps;
    else ++archives;
    if (in.sysroot.find("snapshot-probe") != std::string::npos) ++stored_probe;
  }
  EXPECT_GE(archives, 40u);
  EXPECT_GE(stored_probe, 2u);
  EXPECT_GE(dumps, 30u);
}

// Stored runtime answers are read by default, as the tool reads them, and only left unread when asked.
TEST(CApiEquivalence, StoredRuntimeAnswersAreReadAsTheToolReadsThem) {
  const std::string snapshot = data_path("machines/h200x2-firecracker-vm/live-2026-11-23/snapshot-probe.tar.gz");
  Inputs in;
  in.label = "snapshot-probe";
  in.sysroot = snapshot;
  Compared n = compare(in);
  EXPECT_GT(n.checked, 0u);
  Opened lib = open_library(in);
  ASSERT_EQ(lib.status, P2PAUDIT_OK) << lib.error;
  p2paudit_check_result r = P2PAUDIT_CHECK_INIT;
  char* raw = nullptr;
  ASSERT_EQ(p2paudit_check(lib.machine.get(), "gpu0", "gpu1", &r, &raw), P2PAUDIT_OK);
  CString details(raw);
  ToolRun check = tool(in, "check gpu0 gpu1");
  EXPECT_EQ(json::parse(raw)["runtime_probe"]["source"], "snapshot");
  EXPECT_EQ(check.output["runtime_probe"]["source"], "snapshot");
  EXPECT_EQ(decision_name(r.decision), check.output["decision"].get<std::string>());

  // ignore_stored_probe: the answers stay unread, as if the snapshot held none.
  p2paudit_options o = P2PAUDIT_OPTIONS_INIT;
  o.sysroot = snapshot.c_str();
  o.ignore_stored_probe = 1;
  p2paudit_machine* m = nullptr;
  ASSERT_EQ(p2paudit_open_with(&o, &m, nullptr), P2PAUDIT_OK);
  Machine without(m);
  raw = nullptr;
  ASSERT_EQ(p2paudit_check(m, "gpu0", "gpu1", &r, &raw), P2PAUDIT_OK);
  CString details_without(raw);
  EXPECT_EQ(json::parse(raw)["runtime_probe"]["source"], "none");
  // The old entry point is the new one with defaults: it reads the stored answers too.
  ASSERT_EQ(p2paudit_open(snapshot.c_str(), nullptr, &m, nullptr), P2PAUDIT_OK);
  Machine old(m);
  p2paudit_decision d = P2PAUDIT_DECISION_UNKNOWN;
  ASSERT_EQ(p2paudit_pair(m, "gpu0", "gpu1", nullptr, &d, nullptr), P2PAUDIT_OK);
  EXPECT_EQ(decision_name(d), check.output["decision"].get<std::string>());
}

TEST(CApiEquivalence, VendorFactsAreLaidOverAsTheToolLaysThem) {
  Inputs in;
  in.label = "h200x4 with vendor facts";
  in.sysroot = data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz");
  in.vendor_facts = data_path("machines/h200x4-firecracker-vm/vendor-facts.json");
  EXPECT_GT(compare(in).pairs, 0u);
  // The file is read: without it at least one pair's facts differ in the details.
  Inputs bare = in;
  bare.vendor_facts.clear();
  Opened with = open_library(in), without = open_library(bare);
  ASSERT_EQ(with.status, P2PAUDIT_OK);
  ASSERT_EQ(without.status, P2PAUDIT_OK);
  char *a = nullptr, *b = nullptr;
  p2paudit_check_result r = P2PAUDIT_CHECK_INIT;
  ASSERT_EQ(p2paudit_check(with.machine.get(), "gpu0", "gpu1", &r, &a), P2PAUDIT_OK);
  ASSERT_EQ(p2paudit_check(without.machine.get(), "gpu0", "gpu1", &r, &b), P2PAUDIT_OK);
  CString ca(a), cb(b);
  EXPECT_NE(json::parse(a)["facts"], json::parse(b)["facts"]);
  // A missing file is the tool's input error too.
  in.vendor_facts = data_path("machines/h200x4-firecracker-vm/no-such-facts.json");
  Opened missing = open_library(in);
  EXPECT_EQ(missing.status, P2PAUDIT_ERROR_INPUT);
  EXPECT_NE(missing.error.find("no-such-facts.json"), std::string::npos) << missing.error;
}

TEST(CApiEquivalence, KernelOverridesAndAssumptionsAsTheToolAppliesThem) {
  const std::string oracle = data_path("kernel-oracle");
  std::vector<Inputs> cases;
  for (const char* release : {"4.19", "5.10", "6.8"}) {
    Inputs in;
    in.label = std::string("--kernel ") + release;
    in.sysroot = oracle + "/h-e8-pxb-epyc/sysroot.tar.gz";
    in.kernel = release;
    cases.push_back(in);
  }
  // The host bridges of a capture, as VVVV:DDDD, read through the library (class 06 00).
  auto host_bridges = [](const std::string& sysroot) {
    std::vector<std::string> ids;
    p2paudit_machine* m = nullptr;
    EXPECT_EQ(p2paudit_open(sysroot.c_str(), nullptr, &m, nullptr), P2PAUDIT_OK);
    Machine owned(m);
    for (size_t i = 0; i < p2paudit_device_count(m); ++i) {
      p2paudit_device d;
      EXPECT_EQ(p2paudit_device_at(m, i, &d), P2PAUDIT_OK);
      char id[16];
      snprintf(id, sizeof id, "%04x:%04x", d.vendor_id, d.device_id);
      if ((d.class_code >> 8) == 0x0600) ids.push_back(id);
    }
    return ids;
  };
  const std::string intel = oracle + "/h-a-two-rootports-intel/sysroot.tar.gz";
  const auto bridges = host_bridges(intel);
  ASSERT_FALSE(bridges.empty());
  {
    Inputs in;
    in.label = "--assume-whitelisted";
    in.sysroot = intel;
    in.assume_whitelisted = {bridges.front(), bridges.front() + ":same-host-bridge"};
    cases.push_back(in);
  }
  {
    Inputs in;
    in.label = "--assume-acs-off all";
    in.sysroot = oracle + "/h-d1-rp-acs-rr-cr-mf-switch/sysroot.tar.gz";
    in.assume_acs_off = {"all"};
    cases.push_back(in);
  }
  {
    // A kernel whitelist file of the capture's own host bridge (kernel-verdicts.md's schema).
    const std::string file = testing::TempDir() + "/capi-equivalence-kernel-rules.yaml";
    FILE* f = fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fprintf(f, "schema: 1\nentries:\n  - {vendor: \"%s\", device: \"%s\", same_host_bridge: false, comment: \"test\"}\n",
            bridges.front().substr(0, 4).c_str(), bridges.front().substr(5, 4).c_str());
    fclose(f);
    Inputs in;
    in.label = "--kernel-rules";
    in.sysroot = intel;
    in.kernel_rules = {file};
    cases.push_back(in);
  }
  {
    Inputs in;
    in.label = "site rules";
    in.sysroot = data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz");
    in.policy_rules = {data_path("policy/site-deny-first.yaml"), data_path("policy/advisory.yaml")};
    cases.push_back(in);
  }
  {
    Inputs in;
    in.label = "--no-default-rules";
    in.sysroot = data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz");
    in.policy_rules = {data_path("policy/kernel-only.yaml")};
    in.no_default_rules = true;
    cases.push_back(in);
  }
  {
    Inputs in;
    in.label = "a dump with its CPU and IOMMU stated";
    in.lspci_dump = data_path("lspci-dumps/tree-asus-p6t6");
    in.dump_cpu = "GenuineIntel:6:26";
    in.dump_iommu = "passthrough";
    in.kernel = "6.8";
    cases.push_back(in);
  }
  for (const auto& in : cases) {
    SCOPED_TRACE(in.label);
    EXPECT_GT(compare(in).pairs, 0u) << in.label;
  }
  // The override is applied, not only accepted: the library's kernel release is the one given.
  Opened lib = open_library(cases[0]);
  ASSERT_EQ(lib.status, P2PAUDIT_OK) << lib.error;
  EXPECT_EQ(std::string(p2paudit_kernel_release(lib.machine.get())).rfind("4.19", 0), 0u)
      << p2paudit_kernel_release(lib.machine.get());
}

// The runtimes are asked only when probe_runtimes says so, and then answer as they answer the tool
// (fake NVML and CUDA libraries, as tests/probe_policy_test.cpp gives them to the tool).
TEST(CApiEquivalence, RuntimesAreAskedOnlyWhenAskedAndThenAsTheToolAsksThem) {
  const std::string sysroot = data_path("machines/h200x2-firecracker-vm/sysroot.tar.gz");
  const std::map<std::string, std::string> env = {
      {"P2PAUDIT_PROBE_ALLOW_SYSROOT", "1"}, {"FAKE_NVIDIA_SCENARIO", "ok"},
      {"FAKE_NVIDIA_BDFS", "0000:00:06.0,0000:00:07.0"}, {"P2PAUDIT_NVML_LIBRARY", FAKE_NVML_LIBRARY},
      {"P2PAUDIT_CUDA_LIBRARY", FAKE_CUDA_LIBRARY}, {"P2PAUDIT_HIP_LIBRARY", "/nonexistent"}};
  std::string prefix = "env";
  for (const auto& [k, v] : env) {
    setenv(k.c_str(), v.c_str(), 1);
    prefix += " " + k + "=" + shell_quote(v);
  }
  auto open_asking = [&](int probe_runtimes) {
    p2paudit_options o = P2PAUDIT_OPTIONS_INIT;
    o.sysroot = sysroot.c_str();
    o.probe_runtimes = probe_runtimes;
    p2paudit_machine* m = nullptr;
    EXPECT_EQ(p2paudit_open_with(&o, &m, nullptr), P2PAUDIT_OK);
    return Machine(m);
  };
  auto lib_check = [](p2paudit_machine* m) {
    char* raw = nullptr;
    p2paudit_check_result r = P2PAUDIT_CHECK_INIT;
    EXPECT_EQ(p2paudit_check(m, "gpu0", "gpu1", &r, &raw), P2PAUDIT_OK);
    CString owned(raw);
    return raw ? json::parse(raw) : json();
  };
  auto tool_check = [&](const std::string& extra) {
    auto r = p2paudit::test::run_command(prefix + " " + p2paudit::test::tool_file() + " --sysroot " +
                                         shell_quote(sysroot) + " check gpu0 gpu1" + extra + " --format json 2>/dev/null");
    return r.output.empty() ? json() : json::parse(r.output);
  };
  Machine unasked = open_asking(0), asked = open_asking(1);
  for (const auto& [k, v] : env) unsetenv(k.c_str());
  ASSERT_TRUE(unasked && asked);
  json lib_unasked = lib_check(unasked.get()), lib_asked = lib_check(asked.get());
  json cli_unasked = tool_check(" --no-probe"), cli_asked = tool_check("");
  EXPECT_EQ(lib_unasked["runtime_probe"]["source"], "none");
  EXPECT_EQ(lib_asked["runtime_probe"]["source"], "live");
  for (const char* key : {"decision", "rule", "authority", "answer", "runtime_probe"}) {
    EXPECT_EQ(lib_unasked[key], cli_unasked[key]) << key;
    EXPECT_EQ(lib_asked[key], cli_asked[key]) << key;
  }
  // The runtimes' answer matters here, or the comparison would prove nothing.
  EXPECT_NE(lib_asked["facts"], lib_unasked["facts"]);
}

TEST(CApiEquivalence, OptionsAreVersionedBySize) {
  const std::string sysroot = data_path("machines/h200x4-firecracker-vm/sysroot.tar.gz");
  p2paudit_machine* m = nullptr;
  char* error = nullptr;
  // NULL options: this machine, "/" (its answer is not compared; it only must not be refused as an argument).
  EXPECT_NE(p2paudit_open_with(nullptr, nullptr, nullptr), P2PAUDIT_OK);  // machine pointer NULL

  p2paudit_options o = P2PAUDIT_OPTIONS_INIT;
  o.sysroot = sysroot.c_str();
  o.struct_size = sizeof(size_t);  // smaller than the first version
  EXPECT_EQ(p2paudit_open_with(&o, &m, &error), P2PAUDIT_ERROR_ARGUMENT);
  CString e1(error);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("struct_size"), std::string::npos) << error;
  EXPECT_EQ(m, nullptr);

  // A later caller's larger struct: zeros past the known fields are fine, anything else is not.
  struct Later {
    p2paudit_options o;
    int new_field;
  } later{};
  later.o = o;
  later.o.struct_size = sizeof later;
  ASSERT_EQ(p2paudit_open_with(&later.o, &m, nullptr), P2PAUDIT_OK);
  Machine ok(m);
  later.new_field = 1;
  m = nullptr;
  EXPECT_EQ(p2paudit_open_with(&later.o, &m, nullptr), P2PAUDIT_ERROR_ARGUMENT);
  EXPECT_EQ(m, nullptr);

  // A dump's options without a dump, and two inputs at once, are argument errors, as the tool's usage errors.
  o = P2PAUDIT_OPTIONS_INIT;
  o.sysroot = sysroot.c_str();
  o.dump_iommu = "off";
  error = nullptr;
  EXPECT_EQ(p2paudit_open_with(&o, &m, &error), P2PAUDIT_ERROR_ARGUMENT);
  CString e2(error);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("lspci_dump"), std::string::npos) << error;

  // A result struct too small for the first version is refused and left alone past its size.
  p2paudit_check_result r = P2PAUDIT_CHECK_INIT;
  r.struct_size = 1;
  r.decision = P2PAUDIT_DECISION_DENY;
  EXPECT_EQ(p2paudit_check(ok.get(), "gpu0", "gpu1", &r, nullptr), P2PAUDIT_ERROR_ARGUMENT);
  EXPECT_EQ(r.decision, P2PAUDIT_DECISION_DENY);
  EXPECT_EQ(p2paudit_check(ok.get(), "gpu0", "gpu1", nullptr, nullptr), P2PAUDIT_ERROR_ARGUMENT);
}

}  // namespace
