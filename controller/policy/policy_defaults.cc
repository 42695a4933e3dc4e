#include <algorithm>
#include <cstdint>
#include <limits>

#include "controller/judge/judge_defaults.h"
#include "controller/policy/policy_loader.h"

namespace rocetune::controller {

v1::Policy WithDefaults(const v1::Policy& policy) {
  v1::Policy p = policy;
  v1::RolloutPlan& r = *p.mutable_rollout();
  if (r.rack_label().empty()) r.set_rack_label("rack");
  if (r.looks() == 0) r.set_looks(3);
  if (r.baseline_seconds() == 0) r.set_baseline_seconds(r.bake_seconds());
  if (r.min_canary_hosts() == 0) r.set_min_canary_hosts(1);

  v1::Guard& g = *p.mutable_guard();
  if (g.min_rack_pairs() == 0) g.set_min_rack_pairs(kDefaultMinRackPairs);
  if (g.confidence() == 0) g.set_confidence(kDefaultConfidence);
  if (g.min_samples() == 0) g.set_min_samples(kDefaultMinSamples);
  if (g.max_hold_seconds() == 0) {
    const uint64_t hold = 3 * static_cast<uint64_t>(r.bake_seconds());
    g.set_max_hold_seconds(
        static_cast<uint32_t>(std::min<uint64_t>(hold, std::numeric_limits<uint32_t>::max())));
  }
  if (g.pass_max_ucb_regression() == 0) g.set_pass_max_ucb_regression(kDefaultPassMaxUcbRegression);
  if (g.provisional_lease_seconds() == 0) {
    g.set_provisional_lease_seconds(kDefaultProvisionalLeaseSeconds);
  }

  v1::Tuner& t = *p.mutable_tuner();
  if (t.trial_budget() == 0) t.set_trial_budget(20);
  // min_improvement stays 0 when unset: a campaign then derives it per trial
  // from the measured noise (controller/campaign/campaigns.h); the offline
  // search uses 0.02.

  v1::ApprovalRule& a = *p.mutable_approval();
  if (a.approvers() == 0) a.set_approvers(1);
  return p;
}

}  // namespace rocetune::controller
