#ifndef ROCETUNE_AGENT_APPLY_APPLIER_H_
#define ROCETUNE_AGENT_APPLY_APPLIER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/apply/parameter_applier.h"
#include "agent/host/cc_param_store.h"
#include "agent/host/pfc_config.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune {

// The hardware behind one RDMA device. Pointers are not owned and must outlive
// the Applier.
struct ApplyTarget {
  CcParamStore* cc = nullptr;  // required when a set carries DCQCN values or masks
  PfcConfig* pfc = nullptr;    // required when a set carries PFC settings
  std::string netdev;          // the netdev PFC is configured on
  // The fastest port's link speed; rate parameters (Mb/s) above it are
  // refused. 0: unknown, not checked.
  int64_t speed_mbps = 0;
};

// Applies a whole v1::ParameterSet transactionally (issue 3, item 8):
//   1. validate every value against the hard ranges and check that every
//      requested parameter exists on its device; on any problem reject the
//      whole set before anything is written. A DCQCN value outside its range
//      is accepted only when the device already holds it (firmware defaults
//      vary; a last-known-good set read from the NIC must stay restorable);
//      it is then not written;
//   2. snapshot the current values of every device in the set;
//   3. write DCQCN values (all devices), then per-priority enable masks, then
//      PFC last (a change of pfc enable flaps the link on mlx5);
//   4. read everything back and compare.
// Any failure in 3 or 4 restores the snapshot on every device touched so the
// host never ends on a mixed set; the error then names the device, the
// parameter, the path or mechanism and the errno text, and says whether the
// restore succeeded. Thread-safe: applies are serialised.
class Applier : public ParameterApplier {
 public:
  explicit Applier(std::map<std::string, ApplyTarget> targets);

  // Error codes: kInvalidArgument (a value out of range, unknown device),
  // kFailedPrecondition (a parameter the device's layout lacks; nothing
  // written), the store's code for a failed snapshot (nothing written), the
  // failing write's code or kAborted for a read-back mismatch (snapshot
  // restored), kInternal when the restore itself failed (host may be mixed;
  // the message lists what could not be restored).
  absl::StatusOr<ApplyResult> Apply(const v1::ParameterSet& set) override;

  // Current values of every target device (DCQCN values and masks; PFC when the
  // target has a PfcConfig). Devices that cannot be read are left out and named
  // in `errors` when it is non-null.
  v1::ParameterSet ReadCurrent(std::vector<std::string>* errors = nullptr) override;

 private:
  // One Apply's working state: snapshot, planned steps, how far they got.
  struct Transaction;

  // The steps of Apply, in order. Each returns the error Apply returns.
  // Validate: ranges, known devices, a store for what the set carries.
  absl::Status Validate(const v1::ParameterSet& set, Transaction* txn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Snapshot: reads every device in the set; checks the layout has each
  // requested parameter, that out-of-range values are already held, and the
  // link: rates at most the port speed, rpg_min_rate <= rpg_max_rate (0 = no
  // limit) as they would be after the apply.
  absl::Status Snapshot(const v1::ParameterSet& set, Transaction* txn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Link checks of Snapshot, one line per violation.
  std::vector<std::string> CheckLink(const v1::ParameterSet& set, const Transaction& txn) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Plan: the writes, DCQCN values first, then masks, then PFC.
  void Plan(const v1::ParameterSet& set, Transaction* txn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Write: executes the plan until the first failure.
  absl::Status Write(Transaction* txn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ReadBack: reads every device in the set into the result and compares.
  absl::Status ReadBack(const v1::ParameterSet& set, Transaction* txn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Restore: puts the snapshot back after `failure`; returns the final error.
  absl::Status Restore(const absl::Status& failure, Transaction* txn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::map<std::string, ApplyTarget> targets_;
  absl::Mutex mu_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_APPLY_APPLIER_H_
