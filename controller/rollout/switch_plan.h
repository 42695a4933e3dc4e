#ifndef ROCETUNE_CONTROLLER_ROLLOUT_SWITCH_PLAN_H_
#define ROCETUNE_CONTROLLER_ROLLOUT_SWITCH_PLAN_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/rollout/change_planner.h"
#include "controller/store/store.h"
#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/policy.pb.h"

namespace rocetune::controller {

// Changes of switch knobs (model/switch_params.h) are planned rack by
// rack: the unit of canary, control and stage is a rack (the value of the
// policy's rollout.rack_label, e.g. tor=<N>), whose ToR switch gets the switch
// knobs and whose hosts are the ones measured. With host knobs too (a joint
// policy) a canary rack's hosts also get the host knobs; control racks get
// nothing until their stage.

// The knob values of a change split by who takes them.
struct SplitKnobValues {
  Knobs host;
  Knobs sw;  // switch knobs
};
SplitKnobValues SplitKnobs(const Knobs& knobs);

// Whether the policy declares at least one switch knob (then its changes are
// planned by PlanRacks, not PlanHosts).
bool HasSwitchKnobs(const v1::Policy& policy);

// Whether a fleet member is a switch: labelled role=switch or reporting the
// device "switch".
bool IsSwitchMember(const v1::HostInfo& info);

// A change's target on a switch: its target or previous set has the device
// "switch". Such targets are pushed but never judged (a switch measures no
// probe RTT); the hosts of their rack are.
bool IsSwitchTarget(const v1::HostTarget& t);

// A host a switch change measures but never pushes (switch-only policies):
// its target set is empty.
bool IsMeasuredOnly(const v1::HostTarget& t);

// `previous` (a switch's desired or reported set) with the switch knob values
// written into its device "switch"; every other value carried over. Checked
// against the switch's inventory (CheckAgainstInventory): a knob the switch
// does not have, a threshold above its buffer, Kmin not below Kmax after the
// write. kInvalidArgument naming the switch otherwise.
absl::StatusOr<v1::ParameterSet> ApplySwitchKnobs(const StoredHost& sw,
                                                  const v1::ParameterSet& previous,
                                                  const Knobs& knobs);

// Plans a change of a policy with switch knobs, deterministically for a seed.
// `switches`: the switches taking part (each labelled with the rack label);
// `hosts`: the hosts of their racks - measured only for a switch-only policy,
// given the host knobs for a joint one.
// - A rack is "judgeable" when it has a switch and at least one host. At least
//   two are needed (one canary, one control): kFailedPrecondition otherwise,
//   naming the racks found.
// - Canary racks: max(ceil(canary_fraction * racks), 2) judgeable racks in
//   seeded order, more while their hosts are fewer than min_canary_hosts, at
//   most half the judgeable racks (so control racks are at least as many).
// - Every other judgeable rack is a control rack; racks that cannot be judged
//   (a switch without hosts, or, in a joint policy, hosts without a switch)
//   are REST. Stage n holds racks up to the cumulative fraction stages[n-1] of
//   all racks, at least one more rack per stage while any is left, never
//   leaving a single rack unchanged (it could not be judged), REST racks
//   first and control racks last.
// - Every member of a rack shares its role and stage; target, previous and
//   previous_version are filled: switches get the switch knobs, hosts the
//   host knobs (or, switch-only, an empty target: measured only).
// - Racks come in order of their members' highest `avoid` rank, then in
//   seeded order: a confirmation's canary racks are ones the confirmed trial
//   left alone, else its control racks, before its canary racks.
// kInvalidArgument when a switch has no rack label or a knob cannot apply.
absl::StatusOr<std::vector<v1::HostTarget>> PlanRacks(const v1::Policy& policy,
                                                      const std::vector<StoredHost>& switches,
                                                      const std::vector<StoredHost>& hosts,
                                                      const Knobs& knobs, const std::string& seed,
                                                      const PlanAvoid& avoid = {});

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ROLLOUT_SWITCH_PLAN_H_
