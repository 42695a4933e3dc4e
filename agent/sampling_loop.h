#ifndef ROCETUNE_AGENT_SAMPLING_LOOP_H_
#define ROCETUNE_AGENT_SAMPLING_LOOP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "agent/agent_metrics.h"
#include "agent/apply/nic_owner.h"
#include "agent/probe/prober.h"
#include "agent/sampler.h"
#include "daemon/clock.h"
#include "daemon/progress.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {

struct SamplingLoopOptions {
  absl::Duration sample_interval = absl::Seconds(1);
  // How often every managed parameter is re-read and compared with the
  // expected set (a difference goes out as a "drift" GuardEvent).
  absl::Duration drift_interval = absl::Seconds(60);
  // Optional, not owned.
  AgentMetrics* metrics = nullptr;
  // Optional, not owned: the job signal's listener; each round takes its
  // series, gives them to `metrics` and puts them in the report.
  JobListener* job_listener = nullptr;
  // Optional, not owned: marked at the start of every round (the systemd
  // watchdog is petted only while it is).
  ProgressLoop* progress = nullptr;
  // How long the agent has been without a stream to its controller
  // (StreamClient::DisconnectedFor); each round gives it to
  // NicOwner::ExpireLease. Unset: a provisional set's lease never runs out.
  std::function<absl::Duration()> without_controller;
  // Test seam (the watchdog's integration test): called before each round,
  // which starts when it returns; `stop` is notified by Stop().
  std::function<void(const absl::Notification& stop)> round_gate;
};

// The agent's sampling loop, on a thread of its own, connected or not: every
// sample interval of the clock it reads the counters (Sampler), feeds them to
// the local guard (NicOwner::Observe), checks for drift when due, takes the
// prober's latency windows, numbers the round and hands the Report to the
// sink. Nothing in it waits for the controller.
class SamplingLoop {
 public:
  // Called on the loop's thread with each round's report. The sink may take
  // the report's guard events and add others; the counters and levels are
  // lent from the loop's sample batch and taken back when the sink returns.
  using Sink = absl::AnyInvocable<void(v1::Report* report)>;

  // None is owned; `prober` may be null.
  SamplingLoop(SamplingLoopOptions options, Sampler* sampler, NicOwner* owner, Prober* prober,
               Clock* clock);

  // Takes rounds until Stop(), each one sample interval after the previous
  // one (the first one interval after the call).
  void Run(Sink sink);
  // Thread-safe; makes Run() return promptly. Final.
  void Stop();

  // One round into `report` (exposed for Run and tests).
  void Round(v1::Report* report, bool* lent);
  // Takes the counters and levels Round lent to `report` back.
  void ReturnSamples(v1::Report* report);

  // Thread-safe. Intervals take effect from the next round.
  void SetIntervals(absl::Duration sample_interval, absl::Duration drift_interval);
  absl::Duration sample_interval() const;
  // The next round re-reads the NIC's parameters (after an apply).
  void RequestDriftCheck() { check_drift_now_ = true; }
  // Versions this host gave up by itself, with why (the newest 16): those
  // its local guard rolled back and those whose lease expired. Never applied
  // again; nullopt for any other version.
  std::optional<std::string> GivenUp(const std::string& version) const;
  bool IsGuardRejected(const std::string& version) const { return GivenUp(version).has_value(); }
  // Whether `version` was given up only because its lease expired (the
  // controller may still confirm it: a change that reached DONE meanwhile).
  bool GivenUpForLease(const std::string& version) const;
  void ForgetGivenUp(const std::string& version);
  // The drift found by the last check (or set at start), for Hello.
  std::vector<std::string> drift() const;
  void SetDrift(std::vector<std::string> drift);
  uint64_t rounds() const { return rounds_.load(); }
  uint64_t guard_rollbacks() const { return guard_rollbacks_.load(); }

 private:
  void MaybeCheckDrift(v1::Report* report, bool force);
  void RememberGivenUp(const std::string& version, std::string why, bool lease);

  SamplingLoopOptions options_;
  Sampler* sampler_;
  NicOwner* owner_;
  Prober* prober_;
  Clock* clock_;
  std::atomic<bool> stopping_{false};
  absl::Notification stop_;
  std::atomic<bool> check_drift_now_{false};
  std::atomic<uint64_t> rounds_{0};
  std::atomic<uint64_t> guard_rollbacks_{0};
  mutable absl::Mutex mu_;
  absl::Duration sample_interval_ ABSL_GUARDED_BY(mu_);
  absl::Duration drift_interval_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> drift_ ABSL_GUARDED_BY(mu_);
  struct GivenUpVersion {
    std::string version;
    std::string why;
    bool lease = false;  // its lease expired (else the local guard rolled it back)
  };
  std::vector<GivenUpVersion> given_up_ ABSL_GUARDED_BY(mu_);
  // The loop's thread only: the sample messages lent to each round's report,
  // the rounds' numbers and when the next drift check is due.
  SampleBatch batch_;
  uint64_t seq_ = 0;
  // Job-signal lines refused, as of the last log line about them (at most
  // one a minute, with the last reason).
  uint64_t job_refused_logged_ = 0;
  uint64_t job_dropped_logged_ = 0;  // rate_limited + too_many_series, as of that line
  std::optional<absl::Duration> job_logged_at_;
  absl::Duration next_drift_check_ = absl::ZeroDuration();
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SAMPLING_LOOP_H_
