#ifndef ROCETUNE_TESTS_E2E_CAMPAIGN_FLOW_H_
#define ROCETUNE_TESTS_E2E_CAMPAIGN_FLOW_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rocetune/v1/admin.pb.h"
#include "tests/e2e/e2e_env.h"

namespace rocetune::e2e {

// What the fleet measured over `n` fleet summaries a second apart: the median
// probe p99 over all probes and, when `peer_class` is not empty, over that
// peer class; the mean throughput per host.
struct FleetFigures {
  double p99_us = 0;
  double class_p99_us = 0;  // 0 without a peer class
  double gbps = 0;
  // The job signal's p99 (us) per op the simulated job reports
  // ("incast_burst", "allreduce_step"): what the training job feels.
  std::map<std::string, double> job_p99_us;
};
FleetFigures MeasureFleet(Env& env, int n, const std::string& peer_class = "");

// " job_<op>_p99_before_us=.. job_<op>_p99_after_us=.. job_<op>_p99_change_pct=.." for every
// op both measurements have: the job's figures for a BENCH line.
std::string JobFigures(const FleetFigures& before, const FleetFigures& after);

// The first id in rocetunectl's `out` that starts with `prefix` ("t-", "c-"),
// or "".
std::string IdIn(const std::string& out, const std::string& prefix);

// The trials of campaign `t` that count against its budget: all but the
// retries of HOLD trials and the confirmations of a winner.
int BudgetedTrials(const v1::Campaign& t);

// The newest confirmation of campaign `t`'s best values and the search trial
// it confirms (nullptr when there is none).
const v1::Trial* Confirmation(const v1::Campaign& t);
const v1::Trial* ConfirmedTrial(const v1::Campaign& t);

// A rack-level campaign's confirmation (`conf`, Confirmation()) confirmed the
// winner on fresh racks: every canary member (ToR and hosts) new to it, its
// interval below 1. `out` (tuning show) goes into the failure messages.
void ExpectConfirmedOnFreshRacks(const v1::Trial* conf, const std::string& out);

// Campaign `t` ended without a promotion because its confirmation did not
// confirm the search's winner (a noisy constraint reading, or a gain that did
// not hold up): by design nothing is proposed. Anything else without a
// promotion fails. Prints `bench`'s BENCH line with both estimates.
void ExpectUnconfirmedEnd(const v1::Campaign& t, const std::string& out, const std::string& bench);

// Campaign `t`'s promotion `c` ended ROLLED_BACK because the fleet guard
// found the whole fleet's job p99 beyond the policy's step_time_p99
// constraint (its FAIL threshold) at a step of the promotion: better on the
// probe and worse for the job is a regression, so by design the winner does
// not reach DONE. Checks that this, and nothing else, decided (the last
// verdict a FAIL "fleet_constraint" whose fleet_step_time_p99 evidence failed
// above its threshold, no other fleet metric failed) and that all `members`
// (hosts and ToRs) report the campaign's start values again (waiting up to
// `timeout`). Prints `bench`'s BENCH line with the job's fleet ratio and both
// estimates.
void ExpectJobRollback(Env& env, const v1::Campaign& t, const v1::Change& c, int members,
                       const std::string& bench, absl::Duration timeout);

// The rollout, guard and approval sections of the rack-level campaign
// policies (e2e tests, campaign_bench): `canary_fraction` of the racks whole
// against the rest, 6-second bakes on 1 s windows, straight to all racks.
std::string RackLevelRollout(double canary_fraction);

// "ratio [lower, upper]" of a trial, for BENCH lines ("-" when null).
std::string EstimateOf(const v1::Trial* tr);

// The value `host` holds for parameter `name` on its first device that has it,
// or -1.
int64_t ParameterOf(const v1::HostInfo& host, const std::string& name);

// A tuning campaign of policy `policy_name` as the two-person rule wants it:
// alice starts it, her own approval is refused (PERMISSION_DENIED), bob
// approves it. Waits until it is no longer RUNNING (at most `timeout`) and
// returns it; an error naming the step and rocetunectl's output otherwise.
absl::StatusOr<v1::Campaign> RunApprovedCampaign(Env& env, const std::string& policy_name,
                                                 absl::Duration timeout);

// A campaign's promotion `change`: alice (the campaign's proposer) may not
// approve it, bob does. Waits until it leaves APPROVED, CANARY and STAGE (at
// most `timeout`) and returns it.
absl::StatusOr<v1::Change> PromoteAndWait(Env& env, const std::string& change,
                                          absl::Duration timeout);

}  // namespace rocetune::e2e

#endif  // ROCETUNE_TESTS_E2E_CAMPAIGN_FLOW_H_
