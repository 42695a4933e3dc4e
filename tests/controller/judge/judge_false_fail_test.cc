// False FAILs of the judge in A/A runs on the simulated fleet (judge_sim.h):
// no change at all, the full look schedule, every metric (p99, p999 and one
// constraint per guard metric). Fixed seed lists, so the counts are fixed.
#include <gtest/gtest.h>

#include <iostream>

#include "controller/judge/judge.h"
#include "tests/controller/judge/judge_sim.h"

namespace rocetune::controller::sim {
namespace {

// Clopper-Pearson: k false FAILs out of n keep the one-sided 95% upper bound of
// the rate below 1% for k <= 4 at n = 1000 (<= 12 at 2000, <= 38 at 5000); for
// other n, 0.4% of n, which is at least as strict from n = 1000 up.
int MaxFalseFails(int n) { return n * 4 / 1000; }

TEST(JudgeFalseFailTest, EightRacksBelowOnePercentOverAllLooksAndMetrics) {
  SimConfig sim_config;  // 8 racks x (1 canary + 1 control), ~30k probes per host and period
  int seeds = Seeds(1000);
  Tally t = RunSchedule(sim_config, AllMetricsConfig(), seeds, 1);
  std::cout << Describe("A/A 8 racks", t) << "\n";
  EXPECT_LE(t.fail, MaxFalseFails(seeds));
  EXPECT_EQ(t.pass_before_final, 0);
  // The gate means something only if the judge also decides: nearly every A/A
  // run must PASS at the final look.
  EXPECT_GE(t.pass, seeds * 9 / 10);
}

TEST(JudgeFalseFailTest, SixRacksBelowOnePercent) {
  SimConfig sim_config;
  sim_config.racks = 6;
  int seeds = Seeds(1000);
  Tally t = RunSchedule(sim_config, AllMetricsConfig(), seeds, 100001);
  std::cout << Describe("A/A 6 racks", t) << "\n";
  EXPECT_LE(t.fail, MaxFalseFails(seeds));
  EXPECT_EQ(t.pass_before_final, 0);
}

}  // namespace
}  // namespace rocetune::controller::sim
