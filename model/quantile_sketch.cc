#include "model/quantile_sketch.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace rocetune {
QuantileSketch::QuantileSketch(double relative_accuracy)
    : relative_accuracy_(relative_accuracy),
      gamma_((1 + relative_accuracy) / (1 - relative_accuracy)),
      inv_log_gamma_(1.0 / std::log(gamma_)) {}

int QuantileSketch::Index(double value) const {
  return static_cast<int>(std::ceil(std::log(value) * inv_log_gamma_));
}

double QuantileSketch::Value(int index) const {
  // The midpoint (in relative terms) of bucket (gamma^(i-1), gamma^i].
  return 2.0 * std::pow(gamma_, index) / (gamma_ + 1.0);
}

void QuantileSketch::Grow(int index) {
  if (counts_.empty()) {
    offset_ = index;
    counts_.assign(1, 0);
    return;
  }
  if (index < offset_) {
    counts_.insert(counts_.begin(), offset_ - index, 0);
    offset_ = index;
  } else if (index >= offset_ + static_cast<int>(counts_.size())) {
    counts_.resize(index - offset_ + 1, 0);
  }
  // Fold the lowest buckets into the lowest kept one when over the bound.
  if (static_cast<int>(counts_.size()) > kMaxBuckets) {
    int excess = static_cast<int>(counts_.size()) - kMaxBuckets;
    uint64_t folded = 0;
    for (int i = 0; i < excess; ++i) folded += counts_[i];
    counts_.erase(counts_.begin(), counts_.begin() + excess);
    counts_[0] += folded;
    offset_ += excess;
  }
}

void QuantileSketch::Insert(double value) { Insert(value, 1); }

void QuantileSketch::Insert(double value, uint64_t count) {
  if (count == 0 || std::isnan(value)) return;
  if (value < 0) value = 0;
  if (count_ == 0) {
    min_ = max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  count_ += count;
  sum_ += value * static_cast<double>(count);
  if (value <= kMinIndexable) {
    zero_count_ += count;
    return;
  }
  int index = Index(value);
  if (counts_.empty() || index < offset_ || index >= offset_ + static_cast<int>(counts_.size())) {
    Grow(index);
  }
  int slot = std::max(index - offset_, 0);  // index may have been folded
  counts_[slot] += count;
}

absl::Status QuantileSketch::Merge(const QuantileSketch& other) {
  if (other.relative_accuracy_ != relative_accuracy_) {
    return absl::InvalidArgumentError(absl::StrCat("cannot merge sketches with relative accuracy ",
                                                   relative_accuracy_, " and ",
                                                   other.relative_accuracy_));
  }
  if (other.count_ == 0) return absl::OkStatus();
  if (count_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
  } else {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
  if (!other.counts_.empty()) {
    Grow(other.offset_);
    Grow(other.offset_ + static_cast<int>(other.counts_.size()) - 1);
    for (size_t k = 0; k < other.counts_.size(); ++k) {
      int slot = std::max(other.offset_ + static_cast<int>(k) - offset_, 0);
      counts_[slot] += other.counts_[k];
    }
  }
  zero_count_ += other.zero_count_;
  count_ += other.count_;
  sum_ += other.sum_;
  return absl::OkStatus();
}

double QuantileSketch::Quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // Rank of the q-quantile among count_ values, 0-based (lower nearest rank).
  uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count_ - 1));
  if (rank < zero_count_) return std::max(0.0, min_);
  uint64_t seen = zero_count_;
  for (size_t k = 0; k < counts_.size(); ++k) {
    seen += counts_[k];
    if (seen > rank) {
      return std::clamp(Value(offset_ + static_cast<int>(k)), min_, max_);
    }
  }
  return max_;
}

QuantileSketch::RankBucket QuantileSketch::BucketOfRank(uint64_t rank) const {
  RankBucket out;
  if (count_ == 0 || rank < 1 || rank > count_) return out;
  if (rank <= zero_count_) {
    out.lower = std::max(0.0, min_);
    out.upper = std::min(kMinIndexable, max_);
    return out;
  }
  uint64_t seen = zero_count_;
  for (size_t k = 0; k < counts_.size(); ++k) {
    seen += counts_[k];
    if (seen >= rank) {
      int index = offset_ + static_cast<int>(k);
      out.may_hold_folded = k == 0 && counts_.size() >= static_cast<size_t>(kMaxBuckets);
      double lower = out.may_hold_folded ? min_ : std::pow(gamma_, index - 1);
      out.lower = std::clamp(lower, min_, max_);
      out.upper = std::clamp(std::pow(gamma_, index), min_, max_);
      return out;
    }
  }
  out.lower = out.upper = max_;  // unreachable when the counts add up
  return out;
}

