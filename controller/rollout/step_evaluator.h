#ifndef ROCETUNE_CONTROLLER_ROLLOUT_STEP_EVALUATOR_H_
#define ROCETUNE_CONTROLLER_ROLLOUT_STEP_EVALUATOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "controller/judge/judge.h"
#include "controller/rollout/fleet_guard.h"
#include "controller/telemetry/telemetry_store.h"
#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/agent.pb.h"
#include "rocetune/v1/policy.pb.h"

namespace rocetune::controller {

// What one look of a step is judged on.
struct StepLook {
  const v1::Change* change = nullptr;
  v1::Policy policy;  // with its defaults filled in
  // The step's first window boundary after the push, and the baseline each
  // measured host had when the step started.
  absl::Time after_start;
  // The step's bake restarted after a controller restart (after_start moved
  // past it): its first windows are not the change's onset, so no rise is
  // told from an incident by it (OnsetEnd).
  bool resumed = false;
  const std::map<std::string, HostPeriod>* baseline = nullptr;
  // Every host's counters over the canary's baseline period; null when none
  // was recorded.
  const FleetPeriod* fleet_baseline = nullptr;
  uint32_t look = 0;  // 1-based; past `looks` after a HOLD at the final look
  uint32_t looks = 1;
  absl::Time now;
  // Each host's version in force as the fleet last heard it (its ack, NACK,
  // local guard restore or Hello); a host not in it has confirmed nothing.
  std::map<std::string, std::string> current_versions;
};

// Every rule that decides a look of a step, in the order they apply:
//  1. the experiment: the judge over canary and control (controller/judge:
//     admit, design, contrasts, hard guards, latency tests, constraints,
//     decide), then the canary's own shift ("fabric_regression" turns a
//     control_shift HOLD into FAIL when the canary's own p99 rose x1.5,
//     already in the step's first quarter; "fleet_shift" HOLDs when that
//     rise began later, as a fleet incident's does); at a stage after the
//     canary, the cumulative test too: the same judge over every host
//     changed so far against the hosts not yet changed, each against its
//     period before the change's first step (the fleet baseline), since each
//     step's own baseline already holds what earlier steps did (a slow creep
//     shows in no single step); its FAIL of a test against the baseline
//     fails the step (rule "cumulative_<rule>"), its metrics join the
//     verdict ("cumulative_<metric>"), and the two tests share the step's
//     false-FAIL budget (each spends half); or,
//     when the step leaves no
//     host unchanged, the policy's hard limits over every changed host at
//     every look (FAIL "guard:<metric>", HardLimitBreaches), else
//     "no_control_left": a PASS at the final look, nothing before it;
//  2. at the final look (and each hold look after it) of a PASS or HOLD: the
//     fleet guard over every host of the change against its fleet baseline.
//     After a PASS its figures join the PASS, or its HOLD / FAIL follows it;
//     after a HOLD only its FAIL follows (and decides: a change the judge
//     cannot decide is still held to the fleet's figures, not left to the
//     HOLD limit) when the step's onset shows the loss too or cannot tell
//     it (FleetGuard's judge_held);
//     otherwise the judge's HOLD stays the deciding verdict, the fleet's
//     figures joined to it (and, for a loss absent from the onset, the
//     fleet guard's "fleet_shift" summary). A trial (canary_only) has a fleet
//     baseline only when its policy holds the other p99 series
//     (HoldsOtherP99), and is then checked on that constraint alone
//     (FleetGuardConfig::trial); its FAIL carries the judge's figures too;
//  3. at the final look of a PASS (trials included): every host the step
//     changed must confirm it, or a HOLD "canary_unconfirmed" names those
//     that did not: not running the version pushed to them (no ack), or
//     silent (reports in fewer than 80% of the step's windows, the share the
//     judge admits). A silent canary host is dropped by the judge, and the
//     rest could otherwise PASS without it.
// Between looks, as they arrive: a NACK of the version the change pushed to a
// host ("nack"), a local guard restore that judged that version
// ("local_guard") and a host that restored it when its provisional lease
// expired ("lease_expired") fail the change (Nack, GuardEvent). The HOLD
// limit is the rollout manager's, over the verdicts returned here.
// The GuardEvent kind of an agent that restored its last-known-good set when
// a provisional set's lease ran out without the controller.
inline constexpr char kLeaseExpiredKind[] = "lease_expired";

class StepEvaluator {
 public:
  // `report_grace`: how long after a window ends its reports are taken to
  // have arrived. `telemetry` is not owned.
  StepEvaluator(TelemetryStore* telemetry, absl::Duration report_grace)
      : telemetry_(telemetry), report_grace_(report_grace) {}

