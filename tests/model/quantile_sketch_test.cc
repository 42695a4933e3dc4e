#include "model/quantile_sketch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace rocetune {
namespace {

// Exact lower-nearest-rank quantile, the definition the sketch approximates.
double ExactQuantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  return v[rank];
}

void ExpectWithinRelativeError(const std::vector<double>& data, const QuantileSketch& s,
                               double accuracy) {
  for (double q : {0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0}) {
    double exact = ExactQuantile(data, q);
    double got = s.Quantile(q);
    EXPECT_LE(std::abs(got - exact), accuracy * exact * (1 + 1e-9))
        << "q=" << q << " exact=" << exact << " sketch=" << got;
  }
}

std::vector<double> Uniform(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(1e-6, 1e-3);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<double> Lognormal(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> d(std::log(20e-6), 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// 99% fast (~5 us), 1% slow (~2 ms): the shape of RTTs under incast.
std::vector<double> Bimodal(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> fast(5e-6, 0.5e-6);
  std::normal_distribution<double> slow(2e-3, 0.2e-3);
  std::bernoulli_distribution is_slow(0.01);
  std::vector<double> v(n);
  for (auto& x : v) x = std::max(1e-7, is_slow(rng) ? slow(rng) : fast(rng));
  return v;
}

class AccuracyTest : public ::testing::TestWithParam<double> {};

TEST_P(AccuracyTest, UniformLognormalBimodal) {
  const double a = GetParam();
  for (auto make : {Uniform, Lognormal, Bimodal}) {
    std::vector<double> data = make(100'000, 42);
    QuantileSketch s(a);
    for (double x : data) s.Insert(x);
    ASSERT_EQ(s.count(), data.size());
    ExpectWithinRelativeError(data, s, a);
    EXPECT_DOUBLE_EQ(s.min(), *std::min_element(data.begin(), data.end()));
    EXPECT_DOUBLE_EQ(s.max(), *std::max_element(data.begin(), data.end()));
  }
}

INSTANTIATE_TEST_SUITE_P(Accuracies, AccuracyTest, ::testing::Values(0.01, 0.02, 0.005));

TEST(QuantileSketchTest, BimodalTailIsSeen) {
  std::vector<double> data = Bimodal(100'000, 7);
  QuantileSketch s;
  for (double x : data) s.Insert(x);
  // p50 is in the fast mode, p999 in the slow one.
  EXPECT_LT(s.Quantile(0.5), 10e-6);
  EXPECT_GT(s.Quantile(0.999), 1e-3);
}

TEST(QuantileSketchTest, EmptyAndZeroValues) {
  QuantileSketch s;
  EXPECT_EQ(s.Quantile(0.99), 0);
  EXPECT_TRUE(s.empty());
  s.Insert(0.0);
  s.Insert(-1.0);  // clamped to zero
  s.Insert(1e-3);
  EXPECT_EQ(s.count(), 3u);
  EXPECT_EQ(s.Quantile(0.0), 0);
  EXPECT_NEAR(s.Quantile(1.0), 1e-3, 1e-5);
}

TEST(QuantileSketchTest, MergeEqualsInsertingEverythingIntoOne) {
  std::vector<double> a = Lognormal(20'000, 1), b = Bimodal(30'000, 2), c = Uniform(10'000, 3);
  QuantileSketch sa, sb, sc, all;
  for (double x : a) {
    sa.Insert(x);
    all.Insert(x);
  }
  for (double x : b) {
    sb.Insert(x);
    all.Insert(x);
  }
  for (double x : c) {
    sc.Insert(x);
    all.Insert(x);
  }

  // (a + b) + c
  QuantileSketch left = sa;
  ASSERT_TRUE(left.Merge(sb).ok());
  ASSERT_TRUE(left.Merge(sc).ok());
  // a + (b + c)
  QuantileSketch bc = sb;
  ASSERT_TRUE(bc.Merge(sc).ok());
  QuantileSketch right = sa;
  ASSERT_TRUE(right.Merge(bc).ok());

  v1::Sketch pl = left.ToProto(), pr = right.ToProto(), pall = all.ToProto();
  EXPECT_EQ(pl.counts_size(), pall.counts_size());
  EXPECT_EQ(pl.bucket_offset(), pall.bucket_offset());
  for (int i = 0; i < pall.counts_size(); ++i) {
    EXPECT_EQ(pl.counts(i), pall.counts(i));
    EXPECT_EQ(pr.counts(i), pall.counts(i));
  }
  EXPECT_EQ(left.count(), all.count());
  EXPECT_EQ(right.count(), all.count());
  for (double q : {0.1, 0.5, 0.99, 0.999}) {
    EXPECT_EQ(left.Quantile(q), all.Quantile(q));
    EXPECT_EQ(right.Quantile(q), all.Quantile(q));
  }
  std::vector<double> everything = a;
  everything.insert(everything.end(), b.begin(), b.end());
  everything.insert(everything.end(), c.begin(), c.end());
  ExpectWithinRelativeError(everything, left, QuantileSketch::kDefaultRelativeAccuracy);
}

TEST(QuantileSketchTest, MergeRejectsDifferentAccuracy) {
  QuantileSketch a(0.01), b(0.02);
  b.Insert(1.0);
  absl::Status s = a.Merge(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.count(), 0u);
}

TEST(QuantileSketchTest, ProtoRoundTrip) {
  QuantileSketch s;
  for (double x : Bimodal(5'000, 9)) s.Insert(x);
  absl::StatusOr<QuantileSketch> back = QuantileSketch::FromProto(s.ToProto());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->count(), s.count());
  for (double q : {0.0, 0.5, 0.99, 1.0}) EXPECT_EQ(back->Quantile(q), s.Quantile(q));
}

TEST(QuantileSketchTest, FromProtoRejectsGarbage) {
  v1::Sketch p;
  p.set_relative_accuracy(0);
  EXPECT_EQ(QuantileSketch::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  p.set_relative_accuracy(1.5);
  EXPECT_EQ(QuantileSketch::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  p.set_relative_accuracy(0.01);
  p.set_bucket_offset(1 << 30);
  p.add_counts(1);
  EXPECT_EQ(QuantileSketch::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  p.set_bucket_offset(0);
  p.set_min(5);
  p.set_max(1);
  EXPECT_EQ(QuantileSketch::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  p.set_min(0);
  p.set_max(1);
  p.add_counts(UINT64_MAX);
  EXPECT_EQ(QuantileSketch::FromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  v1::Sketch huge;
  huge.set_relative_accuracy(0.01);
  for (int i = 0; i < QuantileSketch::kMaxBuckets + 1; ++i) huge.add_counts(1);
  EXPECT_EQ(QuantileSketch::FromProto(huge).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(QuantileSketchTest, BucketCountIsBounded) {
  QuantileSketch s(0.01);
  for (double x = 1e-9; x < 1e30; x *= 1.5) s.Insert(x);
  EXPECT_LE(s.ToProto().counts_size(), QuantileSketch::kMaxBuckets);
  // Upper quantiles keep their accuracy after folding low buckets.
  EXPECT_NEAR(s.Quantile(1.0), s.max(), s.max() * 0.01);
}

// The bucket of every rank contains the exact order statistic of that rank, so
// rank intervals mapped to buckets cover at least what the ranks cover.
TEST(QuantileSketchTest, BucketOfRankContainsTheOrderStatistic) {
  for (auto data : {Lognormal(5000, 3), Bimodal(5000, 4), Uniform(5000, 5)}) {
    QuantileSketch s(0.01);
    for (double x : data) s.Insert(x);
    std::sort(data.begin(), data.end());
    for (uint64_t rank = 1; rank <= data.size(); ++rank) {
      QuantileSketch::RankBucket b = s.BucketOfRank(rank);
      ASSERT_LE(b.lower, data[rank - 1]) << rank;
      ASSERT_GE(b.upper, data[rank - 1]) << rank;
      ASSERT_LE(b.upper, b.lower * 1.0203 + 1e-300) << rank;  // one bucket wide
      ASSERT_FALSE(b.may_hold_folded);
    }
  }
  QuantileSketch empty;
  EXPECT_EQ(empty.BucketOfRank(1).upper, 0);
  QuantileSketch one;
  one.Insert(2e-6);
  EXPECT_EQ(one.BucketOfRank(0).upper, 0);
  EXPECT_EQ(one.BucketOfRank(2).upper, 0);
  EXPECT_EQ(one.BucketOfRank(1).lower, 2e-6);  // clamped to min and max
  EXPECT_EQ(one.BucketOfRank(1).upper, 2e-6);
}

TEST(QuantileSketchTest, BucketOfRankFlagsFoldedBuckets) {
  QuantileSketch s(0.01);
  for (int i = 0; i < 100; ++i) s.Insert(1e-6 * (1 + i * 0.01));
  s.Insert(1e32);  // forces the low buckets to fold
  QuantileSketch::RankBucket low = s.BucketOfRank(50);
  EXPECT_TRUE(low.may_hold_folded);
  EXPECT_EQ(low.lower, s.min());
  EXPECT_GE(low.upper, 1e-6 * 1.5);
  EXPECT_FALSE(s.BucketOfRank(101).may_hold_folded);
}

}  // namespace
}  // namespace rocetune

namespace rocetune {
namespace {

// One host's sketch from the wire must not be able to fold a group's buckets.
TEST(QuantileSketchTest, ExtremeBucketsFromTheWireCannotMoveAGroupsP99) {
  QuantileSketch group(0.01);
  std::vector<double> data = Lognormal(50'000, 7);
  for (double x : data) group.Insert(x * 1e-5);
  const double p99 = group.Quantile(0.99);

  for (int offset : {1 << 20, -(1 << 20), 100'000, -100'000}) {
    v1::Sketch bad;
    bad.set_relative_accuracy(0.01);
    bad.set_bucket_offset(offset);
    bad.add_counts(1);
    bad.set_max(1);
    absl::StatusOr<QuantileSketch> s = QuantileSketch::FromProto(bad);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << offset;
    EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr("outside"));
  }
  // The widest sketch accepted: one value at each end of the allowed range.
  QuantileSketch wide(0.01);
  wide.Insert(QuantileSketch::kMinIndexable * 1.0001);
  wide.Insert(QuantileSketch::kMaxIndexable);
  absl::StatusOr<QuantileSketch> accepted = QuantileSketch::FromProto(wide.ToProto());
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  ASSERT_TRUE(group.Merge(*accepted).ok());
  EXPECT_NEAR(group.Quantile(0.99), p99, 0.02 * p99);
  // A value beyond the range, or an accuracy too fine to cover it, is refused.
  v1::Sketch beyond = wide.ToProto();
  beyond.set_max(2 * QuantileSketch::kMaxIndexable);
  EXPECT_FALSE(QuantileSketch::FromProto(beyond).ok());
  v1::Sketch fine = QuantileSketch(0.001).ToProto();
  fine.add_counts(1);
  fine.set_max(1);
  EXPECT_THAT(std::string(QuantileSketch::FromProto(fine).status().message()),
              ::testing::HasSubstr("too fine"));
}

}  // namespace
}  // namespace rocetune
