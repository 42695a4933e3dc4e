#ifndef ROCETUNE_CONTROLLER_ROLLOUT_FLEET_GUARD_H_
#define ROCETUNE_CONTROLLER_ROLLOUT_FLEET_GUARD_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "controller/judge/judge.h"
#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/policy.pb.h"

namespace rocetune::controller {

// The noise margin of the fleet guard: a fleet ratio FAILs only when it lies
// beyond the constraint's tolerance by more than this factor (in ratio terms:
// below tolerance / (1 + margin) for throughput, above tolerance x (1 + margin)
// for the others). The margin is set from the fleet's own A/A spread measured
// before the change (FleetSpread below); this constant is the default used
// when too little pre-change history was kept to measure it. Measured on the
// simulator with neutral changes (A/A, 30 checks over 6-second bakes): the
// fleet's before/after throughput ratio had mean 0.999, sd 0.021, range
// 0.954-1.031 (docs/tuning-loop.md, "The fleet guard").
inline constexpr double kFleetGuardNoiseMargin = 0.10;
// The measured spread: pre-change periods of the baseline's length, at most
// kFleetSpreadMaxPeriods back; it is used for a metric when at least
// kFleetSpreadMinPeriods of them had data (every pair of them compared:
// at least 15 pairs). A threshold lies kFleetSpreadZ root-mean-square ln
// ratios beyond the tolerance (margin = e^(z rms) - 1), at least
// kFleetMarginFloor; the fleet p99's FAIL ratio is e^(z rms), at least
// kFleetP99RatioFloor. The measured spread only tightens: neither exceeds its
// default (kFleetGuardNoiseMargin, kFleetP99RegressionRatio), so a disturbed
// history (an earlier change, a job starting) cannot loosen the guard; when
// the spread asks for more, the note says so (false FAILs are then likely).
inline constexpr int kFleetSpreadMinPeriods = 6;
inline constexpr int kFleetSpreadMaxPeriods = 8;
inline constexpr double kFleetSpreadZ = 4;
inline constexpr double kFleetMarginFloor = 0.03;
inline constexpr double kFleetP99RatioFloor = 1.2;
// Hosts with data in both periods, as a share of the change's hosts, below
// which the guard cannot judge (HOLD).
inline constexpr double kFleetGuardMinCoverage = 0.8;
// Absolute floors below which a rise is not judged (as the judge's guard
// metrics): CNPs or retransmits per host in the period, pause ratio.
inline constexpr double kFleetGuardMinEventsPerHost = 10;
inline constexpr double kFleetGuardPauseRatioFloor = 1e-4;
// The fleet's probe RTT p99 since the change over its p99 before it, at or
// above which the guard FAILs (rule "fleet_p99"). The same ratio as the
// judge's shared-fabric regression rule: at the last stage no control is left,
// so a before/after comparison is the only evidence on the objective's p99
// (a p99 constraint on the other series is checked on its own, below), and it
// is confounded
// by whatever else changed in that time; only a large rise is taken as the
// change's doing. The default, as the noise margin's, when the fleet's A/A
// spread could not be measured.
inline constexpr double kFleetP99RegressionRatio = 1.5;

// The fleet over one period: each host's counters (and, in a change's fleet
// baseline, its probe RTT and job sketches, which the step evaluator's
// cumulative test reads; the guard does not) and the objective's samples
// merged over all of them: probe RTT of the policy's objective peer class,
// or the job signal's series under STEP_TIME_P99 (ObjectiveSamples).
struct FleetPeriod {
  std::map<std::string, HostPeriod> hosts;
  QuantileSketch rtt;  // the objective's samples, merged
  // The same hosts over the period's first part (the step's onset: the first
  // quarter of the bake, at least two windows; its own `onset` null), which
  // tells a change's loss (there once it is applied) from an incident's
  // (begun later); null when not measured (a look within the onset, a
  // resumed bake, a trial's check after a judge PASS).
  std::shared_ptr<const FleetPeriod> onset;
  // The period's length in seconds (0: not known). The guard scales the
  // spread's margin by it (FleetGuard) and names the onset's in its summaries.
  double seconds = 0;
  // The p99 series the objective is not, merged as `rtt` is: the job
  // signal's under PROBE_RTT_P99 (other_metric "step_time_p99"), the probes'
  // under STEP_TIME_P99 ("probe_rtt_p99"). The guard reads it for a policy
  // constraint of that name (OtherP99Constraint): at the last stage no
  // control is left to hold the change to it. Both are empty when the policy
  // has no such constraint (StepEvaluator::FleetPeriods merges nothing then).
  std::string other_metric;
  QuantileSketch other;
  // In a change's fleet baseline: the fleet's A/A spread before the change
  // (MeasureFleetSpread); empty (no periods) when not measured.
  v1::FleetSpread spread;
};

// The p99 series that is not `objective`'s: "probe_rtt_p99" under
// STEP_TIME_P99, "step_time_p99" under a probe objective that names an op
// (the job signal's series), else "" (no other series).
std::string OtherP99Metric(const v1::Objective& objective);

// Whether `policy` has a constraint on OtherP99Metric (the fleet guard holds
// it, and a trial is checked on it fleet-wide: FleetGuardConfig::trial).
bool HoldsOtherP99(const v1::Policy& policy);

// The first of `constraints` on the series `period.other` holds (a
// "step_time_p99" constraint under a probe objective, "probe_rtt_p99" under
// the job's), or null: the objective's own p99 is the guard's fleet_p99 check.
const v1::Constraint* OtherP99Constraint(const std::vector<v1::Constraint>& constraints,
                                         const FleetPeriod& period);

// The fleet's A/A spread over `periods` (the change's hosts over consecutive
// pre-change periods of `period_seconds` each, in any order): for each metric
// the guard would check under `constraints` (throughput always; a p99
// constraint on `other` as its merged p99) and for "p99" (the merged
// objective samples), the root mean square of ln(ratio) over every
// pair of periods, each pair compared as FleetGuard compares before and since
// (the hosts with data in both, the same per-host rates; a pair is skipped
// when fewer than kFleetGuardMinCoverage of the hosts have data in both, a
// CNP or retransmit pair when the hosts average fewer than
// kFleetGuardMinEventsPerHost events in either period, a p99 pair when either
// period holds fewer than `min_rtt_samples` samples). `periods` counts the
// periods that had data from kFleetGuardMinCoverage of their hosts.
v1::FleetSpread MeasureFleetSpread(const std::vector<FleetPeriod>& periods, double period_seconds,
                                   const std::vector<v1::Constraint>& constraints,
                                   uint64_t min_rtt_samples);

struct FleetGuardConfig {
  // The policy's constraints. Throughput is always guarded: with the policy's
  // throughput constraint when it has one, else with the judge's default
  // tolerance.
  std::vector<v1::Constraint> constraints;
  double margin = kFleetGuardNoiseMargin;  // when the spread was not measured
  // Probes needed in each period's merged sketch before the p99 is judged
  // (the policy's guard.min_samples).
  uint64_t min_rtt_samples = 1000;
  uint32_t stage = 0;  // copied into the verdict
  int64_t now_unix_nanos = 0;
  // What FleetPeriod::rtt holds, for the evidence's words ("probe" or "job
  // step time").
  v1::Objective::Metric objective = v1::Objective::PROBE_RTT_P99;
  // The judge held the look this check follows: a FAIL is one only when the
  // step's onset shows it too (see FleetGuard).
  bool judge_held = false;
  // A canary-only trial (a campaign's): only the p99 constraint on the other
  // series is checked, fleet-wide (OtherP99Metric: the job's under a probe
  // objective, the probes' under STEP_TIME_P99). The trial's
  // canary-versus-control test cannot see a cost that crosses racks, as a
  // job's does when its ranks sit in canary and control racks alike (a
  // lockstep job runs at the pace of its slowest exchange); the fleet before
  // and during the trial can.
  bool trial = false;
};

// The fleet-wide guard over a change's stages: a pure function. Compares each
// constraint metric's fleet value now (over the current bake) with its value
// before the change started (the canary's baseline period), over the hosts
// present in both maps with measured time in both periods (same hosts,
// different time: no control group needed). Fleet values are the judge's
// per-host rates (throughput from tx bytes, CNPs and retransmits per second,
// worst-priority pause ratio) averaged over those hosts.
//
// The margin and the p99's FAIL ratio are set from `baseline.spread` for each
// metric it measured from at least kFleetSpreadMinPeriods periods, never
// above `config.margin` and kFleetP99RegressionRatio, which they are
// otherwise; each metric's note says which, and from what. When `now` is
// shorter than the spread's periods (now.seconds known and below them), the
// spread is scaled up by sqrt((1 + period / now.seconds) / 2): a shorter
// period holds fewer samples.
//
// A p99 constraint on the series that is not the objective
// (OtherP99Constraint: the job signal's step_time_p99 under a probe
// objective) is checked the same way on the merged sketches `other`: the
// fleet's p99 since over before, against the constraint's max_ratio widened by
// the margin (not evaluated when either period holds fewer than
// min_rtt_samples samples, as when a baseline recorded before this check
// carries no `other`). Unlike fleet_p99 it has no onset test of its own: a
// fleet incident that slows the job FAILs a change the judge passed (safety
// first; after a judge HOLD, see judge_held below), and a FAIL here, as any
// constraint's, is named before the objective's p99 is checked.
//
// Returns PASS with rule "fleet_constraint" when every metric is within its
// tolerance widened by the margin, FAIL with rule "fleet_constraint" naming
// the first metric beyond it (baseline, now, ratio, tolerance in the summary
// and evidence), FAIL with rule "fleet_p99" when the constraints hold but the
// fleet's p99 of the objective's samples (`config.objective`: probe RTT or
// the job signal; merged sketches, at least min_rtt_samples in each period)
// rose by the FAIL ratio or more (HOLD "fleet_shift" instead, the
// metric's outcome "hold", when `now.onset` holds min_rtt_samples probes
// whose p99 had risen less than that and less than kOnsetShareOfRise of the
// whole rise in ln terms: the rise began after the change took effect, as a
// fleet incident's does), or HOLD with rule "fleet_data"
// when fewer than kFleetGuardMinCoverage of `hosts` have data in both periods.
//
// With `config.judge_held` (the judge could not decide the look), every FAIL
// but fleet_p99's (which has the onset test above) is checked again over
// `now.onset` alone (the same check, on the onset's own length): a change
// acts once applied, so a loss it causes is there already. The FAIL stands
// (its summary says why) when the onset FAILs too, when there is no onset,
// when the onset cannot be judged (HOLD: too few hosts with data), and when
// the onset PASSes without telling a failed metric (not evaluated there for
// too few samples, or beyond its threshold but below its event floor).
// Otherwise the onset cleared every failed metric: the loss began later, as a
// fleet incident's does: HOLD "fleet_shift" with the FAIL's evidence, so
// neither a rollback nor a rejection of the change's values follows from a
// fleet incident during a look the judge could not decide.
// Evidence: groups "fleet_baseline" and "fleet" (hosts, per-host rates, p99
// and samples) and one metric "fleet_<metric>" per guarded metric (ratio =
// now / baseline, ratio_lower = the FAIL threshold, note with the figures),
// and "fleet_p99" (not_evaluated when a period has too few probes).
//
// With `config.trial`: the other p99's constraint only (nothing else, and no
// coverage HOLD: the merged sketches need no host coverage). FAIL with rule
// "fleet_constraint" above its threshold, else PASS with that rule (the
// metric's evidence says whether it was evaluated).
v1::Verdict FleetGuard(const FleetPeriod& baseline, const FleetPeriod& now, int hosts,
                       const FleetGuardConfig& config);

// The fleet guard FAILs a trial only beyond the tolerance widened by the
// noise margin (at most x1.21 for a 1.1 tolerance: the default margin; a
// measured spread narrows it). A tuner choosing a winner needs the point
// estimate too, as ConstraintPointExceeded gives it canary against control:
// names the first of `constraints` whose fleet-wide ratio in a trial's
// verdict `v` (evidence "fleet_<metric>"; a trial's check emits it for the
// other p99 only, FleetGuardConfig::trial) lies outside its tolerance, as
// "fleet <metric> X during the trial (the whole fleet before and during it)
// is beyond the tolerated T;", or returns "" when all are within (or not
// evaluated). A before/during ratio counts fleet drift too, so a trial in a
// drifting period can be refused for it (the safe side). The trial changed
// part of the fleet only: the whole fleet's ratio after a promotion is larger
// still, and the fleet guard holds it at the last stage.
std::string FleetPointExceeded(const v1::Verdict& v,
                               const std::vector<v1::Constraint>& constraints);

// Adds the fleet verdict's groups and metrics to `into` (a PASS of the judge
// that the fleet guard confirmed, or a HOLD of the judge the fleet guard did
// not fail), so every step's verdict shows the fleet figures. (For a trial's fleet FAIL the other
// way round: the judge's figures join the FAIL, which the campaign reads the trial's estimate
// from.)
void MergeFleetEvidence(const v1::Verdict& fleet, v1::Verdict* into);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ROLLOUT_FLEET_GUARD_H_
