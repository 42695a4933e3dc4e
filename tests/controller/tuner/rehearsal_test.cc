// Rehearsal of DCQCN values in the fabric simulator.
#include "controller/tuner/rehearsal.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/scenario_loader.h"

namespace rocetune::controller {
namespace {

using ::testing::HasSubstr;

v1::Scenario VictimFlow() {
  absl::StatusOr<v1::Scenario> s = sim::LoadScenario(
      std::string(ROCETUNE_SOURCE_DIR) + "/sim/scenarios/victim_flow.textproto", {});
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : v1::Scenario();
}

TEST(RehearsalTest, ReturnsFiniteFigures) {
  absl::StatusOr<v1::RehearsalResult> r = RehearseScenario(VictimFlow(), {});
  ASSERT_TRUE(r.ok()) << r.status();
  for (double v : {r->probe_p99_seconds(), r->probe_p999_seconds(), r->throughput_gbps(),
                   r->cnp_per_second(), r->pfc_pause_ratio()}) {
    EXPECT_TRUE(std::isfinite(v));
    EXPECT_GT(v, 0);
  }
  EXPECT_GE(r->probe_p999_seconds(), r->probe_p99_seconds());
  EXPECT_LT(r->probe_p99_seconds(), 0.1);  // an RTT, not a unit mix-up
  EXPECT_LE(r->throughput_gbps(), 100.0);  // per host, at most the link
  EXPECT_LE(r->pfc_pause_ratio(), 1.0);
  EXPECT_EQ(r->step_time_seconds(), 0);  // no all-reduce here
}

// Issue 28 item 3: a rehearsal of a long scenario ran to its end whatever
// happened to its caller (a client that gave up, a SIGTERM). It asks its
// stop function after every simulated millisecond and ends with its status.
TEST(RehearsalTest, AStopEndsTheSimulationWithinAMillisecondOfSimulatedTime) {
  v1::Scenario long_one = VictimFlow();
  long_one.set_duration_ms(600'000);  // ten simulated minutes
  int asked = 0;
  const SimulationStop stop = [&]() -> absl::Status {
    return ++asked < 3 ? absl::OkStatus() : absl::DeadlineExceededError("the deadline passed");
  };
  absl::StatusOr<v1::Rehearsal> r = Rehearse(long_one, "long", {}, {}, 0.05, stop);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(), HasSubstr("stopped at 3 of 600000 simulated ms"));
  EXPECT_THAT(r.status().message(), HasSubstr("the deadline passed"));
  EXPECT_EQ(asked, 3);
}

TEST(RehearsalTest, KnobValuesReachTheHosts) {
  absl::StatusOr<v1::RehearsalResult> base = RehearseScenario(VictimFlow(), {});
  absl::StatusOr<v1::RehearsalResult> sparse =
      RehearseScenario(VictimFlow(), {{"min_time_between_cnps", 128}});
  ASSERT_TRUE(base.ok() && sparse.ok());
  // Fewer CNPs per flow: fewer CNPs in total.
  EXPECT_LT(sparse->cnp_per_second(), base->cnp_per_second() * 0.5);
}

TEST(RehearsalTest, RejectsUnknownAndOutOfRangeKnobs) {
  absl::StatusOr<v1::RehearsalResult> r = RehearseScenario(VictimFlow(), {{"no_such_knob", 1}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("no_such_knob"));
  r = RehearseScenario(VictimFlow(), {{"rpg_min_dec_fac", 101}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("rpg_min_dec_fac"));
}

// DCQCN off (PFC alone), the beat-this baseline of tuning_bench: with the
// notification point off no CNP is sent; with only the reaction point off
// CNPs are sent and no sender acts on them (the victim flow's queue grows).
TEST(RehearsalTest, EnableMasksTurnDcqcnOff) {
  absl::StatusOr<sim::SimSummary> base = SimulateWithKnobs(VictimFlow(), {});
  absl::StatusOr<sim::SimSummary> off =
      SimulateWithKnobs(VictimFlow(), {{"rp_enable_mask", 0}, {"np_enable_mask", 0}});
  absl::StatusOr<sim::SimSummary> rp_off = SimulateWithKnobs(VictimFlow(), {{"rp_enable_mask", 0}});
  ASSERT_TRUE(base.ok() && off.ok() && rp_off.ok());
  EXPECT_GT(base->cnp_sent, 0u);
  EXPECT_EQ(off->cnp_sent, 0u);
  EXPECT_GT(rp_off->cnp_sent, 0u);
  EXPECT_GT(rp_off->probe_rtt_us.p99, base->probe_rtt_us.p99);
  for (const auto& bad : std::vector<std::map<std::string, int64_t>>{{{"rp_enable_mask", 256}},
                                                                     {{"np_enable_mask", -1}}}) {
    absl::StatusOr<sim::SimSummary> r = SimulateWithKnobs(VictimFlow(), bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("want a priority mask in [0, 255]"));
  }
}

TEST(RehearsalTest, SwitchEcnKnobsReachTheSwitches) {
  // Marking from a quarter of the scenario's thresholds on: more CNPs, a
  // shorter queue. Byte-identical figures would mean the knob went nowhere.
  const v1::Scenario s = VictimFlow();
  const int64_t kmin = static_cast<int64_t>(s.ecn().kmin_bytes()) / 4;
  const int64_t kmax = static_cast<int64_t>(s.ecn().kmax_bytes()) / 4;
  absl::StatusOr<v1::RehearsalResult> base = RehearseScenario(s, {});
  absl::StatusOr<v1::RehearsalResult> tight =
      RehearseScenario(s, {{"ecn.AZURE_LOSSLESS.green_min_threshold", kmin},
                           {"ecn.AZURE_LOSSLESS.green_max_threshold", kmax}});
  ASSERT_TRUE(base.ok() && tight.ok()) << base.status() << tight.status();
  EXPECT_GT(tight->cnp_per_second(), base->cnp_per_second() * 1.2);
  EXPECT_LT(tight->probe_p99_seconds(), base->probe_p99_seconds());
}

TEST(RehearsalTest, RejectsBadSwitchKnobs) {
  const v1::Scenario s = VictimFlow();
  struct Case {
    std::map<std::string, int64_t> knobs;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {{{"ecn.AZURE_LOSSLESS.green_drop_probability", 0}}, "(0, 100]"},
           {{{"ecn.AZURE_LOSSLESS.green_drop_probability", 101}}, "(0, 100]"},
           {{{"ecn.AZURE_LOSSLESS.green_min_threshold", -1}}, "want bytes"},
           {{{"ecn.AZURE_LOSSLESS.yellow_min_threshold", 1000}}, "green colour only"},
           {{{"ecn.AZURE_LOSSLESS.green_min_threshold", 900000},
             {"ecn.AZURE_LOSSLESS.green_max_threshold", 800000}},
            "Kmin 900000 is above Kmax 800000"},
           {{{"ecn.bogus", 1}}, "ecn.bogus"},
       }) {
    absl::StatusOr<v1::RehearsalResult> r = RehearseScenario(s, c.knobs);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.want;
    EXPECT_THAT(r.status().message(), HasSubstr(c.want));
  }
}

TEST(RehearsalTest, SummaryFiguresMatchTheRehearsal) {
  absl::StatusOr<sim::SimSummary> sum = SimulateWithKnobs(VictimFlow(), {{"dce_tcp_rtt", 4}});
  ASSERT_TRUE(sum.ok()) << sum.status();
  absl::StatusOr<v1::RehearsalResult> r = RehearseScenario(VictimFlow(), {{"dce_tcp_rtt", 4}});
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::RehearsalResult f = SummaryFigures(*sum, 16);
  EXPECT_DOUBLE_EQ(f.probe_p99_seconds(), r->probe_p99_seconds());
  EXPECT_DOUBLE_EQ(f.throughput_gbps(), r->throughput_gbps());
  EXPECT_DOUBLE_EQ(f.throughput_gbps(), sum->delivered_gbps / 16);
  EXPECT_EQ(SummaryFigures(*sum, 0).probe_p99_seconds(), 0);
  EXPECT_EQ(SimulateWithKnobs(VictimFlow(), {{"bogus", 1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RehearsalTest, RejectsAScenarioWithoutProbes) {
  v1::Scenario s = VictimFlow();
  s.mutable_probe()->set_interval_us(0);
  EXPECT_EQ(RehearseScenario(s, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RehearsalTest, FlagsARegression) {
  absl::StatusOr<v1::Rehearsal> same = Rehearse(VictimFlow(), "", {}, {}, 0.0);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_FALSE(same->regression());
  EXPECT_EQ(same->scenario(), "victim_flow");
  EXPECT_GT(same->unix_nanos(), 0);

  absl::StatusOr<v1::Rehearsal> r =
      Rehearse(VictimFlow(), "victim", {}, {{"min_time_between_cnps", 128}}, 0.05);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->scenario(), "victim");
  const bool worse = r->proposed().probe_p99_seconds() > r->current().probe_p99_seconds() * 1.05 ||
                     r->proposed().throughput_gbps() < r->current().throughput_gbps() * 0.95;
  EXPECT_EQ(r->regression(), worse);
  EXPECT_TRUE(r->regression()) << r->DebugString();

  EXPECT_EQ(Rehearse(VictimFlow(), "", {}, {}, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Better on the probe and worse for the job is a regression: each of the
// job's figures counts on its own.
TEST(RehearsalTest, TheJobsOwnFiguresCountAsRegressions) {
  v1::RehearsalResult cur, prop;
  cur.set_probe_p99_seconds(20e-6);
  cur.set_throughput_gbps(90);
  cur.set_step_time_seconds(1e-3);
  cur.set_incast_burst_seconds(2e-3);
  prop = cur;
  prop.set_probe_p99_seconds(10e-6);  // the proxy halves
  EXPECT_EQ(RehearsalRegression(cur, prop, 0.05), "");
  prop.set_step_time_seconds(1.39e-3);
  EXPECT_EQ(RehearsalRegression(cur, prop, 0.05), "all-reduce step p99 +39.0% (beyond 5.0%)");
  prop.set_step_time_seconds(1.04e-3);  // within the tolerance
  prop.set_incast_burst_seconds(3e-3);
  EXPECT_EQ(RehearsalRegression(cur, prop, 0.05), "incast burst p99 +50.0% (beyond 5.0%)");
  prop.set_throughput_gbps(80);
  EXPECT_THAT(RehearsalRegression(cur, prop, 0.05),
              ::testing::HasSubstr("incast burst p99 +50.0% (beyond 5.0%); throughput -11.1%"));
  // No step completed with the proposed values: the worst regression.
  prop = cur;
  prop.set_step_time_seconds(0);
  EXPECT_EQ(RehearsalRegression(cur, prop, 0.05),
            "all-reduce step: none completed with the proposed values");
  // A figure the current run lacks (the scenario has no such job) is not
  // compared.
  prop = cur;
  cur.set_incast_burst_seconds(0);
  prop.set_incast_burst_seconds(9e-3);
  EXPECT_EQ(RehearsalRegression(cur, prop, 0.05), "");
}

// A real rehearsal of a scenario with an all-reduce and an incast reports the
// step p99 and the burst p99; the victim-flow scenario (an incast beside a
// long flow) has no all-reduce.
TEST(RehearsalTest, ReportsTheJobsFigures) {
  absl::StatusOr<v1::Scenario> s = sim::LoadScenario(
      std::string(ROCETUNE_SOURCE_DIR) + "/sim/scenarios/allreduce_incast_32_hosts.textproto", {});
  ASSERT_TRUE(s.ok()) << s.status();
  s->set_duration_ms(s->warmup_ms() + 30);  // a few steps and bursts are enough here
  absl::StatusOr<v1::RehearsalResult> r = RehearseScenario(*s, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->step_time_seconds(), 0);
  EXPECT_GT(r->incast_burst_seconds(), 0);
  absl::StatusOr<v1::RehearsalResult> v = RehearseScenario(VictimFlow(), {});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->step_time_seconds(), 0);
  EXPECT_GT(v->incast_burst_seconds(), 0);
}

}  // namespace
}  // namespace rocetune::controller
