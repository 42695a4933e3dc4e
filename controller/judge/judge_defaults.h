#ifndef ROCETUNE_CONTROLLER_JUDGE_JUDGE_DEFAULTS_H_
#define ROCETUNE_CONTROLLER_JUDGE_JUDGE_DEFAULTS_H_

#include <cstdint>

namespace rocetune::controller {

// The values of the Guard fields a policy leaves at 0, in one place: the
// controller fills them into every policy it acts on (WithDefaults in
// controller/policy), so the judge, the fleet guard and the propose-time
// probe-rate check read the same numbers; the judge also applies them to a
// guard it is given raw (tests, judge_sim).
inline constexpr double kDefaultConfidence = 0.995;
// Probes (or job-signal events) per host per period for a p99.
inline constexpr uint64_t kDefaultMinSamples = 2000;
inline constexpr uint32_t kDefaultMinRackPairs = 6;
inline constexpr double kDefaultPassMaxUcbRegression = 0.05;

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_JUDGE_JUDGE_DEFAULTS_H_
