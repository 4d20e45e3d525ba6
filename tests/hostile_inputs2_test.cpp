// SPDX-License-Identifier: GPL-2.0-or-later
// Issue 18, second hostile-input pass, part B: runtime answers bind to the devices they name, and
// every JSON reader refuses duplicate keys in linear time (docs/security.md).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "p2paudit/errors.h"
#include "p2paudit/fleet/aggregate.h"
#include "p2paudit/json_input.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/probe/runtime_facts.h"
#include "p2paudit/snapshot.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "sysroot_builder.h"
#include "test_support.h"

namespace p2paudit {
namespace {

using json = nlohmann::json;
using test::ConfigBytes;
using test::SysrootDir;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---------------------------------------------------------------------------------------------
// Duplicate keys: one reader, every document.
// ---------------------------------------------------------------------------------------------

TEST(DuplicateJsonKeys, StoredProbeDocumentIsRefused) {
  std::string doc = R"({"schema_version": 1, "runtimes": [{"runtime": "nvml", "devices": [],
                        "pairs": [], "status": "ok", "status": "absent"}]})";
  std::string e = error_of([&] { probe::parse_probe_document(doc, "snap: p2paudit-probe.json"); });
  EXPECT_EQ(e, "snap: p2paudit-probe.json: runtimes[0]: duplicate key \"status\" in one object: which one is meant?");
  // At the top level too, and a key may repeat in different objects.
  EXPECT_TRUE(contains(error_of([] { probe::parse_probe_document(R"({"runtimes": [], "runtimes": []})", "p.json"); }),
                       "p.json: the document: duplicate key \"runtimes\""));
  EXPECT_NO_THROW(probe::parse_probe_document(R"({"a": {"k": 1}, "b": {"k": 1}, "c": [{"k": 1}, {"k": 2}]})", "p.json"));
}

TEST(DuplicateJsonKeys, FleetReportIsRefused) {
  std::string e = error_of([] {
    fleet::parse_fleet_json(R"({"schema_version": 1, "kind": "p2paudit-report", "machines": 1, "machines": 2})", "r.json");
  });
  EXPECT_EQ(e, "r.json: the document: duplicate key \"machines\" in one object: which one is meant?");
  e = error_of([] { fleet::parse_fleet_json(R"({"decisions": {"nvlink": {"peer": 1, "deny": 0, "peer": 9}}})", "r.json"); });
  EXPECT_TRUE(contains(e, "r.json: decisions.nvlink: duplicate key \"peer\"")) << e;
  e = error_of([] { fleet::parse_fleet_json(R"({"skipped": [{}, {"input": [{"a": 1, "a": 2}]}]})", "r.json"); });
  EXPECT_TRUE(contains(e, "r.json: skipped[1].input[0]: duplicate key \"a\"")) << e;
}

TEST(DuplicateJsonKeys, VendorFactsNameThePlace) {
  std::string e = error_of([] {
    policy::VendorFactsDocument::parse(R"({"schema_version": 1, "all": {"vendor.nvlink": true, "vendor.nvlink": false}})",
                                       "vf.json");
  });
  EXPECT_EQ(e, "vf.json: all: duplicate key \"vendor.nvlink\" in one object: which one is meant?");
}

TEST(DuplicateJsonKeys, KeysFromInputAreEscaped) {
  std::string e = error_of([] { parse_input_json("{\"\\u001b[2J\": 1, \"\\u001b[2J\": 2}", "x.json"); });
  EXPECT_FALSE(contains(e, "\x1b")) << e;
  EXPECT_TRUE(contains(e, "duplicate key")) << e;
}

TEST(JsonInput, BoundsAndErrorsStay) {
  EXPECT_EQ(error_of([] { parse_input_json(std::string(20, '[') + std::string(20, ']'), "d.json", {16, 100}); }),
            "d.json: nested deeper than 16 levels");
  EXPECT_EQ(error_of([] { parse_input_json("[1, 2, 3, 4]", "v.json", {16, 3}); }), "v.json: more than 3 values");
  EXPECT_TRUE(contains(error_of([] { parse_input_json("{\"a\": 1,", "s.json"); }), "s.json: byte ")) ;
  EXPECT_TRUE(contains(error_of([] { parse_input_json("[1e999]", "n.json"); }), "n.json: not JSON this reader takes"));
  // What is read is what nlohmann's own parser builds.
  std::string text = R"({"a": [1, -2, 3.5, "x", null, true, {"b": {}}, []], "c": {"d": [[]]}, "e": 18446744073709551615})";
  EXPECT_EQ(parse_input_json(text, "ok.json"), json::parse(text));
}

