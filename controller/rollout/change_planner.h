#ifndef ROCETUNE_CONTROLLER_ROLLOUT_CHANGE_PLANNER_H_
#define ROCETUNE_CONTROLLER_ROLLOUT_CHANGE_PLANNER_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/store/store.h"
#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/policy.pb.h"

namespace rocetune::controller {

// The knob values of a change or trial (canonical parameter name -> value).
using Knobs = std::map<std::string, int64_t>;

// Checks `knobs` against the policy: each names a knob of the policy, within
// its [min, max]; at least one. kInvalidArgument naming the knob otherwise.
absl::Status CheckKnobs(const v1::Policy& policy, const Knobs& knobs);

// The host's parameters before a change: its desired state when it has one,
// else what it reported in force (Hello / last Ack).
v1::ParameterSet PreviousParameters(const StoredHost& host);

// `overlay` merged into `base`, per parameter: every DCQCN value, enable mask
// and PFC field `overlay` names replaces (or adds to) `base`'s for the same
// device; devices and parameters it does not name keep `base`'s values. A
// device only `overlay` names is added. (A hand push merges this way, so that
// it never drops what the host's desired state already manages.)
v1::ParameterSet MergeParameterSets(const v1::ParameterSet& base, const v1::ParameterSet& overlay);

// `previous` with the knob values applied to every device that has DCQCN
// parameters (or, for a host that reported none, to every device of its
// inventory whose parameter layout is not "none"). kFailedPrecondition when the
// host has no device the knobs can apply to; kInvalidArgument when the result
// breaks a parameter's hard range, or when a switch knob is given for a host
// (or a host knob for a switch). For a switch (IsSwitchMember) the knobs go to
// its device "switch" (ApplySwitchKnobs).
absl::StatusOr<v1::ParameterSet> ApplyKnobs(const StoredHost& host,
                                            const v1::ParameterSet& previous, const Knobs& knobs);

// Members a plan should keep out of its canary and control groups where it
// can: member id -> rank, higher = placed later (a confirmation's: the canary
// members of the trial it confirms 2, its control members 1).
using PlanAvoid = std::map<std::string, int>;

// A stable 64-bit order key of `text` under `seed` (SHA-256): the planners'
// seeded order of hosts and racks.
uint64_t PlanOrderKey(const std::string& seed, const std::string& text);

// Splits `hosts` (the policy's selection, sorted or not) into canary, control
// and stages, deterministically for a seed:
// - racks come from the policy's rollout.rack_label (hosts without it form the
//   rack "");
// - the canary is max(min_canary_hosts, ceil(canary_fraction * N)) hosts,
//   taken one per rack in turn, each from a rack that also keeps a control
//   host; every canary host gets a control host of its own rack (the judge
//   also measures a rack's REST hosts as control until their stage);
// - stage n holds the unchanged hosts up to the cumulative fraction
//   stages[n-1] of N, control hosts last so they stay unchanged longest.
// - within a rack, hosts come in order of their `avoid` rank, and racks in
//   order of their hosts' total rank, so a confirmation's canary and control
//   hosts are ones the confirmed trial did not use wherever a rack has four
//   or more hosts; a rack of three gives a fresh canary against the old
//   control, a rack of two swaps canary and control.
// kFailedPrecondition when no rack has two hosts.
absl::StatusOr<std::vector<v1::HostTarget>> PlanHosts(const v1::Policy& policy,
                                                      const std::vector<StoredHost>& hosts,
                                                      const std::string& seed,
                                                      const PlanAvoid& avoid = {});

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ROLLOUT_CHANGE_PLANNER_H_
