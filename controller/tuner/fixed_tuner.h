#ifndef ROCETUNE_CONTROLLER_TUNER_FIXED_TUNER_H_
#define ROCETUNE_CONTROLLER_TUNER_FIXED_TUNER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/tuner/tuner.h"
#include "rocetune/v1/policy.pb.h"

namespace rocetune::controller {

// Proposes the policy's tuner.fixed values once (over `start`, each clamped
// into its knob's [min, max]); done after the first trial. The values become
// the incumbent when that trial improves by at least min_improvement with
// constraints_ok.
class FixedTuner : public Tuner {
 public:
  // kInvalidArgument when the knobs are invalid (ValidateKnobs), tuner.fixed is
  // empty or names a parameter that is not a knob of the policy.
  static absl::StatusOr<std::unique_ptr<FixedTuner>> Create(const v1::Policy& policy);

  TunerDecision Next(const KnobValues& start, const std::vector<TrialResult>& trials) override;

 private:
  FixedTuner(std::vector<v1::Knob> knobs, KnobValues fixed, double min_improvement)
      : knobs_(std::move(knobs)), fixed_(std::move(fixed)), min_improvement_(min_improvement) {}

  std::vector<v1::Knob> knobs_;
  KnobValues fixed_;
  double min_improvement_;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_TUNER_FIXED_TUNER_H_
