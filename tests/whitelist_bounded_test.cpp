// SPDX-License-Identifier: GPL-2.0-or-later
// Issue 21: `whitelist` counts the pairs it unlocks and hands them out again one at a time: its
// peak memory does not grow with the pairs, the JSON still lists every pair, and the text lists
// the first fleet::kPairsListed of each candidate and set and says how many more there are.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "p2paudit/fleet/whitelist.h"
#include "peak_rss.h"
#include "temp_dir.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

nlohmann::json whitelist_json(const fs::path& root) {
  auto r = test::run_command(test::shell_quote(test::tool_file()) + " --sysroot " + test::shell_quote(root.string()) +
                             " --format json whitelist --all --no-probe");
  EXPECT_EQ(r.status, 0);
  return nlohmann::json::parse(r.output);
}

size_t unlocked_pairs(const nlohmann::json& j) {
  size_t n = 0;
  for (const auto& c : j["candidates"]) n += c["pairs"].size();
  for (const auto& s : j["candidate_sets"]) n += s["pairs"].size();
  return n;
}

// Two root ports and five (128 and 320 endpoints, with --all their switch ports too): about 29,000
// and 175,000 unlocked pairs, six times as many.
// Keeping every UnlockedPair and the document of them took about 14 GB at 1.6 M pairs (issue 21).
TEST(WhitelistBounded, PeakRssDoesNotGrowWithPairs) {
  if (test::kSanitized) GTEST_SKIP() << "built with sanitizers; the plain build checks peak memory";
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const fs::path small = tmp.path() / "small", big = tmp.path() / "big";
  test::write_candidate_machine(small, 2);
  test::write_candidate_machine(big, 5);
  const std::vector<std::vector<std::string>> commands = {{"whitelist", "--all", "--no-probe"},
                                                          {"--format", "json", "whitelist", "--all", "--no-probe"}};
  for (const auto& command : commands) {
    auto with = [&](const fs::path& root) {
      std::vector<std::string> args{"--sysroot", root.string()};
      args.insert(args.end(), command.begin(), command.end());
      return args;
    };
    const std::string what = command.front() == "--format" ? "json" : "text";
    long rss_small = test::peak_rss_kib(with(small)), rss_big = test::peak_rss_kib(with(big));
    ASSERT_GT(rss_small, 0) << what;
    ASSERT_GT(rss_big, 0) << what;
    // Generous: the bigger tree costs a little; keeping the pairs costs tens of MB here.
    EXPECT_LT(rss_big, rss_small * 13 / 10 + 16 * 1024)
        << what << ": " << rss_small << " KiB at 2 root ports, " << rss_big << " KiB at 5";
  }
  // Counted after: a child's peak RSS starts at what this process held when it forked, and the
  // parsed documents are large.
  const size_t small_pairs = unlocked_pairs(whitelist_json(small)), big_pairs = unlocked_pairs(whitelist_json(big));
  ASSERT_GT(small_pairs, 1000u);
  ASSERT_GE(big_pairs, 4 * small_pairs);
}

// Past fleet::kPairsListed the text lists that many pairs and "... and N more", N what the JSON
// lists beyond them, for each candidate, in the JSON's order.
TEST(WhitelistBounded, TextSaysHowManyMorePairs) {
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const fs::path root = tmp.path() / "m";
  test::write_candidate_machine(root, 2);
  auto j = whitelist_json(root);
  ASSERT_FALSE(j["candidates"].empty());
  auto text = test::run_command(test::shell_quote(test::tool_file()) + " --sysroot " + test::shell_quote(root.string()) +
                                " whitelist --all --no-probe");
  ASSERT_EQ(text.status, 0);
  // "  unlocks N pair(s): LIST" or "  unlocks N pair(s), only with every entry: LIST" (a set's).
  std::vector<std::pair<size_t, std::string>> lines;
  std::istringstream in(text.output);
  for (std::string line; std::getline(in, line);) {
    const std::string head = "  unlocks ";
    if (line.rfind(head, 0) != 0) continue;
    size_t colon = line.find(": ");
    ASSERT_NE(colon, std::string::npos) << line;
    lines.emplace_back(std::stoul(line.substr(head.size())), line.substr(colon + 2));
  }
  std::vector<size_t> listed_in_json;
  for (const auto& c : j["candidates"]) listed_in_json.push_back(c["pairs"].size());
  for (const auto& s : j["candidate_sets"]) listed_in_json.push_back(s["pairs"].size());
  ASSERT_EQ(lines.size(), listed_in_json.size());
  size_t past_bound = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t total = listed_in_json[i];
    EXPECT_EQ(lines[i].first, total);
    const std::string& list = lines[i].second;
    // Each listed pair is "A -> B"; the names carry no comma.
    size_t arrows = 0;
    for (size_t at = list.find(" -> "); at != std::string::npos; at = list.find(" -> ", at + 1)) ++arrows;
    if (total > fleet::kPairsListed) {
      ++past_bound;
      EXPECT_EQ(arrows, fleet::kPairsListed);
      const std::string more = ", ... and " + std::to_string(total - fleet::kPairsListed) + " more (--format json lists every pair)";
      ASSERT_GE(list.size(), more.size());
      EXPECT_EQ(list.substr(list.size() - more.size()), more);
    } else {
      EXPECT_EQ(arrows, total);
      EXPECT_EQ(list.find("more (--format json"), std::string::npos);
    }
  }
  EXPECT_GT(past_bound, 0u);
}

}  // namespace
}  // namespace p2paudit
