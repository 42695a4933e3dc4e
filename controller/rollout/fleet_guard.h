#ifndef ROCETUNE_CONTROLLER_ROLLOUT_FLEET_GUARD_H_
#define ROCETUNE_CONTROLLER_ROLLOUT_FLEET_GUARD_H_

#include <map>
#include <string>
#include <vector>

#include "controller/judge/judge.h"
#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/policy.pb.h"

namespace rocetune::controller {

// The noise margin of the fleet guard: a fleet ratio FAILs only when it lies
// beyond the constraint's tolerance by more than this factor (in ratio terms:
// below tolerance / (1 + margin) for throughput, above tolerance x (1 + margin)
// for the others). Measured on the simulator with neutral changes (A/A, 30
// checks over 6-second bakes): the fleet's before/after throughput ratio had
// mean 0.999, sd 0.021, range 0.954-1.031 (docs/tuning-loop.md, "The fleet
// guard").
inline constexpr double kFleetGuardNoiseMargin = 0.10;
// Hosts with data in both periods, as a share of the change's hosts, below
// which the guard cannot judge (HOLD).
inline constexpr double kFleetGuardMinCoverage = 0.8;
// Absolute floors below which a rise is not judged (as the judge's guard
// metrics): CNPs or retransmits per host in the period, pause ratio.
inline constexpr double kFleetGuardMinEventsPerHost = 10;
inline constexpr double kFleetGuardPauseRatioFloor = 1e-4;

struct FleetGuardConfig {
  // The policy's constraints. Throughput is always guarded: with the policy's
  // throughput constraint when it has one, else with the judge's default
  // tolerance.
  std::vector<v1::Constraint> constraints;
  double margin = kFleetGuardNoiseMargin;
  uint32_t stage = 0;  // copied into the verdict
  int64_t now_unix_nanos = 0;
};

// The fleet-wide guard over a change's stages: a pure function. Compares each
// constraint metric's fleet value now (over the current bake) with its value
// before the change started (the canary's baseline period), over the hosts
// present in both maps with measured time in both periods (same hosts,
// different time: no control group needed). Fleet values are the judge's
// per-host rates (throughput from tx bytes, CNPs and retransmits per second,
// worst-priority pause ratio) averaged over those hosts.
//
// Returns PASS with rule "fleet_constraint" when every metric is within its
// tolerance widened by the margin, FAIL with rule "fleet_constraint" naming
// the first metric beyond it (baseline, now, ratio, tolerance in the summary
// and evidence), or HOLD with rule "fleet_data" when fewer than
// kFleetGuardMinCoverage of `hosts` have data in both periods. Evidence:
// groups "fleet_baseline" and "fleet" (hosts, per-host rates) and one metric
// "fleet_<metric>" per guarded metric (ratio = now / baseline, ratio_lower =
// the FAIL threshold, note with the figures).
v1::Verdict FleetGuard(const std::map<std::string, HostPeriod>& baseline,
                       const std::map<std::string, HostPeriod>& now, int hosts,
                       const FleetGuardConfig& config);

// Adds the fleet verdict's groups and metrics to `into` (a PASS of the judge
// that the fleet guard confirmed), so every step's verdict shows the fleet
// figures.
void MergeFleetEvidence(const v1::Verdict& fleet, v1::Verdict* into);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ROLLOUT_FLEET_GUARD_H_
