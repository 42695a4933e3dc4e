// The hold looks after the final one (issue 25 item 4). A HOLD at the final
// look goes on until the HOLD limit, and every further look spends an equal
// part of a sixth of each error budget (JudgeConfig::hold_looks, Bonferroni
// over the hold looks the limit allows). On the simulated fleet (judge_sim.h),
// with the schedule a policy gets by default (three looks over the bake, a
// HOLD limit of three bakes: eleven hold looks, HoldLooksAllowed), both sides
// of that rule: the extra tries neither raise the A/A false-FAIL rate nor let
// a +20% p99 regression through more often than the width rule's 5% allows.
// Fixed seed lists; ROCETUNE_JUDGE_SEEDS=n runs more (docs/judge.md quotes
// these 1000-seed runs).
#include <gtest/gtest.h>

#include <iostream>

#include "controller/judge/judge.h"
#include "tests/controller/judge/judge_sim.h"

namespace rocetune::controller::sim {
namespace {

// Three planned looks over a 30-window bake (one every 10 windows), then the
// hold looks a HOLD limit of 90 windows allows, 10 windows apart.
SimConfig WithHoldLooks(SimConfig c) {
  c.look_windows = {10, 20, 30};
  c.planned_looks = 3;
  const uint32_t hold_looks = HoldLooksAllowed(90, 30, 3);
  for (uint32_t k = 1; k <= hold_looks; ++k) {
    c.look_windows.push_back(30 + 10 * static_cast<int>(k));
  }
  return c;
}

// A within-rack fleet thin enough (150 probes per host and window, a fifth of
// the default) that the final look HOLDs on width about one time in ten, so
// the hold looks have work to do.
SimConfig Thin() {
  SimConfig c;
  c.probes_per_window = 150;
  return c;
}

TEST(JudgeHoldLooksTest, AaFalseFailsOverEveryLookHoldLooksIncludedBelowOnePercent) {
  int seeds = Seeds(1000);
  Tally t = RunSchedule(WithHoldLooks(Thin()), AllMetricsConfig(), seeds, 2100001);
  std::cout << Describe("A/A 8 racks, thin, with hold looks", t) << "\n";
  EXPECT_TRUE(UpperBoundBelow(t.fail, seeds, 0.01)) << t.fail << " of " << seeds;
  EXPECT_EQ(t.pass_before_final, 0);
  // The hold looks were reached: the final look HOLDs often enough here for
  // the gate to be about them.
  EXPECT_GT(t.hold_at_final, seeds / 50);
}

TEST(JudgeHoldLooksTest, RackLevelAaFalseFailsWithHoldLooksBelowOnePercent) {
  int seeds = Seeds(1000);
  Tally t = RunSchedule(WithHoldLooks(RackLevelConfig(3, 5)), AllMetricsConfig(), seeds, 2200001);
  std::cout << Describe("rack-level A/A 3 vs 5 racks, with hold looks", t) << "\n";
  EXPECT_TRUE(UpperBoundBelow(t.fail, seeds, 0.01)) << t.fail << " of " << seeds;
  EXPECT_GT(t.hold_at_final, 0);
}

// A tail-only +20% p99 regression, exactly the PASS margin: the width rule
// allows 5% PASSes over the final and every hold look together (measured
// 3.8% on these 1000 seeds, all at the final look); the gate leaves room for
// the seed list, not for a rule that spends more.
TEST(JudgeHoldLooksTest, APlus20PercentRegressionIsNotPassedByTheHoldLooks) {
  SimConfig c = Thin();
  c.canary_tail_scale = 1.2;
  int seeds = Seeds(1000);
  Tally t = RunSchedule(WithHoldLooks(c), AllMetricsConfig(), seeds, 2300001);
  std::cout << Describe("tail x1.2, 8 racks, thin, with hold looks", t) << "\n";
  EXPECT_TRUE(UpperBoundBelow(t.pass, seeds, 0.08)) << t.pass << " of " << seeds;
  EXPECT_TRUE(UpperBoundBelow(t.pass_at_hold, seeds, 0.02)) << t.pass_at_hold << " of " << seeds;
  EXPECT_GT(t.fail_at_hold, 0);  // the hold looks still catch what the final look did not
}

// Offline figures (--gtest_also_run_disabled_tests), quoted in docs/judge.md.
TEST(JudgeHoldLooksTest, DISABLED_Figures) {
  struct Case {
    const char* name;
    SimConfig c;
  };
  SimConfig thin_tail = Thin();
  thin_tail.canary_tail_scale = 1.2;
  SimConfig thin_tail5 = Thin();
  thin_tail5.canary_tail_scale = 1.05;
  SimConfig rack_tail = RackLevelConfig(3, 5);
  rack_tail.canary_tail_scale = 1.2;
  SimConfig tail;
  tail.canary_tail_scale = 1.2;
  SimConfig tail5;
  tail5.canary_tail_scale = 1.05;
  for (const Case& k :
       {Case{"A/A 8 racks within-rack", SimConfig{}}, Case{"tail x1.2 8 racks within-rack", tail},
        Case{"tail x1.05 8 racks within-rack", tail5},
        Case{"A/A 8 racks within-rack, thin", Thin()},
        Case{"tail x1.2 8 racks within-rack, thin", thin_tail},
        Case{"tail x1.05 8 racks within-rack, thin", thin_tail5},
        Case{"A/A rack-level 3 vs 5", RackLevelConfig(3, 5)},
        Case{"tail x1.2 rack-level 3 vs 5", rack_tail}}) {
    int seeds = Seeds(300);
    Tally t = RunSchedule(WithHoldLooks(k.c), AllMetricsConfig(), seeds, 2400001);
    std::cout << Describe(k.name, t) << "\n";
  }
}

}  // namespace
}  // namespace rocetune::controller::sim
