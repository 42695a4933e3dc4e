// The rollout manager's fleet guard (see fleet_guard.h): the fleet baseline
// taken when a change's canary starts, and the check at the end of each step.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "controller/policy/policy_loader.h"
#include "controller/rollout/fleet_guard.h"
#include "controller/rollout/judge_inputs.h"
#include "controller/rollout/rollout_manager.h"
#include "controller/rollout/rollout_util.h"
#include "controller/rollout/switch_plan.h"
#include "daemon/logging.h"

namespace rocetune::controller {

using rollout_util::Secs;

FleetPeriod RolloutManager::FleetPeriods(const v1::Change& c, absl::Time from, absl::Time to,
                                         int expected, const std::string& peer_class) const {
  FleetPeriod out;
  for (const v1::HostTarget& h : c.hosts()) {
    // Switches report levels, not tx_bytes: as in the judge's baseline, they
    // are not part of the fleet's host evidence.
    if (IsSwitchTarget(h)) continue;
    std::shared_ptr<HostTelemetry> t = telemetry_->Find(h.host_id());
    PeriodAggregate agg;
    if (t != nullptr && to > from) agg = t->Aggregate(from, to, peer_class);
    HostPeriod p = ToHostPeriod(agg, expected);
    // Sketches of one store share its accuracy: a merge cannot fail, and a
    // host that somehow could not merge is left out of the fleet's p99 only.
    if (!p.rtt.empty()) out.rtt.Merge(p.rtt).IgnoreError();
    p.rtt = QuantileSketch();  // per host, the guard reads counters only
    out.hosts[h.host_id()] = std::move(p);
  }
  return out;
}

void RolloutManager::TakeFleetBaseline(const v1::Change& c, absl::Time step_start) {
  absl::StatusOr<v1::PolicyVersion> pv = policies_.Get(c.policy_name(), c.policy_version());
  const v1::Policy policy = WithDefaults(pv.ok() ? pv->policy() : v1::Policy());
  const absl::Time boundary = telemetry_->WindowStart(telemetry_->WindowIndex(step_start));
  const absl::Duration baseline = Secs(policy.rollout().baseline_seconds());
  const int expected =
      std::max<int>(1, static_cast<int>(std::ceil(absl::FDivDuration(baseline, options_.window))));
  fleet_baselines_[c.id()] =
      FleetPeriods(c, boundary - baseline, boundary, expected, policy.objective().peer_class());
}

void RolloutManager::GuardFleet(v1::Change* c, absl::Time now) {
  auto step = steps_.find(c->id());
  if (step == steps_.end() || c->verdicts_size() == 0) return;
  absl::StatusOr<v1::PolicyVersion> pv = policies_.Get(c->policy_name(), c->policy_version());
  const v1::Policy policy = WithDefaults(pv.ok() ? pv->policy() : v1::Policy());
  FleetGuardConfig cfg;
  cfg.constraints.assign(policy.constraints().begin(), policy.constraints().end());
  cfg.stage = c->state() == v1::STAGE ? c->stage() : 0;
  cfg.min_rtt_samples = policy.guard().min_samples();
  cfg.now_unix_nanos = absl::ToUnixNanos(now);
  auto base = fleet_baselines_.find(c->id());
  v1::Verdict v;
  if (base == fleet_baselines_.end()) {
    v.set_outcome(v1::Verdict::HOLD);
    v.set_unix_nanos(cfg.now_unix_nanos);
    v.set_stage(cfg.stage);
    v.set_rule("fleet_data");
    v.set_summary("HOLD: no fleet baseline recorded for this change");
  } else {
    const absl::Time from = step->second.after_start;
    const absl::Time to = telemetry_->WindowStart(telemetry_->WindowIndex(now - ReportGrace()));
    const int expected =
        static_cast<int>(telemetry_->WindowIndex(to) - telemetry_->WindowIndex(from));
    const FleetPeriod since =
        FleetPeriods(*c, from, to, std::max(1, expected), policy.objective().peer_class());
    // FleetPeriods lists every host the change measures (switches excepted),
    // with or without data: the coverage rule's denominator.
    v = FleetGuard(base->second, since, static_cast<int>(since.hosts.size()), cfg);
  }
  v1::Verdict& last = *c->mutable_verdicts(c->verdicts_size() - 1);
  v.set_look(last.look());
  v.set_looks(last.looks());
  if (v.outcome() == v1::Verdict::PASS) {
    MergeFleetEvidence(v, &last);
    return;
  }
  LogInfo("fleet guard", {{"change", c->id()},
                          {"outcome", v1::Verdict::Outcome_Name(v.outcome())},
                          {"summary", v.summary()}});
  AddVerdict(c, std::move(v));
}

}  // namespace rocetune::controller
