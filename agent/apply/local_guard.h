#ifndef ROCETUNE_AGENT_APPLY_LOCAL_GUARD_H_
#define ROCETUNE_AGENT_APPLY_LOCAL_GUARD_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/apply/applier.h"
#include "agent/apply/lkg_journal.h"
#include "daemon/clock.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {

struct LocalGuardOptions {
  // How long after an apply the guard watches.
  absl::Duration window = absl::Minutes(5);
  // Trips when any (device, port, priority) is paused, receiving or sending,
  // for more than this fraction of the measured interval. <= 0 disables.
  double max_pfc_pause_ratio = 0.2;
  // Trips when cnp_handled or cnp_sent of any (device, port) exceeds this many
  // per second. <= 0 disables.
  double max_cnp_rate_per_second = 1e6;
};

// Options from the flags --guard_window, --guard_max_pfc_pause_ratio and
// --guard_max_cnp_rate.
LocalGuardOptions LocalGuardOptionsFromFlags();

// The agent's local guard (issue 3, item 10). After an apply it watches the
// sampler's output for `window`; when the PFC pause-time ratio or the CNP rate
// passes its threshold it restores the journal's last-known-good set through
// the Applier at once, without waiting for the controller, and returns a
// v1::GuardEvent for the next Report.
//
// The guard owns promotion to last-known-good: Arm() holds the new set as a
// candidate and the first Observe() after the window has passed clean saves it
// to the journal. Callers therefore do not Save() a freshly applied set
// themselves (they do save the baseline read at start when the journal is empty).
// Thread-safe. `clock`, `applier` and `journal` must outlive the guard.
class LocalGuard {
 public:
  LocalGuard(LocalGuardOptions options, Clock* clock, ParameterApplier* applier,
             LkgJournal* journal);

  // Starts (or restarts) the window for `version`, whose read-back values are `applied`.
  void Arm(const std::string& version, const v1::ParameterSet& applied);

  // Feeds one sampler round (canonical names "rx_pfc_pause_duration_us",
  // "tx_pfc_pause_duration_us", "cnp_handled", "cnp_sent"; others are ignored).
  // Returns the event when the guard tripped; the guard is then disarmed and
  // the candidate dropped. Not armed, or within bounds: nullopt.
  std::optional<v1::GuardEvent> Observe(
      const google::protobuf::RepeatedPtrField<v1::CounterSample>& samples);

  bool armed() const;

  // New thresholds and window, from the next Observe on (an armed window
  // keeps its start).
  void SetOptions(const LocalGuardOptions& options);

 private:
  LocalGuardOptions options_ ABSL_GUARDED_BY(mu_);
  Clock* clock_;
  ParameterApplier* applier_;
  LkgJournal* journal_;
  mutable absl::Mutex mu_;
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration armed_at_ ABSL_GUARDED_BY(mu_);
  std::string candidate_version_ ABSL_GUARDED_BY(mu_);
  v1::ParameterSet candidate_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_APPLY_LOCAL_GUARD_H_
