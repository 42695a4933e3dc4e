#ifndef ROCETUNE_CONTROLLER_TUNER_REHEARSAL_H_
#define ROCETUNE_CONTROLLER_TUNER_REHEARSAL_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/scenario.pb.h"
#include "sim/summary.h"

namespace rocetune::controller {

// Asked between slices of simulated time (1 ms each): a status that is not
// OK stops the simulation and is returned (a deadline passed, the controller
// is stopping). Empty: never stops.
using SimulationStop = std::function<absl::Status()>;

// Runs `scenario` in the fabric simulator (in process) with the DCQCN knob
// values `knobs` set on every host, and the switch ECN knobs among them
// (ecn.<profile>.green_min_threshold / green_max_threshold in bytes,
// green_drop_probability in percent) on every switch, and the DCQCN enables
// (rp_enable_mask, np_enable_mask: bit p = priority p; 0 turns DCQCN off,
// PFC alone then) on every host, and returns the simulator's summary. kInvalidArgument for an
// unknown knob name, a value outside the parameter's range, Kmin above Kmax or an invalid scenario.
absl::StatusOr<sim::SimSummary> SimulateWithKnobs(const v1::Scenario& scenario,
                                                  const std::map<std::string, int64_t>& knobs,
                                                  const SimulationStop& stop = {});

// Runs `scenario` in the fabric simulator (in process) with the DCQCN knob
// values `knobs` set on every host (canonical names; unknown or out-of-range
// names are kInvalidArgument) and returns the predicted figures: probe RTT
// p99 and p99.9, mean per-host throughput, CNPs sent per host and second, the
// worst link's paused share of the measured time, and the all-reduce step-time
// p99. kInvalidArgument also for a scenario without latency probes.
absl::StatusOr<v1::RehearsalResult> RehearseScenario(const v1::Scenario& scenario,
                                                     const std::map<std::string, int64_t>& knobs,
                                                     const SimulationStop& stop = {});

// The RehearsalResult figures of a simulator summary of `hosts` hosts (all
// zero when hosts <= 0 or nothing was measured).
v1::RehearsalResult SummaryFigures(const sim::SimSummary& summary, int hosts);

// Why `proposed` is a regression against `current`, "" when it is not: the
// probe p99 or one of the job's own figures (all-reduce step p99, incast burst
// p99; compared when the current run has them, and a figure the proposed run
// lacks then means none completed) worse by more than `tolerance`
// (relative), or throughput down more than 5%. Better on the probe and worse
// for the job is a regression.
std::string RehearsalRegression(const v1::RehearsalResult& current,
                                const v1::RehearsalResult& proposed, double tolerance);

// Runs both sets and fills a Rehearsal; `regression` and `regression_reason`
// from RehearsalRegression.
absl::StatusOr<v1::Rehearsal> Rehearse(const v1::Scenario& scenario, const std::string& name,
                                       const std::map<std::string, int64_t>& current,
                                       const std::map<std::string, int64_t>& proposed,
                                       double tolerance, const SimulationStop& stop = {});

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_TUNER_REHEARSAL_H_
