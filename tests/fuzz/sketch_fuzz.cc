// QuantileSketch::FromProto on arbitrary Sketch messages. Property: a sketch
// it accepts, merged into a group, never folds the group's buckets, so the
// group's p99 stays within the sketch's relative accuracy of what it was
// (the one extra host holds at most 1% of the group's values here).
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "model/quantile_sketch.h"
#include "rocetune/v1/sketch.pb.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rocetune::v1::Sketch proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<rocetune::QuantileSketch> s = rocetune::QuantileSketch::FromProto(proto);
  if (!s.ok()) return 0;
  (void)s->Quantile(0.5);
  (void)s->Quantile(0.99);
  (void)s->BucketOfRank(s->count());
  if (s->relative_accuracy() != rocetune::QuantileSketch::kDefaultRelativeAccuracy) return 0;
  rocetune::QuantileSketch group;
  // 100 values per 1 of the incoming sketch: 20 us .. 2 ms.
  const uint64_t per_value = std::max<uint64_t>(1, std::min<uint64_t>(s->count(), 1u << 20));
  for (int i = 0; i < 100; ++i) group.Insert(2e-5 * std::pow(1.047, i), per_value);
  const double before = group.Quantile(0.99);
  if (s->count() > per_value) return 0;  // only small sketches: the bound below assumes 1%
  rocetune::fuzz::Check(group.Merge(*s).ok());
  rocetune::fuzz::Check(group.ToProto().counts_size() < rocetune::QuantileSketch::kMaxBuckets);
  const double after = group.Quantile(0.99);
  // One value in 101 can move the p99 by at most one sample rank: a neighbour bucket.
  rocetune::fuzz::Check(std::abs(after - before) <= 0.1 * before);
  return 0;
}
