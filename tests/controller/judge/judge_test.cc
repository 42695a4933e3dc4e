#include "controller/judge/judge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "tests/controller/judge/judge_sim.h"

namespace rocetune::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr uint64_t kSeeds = 60;  // per thin-data scenario

// The final look of a simulated A/A bake.
std::vector<HostInput> FinalLook(const sim::SimConfig& c, uint64_t seed) {
  return sim::SimulateLooks(c, seed).back();
}

JudgeConfig FinalConfig() {
  JudgeConfig config = sim::AllMetricsConfig();
  config.look = 3;
  config.looks = 3;
  return config;
}

bool AnyDropMentions(const v1::Verdict& v, const std::string& text) {
  return std::any_of(v.dropped_hosts().begin(), v.dropped_hosts().end(),
                     [&](const std::string& d) { return d.find(text) != std::string::npos; });
}

// Judges every look of seeds 1..seeds of `c` (all metrics) and calls
// check(seed, look, looks, verdict).
template <typename F>
void ForEachLook(const sim::SimConfig& c, uint64_t seeds, F check) {
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    auto looks = sim::SimulateLooks(c, seed);
    JudgeConfig config = sim::AllMetricsConfig();
    config.looks = static_cast<uint32_t>(looks.size());
    for (size_t l = 0; l < looks.size(); ++l) {
      config.look = static_cast<uint32_t>(l + 1);
      check(seed, l + 1, looks.size(), Judge(looks[l], config));
    }
  }
}

// Runs every look of every seed and asserts each verdict is HOLD; returns the
// first verdict for further checks.
v1::Verdict ExpectAlwaysHold(const sim::SimConfig& c, const char* what) {
  v1::Verdict first;
  ForEachLook(c, kSeeds, [&](uint64_t seed, size_t look, size_t looks, const v1::Verdict& v) {
    EXPECT_EQ(v.outcome(), v1::Verdict::HOLD) << what << ", seed " << seed << ", look " << look
                                              << ": " << v.rule() << " - " << v.summary();
    if (seed == 1 && look == looks) first = v;
  });
  std::cout << what << ": HOLD, rule " << first.rule() << " - " << first.summary() << "\n";
  return first;
}

// --- Thin data: HOLD, never PASS.

TEST(JudgeThinDataTest, TooFewRackPairsHold) {
  for (int racks : {3, 4, 5}) {
    sim::SimConfig c;
    c.racks = racks;
    v1::Verdict v = ExpectAlwaysHold(c, "few racks");
    EXPECT_EQ(v.rule(), "min_rack_pairs");
    EXPECT_EQ(FindEvidence(v, "ln_p99_did")->outcome(), "hold");
    EXPECT_EQ(FindEvidence(v, "ln_p99_did")->rack_pairs(), static_cast<uint32_t>(racks));
  }
}

TEST(JudgeThinDataTest, FewSamplesPerHostHold) {
  sim::SimConfig c;
  c.probes_per_window = 10;  // ~300 per host and period
  v1::Verdict v = ExpectAlwaysHold(c, "300 probes per host");
  EXPECT_TRUE(AnyDropMentions(v, "probe RTTs")) << v.DebugString();
  EXPECT_EQ(FindEvidence(v, "ln_p99_did")->rack_pairs(), 0u);
}

TEST(JudgeThinDataTest, NoBaselineHolds) {
  sim::SimConfig c;
  c.windows_before = 0;
  v1::Verdict v = ExpectAlwaysHold(c, "no baseline");
  EXPECT_TRUE(AnyDropMentions(v, "no baseline windows"));
}

TEST(JudgeThinDataTest, HalfTheWindowsMissingHolds) {
  sim::SimConfig c;
  c.present_share = 0.5;
  v1::Verdict v = ExpectAlwaysHold(c, "50% windows missing");
  EXPECT_TRUE(AnyDropMentions(v, "windows present"));
}

TEST(JudgeThinDataTest, EmptySketchesHold) {
  sim::SimConfig c;
  c.probes_per_window = 0;
  v1::Verdict v = ExpectAlwaysHold(c, "empty sketches");
  EXPECT_EQ(v.dropped_hosts_size(), 16);
  EXPECT_EQ(v.groups(0).hosts(), 0u);
  // No hosts at all.
  v1::Verdict none = Judge({}, FinalConfig());
  EXPECT_EQ(none.outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(none.rule(), "min_rack_pairs");
}

TEST(JudgeThinDataTest, BadExposureNeverPasses) {
  auto hosts = FinalLook(sim::SimConfig{}, 9);
  for (HostInput& h : hosts) h.after.covered_seconds = std::nan("");
  v1::Verdict v = Judge(hosts, FinalConfig());
  EXPECT_EQ(v.outcome(), v1::Verdict::HOLD) << v.summary();
  EXPECT_THAT(v.rule(), StartsWith("constraint_data:"));
}

// Issue 25: probe loss above control is a regression, not only a HOLD. The
// canary losing 5% of its probes since the change (control none) FAILs at
// every look, interim ones included; losing 0.5% (inside the 1-point
// tolerance) never FAILs on loss and never PASSes either (the group rule).
TEST(JudgeTest, CanaryLosingProbesBeyondControlFails) {
  sim::SimConfig c;
  c.canary_loss_after = 0.05;
  ForEachLook(c, 10, [](uint64_t seed, size_t look, size_t, const v1::Verdict& v) {
    EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << seed << " " << look << " " << v.summary();
    EXPECT_EQ(v.rule(), "probe_loss");
    EXPECT_THAT(v.summary(), HasSubstr("lost 5.00% more of its probes than control"));
    EXPECT_EQ(FindEvidence(v, kProbeLossEvidence)->outcome(), "fail");
  });
  c.canary_loss_after = 0.005;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    v1::Verdict v = Judge(FinalLook(c, seed), FinalConfig());
    EXPECT_NE(v.outcome(), v1::Verdict::FAIL) << v.summary();
    EXPECT_NE(FindEvidence(v, kProbeLossEvidence)->outcome(), "fail");
  }
}

