// The fleet guard (pure) and the step baseline record's round trip.
#include "controller/rollout/fleet_guard.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/rollout/baseline_record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// `n` hosts, each with `gbps` of throughput, `cnp` CNPs and `pause` paused
// share of priority 3 over 10 s; no probes.
FleetPeriod Fleet(int n, double gbps, uint64_t cnp = 0, double pause = 0) {
  FleetPeriod out;
  for (int i = 0; i < n; ++i) {
    HostPeriod p;
    p.covered_seconds = 10;
    p.windows_present = p.windows_expected = 10;
    p.tx_bytes = static_cast<uint64_t>(gbps * 1e9 / 8 * 10 * (1 + 0.01 * (i % 3)));
    p.cnp = cnp;
    p.pause_us[3] = static_cast<uint64_t>(pause * 10e6);
    out.hosts[absl::StrCat("h", i)] = p;
  }
  return out;
}

// `n` probes: 97% at 10 us, the slowest 3% at `tail_us`.
QuantileSketch Probes(int n, double tail_us) {
  QuantileSketch s;
  for (int i = 0; i < n; ++i) s.Insert((i % 100 < 97 ? 10 : tail_us) * 1e-6);
  return s;
}

// `period` as a step's onset, 2 s long.
std::shared_ptr<const FleetPeriod> Onset(FleetPeriod period) {
  period.seconds = 2;
  return std::make_shared<const FleetPeriod>(std::move(period));
}

// An onset holding only the merged objective samples `rtt`.
std::shared_ptr<const FleetPeriod> Onset(QuantileSketch rtt) {
  FleetPeriod p;
  p.rtt = std::move(rtt);
  return Onset(std::move(p));
}

const v1::MetricEvidence* Find(const v1::Verdict& v, const std::string& metric) {
  for (const v1::MetricEvidence& m : v.metrics()) {
    if (m.metric() == metric) return &m;
  }
  return nullptr;
}

v1::Constraint Constraint(const std::string& metric, double max_ratio) {
  v1::Constraint c;
  c.set_metric(metric);
  c.set_max_ratio(max_ratio);
  return c;
}

