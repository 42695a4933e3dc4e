// Detection of a true +20% p99 regression on the simulated fleet (judge_sim.h)
// at the planned configuration: 8 racks x (1 canary + 1 control), ~30k probes
// per host and period (100 probes/s, 5 min baseline, 5 min bake), tolerance 0,
// three looks, every metric. Gate: the Clopper-Pearson 95% lower bound of the
// detection rate is at least 95% (>= 962 of 1000).
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>

#include "controller/judge/judge.h"
#include "tests/controller/judge/judge_sim.h"

namespace rocetune::controller::sim {
namespace {

TEST(JudgePowerTest, TailOnlyPlus20PercentP99IsCaught) {
  SimConfig sim_config;
  sim_config.canary_tail_scale = 1.2;  // exactly +20% p99 and p999, p50 unchanged
  int seeds = Seeds(1000);
  Tally t = RunSchedule(sim_config, AllMetricsConfig(), seeds, 200001);
  std::cout << Describe("tail x1.2", t) << "\n";
  EXPECT_TRUE(LowerBoundAtLeast(t.fail, seeds, 0.95)) << t.fail << " of " << seeds;
  EXPECT_EQ(t.pass_before_final, 0);
}

TEST(JudgePowerTest, WholeDistributionPlus20PercentIsCaught) {
  SimConfig sim_config;
  sim_config.canary_body_scale = 1.2;
  int seeds = Seeds(400);
  Tally t = RunSchedule(sim_config, AllMetricsConfig(), seeds, 300001);
  std::cout << Describe("whole x1.2", t) << "\n";
  EXPECT_TRUE(LowerBoundAtLeast(t.fail, seeds, 0.95)) << t.fail << " of " << seeds;
}

TEST(JudgePowerTest, TailWeightRaisedToPlus20PercentP99IsCaught) {
  SimConfig sim_config;
  sim_config.canary_tail_weight_scale = 4.69 / 3;  // 3% -> 4.69%: also about +20% p99
  int seeds = Seeds(400);
  Tally t = RunSchedule(sim_config, AllMetricsConfig(), seeds, 400001);
  std::cout << Describe("tail weight x1.56", t) << "\n";
  EXPECT_TRUE(LowerBoundAtLeast(t.fail, seeds, 0.95)) << t.fail << " of " << seeds;
}

// Issue 25 item 4, the cumulative test: a +20% p99 regression (tail x1.2)
// that the canary step let through, judged at stage 1. Each rack has two
// canary hosts, one changed at the canary step (so its own baseline, the 30
// windows before stage 1, already holds the regression) and one changed now,
// against two control hosts. The stage's own test sees only the new host's
// share; the cumulative one (its baseline 60 windows earlier, before the
// canary) sees both hosts' whole regression.
SimConfig RegressionCarriedIntoStageOne(bool cumulative) {
  SimConfig c;
  c.canary_per_rack = 2;
  c.control_per_rack = 2;
  c.canary_changed_earlier_per_rack = 1;
  c.canary_tail_scale = 1.2;
  c.windows_before = 90;
  c.step_before_windows = 30;
  c.cumulative_before_windows = cumulative ? 30 : 0;
  return c;
}

TEST(JudgePowerTest, ARegressionCarriedPastTheCanaryIsCaughtAtStageOne) {
  const int seeds = Seeds(400);
  Tally own = RunSchedule(RegressionCarriedIntoStageOne(false), AllMetricsConfig(), seeds, 800001);
  Tally both = RunSchedule(RegressionCarriedIntoStageOne(true), AllMetricsConfig(), seeds, 800001);
  std::cout << Describe("stage 1, tail x1.2 since the canary, the stage's own test", own) << "\n"
            << Describe("stage 1, tail x1.2 since the canary, with the cumulative test", both)
            << "\n";
  EXPECT_TRUE(LowerBoundAtLeast(both.fail, seeds, 0.95)) << both.fail << " of " << seeds;
  int cumulative_fails = 0;
  for (const auto& [rule, n] : both.fail_rules) {
    if (rule.rfind(kCumulativePrefix, 0) == 0) cumulative_fails += n;
  }
  EXPECT_GT(cumulative_fails, 0);
  EXPECT_GT(both.fail, own.fail);
}

// Issue 25 item 4: the PASS margin. PASS needs the p99 ratio's upper bound
// below 1 + guard.pass_max_ucb_regression. At +20% (the simulated fleets'
// policies) a +10% p99 regression that the final look does not FAIL may
// PASS; at the default +5% it may not: the width rule's error budget (5%)
// bounds how often a regression at or beyond the margin PASSes. The price is
// paid by neutral changes, which PASS only when the fleet's own spread lets
// the bound fall below +5%: the figures go to docs/judge.md.
TEST(JudgePowerTest, TheDefaultMarginPassesNoRegressionAboveIt) {
  const int seeds = Seeds(400);
  JudgeConfig tight = AllMetricsConfig();
  tight.guard.clear_pass_max_ucb_regression();  // the default, +5%
  const JudgeConfig wide = AllMetricsConfig();
  SimConfig aa;
  SimConfig plus10;
  plus10.canary_tail_scale = 1.1;
  SimConfig plus5;
  plus5.canary_tail_scale = 1.05;
  std::map<std::string, Tally> t;
  t["A/A, +20% margin"] = RunSchedule(aa, wide, seeds, 800001);
  t["A/A, +5% margin"] = RunSchedule(aa, tight, seeds, 800001);
  t["tail x1.1, +20% margin"] = RunSchedule(plus10, wide, seeds, 810001);
  t["tail x1.1, +5% margin"] = RunSchedule(plus10, tight, seeds, 810001);
  t["tail x1.05, +20% margin"] = RunSchedule(plus5, wide, seeds, 820001);
  t["tail x1.05, +5% margin"] = RunSchedule(plus5, tight, seeds, 820001);
  for (const auto& [name, tally] : t) std::cout << Describe(name.c_str(), tally) << "\n";
  // A regression beyond the default margin PASSes within the width rule's 5%.
  EXPECT_TRUE(UpperBoundBelow(t["tail x1.1, +5% margin"].pass, seeds, 0.05))
      << t["tail x1.1, +5% margin"].pass << " of " << seeds;
  // The wide margin lets the same regression through more often: the hole
  // the default closes.
  EXPECT_GT(t["tail x1.1, +20% margin"].pass, t["tail x1.1, +5% margin"].pass);
  // The tight margin costs PASSes, never adds FAILs (same seeds, same data).
  EXPECT_LE(t["A/A, +5% margin"].pass, t["A/A, +20% margin"].pass);
  EXPECT_EQ(t["A/A, +5% margin"].fail, t["A/A, +20% margin"].fail);
}

// Below the planned configuration the same regression is caught less often;
// the judge then mostly HOLDs rather than PASSes.
TEST(JudgePowerTest, FourRacksRarelyPassARegression) {
  SimConfig sim_config;
  sim_config.racks = 4;
  sim_config.canary_tail_scale = 1.2;
  int seeds = Seeds(200);
  Tally t = RunSchedule(sim_config, AllMetricsConfig(), seeds, 500001);
  std::cout << Describe("tail x1.2, 4 racks", t) << "\n";
  EXPECT_EQ(t.pass, 0);
  EXPECT_EQ(t.fail, 0);  // fewer than min_rack_pairs: no test may decide
}

}  // namespace
}  // namespace rocetune::controller::sim

