// False FAILs of the judge in A/A runs on the simulated fleet (judge_sim.h):
// no change at all, the full look schedule, every metric (p99, p999 and one
// constraint per guard metric). Fixed seed lists, so the counts are fixed.
// Gate: the Clopper-Pearson 95% upper bound of the false-FAIL rate is below 1%
// (at most 12 of 2000). The default budget is 0.5% nominal, and 10,000 seeds
// measured 0.34%, so 1000 seeds (gate <= 4) would sit too close to the edge.
#include <gtest/gtest.h>

#include <iostream>

#include "controller/judge/judge.h"
#include "tests/controller/judge/judge_sim.h"

namespace rocetune::controller::sim {
namespace {

TEST(JudgeFalseFailTest, EightRacksBelowOnePercentOverAllLooksAndMetrics) {
  SimConfig sim_config;  // 8 racks x (1 canary + 1 control), ~30k probes per host and period
  int seeds = Seeds(2000);
  Tally t = RunSchedule(sim_config, AllMetricsConfig(), seeds, 1);
  std::cout << Describe("A/A 8 racks", t) << "\n";
  EXPECT_TRUE(UpperBoundBelow(t.fail, seeds, 0.01)) << t.fail << " of " << seeds;
  EXPECT_EQ(t.pass_before_final, 0);
  // The gate means something only if the judge also decides: nearly every A/A
  // run must PASS at the final look.
  EXPECT_GE(t.pass, seeds * 9 / 10);
}

}  // namespace
}  // namespace rocetune::controller::sim
