#ifndef ROCETUNE_CONTROLLER_ROLLOUT_JUDGE_INPUTS_H_
#define ROCETUNE_CONTROLLER_ROLLOUT_JUDGE_INPUTS_H_

#include "controller/judge/judge.h"
#include "controller/telemetry/telemetry_store.h"

namespace rocetune::controller {

// A host's merged windows as the judge reads them: CNPs (handled + sent),
// retransmits (retransmits, local ACK timeouts, sequence errors), bytes sent
// and paused microseconds per priority (rx + tx pause duration).
// `windows_expected` is the number of telemetry windows the period spans.
// The job signal's series that `objective` names (op objective.op of job
// objective.job, every job when empty; none when op is empty) go into
// HostPeriod::job, merged.
HostPeriod ToHostPeriod(const PeriodAggregate& aggregate, int windows_expected,
                        const v1::Objective& objective = v1::Objective());

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ROLLOUT_JUDGE_INPUTS_H_
