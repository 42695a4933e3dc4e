// The step evaluator's order of rules, on changes whose last stage leaves no
// control (so no telemetry is needed): what is due before and at the final
// look, and where the fleet guard joins.
#include "controller/rollout/step_evaluator.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "controller/rollout/baseline_record.h"
#include "controller/rollout/judge_inputs.h"
#include "gtest/gtest.h"
#include "tests/testing/report_builders.h"

namespace rocetune::controller {
namespace {

v1::Change ChangeAt(v1::ChangeState state, uint32_t stage, bool canary_only,
                    const std::vector<std::pair<v1::HostTarget::Role, uint32_t>>& hosts) {
  v1::Change c;
  c.set_id("c-1");
  c.set_state(state);
  c.set_stage(stage);
  c.set_canary_only(canary_only);
  int i = 0;
  for (const auto& [role, host_stage] : hosts) {
    v1::HostTarget* h = c.add_hosts();
    ++i;
    h->set_host_id(absl::StrCat("h", i));
    h->set_rack(absl::StrCat("r", i));
    h->set_role(role);
    h->set_stage(host_stage);
  }
  return c;
}

using Counters = std::vector<std::tuple<const char*, int, uint64_t>>;  // name, priority, delta

// An empty report of second `second` of the step starting at `step_start`
// (seq second + 1).
v1::Report SecondReport(absl::Time step_start, int second) {
  v1::Report r;
  r.set_seq(static_cast<uint64_t>(second + 1));
  const absl::Time start = step_start + absl::Seconds(second);
  r.set_start_unix_nanos(absl::ToUnixNanos(start));
  r.set_end_unix_nanos(absl::ToUnixNanos(start + absl::Seconds(1)));
  return r;
}

// Host `host`'s report of second `second` of the step starting at `step_start`
// (arrived half a second after it), with `counters` on mlx5_0 port 1.
absl::Status AddSecondReport(TelemetryStore& telemetry, const std::string& host,
                             absl::Time step_start, int second, const Counters& counters = {}) {
  v1::Report r = SecondReport(step_start, second);
  const absl::Time start = step_start + absl::Seconds(second);
  for (const auto& [name, prio, delta] : counters) {
    ::rocetune::testing::AddCounter(&r, name, prio, delta)
        ->set_rate_per_second(static_cast<double>(delta));
  }
  return telemetry.ForHost(host)->AddReport(r, start + absl::Milliseconds(500));
}

// Issue 24 item 2: the judge's job sketch is the policy's series: op
// objective.op of job objective.job (every job when empty), none without an
// op; it survives the store's baseline record.
TEST(JudgeInputsTest, ToHostPeriodTakesTheObjectivesJobSeries) {
  PeriodAggregate a;
  a.jobs[{"run3", "allreduce"}].seconds.Insert(1e-3, 10);
  a.jobs[{"run4", "allreduce"}].seconds.Insert(2e-3, 5);
  a.jobs[{"run3", "step"}].seconds.Insert(0.5, 7);
  auto events = [&a](const std::string& job, const std::string& op) {
    v1::Objective o;
    o.set_metric(v1::Objective::STEP_TIME_P99);
    o.set_job(job);
    o.set_op(op);
    return ToHostPeriod(a, 1, o).job.count();
  };
  EXPECT_EQ(events("", "allreduce"), 15u);
  EXPECT_EQ(events("run3", "allreduce"), 10u);
  EXPECT_EQ(events("run4", "step"), 0u);
  EXPECT_EQ(events("", "step"), 7u);
  EXPECT_EQ(events("", ""), 0u);
  EXPECT_EQ(ToHostPeriod(a, 1).job.count(), 0u);

  StepBaselines b;
  v1::Objective o;
  o.set_op("allreduce");
  b.hosts["h1"] = ToHostPeriod(a, 1, o);
  b.fleet.hosts["h1"] = b.hosts["h1"];
  absl::StatusOr<StepBaselines> back = FromRecord(ToRecord("c-1", b));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->hosts.at("h1").job.count(), 15u);
  EXPECT_DOUBLE_EQ(back->hosts.at("h1").job.Quantile(0.99), b.hosts["h1"].job.Quantile(0.99));
  EXPECT_EQ(back->fleet.hosts.at("h1").job.count(), 15u);
}

class StepEvaluatorTest : public ::testing::Test {
 protected:
  StepLook LookAt(const v1::Change& c, uint32_t look, uint32_t looks) {
    StepLook in;
    in.change = &c;
    in.after_start = absl::FromUnixSeconds(1'700'000'000);
    in.baseline = &baseline_;
    in.look = look;
    in.looks = looks;
    in.now = in.after_start + absl::Seconds(60);
    return in;
  }
  TelemetryOptions telemetry_options_;
  TelemetryStore telemetry_{TelemetryOptions{}};
  StepEvaluator evaluator_{&telemetry_, absl::Milliseconds(500)};
  std::map<std::string, HostPeriod> baseline_;
};

TEST_F(StepEvaluatorTest, AControlIsAHostChangedOnlyInALaterStage) {
  using R = v1::HostTarget;
  EXPECT_TRUE(
      StepEvaluator::HasControl(ChangeAt(v1::CANARY, 0, false, {{R::CANARY, 0}, {R::CONTROL, 1}})));
  // In stage 1, the stage-1 control runs the change: nothing is left.
  EXPECT_FALSE(
      StepEvaluator::HasControl(ChangeAt(v1::STAGE, 1, false, {{R::CANARY, 0}, {R::CONTROL, 1}})));
  EXPECT_TRUE(StepEvaluator::HasControl(
      ChangeAt(v1::STAGE, 1, false, {{R::CANARY, 0}, {R::CONTROL, 1}, {R::CONTROL, 2}})));
  EXPECT_FALSE(StepEvaluator::HasControl(ChangeAt(v1::CANARY, 0, false, {{R::CANARY, 0}})));
}

TEST_F(StepEvaluatorTest, WithoutAControlNothingIsDueBeforeTheFinalLook) {
  const v1::Change c =
      ChangeAt(v1::STAGE, 1, false, {{v1::HostTarget::CANARY, 0}, {v1::HostTarget::CONTROL, 1}});
  EXPECT_TRUE(evaluator_.Look(LookAt(c, 1, 3)).empty());
  EXPECT_TRUE(evaluator_.Look(LookAt(c, 2, 3)).empty());
}

TEST_F(StepEvaluatorTest, AtTheFinalLookNoControlLeftPassesAndTheFleetGuardFollows) {
  const v1::Change c =
      ChangeAt(v1::STAGE, 1, false, {{v1::HostTarget::CANARY, 0}, {v1::HostTarget::CONTROL, 1}});
  // No fleet baseline was recorded: the fleet guard cannot pass the step.
  const std::vector<v1::Verdict> v = evaluator_.Look(LookAt(c, 3, 3));
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].outcome(), v1::Verdict::PASS);
  EXPECT_EQ(v[0].rule(), "no_control_left");
  EXPECT_EQ(v[0].look(), 3u);
  EXPECT_EQ(v[1].outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(v[1].rule(), "fleet_data");
  EXPECT_EQ(v[1].look(), 3u);
  EXPECT_EQ(v[1].looks(), 3u);
}

// Issue 25: the judge spends its hold-look budget over the hold looks the
// policy's HOLD limit allows (30 s at a look every 5 s: 8), so a look past
// them decides nothing, whatever its data.
TEST_F(StepEvaluatorTest, HoldLooksPastThePolicysHoldLimitDecideNothing) {
  const v1::Change c =
      ChangeAt(v1::CANARY, 0, false, {{v1::HostTarget::CANARY, 0}, {v1::HostTarget::CONTROL, 1}});
  StepLook in = LookAt(c, 2 + 8, 2);
  in.policy.mutable_rollout()->set_bake_seconds(10);
  in.policy.mutable_guard()->set_max_hold_seconds(30);
  std::vector<v1::Verdict> v = evaluator_.Look(in);
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v[0].rule(), "min_rack_pairs");  // no data: HOLD, as at the final look
  in.look = 2 + 9;
  v = evaluator_.Look(in);
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v[0].outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(v[0].rule(), "hold_looks_spent") << v[0].summary();
}