size_t QuantileSketch::MemoryBytes() const {
  return sizeof(*this) + counts_.capacity() * sizeof(uint64_t);
}

void QuantileSketch::Clear() {
  counts_.clear();
  offset_ = 0;
  zero_count_ = count_ = 0;
  min_ = max_ = sum_ = 0;
}

void QuantileSketch::ToProto(v1::Sketch* out) const {
  out->Clear();
  out->set_relative_accuracy(relative_accuracy_);
  out->set_bucket_offset(offset_);
  // Trim zero buckets at both ends to keep the wire form small.
  size_t lo = 0, hi = counts_.size();
  while (lo < hi && counts_[lo] == 0) ++lo;
  while (hi > lo && counts_[hi - 1] == 0) --hi;
  out->set_bucket_offset(offset_ + static_cast<int>(lo));
  out->mutable_counts()->Reserve(static_cast<int>(hi - lo));
  for (size_t k = lo; k < hi; ++k) out->add_counts(counts_[k]);
  out->set_zero_count(zero_count_);
  out->set_min(min());
  out->set_max(max());
  out->set_sum(sum_);
}

v1::Sketch QuantileSketch::ToProto() const {
  v1::Sketch p;
  ToProto(&p);
  return p;
}

absl::StatusOr<QuantileSketch> QuantileSketch::FromProto(const v1::Sketch& p) {
  double a = p.relative_accuracy();
  if (!(a > 0 && a < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sketch: relative_accuracy ", a, " out of range (0, 1)"));
  }
  if (p.counts_size() > kMaxBuckets) {
    return absl::InvalidArgumentError(
        absl::StrCat("sketch: ", p.counts_size(), " buckets exceeds the limit of ", kMaxBuckets));
  }
  if (!std::isfinite(p.min()) || !std::isfinite(p.max()) || !std::isfinite(p.sum()) ||
      p.min() < 0 || p.min() > p.max() || p.max() > kMaxIndexable) {
    return absl::InvalidArgumentError(
        absl::StrCat("sketch: bad min/max/sum (min=", p.min(), " max=", p.max(), " sum=", p.sum(),
                     "; values above ", kMaxIndexable, " s are refused)"));
  }
  QuantileSketch s(a);
  // Buckets the accepted value range spans, in doubles first: a tiny accuracy
  // makes log(gamma) 0 and the indices infinite.
  const double span = (std::log(kMaxIndexable) - std::log(kMinIndexable)) * s.inv_log_gamma_;
  if (!(span + 2 <= kMaxBuckets)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sketch: relative_accuracy ", a, " is too fine: ", kMinIndexable, " .. ",
                     kMaxIndexable, " s would need more than ", kMaxBuckets, " buckets"));
  }
  const int lowest = s.Index(kMinIndexable);
  const int highest = s.Index(kMaxIndexable);
  const int64_t first = p.bucket_offset();
  const int64_t last = first + p.counts_size() - 1;
  if (p.counts_size() > 0 && (first < lowest || last > highest)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sketch: buckets ", first, " .. ", last, " lie outside ", lowest, " .. ",
                     highest, " (values ", kMinIndexable, " .. ", kMaxIndexable, " s)"));
  }
  uint64_t total = p.zero_count();
  for (uint64_t c : p.counts()) {
    if (total > std::numeric_limits<uint64_t>::max() - c) {
      return absl::InvalidArgumentError("sketch: total count overflows 64 bits");
    }
    total += c;
  }
  s.offset_ = p.bucket_offset();
  s.counts_.assign(p.counts().begin(), p.counts().end());
  s.zero_count_ = p.zero_count();
  s.count_ = total;
  s.min_ = p.min();
  s.max_ = p.max();
  s.sum_ = p.sum();
  if (total == 0) s.Clear();
  return s;
}

}  // namespace rocetune