TEST(JudgeThinDataTest, CanaryLosingSomeProbesNeverPasses) {
  sim::SimConfig c;
  c.canary_loss_after = 0.015;  // 1.5 points: the group rule holds; the loss test may not reject
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    v1::Verdict v = Judge(FinalLook(c, seed), FinalConfig());
    EXPECT_NE(v.outcome(), v1::Verdict::PASS) << v.summary();
    EXPECT_EQ(v.rule(), "probe_loss");
  }
}

TEST(JudgeThinDataTest, SketchCollapseReachingP99Holds) {
  auto hosts = FinalLook(sim::SimConfig{}, 7);
  // A huge value makes every canary's after sketch fold its lowest buckets, RTTs included.
  for (HostInput& h : hosts) {
    if (h.canary) h.after.rtt.Insert(1e32);
  }
  v1::Verdict v = Judge(hosts, FinalConfig());
  EXPECT_EQ(v.outcome(), v1::Verdict::HOLD) << v.summary();
  EXPECT_TRUE(AnyDropMentions(v, "collapse")) << v.DebugString();
}

// --- The same data, ample: PASS (so the HOLDs above come from the thin data).
TEST(JudgeTest, AmpleAaDataPassesWithFullEvidence) {
  v1::Verdict v = Judge(FinalLook(sim::SimConfig{}, 3), FinalConfig());
  ASSERT_EQ(v.outcome(), v1::Verdict::PASS) << v.summary();
  EXPECT_EQ(v.rule(), "p99_did_t_test");
  EXPECT_THAT(v.summary(), StartsWith("PASS: canary p99 RTT changed"));
  EXPECT_EQ(v.look(), 3u);
  EXPECT_EQ(v.dropped_hosts_size(), 0);

  ASSERT_EQ(v.groups_size(), 4);
  const char* names[] = {"canary", "control", "canary_baseline", "control_baseline"};
  for (int i = 0; i < 4; ++i) {
    const v1::GroupEvidence& g = v.groups(i);
    EXPECT_EQ(g.group(), names[i]);
    EXPECT_EQ(g.hosts(), 8u);
    EXPECT_GT(g.samples(), 8u * 25000);
    EXPECT_LT(g.p99_lower_seconds(), g.p99_seconds());
    EXPECT_GT(g.p99_upper_seconds(), g.p99_seconds());
    EXPECT_GT(g.p99_seconds(), 20e-6);  // model p99 ~37 us
    EXPECT_LT(g.p99_seconds(), 80e-6);
    EXPECT_GT(g.p999_seconds(), g.p99_seconds());
    uint64_t in_sketch = g.rtt().zero_count();
    for (uint64_t c : g.rtt().counts()) in_sketch += c;
    EXPECT_EQ(in_sketch, g.samples());
    EXPECT_NEAR(g.throughput_gbps(), 40, 25);
    EXPECT_GT(g.cnp_per_second(), 0);
    EXPECT_GT(g.pfc_pause_ratio(), 0);
    EXPECT_GT(g.retransmits_per_second(), 0);
  }

  ASSERT_EQ(v.metrics_size(), 7);  // probe loss, p99, p999, four constraints
  const v1::MetricEvidence* p99 = FindEvidence(v, "ln_p99_did");
  ASSERT_NE(p99, nullptr);
  EXPECT_EQ(p99->outcome(), "pass");
  EXPECT_EQ(p99->rack_pairs(), 8u);
  EXPECT_GT(p99->sd(), 0);
  EXPECT_GT(p99->p_value(), 0);
  EXPECT_LT(p99->p_value(), 1);
  // p99 share at the final look: all but the interim third and the hold looks' sixth.
  EXPECT_NEAR(p99->alpha(), 0.6 * 0.005 / 2, 1e-12);
  EXPECT_NEAR(p99->ratio(), std::exp(p99->mean()), 1e-12);
  EXPECT_LT(p99->ratio_lower(), p99->ratio());
  EXPECT_GT(p99->ratio_upper(), p99->ratio());
  EXPECT_LT(p99->ratio_upper(), 1.2);
  EXPECT_NEAR(p99->t(), p99->mean() / (p99->sd() / std::sqrt(8.0)), 1e-9);
  EXPECT_THAT(p99->note(), HasSubstr("sign-flip p"));
  const v1::MetricEvidence* p999 = FindEvidence(v, "ln_p999_did");
  ASSERT_NE(p999, nullptr);
  EXPECT_EQ(p999->outcome(), "pass");  // ~30k probes per host and period >= 20k
  EXPECT_NEAR(p999->alpha(), 0.1 * 0.005 / 2, 1e-12);
  const v1::MetricEvidence* loss = FindEvidence(v, kProbeLossEvidence);
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->outcome(), "pass");
  EXPECT_NEAR(loss->alpha(), 0.1 * 0.005 / 2, 1e-12);
  for (const char* m : {"ln_throughput_gbps_did", "ln_pfc_pause_ratio_did", "ln_cnp_per_second_did",
                        "ln_retransmits_per_second_did"}) {
    const v1::MetricEvidence* e = FindEvidence(v, m);
    ASSERT_NE(e, nullptr) << m;
    EXPECT_EQ(e->outcome(), "pass") << m;
    EXPECT_EQ(e->rack_pairs(), 8u) << m;
    EXPECT_NEAR(e->alpha(), 0.2 * 0.005 / 4 / 2, 1e-12) << m;
    EXPECT_LE(e->ratio_lower(), e->ratio()) << m;
    EXPECT_GE(e->ratio_upper(), e->ratio()) << m;
  }
}

TEST(JudgeTest, P999NotEvaluatedBelowTenTimesMinSamples) {
  sim::SimConfig c;
  c.probes_per_window = 300;  // ~9k per host and period: p99 yes, p999 no
  v1::Verdict v = Judge(FinalLook(c, 5), FinalConfig());
  EXPECT_EQ(FindEvidence(v, "ln_p999_did")->outcome(), "not_evaluated");
  EXPECT_EQ(FindEvidence(v, "ln_p99_did")->rack_pairs(), 8u);
  EXPECT_NE(v.outcome(), v1::Verdict::FAIL) << v.summary();
}