// The fleet's other p99 series (the job's under a probe objective with an
// op) is merged only when a constraint of the policy names it: the guard
// reads it for nothing else.
TEST_F(StepEvaluatorTest, TheOtherP99IsMergedOnlyForAConstraintOnIt) {
  const v1::Change c =
      ChangeAt(v1::STAGE, 1, false, {{v1::HostTarget::CANARY, 0}, {v1::HostTarget::CONTROL, 1}});
  const absl::Time start = absl::FromUnixSeconds(1'700'000'000);
  for (const char* host : {"h1", "h2"}) {
    for (int second = 0; second < 4; ++second) {
      v1::Report r = SecondReport(start, second);
      const absl::Time at = start + absl::Seconds(second);
      v1::JobTiming* j = r.add_jobs();
      j->set_job("run1");
      j->set_op("incast");
      QuantileSketch seconds;
      seconds.Insert(2e-3, 25);
      seconds.ToProto(j->mutable_seconds());
      ASSERT_TRUE(telemetry_.ForHost(host)->AddReport(r, at + absl::Milliseconds(500)).ok());
    }
  }
  v1::Policy policy;
  policy.mutable_objective()->set_op("incast");
  const absl::Time to = start + absl::Seconds(4);
  const FleetPeriod without = evaluator_.FleetPeriods(c, start, to, 4, policy);
  EXPECT_EQ(without.other_metric, "");
  EXPECT_TRUE(without.other.empty());

  v1::Constraint* job = policy.add_constraints();
  job->set_metric("step_time_p99");
  job->set_max_ratio(1.1);
  const FleetPeriod with = evaluator_.FleetPeriods(c, start, to, 4, policy);
  EXPECT_EQ(with.other_metric, "step_time_p99");
  EXPECT_EQ(with.other.count(), 200u);  // 2 hosts x 4 s x 25 events
  const std::vector<v1::Constraint> constraints(policy.constraints().begin(),
                                                policy.constraints().end());
  EXPECT_EQ(OtherP99Constraint(constraints, with), &constraints[0]);

  // Without an op the probe objective has no job series to hold.
  policy.mutable_objective()->clear_op();
  EXPECT_TRUE(evaluator_.FleetPeriods(c, start, to, 4, policy).other.empty());
}

// A trial has a fleet baseline only when its policy holds the other p99
// series (RolloutManager takes it then); without one it is not fleet-checked.
TEST_F(StepEvaluatorTest, ATrialWithoutAFleetBaselineIsNotFleetGuarded) {
  const v1::Change c = ChangeAt(v1::CANARY, 0, true, {{v1::HostTarget::CANARY, 0}});
  const std::vector<v1::Verdict> v = evaluator_.Look(LookAt(c, 2, 2));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rule(), "no_control_left");
}

