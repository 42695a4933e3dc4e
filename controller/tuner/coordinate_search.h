#ifndef ROCETUNE_CONTROLLER_TUNER_COORDINATE_SEARCH_H_
#define ROCETUNE_CONTROLLER_TUNER_COORDINATE_SEARCH_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/tuner/tuner.h"
#include "rocetune/v1/policy.pb.h"

namespace rocetune::controller {

// Coordinate search with adaptive steps over a policy's knobs.
//
// The search walks the knobs one at a time (in policy order) from `start`. On
// each knob it tries one step in one direction; when that is not an
// improvement, the other direction at the same step; when both fail, the knob's
// step halves (or, already at its smallest step, the knob is marked stuck) and
// the search moves to the next knob. An improvement (objective_ratio <
// 1 - min_improvement with constraints_ok) becomes the incumbent, doubles that
// knob's step and is followed by another step in the same direction; it also
// clears every stuck mark and brings every other knob's step (after a pair,
// every knob's) back to at least its first size (knobs interact: a move that
// failed from the old incumbent may pay from the new one). A trial without a verdict (no
// objective_ratio) counts as not an improvement.
//
// Steps: additive knobs move by a multiple of Knob.step, starting at a quarter
// of the range (rounded down to the step grid, at least one step, at most
// Knob.max_step when set). log_scale knobs multiply or divide the value by
// 2^e, e starting at a quarter of log2(max / max(min, step)) and at least 1;
// the change is rounded to the step grid and kept within
// [Knob.step, Knob.max_step]; a value of 0 moves up by one step.
// Every proposal lies in [min, max] on the grid origin + n * step, where the
// origin is the start value clamped into [min, max]; a move past a bound is
// clamped to the last grid point inside it. Points already measured (the
// start and every trial) are skipped without a trial.
//
// Compensated pairs: a move that improves strongly (objective_ratio <
// 1 - min_improvement) but breaks one of the policy's constraints is never
// accepted alone. When the trials carry constraint_ratios, the search keeps
// the single-knob moves measured from the current incumbent and, before the
// next single-knob move, proposes such a move `a` joined with a feasible move
// `b` on another knob from the same incumbent (both knobs at the values those
// trials measured), when a separable model predicts the pair to improve
// (ratio_a * ratio_b < 1 - min_improvement) and to meet every constraint
// `a` measured (per metric, ratio_a * ratio_b / ratio_incumbent within the
// judge's tolerance for that Constraint, controller/judge ToleranceOf; the
// start's ratios are 1). Among the candidates it takes the largest predicted
// worst margin (ln distance to the tolerance), then the lowest predicted
// objective, then the earliest trials. Each `a` gets at most one pair. A pair
// that improves becomes the incumbent (the current knob's visit restarts from
// it); one that does not leaves the sweep where it was. Without constraint
// data (older trials, a policy without constraints, metrics the judge does
// not know) no pair is proposed and the search is the one described above.
//
// The search stops after `budget` trials ("budget spent") or when every knob is
// stuck ("converged"). State is rebuilt from the trials on every call: the
// same (start, trials) always give the same decision.
class CoordinateSearch : public Tuner {
 public:
  // kInvalidArgument for a policy without knobs, a knob with min > max,
  // step <= 0, max_step < 0, a duplicate or empty parameter, or
  // tuner.min_improvement outside [0, 1). `budget` 0 = the policy's
  // tuner.trial_budget, or 20 when that is 0 too.
  static absl::StatusOr<std::unique_ptr<CoordinateSearch>> Create(const v1::Policy& policy,
                                                                  uint32_t budget);

  TunerDecision Next(const KnobValues& start, const std::vector<TrialResult>& trials) override;

  uint32_t budget() const { return budget_; }
  double min_improvement() const { return min_improvement_; }

 private:
  CoordinateSearch(std::vector<v1::Knob> knobs, std::vector<v1::Constraint> constraints,
                   uint32_t budget, double min_improvement)
      : knobs_(std::move(knobs)),
        constraints_(std::move(constraints)),
        budget_(budget),
        min_improvement_(min_improvement) {}

  std::vector<v1::Knob> knobs_;
  std::vector<v1::Constraint> constraints_;
  uint32_t budget_;
  double min_improvement_;
};

// The value a knob starts from: start[parameter] when present, else Knob.start,
// else the parameter's ConnectX-5 firmware default (model/cc_params.h),
// else Knob.min; clamped into [min, max].
int64_t KnobOrigin(const v1::Knob& knob, const KnobValues& start);

// Checks the knob list (see CoordinateSearch::Create); shared by the tuners.
absl::Status ValidateKnobs(const v1::Policy& policy);

// Whether a trial is an improvement over the incumbent it was measured against:
// its objective ratio below 1 - the trial's own min_improvement when it has
// one, else 1 - `min_improvement`.
bool TrialImproves(const TrialResult& trial, double min_improvement);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_TUNER_COORDINATE_SEARCH_H_
