#include "controller/fleet/switch_member.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rocetune::controller {

bool IsSwitchHello(const v1::Hello& hello) {
  bool device = false, capability = false;
  for (const v1::NicDevice& d : hello.devices()) device |= d.name() == kSwitchRole;
  for (const std::string& c : hello.capabilities()) capability |= absl::StartsWith(c, "switch.");
  return device && capability;
}

absl::Status CheckSwitchRole(const v1::Hello& hello) {
  auto it = hello.labels().find(kRoleLabel);
  const bool is_switch = IsSwitchHello(hello);
  if (is_switch && it != hello.labels().end() && it->second != kSwitchRole) {
    return absl::InvalidArgumentError(
        absl::StrCat("host ", hello.host_id(), " is a switch agent but labelled role=", it->second,
                     ": a switch's role is \"switch\" (drop the role label or set it to switch)"));
  }
  if (!is_switch && it != hello.labels().end() && it->second == kSwitchRole) {
    return absl::InvalidArgumentError(
        absl::StrCat("host ", hello.host_id(),
                     " claims role=switch but is not a switch agent (no device \"switch\" with a "
                     "switch.* capability)"));
  }
  return absl::OkStatus();
}

google::protobuf::Map<std::string, std::string> MemberLabels(const v1::Hello& hello) {
  google::protobuf::Map<std::string, std::string> labels = hello.labels();
  if (IsSwitchHello(hello)) labels[kRoleLabel] = kSwitchRole;
  return labels;
}

}  // namespace rocetune::controller
