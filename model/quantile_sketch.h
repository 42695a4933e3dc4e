#ifndef ROCETUNE_MODEL_QUANTILE_SKETCH_H_
#define ROCETUNE_MODEL_QUANTILE_SKETCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocetune/v1/sketch.pb.h"

namespace rocetune {

// A mergeable quantile sketch with a relative-error guarantee (DDSketch,
// Masson et al., VLDB 2019). For any quantile q, Quantile(q) is within a
// factor (1 +- relative_accuracy) of the exact q-quantile of the inserted
// values, as long as no bucket collapse happened (see kMaxBuckets).
//
// Values are non-negative (latencies in seconds); values at or below
// kMinIndexable count as zero. Not thread-safe.
class QuantileSketch {
 public:
  static constexpr double kDefaultRelativeAccuracy = 0.01;
  static constexpr double kMinIndexable = 1e-9;
  // Bound on memory: with 1% accuracy this covers 1 ns .. > 10^15 s. When a sketch would
  // exceed it, the lowest buckets are folded together (only the lowest quantiles lose accuracy).
  static constexpr int kMaxBuckets = 4096;
  // Largest value a sketch from the wire may hold (seconds; about 11.6 days).
  // FromProto accepts only buckets within [kMinIndexable, kMaxIndexable], a
  // range that fits kMaxBuckets, so that merging untrusted sketches never
  // folds buckets: one host's sketch cannot move another's quantiles.
  static constexpr double kMaxIndexable = 1e6;

  // REQUIRES: 0 < relative_accuracy < 1.
  explicit QuantileSketch(double relative_accuracy = kDefaultRelativeAccuracy);

  void Insert(double value);
  void Insert(double value, uint64_t count);

  // Adds every value of `other` to this sketch. Fails with kInvalidArgument
  // when the relative accuracies differ.
  absl::Status Merge(const QuantileSketch& other);

  // REQUIRES: 0 <= q <= 1. Returns 0 for an empty sketch.
  double Quantile(double q) const;

  // Where the rank-th smallest inserted value lies (1-based rank). Every value
  // counted in the bucket holding that rank is within [lower, upper]: the bucket
  // (gamma^(k-1), gamma^k] (or [0, kMinIndexable] for zeros) clamped to
  // [min(), max()]. may_hold_folded: the bucket is the lowest one of a full bucket
  // array, so it may hold values folded from below; lower is then min().
  // An empty sketch or a rank outside [1, count()] gives all zeros.
  struct RankBucket {
    double lower = 0;
    double upper = 0;
    bool may_hold_folded = false;
  };
  RankBucket BucketOfRank(uint64_t rank) const;

  uint64_t count() const { return count_; }
  double min() const { return count_ == 0 ? 0 : min_; }
  double max() const { return count_ == 0 ? 0 : max_; }
  double sum() const { return sum_; }
  double relative_accuracy() const { return relative_accuracy_; }
  // Memory held: the object and its bucket array.
  size_t ApproxBytes() const { return sizeof(*this) + counts_.capacity() * sizeof(counts_[0]); }
  bool empty() const { return count_ == 0; }
  // Approximate heap bytes held by the sketch.
  size_t MemoryBytes() const;
  void Clear();

  void ToProto(v1::Sketch* out) const;
  v1::Sketch ToProto() const;
  // Validates untrusted input: accuracy range (the value range must fit
  // kMaxBuckets), bucket count, buckets and max within [kMinIndexable,
  // kMaxIndexable], min <= max, count overflow. kInvalidArgument on violation.
  static absl::StatusOr<QuantileSketch> FromProto(const v1::Sketch& proto);

 private:
  int Index(double value) const;
  double Value(int index) const;
  void Grow(int index);

  double relative_accuracy_;
  double gamma_;
  double inv_log_gamma_;
  int offset_ = 0;                // bucket index of counts_[0]
  std::vector<uint64_t> counts_;  // dense
  uint64_t zero_count_ = 0;
  uint64_t count_ = 0;
  double min_ = 0;
  double max_ = 0;
  double sum_ = 0;
};

}  // namespace rocetune

#endif  // ROCETUNE_MODEL_QUANTILE_SKETCH_H_
