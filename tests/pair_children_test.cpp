// SPDX-License-Identifier: GPL-2.0-or-later
// run_pair_children() (probe/src/session.h), the per-pair child loop NVML, CUDA, HIP and Level Zero
// share: which child asks which items, what a death is charged to, and when the rest is skipped.
#include <gtest/gtest.h>
#include <signal.h>

#include <set>
#include <string>
#include <vector>

#include "session.h"

namespace p2paudit::probe::detail {
namespace {

// A loop over `count` items whose child announces each item it finishes (with the end of the
// range it was given) and dies (SIGSEGV) in the items of `deadly`; `returns_at` makes a child
// return early instead, before that item. The child's own EXPECTs would not reach the test: what
// it was asked comes back in its messages.
struct Recorder {
  std::vector<size_t> taken, ends, charged, skipped;

  PairChildren loop(size_t count, std::set<size_t> deadly, size_t returns_at = SIZE_MAX) {
    PairChildren l;
    l.phase = "test";
    l.count = [count] { return std::optional<size_t>(count); };
    l.ask = [this, deadly, returns_at](size_t first, size_t end) {
      for (size_t i = first; i < end; ++i) {
        if (i == returns_at) return nlohmann::json{{"gave_up", i}};
        isolated_phase("item " + std::to_string(i));
        if (deadly.contains(i)) raise(SIGSEGV);
        isolated_partial({{"item", i}, {"end", end}});
      }
      return nlohmann::json{{"done", true}};
    };
    l.take = [this](const IsolatedResult& r, size_t) -> std::optional<size_t> {
      size_t done = 0;
      for (const auto& piece : r.partial) {
        taken.push_back(piece["item"].get<size_t>());
        ends.push_back(piece["end"].get<size_t>());
        ++done;
      }
      return done;
    };
    l.charge = [this](size_t item, const IsolatedResult& r) {
      EXPECT_EQ(r.status, "crashed");
      EXPECT_EQ(r.phase, "item " + std::to_string(item));
      charged.push_back(item);
      return true;
    };
    l.skip = [this](size_t item) { skipped.push_back(item); };
    return l;
  }
};

TEST(PairChildren, ADeathIsChargedToItsItemAndANewChildAsksTheRest) {
  Recorder rec;
  const int deaths = run_pair_children(rec.loop(5, {1, 3}), 5);
  EXPECT_EQ(deaths, 2);
  EXPECT_EQ(rec.taken, (std::vector<size_t>{0, 2, 4}));
  EXPECT_EQ(rec.charged, (std::vector<size_t>{1, 3}));
  EXPECT_TRUE(rec.skipped.empty());
}

TEST(PairChildren, AfterMaxDeathsTheItemsLeftAreSkipped) {
  Recorder rec;
  PairChildren l = rec.loop(6, {0, 1, 2, 3});
  l.max_deaths = 2;
  EXPECT_EQ(run_pair_children(l, 5), 2);
  EXPECT_EQ(rec.charged, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(rec.skipped, (std::vector<size_t>{2, 3, 4, 5}));
  EXPECT_TRUE(rec.taken.empty());
}

TEST(PairChildren, OnePerChildAsksEveryItemInAChildOfItsOwn) {
  Recorder rec;
  PairChildren l = rec.loop(3, {1});
  l.per_child = 1;
  std::vector<size_t> firsts;
  l.progress = [&firsts](size_t first, size_t count) {
    EXPECT_EQ(count, 3u);
    firsts.push_back(first);
  };
  EXPECT_EQ(run_pair_children(l, 5), 1);
  EXPECT_EQ(firsts, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(rec.taken, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(rec.ends, (std::vector<size_t>{1, 3}));  // each child was given one item
  EXPECT_EQ(rec.charged, (std::vector<size_t>{1}));
}

TEST(PairChildren, ManyPerChildGivesEachChildEveryItemLeft) {
  Recorder rec;
  EXPECT_EQ(run_pair_children(rec.loop(3, {}), 5), 0);
  EXPECT_EQ(rec.taken, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(rec.ends, (std::vector<size_t>{3, 3, 3}));
}

TEST(PairChildren, AChildThatReturnsEarlyLeavesTheRestSkippedAndUncharged) {
  Recorder rec;
  EXPECT_EQ(run_pair_children(rec.loop(4, {}, 2), 5), 0);
  EXPECT_EQ(rec.taken, (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(rec.charged.empty());
  EXPECT_EQ(rec.skipped, (std::vector<size_t>{2, 3}));
}

TEST(PairChildren, UnknownCountAsksOneChildAndTakeCanEndTheLoop) {
  Recorder rec;
  PairChildren l = rec.loop(0, {});
  bool known = false;
  int children = 0;
  l.count = [&known]() -> std::optional<size_t> { return known ? std::optional<size_t>(0) : std::nullopt; };
  l.ask = [](size_t first, size_t end) { return nlohmann::json{{"first", first}, {"end_unknown", end == SIZE_MAX}}; };
  l.take = [&](const IsolatedResult& r, size_t) -> std::optional<size_t> {
    ++children;
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r.value["first"], 0);
    EXPECT_EQ(r.value["end_unknown"], true);  // nothing known yet: the child finds out
    known = true;
    return 0;
  };
  EXPECT_EQ(run_pair_children(l, 5), 0);
  EXPECT_EQ(children, 1);
}

}  // namespace
}  // namespace p2paudit::probe::detail
