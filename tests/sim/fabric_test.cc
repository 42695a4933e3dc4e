// Behaviour of the fabric model (issue 5 items 12 and 13) and determinism.
#include "sim/fabric.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "sim/scenario_loader.h"

namespace rocetune::sim {
namespace {

using ::testing::HasSubstr;

std::string ScenarioPath(const std::string& name) {
  return std::string(ROCETUNE_SOURCE_DIR) + "/sim/scenarios/" + name + ".textproto";
}

// `prepare`, when given, runs on the fabric before the run (host settings).
SimSummary RunScenario(const std::string& name, const std::vector<std::string>& overrides = {},
                       const std::function<void(Fabric&)>& prepare = nullptr) {
  absl::StatusOr<v1::Scenario> scenario = LoadScenario(ScenarioPath(name), overrides);
  EXPECT_TRUE(scenario.ok()) << scenario.status();
  if (!scenario.ok()) return {};
  absl::StatusOr<std::unique_ptr<Fabric>> fabric = Fabric::Create(*scenario);
  EXPECT_TRUE(fabric.ok()) << fabric.status();
  if (!fabric.ok()) return {};
  if (prepare) prepare(**fabric);
  (*fabric)->RunToEnd();
  return (*fabric)->Summary(0);
}

SimSummary RunText(const std::string& text) {
  v1::Scenario scenario;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &scenario)) << text;
  absl::StatusOr<std::unique_ptr<Fabric>> fabric = Fabric::Create(scenario);
  EXPECT_TRUE(fabric.ok()) << fabric.status();
  if (!fabric.ok()) return {};
  (*fabric)->RunToEnd();
  return (*fabric)->Summary(0);
}