  // Whether the change's current step leaves any host unchanged.
  static bool HasControl(const v1::Change& c);
  // The verdicts of this look, in the order they are recorded; the last one
  // decides. Empty when nothing is due (no control, before the final look).
  std::vector<v1::Verdict> Look(const StepLook& in) const;

  // A host refused `version`: a FAIL "nack" when it is the version `c`
  // pushed to that host.
  static std::optional<v1::Verdict> Nack(const v1::Change& c, const std::string& host_id,
                                         const std::string& version, const std::string& error,
                                         absl::Time now);
  // A host's local guard restored its last-known-good set: a FAIL
  // "local_guard" when it judged the version `c` pushed to that host (or
  // names none); an event about another version says nothing about `c`.
  static std::optional<v1::Verdict> GuardEvent(const v1::Change& c, const std::string& host_id,
                                               const v1::GuardEvent& event, absl::Time now);

  // Every host of `c` (switches excepted) over [from, to): counters per host,
  // the policy objective's samples merged over all of them (`rtt`), the other
  // p99 series too when a constraint of the policy names it (`other`: the job
  // signal's step_time_p99 under a probe objective that names an op, the
  // probes' probe_rtt_p99 under STEP_TIME_P99); with `keep_host_rtt` each
  // host's probes and job-signal series (ToHostPeriod) too (the fleet
  // baseline, which the cumulative test reads).
  FleetPeriod FleetPeriods(const v1::Change& c, absl::Time from, absl::Time to, int expected,
                           const v1::Policy& policy, bool keep_host_rtt = false) const;
  // The end of the last complete window at `now`: it closed at least the
  // report grace ago, so the reports that span its end have arrived.
  absl::Time CompleteUntil(absl::Time now) const;

 private:
  v1::Verdict Experiment(const StepLook& in) const;
  // The cumulative test's input at a stage after the canary: the step's
  // hosts (`step`, as the judge gets them) with each host's period before
  // the change's first step (the fleet baseline) as its `before`. Empty at
  // the canary step, without a fleet baseline that kept each host's probes,
  // or without both groups.
  std::vector<HostInput> CumulativeInputs(const StepLook& in,
                                          const std::vector<HostInput>& step) const;
  v1::Verdict NoControlLeft(const StepLook& in) const;
  // No control left: a FAIL when a changed host breached a hard limit since
  // the step started.
  std::optional<v1::Verdict> HardLimits(const StepLook& in) const;
  // The fleet guard over the step up to the look, with the step's onset
  // (OnsetEnd) for its onset tests (a trial's only when the judge held: its
  // check has no other onset test); `judge_held`: the judge held this look
  // (FleetGuardConfig::judge_held).
  v1::Verdict Fleet(const StepLook& in, bool judge_held) const;
  // The end of the step's onset: its first quarter of the bake rounded up to
  // whole windows, at least two. A change acts once applied, so a rise it
  // causes is there already; a rise that is not began later, as a fleet
  // incident's does (AddCanaryOwnShift, FleetGuard's "fleet_shift").
  // Returns after_start (no onset) when the onset does not end before `to`
  // (at such a look it is the whole period judged and tells nothing apart)
  // and for a resumed bake.
  absl::Time OnsetEnd(const StepLook& in, absl::Time to) const;
  // Rule 3: "" when every changed host confirms, else why not, host by host.
  std::string Unconfirmed(const StepLook& in) const;

  TelemetryStore* const telemetry_;
  const absl::Duration report_grace_;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ROLLOUT_STEP_EVALUATOR_H_
