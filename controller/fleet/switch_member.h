#ifndef ROCETUNE_CONTROLLER_FLEET_SWITCH_MEMBER_H_
#define ROCETUNE_CONTROLLER_FLEET_SWITCH_MEMBER_H_

#include "absl/status/status.h"
#include "google/protobuf/map.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune::controller {

// The role label of switches in the fleet: selectors with role=switch pick
// switches, and hosts selected by any other role never include one.
inline constexpr char kRoleLabel[] = "role";
inline constexpr char kSwitchRole[] = "switch";

// Whether a Hello comes from a switch agent: it carries the one device named
// "switch" (agent/switch/switch_inventory.h) and a "switch.<platform>" capability.
bool IsSwitchHello(const v1::Hello& hello);

// kInvalidArgument naming the host when a switch's Hello labels it with another
// role, or a host's Hello claims role=switch.
absl::Status CheckSwitchRole(const v1::Hello& hello);

// The labels the fleet keeps for the Hello's host: the Hello's own, with
// role=switch added for a switch. REQUIRES: CheckSwitchRole(hello) is OK.
google::protobuf::Map<std::string, std::string> MemberLabels(const v1::Hello& hello);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_FLEET_SWITCH_MEMBER_H_
