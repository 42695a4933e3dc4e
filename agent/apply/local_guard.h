#ifndef ROCETUNE_AGENT_APPLY_LOCAL_GUARD_H_
#define ROCETUNE_AGENT_APPLY_LOCAL_GUARD_H_

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
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
  // Trips when this many of the last rounds_over + 1 judged rounds were over a
  // threshold (clamped to [1, 60]). A set may name its own (Arm's `rounds`).
  int rounds_over = 1;
};

// Options from the flags --guard_window, --guard_max_pfc_pause_ratio,
// --guard_max_cnp_rate and --guard_rounds.
LocalGuardOptions LocalGuardOptionsFromFlags();

// The agent's local guard. After an apply it watches the sampler's output for
// `window`; when `rounds_over` of the last rounds_over + 1 judged rounds had a
// counter over its threshold (PFC pause-time ratio of a device, port and
// priority, or CNP rate of a device and port; by default any one judged round;
// with k = 2, 2 of 3, so an on/off
// storm trips too) it restores the journal's last-known-good set at once,
// without waiting for the controller, and returns a v1::GuardEvent (naming the
// version it judged) for the next Report.
//
// It judges the change, not the host:
// - only rounds whose first snapshot began after the apply are judged (the
//   apply runs on the stream thread while the sampler's round is in flight, so
//   a round can end after Arm() and still be made of pre-apply traffic);
// - a round is over a threshold only when the rate is above it and also above
//   the host's own rate before the apply by more than half the threshold. A
//   host that was already pausing 30% of the time is not rolled back for
//   pausing 31%. The rate before is the mean of the counter's last rounds seen
//   while the guard was disarmed, so no unproven set is its own baseline (after
//   an agent restart there is none yet: the limit alone applies);
// - the same version armed again while armed (a reconnect or a drift
//   correction re-pushes it) keeps its window, baseline and count;
// - a window that ends with rounds over in the count is not promoted: judging
//   goes on until it trips or the over rounds age out.
//
// The guard owns promotion to last-known-good: Arm() holds the new set as a
// candidate and the first Observe() after the window has passed clean saves it
// to the journal (a provisional set: once it is also confirmed). Callers therefore do not Save() a
// freshly applied set themselves (they do save the baseline read at start when the journal is
// empty). Thread-safe. `clock`, `applier` and `journal` must outlive the guard.
class LocalGuard {
 public:
  LocalGuard(LocalGuardOptions options, Clock* clock, ParameterApplier* applier,
             LkgJournal* journal);

  // Starts (or restarts) the window for `version`, whose read-back values are
  // `applied`, now (Clock::Monotonic()). `rounds` > 0 replaces the options'
  // rounds_over for this window. A `provisional` set is judged the same way
  // but is not saved when its window passes: it waits for the same version
  // armed again as not provisional (the controller's confirmation), and is
  // saved then (at once if its window has passed clean).
  void Arm(const std::string& version, const v1::ParameterSet& applied, int rounds = 0,
           bool provisional = false);

  // Forgets the set being judged or awaiting confirmation (the owner restored
  // last-known-good for another reason: a lease that expired).
  void Abandon();

  // Feeds one sampler round (canonical names "rx_pfc_pause_duration_us",
  // "tx_pfc_pause_duration_us", "cnp_handled", "cnp_sent"; others are ignored).
  // `round_start` and `round_end` are Clock::Monotonic() times: when the
  // round's first snapshot began to be read and when its second one was read.
  // Every round feeds the host's pre-apply rates; an armed guard judges the
  // round only if it started at or after Arm(). Returns the event when the
  // guard tripped; the guard is then disarmed and the candidate dropped. Not
  // armed, not judged, or within bounds: nullopt.
  std::optional<v1::GuardEvent> Observe(
      const google::protobuf::RepeatedPtrField<v1::CounterSample>& samples,
      absl::Duration round_start, absl::Duration round_end);

  bool armed() const;
  // A provisional set passed its window clean and waits for its confirmation.
  bool awaiting_confirm() const;

  // New thresholds and window, from the next Observe on (an armed window
  // keeps its start).
  void SetOptions(const LocalGuardOptions& options);

 private:
  LocalGuardOptions options_ ABSL_GUARDED_BY(mu_);
  Clock* clock_;
  ParameterApplier* applier_;
  LkgJournal* journal_;
  mutable absl::Mutex mu_;
  void SaveCandidateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  bool provisional_ ABSL_GUARDED_BY(mu_) = false;
  // The window of a provisional set passed clean; the candidate is kept.
  bool awaiting_confirm_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration armed_at_ ABSL_GUARDED_BY(mu_);
  std::string candidate_version_ ABSL_GUARDED_BY(mu_);
  v1::ParameterSet candidate_ ABSL_GUARDED_BY(mu_);
  int rounds_ ABSL_GUARDED_BY(mu_) = 1;           // rounds over, of the last rounds_ + 1, that trip
  std::deque<bool> recent_ ABSL_GUARDED_BY(mu_);  // the last judged rounds: over or not

  // (device, port, priority, counter name)
  using Key = std::tuple<std::string, uint32_t, int32_t, std::string>;
  struct Past {
    absl::Duration end;  // monotonic end of the round
    double rate;
  };
  // The last kHistory rates of each guarded counter seen while disarmed.
  static constexpr size_t kHistory = 5;
  static constexpr int kMaxRounds = 60;
  std::map<Key, std::deque<Past>> history_ ABSL_GUARDED_BY(mu_);
  // Each counter's mean rate before the apply (taken at Arm()).
  std::map<Key, double> before_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_APPLY_LOCAL_GUARD_H_
