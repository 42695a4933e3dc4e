#ifndef ROCETUNE_CONTROLLER_ROLLOUT_BASELINE_RECORD_H_
#define ROCETUNE_CONTROLLER_ROLLOUT_BASELINE_RECORD_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "controller/judge/judge.h"
#include "controller/rollout/fleet_guard.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::controller {

// A step's baselines in the form the store keeps (v1::StepBaseline): per host
// the HostPeriod the judge reads (RTT and job-signal sketches, probe counts, windows, covered
// time, counter sums), and the fleet baseline: the same per host (the fleet
// guard reads its counters, the cumulative test its sketches) and the RTT
// sketch merged over them.
struct StepBaselines {
  uint32_t stage = 0;
  std::map<std::string, HostPeriod> hosts;
  FleetPeriod fleet;
};

v1::StepBaseline ToRecord(const std::string& change_id, const StepBaselines& b);

// kDataLoss naming the change and host for a record that does not decode (a
// sketch out of range, a missing host id, more than 8 priorities); nothing is
// returned then.
absl::StatusOr<StepBaselines> FromRecord(const v1::StepBaseline& record);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ROLLOUT_BASELINE_RECORD_H_
