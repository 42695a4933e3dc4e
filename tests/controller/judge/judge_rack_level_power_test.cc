// Detection of a true +20% p99 regression by the judge's rack-level design
// (every rack entirely canary or entirely control) on the simulated fleet
// (judge_sim.h, RackLevelConfig: racks of 4 hosts whose rack effects move over
// time, about 30k probes per host and period, three looks, every metric).
// Fixed seed lists; ROCETUNE_JUDGE_SEEDS=n runs more. Gate: the
// Clopper-Pearson 95% lower bound of the detection rate is at least 95%.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <utility>

#include "controller/judge/judge.h"
#include "tests/controller/judge/judge_sim.h"

namespace rocetune::controller::sim {
namespace {

// A tail-only +20% p99 regression (p50 unchanged) on the canary racks. With
// the model's rack drift, 15 racks (7 vs 8) are the smallest count whose
// measured detection rate reaches 95% (963 of 1000 seeds; 16 racks 972), too
// close to the gate to gate on; 18 racks (9 vs 9, 994 of 1000) clear it.
TEST(JudgeRackLevelPowerTest, TailOnlyPlus20PercentP99CaughtWithEighteenRacks) {
  SimConfig c = RackLevelConfig(9, 9);
  c.canary_tail_scale = 1.2;
  int seeds = Seeds(500);
  Tally t = RunSchedule(c, AllMetricsConfig(), seeds, 1500001);
  std::cout << Describe("rack-level tail x1.2, 9 vs 9 racks", t) << "\n";
  EXPECT_TRUE(LowerBoundAtLeast(t.fail, seeds, 0.95)) << t.fail << " of " << seeds;
  EXPECT_EQ(t.pass_before_final, 0);
}

// With the 8 racks of the simulator end-to-end test the same regression is
// caught well under half the time (see docs/judge.md); the judge then mostly
// HOLDs, and PASSes it no more often than the width rule allows (its 95%
// upper bound sits at the regression's own size).
TEST(JudgeRackLevelPowerTest, EightRacksRarelyPassAPlus20PercentRegression) {
  SimConfig c = RackLevelConfig(3, 5);
  c.canary_tail_scale = 1.2;
  int seeds = Seeds(300);
  Tally t = RunSchedule(c, AllMetricsConfig(), seeds, 1600001);
  std::cout << Describe("rack-level tail x1.2, 3 vs 5 racks", t) << "\n";
  EXPECT_TRUE(UpperBoundBelow(t.pass, seeds, 0.1)) << t.pass << " of " << seeds;
  EXPECT_TRUE(LowerBoundAtLeast(t.fail, seeds, 0.25)) << t.fail << " of " << seeds;
  EXPECT_EQ(t.pass_before_final, 0);
}

// Offline: detection of a tail-only +20% p99 regression over rack counts and
// rack drift sizes (run with --gtest_also_run_disabled_tests).
TEST(JudgeRackLevelPowerTest, DISABLED_Sweep) {
  for (double drift : {0.0, 0.03, 0.05}) {
    for (auto [rc, rk] :
         {std::pair{3, 5}, {4, 4}, {5, 5}, {6, 6}, {7, 7}, {7, 8}, {8, 8}, {9, 9}}) {
      SimConfig c = RackLevelConfig(rc, rk);
      c.rack_drift_sd = drift;
      c.canary_tail_scale = 1.2;
      int seeds = Seeds(400);
      Tally t = RunSchedule(c, AllMetricsConfig(), seeds, 1300001);
      std::string name = "tail x1.2, drift " + std::to_string(drift) + ", " + std::to_string(rc) +
                         " vs " + std::to_string(rk);
      std::cout << Describe(name.c_str(), t) << "\n";
    }
  }
}

}  // namespace
}  // namespace rocetune::controller::sim
