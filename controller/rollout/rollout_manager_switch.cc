// RolloutManager, part three: changes of switch knobs, planned rack by rack
// (controller/rollout/switch_plan.h). The change state machine is in
// rollout_manager.cc; it pushes, judges and restores switch targets like any
// other, except that a switch is never judged itself (TakeBaseline skips it):
// the hosts of its rack are.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "controller/rollout/rollout_manager.h"
#include "controller/rollout/rollout_util.h"
#include "controller/rollout/switch_plan.h"

namespace rocetune::controller {

absl::StatusOr<std::vector<v1::HostTarget>> RolloutManager::PlanSwitchChange(
    const v1::Policy& policy, const std::vector<StoredHost>& selected, const Knobs& knobs,
    const std::string& seed, const PlanAvoid& avoid) const {
  const std::string& rack_label = policy.rollout().rack_label();
  const bool joint = !SplitKnobs(knobs).host.empty();
  std::vector<StoredHost> switches, hosts;
  std::set<std::string> taken;
  for (const StoredHost& h : selected) {
    (IsSwitchMember(h.info) ? switches : hosts).push_back(h);
    taken.insert(h.info.host_id());
  }
  // The racks the selection names: switch-only, the selected switches';
  // joint, the selected hosts'.
  std::set<std::string> racks;
  for (const StoredHost& h : joint ? hosts : switches) {
    auto it = h.info.labels().find(rack_label);
    if (it != h.info.labels().end()) racks.insert(it->second);
  }
  // The other members of those racks: switch-only, the hosts below (measured);
  // joint, their ToRs.
  for (const v1::HostInfo& info : fleet_->ListHosts({})) {
    if (info.state() != v1::HOST_CONNECTED || taken.contains(info.host_id())) continue;
    if (IsSwitchMember(info) != joint) continue;
    auto it = info.labels().find(rack_label);
    if (it == info.labels().end() || !racks.contains(it->second)) continue;
    absl::StatusOr<StoredHost> h = fleet_->GetStored(info.host_id());
    if (!h.ok()) continue;
    const std::string holder = ActiveChangeOf(info.host_id());
    if (!holder.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          joint ? "switch " : "host ", info.host_id(), " (", rack_label, "=", it->second,
          ") takes part in active change ", holder, " (",
          rollout_util::StateName(changes_.at(holder).state()),
          "): a change of switch knobs takes in the whole rack, and a member joins at most one "
          "active change"));
    }
    (joint ? switches : hosts).push_back(*std::move(h));
  }
  return PlanRacks(policy, switches, hosts, knobs, seed, avoid);
}

std::vector<std::string> RolloutManager::WithRackSwitches(const v1::Policy& policy,
                                                          std::vector<std::string> hosts) const {
  if (!HasSwitchKnobs(policy)) return hosts;
  const std::string rack_label =
      policy.rollout().rack_label().empty() ? "rack" : policy.rollout().rack_label();
  std::set<std::string> racks;
  for (const std::string& id : hosts) {
    absl::StatusOr<StoredHost> h = fleet_->GetStored(id);
    if (!h.ok()) continue;
    auto it = h->info.labels().find(rack_label);
    if (it != h->info.labels().end()) racks.insert(it->second);
  }
  std::set<std::string> have(hosts.begin(), hosts.end());
  for (const v1::HostInfo& info : fleet_->ListHosts({})) {
    if (!IsSwitchMember(info) || have.contains(info.host_id())) continue;
    auto it = info.labels().find(rack_label);
    if (it != info.labels().end() && racks.contains(it->second)) hosts.push_back(info.host_id());
  }
  return hosts;
}

}  // namespace rocetune::controller
