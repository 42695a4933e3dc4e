#ifndef ROCETUNE_MODEL_IN_EFFECT_H_
#define ROCETUNE_MODEL_IN_EFFECT_H_

#include <vector>

#include "absl/strings/string_view.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune {

// Applied is not in effect (issue 25 item 8). The parameters of `wanted` (one
// device of a desired set) that `held` (what the device holds after the
// apply, read back) leaves without effect:
//  - a reaction-point DCQCN value (CcSide::kRp) while the reaction point is
//    off on every priority the traffic uses: rp_enable_mask & the lossless
//    priorities (the PFC enable mask when it is known and not 0, else every
//    priority) is 0;
//  - a notification-point value (CcSide::kNp) the same way with np_enable_mask
//    (a receiver that sends no CNP on those priorities);
//  - pfc.delay and pfc.prevention_timeout_ms while PFC is off on every
//    priority.
// A mask `held` does not carry (debugfs: the enable is a firmware setting
// the kernel does not expose) says nothing: the parameter counts as in
// effect. Notes are in `wanted`'s order (DCQCN names sorted), with the
// deciding values in the reason, e.g. "the DCQCN reaction point is off on
// the lossless priorities 3 (rp_enable_mask 0x00, pfc enable_mask 0x08)".
std::vector<v1::ParameterNote> NotInEffect(const v1::DeviceParameters& wanted,
                                           const v1::DeviceParameters& held);

// The knob whose value decides whether `parameter` can be in effect:
// "rp_enable_mask" for a reaction-point value, "np_enable_mask" for a
// notification-point value, "pfc.enable_mask" for the other PFC settings; ""
// for anything else.
const char* DecidingKnob(absl::string_view parameter);

// NotInEffect over every device of `wanted` found in `held` (by name).
std::vector<v1::ParameterNote> NotInEffect(const v1::ParameterSet& wanted,
                                           const v1::ParameterSet& held);

}  // namespace rocetune

#endif  // ROCETUNE_MODEL_IN_EFFECT_H_
