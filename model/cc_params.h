#ifndef ROCETUNE_MODEL_CC_PARAMS_H_
#define ROCETUNE_MODEL_CC_PARAMS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune {

// Which firmware congestion-control block a DCQCN parameter belongs to.
enum class CcSide { kRp, kNp, kGeneral };

// One canonical DCQCN parameter (mlx5 firmware names, lower case). Facts and sources:
// docs/nic-facts.md sections 1.2 to 1.5.
struct CcParamSpec {
  const char* name;  // canonical name, the key in v1::DeviceParameters.dcqcn
  const char* unit;  // "us", "Mbps", "bool", "percent", "fixed_1/1024", ...
  int64_t min;       // hard range, inclusive
  int64_t max;
  std::optional<int64_t> mlx5_default;  // ConnectX-5 firmware default; varies by firmware
  CcSide side;
  const char* ofed_file;     // file in <if>/ecn/roce_rp|roce_np/, nullptr if not exposed there
  const char* debugfs_file;  // file in mlx5/<bdf>/cc_params/, nullptr if not exposed there
};

// Names of the per-priority enable masks (0..255, bit p = priority p).
inline constexpr char kRpEnableMask[] = "rp_enable_mask";
inline constexpr char kNpEnableMask[] = "np_enable_mask";

// Hard limits of PfcSettings fields.
inline constexpr int64_t kPfcDelayMax = 65535;        // ieee_pfc.delay is a u16
inline constexpr int64_t kPfcPreventionAuto = 65535;  // "auto"
inline constexpr int64_t kPfcPreventionAutoMs = 100;  // what mlx5 sets (and reports) for "auto"
inline constexpr int64_t kPfcPreventionMinMs = 80;    // mlx5 MLX5E_PFC_PREVEN_TOUT_MIN_MSEC
inline constexpr int64_t kPfcPreventionMaxMs = 8000;  // mlx5 MLX5E_PFC_PREVEN_TOUT_MAX_MSEC

// A write to `written` also sets `affected` to `value` (upstream cong.c: writing
// np_cnp_prio forces cnp_prio_mode = 0; writing rtt_resp_dscp sets
// rtt_resp_dscp_valid = 1). Writers must write `affected` after `written`.
struct CcWriteSideEffect {
  const char* written;
  const char* affected;
  int64_t value;
};
absl::Span<const CcWriteSideEffect> CcWriteSideEffects();

// The canonical table, in firmware field order (RP, then NP, then general).
absl::Span<const CcParamSpec> CcParamTable();

// nullptr when `name` is not a canonical parameter name.
const CcParamSpec* FindCcParam(absl::string_view name);

// Checks every value of `params` against the hard ranges: DCQCN values, enable
// masks and PFC settings. Returns kInvalidArgument listing every violation
// (unknown names included) as "<device>: <name>=<value> outside [<min>, <max>]".
absl::Status ValidateParameters(const v1::DeviceParameters& params);

// ValidateParameters for every device, plus: device names are non-empty and
// unique. Lists the violations of all devices.
absl::Status ValidateParameterSet(const v1::ParameterSet& set);

// A DCQCN value outside its hard range.
struct CcRangeViolation {
  std::string device;
  std::string name;
  int64_t value;
  std::string text;  // as in ValidateParameters' message
};

// ValidateParameterSet, except that DCQCN values outside their hard ranges are
// appended to `range` instead of failing the check (when `range` is null they
// fail it, as in ValidateParameterSet). The Applier uses this to accept an
// out-of-range value that equals what the device already holds (firmware
// defaults vary): such a value is never written.
absl::Status ValidateParameterSetExceptDcqcnRanges(const v1::ParameterSet& set,
                                                   std::vector<CcRangeViolation>* range);

// Parameters named more than once for one device in a serialized
// v1::ParameterSet. Parsing keeps only the last value of a map key, so the
// repetition is visible only on the wire. One line per repetition:
// "<device>: parameter <name> given twice (<first>, then <second>)". Empty when
// there is none or the bytes do not parse (the parser reports those).
std::vector<std::string> RepeatedParameters(absl::string_view parameter_set_wire);

// RepeatedParameters of the desired state's set in a serialized
// v1::ControllerMessage (empty when it carries none).
std::vector<std::string> RepeatedParametersInControllerMessage(absl::string_view wire);

}  // namespace rocetune

#endif  // ROCETUNE_MODEL_CC_PARAMS_H_
