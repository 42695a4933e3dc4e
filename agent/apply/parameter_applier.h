#ifndef ROCETUNE_AGENT_APPLY_PARAMETER_APPLIER_H_
#define ROCETUNE_AGENT_APPLY_PARAMETER_APPLIER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune {

struct ApplyResult {
  // Read back after the apply: every parameter the device's store reports, and
  // the PFC settings of devices whose set carried PFC. Goes into the Ack.
  v1::ParameterSet applied;
  int writes = 0;  // parameter writes issued (unchanged values are not rewritten)
  // One line per disruptive change, e.g. "mlx5_0/ens1f0np0: pfc enable_mask 0xff -> 0x08
  // (mlx5 flaps the link)". Empty when nothing disruptive happened.
  std::vector<std::string> disruptive;
};

// What the agent's apply path (NicOwner, LocalGuard, journal) writes through:
// a whole v1::ParameterSet applied all-or-nothing with read-back, and the
// current values. Implementations: Applier (a host's NICs) and SwitchApplier
// (a switch's WRED/ECN profiles and PFC enables). Thread-safe.
class ParameterApplier {
 public:
  virtual ~ParameterApplier() = default;
  // Validates the whole set, writes it, reads it back; on any failure after the
  // first write restores what was there. The result's `applied` is the read-back.
  virtual absl::StatusOr<ApplyResult> Apply(const v1::ParameterSet& set) = 0;
  // Current values of everything this applier manages. What cannot be read is
  // left out and named in `errors` when it is non-null.
  virtual v1::ParameterSet ReadCurrent(std::vector<std::string>* errors) = 0;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_APPLY_PARAMETER_APPLIER_H_
