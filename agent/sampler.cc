#include "agent/sampler.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/logging.h"

namespace rocetune {

absl::StatusOr<std::unique_ptr<Sampler>> Sampler::Create(CounterSource* source, Clock* clock,
                                                         absl::Duration interval) {
  if (source == nullptr || clock == nullptr) {
    return absl::InvalidArgumentError("sampler needs a counter source and a clock");
  }
  if (interval < kMinInterval) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sample interval ", absl::FormatDuration(interval), " is below the minimum of 10ms"));
  }
  return std::unique_ptr<Sampler>(new Sampler(source, clock, interval));
}

absl::Status Sampler::SampleOnce(SampleBatch* batch) {
  current_.Clear();
  const absl::Duration before = clock_->Monotonic();
  absl::Status s = source_->CollectInto(&current_);
  const absl::Duration after = clock_->Monotonic();
  if (!s.ok()) return s;
  IngestCurrent(before, after, clock_->Now(), batch);
  batch->collect_duration = after - before;
  return absl::OkStatus();
}

absl::StatusOr<SampleBatch> Sampler::SampleOnce() {
  SampleBatch batch;
  if (absl::Status s = SampleOnce(&batch); !s.ok()) return s;
  return batch;
}

void Sampler::WaitForNext() {
  if (!have_baseline_) return;
  const absl::Duration wait = last_mono_ + interval_ - clock_->Monotonic();
  if (wait > absl::ZeroDuration()) clock_->SleepFor(wait);
}

SampleBatch Sampler::Ingest(const std::vector<CounterValue>& snapshot, absl::Duration mono,
                            absl::Time wall) {
  current_.Clear();
  for (const CounterValue& cv : snapshot) current_.Append() = cv;
  SampleBatch batch;
  IngestCurrent(mono, mono, wall, &batch);
  return batch;
}

namespace {

// Hash index over the previous snapshot's keys without copying them.
struct KeyPtrHash {
  size_t operator()(const CounterKey* k) const { return absl::Hash<CounterKey>{}(*k); }
};
struct KeyPtrEq {
  bool operator()(const CounterKey* a, const CounterKey* b) const { return *a == *b; }
};

}  // namespace

void Sampler::IngestCurrent(absl::Duration begin, absl::Duration mono, absl::Time wall,
                            SampleBatch* batch) {
  const CounterBuffer& snapshot = current_;
  batch->end = wall;
  batch->start = have_baseline_ ? last_wall_ : wall;
  batch->mono_start = have_baseline_ ? last_begin_ : begin;
  batch->mono_end = mono;
  batch->measured_interval = have_baseline_ ? mono - last_mono_ : absl::ZeroDuration();
  const double seconds = absl::ToDoubleSeconds(batch->measured_interval);

  // Snapshots usually list the same counters in the same order: compare
  // position by position and fall back to a hash lookup on any mismatch.
  bool aligned = snapshot.size() == last_.size();
  absl::flat_hash_map<const CounterKey*, uint64_t, KeyPtrHash, KeyPtrEq> index;
  bool indexed = false;
  // The batch's messages are refilled in place: every field of a reused one
  // is set below (CounterSample has no other field), so they are not cleared
  // first; surplus ones are dropped at the end (kept for reuse by the field).
  google::protobuf::RepeatedPtrField<v1::CounterSample>& samples = batch->samples;
  google::protobuf::RepeatedPtrField<v1::LevelSample>& levels = batch->levels;
  int used = 0;
  int levels_used = 0;
  for (size_t i = 0; i < snapshot.size(); ++i) {
    const CounterValue& cv = snapshot[i];
    if (cv.kind == CounterKind::kLevel) {
      // As read; stays in the snapshot only to keep positions aligned.
      v1::LevelSample* level =
          levels_used < levels.size() ? levels.Mutable(levels_used) : levels.Add();
      ++levels_used;
      if (level->device() != cv.key.device) level->set_device(cv.key.device);
      level->set_port(cv.key.port);
      level->set_priority(cv.key.priority);
      if (level->name() != cv.key.name) level->set_name(cv.key.name);
      level->set_value(cv.value);
      continue;
    }
    uint64_t old = 0;
    if (aligned && last_[i].kind == CounterKind::kCounter &&
        ((cv.key_id != 0 && last_[i].key_id == cv.key_id) || last_[i].key == cv.key)) {
      old = last_[i].value;
    } else {
      aligned = false;
      if (!indexed) {
        index.reserve(last_.size());
        for (const CounterValue& p : last_) {
          if (p.kind == CounterKind::kCounter) index.emplace(&p.key, p.value);  // first one wins
        }
        indexed = true;
      }
      auto it = index.find(&cv.key);
      if (it == index.end()) continue;  // first sight: baseline only
      old = it->second;
    }
    uint64_t delta = 0;
    if (cv.value >= old) {
      delta = cv.value - old;
    } else {
      constexpr uint64_t kWrap = uint64_t{1} << 32;
      const uint64_t wrapped = kWrap - old + cv.value;
      if (cv.width_bits == 32 && old < kWrap && cv.value < kWrap && wrapped < (kWrap >> 1)) {
        delta = wrapped;
        ++wraps_;
      } else {
        delta = cv.value;
        ++resets_;
        LogOnce(absl::StrCat("counter_reset:", cv.key.device, "/", cv.key.port, "/",
                             cv.key.priority, "/", cv.key.name),
                LogLevel::kInfo, "counter went backwards; treating it as a reset",
                {{"device", cv.key.device},
                 {"port", absl::StrCat(cv.key.port)},
                 {"counter", cv.key.name},
                 {"old", absl::StrCat(old)},
                 {"new", absl::StrCat(cv.value)}});
      }
    }
    v1::CounterSample* sample = used < samples.size() ? samples.Mutable(used) : samples.Add();
    if (batch->values.size() <= static_cast<size_t>(used)) batch->values.resize(used + 1);
    batch->values[used] = cv.value;
    ++used;
    // A reused message usually holds this counter's strings already.
    if (sample->device() != cv.key.device) sample->set_device(cv.key.device);
    sample->set_port(cv.key.port);
    sample->set_priority(cv.key.priority);
    if (sample->name() != cv.key.name) sample->set_name(cv.key.name);
    sample->set_delta(delta);
    sample->set_rate_per_second(seconds > 0 ? static_cast<double>(delta) / seconds : 0.0);
  }
  while (samples.size() > used) samples.RemoveLast();
  while (levels.size() > levels_used) levels.RemoveLast();
  batch->values.resize(used);
  // This snapshot becomes the baseline; the old one's storage is refilled next round.
  last_.swap(current_);
  last_mono_ = mono;
  last_begin_ = begin;
  last_wall_ = wall;
  have_baseline_ = true;
}

}  // namespace rocetune
