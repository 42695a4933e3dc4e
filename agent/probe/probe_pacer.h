#ifndef ROCETUNE_AGENT_PROBE_PROBE_PACER_H_
#define ROCETUNE_AGENT_PROBE_PROBE_PACER_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/time/time.h"

namespace rocetune {

// Rate limiter with jitter: each of `peers` peers is due once per 1/rate on
// average, each gap drawn uniformly from [0.5, 1.5] x the mean so probes to many
// peers do not synchronise. A peer that falls behind is never sent a burst:
// at most one probe per peer per TakeDue call. Not thread-safe.
class ProbePacer {
 public:
  // REQUIRES: rate_per_peer > 0 when peers > 0.
  ProbePacer(int peers, double rate_per_peer, absl::Duration now, uint64_t seed);

  // Indices of the peers due at `now`; schedules their next probe.
  std::vector<int> TakeDue(absl::Duration now);
  // Earliest next due time; absl::InfiniteDuration() with no peers.
  absl::Duration NextDue() const;

 private:
  absl::Duration Gap();

  absl::Duration interval_;
  std::vector<absl::Duration> due_;
  std::mt19937_64 rng_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_PROBE_PROBE_PACER_H_
