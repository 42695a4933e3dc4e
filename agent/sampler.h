#ifndef ROCETUNE_AGENT_SAMPLER_H_
#define ROCETUNE_AGENT_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/host/counter_source.h"
#include "daemon/clock.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {

// One sampling step's output.
struct SampleBatch {
  absl::Time start;                  // wall time of the previous snapshot
  absl::Time end;                    // wall time of this snapshot
  absl::Duration measured_interval;  // monotonic time between the two snapshots
  absl::Duration collect_duration;   // monotonic time Collect() took
  std::vector<v1::CounterSample> samples;
};

// Turns successive counter snapshots into deltas and rates.
// - A counter seen for the first time yields no sample (it only sets the baseline).
// - A 32-bit counter that went down by a wrap-sized step wrapped: delta =
//   2^32 - old + new, when that is below 2^31 (a plausible increase).
// - Any other decrease is a reset (driver reload, cleared counters): delta = new
//   value; counted in resets() and logged once per counter.
// - rate_per_second = delta / measured interval (monotonic time between the
//   snapshots, not the configured interval); 0 when the interval is not positive.
// - Counters absent from a snapshot are forgotten; if they come back they start
//   again from a baseline.
class Sampler {
 public:
  static constexpr absl::Duration kMinInterval = absl::Milliseconds(10);

  // REQUIRES: source and clock outlive the Sampler. interval >= 10 ms, else
  // kInvalidArgument.
  static absl::StatusOr<std::unique_ptr<Sampler>> Create(
      CounterSource* source, Clock* clock, absl::Duration interval = absl::Seconds(1));

  // Collects one snapshot and returns the samples against the previous one (the
  // first call returns an empty batch). A failed Collect is returned as is and
  // leaves the baseline untouched.
  absl::StatusOr<SampleBatch> SampleOnce();

  // Sleeps (on the clock) until one interval after the previous snapshot.
  void WaitForNext();

  // Pure step used by SampleOnce: ingests a snapshot taken at monotonic `mono`
  // and wall time `wall`.
  SampleBatch Ingest(const std::vector<CounterValue>& snapshot, absl::Duration mono,
                     absl::Time wall);

  absl::Duration interval() const { return interval_; }
  uint64_t resets() const { return resets_; }
  uint64_t wraps() const { return wraps_; }

 private:
  Sampler(CounterSource* source, Clock* clock, absl::Duration interval)
      : source_(source), clock_(clock), interval_(interval) {}

  CounterSource* source_;
  Clock* clock_;
  absl::Duration interval_;
  bool have_baseline_ = false;
  absl::Duration last_mono_;
  absl::Time last_wall_;
  std::vector<CounterValue> last_;  // the previous snapshot
  uint64_t resets_ = 0;
  uint64_t wraps_ = 0;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SAMPLER_H_