// --- Looks.

TEST(JudgeTest, InterimLooksNeverPassAndSpendLittleAlpha) {
  auto looks = sim::SimulateLooks(sim::SimConfig{}, 11);
  JudgeConfig config = sim::AllMetricsConfig();
  for (uint32_t look = 1; look <= 2; ++look) {
    config.look = look;
    v1::Verdict v = Judge(looks[look - 1], config);
    EXPECT_EQ(v.outcome(), v1::Verdict::HOLD);
    EXPECT_EQ(v.rule(), "interim_look");
    EXPECT_NEAR(FindEvidence(v, "ln_p99_did")->alpha(), 0.6 * 0.005 / 3 / 2, 1e-12);
  }
  config.look = 3;
  EXPECT_EQ(Judge(looks[2], config).outcome(), v1::Verdict::PASS);
}

TEST(JudgeTest, LargeRegressionFailsAtTheFirstLook) {
  sim::SimConfig c;
  c.canary_tail_scale = 2;
  auto looks = sim::SimulateLooks(c, 13);
  JudgeConfig config = sim::AllMetricsConfig();
  config.look = 1;
  v1::Verdict v = Judge(looks[0], config);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(v.rule(), "p99_did_t_test");
  EXPECT_THAT(v.summary(), StartsWith("FAIL: canary p99 RTT changed +"));
  const v1::MetricEvidence* p99 = FindEvidence(v, "ln_p99_did");
  EXPECT_EQ(p99->outcome(), "fail");
  EXPECT_GT(p99->ratio_lower(), 1);
  EXPECT_LT(p99->p_value(), p99->alpha());
}

TEST(JudgeTest, LookZeroSpendsNoAlphaButHardGuardsStillFail) {
  sim::SimConfig c;
  c.canary_tail_scale = 2;
  auto hosts = FinalLook(c, 17);
  JudgeConfig config = FinalConfig();
  config.look = 0;
  v1::Verdict v = Judge(hosts, config);
  EXPECT_EQ(v.rule(), "unplanned_look");
  EXPECT_EQ(FindEvidence(v, "ln_p99_did")->alpha(), 0);
  config.guard_event = true;
  EXPECT_EQ(Judge(hosts, config).rule(), "local_guard");
}

// Issue 25: the hold looks after the final one spend alpha too: a sixth of
// the budget in equal parts over the hold looks the HOLD limit allows
// (JudgeConfig::hold_looks), nothing after them, so any number of looks stays
// within the budget, and a regression that shows only then still FAILs. The
// PASS width bound's error is spent the same way: each hold look asks for a
// tighter bound than the final look did, the same one at every hold look.
TEST(JudgeTest, HoldLooksAfterTheFinalOneSpendAnEqualShare) {
  sim::SimConfig c;
  c.canary_tail_scale = 2;
  auto hosts = FinalLook(c, 17);
  double p99_alpha = 0;
  for (uint32_t look = 1; look <= 40; ++look) {
    JudgeConfig config = FinalConfig();
    config.hold_looks = 8;
    config.look = look;
    p99_alpha += FindEvidence(Judge(hosts, config), "ln_p99_did")->alpha();
  }
  EXPECT_NEAR(p99_alpha, 0.6 * 0.005, 1e-15);
  for (uint32_t extra : {1u, 2u, 8u}) {
    JudgeConfig config = FinalConfig();
    config.hold_looks = 8;
    config.look = config.looks + extra;
    v1::Verdict v = Judge(hosts, config);
    EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << extra << " " << v.summary();
    EXPECT_NEAR(FindEvidence(v, "ln_p99_did")->alpha(), 0.6 * 0.005 / 6 / 8, 1e-15);
  }
  // Past the hold looks allowed (and with none allowed) no test decides: even
  // a doubled tail only HOLDs, and the HOLD limit aborts the change.
  for (uint32_t hold_looks : {0u, 8u}) {
    JudgeConfig config = FinalConfig();
    config.hold_looks = hold_looks;
    config.look = config.looks + hold_looks + 1;
    v1::Verdict v = Judge(hosts, config);
    EXPECT_EQ(v.outcome(), v1::Verdict::HOLD) << v.summary();
    EXPECT_EQ(v.rule(), "hold_looks_spent");
    EXPECT_EQ(FindEvidence(v, "ln_p99_did")->alpha(), 0);
  }
  // The PASS bound: 1 - 0.05 * 5/6 at the final look, 1 - 0.05/6/8 at every
  // one of 8 hold looks.
  auto aa = FinalLook(sim::SimConfig{}, 3);
  double upper[3];
  for (uint32_t extra : {0u, 1u, 8u}) {
    JudgeConfig config = FinalConfig();
    config.hold_looks = 8;
    config.look = config.looks + extra;
    v1::Verdict v = Judge(aa, config);
    upper[extra == 8 ? 2 : extra] = FindEvidence(v, "ln_p99_did")->ratio_upper();
    EXPECT_THAT(
        FindEvidence(v, "ln_p99_did")->note(),
        HasSubstr(extra == 0 ? "one-sided 0.9583 bound (PASS" : "one-sided 0.999 bound (PASS"));
  }
  EXPECT_LT(upper[0], upper[1]);
  EXPECT_EQ(upper[1], upper[2]);
}

// The hold looks a policy's HOLD limit allows: one per look interval that fits
// in the limit, plus the look that finds it passed, plus one for a missed
// final look.
TEST(JudgeTest, HoldLooksAllowedFollowTheHoldLimit) {
  EXPECT_EQ(HoldLooksAllowed(900, 300, 3), 11u);  // the default limit, 3 x bake
  EXPECT_EQ(HoldLooksAllowed(30, 10, 2), 8u);     // docs/quickstart.md's policy
  EXPECT_EQ(HoldLooksAllowed(5, 10, 1), 2u);      // a limit shorter than a look interval
  EXPECT_EQ(HoldLooksAllowed(0, 10, 2), 0u);
  EXPECT_EQ(HoldLooksAllowed(30, 0, 2), 0u);
}