namespace rocetune::controller::sim {
namespace {

// The rollout manager measures every unchanged host of a rack as control (a
// canary host's partner and the rack's REST hosts). On the same fleet, three
// control hosts per rack instead of one must keep the A/A false FAILs within
// budget, PASS a neutral change at least as often, and catch a +10% p99
// regression (below the planned +20%, so detection is not saturated) at least
// as often.
TEST(JudgePowerTest, MoreControlHostsPerRackPassAndCatchMore) {
  const int seeds = Seeds(400);
  std::map<int, Tally> aa, weak;
  for (int controls : {1, 3}) {
    SimConfig neutral;
    neutral.control_per_rack = controls;
    aa[controls] = RunSchedule(neutral, AllMetricsConfig(), seeds, 600001);
    SimConfig regression = neutral;
    regression.canary_tail_scale = 1.1;
    weak[controls] = RunSchedule(regression, AllMetricsConfig(), seeds, 700001);
    std::cout << "controls per rack " << controls << ": " << Describe("A/A", aa[controls]) << "; "
              << Describe("tail x1.1", weak[controls]) << "\n";
  }
  // At most the 0.5% budget (2 of the default 400 seeds; it scales with
  // ROCETUNE_JUDGE_SEEDS).
  EXPECT_LE(aa[3].fail, std::max(2, seeds / 200)) << "false FAILs with 3 controls per rack";
  EXPECT_GE(aa[3].pass, aa[1].pass);
  EXPECT_GT(weak[3].fail, weak[1].fail);
}

}  // namespace
}  // namespace rocetune::controller::sim
