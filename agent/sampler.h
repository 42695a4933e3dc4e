#ifndef ROCETUNE_AGENT_SAMPLER_H_
#define ROCETUNE_AGENT_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/host/counter_source.h"
#include "daemon/clock.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {

// One sampling step's output.
struct SampleBatch {
  absl::Time start;                  // wall time of the previous snapshot
  absl::Time end;                    // wall time of this snapshot
  absl::Duration measured_interval;  // monotonic time between the two snapshots
  // Clock::Monotonic() when the previous snapshot began to be read and when
  // this one had been read: every count in `samples` happened in between.
  absl::Duration mono_start;
  absl::Duration mono_end;
  absl::Duration collect_duration;  // monotonic time Collect() took
  // One sample per counter present in both snapshots, in snapshot order. A
  // batch passed to SampleOnce(SampleBatch*) round after round keeps these
  // messages (and their strings' capacity) and refills them in place; swapping
  // the field with a Report's counters (same arena: no copy) and back keeps
  // that reuse (see SamplingLoop::Round).
  google::protobuf::RepeatedPtrField<v1::CounterSample> samples;
  // values[i]: the value samples[i]'s counter had in this snapshot, as read (in
  // the canonical unit, before any wrap widening). /metrics seeds a series
  // from it the first time it sees that counter.
  std::vector<uint64_t> values;
  // One sample per level (CounterKind::kLevel) of this snapshot, as read, in
  // snapshot order: levels need no baseline, so the first call has them too.
  // Reused round after round like `samples` (swapped with a Report's levels).
  google::protobuf::RepeatedPtrField<v1::LevelSample> levels;
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
// - Levels (CounterKind::kLevel) are not counters: each one read becomes a
//   LevelSample with its value as read (no delta, no wrap or reset handling).
//
// Cost: two snapshot buffers (this round's and the previous one) are swapped
// each round and refilled in place through CounterSource::CollectInto. When a
// snapshot lists the same keys in the same order as the previous one (the
// steady state), old values are matched position by position (by key id where
// the source sets one, CounterValue::key_id, else by key); otherwise a
// hash index over the previous snapshot's keys (by pointer, no copies) is built
// for that round. With a reused SampleBatch a steady round allocates nothing.
class Sampler {
 public:
  static constexpr absl::Duration kMinInterval = absl::Milliseconds(10);

  // REQUIRES: source and clock outlive the Sampler. interval >= 10 ms, else
  // kInvalidArgument.
  static absl::StatusOr<std::unique_ptr<Sampler>> Create(
      CounterSource* source, Clock* clock, absl::Duration interval = absl::Seconds(1));

  // Collects one snapshot and fills `batch` with the samples against the
  // previous one (the first call yields no samples). `batch`'s previous
  // content is replaced; its sample messages are reused. A failed Collect is
  // returned as is, leaves the baseline untouched and `batch` unspecified.
  absl::Status SampleOnce(SampleBatch* batch);
  // The same into a fresh batch.
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

  // Ingests current_ (then swaps it with last_).
  // `begin`: when this snapshot began to be read; `mono`, `wall`: when it had been.
  void IngestCurrent(absl::Duration begin, absl::Duration mono, absl::Time wall,
                     SampleBatch* batch);

  CounterSource* source_;
  Clock* clock_;
  absl::Duration interval_;
  bool have_baseline_ = false;
  absl::Duration last_mono_;
  absl::Duration last_begin_;  // when the previous snapshot began to be read
  absl::Time last_wall_;
  CounterBuffer current_;  // this round's snapshot (scratch between rounds)
  CounterBuffer last_;     // the previous snapshot
  uint64_t resets_ = 0;
  uint64_t wraps_ = 0;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SAMPLER_H_
