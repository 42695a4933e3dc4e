#ifndef ROCETUNE_AGENT_SWITCH_SWITCH_APPLIER_H_
#define ROCETUNE_AGENT_SWITCH_SWITCH_APPLIER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/apply/parameter_applier.h"
#include "agent/switch/switch_qos_store.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune {

struct SwitchApplierOptions {
  // Test hooks: run after the snapshot (the keys are watched) and before the
  // commit, and after the commit before the read-back.
  std::function<void()> before_commit;
  std::function<void()> after_commit;
};

// Applies a switch's knobs (switch_params.h) from a v1::ParameterSet, with the
// same contract as the NIC Applier:
//   1. the set names only device "switch" and known knob names; values are in
//      range (thresholds 0..2^31-1, probabilities (0, 100], masks 0..255);
//   2. snapshot: the profiles and ports named are read and watched;
//   3. every profile named exists and already has every field named (rocetune
//      never adds fields), the fields the check needs are numbers, and per
//      colour touched Kmin < Kmax <= the buffer limit, Pmax in (0, 100];
//   4. every changed field is written in one all-or-nothing commit, which
//      aborts when a watched key changed since the snapshot (nothing written);
//   5. everything is read back and compared.
// A failure in 1-4 leaves the switch as it was. A read-back mismatch or a
// failed read-back restores the snapshot's values of the written fields (in
// one commit); the error then says whether the restore succeeded.
class SwitchApplier : public ParameterApplier {
 public:
  // `store` is not owned and must outlive the applier.
  explicit SwitchApplier(SwitchQosStore* store, SwitchApplierOptions options = {});

  // Error codes: kInvalidArgument (a bad name or value, a violated bound; nothing
  // written), kFailedPrecondition (a profile, port or field missing; nothing
  // written), kAborted (a key changed underneath: nothing written; or a
  // read-back mismatch: restored), kUnavailable (the store could not be
  // reached; the switch holds the previous or the new values of the whole set,
  // never a mix), kInternal (the restore after a mismatch failed).
  absl::StatusOr<ApplyResult> Apply(const v1::ParameterSet& set) override;
  v1::ParameterSet ReadCurrent(std::vector<std::string>* errors) override;

 private:
  absl::Status Restore(const SwitchQosWrite& undo, const SwitchQosKeys& keys,
                       const absl::Status& failure) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SwitchQosStore* store_;
  SwitchApplierOptions options_;
  absl::Mutex mu_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SWITCH_SWITCH_APPLIER_H_