// A hold look may still PASS, with its tighter bound: of the A/A seeds that
// PASS at the final look, most still do on the same data at hold look 2, and
// none passes there that did not at the final look.
TEST(JudgeTest, AnExtendedLookMayStillPass) {
  sim::SimConfig c;  // A/A
  int final_passes = 0, hold_passes = 0;
  for (uint64_t seed = 20; seed < 60; ++seed) {
    auto hosts = FinalLook(c, seed);
    JudgeConfig config = FinalConfig();
    config.hold_looks = 8;
    const bool at_final = Judge(hosts, config).outcome() == v1::Verdict::PASS;
    config.look = config.looks + 2;
    const v1::Verdict v = Judge(hosts, config);
    const bool at_hold = v.outcome() == v1::Verdict::PASS;
    EXPECT_FALSE(at_hold && !at_final) << seed << " " << v.summary();
    final_passes += at_final;
    hold_passes += at_hold;
  }
  EXPECT_GE(final_passes, 30);
  EXPECT_GE(hold_passes, final_passes / 2);
  EXPECT_LE(hold_passes, final_passes);
}

TEST(JudgeTest, ToleranceAndConfidenceComeFromTheGuard) {
  sim::SimConfig c;
  c.canary_tail_scale = 1.2;
  auto hosts = FinalLook(c, 19);
  JudgeConfig config = FinalConfig();
  EXPECT_EQ(Judge(hosts, config).outcome(), v1::Verdict::FAIL);
  config.guard.set_max_p99_regression(0.5);  // +20% is tolerated
  v1::Verdict v = Judge(hosts, config);
  EXPECT_NE(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_NE(FindEvidence(v, "ln_p99_did")->outcome(), "fail");
  config.guard.set_max_p99_regression(0);
  config.guard.set_confidence(0.99);
  EXPECT_NEAR(FindEvidence(Judge(hosts, config), "ln_p99_did")->alpha(), 0.6 * 0.01 / 2, 1e-12);
  config.guard.set_min_rack_pairs(9);
  EXPECT_EQ(Judge(hosts, config).rule(), "min_rack_pairs");
}

TEST(JudgeTest, FleetIncidentInTheControlGroupHolds) {
  sim::SimConfig c;
  c.fleet_after_log_shift = std::log(1.7);
  v1::Verdict v = Judge(FinalLook(c, 23), FinalConfig());
  EXPECT_EQ(v.outcome(), v1::Verdict::HOLD) << v.summary();
  EXPECT_EQ(v.rule(), "control_shift");
}

// --- Host admission and pairing.

TEST(JudgeTest, DroppedHostsCarryTheirReasons) {
  auto hosts = FinalLook(sim::SimConfig{}, 29);
  hosts[0].after.windows_present = hosts[0].after.windows_expected / 2;  // rack0 canary
  hosts[3].before.probes_lost = hosts[3].before.probes_sent / 10;        // rack1 control
  hosts.push_back(hosts[4]);                                             // a duplicate id
  HostInput lonely = hosts[6];
  lonely.host_id = "lonely";
  lonely.rack = "rack-without-control";
  hosts.push_back(lonely);
  v1::Verdict v = Judge(hosts, FinalConfig());
  EXPECT_THAT(v.dropped_hosts(),
              ::testing::IsSupersetOf({HasSubstr("rack0-canary0: 15 of 30 windows present after"),
                                       HasSubstr("rack1-control1: 10.0% of probes lost before"),
                                       HasSubstr("rack2-canary0: host id given more than once"),
                                       HasSubstr("lonely: rack rack-without-control has no "
                                                 "control host")}))
      << v.DebugString();
  // rack0 and rack1 lost a side, rack2 both copies of its canary: 5 pairs remain.
  EXPECT_EQ(FindEvidence(v, "ln_p99_did")->rack_pairs(), 5u);
  EXPECT_EQ(v.outcome(), v1::Verdict::HOLD);
}

TEST(JudgeTest, RackAveragesOverItsRemainingHosts) {
  sim::SimConfig c;
  c.canary_per_rack = 2;
  c.control_per_rack = 2;
  auto hosts = FinalLook(c, 31);
  // Drop one canary of every rack: each rack keeps a canary and two controls.
  for (HostInput& h : hosts) {
    if (h.canary && h.host_id.find("canary0") != std::string::npos) h.after.rtt.Clear();
  }
  v1::Verdict v = Judge(hosts, FinalConfig());
  EXPECT_EQ(v.dropped_hosts_size(), 8);
  EXPECT_EQ(FindEvidence(v, "ln_p99_did")->rack_pairs(), 8u);
  EXPECT_EQ(v.groups(0).hosts(), 8u);   // canary
  EXPECT_EQ(v.groups(1).hosts(), 16u);  // control
  EXPECT_EQ(v.outcome(), v1::Verdict::PASS) << v.summary();
}

// --- Hard guards and guard metrics.

TEST(JudgeGuardTest, LocalGuardEventFails) {
  JudgeConfig config = FinalConfig();
  config.guard_event = true;
  config.guard_event_detail = "host rack3-canary0 restored its parameters after a pause storm";
  v1::Verdict v = Judge(FinalLook(sim::SimConfig{}, 37), config);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(v.rule(), "local_guard");
  EXPECT_THAT(v.summary(), HasSubstr("rack3-canary0"));
  // Even with no usable data at all.
  EXPECT_EQ(Judge({}, config).rule(), "local_guard");
}

TEST(JudgeGuardTest, PauseRatioAboveTheHardLimitOnACanaryFails) {
  auto hosts = FinalLook(sim::SimConfig{}, 41);
  JudgeConfig config = FinalConfig();
  config.guard.set_max_pfc_pause_ratio(0.01);
  EXPECT_EQ(Judge(hosts, config).outcome(), v1::Verdict::PASS);
  // A control host above the limit is not the change's doing.
  HostInput& control = hosts[1];
  ASSERT_FALSE(control.canary);
  control.after.pause_us[3] = static_cast<uint64_t>(0.05 * control.after.covered_seconds * 1e6);
  EXPECT_EQ(Judge(hosts, config).outcome(), v1::Verdict::PASS);
  HostInput& canary = hosts[0];
  ASSERT_TRUE(canary.canary);
  canary.after.pause_us[5] = static_cast<uint64_t>(0.02 * canary.after.covered_seconds * 1e6);
  v1::Verdict v = Judge(hosts, config);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(v.rule(), "guard:pfc_pause_ratio");
  EXPECT_THAT(v.summary(), HasSubstr(canary.host_id));
}

TEST(JudgeGuardTest, RetransmitsAboveTheHardLimitOnACanaryFail) {
  auto hosts = FinalLook(sim::SimConfig{}, 43);
  JudgeConfig config = FinalConfig();
  config.guard.set_max_retransmits_per_second(100);
  EXPECT_EQ(Judge(hosts, config).outcome(), v1::Verdict::PASS);
  hosts[2].after.retransmits = static_cast<uint64_t>(150 * hosts[2].after.covered_seconds);
  ASSERT_TRUE(hosts[2].canary);
  v1::Verdict v = Judge(hosts, config);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(v.rule(), "guard:retransmits_per_second");
}

// A x1.5 CNP rate on the canaries, against a policy constraint that tolerates
// no increase: caught at >= 95% over fixed seeds; the A/A counterpart rarely FAILs.
TEST(JudgeGuardTest, CnpRateTimesOnePointFiveIsCaught) {
  JudgeConfig config;
  v1::Constraint cnp;
  cnp.set_metric("cnp_per_second");
  cnp.set_max_ratio(1.0);
  config.constraints.push_back(cnp);
  sim::SimConfig c;
  c.canary_cnp_scale = 1.5;
  sim::Tally t = sim::RunSchedule(c, config, 200, 600001);
  std::cout << sim::Describe("CNP x1.5", t) << "\n";
  EXPECT_GE(t.fail_rules["constraint:cnp_per_second"], 190);
  sim::SimConfig aa;
  sim::Tally a = sim::RunSchedule(aa, config, 200, 700001);
  std::cout << sim::Describe("CNP A/A", a) << "\n";
  EXPECT_EQ(a.fail_rules["constraint:cnp_per_second"], 0);
}

TEST(JudgeGuardTest, ThroughputDropIsCaughtAndAFewEventsNeverFail) {
  JudgeConfig config = FinalConfig();
  auto hosts = FinalLook(sim::SimConfig{}, 47);
  // 0 -> 3 CNPs on every canary, none on control: significant, but below the
  // absolute floor.
  for (HostInput& h : hosts) {
    h.before.cnp = 0;
    h.after.cnp = h.canary ? 3 : 0;
  }
  v1::Verdict v = Judge(hosts, config);
  EXPECT_EQ(v.outcome(), v1::Verdict::PASS) << v.summary();
  EXPECT_THAT(FindEvidence(v, "ln_cnp_per_second_did")->note(),
              HasSubstr("below the absolute floor"));
  // Canary throughput halved.
  for (HostInput& h : hosts) {
    if (h.canary) h.after.tx_bytes /= 2;
  }
  v = Judge(hosts, config);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(v.rule(), "constraint:throughput_gbps");
  const v1::MetricEvidence* tp = FindEvidence(v, "ln_throughput_gbps_did");
  EXPECT_EQ(tp->outcome(), "fail");
  EXPECT_LT(tp->ratio_upper(), 0.9);  // the bound the test used
}

TEST(JudgeGuardTest, AbsoluteConstraintBoundFailsOnlyWhenControlMeetsIt) {
  JudgeConfig config = FinalConfig();
  v1::Constraint pause;
  pause.set_metric("pfc_pause_ratio");
  pause.set_max(0.002);
  config.constraints = {pause};
  auto hosts = FinalLook(sim::SimConfig{}, 53);
  EXPECT_NE(Judge(hosts, config).outcome(), v1::Verdict::FAIL);
  for (HostInput& h : hosts) {
    if (h.canary) h.after.pause_us[3] = static_cast<uint64_t>(0.01 * h.after.covered_seconds * 1e6);
  }
  v1::Verdict v = Judge(hosts, config);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(v.rule(), "constraint_bound:pfc_pause_ratio");
  for (HostInput& h : hosts) {
    if (!h.canary)
      h.after.pause_us[3] = static_cast<uint64_t>(0.01 * h.after.covered_seconds * 1e6);
  }
  EXPECT_NE(Judge(hosts, config).rule(), "constraint_bound:pfc_pause_ratio");
}

TEST(JudgeGuardTest, PointEstimateBeyondToleranceIsNamedEvenWhenTheJudgePasses) {
  v1::Constraint tput;
  tput.set_metric("throughput_gbps");
  tput.set_max_ratio(1.03);
  EXPECT_NEAR(ToleranceOf(tput).ratio, 1 / 1.03, 1e-12);
  EXPECT_FALSE(ToleranceOf(tput).higher_is_worse);
  v1::Constraint cnp;
  cnp.set_metric("cnp_per_second");
  EXPECT_DOUBLE_EQ(ToleranceOf(cnp).ratio, 1.5);  // the judge's default
  v1::Constraint odd;
  odd.set_metric("latency_of_the_moon");
  EXPECT_TRUE(std::isnan(ToleranceOf(odd).ratio));

  JudgeConfig config = FinalConfig();
  config.constraints = {tput, odd};
  auto hosts = FinalLook(sim::SimConfig{}, 67);
  v1::Verdict v = Judge(hosts, config);
  ASSERT_NE(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_EQ(ConstraintPointExceeded(v, config.constraints), "");
  // Every canary loses 8% of its throughput: outside a 3% tolerance,
  // whether or not the judge can call it significant.
  for (HostInput& h : hosts) {
    if (h.canary) h.after.tx_bytes = static_cast<uint64_t>(h.after.tx_bytes * 0.92);
  }
  v = Judge(hosts, config);
  const v1::MetricEvidence* tp = FindEvidence(v, "ln_throughput_gbps_did");
  ASSERT_NE(tp, nullptr);
  EXPECT_LT(tp->ratio(), 1 / 1.03);
  const std::string why = ConstraintPointExceeded(v, config.constraints);
  EXPECT_THAT(why, StartsWith("throughput_gbps canary/control 0."));
  EXPECT_THAT(why, HasSubstr("beyond the tolerated 0.971"));
  // Within the tolerance: nothing named.
  tput.set_max_ratio(1.5);
  EXPECT_EQ(ConstraintPointExceeded(v, {tput}), "");
}

TEST(JudgeGuardTest, UnknownConstraintMetricIsNotEvaluated) {
  JudgeConfig config = FinalConfig();
  v1::Constraint odd;
  odd.set_metric("latency_of_the_moon");
  config.constraints = {odd};
  v1::Verdict v = Judge(FinalLook(sim::SimConfig{}, 59), config);
  EXPECT_EQ(FindEvidence(v, "ln_latency_of_the_moon_did")->outcome(), "not_evaluated");
}

// --- Determinism.

TEST(JudgeTest, IdenticalInputGivesAnIdenticalVerdict) {
  sim::SimConfig c;
  c.canary_tail_scale = 1.1;
  auto hosts = FinalLook(c, 61);
  JudgeConfig config = FinalConfig();
  config.now_unix_nanos = 1234;
  config.stage = 2;
  std::string a, b, shuffled;
  v1::Verdict first = Judge(hosts, config);
  ASSERT_TRUE(first.SerializeToString(&a));
  ASSERT_TRUE(Judge(hosts, config).SerializeToString(&b));
  EXPECT_EQ(a, b);
  std::reverse(hosts.begin(), hosts.end());  // input order does not matter either
  ASSERT_TRUE(Judge(hosts, config).SerializeToString(&shuffled));
  EXPECT_EQ(a, shuffled);
  EXPECT_EQ(first.unix_nanos(), 1234);
  EXPECT_EQ(first.stage(), 2u);
  // And the simulator itself is a function of its seed.
  std::string again;
  ASSERT_TRUE(Judge(FinalLook(c, 61), config).SerializeToString(&again));
  EXPECT_EQ(a, again);
}

// A canary host whose every probe took `before_us`, then `after_us`.
HostInput OwnShiftHost(const std::string& id, bool canary, double before_us, double after_us,
                       uint64_t probes) {
  HostInput h;
  h.host_id = id;
  h.rack = "r1";
  h.canary = canary;
  h.before.rtt.Insert(before_us * 1e-6, probes);
  h.after.rtt.Insert(after_us * 1e-6, probes);
  return h;
}

v1::Verdict ControlShiftHold() {
  v1::Verdict v;
  v.set_outcome(v1::Verdict::HOLD);
  v.set_rule("control_shift");
  v.set_summary("HOLD: control p99 itself moved +60.0%");
  return v;
}

// The canary's own shift is a mean over canary hosts with enough probes;
// control hosts and thin canary hosts do not count; control's own shift is
// reported beside it. At kControlShiftRatio it turns the control_shift HOLD
// into fabric_regression; below it, and for any other verdict, the verdict
// stands.
TEST(CanaryOwnShiftTest, FailsAControlShiftHoldOnlyWhenTheCanaryRoseAsMuch) {
  const std::vector<HostInput> risen = {
      OwnShiftHost("c1", true, 10, 16, kCanaryOwnShiftMinProbes),
      OwnShiftHost("c2", true, 10, 16, kCanaryOwnShiftMinProbes),
      OwnShiftHost("thin", true, 10, 100, kCanaryOwnShiftMinProbes - 1),
      OwnShiftHost("k1", false, 10, 12, kCanaryOwnShiftMinProbes),
      OwnShiftHost("thin-k", false, 10, 100, kCanaryOwnShiftMinProbes - 1)};
  v1::Verdict v = ControlShiftHold();
  AddCanaryOwnShift(risen, &v);
  const v1::MetricEvidence* m = FindEvidence(v, kCanaryOwnShiftEvidence);
  ASSERT_NE(m, nullptr);
  EXPECT_NEAR(m->ratio(), 1.6, 0.05);
  EXPECT_THAT(m->note(), HasSubstr("over 2 canary hosts"));
  const v1::MetricEvidence* k = FindEvidence(v, kControlOwnShiftEvidence);
  ASSERT_NE(k, nullptr);
  EXPECT_NEAR(k->ratio(), 1.2, 0.05);
  EXPECT_THAT(k->note(), HasSubstr("over 1 control hosts"));
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(v.rule(), "fabric_regression");
  EXPECT_THAT(v.summary(), HasSubstr("control p99 itself moved"));

  const std::vector<HostInput> mild = {OwnShiftHost("c1", true, 10, 12, 500),
                                       OwnShiftHost("k1", false, 10, 16, 500)};
  v = ControlShiftHold();
  AddCanaryOwnShift(mild, &v);
  EXPECT_EQ(v.outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(v.rule(), "control_shift");
  ASSERT_NE(FindEvidence(v, kCanaryOwnShiftEvidence), nullptr);

  v = ControlShiftHold();
  v.set_rule("interim_look");
  AddCanaryOwnShift(risen, &v);
  EXPECT_EQ(v.outcome(), v1::Verdict::HOLD);

  // No canary host with enough probes: no evidence, nothing changed.
  v = ControlShiftHold();
  AddCanaryOwnShift({OwnShiftHost("thin", true, 10, 100, 10)}, &v);
  EXPECT_EQ(FindEvidence(v, kCanaryOwnShiftEvidence), nullptr);
  EXPECT_EQ(v.rule(), "control_shift");
}

// Issue 25 item 4: a fleet incident that moves control as much as the canary
// HOLDs instead of FAILing. Canary and control rose alike over the bake
// (x1.6 and x1.7); whether the canary had risen already in the step's first
// part (the onset, pooled over canary hosts) decides: a change acts once
// applied, an incident that began later had not shown then.
TEST(CanaryOwnShiftTest, ARiseThatBeganAfterTheOnsetHoldsAsAFleetIncident) {
  auto hosts = [](double onset_us, uint64_t onset_probes) {
    std::vector<HostInput> h = {
        OwnShiftHost("c1", true, 10, 16, 500), OwnShiftHost("c2", true, 10, 16, 500),
        OwnShiftHost("k1", false, 10, 17, 500), OwnShiftHost("k2", false, 10, 17, 500)};
    for (HostInput& in : h) {
      // Control's onset is never read: an incident moves it as well.
      in.onset.rtt.Insert((in.canary ? onset_us : 30) * 1e-6, onset_probes);
    }
    return h;
  };
  v1::Verdict v = ControlShiftHold();
  AddCanaryOwnShift(hosts(10.5, 60), &v);  // +5% in the onset, 120 probes pooled
  EXPECT_EQ(v.outcome(), v1::Verdict::HOLD) << v.summary();
  EXPECT_EQ(v.rule(), "fleet_shift");
  EXPECT_THAT(v.summary(), HasSubstr("it began later, as a fleet incident's does"));
  EXPECT_NEAR(FindEvidence(v, kCanaryOwnShiftEvidence)->ratio(), 1.6, 0.05);
  EXPECT_NEAR(FindEvidence(v, kControlOwnShiftEvidence)->ratio(), 1.7, 0.05);
  const v1::MetricEvidence* onset = FindEvidence(v, kCanaryOnsetShiftEvidence);
  ASSERT_NE(onset, nullptr);
  EXPECT_NEAR(onset->ratio(), 1.05, 0.02);
  EXPECT_THAT(onset->note(), HasSubstr("2 canary hosts' 120 probes"));

  v = ControlShiftHold();
  AddCanaryOwnShift(hosts(16, 60), &v);  // risen at once: the change
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(v.rule(), "fabric_regression");
  EXPECT_NEAR(FindEvidence(v, kCanaryOnsetShiftEvidence)->ratio(), 1.6, 0.05);

  // Below x1.5 in the onset but more than half the period's rise (ln 0.34
  // of 0.47): the rise was there from the start.
  v = ControlShiftHold();
  AddCanaryOwnShift(hosts(14, 60), &v);
  EXPECT_EQ(v.rule(), "fabric_regression") << v.summary();

  v = ControlShiftHold();
  AddCanaryOwnShift(hosts(10.5, 40), &v);  // 80 probes pooled: cannot clear it
  EXPECT_EQ(v.rule(), "fabric_regression");
  EXPECT_THAT(v.summary(), HasSubstr("onset not measured: 80 probes"));
  EXPECT_EQ(FindEvidence(v, kCanaryOnsetShiftEvidence), nullptr);

  // No onset data (a look whose period is the onset itself): as before.
  std::vector<HostInput> no_onset = hosts(10.5, 60);
  for (HostInput& in : no_onset) in.onset = HostPeriod();
  v = ControlShiftHold();
  AddCanaryOwnShift(no_onset, &v);
  EXPECT_EQ(v.rule(), "fabric_regression");
  EXPECT_THAT(v.summary(), HasSubstr("this look's period is the onset itself"));
}

// Issue 25 item 5: what a design can show, from an A/A split of its own
// telemetry. On the simulated fleet (8 rack pairs) the judge FAILs +20% p99
// 99.5% of the time (judge_power_test), so the 80% detectable effect is below
// +20% and above the tolerance; a noisier fleet shows less, and too few racks
// show nothing.
TEST(DesignPowerTest, TheDetectableEffectComesFromTheFleetsOwnSpread) {
  JudgeConfig config = sim::AllMetricsConfig();
  config.looks = 3;
  DesignPower quiet = EstimateDesignPower(FinalLook(sim::SimConfig{}, 5), config);
  ASSERT_TRUE(quiet.ok) << quiet.note;
  EXPECT_EQ(quiet.units, 8);
  EXPECT_GT(quiet.sd, 0);
  EXPECT_GT(quiet.mde_ratio, 1.0);
  EXPECT_LT(quiet.mde_ratio, 1.2);
  EXPECT_GT(quiet.pass_bound_ratio, 1.0);
  EXPECT_LT(quiet.pass_bound_ratio, quiet.mde_ratio);
  EXPECT_NEAR(quiet.pass_margin_ratio, 1 + sim::kSimPassMargin, 1e-12);
  EXPECT_THAT(quiet.note, HasSubstr("8 rack pairs"));
  EXPECT_THAT(quiet.note, HasSubstr("80% of the time"));
  EXPECT_THAT(quiet.note, Not(HasSubstr("never PASS")));
  std::cout << "simulated fleet: " << quiet.note << "\n";
  // The policy default, +5%: the note compares the same bound with it.
  JudgeConfig by_default = config;
  by_default.guard.clear_pass_max_ucb_regression();
  const DesignPower tight = EstimateDesignPower(FinalLook(sim::SimConfig{}, 5), by_default);
  EXPECT_NEAR(tight.pass_margin_ratio, 1.05, 1e-12);
  EXPECT_NEAR(tight.pass_bound_ratio, quiet.pass_bound_ratio, 1e-9);
  std::cout << "at the default margin: " << tight.note << "\n";

  sim::SimConfig noisy;
  noisy.ar_sd = 0.2;  // each host's own window-to-window wander
  DesignPower loud = EstimateDesignPower(FinalLook(noisy, 5), config);
  ASSERT_TRUE(loud.ok) << loud.note;
  EXPECT_GT(loud.sd, quiet.sd);
  EXPECT_GT(loud.mde_ratio, quiet.mde_ratio);
  config.guard.set_pass_max_ucb_regression(0.01);
  EXPECT_THAT(EstimateDesignPower(FinalLook(noisy, 5), config).note, HasSubstr("never PASS"));

  config.guard.set_min_rack_pairs(9);
  DesignPower thin = EstimateDesignPower(FinalLook(sim::SimConfig{}, 5), config);
  EXPECT_FALSE(thin.ok);
  EXPECT_THAT(thin.note, HasSubstr("cannot decide"));
}

}  // namespace
}  // namespace rocetune::controller

namespace rocetune::controller {
namespace {

// `s` with every value multiplied by `factor` (each rank at its bucket's
// middle).
QuantileSketch Scaled(const QuantileSketch& s, double factor) {
  QuantileSketch out(s.relative_accuracy());
  for (uint64_t rank = 1; rank <= s.count(); ++rank) {
    const QuantileSketch::RankBucket b = s.BucketOfRank(rank);
    out.Insert(factor * (b.lower + b.upper) / 2);
  }
  return out;
}

// An A/A final look whose hosts also report a job signal (their probe RTTs
// times 100: a step of a few milliseconds); then the canary's probes, or its
// job steps, twice as slow since the change.
std::vector<HostInput> WithJob(bool slower_probes, bool slower_job) {
  std::vector<HostInput> hosts = FinalLook(sim::SimConfig{}, 3);
  for (HostInput& h : hosts) {
    h.before.job = Scaled(h.before.rtt, 100);
    h.after.job = Scaled(h.after.rtt, h.canary && slower_job ? 200 : 100);
    if (h.canary && slower_probes) h.after.rtt = Scaled(h.after.rtt, 2);
  }
  return hosts;
}

JudgeConfig ObjectiveConfig(v1::Objective::Metric objective, const std::string& constraint = "") {
  JudgeConfig config = FinalConfig();
  config.objective = objective;
  if (!constraint.empty()) {
    v1::Constraint c;
    c.set_metric(constraint);
    config.constraints.push_back(c);
  }
  return config;
}

// Issue 24 item 2: STEP_TIME_P99 judges the job signal, not the probes. A
// change that doubles the canary's job steps FAILs under it and passes the
// probes' p99 test; one that doubles only the canary's probe RTTs does the
// reverse. Each figure also works as the other's constraint.
TEST(JudgeObjectiveTest, TheObjectiveDecidesWhichSamplesTheLatencyTestsRead) {
  const auto slower_job = WithJob(false, true);
  const auto slower_probes = WithJob(true, false);
  const auto step = v1::Objective::STEP_TIME_P99;
  const auto probe = v1::Objective::PROBE_RTT_P99;

  v1::Verdict v = Judge(slower_job, ObjectiveConfig(step));
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_EQ(v.rule(), "p99_did_t_test");
  EXPECT_EQ(v.samples(), "job_step_time");
  EXPECT_NEAR(FindEvidence(v, kP99Evidence)->ratio(), 2.0, 0.1);
  EXPECT_EQ(v.dropped_hosts_size(), 0) << v.DebugString();
  // The canary's own before/after shift (a campaign trial's objective) reads
  // the same samples.
  AddCanaryOwnShift(slower_job, &v, step);
  EXPECT_NEAR(FindEvidence(v, kCanaryOwnShiftEvidence)->ratio(), 2.0, 0.1);
  v1::Verdict probes_shift;
  AddCanaryOwnShift(slower_job, &probes_shift, probe);
  EXPECT_NEAR(FindEvidence(probes_shift, kCanaryOwnShiftEvidence)->ratio(), 1.0, 0.1);
  v = Judge(slower_job, ObjectiveConfig(probe));
  EXPECT_NE(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_EQ(v.samples(), "probe_rtt");
  EXPECT_NEAR(FindEvidence(v, kP99Evidence)->ratio(), 1.0, 0.1);
  v = Judge(slower_job, ObjectiveConfig(probe, "step_time_p99"));
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_EQ(v.rule(), "constraint:step_time_p99");

  v = Judge(slower_probes, ObjectiveConfig(probe));
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_EQ(v.rule(), "p99_did_t_test");
  v = Judge(slower_probes, ObjectiveConfig(step));
  EXPECT_NE(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_NEAR(FindEvidence(v, kP99Evidence)->ratio(), 1.0, 0.1);
  v = Judge(slower_probes, ObjectiveConfig(step, "probe_rtt_p99"));
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_EQ(v.rule(), "constraint:probe_rtt_p99");

  // Neither moved: the step-time objective can PASS, and says what it read.
  v = Judge(WithJob(false, false), ObjectiveConfig(step, "probe_rtt_p99"));
  EXPECT_EQ(v.outcome(), v1::Verdict::PASS) << v.summary();
  EXPECT_THAT(v.summary(), HasSubstr("p99 job step time"));
  // The groups show the job's samples: the canary's p99 is its probes' times 100.
  const std::vector<HostInput> same = WithJob(false, false);
  QuantileSketch canary_probes;
  for (const HostInput& h : same) {
    if (h.canary) {
      ASSERT_TRUE(canary_probes.Merge(h.after.rtt).ok());
    }
  }
  ASSERT_EQ(v.groups(0).group(), "canary");
  EXPECT_EQ(v.dropped_hosts_size(), 0);
  EXPECT_NEAR(v.groups(0).p99_seconds(), 100 * canary_probes.Quantile(0.99),
              100 * canary_probes.Quantile(0.99) * 0.05);
}

// A job-signal objective with no job reports HOLDs and says why; thin job
// data drops hosts naming the job's samples.
TEST(JudgeObjectiveTest, NoJobSignalHoldsWithThatReason) {
  std::vector<HostInput> hosts = FinalLook(sim::SimConfig{}, 3);
  v1::Verdict v = Judge(hosts, ObjectiveConfig(v1::Objective::STEP_TIME_P99));
  EXPECT_EQ(v.outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(v.rule(), "objective_no_data");
  EXPECT_THAT(v.summary(), HasSubstr("no host reported the policy's job series"));
  for (HostInput& h : hosts) {
    h.before.job.Insert(0.01, 5);
    h.after.job.Insert(0.01, 5);
  }
  v = Judge(hosts, ObjectiveConfig(v1::Objective::STEP_TIME_P99));
  EXPECT_EQ(v.outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(v.rule(), "min_rack_pairs");
  EXPECT_TRUE(AnyDropMentions(v, "5 job step times before")) << v.DebugString();
}

}  // namespace
}  // namespace rocetune::controller
