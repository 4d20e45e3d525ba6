// SPDX-License-Identifier: GPL-2.0-or-later
// The policy rule language: the fact catalogue, condition semantics (Kleene logic included),
// evaluation order and overrides, templates, and lint positions for every kind of mistake.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <set>
#include <nlohmann/json.hpp>

#include "p2paudit/policy/evaluate.h"
#include "p2paudit/policy/facts.h"
#include "p2paudit/policy/rule_analysis.h"
#include "p2paudit/policy/rules.h"
#include "test_support.h"

namespace p2paudit::policy {
namespace {

using json = nlohmann::json;

// ---- helpers ----

RuleFile parse(const std::string& text) { return parse_rule_file(text, "t.yaml"); }

// The diagnostics of a file that must not load, as "t.yaml:L:C: message" lines.
std::vector<std::string> lint_errors(const std::string& text) {
  try {
    parse(text);
  } catch (const RuleFileError& e) {
    std::vector<std::string> out;
    for (const auto& d : e.diagnostics()) out.push_back(d.str());
    return out;
  }
  ADD_FAILURE() << "loaded without errors:\n" << text;
  return {};
}

std::string only_error(const std::string& text) {
  auto errors = lint_errors(text);
  EXPECT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
  return errors.empty() ? "" : errors.front();
}

// A one-rule file whose `when` is `condition` (a YAML flow mapping or `always`), so that the
// condition starts at line 3, column 9.
std::string rule_with(const std::string& condition) {
  return "version: 1\nrules:\n- when: " + condition + "\n  id: r\n  action: peer\n  reason: x\n";
}

Tri eval(const std::string& condition, const FactSet& facts) {
  return parse(rule_with(condition)).rules.at(0).when.evaluate(facts);
}

FactSet gpu_pair() {
  FactSet f;
  f.set("kernel.allowed", false);
  f.set("kernel.map_type", std::string("NOT_SUPPORTED"));
  f.set("kernel.distance", std::int64_t{1024});
  f.set("kernel.host_bridge", std::string("8086:4c43"));
  f.set("kernel.acs_redirect_devices", std::vector<std::string>{"0000:00:01.0", "0000:00:1c.0"});
  f.set("path.relation", std::string("different_host_bridges"));
  f.set("path.narrowest_link_speed_gts", 16.0);
  f.set("provider.bdf", std::string("0000:01:00.0"));
  f.set("provider.largest_bar", std::int64_t{256} << 20);
  f.set("provider.driver", std::string("nvidia"));
  f.set("runtime.compute_runtime_version", std::string("25.48.36300.8"));
  return f;
}

constexpr Tri T = Tri::kTrue, F = Tri::kFalse, U = Tri::kUnknown;

// ---- the catalogue ----

TEST(FactCatalog, EveryFactIsNamedTypedAndDescribed) {
  std::set<std::string> names;
  std::regex dotted("[a-z0-9_]+(\\.[a-z0-9_]+)+");
  for (const auto& f : fact_catalog()) {
    EXPECT_TRUE(names.insert(f.name).second) << "duplicate " << f.name;
    EXPECT_TRUE(std::regex_match(f.name, dotted)) << f.name;
    EXPECT_FALSE(f.description.empty()) << f.name;
    EXPECT_EQ(f.description.find('\n'), std::string::npos) << f.name;
    EXPECT_EQ(f.type == FactType::kEnum, !f.allowed.empty()) << f.name;
    EXPECT_EQ(find_fact(f.name), &f);
  }
  for (const char* seed : {"kernel.map_type", "kernel.acs_redirect_devices", "path.relation", "iommu.mode", "platform.amd_zen",
                           "provider.largest_bar", "client.rebar_max", "vendor.authority", "runtime.compute_runtime_version"})
    EXPECT_TRUE(names.contains(seed)) << seed;
  EXPECT_EQ(find_fact("kernel.nonexistent"), nullptr);
}

TEST(FactCatalog, RenderingsListEveryFact) {
  std::string markdown = fact_catalog_markdown();
  json j = fact_catalog_json();
  ASSERT_EQ(j["facts"].size(), fact_catalog().size());
  for (size_t i = 0; i < fact_catalog().size(); ++i) {
    const auto& f = fact_catalog()[i];
    EXPECT_NE(markdown.find("| `" + f.name + "` |"), std::string::npos) << f.name;
    EXPECT_EQ(j["facts"][i]["name"], f.name);
    EXPECT_EQ(j["facts"][i]["type"], to_string(f.type));
  }
  EXPECT_EQ(j["facts"][0]["name"], "kernel.map_type");
  EXPECT_EQ(j["facts"][0]["values"], json({"BUS_ADDR", "THRU_HOST_BRIDGE", "NOT_SUPPORTED", "UNKNOWN"}));
}

TEST(FactCatalog, DocsListTheCurrentCatalogue) {
  std::ifstream in(std::string(P2PAUDIT_SOURCE_RULES_DIR) + "/../docs/policy-rules.md");
  std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(docs.empty());
  EXPECT_NE(docs.find("<!-- BEGIN FACT CATALOGUE -->\n" + fact_catalog_markdown() + "<!-- END FACT CATALOGUE -->"), std::string::npos)
      << "regenerate the section with `p2paudit rules facts --markdown`";
}

TEST(FactCatalog, ClosestNameCatchesTyposOnly) {
  EXPECT_EQ(closest_fact_name("kernel.alowed"), "kernel.allowed");
  EXPECT_EQ(closest_fact_name("provider.larget_bar"), "provider.largest_bar");
  EXPECT_EQ(closest_fact_name("completely.different"), "");
}

// ---- FactSet ----

TEST(FactSet, ChecksNamesAndTypes) {
  FactSet f;
  EXPECT_THROW(f.set("kernel.alowed", true), std::invalid_argument);
  EXPECT_THROW(f.set("kernel.allowed", std::string("true")), std::invalid_argument);
  EXPECT_THROW(f.set("iommu.mode", std::string("strict")), std::invalid_argument);
  EXPECT_THROW(f.set("provider.largest_bar", 1.5), std::invalid_argument);
  f.set("path.narrowest_link_speed_gts", std::int64_t{8});  // an integer is a number
  ASSERT_TRUE(f.known("path.narrowest_link_speed_gts"));
  EXPECT_EQ(std::get<double>(*f.get("path.narrowest_link_speed_gts")), 8.0);
  f.set("kernel.allowed", true);
  f.set_unknown("kernel.allowed");
  EXPECT_FALSE(f.known("kernel.allowed"));
  EXPECT_FALSE(f.known("kernel.distance"));
}

TEST(FactSet, JsonRoundTripAndErrors) {
  FactSet f = gpu_pair();
  f.set_unknown("iommu.mode");
  json j = f.to_json();
  EXPECT_TRUE(j["iommu.mode"].is_null());
  FactSet back = FactSet::from_json(j, "facts.json");
  EXPECT_EQ(back.to_json(), j);
  EXPECT_EQ(std::get<std::int64_t>(*back.get("kernel.distance")), 1024);

  try {
    FactSet::from_json(json{{"kernel.allowed", "no"}}, "facts.json");
    FAIL() << "a string for a bool fact was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "facts.json: kernel.allowed is a bool (true/false) fact, got a string");
  }
  EXPECT_THROW(FactSet::from_json(json{{"kernel.alowed", true}}, "facts.json"), InputError);
  EXPECT_THROW(FactSet::from_json(json::array(), "facts.json"), InputError);
}

TEST(FactValues, Rendering) {
  EXPECT_EQ(render_fact_value(true), "true");
  EXPECT_EQ(render_fact_value(false), "false");
  EXPECT_EQ(render_fact_value(std::int64_t{-1}), "-1");
  EXPECT_EQ(render_fact_value(2.5), "2.5");
  EXPECT_EQ(render_fact_value(16.0), "16");
  EXPECT_EQ(render_fact_value(std::vector<std::string>{"a", "b"}), "a, b");
  EXPECT_EQ(render_fact_value(std::vector<std::string>{}), "none");
  EXPECT_EQ(render_size(256ll << 20), "256 MiB");
  EXPECT_EQ(render_size(32ll << 30), "32 GiB");
  EXPECT_EQ(render_size(1536), "1.5 KiB");
  EXPECT_EQ(render_size(17), "17 bytes");
}

// ---- condition semantics ----

TEST(Condition, EqualityOnEveryType) {
  FactSet f = gpu_pair();
  EXPECT_EQ(eval("{kernel.allowed: false}", f), T);
  EXPECT_EQ(eval("{kernel.allowed: true}", f), F);
  EXPECT_EQ(eval("{kernel.distance: 1024}", f), T);
  EXPECT_EQ(eval("{kernel.distance: 0x400}", f), T);
  EXPECT_EQ(eval("{path.narrowest_link_speed_gts: 16}", f), T);
  EXPECT_EQ(eval("{kernel.host_bridge: '8086:4c43'}", f), T);
  EXPECT_EQ(eval("{kernel.map_type: NOT_SUPPORTED}", f), T);
  EXPECT_EQ(eval("{kernel.map_type: {eq: BUS_ADDR}}", f), F);
  EXPECT_EQ(eval("{kernel.map_type: {ne: BUS_ADDR}}", f), T);
  EXPECT_EQ(eval("{kernel.acs_redirect_devices: ['0000:00:01.0', '0000:00:1c.0']}", f), T);
  EXPECT_EQ(eval("{kernel.acs_redirect_devices: ['0000:00:01.0']}", f), F);
}

TEST(Condition, SetsRangesRegexContains) {
  FactSet f = gpu_pair();
  EXPECT_EQ(eval("{path.relation: {in: [same_host_bridge, different_host_bridges]}}", f), T);
  EXPECT_EQ(eval("{path.relation: {not_in: [same_host_bridge, different_host_bridges]}}", f), F);
  EXPECT_EQ(eval("{kernel.distance: {lt: 1024}}", f), F);
  EXPECT_EQ(eval("{kernel.distance: {le: 1024}}", f), T);
  EXPECT_EQ(eval("{kernel.distance: {gt: 1023}}", f), T);
  EXPECT_EQ(eval("{kernel.distance: {ge: 1025}}", f), F);
  EXPECT_EQ(eval("{kernel.distance: {ge: 1000, lt: 2000}}", f), T);  // a range: both must hold
  EXPECT_EQ(eval("{kernel.distance: {ge: 1000, lt: 1024}}", f), F);
  EXPECT_EQ(eval("{provider.largest_bar: {lt: 1GiB}}", f), T);
  EXPECT_EQ(eval("{provider.largest_bar: {eq: 256MiB}}", f), T);
  EXPECT_EQ(eval("{path.narrowest_link_speed_gts: {lt: 16.5}}", f), T);
  EXPECT_EQ(eval("{path.narrowest_link_speed_gts: {ge: 32}}", f), F);
  EXPECT_EQ(eval("{runtime.compute_runtime_version: {regex: '^25\\.'}}", f), T);
  EXPECT_EQ(eval("{runtime.compute_runtime_version: {regex: '36300'}}", f), T);  // search, not full match
  EXPECT_EQ(eval("{runtime.compute_runtime_version: {regex: '^26\\.'}}", f), F);
  EXPECT_EQ(eval("{kernel.host_bridge: {contains: '8086:'}}", f), T);
  EXPECT_EQ(eval("{kernel.acs_redirect_devices: {contains: '0000:00:1c.0'}}", f), T);
  EXPECT_EQ(eval("{kernel.acs_redirect_devices: {contains: '0000:00:1c'}}", f), F);  // elements, not substrings
}

// FactRegexTraits answers two questions of the bracket matcher itself where it can: its answers must
// be std::regex_traits<char>'s for every character, and its patterns match as std::regex's do.
TEST(Condition, FactRegexTraitsAnswerAsTheStandardTraits) {
  FactRegexTraits fast;
  std::regex_traits<char> standard;
  const std::string_view classes[] = {"", "d", "w", "alpha", "upper", "space"};
  for (int i = 0; i < 256; ++i) {
    char c = static_cast<char>(i);
    EXPECT_EQ(fast.transform_primary(&c, &c + 1), standard.transform_primary(&c, &c + 1)) << i;
    for (std::string_view name : classes) {
      auto mask = standard.lookup_classname(name.begin(), name.end());
      EXPECT_EQ(fast.isctype(c, mask), standard.isctype(c, mask)) << i << " " << name;
    }
  }
  const char* patterns[] = {"^[0-6]\\.", "[^a-c]x", "[[:digit:]]+", "[[=a=]]", "[[.-.]a]", "[[.hyphen.]a]", "\\w+[\\d_]", "[A-Z][^[:space:]]"};
  const char* subjects[] = {"5.1", "dx", "ax", "A", "-", "a_", "ab1", "Zq", "Z ", "", "7.0"};
  auto search = [](const char* subject, const char* pattern, auto regex_of) -> std::string {
    try {
      return std::regex_search(subject, regex_of(pattern)) ? "match" : "no match";
    } catch (const std::regex_error& e) {
      return e.what();
    }
  };
  for (const char* pattern : patterns)
    for (const char* subject : subjects)
      EXPECT_EQ(search(subject, pattern, [](const char* p) { return FactRegex(p); }),
                search(subject, pattern, [](const char* p) { return std::regex(p); }))
          << pattern << " " << subject;
}

TEST(Condition, SeveralKeysMeanAll) {
  FactSet f = gpu_pair();
  EXPECT_EQ(eval("{kernel.allowed: false, provider.driver: nvidia}", f), T);
  EXPECT_EQ(eval("{kernel.allowed: false, provider.driver: amdgpu}", f), F);
}

TEST(Condition, KleeneLogicOverUnknownFacts) {
  FactSet f = gpu_pair();  // iommu.mode and platform.vm_guest are unknown
  EXPECT_EQ(eval("{iommu.mode: translated}", f), U);
  EXPECT_EQ(eval("{iommu.mode: {ne: translated}}", f), U);
  EXPECT_EQ(eval("{iommu.mode: {not_in: [off]}}", f), U);
  EXPECT_EQ(eval("{not: {iommu.mode: translated}}", f), U);
  EXPECT_EQ(eval("{all: [{iommu.mode: off}, {kernel.allowed: true}]}", f), F);   // false wins
  EXPECT_EQ(eval("{all: [{iommu.mode: off}, {kernel.allowed: false}]}", f), U);
  EXPECT_EQ(eval("{any: [{iommu.mode: off}, {kernel.allowed: false}]}", f), T);  // true wins
  EXPECT_EQ(eval("{any: [{iommu.mode: off}, {kernel.allowed: true}]}", f), U);
  EXPECT_EQ(eval("{not: {any: [{iommu.mode: off}, {kernel.allowed: true}]}}", f), U);
  EXPECT_EQ(eval("{not: {kernel.allowed: True}}", f), T);
  EXPECT_EQ(eval("always", f), T);
}

TEST(Condition, OnlyUnknownTrueMatchesAnUnknownFact) {
  FactSet f = gpu_pair();
  EXPECT_EQ(eval("{iommu.mode: {unknown: true}}", f), T);
  EXPECT_EQ(eval("{iommu.mode: {unknown: false}}", f), F);
  EXPECT_EQ(eval("{kernel.allowed: {unknown: true}}", f), F);
  EXPECT_EQ(eval("{kernel.allowed: {unknown: false}}", f), T);
  f.set_unknown("kernel.allowed");  // explicitly unknown reads like absent
  EXPECT_EQ(eval("{kernel.allowed: {unknown: true}}", f), T);
}

TEST(Condition, UnknownFactsThatMatterAreCollected) {
  FactSet f = gpu_pair();
  Condition c = parse(rule_with("{all: [{iommu.mode: off}, {any: [{platform.vm_guest: true}, {kernel.allowed: false}]}]}"))
                    .rules.at(0).when;
  std::vector<std::string> unknown;
  c.collect_unknown_facts(f, unknown);
  // platform.vm_guest is unknown too, but the `any` is already true without it.
  EXPECT_EQ(unknown, std::vector<std::string>{"iommu.mode"});
}

// A bound against another fact's value (`{lt: {fact: OTHER}}`): Kleene over both facts, integer and
// number compared as numbers, and the unknown one of the two collected.
TEST(Condition, BoundAgainstAnotherFact) {
  FactSet f;
  f.set("vendor.copy_gbps", 7.5);
  f.set("vendor.copy_staged_gbps", 42.0);
  const std::string slower = "{vendor.copy_gbps: {lt: {fact: vendor.copy_staged_gbps}}}";
  EXPECT_EQ(eval(slower, f), T);
  EXPECT_EQ(eval("{vendor.copy_gbps: {ge: {fact: vendor.copy_staged_gbps}}}", f), F);
  EXPECT_EQ(eval("{vendor.copy_staged_gbps: {gt: {fact: vendor.copy_gbps}}}", f), T);
  f.set("vendor.copy_gbps", 42.0);
  EXPECT_EQ(eval(slower, f), F) << "equal is not slower";
  EXPECT_EQ(eval("{vendor.copy_gbps: {le: {fact: vendor.copy_staged_gbps}}}", f), T);
  // An integer fact against a number fact.
  f.set("kernel.distance", std::int64_t{40});
  EXPECT_EQ(eval("{kernel.distance: {lt: {fact: vendor.copy_gbps}}}", f), T);
  // Either side unknown: unknown, and that side is the one reported.
  FactSet half;
  half.set("vendor.copy_gbps", 7.5);
  EXPECT_EQ(eval(slower, half), U);
  EXPECT_EQ(eval("{not: " + slower + "}", half), U);
  std::vector<std::string> unknown;
  parse(rule_with(slower)).rules.at(0).when.collect_unknown_facts(half, unknown);
  EXPECT_EQ(unknown, std::vector<std::string>{"vendor.copy_staged_gbps"});
  FactSet other;
  other.set("vendor.copy_staged_gbps", 42.0);
  unknown.clear();
  parse(rule_with(slower)).rules.at(0).when.collect_unknown_facts(other, unknown);
  EXPECT_EQ(unknown, std::vector<std::string>{"vendor.copy_gbps"});
}

TEST(Lint, BoundAgainstAnotherFactIsChecked) {
  EXPECT_NE(only_error(rule_with("{vendor.copy_gbps: {lt: {fact: vendor.copy_runtime}}}")).find("'lt' compares numbers; vendor.copy_runtime is a string fact"),
            std::string::npos);
  EXPECT_NE(only_error(rule_with("{vendor.copy_gbps: {lt: {fact: vendor.copy_stagd_gbps}}}")).find("unknown fact 'vendor.copy_stagd_gbps' (did you mean 'vendor.copy_staged_gbps'?)"),
            std::string::npos);
  EXPECT_NE(only_error(rule_with("{vendor.copy_gbps: {lt: {fact: vendor.copy_gbps}}}")).find("compared with itself"), std::string::npos);
  EXPECT_NE(only_error(rule_with("{vendor.copy_gbps: {lt: {facts: vendor.copy_staged_gbps}}}")).find("{fact: NAME}"), std::string::npos);
  EXPECT_NE(only_error(rule_with("{vendor.copy_gbps: {lt: {fact: [a, b]}}}")).find("names one fact"), std::string::npos);
  EXPECT_NE(only_error(rule_with("{vendor.copy_runtime: {lt: {fact: vendor.copy_gbps}}}")).find("'lt' compares numbers"), std::string::npos);
}

TEST(Shadow, ABoundAgainstAFactCoversOnlyItsCopy) {
  auto set = [](const std::string& earlier, const std::string& later) {
    return parse("version: 1\nrules:\n- {id: a, when: " + earlier + ", action: peer, reason: x}\n- {id: b, when: " + later +
                 ", action: deny, reason: y}\n");
  };
  auto covered = [](const RuleFile& f) { return condition_covers(f.rules.at(0).when, f.rules.at(1).when); };
  const std::string slower = "{vendor.copy_gbps: {lt: {fact: vendor.copy_staged_gbps}}}";
  EXPECT_TRUE(covered(set(slower, slower)));
  EXPECT_FALSE(covered(set(slower, "{vendor.copy_gbps: {lt: {fact: vendor.copy_ceiling_gbps}}}")));
  EXPECT_FALSE(covered(set(slower, "{vendor.copy_gbps: {lt: 5}}")));
  EXPECT_FALSE(covered(set("{vendor.copy_gbps: {lt: 100}}", slower)));
}

// ---- decisions ----

TEST(Decide, FirstDecisiveRuleWinsAndWarnsAccumulate) {
  RuleFile file = parse(R"(version: 1
rules:
- {id: warn-early, when: {provider.driver: nvidia}, action: warn, reason: "driver {provider.driver}"}
- {id: refused, when: {kernel.allowed: false}, action: host_staged, authority: kernel, reason: "refused at {kernel.host_bridge}", remedy: "fix it"}
- {id: also-matches, when: {kernel.allowed: false}, action: deny, reason: "never consulted"}
- {id: warn-late, when: {kernel.distance: {gt: 100}}, action: warn, reason: "distance {kernel.distance}", remedy: "look"}
- {id: warn-not, when: {kernel.allowed: true}, action: warn, reason: "no"}
)");
  RuleSet set;
  set.add(file);
  Decision d = set.decide(gpu_pair());
  EXPECT_EQ(d.action, Action::kHostStaged);
  EXPECT_EQ(d.rule, "refused");
  EXPECT_EQ(d.authority, Authority::kKernel);
  EXPECT_EQ(d.reason, "refused at 8086:4c43");
  EXPECT_EQ(d.remedy, "fix it");
  EXPECT_EQ(d.rule_ids(), (std::vector<std::string>{"warn-early", "refused", "warn-late"}));
  EXPECT_EQ(d.reasons(), (std::vector<std::string>{"driver nvidia", "refused at 8086:4c43", "distance 1024"}));
  EXPECT_EQ(d.remedies(), (std::vector<std::string>{"fix it", "look"}));

  json j = decision_to_json(d);
  EXPECT_EQ(j["decision"], "host_staged");
  EXPECT_EQ(j["rule"], "refused");
  EXPECT_EQ(j["authority"], "kernel");
  EXPECT_EQ(j["rules"], json({"warn-early", "refused", "warn-late"}));
  EXPECT_EQ(j["fired"][2]["action"], "warn");
}

TEST(Decide, UnknownMeansNoAndIsReported) {
  RuleFile file = parse(R"(version: 1
rules:
- {id: not-translated, when: {not: {iommu.mode: translated}}, action: peer, reason: "direct"}
- {id: vm, when: {platform.vm_guest: true}, action: warn, reason: "vm"}
)");
  RuleSet set;
  set.add(file);
  Decision d = set.decide(gpu_pair());
  EXPECT_EQ(d.action, Action::kHostStaged);  // the default: nothing decided
  EXPECT_EQ(d.rule, "");
  EXPECT_EQ(d.reason, kNoRuleDecided);
  EXPECT_FALSE(d.authority.has_value());
  EXPECT_TRUE(d.fired.empty());
  EXPECT_EQ(d.undecided_rules, (std::vector<std::string>{"not-translated", "vm"}));
  EXPECT_EQ(d.unknown_facts, (std::vector<std::string>{"iommu.mode", "platform.vm_guest"}));
  EXPECT_TRUE(decision_to_json(d)["rule"].is_null());

  FactSet known = gpu_pair();
  known.set("iommu.mode", std::string("passthrough"));
  Decision peer = set.decide(known);
  EXPECT_EQ(peer.action, Action::kPeer);
  EXPECT_EQ(peer.unknown_facts, std::vector<std::string>{"platform.vm_guest"});
}

// What the unknown facts still allow: each deciding rule ahead of the one that holds, left open by
// them, adds its action; the safest is acted on, by the first open rule giving it, and the facts
// that settle it are those open rules' (warn rules and rules past the one that holds read nothing
// that matters).
TEST(Decide, UnknownFactsLeaveTheSafestPossibleDecisionUncertain) {
  RuleFile file = parse(R"(version: 1
rules:
- {id: vm, when: {platform.vm_guest: true}, action: warn, reason: "vm"}
- {id: staged-early, when: {vendor.nvlink: true}, action: host_staged, reason: "agrees"}
- {id: deny-iommu, when: {iommu.mode: translated}, action: deny, reason: "translated {iommu.mode}", remedy: "iommu=pt"}
- {id: staged, when: {kernel.allowed: false}, action: host_staged, reason: "refused"}
- {id: peer-late, when: {vendor.peer_supported: true}, action: peer, reason: "not reached once decided"}
)");
  RuleSet set;
  set.add(file);
  Decision d = set.decide(gpu_pair());
  EXPECT_EQ(d.unknown_facts, (std::vector<std::string>{"iommu.mode", "platform.vm_guest", "vendor.nvlink"}));
  EXPECT_FALSE(d.certain());
  EXPECT_EQ(d.possible, action_bit(Action::kDeny) | action_bit(Action::kHostStaged));
  EXPECT_EQ(d.action, Action::kDeny);
  EXPECT_EQ(d.rule, "deny-iommu");  // the open rule giving the safest decision, with its texts
  // Its reason states what it tests as fact: it says which of that is not known.
  EXPECT_EQ(d.reason, "may hold (not known here: iommu.mode): translated unknown");
  EXPECT_EQ(d.remedy, "iommu=pt");
  ASSERT_EQ(d.alternatives.size(), 1u);
  EXPECT_EQ(d.alternatives[0].action, Action::kHostStaged);
  EXPECT_EQ(d.alternatives[0].rule, "staged");  // the rule that holds
  EXPECT_EQ(d.decisive_unknown_facts, (std::vector<std::string>{"iommu.mode", "vendor.nvlink"}));
  nlohmann::json j = decision_to_json(d);
  EXPECT_EQ(j["certain"], false);
  EXPECT_EQ(j["possible"], nlohmann::json::parse(R"(["deny", "host_staged"])"));
  EXPECT_EQ(j["if_known"][0]["rule"], "staged");
  EXPECT_EQ(j["settled_by"][0]["fact"], "iommu.mode");
  EXPECT_FALSE(j["settled_by"][0]["how"].get<std::string>().empty());

  // Known: the open rule that is left only agrees, so the decision is certain and says no more.
  FactSet known = gpu_pair();
  known.set("iommu.mode", std::string("off"));
  Decision plain = set.decide(known);
  EXPECT_TRUE(plain.certain());
  EXPECT_EQ(plain.rule, "staged");
  EXPECT_TRUE(plain.decisive_unknown_facts.empty());
  EXPECT_TRUE(plain.alternatives.empty());
  EXPECT_TRUE(decision_to_json(plain)["settled_by"].empty());
}

// An unknown fact never becomes a yes: a peer rule that holds is overruled by an open refusal ahead
// of it, and a peer rule that is open ahead of a refusal leaves the refusal standing.
TEST(Decide, APeerInDoubtIsNeverThePeerActedOn) {
  RuleFile file = parse(R"(version: 1
rules:
- {id: iommu, when: {vendor.nvlink: false, iommu.mode: translated}, action: host_staged, reason: "through the IOMMU"}
- {id: driver-yes, when: {vendor.peer_supported: true}, action: peer, reason: "the driver says yes"}
)");
  RuleSet set;
  set.add(file);
  FactSet f;
  f.set("vendor.peer_supported", true);
  f.set("iommu.mode", std::string("translated"));
  Decision d = set.decide(f);  // NVLink unknown: the IOMMU rule may hold
  EXPECT_EQ(d.action, Action::kHostStaged);
  EXPECT_EQ(d.rule, "iommu");
  EXPECT_FALSE(d.certain());
  ASSERT_EQ(d.alternatives.size(), 1u);
  EXPECT_EQ(d.alternatives[0].rule, "driver-yes");
  EXPECT_EQ(d.decisive_unknown_facts, std::vector<std::string>{"vendor.nvlink"});
  f.set("vendor.nvlink", true);
  EXPECT_EQ(set.decide(f).action, Action::kPeer);
  EXPECT_TRUE(set.decide(f).certain());
  f.set("vendor.nvlink", false);
  EXPECT_EQ(set.decide(f).action, Action::kHostStaged);
  EXPECT_TRUE(set.decide(f).certain());
}

TEST(Decide, LaterFilesOverrideInPlaceOrReplaceAll) {
  RuleSet set = RuleSet::load({test::data_path("policy/valid.yaml"), test::data_path("policy/override.yaml")});
  std::vector<std::string> ids;
  for (const auto& r : set.rules()) ids.push_back(r.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"iommu-translating", "nvlink", "kernel-refuses", "small-bar", "same-switch", "site-extra"}));
  FactSet f;
  f.set("path.relation", std::string("same_switch"));
  f.set("kernel.acs_redirect", false);
  f.set("kernel.allowed", true);  // known, so that no earlier rule is left open
  f.set("vendor.nvlink", false);
  Decision d = set.decide(f);
  EXPECT_EQ(d.action, Action::kDeny);  // the override, not valid.yaml's peer
  EXPECT_EQ(d.authority, Authority::kPlatform);
  EXPECT_EQ(set.rules()[4].origin, test::data_path("policy/override.yaml") + ":4");

