#ifndef ROCETUNE_CONTROLLER_TUNER_TUNER_H_
#define ROCETUNE_CONTROLLER_TUNER_TUNER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rocetune/v1/policy.pb.h"

namespace rocetune::controller {

using KnobValues = std::map<std::string, int64_t>;

// The measured result of one trial.
struct TrialResult {
  KnobValues knobs;
  // Objective relative to the incumbent of its time (in the fleet: the
  // drift-corrected canary-versus-control ratio, divided by the incumbent's;
  // in the simulator: against the incumbent on the same traffic): lower is
  // better, 1.0 = no change. Absent when the trial gave no verdict (HOLD).
  std::optional<double> objective_ratio;
  // The improvement this trial must show to count (the fleet's trials carry
  // the one they were labelled with: the policy's, or the trial's own noise
  // band); absent = the tuner's tuner.min_improvement.
  std::optional<double> min_improvement;
  bool constraints_ok = true;  // false: a constraint or guard failed (counts as worse)
  // The policy's constraints as measured: Constraint.metric -> the candidate's
  // value over the reference's, where the reference is the start values
  // measured the same way for the whole campaign (the control group in the
  // fleet), so the start's own ratios are 1. Metrics the policy does not
  // constrain are ignored. Optional: without it (older stored trials) the
  // search behaves as it would without constraint data (no pair moves, see
  // coordinate_search.h).
  std::map<std::string, double> constraint_ratios = {};
};

struct TunerDecision {
  // The next candidate, or nullopt when the tuner is done.
  std::optional<KnobValues> next;
  KnobValues best;          // incumbent after the trials so far
  double best_ratio = 1.0;  // product of accepted improvements, relative to the start
  std::string reason;       // why this candidate / why done ("budget spent", "converged")
};

// Chooses the next candidate from the policy's knobs and the past trials. A
// pure function of its inputs (state is rebuilt from the trials), so a
// restarted controller continues where it stopped. Never proposes a value
// outside a knob's [min, max] or off its step grid relative to the start.
class Tuner {
 public:
  virtual ~Tuner() = default;
  virtual TunerDecision Next(const KnobValues& start, const std::vector<TrialResult>& trials) = 0;
};

// The policy's tuner: COORDINATE_DESCENT (coordinate search with adaptive
// steps, controller/tuner/coordinate_search.h; also for KIND_UNSPECIFIED, a
// policy without a tuner section) or FIXED (controller/tuner/fixed_tuner.h).
// kInvalidArgument for a policy without knobs, invalid knob bounds or steps,
// or an unknown kind. `budget` 0 = the policy's tuner.trial_budget (default 20).
absl::StatusOr<std::unique_ptr<Tuner>> MakeTuner(const v1::Policy& policy, uint32_t budget = 0);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_TUNER_TUNER_H_
