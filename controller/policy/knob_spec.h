#ifndef ROCETUNE_CONTROLLER_POLICY_KNOB_SPEC_H_
#define ROCETUNE_CONTROLLER_POLICY_KNOB_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace rocetune::controller {

// What a policy knob may name: a canonical DCQCN parameter (agent/host/cc_params),
// "pfc.delay", "pfc.prevention_timeout_ms", "rp_enable_mask" or "np_enable_mask".
struct KnobSpec {
  std::string name;
  std::string unit;  // as in CcParamSpec::unit; "Mbps" marks a rate
  int64_t min = 0;   // hard range, inclusive: every knob bound must lie inside it
  int64_t max = 0;
  bool is_rate() const { return unit == "Mbps"; }
};

// nullopt when `name` is not a tunable parameter.
std::optional<KnobSpec> FindKnobSpec(absl::string_view name);

// Every tunable parameter: the DCQCN table in firmware order, then the masks and PFC.
std::vector<KnobSpec> KnobSpecs();

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_POLICY_KNOB_SPEC_H_
