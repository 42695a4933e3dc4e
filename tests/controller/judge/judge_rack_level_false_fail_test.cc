// False FAILs of the judge's rack-level design (every rack entirely canary or
// entirely control, as for a change applied per ToR) in A/A runs on the
// simulated fleet (judge_sim.h, RackLevelConfig): racks of 4 hosts whose rack
// effects move over time, about 30k probes per host and period (100 probes/s,
// 5 min baseline, 5 min bake), no change at all, three looks, every metric
// (p99, p999 and one constraint per guard metric), at the sizes of the
// simulator end-to-end test (8 racks: 3 canary vs 5 control, 4 vs 4). Fixed
// seed lists, so the counts are fixed; ROCETUNE_JUDGE_SEEDS=n runs more.
// Gate: the Clopper-Pearson 95% upper bound of the false-FAIL rate is below 1%
// (at most 12 of 2000); 5000 seeds measured 0.12% and 0.24%, so 1000 seeds
// (gate <= 4) would sit too close to the edge.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <utility>

#include "controller/judge/judge.h"
#include "tests/controller/judge/judge_sim.h"

namespace rocetune::controller::sim {
namespace {

TEST(JudgeRackLevelFalseFailTest, AaThreeCanaryFiveControlRacksBelowOnePercent) {
  int seeds = Seeds(2000);
  Tally t = RunSchedule(RackLevelConfig(3, 5), AllMetricsConfig(), seeds, 1100001);
  std::cout << Describe("rack-level A/A 3 vs 5 racks", t) << "\n";
  EXPECT_TRUE(UpperBoundBelow(t.fail, seeds, 0.01)) << t.fail << " of " << seeds;
  EXPECT_EQ(t.pass_before_final, 0);
}

TEST(JudgeRackLevelFalseFailTest, AaFourCanaryFourControlRacksBelowOnePercent) {
  int seeds = Seeds(2000);
  Tally t = RunSchedule(RackLevelConfig(4, 4), AllMetricsConfig(), seeds, 1200001);
  std::cout << Describe("rack-level A/A 4 vs 4 racks", t) << "\n";
  EXPECT_TRUE(UpperBoundBelow(t.fail, seeds, 0.01)) << t.fail << " of " << seeds;
  EXPECT_EQ(t.pass_before_final, 0);
}

// A stage of a rack-level change, judged twice (judge.h, the cumulative
// test): its own 30-window baseline and the 30 windows before the canary's
// 30-window bake, each test at half the budget. The racks' own drift has had
// 60 windows more to move the older baseline (an AR(1) at 0.8 per window
// forgets it within about ten).
TEST(JudgeRackLevelFalseFailTest, AaStageJudgedTwiceBelowOnePercent) {
  SimConfig c = RackLevelConfig(4, 4);
  c.windows_before = 90;
  c.cumulative_before_windows = 30;
  c.step_before_windows = 30;
  int seeds = Seeds(2000);
  Tally t = RunSchedule(c, AllMetricsConfig(), seeds, 1300001);
  std::cout << Describe("A/A 4 vs 4 racks, stage + cumulative test", t) << "\n";
  EXPECT_TRUE(UpperBoundBelow(t.fail, seeds, 0.01)) << t.fail << " of " << seeds;
  EXPECT_EQ(t.pass_before_final, 0);
}

}  // namespace
}  // namespace rocetune::controller::sim
