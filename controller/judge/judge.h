#ifndef ROCETUNE_CONTROLLER_JUDGE_JUDGE_H_
#define ROCETUNE_CONTROLLER_JUDGE_JUDGE_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "model/quantile_sketch.h"
#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/policy.pb.h"

namespace rocetune::controller {

// What one host measured over one period (the pre-change baseline or the bake so
// far): its windows merged.
struct HostPeriod {
  QuantileSketch rtt;  // network RTT probes, seconds
  // The job signal's durations of the policy's series (objective.job and
  // .op; docs/job-signal.md), seconds; empty when the policy names none.
  QuantileSketch job;
  uint64_t probes_sent = 0;
  uint64_t probes_lost = 0;
  int windows_present = 0;     // windows with at least one report
  int windows_expected = 0;    // windows the period spans
  double covered_seconds = 0;  // sum of the reports' measured intervals
  // Summed counter deltas over the period (canonical names).
  uint64_t cnp = 0;  // cnp_handled (reaction point) + cnp_sent
  uint64_t retransmits = 0;
  uint64_t tx_bytes = 0;
  // Paused microseconds per priority (rx + tx pause duration), worst priority
  // taken by the judge.
  uint64_t pause_us[8] = {};
};

// The names of a verdict's evidence (v1::MetricEvidence.metric), for code that
// reads a verdict: the judge's p99 and p999 tests, each constraint's test
// (ConstraintEvidence), and the canary's own shift (AddCanaryOwnShift).
inline constexpr absl::string_view kP99Evidence = "ln_p99_did";
inline constexpr absl::string_view kP999Evidence = "ln_p999_did";
inline constexpr absl::string_view kCanaryOwnShiftEvidence = "ln_p99_canary_before_after";
inline constexpr absl::string_view kControlOwnShiftEvidence = "ln_p99_control_before_after";
// The canary's p99 over the change's first interval (the onset) against its
// baseline, pooled over canary hosts (AddCanaryOwnShift).
inline constexpr absl::string_view kCanaryOnsetShiftEvidence = "ln_p99_canary_onset";
// A rise is taken for an incident's only when the onset shows less than this
// share of it (in ln terms, pooled on both sides) and less than
// kControlShiftRatio: a change's rise is there from its first windows.
inline constexpr double kOnsetShareOfRise = 0.5;
// Whether a rise of ln `whole_ln` over a period began after its onset (ln
// `onset_ln` there): less than `fail_ratio` and less than kOnsetShareOfRise
// of the whole rise in the onset. Shared by AddCanaryOwnShift and the fleet
// guard's p99.
inline bool RiseBeganAfterOnset(double onset_ln, double whole_ln, double fail_ratio) {
  return onset_ln < std::log(fail_ratio) && onset_ln < kOnsetShareOfRise * whole_ln;
}
// The canary's excess probe loss over control (share, difference in differences).
inline constexpr absl::string_view kProbeLossEvidence = "probe_loss_did";
// "ln_<metric>_did" for a policy constraint on `metric`.
std::string ConstraintEvidence(absl::string_view metric);
// The evidence named `metric` in `v`, or nullptr.
const v1::MetricEvidence* FindEvidence(const v1::Verdict& v, absl::string_view metric);

// A p99 ratio between the periods before and after a change that means the
// fabric moved: the control group's own shift beyond it makes the judge HOLD
// ("control_shift"), and a canary whose own p99 rose by it as well turns that
// HOLD into FAIL ("fabric_regression") unless the rise began after the
// change took effect ("fleet_shift", AddCanaryOwnShift).
inline constexpr double kControlShiftRatio = 1.5;
// Probe RTTs a canary host needs in each period to count in its own shift.
inline constexpr uint64_t kCanaryOwnShiftMinProbes = 100;

// The samples the judge's latency tests (p99, p999, the canary's own shift,
// the group evidence) read under objective `metric`: the job signal's for
// STEP_TIME_P99, the probes' RTT otherwise.
inline const QuantileSketch& ObjectiveSamples(const HostPeriod& p, v1::Objective::Metric metric) {
  return metric == v1::Objective::STEP_TIME_P99 ? p.job : p.rtt;
}
// "job step times" or "probe RTTs", for notes and summaries.
inline const char* ObjectiveSamplesName(v1::Objective::Metric metric) {
  return metric == v1::Objective::STEP_TIME_P99 ? "job step times" : "probe RTTs";
}

struct HostInput {
  std::string host_id;
  std::string rack;     // pairing key (within-rack) or unit (rack-level)
  bool canary = false;  // false: control
  HostPeriod before;
  HostPeriod after;
  // The first part of `after`, right after the change took effect (the
  // onset; the step evaluator takes the first quarter of the bake in whole
  // windows, at least two, for canary hosts). Read only by
  // AddCanaryOwnShift; empty when not measured, and at a look whose period
  // is the onset itself.
  HostPeriod onset;
};

struct JudgeConfig {
  // What the latency tests read (ObjectiveSamples): PROBE_RTT_P99 or
  // STEP_TIME_P99 (the policy's objective.metric).
  v1::Objective::Metric objective = v1::Objective::PROBE_RTT_P99;
  // From the policy's Guard (defaults where 0): tolerance on the p99 ratio,
  // family-wise false-FAIL budget 1 - confidence, minimum probes per host and
  // period, minimum rack pairs, PASS width rule, hard guards.
  v1::Guard guard;
  std::vector<v1::Constraint> constraints;
  uint32_t look = 1;   // 1-based look within the bake
  uint32_t looks = 3;  // planned looks; interim looks spend little alpha
  // Looks after the final one (a HOLD there goes on until the HOLD limit)
  // that may still decide: each spends an equal part of the hold share of
  // every alpha and of the PASS error (HoldLooksAllowed); later ones, and all
  // of them when 0, only HOLD ("hold_looks_spent").
  uint32_t hold_looks = 0;
  uint32_t stage = 0;        // copied into the verdict
  bool guard_event = false;  // an agent's local guard fired on a canary host: FAIL
  std::string guard_event_detail;
  int64_t now_unix_nanos = 0;  // copied into the verdict
};

// The canary judge: a pure function. Reduces each (host, period) to ln p99
// (and ln p999 when there are enough samples) and compares canary with control
// in one of two designs, chosen from the racks of the hosts given:
//  - within-rack (some rack holds both canary and control hosts): pairs them
//    by rack, over the racks holding both (pure racks are then left out), and
//    tests the per-rack difference-in-differences
//    d_r = [ln q(canary, after) - ln q(canary, before)] - [ln q(control, after) - ln q(control,
//    before)] with a one-sided t test (df = R - 1);
//  - rack-level (every rack entirely canary or entirely control, with racks of
//    both kinds, e.g. a change applied per ToR): takes each rack's mean
//    before/after shift over its hosts and tests mean(canary racks) -
//    mean(control racks) with a one-sided pooled two-sample t test
//    (df = Rc + Rk - 2).
// Either test is against ln(1 + tolerance), spending the alpha budget over
// planned looks (Haybittle-Peto style) and metrics (Bonferroni). Guard metrics
// (CNP rate, pause ratio, retransmits, throughput) use the same design on log
// rates. Every metric's evidence note starts with the design used. Verdict
// order: hard guard -> FAIL; any test rejects -> FAIL; every HOLD rule
// satisfied and the p99 ratio's upper bound below 1 + pass_max_ucb_regression
// at the final look -> PASS; else HOLD.
// Missing or thin data is HOLD, never PASS. Deterministic: identical input,
// identical verdict and evidence, whatever the order of `hosts`.
// Defaults for Guard fields left at 0, host admission, the minimum racks per
// design, the alpha split, the rule names and the evidence fields are
// described in README.md next to this header.
v1::Verdict Judge(const std::vector<HostInput>& hosts, const JudgeConfig& config);

// The hold looks a HOLD limit of `max_hold_seconds` allows after the final of
// `looks` looks over `bake_seconds`: one every bake / looks, counted from the
// first HOLD at or after the final look, up to the look that passes the limit,
// plus one for a final look that was missed (a late tick). A step whose looks
// fall later still (a stalled loop skipping intervals) may reach a hold look
// without budget before its limit: that look only HOLDs, and the limit
// aborts. 0 when any of the three is 0.
uint32_t HoldLooksAllowed(uint32_t max_hold_seconds, uint32_t bake_seconds, uint32_t looks);

// The policy's hard limits (guard.max_pfc_pause_ratio,
// guard.max_retransmits_per_second; 0 = none) over the `after` periods of
// `hosts` (hosts the change runs on; no control, no statistics): per limit,
// the first host by id above it, as rule "guard:<metric>" and a FAIL summary
// naming the host and both figures. The judge applies them to its canary
// hosts; the step evaluator to every changed host when no control is left.
struct HardLimitBreach {
  std::string rule;
  std::string summary;
};
std::vector<HardLimitBreach> HardLimitBreaches(const std::vector<HostInput>& hosts,
                                               const v1::Guard& guard);

// The racks (units of evidence) a verdict needs at least under `guard`: its
// min_rack_pairs, else the default, and never fewer than 2. Rack pairs in
// the within-rack design; canary plus control racks in the rack-level one.
uint32_t MinRackPairs(const v1::Guard& guard);

// The family-wise false-FAIL budget of one step under `guard`:
// 1 - guard.confidence, else 1 - the default confidence.
double FalseFailBudget(const v1::Guard& guard);

// The cumulative test: from stage 1 on, a step is judged twice, each host
// against the step's own baseline and against its period before the change's
// first step. The two tests split the step's false-FAIL budget (Bonferroni):
// HalfFailBudget is the config each of them runs with. MergeCumulative adds
// the second verdict's metrics and dropped hosts to `v` (prefixed
// kCumulativePrefix) and turns `v` into its FAIL (rule kCumulativePrefix +
// rule) when it failed a test against the baseline (p99, p999, probe loss, a
// constraint's difference in differences) and `v` did not fail; the rest of
// it (hard guards, absolute bounds) reads the same bake as `v` and decides
// nothing. A HOLD or PASS of the cumulative test leaves `v` as it is.
inline constexpr char kCumulativePrefix[] = "cumulative_";
JudgeConfig HalfFailBudget(JudgeConfig config);
void MergeCumulative(const v1::Verdict& cumulative, v1::Verdict* v);

// What a design can show, estimated from an A/A input: `aa` is two
// consecutive periods of a fleet in which nothing changed (before, after),
// with the canary/control roles a change would give. The judge runs on it at
// the final look; from its p99 evidence (rack pairs or racks, the sd of a
// unit's difference) come the smallest p99 regression a final look FAILs 80%
// of the time (mde_ratio, e.g. 1.12 = +12%, beyond the guard's tolerance) and
// the upper bound a neutral change reaches (pass_bound_ratio, to compare with
// 1 + pass_max_ucb_regression). ok = false with `note` saying why when the
// input cannot be judged (too few racks or samples).
struct DesignPower {
  bool ok = false;
  int units = 0;  // rack pairs, or canary + control racks
  double sd = 0;  // of a unit's ln p99 difference
  double mde_ratio = 0;
  double pass_bound_ratio = 0;
  double pass_margin_ratio = 0;  // 1 + pass_max_ucb_regression
  std::string note;
};
DesignPower EstimateDesignPower(const std::vector<HostInput>& aa, const JudgeConfig& config);

// The canary/control ratio a constraint tolerates on its metric, as the judge
// applies it: a floor for a metric where lower is worse (throughput), a
// ceiling otherwise. NaN for a metric the judge does not know.
struct ConstraintTolerance {
  double ratio = 0;
  bool higher_is_worse = true;
  // True when `observed` (canary/control) is inside the tolerance.
  bool Within(double observed) const {
    return higher_is_worse ? observed <= ratio : observed >= ratio;
  }
};
ConstraintTolerance ToleranceOf(const v1::Constraint& c);

// The judge FAILs a constraint only when the loss is significant. A tuner
// choosing between trials needs the point estimate too: names the first of
// `constraints` whose canary/control ratio in `v` (evidence "ln_<metric>_did")
// lies outside its tolerance, as "<metric> canary/control R is beyond the
// tolerated T;", or returns "" when all are within (or not measured).
std::string ConstraintPointExceeded(const v1::Verdict& v,
                                    const std::vector<v1::Constraint>& constraints);

// The step evaluator's last stage after Judge(): adds the canary's own
// before/after p99 shift (evidence kCanaryOwnShiftEvidence, mean over canary
// hosts with kCanaryOwnShiftMinProbes in both periods; none when no host has)
// and control's (kControlOwnShiftEvidence, the same over control hosts). When
// the verdict is the control_shift HOLD (control itself moved) and the
// canary's shift is kControlShiftRatio or more, canary and control moved
// together: a bad change on canary senders fills the queues control crosses
// too, and a fleet incident moves both alike. The onset tells them apart: a
// change acts as soon as it is applied, an incident starts when it starts.
//  - the canary's p99 over the onset, pooled over canary hosts against their
//    pooled baseline (at least kCanaryOwnShiftMinProbes probes; evidence
//    kCanaryOnsetShiftEvidence), rose less than kControlShiftRatio and less
//    than kOnsetShareOfRise of the whole period's rise pooled the same way:
//    HOLD "fleet_shift" (the rise began after the change took effect, as an
//    incident's does). The change is neither failed nor passed; since the
//    period is cumulative, it usually holds until the HOLD limit aborts it;
//  - otherwise, also when the onset was not measured (too few probes, a look
//    whose period is the onset itself, a bake resumed after a restart):
//    FAIL "fabric_regression", the change is the likely cause.
// An incident that starts within the onset is still taken for the change.
void AddCanaryOwnShift(const std::vector<HostInput>& hosts, v1::Verdict* v,
                       v1::Objective::Metric objective = v1::Objective::PROBE_RTT_P99);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_JUDGE_JUDGE_H_
