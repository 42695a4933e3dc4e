// The rollout manager's fleet guard (see fleet_guard.h): the fleet baseline
// taken when a change's canary starts. The check at the end of each step is
// the StepEvaluator's (step_evaluator.h).
#include <algorithm>
#include <cmath>
#include <vector>

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

void RolloutManager::TakeFleetBaseline(const v1::Change& c, absl::Time step_start) {
  absl::StatusOr<v1::PolicyVersion> pv = policies_.Get(c.policy_name(), c.policy_version());
  const v1::Policy policy = WithDefaults(pv.ok() ? pv->policy() : v1::Policy());
  const absl::Time boundary = telemetry_->WindowStart(telemetry_->WindowIndex(step_start));
  const absl::Duration baseline = Secs(policy.rollout().baseline_seconds());
  const int expected =
      std::max<int>(1, static_cast<int>(std::ceil(absl::FDivDuration(baseline, options_.window))));
  // Per host sketches for the cumulative test, which a trial (one step) never runs.
  FleetPeriod fleet = evaluator_.FleetPeriods(c, boundary - baseline, boundary, expected, policy,
                                              /*keep_host_rtt=*/!c.canary_only());
  // The fleet's own A/A spread: the same hosts over the periods of the
  // baseline's length before it, as far back as the telemetry keeps them
  // (periods without data from enough hosts are not counted).
  std::vector<FleetPeriod> periods;
  periods.push_back(fleet);
  for (int k = 1; k < kFleetSpreadMaxPeriods; ++k) {
    const absl::Time to = boundary - k * baseline;
    periods.push_back(evaluator_.FleetPeriods(c, to - baseline, to, expected, policy));
  }
  fleet.spread = MeasureFleetSpread(periods, absl::ToDoubleSeconds(baseline),
                                    {policy.constraints().begin(), policy.constraints().end()},
                                    policy.guard().min_samples());
  fleet_baselines_[c.id()] = std::move(fleet);
}

}  // namespace rocetune::controller