TEST(FleetGuardTest, ThroughputIsGuardedAtTheDefaultToleranceWithoutAConstraint) {
  FleetGuardConfig cfg;
  v1::Verdict ok = FleetGuard(Fleet(32, 10), Fleet(32, 8.5), 32, cfg);
  EXPECT_EQ(ok.outcome(), v1::Verdict::PASS) << ok.summary();
  EXPECT_EQ(ok.rule(), "fleet_constraint");
  ASSERT_NE(Find(ok, "fleet_throughput_gbps"), nullptr);
  EXPECT_NEAR(Find(ok, "fleet_throughput_gbps")->ratio(), 0.85, 1e-9);
  // 0.9 / 1.1 = 0.818: a 20% loss fails.
  v1::Verdict bad = FleetGuard(Fleet(32, 10), Fleet(32, 8), 32, cfg);
  EXPECT_EQ(bad.outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(bad.rule(), "fleet_constraint");
  EXPECT_THAT(bad.summary(), HasSubstr("ratio 0.800"));
  EXPECT_THAT(bad.summary(), HasSubstr("tolerance 0.900"));
  EXPECT_THAT(bad.summary(), HasSubstr("FAIL below 0.818"));
  ASSERT_EQ(bad.groups_size(), 2);
  EXPECT_EQ(bad.groups(0).group(), "fleet_baseline");
  EXPECT_EQ(bad.groups(1).group(), "fleet");
  EXPECT_NEAR(bad.groups(1).throughput_gbps() / bad.groups(0).throughput_gbps(), 0.8, 1e-6);
}

TEST(FleetGuardTest, ThePolicyConstraintAndTheMarginSetTheThreshold) {
  FleetGuardConfig cfg;
  cfg.constraints = {Constraint("throughput_gbps", 1.08)};  // 0.926; /1.1 = 0.842
  EXPECT_EQ(FleetGuard(Fleet(8, 10), Fleet(8, 8.5), 8, cfg).outcome(), v1::Verdict::PASS);
  EXPECT_EQ(FleetGuard(Fleet(8, 10), Fleet(8, 8.3), 8, cfg).outcome(), v1::Verdict::FAIL);
  cfg.margin = 0;
  EXPECT_EQ(FleetGuard(Fleet(8, 10), Fleet(8, 9.1), 8, cfg).outcome(), v1::Verdict::FAIL);
  // A gain never fails.
  EXPECT_EQ(FleetGuard(Fleet(8, 10), Fleet(8, 30), 8, cfg).outcome(), v1::Verdict::PASS);
}

TEST(FleetGuardTest, CountsFailOnlyAboveTheirFloor) {
  FleetGuardConfig cfg;
  cfg.constraints = {Constraint("cnp_per_second", 1.5)};
  // 1 -> 5 CNPs per host: x4 but below 10 events per host.
  v1::Verdict few = FleetGuard(Fleet(8, 10, 1), Fleet(8, 10, 5), 8, cfg);
  EXPECT_EQ(few.outcome(), v1::Verdict::PASS) << few.summary();
  v1::Verdict many = FleetGuard(Fleet(8, 10, 100), Fleet(8, 10, 400), 8, cfg);
  EXPECT_EQ(many.outcome(), v1::Verdict::FAIL);
  EXPECT_THAT(many.summary(), HasSubstr("cnp_per_second"));
  // Pause ratio: rises below the 1e-4 floor are not judged.
  cfg.constraints = {Constraint("pfc_pause_ratio", 1.5)};
  EXPECT_EQ(FleetGuard(Fleet(8, 10, 0, 1e-6), Fleet(8, 10, 0, 5e-5), 8, cfg).outcome(),
            v1::Verdict::PASS);
  EXPECT_EQ(FleetGuard(Fleet(8, 10, 0, 1e-3), Fleet(8, 10, 0, 5e-3), 8, cfg).outcome(),
            v1::Verdict::FAIL);
}

// Issue 25: a constraint's absolute bounds hold at every stage, the last
// included (no control left there, so the judge cannot check them): the
// fleet leaving a bound it met before the change FAILs; a bound the fleet
// already broke before does not.
TEST(FleetGuardTest, AConstraintBoundTheFleetMetBeforeAndBreaksNowFails) {
  FleetGuardConfig cfg;
  v1::Constraint floor = Constraint("throughput_gbps", 0);
  floor.set_min(9);
  cfg.constraints = {floor};
  // 10 -> 8.8 Gb/s: within the ratio tolerance (0.9 / 1.1), below the floor.
  v1::Verdict v = FleetGuard(Fleet(8, 10), Fleet(8, 8.8), 8, cfg);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_EQ(v.rule(), "fleet_constraint_bound");
  EXPECT_THAT(v.summary(), HasSubstr("outside the policy's bounds [9, -]"));
  // The fleet was below the floor before the change too: not the change's.
  EXPECT_EQ(FleetGuard(Fleet(8, 8.9), Fleet(8, 8.8), 8, cfg).outcome(), v1::Verdict::PASS);
  v1::Constraint ceiling = Constraint("pfc_pause_ratio", 100);  // no ratio rule to speak of
  ceiling.set_max(0.01);
  cfg.constraints = {ceiling};
  v = FleetGuard(Fleet(8, 10, 0, 0.001), Fleet(8, 10, 0, 0.05), 8, cfg);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_EQ(v.rule(), "fleet_constraint_bound");
  EXPECT_THAT(v.summary(), HasSubstr("pfc_pause_ratio"));
  EXPECT_EQ(FleetGuard(Fleet(8, 10, 0, 0.001), Fleet(8, 10, 0, 0.005), 8, cfg).outcome(),
            v1::Verdict::PASS);
}

TEST(FleetGuardTest, HoldsWhenTooFewHostsHaveDataInBothPeriods) {
  FleetGuardConfig cfg;
  auto now = Fleet(32, 5);
  for (int i = 0; i < 7; ++i) now.hosts.erase(absl::StrCat("h", i));  // 25 of 32 < 80%
  v1::Verdict v = FleetGuard(Fleet(32, 10), now, 32, cfg);
  EXPECT_EQ(v.outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(v.rule(), "fleet_data");
  now = Fleet(32, 5);
  for (int i = 0; i < 6; ++i) now.hosts[absl::StrCat("h", i)].covered_seconds = 0;  // 26 of 32
  EXPECT_EQ(FleetGuard(Fleet(32, 10), now, 32, cfg).outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(FleetGuard(FleetPeriod(), FleetPeriod(), 0, cfg).outcome(), v1::Verdict::HOLD);
}

// 32 hosts at 10 Gb/s with 5000 probes at `p99_us` merged over them.
FleetPeriod P99Period(double p99_us) {
  FleetPeriod p = Fleet(32, 10);
  p.rtt = Probes(5000, p99_us);
  return p;
}

// At the last stage no control is left: the fleet's own p99, before and
// since, is the only p99 evidence; a rise by half fails, a smaller one or a
// thin period does not.
TEST(FleetGuardTest, TheFleetP99FailsOnlyWhenItRoseByHalfWithEnoughProbes) {
  FleetGuardConfig cfg;
  cfg.min_rtt_samples = 2000;
  FleetPeriod before = P99Period(40);
  FleetPeriod after = P99Period(56);  // +40%
  v1::Verdict ok = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(ok.outcome(), v1::Verdict::PASS) << ok.summary();
  ASSERT_NE(Find(ok, "fleet_p99"), nullptr);
  EXPECT_EQ(Find(ok, "fleet_p99")->outcome(), "pass");
  EXPECT_NEAR(Find(ok, "fleet_p99")->ratio(), 1.4, 0.03);
  EXPECT_EQ(ok.groups(0).samples(), 5000u);
  EXPECT_NEAR(ok.groups(1).p99_seconds(), 56e-6, 1e-6);

  after.rtt = Probes(5000, 64);  // +60%
  v1::Verdict bad = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(bad.outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(bad.rule(), "fleet_p99");
  EXPECT_THAT(bad.summary(), HasSubstr("now 64.0 us (5000 probes), ratio 1.6"));

  // Too few probes in either period: not judged.
  after.rtt = Probes(1000, 64);
  v1::Verdict thin = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(thin.outcome(), v1::Verdict::PASS) << thin.summary();
  EXPECT_EQ(Find(thin, "fleet_p99")->outcome(), "not_evaluated");

  // A lost constraint is named first, even when the p99 rose too.
  after = Fleet(32, 5);
  after.rtt = Probes(5000, 64);
  EXPECT_EQ(FleetGuard(before, after, 32, cfg).rule(), "fleet_constraint");
}

// Issue 25 item 4: a fleet incident during the bake moves the fleet's p99
// as a change would. A change acts once applied, so its rise is there in the
// step's first part; a rise that is not began later: HOLD "fleet_shift", not
// FAIL. An onset with too few probes cannot clear the change (FAIL).
TEST(FleetGuardTest, AP99RiseThatBeganAfterTheOnsetHoldsAsAFleetIncident) {
  FleetGuardConfig cfg;
  cfg.min_rtt_samples = 2000;
  const FleetPeriod before = P99Period(40);
  FleetPeriod after = P99Period(64);      // +60% over the step
  after.onset = Onset(Probes(2500, 42));  // +5% in its first part
  v1::Verdict incident = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(incident.outcome(), v1::Verdict::HOLD) << incident.summary();
  EXPECT_EQ(incident.rule(), "fleet_shift");
  EXPECT_THAT(incident.summary(), HasSubstr("first part 42.0 us (2500 probes), ratio 1.05"));
  EXPECT_EQ(Find(incident, "fleet_p99")->outcome(), "hold");

  after.onset = Onset(Probes(2500, 70));  // there from the start: the change
  v1::Verdict change = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(change.outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(change.rule(), "fleet_p99");
  EXPECT_THAT(change.summary(), HasSubstr("ratio 1.75"));

  // Below x1.5 in the first part, but more than half the rise (ln 0.37 of
  // 0.47): there from the start.
  after.onset = Onset(Probes(2500, 58));
  EXPECT_EQ(FleetGuard(before, after, 32, cfg).rule(), "fleet_p99");

  after.onset = Onset(Probes(1000, 42));  // too few probes to clear it
  EXPECT_EQ(FleetGuard(before, after, 32, cfg).rule(), "fleet_p99");
}

// A policy that tunes the probes' p99 and holds the job's step time as a
// constraint: at the last stage no control is left, so the guard holds the
// fleet's merged job p99 (`other`) to the constraint's ratio widened by the
// margin. Better on the probe and worse for the job is a regression.
FleetPeriod JobPeriod(double probe_p99_us, int job_events, double job_p99_us) {
  FleetPeriod p = P99Period(probe_p99_us);
  p.other_metric = "step_time_p99";
  p.other = Probes(job_events, job_p99_us);
  return p;
}

// Issue 25: after a judge HOLD (judge_held) a FAIL decides only when the
// step's onset shows the loss too: a change acts once applied; a loss absent
// from the onset began later, as a fleet incident's does (HOLD "fleet_shift",
// with the FAIL's figures). No onset, or one that cannot be judged: the FAIL
// stands. Without judge_held the onset does not matter to a throughput FAIL.
TEST(FleetGuardTest, AfterAJudgeHoldAFailStandsOnlyWhenTheOnsetShowsTheLossToo) {
  FleetGuardConfig cfg;
  cfg.judge_held = true;
  const FleetPeriod before = Fleet(32, 10);
  FleetPeriod after = Fleet(32, 7);  // -30% over the step

  after.onset = Onset(Fleet(32, 7));  // there from the start: the change
  v1::Verdict change = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(change.outcome(), v1::Verdict::FAIL) << change.summary();
  EXPECT_EQ(change.rule(), "fleet_constraint");
  EXPECT_THAT(change.summary(),
              HasSubstr("(the judge held this look; the loss was there in the step's first 2s "
                        "already, as a change's is)"));

  after.onset = Onset(Fleet(32, 9.9));  // the onset as before: an incident
  v1::Verdict incident = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(incident.outcome(), v1::Verdict::HOLD) << incident.summary();
  EXPECT_EQ(incident.rule(), "fleet_shift");
  EXPECT_THAT(incident.summary(), StartsWith("HOLD: the judge held this look, and the fleet "
                                             "guard would fail it (FAIL: the fleet moved"));
  EXPECT_THAT(incident.summary(), HasSubstr("not there in the step's first 2s"));
  ASSERT_NE(Find(incident, "fleet_throughput_gbps"), nullptr);
  EXPECT_EQ(Find(incident, "fleet_throughput_gbps")->outcome(), "fail");
  EXPECT_NEAR(Find(incident, "fleet_throughput_gbps")->ratio(), 0.7, 1e-6);

  // The onset from too few hosts to judge: safety first.
  after.onset = Onset(Fleet(8, 9.9));
  v1::Verdict unjudged = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(unjudged.outcome(), v1::Verdict::FAIL) << unjudged.summary();
  EXPECT_THAT(unjudged.summary(), HasSubstr("could not be judged, so the FAIL stands"));

  after.onset = nullptr;  // a look within the onset, or a resumed bake
  v1::Verdict no_onset = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(no_onset.outcome(), v1::Verdict::FAIL);
  EXPECT_THAT(no_onset.summary(), HasSubstr("no onset to tell"));

  // Without a judge HOLD the onset changes nothing for throughput.
  cfg.judge_held = false;
  after.onset = Onset(Fleet(32, 9.9));
  v1::Verdict passed_look = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(passed_look.outcome(), v1::Verdict::FAIL);
  EXPECT_THAT(passed_look.summary(), Not(HasSubstr("judge held")));

  // A failed metric the onset could not evaluate cannot be cleared by it: the
  // job's p99 beyond its constraint over the step, the onset holding too few
  // job step times to judge it.
  FleetGuardConfig job_cfg = cfg;
  job_cfg.judge_held = true;
  job_cfg.constraints = {Constraint("step_time_p99", 1.1)};
  job_cfg.min_rtt_samples = 2000;
  FleetPeriod slow_job = JobPeriod(40, 5000, 1500);  // x1.5 over the step
  slow_job.onset = Onset(JobPeriod(40, 500, 1000));
  v1::Verdict thin = FleetGuard(JobPeriod(40, 5000, 1000), slow_job, 32, job_cfg);
  EXPECT_EQ(thin.outcome(), v1::Verdict::FAIL) << thin.summary();
  EXPECT_THAT(thin.summary(), HasSubstr("could not tell fleet_step_time_p99"));
  slow_job.onset = Onset(JobPeriod(40, 2500, 1000));  // enough, and as before
  v1::Verdict later = FleetGuard(JobPeriod(40, 5000, 1000), slow_job, 32, job_cfg);
  EXPECT_EQ(later.outcome(), v1::Verdict::HOLD) << later.summary();
  EXPECT_EQ(later.rule(), "fleet_shift");

  // A rise of the fleet's p99 keeps its own onset test under a judge HOLD.
  cfg.judge_held = true;
  cfg.min_rtt_samples = 2000;
  FleetPeriod rise = P99Period(64);
  rise.onset = Onset(Probes(2500, 70));
  v1::Verdict p99 = FleetGuard(P99Period(40), rise, 32, cfg);
  EXPECT_EQ(p99.rule(), "fleet_p99") << p99.summary();
  EXPECT_THAT(p99.summary(), Not(HasSubstr("judge held")));
}

// A campaign trial's check under a 1.05 step_time_p99 constraint.
FleetGuardConfig TrialConfig() {
  FleetGuardConfig cfg;
  cfg.min_rtt_samples = 2000;
  cfg.trial = true;
  cfg.constraints = {Constraint("step_time_p99", 1.05)};
  return cfg;
}

// A canary-only trial: only the other p99's constraint is checked, fleet-wide
// (the trial's DiD cannot see a cost that crosses racks). Throughput, the
// objective's own p99 and the hosts' coverage are the trial judge's, not this.
TEST(FleetGuardTest, ATrialIsHeldOnlyToTheOtherP99sConstraint) {
  const FleetGuardConfig cfg = TrialConfig();
  const FleetPeriod before = JobPeriod(40, 3000, 400);

  v1::Verdict worse = FleetGuard(before, JobPeriod(27, 3000, 480), 32, cfg);
  EXPECT_EQ(worse.outcome(), v1::Verdict::FAIL) << worse.summary();
  EXPECT_EQ(worse.rule(), "fleet_constraint");
  EXPECT_THAT(worse.summary(), HasSubstr("during the trial"));
  EXPECT_THAT(worse.summary(), HasSubstr("FAIL above 1.155"));
  ASSERT_EQ(worse.metrics_size(), 1) << worse.DebugString();
  EXPECT_EQ(worse.metrics(0).metric(), "fleet_step_time_p99");

  // The fleet's throughput halved and its probe p99 doubled: not this
  // check's (the trial's own judge holds them canary against control).
  FleetPeriod slow = Fleet(32, 5);
  slow.rtt = Probes(5000, 80);
  slow.other_metric = "step_time_p99";
  slow.other = Probes(3000, 410);
  v1::Verdict ok = FleetGuard(before, slow, 32, cfg);
  EXPECT_EQ(ok.outcome(), v1::Verdict::PASS) << ok.summary();
  EXPECT_THAT(ok.summary(), HasSubstr("during the trial (step_time_p99 1.0"));
  ASSERT_EQ(ok.metrics_size(), 1) << ok.DebugString();

  // No host data in either period: no coverage HOLD, the merged sketches decide.
  FleetPeriod no_hosts = JobPeriod(27, 3000, 480);
  no_hosts.hosts.clear();
  EXPECT_EQ(FleetGuard(before, no_hosts, 32, cfg).outcome(), v1::Verdict::FAIL);

  // Thin job data: not evaluated, and the trial is not failed for it.
  v1::Verdict thin = FleetGuard(before, JobPeriod(27, 500, 600), 32, cfg);
  EXPECT_EQ(thin.outcome(), v1::Verdict::PASS) << thin.summary();
  EXPECT_EQ(thin.metrics(0).outcome(), "not_evaluated");
}

// Inside the noise margin the trial PASSes; its point estimate is still
// beyond the tolerance, which a tuner must not take for a winner.
TEST(FleetGuardTest, FleetPointExceededNamesATrialsReadingBeyondTheTolerance) {
  const FleetGuardConfig cfg = TrialConfig();
  const FleetPeriod before = JobPeriod(40, 3000, 400);
  // The job's p99 rose 10%: above 1.05, below 1.155.
  const v1::Verdict within_margin = FleetGuard(before, JobPeriod(40, 3000, 440), 32, cfg);
  ASSERT_EQ(within_margin.outcome(), v1::Verdict::PASS) << within_margin.summary();
  const std::string why = FleetPointExceeded(within_margin, cfg.constraints);
  EXPECT_THAT(why, StartsWith("fleet step_time_p99 1.1"));
  EXPECT_THAT(why, HasSubstr("beyond the tolerated 1.050"));
  // 2% is within the tolerance; a looser tolerance takes the 10% too.
  const v1::Verdict within = FleetGuard(before, JobPeriod(40, 3000, 408), 32, cfg);
  ASSERT_EQ(within.metrics(0).outcome(), "pass") << within.DebugString();
  EXPECT_EQ(FleetPointExceeded(within, cfg.constraints), "");
  EXPECT_EQ(FleetPointExceeded(within_margin, {Constraint("step_time_p99", 1.2)}), "");
  // Not evaluated (too few job step times): nothing named.
  const v1::Verdict thin = FleetGuard(before, JobPeriod(40, 500, 600), 32, cfg);
  ASSERT_EQ(thin.metrics(0).outcome(), "not_evaluated");
  EXPECT_EQ(FleetPointExceeded(thin, cfg.constraints), "");
}

TEST(FleetGuardTest, AJobStepTimeConstraintHoldsTheFleetsJobP99AtTheLastStage) {
  FleetGuardConfig cfg;
  cfg.min_rtt_samples = 2000;
  cfg.constraints = {Constraint("step_time_p99", 1.05)};
  const FleetPeriod before = JobPeriod(40, 3000, 400);
  // The probes' p99 fell by a third; the job's rose 20%: beyond 1.05 x 1.10.
  v1::Verdict worse = FleetGuard(before, JobPeriod(27, 3000, 480), 32, cfg);
  EXPECT_EQ(worse.outcome(), v1::Verdict::FAIL) << worse.summary();
  EXPECT_EQ(worse.rule(), "fleet_constraint");
  EXPECT_THAT(worse.summary(),
              HasSubstr("fleet step_time_p99 (merged): baseline 397.5 us (3000 job step times)"));
  EXPECT_THAT(worse.summary(), HasSubstr("ratio 1.197; tolerance 1.050, noise margin 10.0%"));
  EXPECT_THAT(worse.summary(), HasSubstr("FAIL above 1.155"));
  ASSERT_NE(Find(worse, "fleet_step_time_p99"), nullptr);
  EXPECT_EQ(Find(worse, "fleet_step_time_p99")->outcome(), "fail");
  EXPECT_NEAR(Find(worse, "fleet_step_time_p99")->ratio(), 1.2, 0.03);

  // +5%: within the tolerance.
  v1::Verdict ok = FleetGuard(before, JobPeriod(27, 3000, 420), 32, cfg);
  EXPECT_EQ(ok.outcome(), v1::Verdict::PASS) << ok.summary();
  EXPECT_EQ(Find(ok, "fleet_step_time_p99")->outcome(), "pass");
  EXPECT_NEAR(Find(ok, "fleet_step_time_p99")->ratio(), 1.05, 0.02);
  EXPECT_THAT(ok.summary(), HasSubstr("step_time_p99 1.0"));

  // A baseline recorded before this check carries no job sketch: shown as
  // not evaluated, not skipped.
  FleetPeriod old_record = before;
  old_record.other = QuantileSketch();
  old_record.other_metric.clear();
  v1::Verdict old = FleetGuard(old_record, JobPeriod(27, 3000, 480), 32, cfg);
  ASSERT_NE(Find(old, "fleet_step_time_p99"), nullptr);
  EXPECT_EQ(Find(old, "fleet_step_time_p99")->outcome(), "not_evaluated");

  // Too few job step times in either period: not judged, and said so.
  v1::Verdict thin = FleetGuard(before, JobPeriod(27, 500, 448), 32, cfg);
  EXPECT_EQ(thin.outcome(), v1::Verdict::PASS) << thin.summary();
  EXPECT_EQ(Find(thin, "fleet_step_time_p99")->outcome(), "not_evaluated");
  EXPECT_THAT(Find(thin, "fleet_step_time_p99")->note(), HasSubstr("since 500"));

  // Without the constraint the job's p99 is not the guard's business.
  cfg.constraints.clear();
  v1::Verdict none = FleetGuard(before, JobPeriod(27, 3000, 480), 32, cfg);
  EXPECT_EQ(none.outcome(), v1::Verdict::PASS) << none.summary();
  EXPECT_EQ(Find(none, "fleet_step_time_p99"), nullptr);

  // Under STEP_TIME_P99 a step_time_p99 constraint is the objective's own
  // series (fleet_p99 checks it); the other series is the probes'.
  cfg.objective = v1::Objective::STEP_TIME_P99;
  cfg.constraints = {Constraint("step_time_p99", 1.05)};
  FleetPeriod own_before = before, own_after = JobPeriod(27, 3000, 480);
  own_before.other_metric = own_after.other_metric = "probe_rtt_p99";
  EXPECT_EQ(Find(FleetGuard(own_before, own_after, 32, cfg), "fleet_step_time_p99"), nullptr)
      << "the objective's own series is fleet_p99's";
  cfg.constraints = {Constraint("probe_rtt_p99", 1.1)};
  FleetPeriod job_before = before, job_after = JobPeriod(80, 3000, 400);
  job_before.other_metric = job_after.other_metric = "probe_rtt_p99";
  std::swap(job_before.rtt, job_before.other);
  std::swap(job_after.rtt, job_after.other);
  v1::Verdict probes = FleetGuard(job_before, job_after, 32, cfg);
  EXPECT_EQ(probes.outcome(), v1::Verdict::FAIL) << probes.summary();
  EXPECT_THAT(probes.summary(), HasSubstr("fleet probe_rtt_p99 (merged)"));
  EXPECT_THAT(probes.summary(), HasSubstr("probes)"));
}

// Issue 25 item 4: the thresholds come from the fleet's own A/A spread.
// `gbps` and `p99_us` per pre-change period (32 hosts, 5000 probes each).
std::vector<FleetPeriod> History(const std::vector<double>& gbps,
                                 const std::vector<double>& p99_us) {
  std::vector<FleetPeriod> out;
  for (size_t i = 0; i < gbps.size(); ++i) {
    FleetPeriod p = Fleet(32, gbps[i]);
    p.rtt = Probes(5000, p99_us[i]);
    out.push_back(p);
  }
  return out;
}

const v1::FleetSpread::Metric* SpreadOf(const v1::FleetSpread& s, const std::string& metric) {
  for (const v1::FleetSpread::Metric& m : s.metrics()) {
    if (m.metric() == metric) return &m;
  }
  return nullptr;
}

TEST(FleetSpreadTest, EveryPairOfPeriodsWithEnoughHostsIsCompared) {
  std::vector<FleetPeriod> h = History({10, 10.2, 9.9, 10.1}, {40, 41, 40, 42});
  // A period from which 2 of 32 hosts reported is not counted.
  FleetPeriod sparse = Fleet(32, 5);
  for (int i = 2; i < 32; ++i) sparse.hosts[absl::StrCat("h", i)].covered_seconds = 0;
  h.push_back(sparse);
  const v1::FleetSpread s = MeasureFleetSpread(h, 4, {}, 2000);
  EXPECT_EQ(s.periods(), 4u);
  EXPECT_DOUBLE_EQ(s.period_seconds(), 4);
  const v1::FleetSpread::Metric* t = SpreadOf(s, "throughput_gbps");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->pairs(), 6u);
  // ln ratios of the 6 pairs: 0.0198, -0.0101, 0.0100, -0.0299, -0.0099,
  // 0.0200; their root mean square 0.0182.
  EXPECT_NEAR(t->rms_ln_ratio(), 0.0182, 0.0003);
  const v1::FleetSpread::Metric* p = SpreadOf(s, "p99");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->pairs(), 6u);
  EXPECT_GT(p->rms_ln_ratio(), 0);
  EXPECT_LT(p->rms_ln_ratio(), 0.06);
  // No job-signal constraint: its series is not measured.
  EXPECT_EQ(SpreadOf(s, "step_time_p99"), nullptr);
  // With one, its merged p99 is compared over the same pairs.
  for (size_t i = 0; i < 4; ++i) {
    h[i].other_metric = "step_time_p99";
    h[i].other = Probes(3000, 400 + 10 * static_cast<double>(i));
  }
  const v1::FleetSpread job = MeasureFleetSpread(h, 4, {Constraint("step_time_p99", 1.05)}, 2000);
  ASSERT_NE(SpreadOf(job, "step_time_p99"), nullptr);
  EXPECT_EQ(SpreadOf(job, "step_time_p99")->pairs(), 6u);
  EXPECT_GT(SpreadOf(job, "step_time_p99")->rms_ln_ratio(), 0.01);
  EXPECT_LT(SpreadOf(job, "step_time_p99")->rms_ln_ratio(), 0.06);
  // Too few probes: no p99 pair.
  const v1::FleetSpread thin = MeasureFleetSpread(h, 4, {}, 6000);
  ASSERT_NE(SpreadOf(thin, "p99"), nullptr);
  EXPECT_EQ(SpreadOf(thin, "p99")->pairs(), 0u);
  // CNPs below the guard's floor (10 per host) are not compared; above it
  // they are: 20, 22, 24, 26 per host, ln ratios up to ln(26/20).
  const std::vector<v1::Constraint> cnp = {Constraint("cnp_per_second", 1.5)};
  std::vector<FleetPeriod> quiet, busy;
  for (int i = 0; i < 4; ++i) {
    quiet.push_back(Fleet(8, 10, /*cnp=*/5 + i));
    busy.push_back(Fleet(8, 10, /*cnp=*/20 + 2 * i));
  }
  const v1::FleetSpread q = MeasureFleetSpread(quiet, 4, cnp, 1);
  ASSERT_NE(SpreadOf(q, "cnp_per_second"), nullptr);
  EXPECT_EQ(SpreadOf(q, "cnp_per_second")->pairs(), 0u);
  ASSERT_NE(SpreadOf(q, "throughput_gbps"), nullptr);
  EXPECT_EQ(SpreadOf(q, "throughput_gbps")->pairs(), 6u);
  const v1::FleetSpread c = MeasureFleetSpread(busy, 4, cnp, 1);
  ASSERT_NE(SpreadOf(c, "cnp_per_second"), nullptr);
  EXPECT_EQ(SpreadOf(c, "cnp_per_second")->pairs(), 6u);
  EXPECT_GT(SpreadOf(c, "cnp_per_second")->rms_ln_ratio(), 0.09);
  EXPECT_LT(SpreadOf(c, "cnp_per_second")->rms_ln_ratio(), 0.2);
}

TEST(FleetSpreadTest, AQuietFleetTightensTheThresholdsANoisyOneKeepsTheDefaults) {
  FleetGuardConfig cfg;
  cfg.min_rtt_samples = 2000;
  // Quiet: the margin is its floor, 3%: 0.9 / 1.03 = 0.874. The default (10%)
  // passes a 15% loss (first test above); this fleet fails it.
  FleetPeriod before = P99Period(40);
  before.spread =
      MeasureFleetSpread(History({10, 10, 10, 10, 10, 10}, {40, 40, 40, 40, 40, 40}), 4, {}, 2000);
  FleetPeriod after = Fleet(32, 8.5);
  after.rtt = Probes(5000, 40);
  v1::Verdict v = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_EQ(v.rule(), "fleet_constraint");
  EXPECT_THAT(v.summary(), HasSubstr("noise margin 3.0% (from the fleet's A/A spread: rms ln "
                                     "ratio 0.0000 over 15 pairs of 6 pre-change periods of 4 s)"));
  EXPECT_THAT(v.summary(), HasSubstr("FAIL below 0.874"));
  // Its p99: FAIL at the floor, x1.2, where the default (x1.5) passes +30%.
  after = P99Period(52);
  v = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_EQ(v.rule(), "fleet_p99");
  EXPECT_THAT(v.summary(), HasSubstr("FAIL at 1.20 (from the fleet's A/A spread"));
  after = P99Period(46);  // +15%
  EXPECT_EQ(FleetGuard(before, after, 32, cfg).outcome(), v1::Verdict::PASS);

  // Noisy (rms ln ratio about 0.2: e^0.8 - 1 = 120%): the spread never
  // loosens the guard; the default 10% is kept (FAIL below 0.818) and the
  // note says what the spread asked for.
  before.spread =
      MeasureFleetSpread(History({10, 8, 12, 9, 11, 10}, {40, 40, 40, 40, 40, 40}), 4, {}, 2000);
  ASSERT_NE(SpreadOf(before.spread, "throughput_gbps"), nullptr);
  EXPECT_GT(SpreadOf(before.spread, "throughput_gbps")->rms_ln_ratio(), 0.15);
  after = Fleet(32, 8);
  after.rtt = Probes(5000, 40);
  v = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << v.summary();
  ASSERT_NE(Find(v, "fleet_throughput_gbps"), nullptr);
  EXPECT_THAT(Find(v, "fleet_throughput_gbps")->note(), HasSubstr("noise margin 10.0%"));
  EXPECT_THAT(Find(v, "fleet_throughput_gbps")->note(),
              HasSubstr("more than the default 0.1, which is kept"));
  EXPECT_NEAR(Find(v, "fleet_throughput_gbps")->ratio_lower(), 0.9 / 1.1, 1e-9);
}

// A `since` period shorter than the spread's periods holds fewer samples:
// the spread is scaled up by sqrt((1 + 60 / 10) / 2) = 1.87.
TEST(FleetSpreadTest, AShorterPeriodSinceTheChangeWidensTheMeasuredMargin) {
  FleetGuardConfig cfg;
  FleetPeriod before = Fleet(32, 10);
  before.spread.set_periods(6);
  before.spread.set_period_seconds(60);
  v1::FleetSpread::Metric* m = before.spread.add_metrics();
  m->set_metric("throughput_gbps");
  m->set_pairs(15);
  m->set_rms_ln_ratio(0.01);
  FleetPeriod now = Fleet(32, 10);
  now.seconds = 60;  // e^0.04 - 1 = 4.1%: FAIL below 0.9 / 1.041
  v1::Verdict v = FleetGuard(before, now, 32, cfg);
  ASSERT_NE(Find(v, "fleet_throughput_gbps"), nullptr);
  EXPECT_NEAR(Find(v, "fleet_throughput_gbps")->ratio_lower(), 0.9 / std::exp(0.04), 1e-9);
  now.seconds = 10;  // 0.0187: e^0.0748 - 1 = 7.8%
  v = FleetGuard(before, now, 32, cfg);
  ASSERT_NE(Find(v, "fleet_throughput_gbps"), nullptr);
  EXPECT_NEAR(Find(v, "fleet_throughput_gbps")->ratio_lower(),
              0.9 / std::exp(4 * 0.01 * std::sqrt(3.5)), 1e-9);
  EXPECT_THAT(Find(v, "fleet_throughput_gbps")->note(), HasSubstr("0.0187 for a shorter period"));
}

TEST(FleetSpreadTest, TooLittleHistoryKeepsTheDefaultsAndSaysSo) {
  FleetGuardConfig cfg;
  cfg.min_rtt_samples = 2000;
  FleetPeriod before = P99Period(40);
  before.spread =
      MeasureFleetSpread(History({10, 10, 10, 10, 10}, {40, 40, 40, 40, 40}), 4, {}, 2000);
  EXPECT_EQ(before.spread.periods(), 5u);
  FleetPeriod after = Fleet(32, 8.5);
  after.rtt = Probes(5000, 56);  // +40%
  v1::Verdict v = FleetGuard(before, after, 32, cfg);
  EXPECT_EQ(v.outcome(), v1::Verdict::PASS) << v.summary();
  ASSERT_NE(Find(v, "fleet_throughput_gbps"), nullptr);
  EXPECT_THAT(Find(v, "fleet_throughput_gbps")->note(),
              HasSubstr("noise margin 10.0% (default: the fleet's A/A spread not measured (5 "
                        "pre-change periods of 4 s with data, 6 needed))"));
  ASSERT_NE(Find(v, "fleet_p99"), nullptr);
  EXPECT_THAT(Find(v, "fleet_p99")->note(), HasSubstr("FAIL at 1.50 (default"));
}

TEST(BaselineRecordTest, RoundTripKeepsWhatTheJudgeReads) {
  StepBaselines b;
  b.stage = 2;
  HostPeriod p;
  for (int i = 1; i <= 1000; ++i) p.rtt.Insert(i * 1e-6);
  p.probes_sent = 1010;
  p.probes_lost = 10;
  p.windows_present = 4;
  p.windows_expected = 5;
  p.covered_seconds = 3.9;
  p.cnp = 7;
  p.retransmits = 3;
  p.tx_bytes = 123456789;
  p.pause_us[3] = 42;
  b.hosts["h1"] = p;
  HostPeriod f = p;
  f.rtt = QuantileSketch();
  b.fleet.hosts["h1"] = f;
  b.fleet.hosts["h2"] = f;
  b.fleet.rtt = p.rtt;
  b.fleet.spread.set_periods(5);
  b.fleet.spread.set_period_seconds(60);
  v1::FleetSpread::Metric* m = b.fleet.spread.add_metrics();
  m->set_metric("throughput_gbps");
  m->set_pairs(10);
  m->set_rms_ln_ratio(0.02);
  b.fleet.other_metric = "step_time_p99";
  for (int i = 1; i <= 300; ++i) b.fleet.other.Insert(i * 1e-4);
  const v1::StepBaseline record = ToRecord("c-7", b);
  EXPECT_EQ(record.change_id(), "c-7");
  EXPECT_FALSE(record.fleet(0).has_rtt());
  v1::StepBaseline wire;
  ASSERT_TRUE(wire.ParseFromString(record.SerializeAsString()));
  auto back = FromRecord(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->stage, 2u);
  ASSERT_EQ(back->hosts.size(), 1u);
  ASSERT_EQ(back->fleet.hosts.size(), 2u);
  EXPECT_EQ(back->fleet.rtt.count(), 1000u);
  const HostPeriod& q = back->hosts.at("h1");
  EXPECT_EQ(q.rtt.count(), 1000u);
  EXPECT_DOUBLE_EQ(q.rtt.Quantile(0.99), p.rtt.Quantile(0.99));
  EXPECT_EQ(q.probes_sent, 1010u);
  EXPECT_EQ(q.probes_lost, 10u);
  EXPECT_EQ(q.windows_present, 4);
  EXPECT_EQ(q.windows_expected, 5);
  EXPECT_DOUBLE_EQ(q.covered_seconds, 3.9);
  EXPECT_EQ(q.cnp, 7u);
  EXPECT_EQ(q.retransmits, 3u);
  EXPECT_EQ(q.tx_bytes, 123456789u);
  EXPECT_EQ(q.pause_us[3], 42u);
  EXPECT_EQ(q.pause_us[7], 0u);
  EXPECT_TRUE(back->fleet.hosts.at("h2").rtt.empty());
  EXPECT_EQ(back->fleet.spread.periods(), 5u);
  ASSERT_EQ(back->fleet.spread.metrics_size(), 1);
  EXPECT_DOUBLE_EQ(back->fleet.spread.metrics(0).rms_ln_ratio(), 0.02);
  EXPECT_EQ(back->fleet.other_metric, "step_time_p99");
  EXPECT_EQ(back->fleet.other.count(), 300u);
  EXPECT_DOUBLE_EQ(back->fleet.other.Quantile(0.99), b.fleet.other.Quantile(0.99));
}

TEST(BaselineRecordTest, ABadRecordIsRefusedNamingTheChangeAndHost) {
  v1::StepBaseline r;
  r.set_change_id("c-3");
  v1::HostPeriodRecord* h = r.add_hosts();
  h->set_host_id("h9");
  for (int i = 0; i < 9; ++i) h->add_pause_us(1);
  auto b = FromRecord(r);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(b.status().message(), HasSubstr("c-3"));
  EXPECT_THAT(b.status().message(), HasSubstr("h9"));
  r.clear_hosts();
  r.add_fleet();  // no host id
  EXPECT_EQ(FromRecord(r).status().code(), absl::StatusCode::kDataLoss);
  r.clear_fleet();
  r.mutable_fleet_rtt()->set_relative_accuracy(2);  // out of range
  b = FromRecord(r);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(b.status().message(), HasSubstr("fleet rtt"));
  r.clear_fleet_rtt();
  v1::FleetSpread::Metric* m = r.mutable_fleet_spread()->add_metrics();
  m->set_metric("p99");
  m->set_rms_ln_ratio(-1);
  b = FromRecord(r);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(b.status().message(), HasSubstr("fleet spread of p99"));
  r.clear_fleet_spread();
  r.set_fleet_other_metric("step_time_p99");
  r.mutable_fleet_other()->set_relative_accuracy(2);
  b = FromRecord(r);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(b.status().message(), HasSubstr("fleet step_time_p99 sketch"));
}

}  // namespace
}  // namespace rocetune::controller
