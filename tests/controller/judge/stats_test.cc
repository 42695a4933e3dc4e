#include "controller/judge/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace rocetune::controller::stats {
namespace {

TEST(StatsTest, LogGammaMatchesFactorials) {
  EXPECT_NEAR(LogGamma(1), 0, 1e-12);
  EXPECT_NEAR(LogGamma(5), std::log(24.0), 1e-12);
  EXPECT_NEAR(LogGamma(0.5), 0.5 * std::log(M_PI), 1e-12);
  EXPECT_NEAR(LogGamma(101), std::lgamma(101.0), 1e-9);
}

TEST(StatsTest, IncompleteBetaKnownValues) {
  // I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1 - x)^b.
  EXPECT_NEAR(RegularizedIncompleteBeta(1, 1, 0.3), 0.3, 1e-13);
  EXPECT_NEAR(RegularizedIncompleteBeta(3, 1, 0.7), std::pow(0.7, 3), 1e-13);
  EXPECT_NEAR(RegularizedIncompleteBeta(1, 4, 0.2), 1 - std::pow(0.8, 4), 1e-13);
  // Symmetry I_x(a, b) = 1 - I_(1-x)(b, a).
  EXPECT_NEAR(RegularizedIncompleteBeta(2.5, 7, 0.4), 1 - RegularizedIncompleteBeta(7, 2.5, 0.6),
              1e-13);
  EXPECT_EQ(RegularizedIncompleteBeta(2, 3, 0), 0);
  EXPECT_EQ(RegularizedIncompleteBeta(2, 3, 1), 1);
}

TEST(StatsTest, StudentTMatchesTables) {
  // Cauchy (df = 1) has a closed form.
  EXPECT_NEAR(StudentTUpperTail(1, 1), 0.25, 1e-12);
  EXPECT_NEAR(StudentTQuantile(0.975, 1), std::tan(M_PI * 0.475), 1e-8);
  // Table values of t_(1-a, df).
  EXPECT_NEAR(StudentTQuantile(0.95, 7), 1.894579, 1e-5);
  EXPECT_NEAR(StudentTQuantile(0.995, 7), 3.499483, 1e-5);
  EXPECT_NEAR(StudentTQuantile(0.975, 30), 2.042272, 1e-5);
  EXPECT_NEAR(StudentTQuantile(0.0005, 5), -6.868827, 1e-4);
  // Round trip at a tiny level.
  double t = StudentTQuantile(1 - 1e-4, 7);
  EXPECT_NEAR(StudentTUpperTail(t, 7), 1e-4, 1e-10);
  EXPECT_NEAR(StudentTUpperTail(0, 3), 0.5, 1e-15);
  EXPECT_NEAR(StudentTUpperTail(-2, 7) + StudentTUpperTail(2, 7), 1, 1e-14);
}

TEST(StatsTest, NormalQuantile) {
  EXPECT_NEAR(NormalQuantile(0.975), 1.959964, 1e-6);
  EXPECT_NEAR(NormalQuantile(0.005), -2.575829, 1e-6);
  EXPECT_EQ(NormalQuantile(0.5), 0);
}

TEST(StatsTest, BinomialCdfMatchesDirectSum) {
  const uint64_t n = 20;
  const double p = 0.3;
  double sum = 0;
  for (int k = 0; k <= 20; ++k) {
    sum += std::exp(LogGamma(n + 1) - LogGamma(k + 1) - LogGamma(n - k + 1) + k * std::log(p) +
                    (n - k) * std::log(1 - p));
    EXPECT_NEAR(BinomialCdf(k, n, p), sum, 1e-12) << "k=" << k;
  }
  EXPECT_EQ(BinomialCdf(-1, n, p), 0);
}

// The minimum n at which an upper bound exists: n >= ln(a/2) / ln(q), two-sided
// 95% (368 for p99, 3688 for p999).
TEST(StatsTest, RankIntervalUpperBoundNeedsMinimumSamples) {
  EXPECT_EQ(QuantileRankInterval(367, 0.99, 0.95).upper, 368u);  // none
  EXPECT_LE(QuantileRankInterval(368, 0.99, 0.95).upper, 368u);
  EXPECT_EQ(QuantileRankInterval(3687, 0.999, 0.95).upper, 3688u);
  EXPECT_LE(QuantileRankInterval(3688, 0.999, 0.95).upper, 3688u);
  EXPECT_EQ(QuantileRankInterval(0, 0.99, 0.95).upper, 1u);
}

TEST(StatsTest, RankIntervalGoldens) {
  RankInterval a = QuantileRankInterval(1000, 0.99, 0.95);
  EXPECT_EQ(a.lower, 983u);
  EXPECT_EQ(a.upper, 997u);
  RankInterval b = QuantileRankInterval(10000, 0.99, 0.95);
  EXPECT_EQ(b.lower, 9880u);
  EXPECT_EQ(b.upper, 9920u);
  RankInterval c = QuantileRankInterval(10000, 0.999, 0.95);
  EXPECT_EQ(c.lower, 9983u);
  EXPECT_EQ(c.upper, 9997u);
  // Coverage of [l, u) is at least nominal, and neither end can move inward.
  for (uint64_t n : {500u, 1000u, 2000u, 30000u}) {
    RankInterval r = QuantileRankInterval(n, 0.99, 0.95);
    double cover = BinomialCdf(r.upper - 1, n, 0.99) - BinomialCdf(r.lower - 1, n, 0.99);
    EXPECT_GE(cover, 0.95) << n;
    EXPECT_GT(BinomialCdf(r.lower, n, 0.99), 0.025) << n;
    EXPECT_LT(BinomialCdf(r.upper - 2, n, 0.99), 0.975) << n;
  }
}

}  // namespace
}  // namespace rocetune::controller::stats
