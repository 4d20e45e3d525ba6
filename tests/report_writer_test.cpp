// SPDX-License-Identifier: GPL-2.0-or-later
// fleet/pretty_writer.h prints what json_text() prints for the whole document: strings with any
// byte (the eight-byte scan must agree with the byte-wise rule at every position), flat objects of
// a layout, nested containers and repeated values.
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "p2paudit/fleet/pretty_writer.h"
#include "p2paudit/json_output.h"

namespace p2paudit {
namespace {

using fleet::append_json_string;
using ordered_json = nlohmann::ordered_json;

std::string json_of(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

TEST(ReportWriter, EveryByteAtEveryPositionOfAWordQuotesAsJsonText) {
  const std::string base = "0000:00:01.0 provider and client share";  // plain, past several 8-byte words
  for (int byte = 0; byte < 256; ++byte)
    for (size_t at = 0; at < 17; ++at) {
      std::string s = base.substr(0, 16);
      s[at % s.size()] = static_cast<char>(byte);
      if (at == 16) s += static_cast<char>(byte);  // in the tail after the last whole word
      ASSERT_EQ(json_of(s), json_text(ordered_json(s))) << "byte " << byte << " at " << at;
    }
  EXPECT_EQ(json_of(base), "\"" + base + "\"");
  EXPECT_EQ(json_of(""), "\"\"");
}

TEST(ReportWriter, RandomHostileStringsQuoteAsJsonText) {
  std::mt19937 rng(21);
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 40, ' ');
    for (auto& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : 0x20 + rng() % 0x5f);
    ASSERT_EQ(json_of(s), json_text(ordered_json(s))) << i;
  }
}

TEST(ReportWriter, LayoutObjectsAndMembersPrintAsTheWholeDocument) {
  const std::string hostile = std::string("dev\x01\xff\"name\\") + "\n";
  ordered_json doc = ordered_json::object();
  doc["head"] = {{"name", hostile}, {"list", {1, 2}}};
  ordered_json pairs = ordered_json::array();
  for (int i = 0; i < 3; ++i)
    pairs.push_back({{"provider", "0000:01:00.0"},
                     {"distance", i == 1 ? ordered_json(nullptr) : ordered_json(i * 4)},
                     {"refused_at", i == 2 ? ordered_json::array({"8086:09a2", hostile}) : ordered_json::array()},
                     {"reason", i == 0 ? hostile : "plain"},
                     {"rule", nullptr}});
  doc["pairs"] = pairs;
  doc["empty"] = ordered_json::array();
  doc["tail"] = "end";

  std::ostringstream out;
  fleet::PrettyWriter w(out);
  w.open_object();
  w.member("head", doc["head"]);
  w.key("pairs");
  w.open_array();
  const fleet::ObjectLayout layout({"provider", "distance", "refused_at", "reason", "rule"}, w.element_indent());
  fleet::RepeatedString reason;
  for (int i = 0; i < 3; ++i)
    w.element_with([&](std::string& text) {
      fleet::ObjectText e(text, layout);
      e.json(json_of("0000:01:00.0"));
      e.number(i == 1 ? std::nullopt : std::optional<int>(i * 4));
      e.open_array();
      if (i == 2) {
        e.array_string("8086:09a2");
        e.array_string(hostile);
      }
      e.close_array();
      e.json(reason.json(i == 0 ? hostile : "plain"));
      e.string_or_null("");
      e.close();
    });
  w.close_array();
  w.key("empty");
  w.open_array();
  w.close_array();
  w.member("tail", "end");
  w.close_object();
  EXPECT_EQ(out.str(), json_text(doc));
}

TEST(ReportWriter, RepeatedStringQuotesANewValueAndKeepsARepeatedOne) {
  fleet::RepeatedString r;
  EXPECT_EQ(r.json("a\"b"), "\"a\\\"b\"");
  EXPECT_EQ(r.json("a\"b"), "\"a\\\"b\"");
  EXPECT_EQ(r.json("c"), "\"c\"");
  EXPECT_EQ(r.json(""), "\"\"");
  EXPECT_EQ(r.json(""), "\"\"");
}

}  // namespace
}  // namespace p2paudit
