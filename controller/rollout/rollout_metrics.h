#ifndef ROCETUNE_CONTROLLER_ROLLOUT_ROLLOUT_METRICS_H_
#define ROCETUNE_CONTROLLER_ROLLOUT_ROLLOUT_METRICS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::controller {

// Why a change's hosts were returned to their previous parameters (the
// `reason` label of rocetune_controller_changes_rolled_back_total).
enum class RollbackReason {
  kJudgeFail,         // the judge's verdict was FAIL
  kNack,              // a host refused the change's set
  kGuard,             // a host's local guard restored its last-known-good set
  kManual,            // an operator rolled back or aborted the change
  kHoldTimeout,       // the judge held longer than the policy allows
  kRestart,           // the controller restarted during the bake
  kFabricRegression,  // the canary's own p99 rose with control's (shared fabric)
  kFleetGuard,        // the fleet guard: a constraint or the p99 lost fleet-wide
  kLeaseExpired,      // a host restored last-known-good: its provisional lease expired
};

// "judge_fail", "nack", "guard", "manual", "hold_timeout", "restart", "fabric_regression",
// "fleet_guard", "lease_expired".
const char* RollbackReasonName(RollbackReason reason);
// The reason for a FAIL verdict's rule: "nack", "local_guard", "lease_expired",
// "fabric_regression", "fleet_constraint", "fleet_constraint_bound" and "fleet_p99" (all
// "fleet_guard"); any
// other rule is a judge FAIL.
RollbackReason RollbackReasonForRule(const std::string& rule);

// The tuning loop's series on the controller's /metrics (docs/metrics.md):
//   rocetune_controller_changes{state}                      gauge, changes per state
//   rocetune_controller_change_transitions_total{to_state}  counter
//   rocetune_controller_changes_rolled_back_total{reason}   counter (rollbacks and aborts of
//                                                          changes; not tuning trials)
//   rocetune_controller_judge_verdicts_total{verdict}       counter, PASS / FAIL / HOLD
//   rocetune_controller_change_hold_seconds                 gauge, seconds on HOLD
//   rocetune_controller_change_p99_seconds{group,period}    gauge, canary|control x
//                                                          baseline|bake of the latest verdict
//   rocetune_controller_active_change{change,state}         gauge 1 per change in CANARY/STAGE
//   rocetune_controller_campaign_trials_total{outcome}      counter
//   rocetune_controller_restores_unconfirmed                gauge, hosts whose restore is
//                                                          not confirmed past the bound
// The counters count from this process's start. Thread-safe.
class RolloutMetrics {
 public:
  explicit RolloutMetrics(prometheus::Registry& registry);

  // A change entered `to`.
  void RecordTransition(v1::ChangeState to);
  // A change ended ROLLED_BACK or ABORTED with its hosts restored.
  void RecordRollback(RollbackReason reason);
  // The verdict that decided a look (the last of the look's verdicts: a fleet
  // guard FAIL after the judge's HOLD counts as the FAIL alone). Called for
  // looks only: the FAIL verdicts recorded for a NACK, a local-guard restore
  // or an expired lease are not looks and are not counted.
  void RecordVerdict(const v1::Verdict& verdict);
  // A tuning trial ended with `outcome` (improved, not_improved, fail, hold, aborted).
  void RecordTrial(const std::string& outcome);

  // Recomputes the gauges from every change at time `now`: the per-state
  // counts, the active changes (CANARY or STAGE), and for the active change
  // whose step started last, its HOLD duration and the p99 evidence of its
  // latest verdict (series absent while there is none).
  void Refresh(const std::map<std::string, v1::Change>& changes, absl::Time now);
  // Hosts whose restore (the last push of a rolled-back or aborted change)
  // was NACKed, or is neither acked within
  // RolloutOptions::restore_confirm_timeout nor since.
  void SetRestoresUnconfirmed(int hosts);

 private:
  prometheus::Family<prometheus::Gauge>& changes_;
  prometheus::Family<prometheus::Counter>& transitions_;
  prometheus::Family<prometheus::Counter>& rolled_back_;
  prometheus::Family<prometheus::Counter>& verdicts_;
  prometheus::Gauge& hold_seconds_;
  prometheus::Family<prometheus::Gauge>& p99_;
  prometheus::Family<prometheus::Gauge>& active_;
  prometheus::Family<prometheus::Counter>& trials_;
  prometheus::Gauge& restores_unconfirmed_;

  absl::Mutex mu_;
  std::map<v1::ChangeState, prometheus::Gauge*> by_state_ ABSL_GUARDED_BY(mu_);
  // Series of the last Refresh, removed when they no longer apply.
  std::map<std::pair<std::string, std::string>, prometheus::Gauge*> active_series_
      ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, prometheus::Gauge*> p99_series_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ROLLOUT_ROLLOUT_METRICS_H_
