#include "controller/tuner/tuner.h"

#include "absl/strings/str_cat.h"
#include "controller/tuner/coordinate_search.h"
#include "controller/tuner/fixed_tuner.h"

namespace rocetune::controller {

absl::StatusOr<std::unique_ptr<Tuner>> MakeTuner(const v1::Policy& policy, uint32_t budget) {
  switch (policy.tuner().kind()) {
    // A policy without a tuner section gets the default search.
    case v1::Tuner::KIND_UNSPECIFIED:
    case v1::Tuner::COORDINATE_DESCENT: {
      auto t = CoordinateSearch::Create(policy, budget);
      if (!t.ok()) return t.status();
      return std::unique_ptr<Tuner>(std::move(*t));
    }
    case v1::Tuner::FIXED: {
      auto t = FixedTuner::Create(policy);
      if (!t.ok()) return t.status();
      return std::unique_ptr<Tuner>(std::move(*t));
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("policy \"", policy.name(),
                                                 "\": unknown tuner kind ",
                                                 static_cast<int>(policy.tuner().kind())));
}

}  // namespace rocetune::controller