TEST_F(StepEvaluatorTest, AFleetGuardWithoutHostDataDoesNotPass) {
  const v1::Change c =
      ChangeAt(v1::STAGE, 1, false, {{v1::HostTarget::CANARY, 0}, {v1::HostTarget::CONTROL, 1}});
  // A fleet baseline with no data: the guard has nothing to pass on.
  const FleetPeriod empty;
  StepLook in = LookAt(c, 3, 3);
  in.fleet_baseline = &empty;
  const std::vector<v1::Verdict> v = evaluator_.Look(in);
  ASSERT_EQ(v.size(), 2u) << (v.empty() ? "" : v.back().DebugString());
  EXPECT_NE(v[1].outcome(), v1::Verdict::PASS) << v[1].DebugString();
}

// Issue 25: a change the judge cannot decide (HOLD at the final look and
// after it) is still held to the fleet's figures: the fleet guard's FAIL
// decides the look. Before, the guard ran only after a judge PASS, so a bad
// change the judge held reached the HOLD limit and ended ABORTED, its values
// not rejected (fleet_guard_e2e_test's bad change, on a loaded machine).
TEST_F(StepEvaluatorTest, AJudgeHoldAtTheFinalLookIsFleetGuardedAndItsFailDecides) {
  telemetry_options_.window = absl::Seconds(1);
  TelemetryStore telemetry(telemetry_options_);
  StepEvaluator evaluator(&telemetry, absl::Milliseconds(500));
  // One rack pair only: the judge HOLDs (min_rack_pairs) whatever the data.
  const v1::Change c =
      ChangeAt(v1::CANARY, 0, false, {{v1::HostTarget::CANARY, 0}, {v1::HostTarget::CONTROL, 1}});
  StepLook in = LookAt(c, 2, 2);
  in.now = in.after_start + absl::Seconds(10) + absl::Milliseconds(600);
  // Before the change each host sent 1 GB a second.
  FleetPeriod before;
  for (const char* h : {"h1", "h2"}) {
    HostPeriod p;
    p.tx_bytes = 10'000'000'000;
    p.covered_seconds = 10;
    p.windows_present = p.windows_expected = 10;
    before.hosts[h] = p;
  }
  in.fleet_baseline = &before;
  // Since the change each sends `gb_per_second`.
  auto step = [&](TelemetryStore& store, double gb_per_second) {
    for (int s = 0; s < 10; ++s) {
      for (const char* h : {"h1", "h2"}) {
        ASSERT_TRUE(AddSecondReport(store, h, in.after_start, s,
                                    {{"tx_bytes", -1, static_cast<uint64_t>(gb_per_second * 1e9)}})
                        .ok());
      }
    }
  };
  step(telemetry, 0.5);

  std::vector<v1::Verdict> v = evaluator.Look(in);
  ASSERT_EQ(v.size(), 2u) << (v.empty() ? "" : v.back().DebugString());
  EXPECT_EQ(v[0].outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(v[0].rule(), "min_rack_pairs") << v[0].summary();
  EXPECT_EQ(v[1].outcome(), v1::Verdict::FAIL) << v[1].DebugString();
  EXPECT_EQ(v[1].rule(), "fleet_constraint") << v[1].summary();
  EXPECT_NE(v[1].summary().find("throughput"), std::string::npos) << v[1].summary();
  EXPECT_EQ(v[1].look(), 2u);
  EXPECT_EQ(v[1].looks(), 2u);

  // A hold look after the final one is guarded the same way.
  in.look = 4;
  v = evaluator.Look(in);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[1].outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(v[1].look(), 4u);

  // A loss that was not there in the step's onset (its first two windows
  // here: a bake of 0 s rounds up to two) began after the change took
  // effect, as a fleet incident's does: the judge's HOLD stays, with the
  // fleet guard's figures and why it did not fail the change.
  {
    TelemetryStore later_store(telemetry_options_);
    StepEvaluator later(&later_store, absl::Milliseconds(500));
    for (int s = 0; s < 10; ++s) {
      for (const char* h : {"h1", "h2"}) {
        const uint64_t bytes = s < 2 ? 1'000'000'000 : 400'000'000;
        ASSERT_TRUE(
            AddSecondReport(later_store, h, in.after_start, s, {{"tx_bytes", -1, bytes}}).ok());
      }
    }
    in.look = 2;
    v = later.Look(in);
    ASSERT_EQ(v.size(), 1u) << v.back().DebugString();
    EXPECT_EQ(v[0].outcome(), v1::Verdict::HOLD);
    EXPECT_EQ(v[0].rule(), "min_rack_pairs");
    EXPECT_NE(v[0].summary().find("fleet guard would fail it"), std::string::npos)
        << v[0].summary();
    EXPECT_NE(v[0].summary().find("began after the change took effect"), std::string::npos);
    const v1::MetricEvidence* loss = FindEvidence(v[0], "fleet_throughput_gbps");
    ASSERT_NE(loss, nullptr);
    EXPECT_EQ(loss->outcome(), "fail");
    EXPECT_NEAR(loss->ratio(), 0.52, 1e-6);  // (2 x 1 + 8 x 0.4) / 10
  }
  // The loss there from the first window: the FAIL says so.
  in.look = 2;
  v = evaluator.Look(in);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_NE(v[1].summary().find("the judge held this look; the loss was there"), std::string::npos)
      << v[1].summary();

  // An interim look is the judge's alone (its looks spend the budget).
  in.look = 1;
  v = evaluator.Look(in);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].outcome(), v1::Verdict::HOLD);

  // The fleet within its tolerance: the judge's HOLD still decides (the guard
  // passes nothing the judge has not), with the fleet's figures beside it.
  TelemetryStore steady_store(telemetry_options_);
  StepEvaluator steady(&steady_store, absl::Milliseconds(500));
  step(steady_store, 1.0);
  in.look = 2;
  v = steady.Look(in);
  ASSERT_EQ(v.size(), 1u) << v.back().DebugString();
  EXPECT_EQ(v[0].outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(v[0].rule(), "min_rack_pairs");
  const v1::MetricEvidence* fleet = FindEvidence(v[0], "fleet_throughput_gbps");
  ASSERT_NE(fleet, nullptr) << v[0].DebugString();
  EXPECT_NEAR(fleet->ratio(), 1.0, 1e-6);

  // Without a fleet baseline the guard's own HOLD does not replace the
  // judge's: the judge's reason is the one an operator reads.
  in.fleet_baseline = nullptr;
  v = steady.Look(in);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rule(), "min_rack_pairs");
}