// allreduce_16_hosts_background with `set` loads but the fabric refuses it,
// naming `field`.
void ExpectRefused(const std::string& set, const std::string& field) {
  absl::StatusOr<v1::Scenario> bad =
      LoadScenario(ScenarioPath("allreduce_16_hosts_background"), {set});
  ASSERT_TRUE(bad.ok()) << set << ": " << bad.status();
  absl::StatusOr<std::unique_ptr<Fabric>> refused = Fabric::Create(*bad);
  ASSERT_FALSE(refused.ok()) << set;
  EXPECT_THAT(refused.status().message(), HasSubstr(field)) << set;
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

// Issue 24: a fleet-wide load step (drift no knob causes): the background
// load switches to step_load at step_at_us and, with a period, alternates.
TEST(FabricTest, ABackgroundLoadStepChangesTheLoadFromItsTimeOn) {
  const std::vector<std::string> o = {"duration_ms=20", "warmup_ms=2",
                                      "workload.allreduce.start_us=1e9"};
  auto with = [&o](std::vector<std::string> more) {
    more.insert(more.begin(), o.begin(), o.end());
    return RunScenario("allreduce_16_hosts_background", more);
  };
  const SimSummary base = with({});
  const SimSummary high = with({"workload.background.step_load=0.6"});
  const SimSummary late =
      with({"workload.background.step_load=0.6", "workload.background.step_at_us=10000"});
  const SimSummary wave =
      with({"workload.background.step_load=0.6", "workload.background.step_period_us=2000"});
  ASSERT_GT(base.delivered_gbps, 0);
  // Twice the load from the start, from halfway, and half of the time.
  EXPECT_GT(high.delivered_gbps, 1.6 * base.delivered_gbps);
  EXPECT_GT(late.delivered_gbps, 1.2 * base.delivered_gbps);
  EXPECT_LT(late.delivered_gbps, 0.9 * high.delivered_gbps);
  EXPECT_GT(wave.delivered_gbps, 1.2 * base.delivered_gbps);
  EXPECT_LT(wave.delivered_gbps, 0.9 * high.delivered_gbps);
  // A step down thins the arrivals drawn at the higher load.
  const SimSummary down = with({"workload.background.step_load=0.1"});
  EXPECT_LT(down.delivered_gbps, 0.6 * base.delivered_gbps);
  EXPECT_GT(down.delivered_gbps, 0.1 * base.delivered_gbps);
  // A step back to the same load changes nothing, not even the random draws.
  EXPECT_EQ(with({"workload.background.step_load=0.3"}).ToJson(), base.ToJson());
  // Out of range, or a period without a load to step to: refused, naming
  // the field.
  ExpectRefused("workload.background.step_load=1.5", "workload.background.step_load");
  ExpectRefused("workload.background.step_load=nan", "workload.background.step_load");
  ExpectRefused("workload.background.step_period_us=1000", "workload.background.step_load");
  ExpectRefused("workload.background.step_at_us=-1", "workload.background.step_at_us");
}

// tor_ecn sets the ToRs' marking over the scenario's (what a switch agent
// does live), field by field; spines keep `ecn`.
TEST(FabricTest, TorEcnOverridesTheScenariosMarkingOnTheTorsOnly) {
  const std::vector<std::string> o = {"duration_ms=10", "warmup_ms=1"};
  std::vector<std::string> tor = o;
  tor.push_back("tor_ecn.kmin_bytes=20000");
  tor.push_back("tor_ecn.kmax_bytes=100000");
  absl::StatusOr<v1::Scenario> scenario =
      LoadScenario(ScenarioPath("allreduce_16_hosts_background"), tor);
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  absl::StatusOr<std::unique_ptr<Fabric>> fabric = Fabric::Create(*scenario);
  ASSERT_TRUE(fabric.ok()) << fabric.status();
  for (int t = 0; t < 2; ++t) {
    const v1::EcnSettings e = (*fabric)->TorEcn(t);
    EXPECT_EQ(e.kmin_bytes(), 20000u);
    EXPECT_EQ(e.kmax_bytes(), 100000u);
    EXPECT_DOUBLE_EQ(e.pmax(), 0.2) << "unset fields keep the scenario's";
  }
  (*fabric)->RunToEnd();
  const SimSummary tight_tors = (*fabric)->Summary(0);
  const SimSummary loose = RunScenario("allreduce_16_hosts_background", o);
  std::vector<std::string> same = o;
  same.push_back("tor_ecn.kmax_bytes=1600000");
  // Probes within a ToR are counted apart too (8 hosts per ToR: 7 of every
  // 15 peers).
  EXPECT_GT(loose.probe_rtt_intra_tor_us.count, loose.probe_rtt_us.count / 3);
  EXPECT_LT(loose.probe_rtt_intra_tor_us.count, loose.probe_rtt_us.count * 2 / 3);
  EXPECT_GT(loose.probe_rtt_intra_tor_us.p99, 0);
  // Tighter ToR marking marks more; the scenario's own values change nothing.
  EXPECT_GT(tight_tors.ecn_marked_packets, loose.ecn_marked_packets);
  EXPECT_TRUE(RunScenario("allreduce_16_hosts_background", same).ToJson() == loose.ToJson());
  // Out of range or crossed thresholds are refused, naming the field set.
  ExpectRefused("tor_ecn.kmin_bytes=2000000", "tor_ecn.kmin_bytes");
  ExpectRefused("tor_ecn.kmax_bytes=100000", "tor_ecn.kmax_bytes");
  ExpectRefused("tor_ecn.pmax=1.5", "tor_ecn.pmax");
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

// Issue 24: with the job signal on, every all-reduce step leaves one event
// per ring host, the slowest of them the step itself, and every incast burst
// one per sender then one for the receiver, whose time is the burst's; the
// run's own figures are those of the same run with it off.
TEST(FabricTest, JobEventsGiveEachHostItsPartOfEveryExchange) {
  const std::vector<std::string> o = {"duration_ms=20", "warmup_ms=0"};
  const SimSummary off = RunScenario("allreduce_incast_32_hosts", o);
  std::vector<Fabric::SimJobEvent> events;
  const SimSummary on = RunScenario("allreduce_incast_32_hosts", o, [&](Fabric& f) {
    f.EnableJobEvents();
    // Taken in chunks, as fabricsim does.
    while (!f.done()) {
      f.RunUntil(f.now_ns() + 1000000);
      for (const Fabric::SimJobEvent& e : f.TakeJobEvents()) events.push_back(e);
    }
  });
  EXPECT_EQ(on.ToJson(), off.ToJson());
  std::vector<Fabric::SimJobEvent> allreduce, incast;
  for (const Fabric::SimJobEvent& e : events) {
    EXPECT_GT(e.seconds, 0) << e.op << " on host " << e.host;
    (std::string(e.op) == "allreduce" ? allreduce : incast).push_back(e);
  }
  ASSERT_GT(on.allreduce_step_us.count, 2u);
  ASSERT_EQ(allreduce.size(), 32 * on.allreduce_step_us.count);
  double sum_of_slowest = 0, slowest = 0;
  for (size_t step = 0; step < on.allreduce_step_us.count; ++step) {
    std::set<int> hosts;
    double step_max = 0;
    for (size_t i = 32 * step; i < 32 * (step + 1); ++i) {
      hosts.insert(allreduce[i].host);
      step_max = std::max(step_max, allreduce[i].seconds);
      EXPECT_EQ(allreduce[i].bytes, 1048576u);
    }
    EXPECT_EQ(hosts.size(), 32u) << "step " << step;
    sum_of_slowest += step_max;
    slowest = std::max(slowest, step_max);
  }
  EXPECT_NEAR(sum_of_slowest / on.allreduce_step_us.count * 1e6, on.allreduce_step_us.mean, 1e-3);
  EXPECT_NEAR(slowest * 1e6, on.allreduce_step_us.max, 1e-3);
  ASSERT_GT(on.incast_burst_us.count, 2u);
  ASSERT_EQ(incast.size(), 17 * on.incast_burst_us.count);
  for (size_t burst = 0; burst < on.incast_burst_us.count; ++burst) {
    const Fabric::SimJobEvent& receiver = incast[17 * burst + 16];
    double senders_max = 0;
    for (size_t i = 17 * burst; i < 17 * burst + 16; ++i) {
      EXPECT_NE(incast[i].host, 0);
      EXPECT_EQ(incast[i].bytes, 131072u);
      senders_max = std::max(senders_max, incast[i].seconds);
    }
    EXPECT_EQ(receiver.host, 0);
    EXPECT_EQ(receiver.bytes, 16u * 131072);
    EXPECT_DOUBLE_EQ(receiver.seconds, senders_max);
  }
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
  const double rtt = 4.0 + 4 * 64 * 8 / 100e3;
  EXPECT_NEAR(sum.probe_rtt_us.p50, rtt, 0.005 * rtt) << "a sketch at 0.5 %";
  EXPECT_NEAR(sum.probe_rtt_us.p99, rtt, 0.005 * rtt);
  EXPECT_NEAR(sum.probe_rtt_us.max, sum.probe_rtt_us.p50, 0.1);
}

TEST(FabricTest, EveryCnpSentIsHandledWhenNoneIsLost) {
  // No NP moderation: several CNPs per flow and step. The incast ends well
  // before the run, so none is in flight at the end.
  SimSummary s = RunScenario("incast_16to1_100g", {"dcqcn.min_time_between_cnps=0",
                                                   "workload.incast[0].repeats=2", "warmup_ms=0"});
  EXPECT_GT(s.cnp_sent, 1000u);
  EXPECT_EQ(s.cnp_sent, s.cnp_handled);
  EXPECT_EQ(s.flows_started, 32u);
  EXPECT_EQ(s.flows_completed, 32u);
}

// Issue 25 item 8: the per-priority DCQCN enables act in the model, so a
// value applied while its block is off is really without effect. Every host's
// reaction point off on the data priority (3) runs exactly as DCQCN disabled;
// every notification point off sends no CNP however many packets are marked.
SimSummary RunWithMasks(const std::string& name, uint8_t rp, uint8_t np) {
  return RunScenario(name, {}, [&](Fabric& f) {
    for (int h = 0; h < f.host_count(); ++h) f.SetHostEnableMasks(h, rp, np);
  });
}

TEST(FabricTest, AReactionPointOffOnThePriorityRunsAsNoDcqcn) {
  const SimSummary on = RunWithMasks("dcqcn_paper_40g_10flows", 0xff, 0xff);
  const SimSummary rp_off = RunWithMasks("dcqcn_paper_40g_10flows", 0xf7, 0xff);
  const SimSummary disabled = RunScenario("dcqcn_paper_40g_10flows", {"dcqcn.disabled=true"});
  EXPECT_EQ(rp_off.cnp_sent, disabled.cnp_sent);
  EXPECT_EQ(MaxQueueMean(rp_off), MaxQueueMean(disabled));
  EXPECT_GT(MaxQueueMean(rp_off), 2 * MaxQueueMean(on));  // nothing slows the senders
  // Off on another priority only: as if all on.
  const SimSummary other = RunWithMasks("dcqcn_paper_40g_10flows", 0xef, 0xff);
  EXPECT_EQ(other.cnp_sent, on.cnp_sent);
  EXPECT_EQ(MaxQueueMean(other), MaxQueueMean(on));
}

TEST(FabricTest, ANotificationPointOffOnThePrioritySendsNoCnp) {
  const SimSummary np_off = RunWithMasks("dcqcn_paper_40g_10flows", 0xff, 0x00);
  EXPECT_GT(np_off.ecn_marked_packets, 1000u);
  EXPECT_EQ(np_off.cnp_sent, 0u);
}

TEST(FabricTest, EveryFigureCoversTheMeasurementWindow) {
  // One incast at 100 us that ends by about 2 ms; the window starts at 10 ms.
  const std::vector<std::string> once = {"workload.incast[0].repeats=1", "duration_ms=12"};
  std::vector<std::string> late = once;
  late.push_back("warmup_ms=10");
  std::vector<std::string> early = once;
  early.push_back("warmup_ms=0");
  SimSummary in_window = RunScenario("incast_16to1_100g", early);
  SimSummary after = RunScenario("incast_16to1_100g", late);
  EXPECT_GT(in_window.cnp_sent, 0u);
  EXPECT_GT(in_window.ecn_marked_packets, 0u);
  EXPECT_EQ(in_window.flows_started, 16u);
  EXPECT_GT(in_window.probe_rtt_us.p99, 100);
  EXPECT_EQ(after.cnp_sent, 0u);
  EXPECT_EQ(after.cnp_handled, 0u);
  EXPECT_EQ(after.ecn_marked_packets, 0u);
  EXPECT_EQ(after.pfc_pause_frames, 0u);
  EXPECT_EQ(after.flows_started, 0u);
  EXPECT_EQ(after.flows_completed, 0u);
  EXPECT_EQ(after.incast_burst_us.count, 0u);
  EXPECT_GT(after.probe_rtt_us.count, 100u);
  EXPECT_LT(after.probe_rtt_us.p99, 5) << "probes of the quiet window see no queue";
  EXPECT_TRUE(after.queues.empty()) << "no queue in the quiet window: " << after.ToJson();
  // Queues that only ever held floating-point residue are not listed.
  SimSummary busy = RunScenario("allreduce_16_hosts_background", {"duration_ms=10"});
  ASSERT_FALSE(busy.queues.empty());
  for (const SimSummary::Queue& q : busy.queues) EXPECT_GE(q.max_bytes, 1) << q.name;
}

TEST(FabricTest, ASmallFlowBehindAStandingQueueWaitsForItOnce) {
  // Ten long DCQCN flows hold a queue of about 135 KB at the 40 Gb/s port of
  // host 0 (27 us); host 11 sends a 5 KB flow to host 0 every 97 us and probes
  // host 0 every 10 us. FIFO service: the flow's last byte leaves one queue
  // drain after it arrived, as a probe's does, so its completion time (one
  // way plus the ack) is within 1.2x of the probe RTT through the same queue.
  std::string text = R"pb(
    seed: 1
    duration_ms: 60
    warmup_ms: 30
    topology { hosts: 12 host_link_gbps: 40 link_delay_ns: 1000 }
    dcqcn {
      clamp_tgt_rate: 1
      clamp_tgt_rate_after_time_inc: 0
      rpg_time_reset: 55
      rpg_byte_reset: 156250
      rpg_threshold: 5
      rpg_ai_rate: 40
      rpg_hai_rate: 200
      rpg_min_rate: 100
      dce_tcp_g: 1020
      dce_tcp_rtt: 55
      rate_reduce_monitor_period: 1
      min_time_between_cnps: 50
    }
    ecn { kmin_bytes: 5000 kmax_bytes: 200000 pmax: 0.01 }
    pfc { enabled: true }
    probe { interval_us: 10 hosts: 11 targets: 0 }
    workload {
      incast { receiver: 0 senders: 11 bytes_per_sender: 5000 start_us: 20000 period_us: 97 }
  )pb";
  for (int i = 1; i <= 10; ++i) {
    text += "long_flows { src: " + std::to_string(i) +
            " dst: 0 start_us: " + std::to_string(100 * i) + " }\n";
  }
  text += "}\n";
  SimSummary s = RunText(text);
  ASSERT_GT(s.incast_burst_us.count, 100u);
  ASSERT_GT(s.probe_rtt_us.count, 1000u);
  EXPECT_GT(MaxQueueMean(s), 50000) << "a standing queue";
  const double probe = s.probe_rtt_us.p50;
  const double flow = s.incast_burst_us.p50;
  std::printf("standing queue mean %.0f B: 5 KB flow p50 %.1f us, probe RTT p50 %.1f us (%.2fx)\n",
              MaxQueueMean(s), flow, probe, flow / probe);
  EXPECT_GT(probe, 15) << "the probes queue";
  EXPECT_LT(flow, 1.2 * probe) << "5 KB flow " << flow << " us vs probe " << probe << " us";
  EXPECT_GT(flow, 0.9 * probe) << "the flow waits for the queue too";
}

TEST(FabricTest, SmallFlowSlowdownIsOnePlusQueueing) {
  // WebSearch at 50 % load on 16 hosts under one 100 Gb/s ToR. A flow below
  // 10 KB has an ideal completion time of 4.0-4.8 us (four 1 us links plus
  // serialisation); its slowdown should be that plus the queueing a probe sees
  // (and up to two steps of rounding), not a multiple of it.
  SimSummary s = RunText(R"pb(
    seed: 3
    duration_ms: 30
    warmup_ms: 5
    topology { hosts: 16 host_link_gbps: 100 link_delay_ns: 1000 }
    ecn { kmin_bytes: 400000 kmax_bytes: 1600000 pmax: 0.2 }
    pfc { enabled: true }
    workload { background { load: 0.5 distribution: WEBSEARCH } }
    probe { interval_us: 20 }
    fct_bin_bounds_bytes: [ 10000, 100000, 1000000 ]
  )pb");
  ASSERT_FALSE(s.fct_slowdown.empty());
  const SimSummary::FctBin& small = s.fct_slowdown[0];
  ASSERT_GT(small.count, 100u);
  ASSERT_GT(s.probe_rtt_us.count, 10000u);
  const double base_us = 4.0;
  const double queueing_p50 = s.probe_rtt_us.p50 - base_us;
  const double queueing_p99 = s.probe_rtt_us.p99 - base_us;
  std::printf(
      "WebSearch 50%%: flows < 10 KB slowdown p50 %.2f p99 %.2f (n=%zu); probe queueing p50 %.1f "
      "us "
      "p99 %.1f us; bound p50 %.2f p99 %.2f\n",
      small.p50, small.p99, static_cast<size_t>(small.count), queueing_p50, queueing_p99,
      (4.8 + 2 + queueing_p50) / base_us, 1.1 * (4.8 + 2 + queueing_p99) / base_us);
  EXPECT_GT(queueing_p99, 20) << "the load builds queues";
  EXPECT_LT(small.p50, (4.8 + 2 + queueing_p50) / base_us);
  EXPECT_LT(small.p99, 1.1 * (4.8 + 2 + queueing_p99) / base_us);
  EXPECT_GT(small.p99, 0.5 * (4.0 + queueing_p99) / 4.8) << "small flows see the queues";
}

}  // namespace
}  // namespace rocetune::sim
