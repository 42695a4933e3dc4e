// RED/ECN marking probability of one egress queue.
#include "sim/ecn_marker.h"

#include "gtest/gtest.h"

namespace rocetune::sim {
namespace {

TEST(EcnMarkerTest, NoMarkAtOrBelowKmin) {
  const EcnMarker m(100000, 400000, 0.2);
  EXPECT_EQ(m.Probability(0), 0);
  EXPECT_EQ(m.Probability(50000), 0);
  EXPECT_EQ(m.Probability(100000), 0);
  EXPECT_GT(m.Probability(100001), 0) << "the ramp starts right above kmin";
}

TEST(EcnMarkerTest, LinearRampBetweenKminAndKmax) {
  const EcnMarker m(100000, 400000, 0.2);
  EXPECT_DOUBLE_EQ(m.Probability(175000), 0.05);
  EXPECT_DOUBLE_EQ(m.Probability(250000), 0.1);
  EXPECT_DOUBLE_EQ(m.Probability(325000), 0.15);
  EXPECT_DOUBLE_EQ(m.Probability(400000), 0.2) << "pmax at kmax itself";
  double prev = 0;
  for (double q = 100000; q <= 400000; q += 1000) {
    const double p = m.Probability(q);
    EXPECT_GE(p, prev) << "q=" << q;
    EXPECT_LE(p, 0.2) << "q=" << q;
    prev = p;
  }
}

TEST(EcnMarkerTest, EveryPacketMarkedAboveKmax) {
  const EcnMarker m(100000, 400000, 0.2);
  EXPECT_EQ(m.Probability(400001), 1);
  EXPECT_EQ(m.Probability(1e9), 1);
}

TEST(EcnMarkerTest, EqualThresholdsAreAStep) {
  const EcnMarker m(50000, 50000, 0.5);
  EXPECT_EQ(m.Probability(50000), 0);
  EXPECT_EQ(m.Probability(50000.5), 1);
}

TEST(EcnMarkerTest, DisabledNeverMarks) {
  const EcnMarker m;
  EXPECT_FALSE(m.enabled());
  EXPECT_EQ(m.Probability(1e12), 0);
  v1::EcnSettings s;
  s.set_kmin_bytes(10);
  s.set_kmax_bytes(20);
  s.set_pmax(1);
  s.set_disabled(true);
  EXPECT_EQ(EcnMarker::FromSettings(s).Probability(1e6), 0);
}

TEST(EcnMarkerTest, FromSettingsCopiesThresholds) {
  v1::EcnSettings s;
  s.set_kmin_bytes(5000);
  s.set_kmax_bytes(200000);
  s.set_pmax(0.01);
  const EcnMarker m = EcnMarker::FromSettings(s);
  EXPECT_TRUE(m.enabled());
  EXPECT_EQ(m.kmin_bytes(), 5000);
  EXPECT_EQ(m.kmax_bytes(), 200000);
  EXPECT_EQ(m.pmax(), 0.01);
  EXPECT_DOUBLE_EQ(m.Probability(102500), 0.005);
}

}  // namespace
}  // namespace rocetune::sim