// The same for a campaign's trial the judge holds: its fleet-wide check (the
// job's p99 constraint alone, FleetGuardConfig::trial) FAILs it when the
// job's p99 rose from the trial's onset, with the judge's figures beside the
// fleet's (the campaign records the trial's estimate from its last verdict);
// a rise that began later leaves the judge's HOLD deciding (a held trial is
// retried).
TEST_F(StepEvaluatorTest, AHeldTrialIsFleetCheckedOnTheJobsP99AndItsFailDecides) {
  telemetry_options_.window = absl::Seconds(1);
  // No host baselines: the judge HOLDs (min_rack_pairs) whatever the data.
  const v1::Change c =
      ChangeAt(v1::CANARY, 0, true, {{v1::HostTarget::CANARY, 0}, {v1::HostTarget::CONTROL, 1}});
  StepLook in = LookAt(c, 2, 2);
  in.now = in.after_start + absl::Seconds(10) + absl::Milliseconds(600);
  in.policy.mutable_objective()->set_op("allreduce");
  // The onset (two windows) holds 2 x 2 x 25 = 100 all-reduces: enough.
  in.policy.mutable_guard()->set_min_samples(50);
  v1::Constraint* job = in.policy.add_constraints();
  job->set_metric("step_time_p99");
  job->set_max_ratio(1.1);
  // Before the trial every all-reduce took 2 ms.
  FleetPeriod before;
  before.other_metric = "step_time_p99";
  before.other.Insert(2e-3, 500);
  in.fleet_baseline = &before;
  // During it, each host's all-reduces of second s took `seconds(s)`.
  auto trial = [&](TelemetryStore& store, const std::function<double(int)>& seconds) {
    for (int s = 0; s < 10; ++s) {
      for (const char* h : {"h1", "h2"}) {
        v1::Report r = SecondReport(in.after_start, s);
        v1::JobTiming* j = r.add_jobs();
        j->set_job("run1");
        j->set_op("allreduce");
        QuantileSketch sk;
        sk.Insert(seconds(s), 25);
        sk.ToProto(j->mutable_seconds());
        const absl::Time at = in.after_start + absl::Seconds(s) + absl::Milliseconds(500);
        ASSERT_TRUE(store.ForHost(h)->AddReport(r, at).ok());
      }
    }
  };

  // The job twice as slow from the trial's first second: FAIL.
  TelemetryStore slow_store(telemetry_options_);
  StepEvaluator slow(&slow_store, absl::Milliseconds(500));
  trial(slow_store, [](int) { return 4e-3; });
  std::vector<v1::Verdict> v = slow.Look(in);
  ASSERT_EQ(v.size(), 2u) << (v.empty() ? "" : v.back().DebugString());
  EXPECT_EQ(v[0].outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(v[0].rule(), "min_rack_pairs") << v[0].summary();
  EXPECT_EQ(v[1].outcome(), v1::Verdict::FAIL) << v[1].DebugString();
  EXPECT_EQ(v[1].rule(), "fleet_constraint") << v[1].summary();
  EXPECT_NE(v[1].summary().find("the judge held this look; the loss was there"), std::string::npos)
      << v[1].summary();
  const v1::MetricEvidence* p99 = FindEvidence(v[1], "fleet_step_time_p99");
  ASSERT_NE(p99, nullptr) << v[1].DebugString();
  EXPECT_EQ(p99->outcome(), "fail");
  EXPECT_GT(p99->ratio(), 1.9);
  // The trial's FAIL carries the judge's figures too.
  ASSERT_GT(v[0].metrics_size(), 0) << v[0].DebugString();
  for (const v1::MetricEvidence& m : v[0].metrics()) {
    EXPECT_NE(FindEvidence(v[1], m.metric()), nullptr) << m.metric();
  }

  // The job slowed from the trial's third second on, after its onset (two
  // windows): the judge's HOLD decides, with the fleet's figures.
  TelemetryStore later_store(telemetry_options_);
  StepEvaluator later(&later_store, absl::Milliseconds(500));
  trial(later_store, [](int s) { return s < 2 ? 2e-3 : 4e-3; });
  v = later.Look(in);
  ASSERT_EQ(v.size(), 1u) << v.back().DebugString();
  EXPECT_EQ(v[0].outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(v[0].rule(), "min_rack_pairs");
  EXPECT_NE(v[0].summary().find("began after the change took effect"), std::string::npos)
      << v[0].summary();
  p99 = FindEvidence(v[0], "fleet_step_time_p99");
  ASSERT_NE(p99, nullptr) << v[0].DebugString();
  EXPECT_EQ(p99->outcome(), "fail");

  // The job as before: nothing but the judge's HOLD.
  TelemetryStore steady_store(telemetry_options_);
  StepEvaluator steady(&steady_store, absl::Milliseconds(500));
  trial(steady_store, [](int) { return 2e-3; });
  v = steady.Look(in);
  ASSERT_EQ(v.size(), 1u) << v.back().DebugString();
  EXPECT_EQ(v[0].rule(), "min_rack_pairs");
  EXPECT_EQ(v[0].summary().find("fleet guard"), std::string::npos) << v[0].summary();
}

// Rule 3: a PASS at the final look needs every host the step changed to
// confirm it: running the pushed version, and reporting through the step.
TEST_F(StepEvaluatorTest, APassNeedsEveryChangedHostRunningThePushedVersionAndReporting) {
  telemetry_options_.window = absl::Seconds(1);
  TelemetryStore telemetry(telemetry_options_);
  StepEvaluator evaluator(&telemetry, absl::Milliseconds(500));
  v1::Change c =
      ChangeAt(v1::CANARY, 0, true, {{v1::HostTarget::CANARY, 0}, {v1::HostTarget::CANARY, 0}});
  for (v1::HostTarget& h : *c.mutable_hosts()) h.set_pushed_version("7");
  StepLook in = LookAt(c, 2, 2);
  in.now = in.after_start + absl::Seconds(10) + absl::Milliseconds(600);
  // h1 reports every second of the step; h2 only in its first three.
  auto report = [&](const std::string& host, int second) {
    ASSERT_TRUE(AddSecondReport(telemetry, host, in.after_start, second).ok());
  };
  for (int s = 0; s < 10; ++s) {
    report("h1", s);
    if (s < 3) report("h2", s);
  }

  // h2 never confirmed version 7 (it runs 6): HOLD, naming it.
  in.current_versions = {{"h1", "7"}, {"h2", "6"}};
  std::vector<v1::Verdict> v = evaluator.Look(in);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].outcome(), v1::Verdict::PASS);
  EXPECT_EQ(v[1].outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(v[1].rule(), "canary_unconfirmed");
  EXPECT_NE(v[1].summary().find("h2 runs 6, not version 7"), std::string::npos) << v[1].summary();
  EXPECT_EQ(v[1].summary().find("h1"), std::string::npos) << v[1].summary();

  // Both run 7, but h2 went silent after three of the step's ten windows.
  in.current_versions = {{"h1", "7"}, {"h2", "7"}};
  v = evaluator.Look(in);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[1].rule(), "canary_unconfirmed");
  EXPECT_NE(v[1].summary().find("h2 reported in 3 of 10 windows"), std::string::npos)
      << v[1].summary();

  // h2 reports again: the PASS stands.
  for (int s = 3; s < 10; ++s) report("h2", s);
  v = evaluator.Look(in);
  ASSERT_EQ(v.size(), 1u) << v.back().DebugString();
  EXPECT_EQ(v[0].outcome(), v1::Verdict::PASS);

  // A host the fleet never heard from has confirmed nothing.
  in.current_versions.erase("h2");
  v = evaluator.Look(in);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_NE(v[1].summary().find("h2 runs (unknown)"), std::string::npos) << v[1].summary();
}