// The callback parser rescanned every parent object at each object's end: 400k empty objects took
// 90 s. 300k objects read linearly take well under a second; the bound is generous.
TEST(JsonInput, ManyObjectsReadInLinearTime) {
  std::string text = "[";
  for (int i = 0; i < 300000; ++i) text += i ? ",{}" : "{}";
  text += "]";
  auto start = std::chrono::steady_clock::now();
  json fleet = fleet::parse_fleet_json(text, "many.json");
  json probe = probe::parse_probe_document(text, "many.json");
  // Under one long key: the key is not copied per value (a place is built only for a message).
  std::string under_key = "{\"" + std::string(1 << 20, 'k') + "\": " + text + ", \"x\": 1, \"x\": 2}";
  std::string e = error_of([&] { parse_input_json(under_key, "key.json"); });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(fleet.size(), 300000u);
  EXPECT_EQ(probe.size(), 300000u);
  EXPECT_EQ(e, "key.json: the document: duplicate key \"x\" in one object: which one is meant?");
  EXPECT_LT(seconds, 5.0);
}

// ---------------------------------------------------------------------------------------------
// Runtime answers bind to the tree's functions.
// ---------------------------------------------------------------------------------------------

// An Intel client host (8086:4c43, not whitelisted): two Samsung NVMe drives at 01:00.0 and
// 02:00.0 on two Root Ports, and an NVIDIA H100 (10de:2330) at 03:00.0 and 04:00.0: the kernel
// refuses every pair (a host bridge not in its whitelist).
void build_machine(SysrootDir& s) {
  s.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n");
  s.function("pci0000:00/0000:00:00.0", ConfigBytes(0x8086, 0x4c43, 0x060000, 0).bytes(256));
  for (int port = 1; port <= 4; ++port) {
    std::string rp = fmt::format("pci0000:00/0000:00:0{}.0", port);
    s.function(rp, ConfigBytes(0x8086, 0x4c01, 0x060400, 4, true).buses(0, uint8_t(port), uint8_t(port)).acs(0x001d).bytes());
    bool nvme = port <= 2;
    s.function(fmt::format("{}/0000:0{}:00.0", rp, port),
               ConfigBytes(nvme ? 0x144d : 0x10de, nvme ? 0xa808 : 0x2330, nvme ? 0x010802 : 0x030200, 0).bytes());
  }
}

// A probe document as `snapshot --probe` stores it: NVML devices at `bdfs` with NVLink and peer
// read/write "ok" between them.
std::string nvml_document(const std::vector<std::string>& bdfs, const std::string& pci_device_id = "233010de") {
  json devices = json::array(), pairs = json::array();
  for (size_t i = 0; i < bdfs.size(); ++i) {
    devices.push_back({{"index", i}, {"bdf", bdfs[i]}, {"name", "NVIDIA H100"}, {"pci_device_id", pci_device_id}});
    for (size_t k = 0; k < bdfs.size(); ++k)
      if (k != i) pairs.push_back({{"provider", i}, {"client", k}, {"answers", {{"read", "ok"}, {"write", "ok"}, {"nvlink", "ok"}}}});
  }
  json doc = {{"schema_version", 1},
              {"source", "/"},
              {"timeout_seconds", 20},
              {"runtimes", json::array({{{"runtime", "nvml"}, {"status", "ok"}, {"library", "libnvidia-ml.so.1"},
                                         {"driver_version", "550.54.15"}, {"devices", devices}, {"pairs", pairs}}})}};
  return doc.dump(1);
}

// A site rule that trusts vendor.nvlink alone (no vendor condition), as a site may write one.
std::string site_rules(SysrootDir& s) {
  s.write("site.yaml",
          "version: 1\nrules:\n"
          "- id: site-nvlink\n  when:\n    vendor.nvlink: true\n  action: peer\n  reason: an NVLink\n"
          "- id: site-peer\n  when:\n    vendor.peer_supported: true\n  action: peer\n  reason: the runtime says yes\n"
          "- id: site-deny\n  when: always\n  action: deny\n  reason: otherwise no\n");
  return (s.dir() / "site.yaml").string();
}

std::string decision(const std::string& args) {
  auto r = test::run_command("timeout 60 " + test::tool_file() + " " + args + " 2>&1");
  auto at = r.output.find('{');
  if (at == std::string::npos) return "no JSON: " + r.output;
  json j = json::parse(r.output.substr(at), nullptr, false);
  if (j.is_discarded() || !j.contains("decision") || !j["decision"].is_string()) return "unexpected: " + r.output;
  return j["decision"].get<std::string>();
}

