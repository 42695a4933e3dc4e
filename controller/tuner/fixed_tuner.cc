#include "controller/tuner/fixed_tuner.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "controller/tuner/coordinate_search.h"

namespace rocetune::controller {

absl::StatusOr<std::unique_ptr<FixedTuner>> FixedTuner::Create(const v1::Policy& policy) {
  if (absl::Status s = ValidateKnobs(policy); !s.ok()) return s;
  if (policy.tuner().fixed().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("policy \"", policy.name(), "\": FIXED tuner without tuner.fixed values"));
  }
  std::vector<v1::Knob> knobs(policy.knobs().begin(), policy.knobs().end());
  KnobValues fixed;
  for (const auto& [name, value] : policy.tuner().fixed()) {
    const std::string& knob = name;  // clang 14 cannot capture a structured binding
    auto it = std::find_if(knobs.begin(), knobs.end(),
                           [&knob](const v1::Knob& k) { return k.parameter() == knob; });
    if (it == knobs.end()) {
      return absl::InvalidArgumentError(absl::StrCat("policy \"", policy.name(),
                                                     "\": tuner.fixed names \"", name,
                                                     "\", which is not a knob of the policy"));
    }
    fixed[name] = std::clamp(value, it->min(), it->max());
  }
  const double mi = policy.tuner().min_improvement() == 0 ? 0.02 : policy.tuner().min_improvement();
  return std::unique_ptr<FixedTuner>(new FixedTuner(std::move(knobs), std::move(fixed), mi));
}

TunerDecision FixedTuner::Next(const KnobValues& start, const std::vector<TrialResult>& trials) {
  TunerDecision d;
  d.best = start;
  for (const v1::Knob& k : knobs_) d.best[k.parameter()] = KnobOrigin(k, start);
  KnobValues candidate = d.best;
  for (const auto& [name, value] : fixed_) candidate[name] = value;
  if (trials.empty()) {
    d.next = std::move(candidate);
    d.reason = "fixed values";
    return d;
  }
  if (TrialImproves(trials.front(), min_improvement_)) {
    d.best = std::move(candidate);
    d.best_ratio = *trials.front().objective_ratio;
    d.reason = "fixed values tried: improvement";
  } else {
    d.reason = "fixed values tried: no improvement";
  }
  return d;
}

}  // namespace rocetune::controller
