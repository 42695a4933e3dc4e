#ifndef ROCETUNE_AGENT_PROBE_PROBE_TRACKER_H_
#define ROCETUNE_AGENT_PROBE_PROBE_TRACKER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "model/quantile_sketch.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {

// Counts of packets that did not yield a sample. Monotonic over the tracker's life.
struct ProbeAnomalies {
  uint64_t malformed = 0;    // undecodable, foreign magic/version/type
  uint64_t foreign = 0;      // well-formed but another session's, or a seq never sent
  uint64_t late = 0;         // answer for a probe already counted as lost
  uint64_t duplicate = 0;    // second answer for a probe already answered
  uint64_t bogus = 0;        // timing impossible (responder delay > round trip)
  uint64_t send_errors = 0;  // probe could not be sent (counted as lost)
};

// Bookkeeping shared by the probers: outstanding probes by sequence number,
// timeouts as loss (never samples), and per-peer-class windows of network RTT
// (round trip minus responder delay) and responder host delay. Thread-safe.
//
// A probe completes when both its echo time and its responder delay are known
// (OnReply gives both; the verbs path gives them as OnEcho + OnDelay).
class ProbeTracker {
 public:
  enum class Outcome { kPending, kSample, kLate, kDuplicate, kForeign, kBogus };

  // `kind` names the prober in logs; `clock` is the LatencyWindow clock label.
  ProbeTracker(std::string kind, std::string clock);

  // Registers a sent probe and returns its sequence number.
  uint64_t OnSent(const std::string& peer_class, absl::Duration t_send, absl::Duration timeout);
  // A probe that was due but could not be sent: counted as sent and lost.
  void OnSendFailed(const std::string& peer_class, absl::string_view why);
  // Replaces the send time used for the round trip (send completion timestamp on
  // the same clock as the echo's). The timeout deadline stays on the monotonic clock.
  void OnSendCompleted(uint64_t seq, absl::Duration t_send);

  Outcome OnReply(uint64_t seq, absl::Duration t_recv, absl::Duration host_delay);
  Outcome OnEcho(uint64_t seq, absl::Duration t_recv);
  Outcome OnDelay(uint64_t seq, absl::Duration host_delay);
  void OnMalformed(absl::string_view why);
  void OnForeign(absl::string_view why);

  // Counts every outstanding probe whose deadline (monotonic send time + timeout)
  // is at or before `now` as lost.
  void ExpireDue(absl::Duration now);
  // Probes sent and neither answered nor expired yet.
  size_t outstanding() const;

  // Windows since the previous call, one per peer class that sent or received anything.
  std::vector<v1::LatencyWindow> TakeWindow();
  ProbeAnomalies anomalies() const;
  void set_clock(std::string clock);

 private:
  struct Pending {
    std::string peer_class;
    absl::Duration t_send;
    absl::Duration deadline;
    bool echoed = false;
    absl::Duration t_recv;
    absl::Duration rtt;
    bool has_delay = false;
    absl::Duration host_delay;
  };
  struct Window {
    QuantileSketch network_rtt;
    QuantileSketch host_delay;
    uint64_t sent = 0;
    uint64_t lost = 0;
  };
  enum class Finished : uint8_t { kCompleted, kExpired };

  Outcome Update(uint64_t seq, const absl::Duration* t_recv, const absl::Duration* delay)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish(uint64_t seq, Finished how) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Outcome Anomaly(Outcome o, uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string kind_;
  mutable absl::Mutex mu_;
  std::string clock_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Finished> finished_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> finished_order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Window> windows_ ABSL_GUARDED_BY(mu_);
  ProbeAnomalies anomalies_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_PROBE_PROBE_TRACKER_H_
