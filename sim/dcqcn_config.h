#ifndef ROCETUNE_SIM_DCQCN_CONFIG_H_
#define ROCETUNE_SIM_DCQCN_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocetune/v1/scenario.pb.h"
#include "sim/reaction_point.h"

namespace rocetune::sim {

// The resolved DCQCN configuration of one simulated host.
struct DcqcnConfig {
  bool enabled = true;
  RpParams rp;
  int64_t min_time_between_cnps_us = 2;
};

// Range and ConnectX-5 default of one canonical DCQCN parameter (the names of
// model/cc_params.h and the fields of v1::DcqcnSettings).
struct DcqcnParamRange {
  const char* name;
  int64_t min;
  int64_t max;
  int64_t mlx5_default;
};
const std::map<std::string, DcqcnParamRange>& DcqcnParamRanges();

// Validates every set field against its range and fills in defaults.
// kInvalidArgument names the field, the value and the range.
absl::StatusOr<DcqcnConfig> ResolveDcqcn(const v1::DcqcnSettings& settings);

// Every canonical parameter with its effective value (set or default).
std::map<std::string, int64_t> DcqcnValues(const v1::DcqcnSettings& settings);

// Sets one parameter by canonical name. kInvalidArgument for an unknown name or
// a value out of range; `settings` is unchanged then.
absl::Status SetDcqcnValue(v1::DcqcnSettings* settings, const std::string& name, int64_t value);

}  // namespace rocetune::sim

#endif  // ROCETUNE_SIM_DCQCN_CONFIG_H_