TEST(RuntimeAnswersBind, StoredProbeOnNvmeDrivesDoesNotMakePeer) {
  SysrootDir s;
  build_machine(s);
  std::string rules = site_rules(s);
  s.write(kProbeResultsPath, nvml_document({"0000:01:00.0", "0000:02:00.0"}));
  auto check = [&](const std::string& a, const std::string& b) {
    return decision("--sysroot " + test::shell_quote(s.str()) + " --format json check " + a + " " + b +
                    " --no-default-rules --rules " + test::shell_quote(rules));
  };
  EXPECT_EQ(check("01:00.0", "02:00.0"), "deny");
  // The same answers on the GPUs they describe still count.
  s.write(kProbeResultsPath, nvml_document({"0000:03:00.0", "0000:04:00.0"}));
  EXPECT_EQ(check("03:00.0", "04:00.0"), "peer");
  // An H100's IDs recorded for an A100's place: not this device.
  s.write(kProbeResultsPath, nvml_document({"0000:03:00.0", "0000:04:00.0"}, "20b010de"));
  EXPECT_EQ(check("03:00.0", "04:00.0"), "deny");
}

TEST(RuntimeAnswersBind, MismatchesAreFindings) {
  SysrootDir s;
  build_machine(s);
  Topology topo = read_topology(Sysroot::open(s.str()));
  auto facts = probe::runtime_facts(json::parse(nvml_document({"0000:01:00.0", "0000:03:00.0", "0000:09:00.0"})),
                                    "snap: p2paudit-probe.json", &topo);
  ASSERT_EQ(facts.findings.size(), 2u);
  EXPECT_EQ(facts.unbound, 2u);
  EXPECT_TRUE(contains(facts.findings[0].message, "runtimes[0].devices[0] (nvml \"NVIDIA H100\" at 0000:01:00.0)"))
      << facts.findings[0].message;
  EXPECT_TRUE(contains(facts.findings[0].message, "144d:a808 (nvme)")) << facts.findings[0].message;
  EXPECT_TRUE(contains(facts.findings[1].message, "no PCI function there")) << facts.findings[1].message;
  EXPECT_EQ(facts.findings[0].path, "snap: p2paudit-probe.json");
  EXPECT_TRUE(facts.facts.pairs.empty()) << "every pair had a device that is not the runtime's";
  // HIP's answers are AMD's: an NVIDIA GPU at the address is not the device HIP asked.
  json hip = json::parse(nvml_document({"0000:03:00.0", "0000:04:00.0"}));
  hip["runtimes"][0]["runtime"] = "hip";
  hip["runtimes"][0]["pairs"][0]["answers"] = {{"can_access_peer", "ok"}};
  EXPECT_EQ(probe::runtime_facts(hip, "h.json", &topo).unbound, 2u);
}

TEST(RuntimeAnswersBind, VendorFactsFileIsBound) {
  SysrootDir s;
  build_machine(s);
  std::string rules = site_rules(s);
  json file = {{"schema_version", 1},
               {"pairs", json::array({{{"provider", "0000:01:00.0"}, {"client", "0000:02:00.0"}, {"symmetric", true},
                                       {"facts", {{"vendor.nvlink", true}}}},
                                      {{"provider", "0000:03:00.0"}, {"client", "0000:0a:00.0"},
                                       {"facts", {{"vendor.peer_supported", true}}}}})}};
  s.write("vf.json", file.dump());
  std::string vf = (s.dir() / "vf.json").string();
  auto r = test::run_command("timeout 60 " + test::tool_file() + " --sysroot " + test::shell_quote(s.str()) +
                             " check 01:00.0 02:00.0 --no-default-rules --rules " + test::shell_quote(rules) +
                             " --vendor-facts " + test::shell_quote(vf) + " 2>&1");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "vendor.nvlink is a fact of two NVIDIA GPUs")) << r.output;
  EXPECT_TRUE(contains(r.output, "0000:0a:00.0 is no PCI function in this machine")) << r.output;

  // In the reader itself: "all" may not carry a pair's fabric, and xgmi is AMD's.
  Topology topo = read_topology(Sysroot::open(s.str()));
  auto doc = policy::VendorFactsDocument::parse(
      R"({"schema_version": 1, "all": {"vendor.nvlink": true, "vendor.copy_gbps": 3},
          "devices": [{"bdf": "0000:0b:00.0", "facts": {"memory_size": 1024}}],
          "pairs": [{"provider": "0000:03:00.0", "client": "0000:04:00.0", "facts": {"vendor.nvlink": true, "vendor.xgmi": true}}]})",
      "vf.json");
  auto findings = doc.bind(topo, "vf.json");
  EXPECT_EQ(findings.size(), 3u);
  EXPECT_FALSE(doc.all.known("vendor.nvlink"));
  EXPECT_TRUE(doc.all.known("vendor.copy_gbps"));
  EXPECT_TRUE(doc.devices.empty());
  policy::FactSet facts;
  doc.apply_pair(*Bdf::parse("0000:03:00.0"), *Bdf::parse("0000:04:00.0"), facts);
  EXPECT_TRUE(facts.known("vendor.nvlink")) << "two NVIDIA GPUs keep their NVLink";
  EXPECT_FALSE(facts.known("vendor.xgmi")) << "XGMI joins AMD GPUs only";
}

}  // namespace
}  // namespace p2paudit
