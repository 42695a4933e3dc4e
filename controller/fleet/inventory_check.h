#ifndef ROCETUNE_CONTROLLER_FLEET_INVENTORY_CHECK_H_
#define ROCETUNE_CONTROLLER_FLEET_INVENTORY_CHECK_H_

#include "absl/status/status.h"
#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune::controller {

// Checks a parameter set meant for one host against that host's inventory as
// it last reported it, so that a set its agent would refuse is refused before
// it is queued:
//   - every device exists on the host and, when the set carries DCQCN values
//     or enable masks, has a congestion-control layout other than "none";
//   - every DCQCN parameter and mask exists in that layout: among the
//     parameters the device reported (current_parameters), else, before the
//     first report, in the layout's column of the parameter table;
//   - hard ranges (a value outside its range passes only when the device
//     already holds it, as on the agent), device names unique;
//   - the link: rate parameters (Mb/s) at most the device's fastest port, and
//     rpg_min_rate <= rpg_max_rate (0 = no limit) as they would be after the
//     apply.
// kInvalidArgument listing every violation, each naming the host, device and
// parameter; OK otherwise.
absl::Status CheckAgainstInventory(const v1::HostInfo& host, const v1::ParameterSet& set);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_FLEET_INVENTORY_CHECK_H_
