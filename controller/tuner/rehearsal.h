#ifndef ROCETUNE_CONTROLLER_TUNER_REHEARSAL_H_
#define ROCETUNE_CONTROLLER_TUNER_REHEARSAL_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/scenario.pb.h"

namespace rocetune::controller {

// Runs `scenario` in the fabric simulator (in process) with the DCQCN knob
// values `knobs` set on every host (canonical names; unknown or out-of-range
// names are kInvalidArgument) and returns the predicted figures.
absl::StatusOr<v1::RehearsalResult> RehearseScenario(const v1::Scenario& scenario,
                                                     const std::map<std::string, int64_t>& knobs);

// Runs both sets and fills a Rehearsal; `regression` when the proposed p99 is
// worse than the current one by more than `tolerance` (relative) or throughput
// drops by more than 5%.
absl::StatusOr<v1::Rehearsal> Rehearse(const v1::Scenario& scenario, const std::string& name,
                                       const std::map<std::string, int64_t>& current,
                                       const std::map<std::string, int64_t>& proposed,
                                       double tolerance);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_TUNER_REHEARSAL_H_
