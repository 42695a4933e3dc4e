#ifndef ROCETUNE_CONTROLLER_POLICY_KNOB_SPEC_H_
#define ROCETUNE_CONTROLLER_POLICY_KNOB_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace rocetune::controller {

// What a policy knob may name: a canonical DCQCN parameter (model/cc_params.h),
// "pfc.delay", "pfc.prevention_timeout_ms", "rp_enable_mask" or "np_enable_mask".
struct KnobSpec {
  std::string name;
  std::string unit;  // as in CcParamSpec::unit; "Mbps" marks a rate
  int64_t min = 0;   // hard range, inclusive: every knob bound must lie inside it
  int64_t max = 0;
  // A switch knob (model/switch_params.h): ecn.<profile>.<colour>_{min,max}_threshold
  // (bytes), ecn.<profile>.<colour>_drop_probability (percent), pfc.<port>.pfc_enable.
  bool is_switch = false;
  bool is_rate() const { return unit == "Mbps"; }
  // An ECN marking threshold (bytes), bounded by the switch buffer.
  bool is_threshold() const { return is_switch && unit == "bytes"; }
};

// nullopt when `name` is not a tunable parameter. Switch knobs are recognised by
// their form (any profile or port name), with hard ranges thresholds
// [0, 2^31-1] bytes, drop probability [1, 100] percent, pfc_enable [0, 255].
std::optional<KnobSpec> FindKnobSpec(absl::string_view name);

// Every tunable host parameter: the DCQCN table in firmware order, then the
// masks and PFC (switch knobs are patterns, not listed).
std::vector<KnobSpec> KnobSpecs();

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_POLICY_KNOB_SPEC_H_
