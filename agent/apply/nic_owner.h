#ifndef ROCETUNE_AGENT_APPLY_NIC_OWNER_H_
#define ROCETUNE_AGENT_APPLY_NIC_OWNER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/apply/applier.h"
#include "agent/apply/apply_intent.h"
#include "agent/apply/lkg_journal.h"
#include "agent/apply/local_guard.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "rocetune/v1/agent.pb.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune {

// One parameter whose device value differs from the set the agent applied.
struct DriftItem {
  std::string device;
  std::string parameter;  // DCQCN name, "rp_enable_mask", "pfc.enable_mask", ...
  int64_t expected = 0;
  std::optional<int64_t> found;  // nullopt: the device no longer reports it
  // "mlx5_0/rpg_ai_rate: expected 33, found 5"
  std::string Text() const;
};

// The single owner of a host's NIC parameters. Every path that writes them
// (a controller apply, the local guard's restore, a drift correction) and
// every path that compares them with what was applied runs under one lock,
// held from the snapshot through the writes, the read-back, arming the guard
// and the journal. So the NIC, the version the agent acknowledges and the
// last-known-good journal never disagree: a guard restore cannot land between
// an apply's read-back and arming the guard for it.
//
// The owner also keeps the expected state: the version and read-back values
// of the last successful apply or restore. Thread-safe; `applier`, `journal`
// and `guard` must outlive it and must not be used by anyone else for writes.
class NicOwner {
 public:
  // `intent` (optional) records each apply in progress, so that a restart
  // after a kill inside an apply can tell which set the host holds.
  // `host_id` names the host in the owner's log lines (in-process simulated
  // agents share one log).
  NicOwner(ParameterApplier* applier, LkgJournal* journal, LocalGuard* guard,
           ApplyIntent* intent = nullptr, std::string host_id = "");

  // What the start found of an apply the previous process did not finish.
  struct Resolution {
    IntentOutcome found;       // the host's state before anything was done
    std::string from_version;  // the set before the apply
    std::string to_version;    // the set being applied
    std::string version;       // the version the host is on now
  };

  // Sets the expected state without writing (agent start: the journal's
  // last-known-good set, or the values read from the NIC).
  void SetExpected(const std::string& version, const v1::ParameterSet& parameters);

  // Applies `set` as `version` (Applier::Apply); on success arms the guard with
  // the read-back values, which become the expected state. With an intent
  // record, the apply is recorded first (kUnavailable, nothing written, when
  // it cannot be) and the record removed when the apply ends. `lease_seconds`
  // > 0: the set is provisional (DesiredState.provisional_lease_seconds): the
  // guard does not make it last-known-good, the journal's provisional record
  // keeps it across a restart, and ExpireLease restores last-known-good once
  // the agent has been without its controller for that long. The same version
  // applied again with 0 confirms it.
  absl::StatusOr<ApplyResult> Apply(const std::string& version, const v1::ParameterSet& set,
                                    uint32_t lease_seconds = 0);

  // When the set applied is provisional and the agent has had no stream to
  // the controller for at least its lease: restores the journal's
  // last-known-good set (it becomes the expected state; the guard forgets the
  // provisional set) and returns a GuardEvent of kind "lease_expired" that
  // names the version it gave up (judged_version) and the one restored. A
  // restore that fails is logged and tried again at the next call.
  std::optional<v1::GuardEvent> ExpireLease(absl::Duration without_controller);

  // At start, after SetExpected and ResolveInterruptedApply: the journal's
  // provisional record. When the NIC still holds its values, they are the
  // expected state as its version and its lease runs again (true); otherwise
  // the record is removed (false).
  bool ResumeProvisional(const v1::DesiredState& record);

  // The lease of the applied set (zero: a final set).
  absl::Duration lease() const;

  // At start, after SetExpected: when the previous process died inside an
  // apply (an intent record exists), finds which set the host holds. The whole
  // new set: it becomes the expected state as `to_version`, with the guard
  // armed. The whole old set: expected as `from_version`. A mix: the old set
  // is written back (the error, record kept, when that fails). nullopt when
  // there was nothing to resolve.
  absl::StatusOr<std::optional<Resolution>> ResolveInterruptedApply();

  // Feeds one sampler round to the guard (LocalGuard::Observe: the round's
  // monotonic start and end). When it trips and restores, the restored version
  // and its read-back become the expected state.
  std::optional<v1::GuardEvent> Observe(
      const google::protobuf::RepeatedPtrField<v1::CounterSample>& samples,
      absl::Duration round_start, absl::Duration round_end);

  // Re-reads every parameter of the expected state and returns each one that
  // differs. `current` (optional) receives everything read.
  std::vector<DriftItem> CheckDrift(v1::ParameterSet* current = nullptr);

  // Reads every device's current values (under the owner's lock).
  v1::ParameterSet ReadCurrent(std::vector<std::string>* errors = nullptr);

  // The version of the expected state ("" before any apply; "baseline" for
  // the values read at the first start).
  std::string expected_version() const;
  v1::ParameterSet expected() const;

  // The expected state after applying `set`, whose devices read back as
  // `read_back`: for each device the set names, the parameters it names take
  // their read-back values and every other parameter keeps its value in
  // `expected` (parameters not in `expected` are taken as read back); devices
  // it does not name keep `expected`'s values.
  static v1::ParameterSet MergeExpected(const v1::ParameterSet& expected,
                                        const v1::ParameterSet& set,
                                        const v1::ParameterSet& read_back);

  // Drift of `current` against `expected`: only what `expected` names is compared.
  static std::vector<DriftItem> Compare(const v1::ParameterSet& expected,
                                        const v1::ParameterSet& current);

 private:
  ParameterApplier* applier_;
  LkgJournal* journal_;
  LocalGuard* guard_;
  ApplyIntent* intent_;
  const std::string host_id_;
  mutable absl::Mutex mu_;
  // Records the applied set as provisional (> 0) or final, in memory and in
  // the journal's provisional record.
  void SetLeaseLocked(uint32_t lease_seconds) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::string version_ ABSL_GUARDED_BY(mu_);
  v1::ParameterSet expected_ ABSL_GUARDED_BY(mu_);
  absl::Duration lease_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_APPLY_NIC_OWNER_H_
