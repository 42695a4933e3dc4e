#include "controller/rollout/rollout_metrics.h"

#include <limits>
#include <set>
#include <utility>

namespace rocetune::controller {
namespace {

constexpr v1::ChangeState kStates[] = {v1::PROPOSED, v1::APPROVED, v1::CANARY,      v1::STAGE,
                                       v1::DONE,     v1::REJECTED, v1::ROLLED_BACK, v1::ABORTED};

constexpr RollbackReason kReasons[] = {
    RollbackReason::kJudgeFail,        RollbackReason::kNack,        RollbackReason::kGuard,
    RollbackReason::kManual,           RollbackReason::kHoldTimeout, RollbackReason::kRestart,
    RollbackReason::kFabricRegression, RollbackReason::kFleetGuard,  RollbackReason::kLeaseExpired,
};

constexpr const char* kVerdicts[] = {"PASS", "FAIL", "HOLD"};

bool IsActive(v1::ChangeState s) { return s == v1::CANARY || s == v1::STAGE; }

// GroupEvidence::group -> (group, period) labels.
bool P99Labels(const std::string& evidence_group, std::pair<std::string, std::string>* out) {
  if (evidence_group == "canary")
    *out = {"canary", "bake"};
  else if (evidence_group == "control")
    *out = {"control", "bake"};
  else if (evidence_group == "canary_baseline")
    *out = {"canary", "baseline"};
  else if (evidence_group == "control_baseline")
    *out = {"control", "baseline"};
  else
    return false;
  return true;
}

}  // namespace

const char* RollbackReasonName(RollbackReason reason) {
  switch (reason) {
    case RollbackReason::kJudgeFail:
      return "judge_fail";
    case RollbackReason::kNack:
      return "nack";
    case RollbackReason::kGuard:
      return "guard";
    case RollbackReason::kManual:
      return "manual";
    case RollbackReason::kHoldTimeout:
      return "hold_timeout";
    case RollbackReason::kRestart:
      return "restart";
    case RollbackReason::kFabricRegression:
      return "fabric_regression";
    case RollbackReason::kFleetGuard:
      return "fleet_guard";
    case RollbackReason::kLeaseExpired:
      return "lease_expired";
  }
  return "judge_fail";
}

RollbackReason RollbackReasonForRule(const std::string& rule) {
  if (rule == "nack") return RollbackReason::kNack;
  if (rule == "local_guard") return RollbackReason::kGuard;
  if (rule == "lease_expired") return RollbackReason::kLeaseExpired;
  if (rule == "fabric_regression") return RollbackReason::kFabricRegression;
  if (rule == "fleet_constraint" || rule == "fleet_p99" || rule == "fleet_constraint_bound")
    return RollbackReason::kFleetGuard;
  return RollbackReason::kJudgeFail;
}

RolloutMetrics::RolloutMetrics(prometheus::Registry& registry)
    : changes_(prometheus::BuildGauge()
                   .Name("rocetune_controller_changes")
                   .Help("Changes in each state.")
                   .Register(registry)),
      transitions_(prometheus::BuildCounter()
                       .Name("rocetune_controller_change_transitions_total")
                       .Help("Changes that entered each state.")
                       .Register(registry)),
      rolled_back_(prometheus::BuildCounter()
                       .Name("rocetune_controller_changes_rolled_back_total")
                       .Help("Changes rolled back or aborted with their hosts restored, by "
                             "reason (tuning trials not included).")
                       .Register(registry)),
      verdicts_(
          prometheus::BuildCounter()
              .Name("rocetune_controller_judge_verdicts_total")
              .Help("Looks of changes and trials by the outcome that decided them, one per look.")
              .Register(registry)),
      hold_seconds_(prometheus::BuildGauge()
                        .Name("rocetune_controller_change_hold_seconds")
                        .Help("How long the active change has been on HOLD at its final look, "
                              "in seconds (0 when none is).")
                        .Register(registry)
                        .Add({})),
      p99_(prometheus::BuildGauge()
               .Name("rocetune_controller_change_p99_seconds")
               .Help("p99 of the active change's canary and control hosts, before the step "
                     "(baseline) and since (bake), from its latest verdict: of probe RTT, or of "
                     "the job signal's step times when the policy's objective is STEP_TIME_P99.")
               .Register(registry)),
      active_(prometheus::BuildGauge()
                  .Name("rocetune_controller_active_change")
                  .Help("1 for each change in CANARY or STAGE.")
                  .Register(registry)),
      trials_(prometheus::BuildCounter()
                  .Name("rocetune_controller_campaign_trials_total")
                  .Help("Tuning campaign trials that ended, by outcome.")
                  .Register(registry)),
      restores_unconfirmed_(
          prometheus::BuildGauge()
              .Name("rocetune_controller_restores_unconfirmed")
              .Help("Hosts whose restore (the last push of a rolled-back or aborted change) "
                    "was NACKed, or not acked within --restore_confirm_timeout.")
              .Register(registry)
              .Add({})) {
  absl::MutexLock lock(&mu_);
  for (v1::ChangeState s : kStates) {
    by_state_[s] = &changes_.Add({{"state", v1::ChangeState_Name(s)}});
    transitions_.Add({{"to_state", v1::ChangeState_Name(s)}});
  }
  for (RollbackReason r : kReasons) rolled_back_.Add({{"reason", RollbackReasonName(r)}});
  for (const char* v : kVerdicts) verdicts_.Add({{"verdict", v}});
}

void RolloutMetrics::RecordTransition(v1::ChangeState to) {
  if (to == v1::CHANGE_STATE_UNSPECIFIED) return;
  transitions_.Add({{"to_state", v1::ChangeState_Name(to)}}).Increment();
}

void RolloutMetrics::RecordRollback(RollbackReason reason) {
  rolled_back_.Add({{"reason", RollbackReasonName(reason)}}).Increment();
}

void RolloutMetrics::RecordVerdict(const v1::Verdict& verdict) {
  const char* name = nullptr;
  switch (verdict.outcome()) {
    case v1::Verdict::PASS:
      name = "PASS";
      break;
    case v1::Verdict::FAIL:
      name = "FAIL";
      break;
    case v1::Verdict::HOLD:
      name = "HOLD";
      break;
    default:
      return;
  }
  verdicts_.Add({{"verdict", name}}).Increment();
}

void RolloutMetrics::RecordTrial(const std::string& outcome) {
  trials_.Add({{"outcome", outcome}}).Increment();
}

void RolloutMetrics::SetRestoresUnconfirmed(int hosts) { restores_unconfirmed_.Set(hosts); }

void RolloutMetrics::Refresh(const std::map<std::string, v1::Change>& changes, absl::Time now) {
  std::map<v1::ChangeState, int> counts;
  std::set<std::pair<std::string, std::string>> active;
  const v1::Change* latest = nullptr;
  for (const auto& [id, c] : changes) {
    ++counts[c.state()];
    if (!IsActive(c.state())) continue;
    active.insert({id, v1::ChangeState_Name(c.state())});
    if (latest == nullptr || c.step_started_unix_nanos() > latest->step_started_unix_nanos()) {
      latest = &c;
    }
  }
  std::map<std::pair<std::string, std::string>, double> p99;
  double held = 0;
  if (latest != nullptr) {
    if (latest->hold_since_unix_nanos() != 0) {
      held = std::max(
          0.0, absl::ToDoubleSeconds(now - absl::FromUnixNanos(latest->hold_since_unix_nanos())));
    }
    if (latest->verdicts_size() > 0) {
      const v1::Verdict& v = latest->verdicts(latest->verdicts_size() - 1);
      for (const v1::GroupEvidence& g : v.groups()) {
        std::pair<std::string, std::string> labels;
        if (!P99Labels(g.group(), &labels)) continue;
        p99[labels] = g.samples() > 0 ? g.p99_seconds() : std::numeric_limits<double>::quiet_NaN();
      }
    }
  }
  absl::MutexLock lock(&mu_);
  for (auto& [state, gauge] : by_state_) gauge->Set(counts[state]);
  hold_seconds_.Set(held);
  for (auto it = active_series_.begin(); it != active_series_.end();) {
    if (active.contains(it->first)) {
      ++it;
      continue;
    }
    active_.Remove(it->second);
    it = active_series_.erase(it);
  }
  for (const auto& key : active) {
    auto [it, added] = active_series_.emplace(key, nullptr);
    if (added) it->second = &active_.Add({{"change", key.first}, {"state", key.second}});
    it->second->Set(1);
  }
  for (auto it = p99_series_.begin(); it != p99_series_.end();) {
    if (p99.contains(it->first)) {
      ++it;
      continue;
    }
    p99_.Remove(it->second);
    it = p99_series_.erase(it);
  }
  for (const auto& [key, value] : p99) {
    auto [it, added] = p99_series_.emplace(key, nullptr);
    if (added) it->second = &p99_.Add({{"group", key.first}, {"period", key.second}});
    it->second->Set(value);
  }
}

}  // namespace rocetune::controller
