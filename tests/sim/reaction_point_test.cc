#include "sim/reaction_point.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace rocetune::sim {
namespace {

constexpr int64_t kUs = 1000;
constexpr double kLine = 100000;  // Mb/s

// Parameters with the alpha timer far away, so alpha only changes when a test wants it.
RpParams Quiet() {
  RpParams p;
  p.dce_tcp_rtt_us = 1000000;
  p.rpg_byte_reset_bytes = 0;
  p.rpg_time_reset_us = 1000000;
  return p;
}

// Two cuts 4 us apart; with clamping, R_T ends at the rate after the first cut.
void CutTwice(ReactionPoint& rp) {
  rp.OnCnp(0);
  rp.AdvanceTo(4 * kUs);
  rp.OnCnp(5 * kUs);
  rp.AdvanceTo(8 * kUs);
}

TEST(ReactionPointTest, SendsAtLineRateWithNoTimersBeforeTheFirstCnp) {
  ReactionPoint rp(RpParams{}, kLine);
  rp.AdvanceTo(1000000 * kUs);
  rp.OnBytesSent(int64_t{1} << 40, 1000000 * kUs);
  EXPECT_EQ(rp.rate_mbps(), kLine);
  EXPECT_FALSE(rp.limiter_active());
  EXPECT_EQ(rp.next_event_ns(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(rp.phase(), ReactionPoint::Phase::kLineRate);
}

TEST(ReactionPointTest, CutMultipliesRateByOneMinusHalfAlpha) {
  RpParams p = Quiet();
  p.initial_alpha_value = 512;  // alpha = 0.5
  p.rate_reduce_monitor_period_us = 4;
  ReactionPoint rp(p, kLine);
  rp.OnCnp(0);
  rp.AdvanceTo(4 * kUs - 1);
  EXPECT_EQ(rp.rate_mbps(), kLine) << "the cut waits for the end of the monitor period";
  rp.AdvanceTo(4 * kUs);
  EXPECT_DOUBLE_EQ(rp.rate_mbps(), kLine * (1 - 0.5 / 2));
  // A second CNP: the next period cuts again by the same factor.
  rp.OnCnp(5 * kUs);
  rp.AdvanceTo(8 * kUs);
  EXPECT_DOUBLE_EQ(rp.rate_mbps(), kLine * 0.75 * 0.75);
  EXPECT_EQ(rp.cuts(), 2u);
}

TEST(ReactionPointTest, SeveralCnpsInOneMonitorPeriodCutOnce) {
  RpParams p = Quiet();
  p.initial_alpha_value = 1023;
  ReactionPoint rp(p, kLine);
  rp.OnCnp(0);
  rp.AdvanceTo(4 * kUs);
  const double after_first = rp.rate_mbps();
  rp.OnCnp(5 * kUs);
  rp.OnCnp(6 * kUs);
  rp.OnCnp(7 * kUs);
  rp.AdvanceTo(8 * kUs);
  EXPECT_DOUBLE_EQ(rp.rate_mbps(), after_first * (1 - 1023.0 / 2048));
  EXPECT_EQ(rp.cuts(), 2u);
  EXPECT_EQ(rp.cnps(), 4u);
}

TEST(ReactionPointTest, MinDecFacBoundsOneCut) {
  RpParams p = Quiet();
  p.initial_alpha_value = 1023;
  p.rpg_min_dec_fac = 90;  // a cut removes at most 10 %
  ReactionPoint rp(p, kLine);
  rp.OnCnp(0);
  rp.AdvanceTo(4 * kUs);
  EXPECT_DOUBLE_EQ(rp.rate_mbps(), kLine * 0.9);
}

TEST(ReactionPointTest, RateNeverFallsBelowMinRate) {
  RpParams p = Quiet();
  p.rpg_min_rate_mbps = 30000;
  ReactionPoint rp(p, kLine);
  for (int i = 0; i < 10; ++i) {
    rp.OnCnp(i * 4 * kUs + 1);
    rp.AdvanceTo((i + 1) * 4 * kUs);
  }
  EXPECT_DOUBLE_EQ(rp.rate_mbps(), 30000);
}

TEST(ReactionPointTest, AlphaDecaysGeometricallyWithoutCnps) {
  RpParams p;
  p.rpg_byte_reset_bytes = 0;
  p.dce_tcp_rtt_us = 1;
  p.dce_tcp_g = 1019;
  ReactionPoint rp(p, kLine);
  rp.OnCnp(0);
  const double g = 1019.0 / 1024.0;
  for (int k : {1, 10, 50, 200, 2000}) {
    rp.AdvanceTo(k * kUs);
    EXPECT_NEAR(rp.alpha_fp(), 1023.0 * std::pow(g, k), 1e-9 * 1023) << "after " << k;
  }
}

TEST(ReactionPointTest, IntegerAlphaDecaysWithTruncation) {
  RpParams p;
  p.rpg_byte_reset_bytes = 0;
  p.dce_tcp_rtt_us = 1;
  p.dce_tcp_g = 1019;
  p.alpha_integer_10bit = true;
  ReactionPoint rp(p, kLine);
  rp.OnCnp(0);
  const double g = 1019.0 / 1024.0;
  for (int k : {1, 10, 50, 200}) {
    rp.AdvanceTo(k * kUs);
    const double exact = 1023.0 * std::pow(g, k);
    EXPECT_EQ(rp.alpha_fp(), std::floor(rp.alpha_fp())) << "a whole number after " << k;
    // 10-bit truncation loses less than one unit per period.
    EXPECT_LE(rp.alpha_fp(), exact) << "after " << k << " periods";
    EXPECT_GT(rp.alpha_fp(), exact - k) << "after " << k << " periods";
  }
  // Below 1024 / (1024 - G) every period removes exactly one unit: alpha falls
  // linearly to 0 instead of geometrically.
  rp.AdvanceTo(1000 * kUs);
  EXPECT_EQ(rp.alpha_fp(), 0) << "exact: " << 1023.0 * std::pow(g, 1000);
  // With g = 1/2 the recurrence is exact up to truncation: 1023 -> 511 -> 255 -> ...
  p.dce_tcp_g = 512;
  ReactionPoint half(p, kLine);
  half.OnCnp(0);
  for (int k = 1; k <= 8; ++k) {
    half.AdvanceTo(k * kUs);
    EXPECT_NEAR(half.alpha_fp(), 1023.0 / std::pow(2, k), 1.0) << k;
  }
}

TEST(ReactionPointTest, AlphaRisesByOneMinusGWhenACnpArrivedInThePeriod) {
  RpParams p;
  p.rpg_byte_reset_bytes = 0;
  p.dce_tcp_rtt_us = 10;
  p.dce_tcp_g = 1019;
  p.initial_alpha_value = 100;
  for (bool integer : {false, true}) {
    p.alpha_integer_10bit = integer;
    ReactionPoint rp(p, kLine);
    rp.OnCnp(0);
    rp.OnCnp(5 * kUs);
    rp.AdvanceTo(10 * kUs);
    if (integer) {
      EXPECT_EQ(rp.alpha_fp(), (1019 * 100 >> 10) + (1024 - 1019));
    } else {
      EXPECT_DOUBLE_EQ(rp.alpha_fp(), 1019 * 100 / 1024.0 + (1024 - 1019));
    }
  }
}

TEST(ReactionPointTest, AlphaSettlesAtTheShareOfPeriodsWithACnp) {
  // A CNP in one period of every eight: the exact alpha converges to the
  // fluid model's fixed point (about 1/8); the 10-bit integer one (G = 1020:
  // -1 or +3 per period below 256) loses 4 units every eight periods, down to 0.
  RpParams p = Quiet();
  p.dce_tcp_rtt_us = 1;
  p.dce_tcp_g = 1020;  // g = 1/256
  p.initial_alpha_value = 512;
  const double g = 4.0 / 1024.0;
  // Over eight periods a -> (1-g)^8 a + g (1-g)^7 (sampled at the end of the cycle).
  const double expected = 1024 * g * std::pow(1 - g, 7) / (1 - std::pow(1 - g, 8));
  ReactionPoint exact(p, kLine);
  p.alpha_integer_10bit = true;
  ReactionPoint integer(p, kLine);
  for (ReactionPoint* rp : {&exact, &integer}) {
    rp->OnCnp(0);
    for (int k = 0; k < 20000; ++k) {
      if (k % 8 == 0) rp->OnCnp(k * kUs + 500);
      rp->AdvanceTo((k + 1) * kUs);
    }
  }
  EXPECT_NEAR(exact.alpha_fp(), expected, 0.01 * expected);
  EXPECT_LT(integer.alpha_fp(), 0.1 * expected)
      << "integer alpha " << integer.alpha_fp() << " vs exact " << expected;
}

TEST(ReactionPointTest, FastRecoveryHalvesTheGapToTheTargetEachPeriod) {
  RpParams p = Quiet();
  p.clamp_tgt_rate = false;
  p.clamp_tgt_rate_after_time_inc = false;
  p.rpg_threshold = 5;
  p.rpg_time_reset_us = 55;
  p.initial_alpha_value = 1023;
  ReactionPoint rp(p, kLine);
  rp.OnCnp(0);
  rp.AdvanceTo(4 * kUs);  // the cut; R_T stays at line rate (no clamp)
  const double target = rp.target_mbps();
  ASSERT_EQ(target, kLine);
  const double gap0 = target - rp.rate_mbps();
  ASSERT_GT(gap0, 0);
  for (int k = 1; k <= 5; ++k) {
    rp.AdvanceTo(4 * kUs + k * 55 * kUs);
    EXPECT_EQ(rp.phase(), ReactionPoint::Phase::kFastRecovery);
    EXPECT_DOUBLE_EQ(rp.target_mbps(), target) << "fast recovery keeps the target";
    EXPECT_NEAR(target - rp.rate_mbps(), gap0 / std::pow(2, k), 1e-6) << "period " << k;
  }
  // F = 5 leaves 1/32 of the gap.
  EXPECT_NEAR(target - rp.rate_mbps(), gap0 / 32, 1e-6);
}

TEST(ReactionPointTest, AdditiveIncreaseSlopeIsRaiOverT) {
  RpParams p = Quiet();
  p.clamp_tgt_rate = true;
  p.rpg_threshold = 1;
  p.rpg_time_reset_us = 300;
  p.rpg_ai_rate_mbps = 5;
  p.initial_alpha_value = 1023;
  ReactionPoint rp(p, kLine);
  CutTwice(rp);  // R_T = R_C of the first cut, below line rate
  const int64_t cut = 8 * kUs;
  const int64_t t = 300 * kUs;
  rp.AdvanceTo(cut + 1 * t);
  EXPECT_EQ(rp.phase(), ReactionPoint::Phase::kFastRecovery);
  rp.AdvanceTo(cut + 2 * t);
  ASSERT_EQ(rp.phase(), ReactionPoint::Phase::kAdditive);
  const double rt0 = rp.target_mbps();
  rp.AdvanceTo(cut + 22 * t);
  EXPECT_EQ(rp.phase(), ReactionPoint::Phase::kAdditive) << "no byte counter: no hyper increase";
  EXPECT_NEAR(rp.target_mbps() - rt0, 20 * 5.0, 1e-9);
  // R_C follows R_T with the same slope once the gap has closed.
  const double rc1 = rp.rate_mbps();
  rp.AdvanceTo(cut + 42 * t);
  const double slope_mbps_per_us = (rp.rate_mbps() - rc1) / (20 * 300.0);
  EXPECT_NEAR(slope_mbps_per_us, 5.0 / 300.0, 1e-6);
}

TEST(ReactionPointTest, HyperIncreaseWhenBothCountersPassThreshold) {
  RpParams p = Quiet();
  p.clamp_tgt_rate = true;
  p.rpg_threshold = 1;
  p.rpg_time_reset_us = 100;
  p.rpg_byte_reset_bytes = 1000;
  p.rpg_ai_rate_mbps = 5;
  p.rpg_hai_rate_mbps = 50;
  ReactionPoint rp(p, kLine);
  CutTwice(rp);
  const double rt_cut = rp.target_mbps();
  ASSERT_LT(rt_cut, 0.6 * kLine);
  rp.OnBytesSent(1000, 9 * kUs);  // byte stage 1: fast recovery
  EXPECT_DOUBLE_EQ(rp.target_mbps(), rt_cut);
  rp.OnBytesSent(1000, 10 * kUs);  // byte stage 2, time stage 0: additive
  EXPECT_DOUBLE_EQ(rp.target_mbps(), rt_cut + 5);
  rp.AdvanceTo(8 * kUs + 100 * kUs);  // time stage 1: additive
  EXPECT_DOUBLE_EQ(rp.target_mbps(), rt_cut + 10);
  rp.AdvanceTo(8 * kUs + 200 * kUs);  // time stage 2: both past F -> hyper
  EXPECT_EQ(rp.phase(), ReactionPoint::Phase::kHyper);
  EXPECT_DOUBLE_EQ(rp.target_mbps(), rt_cut + 60);
  const double before = rp.target_mbps();
  rp.OnBytesSent(1000, 209 * kUs);
  EXPECT_DOUBLE_EQ(rp.target_mbps(), before + 50);
}

TEST(ReactionPointTest, TargetIsCappedAtMaxRate) {
  RpParams p = Quiet();
  p.rpg_max_rate_mbps = 40000;
  p.rpg_byte_reset_bytes = 1;
  ReactionPoint rp(p, kLine);
  EXPECT_EQ(rp.rate_mbps(), 40000);
  rp.OnCnp(0);
  rp.AdvanceTo(4 * kUs);
  for (int i = 0; i < 100; ++i) rp.OnBytesSent(1, 5 * kUs);
  EXPECT_LE(rp.target_mbps(), 40000);
}

}  // namespace
}  // namespace rocetune::sim