  RuleSet only_default = RuleSet::load({test::data_path("policy/valid.yaml")});
  EXPECT_EQ(only_default.decide(f).action, Action::kPeer);

  RuleSet replaced = RuleSet::load({test::data_path("policy/valid.yaml"), test::data_path("policy/replace.yaml")});
  ASSERT_EQ(replaced.rules().size(), 1u);
  EXPECT_EQ(replaced.decide(f).rule, "everything-staged");
}

// A file placed before the defaults goes in front of every rule of the files not so placed, after
// earlier placed files; a placed id leaves its old place; an unplaced id still replaces in place.
TEST(Decide, PlacedFilesGoInFrontOfTheDefaults) {
  auto ids_of = [](const RuleSet& set) {
    std::vector<std::string> ids;
    for (const auto& r : set.rules()) ids.push_back(r.id);
    return ids;
  };
  RuleSet set = RuleSet::load({test::data_path("policy/valid.yaml")});
  set.add(parse(R"(version: 1
placement: before-defaults
rules:
- {id: first-a, when: {kernel.allowed: false}, action: deny, reason: "a"}
- {id: same-switch, when: {path.relation: same_switch}, action: deny, reason: "moved"}
)"));
  set.add(parse(R"(version: 1
rules:
- {id: nvlink, when: {vendor.nvlink: true}, action: host_staged, reason: "in place"}
- {id: appended, when: always, action: peer, reason: "last"}
)"));
  set.add(parse_rule_file(R"(version: 1
placement: before-defaults
rules:
- {id: first-b, when: {iommu.mode: off}, action: peer, reason: "b"}
)", "b.yaml"));
  EXPECT_EQ(ids_of(set), (std::vector<std::string>{"first-a", "same-switch", "first-b", "iommu-translating", "nvlink",
                                                    "kernel-refuses", "small-bar", "appended"}));
  EXPECT_EQ(set.rule_files()[2], "b.yaml");
  EXPECT_EQ(set.rule_files()[4], "t.yaml");  // nvlink replaced in place by t.yaml's
  EXPECT_EQ(set.rule_files()[3], test::data_path("policy/valid.yaml"));

  // replace: true drops everything, placed rules included.
  set.add(parse("version: 1\nreplace: true\nrules:\n- {id: only, when: always, action: deny, reason: x}\n"));
  EXPECT_EQ(ids_of(set), std::vector<std::string>{"only"});
  EXPECT_EQ(set.rule_files(), std::vector<std::string>{"t.yaml"});
}

// The point of placement: a site deny in front of the shipped policy decides a pair the defaults
// would decide peer; the same rule after them never does.
TEST(Decide, SiteDenyPlacedFirstOverridesTheDefaultPolicy) {
  FactSet f;
  f.set("kernel.map_type", std::string("BUS_ADDR"));
  f.set("kernel.allowed", true);
  f.set("vendor.copy_result", std::string("not_run"));
  for (const char* path : {"vendor.kernel_store_result", "vendor.kernel_load_result", "vendor.atomic_result"})
    f.set(path, std::string("not_run"));  // as machine_facts() sets them without a copy test
  f.set("vendor.nvlink", false);
  f.set("vendor.xgmi", false);
  f.set("vendor.authority", std::string("kernel"));
  f.set("provider.class", std::string("gpu"));
  f.set("client.class", std::string("gpu"));
  // Everything else the default rules read is known too (a capture of the whole machine as root):
  // two GPUs on amdgpu below one switch without redirect, on bare metal with the IOMMU off.
  for (const char* role : {"provider.", "client."}) {
    const std::string r = role;
    f.set(r + "vendor", std::string("1002"));
    f.set(r + "device", std::string("740f"));
    f.set(r + "driver", std::string("amdgpu"));
    f.set(r + "bar_unassigned", false);
    f.set(r + "rebar_no_room", false);
    f.set(r + "bar_above_4g", true);
    f.set(r + "bar_above_32t", false);
    f.set(r + "bar_beyond_address_width", false);
    f.set(r + "bar_covers_memory", true);
  }
  f.set("path.relation", std::string("same_switch"));
  f.set("path.same_model", true);
  f.set("path.bridges_64bit_prefetch", true);
  f.set("kernel.acs_redirect", false);
  f.set("kernel.config_p2pdma", true);
  f.set("kernel.whitelist_assumed", false);
  f.set("iommu.mode", std::string("off"));
  f.set("platform.vm_guest", false);
  f.set("platform.cpu_vendor", std::string("AuthenticAMD"));
  f.set("platform.cpu_family", int64_t{25});
  f.set("vendor.copy_verified", false);
  f.set("vendor.peer_supported", true);
  f.set("vendor.nvidia_vm_clique", false);
  auto files = default_rule_files(P2PAUDIT_SOURCE_RULES_DIR);
  RuleSet defaults = RuleSet::load(files);
  ASSERT_EQ(defaults.decide(f).action, Action::kPeer) << defaults.decide(f).reason << " / "
                                                      << nlohmann::json(defaults.decide(f).decisive_unknown_facts).dump();
  EXPECT_EQ(defaults.decide(f).rule, "same-switch");

  files.push_back(test::data_path("policy/site-deny-first.yaml"));
  Decision d = RuleSet::load(files).decide(f);
  EXPECT_EQ(d.action, Action::kDeny);
  EXPECT_EQ(d.rule, "site-no-gpu-peer");
  EXPECT_EQ(d.authority, Authority::kPlatform);

  files.back() = test::data_path("policy/site-deny-after.yaml");
  EXPECT_EQ(RuleSet::load(files).decide(f).rule, "same-switch");

  // It also comes before the measurement rules: a corrupt copy no longer decides (deny is stricter).
  f.set("vendor.copy_result", std::string("corrupt"));
  files.back() = test::data_path("policy/site-deny-first.yaml");
  EXPECT_EQ(RuleSet::load(files).decide(f).rule, "site-no-gpu-peer");
}

// ---- shadowed rules ----

Condition when_of(const std::string& condition) { return parse(rule_with(condition)).rules.at(0).when; }

bool covers(const std::string& earlier, const std::string& later) {
  return condition_covers(when_of(earlier), when_of(later));
}

TEST(Shadow, CoveringConditionsAreFound) {
  EXPECT_TRUE(covers("always", "{kernel.allowed: false}"));
  EXPECT_TRUE(covers("always", "always"));
  EXPECT_TRUE(covers("{kernel.allowed: false}", "{kernel.allowed: false, provider.class: gpu}"));
  EXPECT_TRUE(covers("{kernel.allowed: false, provider.class: gpu}", "{provider.class: gpu, kernel.allowed: false, client.class: nic}"));
  EXPECT_TRUE(covers("{provider.class: {in: [gpu, fpga]}}", "{provider.class: gpu}"));
  EXPECT_TRUE(covers("{provider.class: {in: [gpu, fpga]}}", "{provider.class: {in: [fpga, gpu]}}"));
  EXPECT_TRUE(covers("{provider.class: {ne: nic}}", "{provider.class: {in: [gpu, fpga]}}"));
  EXPECT_TRUE(covers("{iommu.mode: {ne: translated}}", "{iommu.mode: {not_in: [translated, passthrough]}}"));  // enum: every value
  EXPECT_TRUE(covers("{kernel.distance: {lt: 1024}}", "{kernel.distance: {lt: 8}}"));
  EXPECT_TRUE(covers("{kernel.distance: {le: 8}}", "{kernel.distance: {lt: 8}}"));
  EXPECT_TRUE(covers("{kernel.distance: {gt: 7}}", "{kernel.distance: {ge: 8, lt: 16}}"));
  EXPECT_TRUE(covers("{kernel.distance: {ne: 2000}}", "{kernel.distance: {lt: 1024}}"));
  EXPECT_TRUE(covers("{kernel.distance: {ge: 0, lt: 2000}}", "{kernel.distance: {ge: 8, lt: 1024}}"));
  EXPECT_TRUE(covers("{provider.driver: {not_in: [nvidia]}}", "{provider.driver: {not_in: [nvidia, nouveau]}}"));
  EXPECT_TRUE(covers("{provider.driver: {regex: '^nv'}}", "{provider.driver: nvidia}"));
  EXPECT_TRUE(covers("{provider.vendor: {unknown: false}}", "{provider.vendor: \"10de\"}"));
  EXPECT_TRUE(covers("{kernel.allowed: {unknown: true}}", "{kernel.allowed: {unknown: true}, provider.class: gpu}"));
  EXPECT_TRUE(covers("{any: [{provider.class: gpu}, {client.class: gpu}]}", "{client.class: gpu, kernel.allowed: true}"));
  EXPECT_TRUE(covers("{provider.class: gpu}", "{any: [{provider.class: gpu, client.class: nic}, {provider.class: gpu, client.class: fpga}]}"));
  EXPECT_TRUE(covers("{not: {iommu.mode: translated}}", "{not: {iommu.mode: translated}, kernel.allowed: true}"));
}

TEST(Shadow, NoFalseCoverage) {
  EXPECT_FALSE(covers("{kernel.allowed: false, provider.class: gpu}", "{kernel.allowed: false}"));  // later is wider
  EXPECT_FALSE(covers("{provider.class: gpu}", "{provider.class: {in: [gpu, fpga]}}"));
  EXPECT_FALSE(covers("{kernel.allowed: false}", "always"));
  EXPECT_FALSE(covers("{kernel.allowed: false}", "{kernel.allowed: true}"));
  EXPECT_FALSE(covers("{provider.class: gpu}", "{client.class: gpu}"));
  EXPECT_FALSE(covers("{kernel.distance: {lt: 8}}", "{kernel.distance: {le: 8}}"));
  EXPECT_FALSE(covers("{kernel.distance: {lt: 1024}}", "{kernel.distance: {ne: 2000}}"));
  EXPECT_FALSE(covers("{provider.driver: {ne: nvidia}}", "{provider.driver: {ne: amdgpu}}"));
  EXPECT_FALSE(covers("{provider.driver: {regex: '^nv'}}", "{provider.driver: {regex: '^nvi'}}"));  // not shown: only equal regexes
  // Kleene logic: `ne` and `not` are unknown, not true, on an unknown fact.
  EXPECT_FALSE(covers("{kernel.allowed: {ne: true}}", "{kernel.allowed: {unknown: true}}"));
  EXPECT_FALSE(covers("{not: {kernel.allowed: true}}", "{kernel.allowed: {unknown: true}}"));
  EXPECT_FALSE(covers("{kernel.allowed: {unknown: true}}", "{kernel.allowed: false}"));
  EXPECT_FALSE(covers("{provider.vendor: \"10de\"}", "{provider.vendor: {unknown: false}}"));
  // `any` in the earlier rule needs one operand that covers; in the later one, every operand covered.
  EXPECT_FALSE(covers("{any: [{provider.class: gpu, kernel.allowed: true}, {client.class: gpu}]}", "{provider.class: gpu}"));
  EXPECT_FALSE(covers("{provider.class: gpu}", "{any: [{provider.class: gpu}, {client.class: gpu}]}"));
  EXPECT_FALSE(covers("{not: {provider.class: gpu}}", "{not: {provider.class: {in: [gpu, nic]}}}"));  // not compared beyond equality
  EXPECT_FALSE(covers("{not: {any: [{provider.class: gpu}, {client.class: gpu}]}}", "{not: {provider.class: gpu}}"));
}

TEST(Shadow, WarningsNameTheShadowedRuleAndWhatShadowsIt) {
  RuleSet set;
  set.add(parse_rule_file(R"(version: 1
rules:
- {id: early, when: {kernel.allowed: false}, action: host_staged, reason: x}
- {id: note, when: {kernel.allowed: false}, action: warn, reason: warn rules are never shadowed}
- {id: late, when: {kernel.allowed: false, provider.class: gpu}, action: deny, reason: x}
- {id: other, when: {kernel.allowed: true}, action: peer, reason: x}
)", "s.yaml"));
  auto shadowed = find_shadowed_rules(set);
  ASSERT_EQ(shadowed.size(), 1u);
  EXPECT_EQ(shadowed[0].shadowed, 2u);
  EXPECT_EQ(shadowed[0].shadowing, 0u);
  auto warnings = shadow_warnings(set, {"s.yaml"});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(warnings[0].warning);
  EXPECT_EQ(warnings[0].str(),
            "s.yaml:5:3: warning: rule 'late' (deny, position 3 of 4) can never decide: rule 'early' (position 1, s.yaml:3:3) "
            "is true whenever it is and decides first");
  EXPECT_TRUE(shadow_warnings(set, {"elsewhere.yaml"}).empty());
}

// A linted rule that a rule of the context (the defaults) shadows is told that `placement:
// before-defaults` would let it decide; one shadowed by a linted rule is not, since placement moves
// the whole file and that rule would still come first.
TEST(Shadow, PlacementHintOnlyWhereADefaultRuleShadows) {
  const std::string hint = "give its file `placement: before-defaults`";
  RuleSet set;
  set.add(parse_rule_file(R"(version: 1
rules:
- {id: default-staged, when: {kernel.allowed: false}, action: host_staged, reason: x}
)", "defaults.yaml"));
  set.add(parse_rule_file(R"(version: 1
rules:
- {id: site-deny, when: {kernel.allowed: false, provider.class: gpu}, action: deny, reason: x}
- {id: site-vendor, when: {provider.vendor: "1234"}, action: deny, reason: x}
- {id: site-vendor-nic, when: {provider.vendor: "1234", client.class: nic}, action: host_staged, reason: x}
)", "site.yaml"));
  auto warnings = shadow_warnings(set, {"site.yaml"});
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0].str(),
            "site.yaml:3:3: warning: rule 'site-deny' (deny, position 2 of 4) can never decide: rule 'default-staged' "
            "(position 1, defaults.yaml:3:3) is true whenever it is and decides first; to let it decide before the "
            "default policy's rules (the measurement rules included), " + hint);
  // Shadowed within its own file: named, with no placement hint.
  EXPECT_EQ(warnings[1].str(),
            "site.yaml:5:3: warning: rule 'site-vendor-nic' (host_staged, position 4 of 4) can never decide: rule "
            "'site-vendor' (position 3, site.yaml:4:3) is true whenever it is and decides first");

  // A default rule first, but a rule of the file covers it too: placing the file first would not help.
  RuleSet both;
  both.add(parse_rule_file("version: 1\nrules:\n- {id: d, when: {kernel.allowed: false}, action: host_staged, reason: x}\n",
                           "defaults.yaml"));
  both.add(parse_rule_file(R"(version: 1
rules:
- {id: wide, when: {provider.class: gpu}, action: deny, reason: x}
- {id: narrow, when: {provider.class: gpu, kernel.allowed: false}, action: host_staged, reason: x}
)", "site.yaml"));
  warnings = shadow_warnings(both, {"site.yaml"});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].message.find("rule 'd' (position 1, defaults.yaml:3:3)"), std::string::npos) << warnings[0].message;
  EXPECT_EQ(warnings[0].message.find(hint), std::string::npos) << warnings[0].message;
}

// The shipped policy has no rule that can never decide, alone or with the test's site files.
TEST(Shadow, TheDefaultPolicyShadowsNothing) {
  auto files = default_rule_files(P2PAUDIT_SOURCE_RULES_DIR);
  EXPECT_TRUE(find_shadowed_rules(RuleSet::load(files)).empty());
  files.push_back(test::data_path("policy/site-deny-first.yaml"));
  EXPECT_TRUE(find_shadowed_rules(RuleSet::load(files)).empty());
  files.back() = test::data_path("policy/site-deny-shadowed.yaml");
  auto set = RuleSet::load(files);
  auto shadowed = find_shadowed_rules(set);
  ASSERT_EQ(shadowed.size(), 1u);
  EXPECT_EQ(set.rules()[shadowed[0].shadowed].id, "site-no-switch-peer");
  EXPECT_EQ(set.rules()[shadowed[0].shadowing].id, "same-switch");
}

// ---- certain answers ----

TEST(Answer, UnknownWhenAnUnknownFactCouldChangeIt) {
  RuleSet set;
  set.add(parse(R"(version: 1
rules:
- {id: fabric, when: {vendor.nvlink: true}, action: peer, reason: x}
- {id: unknown-verdict, when: {kernel.map_type: UNKNOWN}, action: host_staged, reason: x}
- {id: refused, when: {kernel.allowed: false}, action: host_staged, reason: x}
- {id: switch, when: {kernel.map_type: BUS_ADDR}, action: peer, reason: x}
)"));
  auto peer = [](Action a) { return a == Action::kPeer; };
  auto staged_ok = [](Action a) { return a != Action::kDeny; };
  FactSet refused;
  refused.set("vendor.nvlink", false);
  refused.set("kernel.allowed", false);
  refused.set("kernel.map_type", std::string("NOT_SUPPORTED"));
  EXPECT_EQ(answer(set.decide(refused), peer), Answer::kNo);

  FactSet no_fabric_known = refused;
  no_fabric_known.set_unknown("vendor.nvlink");  // NVLink would make it peer
  EXPECT_EQ(set.decide(no_fabric_known).action, Action::kHostStaged);
  EXPECT_EQ(answer(set.decide(no_fabric_known), peer), Answer::kUnknown);
  EXPECT_EQ(answer(set.decide(no_fabric_known), staged_ok), Answer::kYes);  // both answers are yes

  // The kernel verdict unknown: the rule that decides on not knowing stands in for a later one.
  FactSet unreadable;
  unreadable.set("vendor.nvlink", false);
  unreadable.set("kernel.map_type", std::string("UNKNOWN"));
  EXPECT_EQ(set.decide(unreadable).rule, "unknown-verdict");
  EXPECT_EQ(answer(set.decide(unreadable), peer), Answer::kUnknown);
  EXPECT_EQ(answer(set.decide(unreadable), staged_ok), Answer::kYes);

  FactSet below_switch;
  below_switch.set("vendor.nvlink", false);
  below_switch.set("kernel.allowed", true);
  below_switch.set("kernel.map_type", std::string("BUS_ADDR"));
  EXPECT_EQ(answer(set.decide(below_switch), peer), Answer::kYes);
  // "is it deny?": no rule denies, so no unknown fact can make it so.
  auto denied = [](Action a) { return a == Action::kDeny; };
  EXPECT_EQ(answer(set.decide(no_fabric_known), denied), Answer::kNo);
  EXPECT_EQ(answer(set.decide(unreadable), denied), Answer::kNo);
}

// ---- templates ----

TEST(Template, SubstitutesFactsUnknownsSizesAndBraces) {
  RuleFile file = parse(R"(version: 1
rules:
- id: t
  when: always
  action: warn
  reason: "{provider.bdf} BAR {provider.largest_bar:size} ({provider.largest_bar}), IOMMU {iommu.mode}, {{literal}}"
  remedy: "pci=disable_acs_redir={kernel.acs_redirect_devices}"
)");
  const Rule& r = file.rules.at(0);
  FactSet f = gpu_pair();
  EXPECT_EQ(r.reason.render(f), "0000:01:00.0 BAR 256 MiB (268435456), IOMMU unknown, {literal}");
  EXPECT_EQ(r.remedy.render(f), "pci=disable_acs_redir=0000:00:01.0, 0000:00:1c.0");
  EXPECT_EQ(r.reason.text, "{provider.bdf} BAR {provider.largest_bar:size} ({provider.largest_bar}), IOMMU {iommu.mode}, {{literal}}");
}

// ---- lint: every kind of mistake, with its exact position ----

TEST(Lint, ValidFilesLoad) {
  for (const char* name : {"valid.yaml", "override.yaml", "replace.yaml", "advisory.yaml"})
    EXPECT_NO_THROW(load_rule_file(test::data_path(std::string("policy/") + name))) << name;
  RuleFile f = load_rule_file(test::data_path("policy/valid.yaml"));
  EXPECT_EQ(f.rules.size(), 5u);
  EXPECT_EQ(f.rules[1].authority, Authority::kVendorFabric);
  EXPECT_EQ(load_rule_file(test::data_path("policy/advisory.yaml")).kind, RuleFileKind::kAdvisories);
}

TEST(Lint, UnparsableYaml) {
  EXPECT_EQ(only_error("version: 1\nrules: [\n  {id: a\n"), "t.yaml:4:1: the text ends before the '}' that closes the flow mapping at line 3, column 3");
  EXPECT_EQ(only_error("version: 1\nrules:\n- id: a\n  when: {kernel.allowed: true\n"), "t.yaml:5:1: the text ends before the '}' that closes the flow mapping at line 4, column 9");
  EXPECT_EQ(only_error(""), "t.yaml:1:1: empty rule file: expected 'version: 1' and 'rules:'");
  EXPECT_EQ(only_error("version: 1\nrules: []\n---\nversion: 1\n"), "t.yaml:3:1: a rule file holds one YAML document; this is a second");
  // yaml-cpp's own LoadAll() never returns on this one.
  EXPECT_EQ(only_error(",version: 1\nrules: []\n"),
            "t.yaml:1:1: did not find expected node content while parsing a block node that starts at line 1 (found ',')");
  EXPECT_EQ(only_error("version: 1\nrules: []\n\t\n"),
            "t.yaml:3:1: found character that cannot start any token while scanning for the next token that starts at line 3 "
            "(found a tab on a blank line: remove it; YAML indents with spaces)");
  EXPECT_EQ(only_error("version: 1\nrules:\n\t- {id: a}\n"),
            "t.yaml:3:1: found character that cannot start any token while scanning for the next token that starts at line 3 "
            "(found a tab: YAML indents with spaces)");
}

TEST(Lint, FileLevelKeys) {
  EXPECT_EQ(only_error("version: 2\nrules: []\n"), "t.yaml:1:10: unsupported version '2': this p2paudit reads version 1");
  EXPECT_EQ(only_error("rules: []\n"), "t.yaml:1:1: missing 'version: 1'");
  EXPECT_EQ(lint_errors("version: 1\nrule: []\n"),
            (std::vector<std::string>{
                "t.yaml:2:1: unknown key 'rule' in the rule file (expected one of: version, description, kind, replace, placement, rules)",
                "t.yaml:1:1: missing 'rules:'"}));
  EXPECT_EQ(only_error("version: 1\nreplace: yes\nrules: []\n"), "t.yaml:2:10: 'replace' must be true or false, not 'yes'");
  EXPECT_EQ(only_error("version: 1\nkind: advisory\nrules: []\n"),
            "t.yaml:2:7: 'advisory' is not a valid kind (one of: advisories, policy)");
  EXPECT_EQ(only_error("version: 1\nrules: {}\n"), "t.yaml:2:8: 'rules' must be a list of rules, not a mapping");
  EXPECT_EQ(only_error("version: 1\nplacement: first\nrules: []\n"),
            "t.yaml:2:12: 'first' is not a valid placement (one of: after-defaults, before-defaults)");
  EXPECT_EQ(only_error("version: 1\nplacement: [before-defaults]\nrules: []\n"),
            "t.yaml:2:12: 'placement' must be a single value, not a list");
  EXPECT_EQ(parse("version: 1\nplacement: before-defaults\nrules: []\n").placement, Placement::kBeforeDefaults);
  EXPECT_EQ(parse("version: 1\nrules: []\n").placement, Placement::kAfterDefaults);
  EXPECT_EQ(only_error("- 1\n"), "t.yaml:1:1: a rule file is a mapping with 'version: 1' and 'rules:', not a list");
}

TEST(Lint, UnknownKeyInRule) {
  EXPECT_EQ(only_error("version: 1\nrules:\n- id: a\n  when: always\n  action: peer\n  reason: x\n  remdy: y\n"),
            "t.yaml:7:3: unknown key 'remdy' in a rule (expected one of: id, description, when, action, reason, remedy, authority, source)");
}

TEST(Lint, MissingRequiredKeys) {
  auto errors = lint_errors("version: 1\nrules:\n- description: nothing else\n");
  EXPECT_EQ(errors, (std::vector<std::string>{"t.yaml:3:3: rule has no 'id'", "t.yaml:3:3: rule has no 'when'",
                                              "t.yaml:3:3: rule has no 'action'", "t.yaml:3:3: rule has no 'reason'"}));
  EXPECT_EQ(only_error("version: 1\nrules:\n- id: a\n  when: always\n  reason: x\n"), "t.yaml:3:3: rule 'a' has no 'action'");
  EXPECT_EQ(only_error("version: 1\nrules:\n- id: a\n  when:\n  action: peer\n  reason: x\n"),
            "t.yaml:4:3: a condition is a mapping of facts to values, all/any/not, or 'always'; not nothing");
}

TEST(Lint, BadActionAuthorityAndId) {
  EXPECT_EQ(only_error("version: 1\nrules:\n- {id: a, when: always, action: allow, reason: x}\n"),
            "t.yaml:3:33: 'allow' is not a valid action (one of: deny, host_staged, peer, warn)");
  EXPECT_EQ(only_error("version: 1\nrules:\n- {id: a, when: always, action: warn, reason: x, authority: nvidia}\n"),
            "t.yaml:3:61: 'nvidia' is not a valid authority (one of: kernel, measurement, platform, vendor-driver, vendor-fabric)");
  EXPECT_EQ(only_error("version: 1\nrules:\n- {id: Bad_Id, when: always, action: warn, reason: x}\n"),
            "t.yaml:3:8: rule id 'Bad_Id' may only use a-z, 0-9 and '-'");
}

TEST(Lint, DuplicateIdsAndKeys) {
  EXPECT_EQ(only_error("version: 1\nrules:\n- {id: a, when: always, action: warn, reason: x}\n"
                       "- {id: a, when: always, action: warn, reason: y}\n"),
            "t.yaml:4:8: duplicate rule id 'a' (first at line 3)");
  EXPECT_EQ(only_error("version: 1\nrules:\n- id: a\n  when: always\n  action: warn\n  reason: x\n  action: peer\n"),
            "t.yaml:7:3: duplicate key 'action' in rules[0] (first at line 5)");
  EXPECT_EQ(only_error(rule_with("{kernel.allowed: true, kernel.allowed: false}")),
            "t.yaml:3:32: duplicate key 'kernel.allowed' in rules[0].when (first at line 3)");
  // The strict reader (strict_yaml.h) finds them all before the rules are read.
  EXPECT_EQ(lint_errors("version: 1\nversion: 1\nrules:\n- {id: a, id: b, when: always, action: warn, reason: x}\n"),
            (std::vector<std::string>{"t.yaml:2:1: duplicate key 'version' at the top level (first at line 1)",
                                      "t.yaml:4:11: duplicate key 'id' in rules[0] (first at line 4)"}));
}

TEST(Lint, UnknownFactsAndOperators) {
  EXPECT_EQ(only_error(rule_with("{kernel.alowed: true}")), "t.yaml:3:10: unknown fact 'kernel.alowed' (did you mean 'kernel.allowed'?)");
  EXPECT_EQ(only_error(rule_with("{any: [{kernel.allowed: true}, {gpu.count: 2}]}")), "t.yaml:3:41: unknown fact 'gpu.count'");
  EXPECT_EQ(only_error(rule_with("{in: [a]}")), "t.yaml:3:10: unknown fact 'in'; an operator goes under a fact: FACT: {in: ...}");
  EXPECT_EQ(only_error(rule_with("{kernel.distance: {between: [1, 2]}}")),
            "t.yaml:3:28: unknown operator 'between' (one of: contains, eq, ge, gt, in, le, lt, ne, not_in, regex, unknown)");
  EXPECT_EQ(only_error(rule_with("{}")), "t.yaml:3:9: empty condition; write 'always' for a rule that always fires");
  EXPECT_EQ(only_error(rule_with("{all: []}")), "t.yaml:3:15: 'all' takes a non-empty list of conditions");
  EXPECT_EQ(only_error(rule_with("[{kernel.allowed: true}]")),
            "t.yaml:3:9: a condition is a mapping of facts to values, all/any/not, or 'always'; not a list (wrap a list in all: or any:)");
}

TEST(Lint, ValuesOfTheWrongType) {
  EXPECT_EQ(only_error(rule_with("{kernel.allowed: 'true'}")),
            "t.yaml:3:26: kernel.allowed is a bool fact: expected true or false, got the string 'true'");
  EXPECT_EQ(only_error(rule_with("{kernel.allowed: 1}")), "t.yaml:3:26: kernel.allowed is a bool fact: expected true or false, got '1'");
  EXPECT_EQ(only_error(rule_with("{kernel.distance: far}")),
            "t.yaml:3:27: kernel.distance is an integer fact: expected an integer (suffixes KiB MiB GiB TiB allowed), got 'far'");
  EXPECT_EQ(only_error(rule_with("{kernel.distance: '12'}")),
            "t.yaml:3:27: kernel.distance is an integer fact: expected an integer (suffixes KiB MiB GiB TiB allowed), got the string '12'");
  EXPECT_EQ(only_error(rule_with("{path.narrowest_link_speed_gts: fast}")),
            "t.yaml:3:41: path.narrowest_link_speed_gts is a number fact: expected a number, got 'fast'");
  EXPECT_EQ(only_error(rule_with("{iommu.mode: strict}")),
            "t.yaml:3:22: 'strict' is not a value of iommu.mode (one of: off, passthrough, translated)");
  EXPECT_EQ(only_error(rule_with("{path.relation: {in: [same_switch, same_socket]}}")),
            "t.yaml:3:44: 'same_socket' is not a value of path.relation (one of: same_function, same_device, same_switch, "
            "same_root_port, same_host_bridge, different_host_bridges)");
  EXPECT_EQ(only_error(rule_with("{iommu.mode: [off, passthrough]}")),
            "t.yaml:3:22: iommu.mode takes one value, not a list (write {in: [...]} to match any of several)");
  EXPECT_EQ(only_error(rule_with("{kernel.acs_redirect_devices: '0000:00:01.0'}")),
            "t.yaml:3:39: kernel.acs_redirect_devices is a list fact: compare it with a list, or use contains");
  EXPECT_EQ(only_error(rule_with("{iommu.mode: {unknown: maybe}}")), "t.yaml:3:32: 'unknown' must be true or false, not 'maybe'");
}

TEST(Lint, OperatorsOnTheWrongType) {
  EXPECT_EQ(only_error(rule_with("{kernel.host_bridge: {lt: 5}}")),
            "t.yaml:3:35: 'lt' compares numbers; kernel.host_bridge is a string fact");
  EXPECT_EQ(only_error(rule_with("{path.relation: {ge: same_switch}}")),
            "t.yaml:3:30: 'ge' compares numbers; path.relation is an enum fact");
  EXPECT_EQ(only_error(rule_with("{kernel.allowed: {regex: 'tr.*'}}")),
            "t.yaml:3:34: 'regex' matches strings; kernel.allowed is a bool fact");
  EXPECT_EQ(only_error(rule_with("{iommu.mode: {regex: 'off'}}")),
            "t.yaml:3:30: 'regex' matches strings; iommu.mode is an enum fact (use in)");
  EXPECT_EQ(only_error(rule_with("{kernel.distance: {contains: 1}}")),
            "t.yaml:3:38: 'contains' looks into strings and lists; kernel.distance is an integer fact");
  EXPECT_EQ(only_error(rule_with("{iommu.mode: {in: off}}")), "t.yaml:3:27: 'in' takes a non-empty list of values of iommu.mode");
  EXPECT_EQ(only_error(rule_with("{kernel.acs_redirect_devices: {in: [a]}}")),
            "t.yaml:3:44: kernel.acs_redirect_devices is a list; 'in' compares single values (use contains)");
}

TEST(Lint, BadRegex) {
  auto error = only_error(rule_with("{kernel.release: {regex: '^6\\.(1|'}}"));
  EXPECT_EQ(error.rfind("t.yaml:3:34: bad regex '^6\\.(1|': ", 0), 0u) << error;
}

TEST(Lint, TemplatePlaceholdersArePointedAtExactly) {
  EXPECT_EQ(only_error("version: 1\nrules:\n- id: a\n  when: always\n  action: warn\n  reason: \"BAR of {provider.bdf} is {provider.bar_size}\"\n"),
            "t.yaml:6:37: unknown fact 'provider.bar_size' in {provider.bar_size} (did you mean 'provider.bar_end'?)");
  EXPECT_EQ(only_error("version: 1\nrules:\n- id: a\n  when: always\n  action: warn\n  reason: x\n  remedy: |\n    first line\n"
                       "    then {kernel.remdy}\n"),
            "t.yaml:9:10: unknown fact 'kernel.remdy' in {kernel.remdy} (did you mean 'kernel.remedy'?)");
  EXPECT_EQ(only_error("version: 1\nrules:\n- {id: a, when: always, action: warn, reason: 'size {kernel.release:size}'}\n"),
            "t.yaml:3:53: unknown format ':size' for kernel.release (only ':size', for integer facts)");
  EXPECT_EQ(only_error("version: 1\nrules:\n- {id: a, when: always, action: warn, reason: 'open {kernel.reason'}\n"),
            "t.yaml:3:53: unclosed '{' (write '{{' for a literal brace)");
  EXPECT_EQ(only_error("version: 1\nrules:\n- {id: a, when: always, action: warn, reason: 'close } here'}\n"),
            "t.yaml:3:54: unmatched '}' (write '}}' for a literal brace)");
}

TEST(Lint, AdvisoriesNeedASource) {
  EXPECT_EQ(only_error("version: 1\nkind: advisories\nrules:\n- {id: a, when: always, action: warn, reason: x}\n"),
            "t.yaml:4:3: rule 'a' has no 'source': every advisory names its public reference");
}

TEST(Lint, RulesAfterAnAlwaysDecidingRuleAreUnreachable) {
  EXPECT_EQ(only_error("version: 1\nrules:\n- {id: all, when: always, action: deny, reason: x}\n"
                       "- {id: warned, when: always, action: warn, reason: x}\n"
                       "- {id: dead, when: {kernel.allowed: true}, action: peer, reason: x}\n"),
            "t.yaml:5:8: rule 'dead' is never reached: rule 'all' (t.yaml:3) always decides first");
}

TEST(Lint, AllErrorsOfAFileAreReported) {
  RuleFileError error({});
  try {
    load_rule_file(test::data_path("policy/broken.yaml"));
    FAIL() << "broken.yaml loaded";
  } catch (const RuleFileError& e) {
    error = e;
  }
  std::string file = test::data_path("policy/broken.yaml");
  ASSERT_EQ(error.diagnostics().size(), 3u) << error.what();
  EXPECT_EQ(std::string(error.what()), file + ":4:12: unknown fact 'kernel.alowed' (did you mean 'kernel.allowed'?)\n" + file +
                                           ":8:28: kernel.allowed is a bool fact: expected true or false, got the string 'yes'\n" +
                                           file + ":13:13: 'allow' is not a valid action (one of: deny, host_staged, peer, warn)");
  EXPECT_THROW(load_rule_file(test::data_path("policy/no-such-file.yaml")), InputError);
}

// ---- the command line ----

test::CommandResult tool(const std::string& args) { return test::run_command(std::string(P2PAUDIT_TOOL) + " " + args); }

TEST(RulesCli, LintBrokenFileExitsTwoWithPositions) {
  std::string broken = test::data_path("policy/broken.yaml");
  auto r = tool("rules lint " + test::shell_quote(broken) + " 2>&1 >/dev/null");
  EXPECT_EQ(r.status, 2);
  std::regex positioned("^" + std::regex_replace(broken, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") + R"(:\d+:\d+: .+$)");
  std::istringstream lines(r.output);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) EXPECT_TRUE(std::regex_match(line, positioned)) << line;
  EXPECT_EQ(count, 3) << r.output;
  EXPECT_NE(r.output.find(broken + ":13:13: "), std::string::npos) << r.output;
}

TEST(RulesCli, LintGoodFilesExitsZero) {
  std::string valid = test::data_path("policy/valid.yaml"), advisory = test::data_path("policy/advisory.yaml");
  auto r = tool("rules lint " + test::shell_quote(valid) + " " + test::shell_quote(advisory));
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output, valid + ": 5 rules OK\n" + advisory + ": 1 rules OK\n");
  // One bad file among good ones still fails the run, and the good ones are still reported.
  auto mixed = tool("rules lint " + test::shell_quote(valid) + " " + test::shell_quote(test::data_path("policy/broken.yaml")) + " 2>/dev/null");
  EXPECT_EQ(mixed.status, 2);
  EXPECT_EQ(mixed.output, valid + ": 5 rules OK\n");
}

// Linted where it will be used, after the default policy: a site deny that a default rule always
// decides before is a warning at its own place, naming the shadowing rule and its position.
TEST(RulesCli, LintWarnsAboutShadowedRulesInTheDefaultsContext) {
  std::string site = test::data_path("policy/site-deny-shadowed.yaml");
  auto defaults = RuleSet::load(default_rule_files(P2PAUDIT_SOURCE_RULES_DIR));
  size_t same_switch = 0;
  while (same_switch < defaults.rules().size() && defaults.rules()[same_switch].id != "same-switch") ++same_switch;
  ASSERT_LT(same_switch, defaults.rules().size());
  std::string expected = site + ":8:5: warning: rule 'site-no-switch-peer' (deny, position " +
                         std::to_string(defaults.rules().size() + 2) + " of " + std::to_string(defaults.rules().size() + 2) +
                         ") can never decide: rule 'same-switch' (position " + std::to_string(same_switch + 1) + ", ";
  auto r = tool("rules lint " + test::shell_quote(site) + " 2>&1");
  EXPECT_EQ(r.status, 0);  // a warning does not fail lint
  EXPECT_NE(r.output.find(site + ": 2 rules OK\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
  EXPECT_EQ(tool("rules lint --strict " + test::shell_quote(site) + " 2>/dev/null").status, 2);
  EXPECT_EQ(tool("rules lint --werror " + test::shell_quote(site) + " 2>/dev/null").status, 2);
  // Alone, nothing shadows it.
  auto alone = tool("rules lint --no-default-rules --strict " + test::shell_quote(site) + " 2>&1");
  EXPECT_EQ(alone.status, 0);
  EXPECT_EQ(alone.output, site + ": 2 rules OK\n");
  // Placed first, it is not shadowed either, and neither is anything it precedes.
  EXPECT_EQ(tool("rules lint --strict " + test::shell_quote(test::data_path("policy/site-deny-first.yaml")) + " 2>&1").status, 0);

  // A default rule shadows it, so placing its file before the defaults would let it decide.
  EXPECT_NE(r.output.find("; to let it decide before the default policy's rules (the measurement rules included), give "
                          "its file `placement: before-defaults`\n"),
            std::string::npos)
      << r.output;

  auto j = tool("rules lint --format json " + test::shell_quote(site));
  EXPECT_EQ(j.status, 0);
  json doc = json::parse(j.output);
  ASSERT_EQ(doc["diagnostics"].size(), 1u) << j.output;
  // The JSON message is the text one.
  EXPECT_NE(r.output.find(site + ":8:5: warning: " + doc["diagnostics"][0]["message"].get<std::string>() + "\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(doc["diagnostics"][0]["severity"], "warning");
  EXPECT_EQ(doc["diagnostics"][0]["line"], 8);
  EXPECT_EQ(doc["diagnostics"][0]["column"], 5);
  EXPECT_EQ(doc["files"][0]["rules"], 2);
  auto broken = json::parse(tool("rules lint --format json " + test::shell_quote(test::data_path("policy/broken.yaml"))).output);
  for (const auto& d : broken["diagnostics"]) EXPECT_EQ(d["severity"], "error");
}

// A site rule that an earlier rule of its own file always decides before: a warning naming that
// rule and its place, with no placement hint; an error with --strict or --werror.
TEST(RulesCli, LintWarnsAboutARuleShadowedInItsOwnFile) {
  std::string site = test::data_path("policy/site-own-shadow.yaml");
  for (const char* context : {"", "--no-default-rules "}) {
    auto r = tool(std::string("rules lint ") + context + test::shell_quote(site) + " 2>&1");
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find(site + ":9:5: warning: rule 'site-stage-1234-to-5678' (host_staged, position "),
              std::string::npos) << r.output;
    EXPECT_NE(r.output.find("can never decide: rule 'site-no-peer-from-1234' (position "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(", " + site + ":5:5) is true whenever it is and decides first\n"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("placement"), std::string::npos) << r.output;
    EXPECT_EQ(tool(std::string("rules lint --strict ") + context + test::shell_quote(site) + " 2>/dev/null").status, 2);
    EXPECT_EQ(tool(std::string("rules lint --werror ") + context + test::shell_quote(site) + " 2>/dev/null").status, 2);
  }
  auto j = tool("rules lint --strict --format json " + test::shell_quote(site));
  EXPECT_EQ(j.status, 2);
  json doc = json::parse(j.output);
  ASSERT_EQ(doc["diagnostics"].size(), 1u) << j.output;
  EXPECT_EQ(doc["diagnostics"][0]["severity"], "warning");
  EXPECT_EQ(doc["diagnostics"][0]["line"], 9);
  EXPECT_NE(doc["diagnostics"][0]["message"].get<std::string>().find("rule 'site-no-peer-from-1234'"), std::string::npos);
}

TEST(RulesCli, FactsAsTextAndJson) {
  auto text = tool("rules facts");
  EXPECT_EQ(text.status, 0);
  for (const auto& f : fact_catalog()) EXPECT_NE(text.output.find(f.name), std::string::npos) << f.name;
  auto j = tool("rules facts --format json");
  ASSERT_EQ(j.status, 0);
  EXPECT_EQ(json::parse(j.output), fact_catalog_json());
}

}  // namespace
}  // namespace p2paudit::policy
