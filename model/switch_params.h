#ifndef ROCETUNE_MODEL_SWITCH_PARAMS_H_
#define ROCETUNE_MODEL_SWITCH_PARAMS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune {

// Switch knobs travel in DeviceParameters{device: "switch"}.dcqcn under these names:
//   ecn.<profile>.<colour>_min_threshold      bytes (Kmin)
//   ecn.<profile>.<colour>_max_threshold      bytes (Kmax)
//   ecn.<profile>.<colour>_drop_probability   percent (Pmax), in (0, 100]
//   pfc.<port>.pfc_enable                     bit p = PFC on priority p (0..255)
// with <colour> one of green, yellow, red.
struct SwitchKnob {
  enum class Kind { kEcn, kPfcEnable };
  Kind kind = Kind::kEcn;
  std::string object;  // profile or port
  std::string field;   // WRED_PROFILE field, or "pfc_enable"
};

// kInvalidArgument naming `name` when it is not a switch knob.
absl::StatusOr<SwitchKnob> ParseSwitchKnob(absl::string_view name);
std::string EcnKnobName(absl::string_view profile, absl::string_view field);
std::string PfcEnableKnobName(absl::string_view port);

// Whether `field` is a numeric WRED_PROFILE field rocetune tunes.
bool IsTunableWredField(absl::string_view field);

// Thresholds are 32-bit signed in SAI (orchagent parses them with stoi).
inline constexpr int64_t kMaxWredThresholdBytes = 2147483647;

// "3,4" -> 0x18; "" -> 0. kInvalidArgument for anything but priorities 0..7.
absl::StatusOr<int64_t> ParsePfcEnable(absl::string_view text);
// 0x18 -> "3,4"; 0 -> "".
std::string FormatPfcEnable(int64_t mask);
std::vector<int> PfcEnablePriorities(int64_t mask);

// A decimal integer field, or kInvalidArgument naming the key and field.
absl::StatusOr<int64_t> ParseNumericField(absl::string_view key, absl::string_view field,
                                          absl::string_view value);

// A switch's QoS state as stored (a SwitchQosState's `profiles`: WRED profile
// -> its fields; `pfc_enable`: port -> its pfc_enable text) as one
// DeviceParameters (device "switch"): every numeric tunable field of every
// profile and every port's pfc_enable. Fields that do not parse are left out
// and named in `errors` when it is non-null.
v1::DeviceParameters SwitchStateToParameters(
    const std::map<std::string, std::map<std::string, std::string>>& profiles,
    const std::map<std::string, std::string>& pfc_enable, std::vector<std::string>* errors);

// Checks one profile's fields as they would be after a write: for every colour
// in `colours` (e.g. {"green"}), the min and max thresholds and probability
// present must be numbers, 0 <= min < max <= buffer_limit, probability in
// (0, 100]. Returns one line per violation naming the key and field.
std::vector<std::string> CheckWredProfile(const std::string& profile,
                                          const std::map<std::string, std::string>& fields,
                                          const std::vector<std::string>& colours,
                                          int64_t buffer_limit_bytes);

// The buffer limit from BUFFER_POOL entries (name -> fields): the smallest
// egress pool's size (any pool when none says type=egress), at most
// kMaxWredThresholdBytes; kMaxWredThresholdBytes when no pool has a size.
int64_t BufferLimitFromPools(
    const std::map<std::string, std::map<std::string, std::string>>& pools);

}  // namespace rocetune

#endif  // ROCETUNE_MODEL_SWITCH_PARAMS_H_
