// Behaviour of the fabric model (issue 5 items 12 and 13) and determinism.
#include "sim/fabric.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/scenario_loader.h"

namespace rocetune::sim {
namespace {

std::string ScenarioPath(const std::string& name) {
  return std::string(ROCETUNE_SOURCE_DIR) + "/sim/scenarios/" + name + ".textproto";
}

SimSummary RunScenario(const std::string& name, const std::vector<std::string>& overrides = {}) {
  absl::StatusOr<v1::Scenario> scenario = LoadScenario(ScenarioPath(name), overrides);
  EXPECT_TRUE(scenario.ok()) << scenario.status();
  if (!scenario.ok()) return {};
  absl::StatusOr<std::unique_ptr<Fabric>> fabric = Fabric::Create(*scenario);
  EXPECT_TRUE(fabric.ok()) << fabric.status();
  if (!fabric.ok()) return {};
  (*fabric)->RunToEnd();
  return (*fabric)->Summary(0);
}

double MaxQueueMean(const SimSummary& s) {
  double m = 0;
  for (const auto& q : s.queues) m = std::max(m, q.mean_bytes);
  return m;
}

const SimSummary::Flow* Tagged(const SimSummary& s, const std::string& tag) {
  for (const auto& f : s.flows) {
    if (f.tag == tag) return &f;
  }
  return nullptr;
}

TEST(FabricTest, LongFlowsShareABottleneckFairly) {
  for (const char* name : {"dcqcn_paper_40g_2flows", "dcqcn_paper_40g_4flows"}) {
    SimSummary s = RunScenario(name);
    EXPECT_GT(s.jain_index, 0.95) << name;
    EXPECT_GT(s.delivered_gbps, 0.95 * 40) << name << ": the bottleneck stays busy";
    EXPECT_LE(s.delivered_gbps, 40.001) << name;
  }
}

TEST(FabricTest, SteadyQueueGrowsWithTheNumberOfFlows) {
  const double q2 = MaxQueueMean(RunScenario("dcqcn_paper_40g_2flows"));
  const double q4 = MaxQueueMean(RunScenario("dcqcn_paper_40g_4flows"));
  const double q10 = MaxQueueMean(RunScenario("dcqcn_paper_40g_10flows"));
  EXPECT_GT(q2, 0);
  EXPECT_LT(q2, q4);
  EXPECT_LT(q4, q10);
}

TEST(FabricTest, LowerKmaxLowersTheQueueAndRaisesCnps) {
  SimSummary high = RunScenario("dcqcn_paper_40g_10flows");
  SimSummary low = RunScenario("dcqcn_paper_40g_10flows", {"ecn.kmax_bytes=40000"});
  EXPECT_LT(MaxQueueMean(low), 0.5 * MaxQueueMean(high));
  EXPECT_GT(low.cnp_sent, high.cnp_sent);
  EXPECT_GE(low.cnp_sent, low.cnp_handled);
  EXPECT_GT(low.cnp_handled, 0u);
}

TEST(FabricTest, IncastWithPfcPausesAndSlowsAVictimFlow) {
  SimSummary with = RunScenario("victim_flow");
  SimSummary without = RunScenario("victim_flow", {"workload.incast[0].start_us=1e9"});
  EXPECT_GT(with.pfc_pause_frames, 0u);
  EXPECT_GT(with.host_rx_pause_frames, 0u) << "the pause reaches the victim's NIC";
  EXPECT_EQ(without.pfc_pause_frames, 0u);
  const SimSummary::Flow* v_with = Tagged(with, "victim");
  const SimSummary::Flow* v_without = Tagged(without, "victim");
  ASSERT_NE(v_with, nullptr);
  ASSERT_NE(v_without, nullptr);
  EXPECT_GT(v_without->throughput_gbps, 90);
  EXPECT_LT(v_with->throughput_gbps, 0.5 * v_without->throughput_gbps);
  EXPECT_EQ(with.dropped_bytes, 0) << "PFC keeps the fabric lossless";
}

TEST(FabricTest, TighterEcnOnTheSameIncastProducesFewerPauses) {
  SimSummary loose = RunScenario("victim_flow");
  SimSummary tight =
      RunScenario("victim_flow", {"ecn.kmin_bytes=20000", "ecn.kmax_bytes=100000", "ecn.pmax=0.2"});
  EXPECT_GT(loose.pfc_pause_frames, 0u);
  EXPECT_LT(tight.pfc_pause_frames, loose.pfc_pause_frames / 2);
  EXPECT_LT(tight.pfc_paused_us, loose.pfc_paused_us);
}

TEST(FabricTest, TuningTradeOffBetweenProbeLatencyAndThroughput) {
  // Same all-reduce + background workload, two parameter sets: loose ECN
  // thresholds keep throughput up, tight ones keep probe RTT p99 down.
  const std::vector<std::string> shorter = {"duration_ms=25"};
  SimSummary loose = RunScenario("allreduce_16_hosts_background", shorter);
  std::vector<std::string> tight_set = shorter;
  tight_set.push_back("ecn.kmin_bytes=20000");
  tight_set.push_back("ecn.kmax_bytes=100000");
  SimSummary tight = RunScenario("allreduce_16_hosts_background", tight_set);
  ASSERT_GT(loose.probe_rtt_us.count, 1000u);
  ASSERT_GT(tight.probe_rtt_us.count, 1000u);
  EXPECT_LT(tight.probe_rtt_us.p99, loose.probe_rtt_us.p99);
  EXPECT_GT(loose.delivered_gbps, tight.delivered_gbps);
  EXPECT_LT(loose.allreduce_step_us.mean, tight.allreduce_step_us.mean);
}

TEST(FabricTest, SameSeedSameResultsOtherSeedOtherResults) {
  const std::vector<std::string> o = {"duration_ms=10", "warmup_ms=1"};
  SimSummary a = RunScenario("allreduce_16_hosts_background", o);
  SimSummary b = RunScenario("allreduce_16_hosts_background", o);
  std::vector<std::string> o2 = o;
  o2.push_back("seed=12345");
  SimSummary c = RunScenario("allreduce_16_hosts_background", o2);
  EXPECT_EQ(a.ToJson(), b.ToJson());
  EXPECT_NE(a.ToJson(), c.ToJson());
  EXPECT_GT(a.flows_completed, 0u);
}

TEST(FabricTest, IncastBurstTakesAtLeastItsBytesAtLineRate) {
  SimSummary s = RunScenario("incast_16to1_100g", {"duration_ms=8"});
  ASSERT_GT(s.incast_burst_us.count, 0u);
  // 16 x 1 MB through one 100 Gb/s port: at least 1280 us.
  EXPECT_GE(s.incast_burst_us.p50, 1280);
  EXPECT_LT(s.incast_burst_us.p50, 3 * 1280);
  EXPECT_GT(s.ecn_marked_packets, 0u);
  EXPECT_GT(s.probe_rtt_us.p99, 100) << "probes queue behind the incast";
}

TEST(FabricTest, ProbeRttWithoutTrafficIsThePropagationDelay) {
  // Two hosts under one ToR, no data: RTT = 4 links x 1 us + serialisation.
  v1::Scenario s;
  s.set_duration_ms(1);
  s.mutable_topology()->set_hosts(2);
  s.mutable_probe()->set_interval_us(10);
  absl::StatusOr<std::unique_ptr<Fabric>> f = Fabric::Create(s);
  ASSERT_TRUE(f.ok()) << f.status();
  (*f)->RunToEnd();
  SimSummary sum = (*f)->Summary(0);
  ASSERT_GT(sum.probe_rtt_us.count, 100u);
  EXPECT_NEAR(sum.probe_rtt_us.p50, 4.0 + 4 * 64 * 8 / 100e3, 0.1);
  EXPECT_NEAR(sum.probe_rtt_us.max, sum.probe_rtt_us.p50, 0.1);
}

}  // namespace
}  // namespace rocetune::sim