// Issue 25: the policy's hard limits apply at every step, the last included.
// With no control left the judge does not run, so before this a host paused
// far above guard.max_pfc_pause_ratio at the last stage reached DONE.
TEST_F(StepEvaluatorTest, WithoutAControlTheHardLimitsJudgeEveryChangedHostAtEveryLook) {
  telemetry_options_.window = absl::Seconds(1);
  TelemetryStore telemetry(telemetry_options_);
  StepEvaluator evaluator(&telemetry, absl::Milliseconds(500));
  const v1::Change c =
      ChangeAt(v1::STAGE, 1, false, {{v1::HostTarget::CANARY, 0}, {v1::HostTarget::CONTROL, 1}});
  StepLook in = LookAt(c, 1, 3);
  in.policy.mutable_guard()->set_max_pfc_pause_ratio(0.05);
  in.policy.mutable_guard()->set_max_retransmits_per_second(100);
  in.now = in.after_start + absl::Seconds(10) + absl::Milliseconds(600);
  // h1 pauses 1% of each second; h2 (the stage-1 host) pauses `h2_pause_us`
  // of each and retransmits `h2_retx` a second.
  auto report = [&](const std::string& host, int second, uint64_t pause_us, uint64_t retx) {
    ASSERT_TRUE(AddSecondReport(telemetry, host, in.after_start, second,
                                {{"rx_pfc_pause_duration_us", 3, pause_us},
                                 {"tx_bytes", -1, 1'000'000'000},
                                 {"retransmits", -1, retx}})
                    .ok());
  };
  for (int s = 0; s < 10; ++s) {
    report("h1", s, 10'000, 0);
    report("h2", s, 200'000, 0);  // 20% of the time
  }
  std::vector<v1::Verdict> v = evaluator.Look(in);  // an interim look
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(v[0].rule(), "guard:pfc_pause_ratio");
  EXPECT_NE(v[0].summary().find("changed host h2 paused 0.2 of the time"), std::string::npos)
      << v[0].summary();
  EXPECT_NE(v[0].summary().find("no control left"), std::string::npos);
  EXPECT_EQ(v[0].look(), 1u);

  // Within the limits: nothing before the final look, the PASS at it.
  TelemetryStore quiet_store(telemetry_options_);
  StepEvaluator quiet(&quiet_store, absl::Milliseconds(500));
  for (int s = 0; s < 10; ++s) {
    for (const char* h : {"h1", "h2"}) {
      ASSERT_TRUE(AddSecondReport(quiet_store, h, in.after_start, s).ok());
    }
  }
  EXPECT_TRUE(quiet.Look(in).empty());
  in.look = 3;
  v = quiet.Look(in);
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v[0].rule(), "no_control_left");
}

TEST_F(StepEvaluatorTest, ANackFailsTheChangeOnlyForTheVersionItPushed) {
  v1::Change c =
      ChangeAt(v1::CANARY, 0, false, {{v1::HostTarget::CANARY, 0}, {v1::HostTarget::CONTROL, 1}});
  c.mutable_hosts(0)->set_pushed_version("7");
  const absl::Time now = absl::FromUnixSeconds(1'700'000'100);
  std::optional<v1::Verdict> v = StepEvaluator::Nack(c, "h1", "7", "out of range", now);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(v->rule(), "nack");
  EXPECT_NE(v->summary().find("refused version 7: out of range"), std::string::npos);
  EXPECT_FALSE(StepEvaluator::Nack(c, "h1", "6", "late", now).has_value());
  EXPECT_FALSE(StepEvaluator::Nack(c, "h2", "7", "not its version", now).has_value());
}

TEST_F(StepEvaluatorTest, AGuardRestoreFailsTheChangeOnlyWhenItJudgedThePushedVersion) {
  v1::Change c =
      ChangeAt(v1::CANARY, 0, false, {{v1::HostTarget::CANARY, 0}, {v1::HostTarget::CONTROL, 1}});
  c.mutable_hosts(0)->set_pushed_version("7");
  const absl::Time now = absl::FromUnixSeconds(1'700'000'100);
  v1::GuardEvent e;
  e.set_kind("pfc_pause_guard");
  e.set_detail("pause ratio 0.4");
  e.set_restored_version("6");
  e.set_judged_version("5");  // a late event about an earlier set
  EXPECT_FALSE(StepEvaluator::GuardEvent(c, "h1", e, now).has_value());
  e.set_judged_version("7");
  std::optional<v1::Verdict> v = StepEvaluator::GuardEvent(c, "h1", e, now);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(v->rule(), "local_guard");
  // An event naming no version (an older agent) is taken as about the pushed one.
  e.clear_judged_version();
  EXPECT_TRUE(StepEvaluator::GuardEvent(c, "h1", e, now).has_value());
  // A host the change never pushed to.
  EXPECT_FALSE(StepEvaluator::GuardEvent(c, "h2", e, now).has_value());
}

// Issue 25 item 4: each step takes its own baseline, so at stage 1 the
// canary hosts' baseline already holds what the change did to them: a p99
// that crept up x1.7 on them after the canary step passed shows in no single
// step. The cumulative test compares every host changed so far with the hosts
// not yet changed, each against its period before the change's first step
// (the fleet baseline), and FAILs it.
class CumulativeTest : public StepEvaluatorTest {
 protected:
  // 8 racks of 4 hosts: per rack one canary host (stage 0), one stage-1 host
  // and two stage-2 hosts (the control at stage 1).
  CumulativeTest() {
    telemetry_options_.window = absl::Seconds(1);
    telemetry_ = std::make_unique<TelemetryStore>(telemetry_options_);
    evaluator_ = std::make_unique<StepEvaluator>(telemetry_.get(), absl::Milliseconds(500));
    change_.set_id("c-1");
    change_.set_state(v1::STAGE);
    change_.set_stage(1);
    for (int r = 0; r < 8; ++r) {
      for (int i = 0; i < 4; ++i) {
        v1::HostTarget* h = change_.add_hosts();
        h->set_host_id(absl::StrCat("r", r, "h", i));
        h->set_rack(absl::StrCat("r", r));
        h->set_role(i == 0 ? v1::HostTarget::CANARY : v1::HostTarget::CONTROL);
        h->set_stage(i == 0 ? 0 : i == 1 ? 1 : 2);
      }
    }
  }

  // `windows` seconds of `host`'s probes (1000 a second), every RTT scaled
  // by `factor`; a per-host offset and sampling noise keep hosts apart.
  QuantileSketch Probes(const std::string& host, double factor, int windows) {
    QuantileSketch sk;
    std::lognormal_distribution<double> body(std::log(10e-6), 0.25);
    std::lognormal_distribution<double> tail(std::log(30e-6), 0.5);
    std::uniform_real_distribution<double> u(0, 1);
    const double offset = std::exp(0.08 * ((std::hash<std::string>()(host) % 100) / 50.0 - 1));
    for (int i = 0; i < 1000 * windows; ++i) {
      sk.Insert((u(rng_) < 0.03 ? tail(rng_) : body(rng_)) * offset * factor);
    }
    return sk;
  }
  HostPeriod Period(const std::string& host, double factor) {
    HostPeriod p;
    p.rtt = Probes(host, factor, 10);
    p.probes_sent = p.rtt.count();
    p.windows_present = p.windows_expected = 10;
    p.covered_seconds = 10;
    return p;
  }
  // The step's 10 seconds of reports, each host's RTT scaled by factor(host).
  void Step(absl::Time after_start, const std::function<double(const std::string&)>& factor) {
    for (const v1::HostTarget& h : change_.hosts()) {
      for (int s = 0; s < 10; ++s) {
        v1::Report r = SecondReport(after_start, s);
        const absl::Time start = after_start + absl::Seconds(s);
        v1::LatencyWindow* w = r.add_latency();
        w->set_peer_class("intra_rack");
        const QuantileSketch sk = Probes(h.host_id(), factor(h.host_id()), 1);
        sk.ToProto(w->mutable_network_rtt_seconds());
        w->set_probes_sent(sk.count());
        ASSERT_TRUE(
            telemetry_->ForHost(h.host_id())->AddReport(r, start + absl::Milliseconds(500)).ok());
      }
    }
  }
  StepLook Final() {
    StepLook in = LookAt(change_, 3, 3);
    in.now = in.after_start + absl::Seconds(10) + absl::Milliseconds(600);
    in.policy.mutable_guard()->set_max_p99_regression(0.05);
    in.policy.mutable_guard()->set_confidence(0.995);
    in.policy.mutable_guard()->set_min_samples(1000);
    in.policy.mutable_guard()->set_min_rack_pairs(6);
    in.policy.mutable_guard()->set_pass_max_ucb_regression(0.2);
    in.baseline = &step_baseline_;
    return in;
  }
  static bool IsCanary(const std::string& host) { return absl::EndsWith(host, "h0"); }

  std::mt19937_64 rng_{7};
  std::unique_ptr<TelemetryStore> telemetry_;
  std::unique_ptr<StepEvaluator> evaluator_;
  v1::Change change_;
  std::map<std::string, HostPeriod> step_baseline_;
  FleetPeriod fleet_baseline_;
};

TEST_F(CumulativeTest, ACreepThatEachStepsOwnBaselineHidesFailsAgainstThePreChangeBaseline) {
  // Before the change every host was at x1; by stage 1 the canary hosts had
  // crept to x1.7, and stay there; the stage-1 hosts' change is neutral.
  auto crept = [](const std::string& h) { return IsCanary(h) ? 1.7 : 1.0; };
  for (const v1::HostTarget& h : change_.hosts()) {
    fleet_baseline_.hosts[h.host_id()] = Period(h.host_id(), 1.0);
    step_baseline_[h.host_id()] = Period(h.host_id(), crept(h.host_id()));
  }
  StepLook in = Final();
  Step(in.after_start, crept);

  // Without the pre-change baseline (as before): the step sees nothing, and
  // its own test spends the whole budget (final look of 3: 0.0015 for p99).
  std::vector<v1::Verdict> v = evaluator_->Look(in);
  ASSERT_FALSE(v.empty());
  EXPECT_NE(v[0].outcome(), v1::Verdict::FAIL) << v[0].summary();
  EXPECT_EQ(FindEvidence(v[0], "cumulative_ln_p99_did"), nullptr);
  ASSERT_NE(FindEvidence(v[0], "ln_p99_did"), nullptr);
  const double whole_alpha = FindEvidence(v[0], "ln_p99_did")->alpha();
  EXPECT_NEAR(whole_alpha, 0.0015, 1e-9);

  in.fleet_baseline = &fleet_baseline_;
  v = evaluator_->Look(in);
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v[0].outcome(), v1::Verdict::FAIL) << v[0].summary();
  EXPECT_EQ(v[0].rule(), "cumulative_p99_did_t_test") << v[0].summary();
  EXPECT_NE(v[0].summary().find("against the pre-change baseline"), std::string::npos);
  EXPECT_NE(v[0].summary().find("this step against its own baseline"), std::string::npos);
  const v1::MetricEvidence* own = FindEvidence(v[0], "ln_p99_did");
  const v1::MetricEvidence* cumulative = FindEvidence(v[0], "cumulative_ln_p99_did");
  ASSERT_NE(own, nullptr);
  ASSERT_NE(cumulative, nullptr);
  EXPECT_NE(own->outcome(), "fail") << own->note();
  // Half of each rack's changed hosts rose x1.7: about x1.30.
  EXPECT_GT(cumulative->ratio(), 1.2) << cumulative->note();
  EXPECT_EQ(cumulative->outcome(), "fail") << cumulative->DebugString();
  // The two tests share the step's false-FAIL budget: half each.
  EXPECT_NEAR(own->alpha(), whole_alpha / 2, 1e-9);
  EXPECT_NEAR(cumulative->alpha(), whole_alpha / 2, 1e-9);
}

TEST_F(CumulativeTest, ANeutralChangeShowsTheCumulativeEvidenceAndDoesNotFail) {
  for (const v1::HostTarget& h : change_.hosts()) {
    fleet_baseline_.hosts[h.host_id()] = Period(h.host_id(), 1.0);
    step_baseline_[h.host_id()] = Period(h.host_id(), 1.0);
  }
  StepLook in = Final();
  in.fleet_baseline = &fleet_baseline_;
  Step(in.after_start, [](const std::string&) { return 1.0; });
  std::vector<v1::Verdict> v = evaluator_->Look(in);
  ASSERT_FALSE(v.empty());
  EXPECT_NE(v[0].outcome(), v1::Verdict::FAIL) << v[0].summary();
  const v1::MetricEvidence* cumulative = FindEvidence(v[0], "cumulative_ln_p99_did");
  ASSERT_NE(cumulative, nullptr);
  EXPECT_NE(cumulative->outcome(), "fail");
  EXPECT_NE(cumulative->note().find("against the pre-change baseline"), std::string::npos);

  // A fleet baseline without each host's probes (an older controller's)
  // cannot serve: no cumulative test, the step's own budget whole.
  EXPECT_NEAR(FindEvidence(v[0], "ln_p99_did")->alpha(), 0.00075, 1e-9);
  for (auto& [id, p] : fleet_baseline_.hosts) p.rtt = QuantileSketch();
  v = evaluator_->Look(in);
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(FindEvidence(v[0], "cumulative_ln_p99_did"), nullptr);
  ASSERT_NE(FindEvidence(v[0], "ln_p99_did"), nullptr);
  EXPECT_NEAR(FindEvidence(v[0], "ln_p99_did")->alpha(), 0.0015, 1e-9);
}

}  // namespace
}  // namespace rocetune::controller
