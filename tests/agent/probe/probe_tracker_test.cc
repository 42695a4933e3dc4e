#include "agent/probe/probe_tracker.h"

#include "gtest/gtest.h"
#include "model/quantile_sketch.h"

namespace rocetune {
namespace {

using absl::Milliseconds;
using absl::Seconds;

QuantileSketch Rtt(const v1::LatencyWindow& w) {
  return *QuantileSketch::FromProto(w.network_rtt_seconds());
}
QuantileSketch Delay(const v1::LatencyWindow& w) {
  return *QuantileSketch::FromProto(w.host_delay_seconds());
}

TEST(ProbeTrackerTest, SampleIsRoundTripMinusResponderDelay) {
  ProbeTracker t("test", "monotonic");
  uint64_t seq = t.OnSent("intra_tor", Seconds(10), Seconds(1));
  EXPECT_EQ(t.OnReply(seq, Seconds(10) + Milliseconds(30), Milliseconds(20)),
            ProbeTracker::Outcome::kSample);
  auto windows = t.TakeWindow();
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].peer_class(), "intra_tor");
  EXPECT_EQ(windows[0].clock(), "monotonic");
  EXPECT_EQ(windows[0].probes_sent(), 1u);
  EXPECT_EQ(windows[0].probes_lost(), 0u);
  EXPECT_NEAR(Rtt(windows[0]).Quantile(0.5), 0.010, 0.010 * 0.02);
  EXPECT_NEAR(Delay(windows[0]).Quantile(0.5), 0.020, 0.020 * 0.02);
  EXPECT_TRUE(t.TakeWindow().empty());
}

TEST(ProbeTrackerTest, EchoAndDelayMayArriveSeparatelyAndSendTimeRefined) {
  ProbeTracker t("test", "nic_completion");
  uint64_t seq = t.OnSent("c", Seconds(1), Seconds(1));
  t.OnSendCompleted(seq, Seconds(1) + Milliseconds(2));
  EXPECT_EQ(t.OnEcho(seq, Seconds(1) + Milliseconds(12)), ProbeTracker::Outcome::kPending);
  EXPECT_EQ(t.OnDelay(seq, Milliseconds(4)), ProbeTracker::Outcome::kSample);
  auto w = t.TakeWindow();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].clock(), "nic_completion");
  EXPECT_NEAR(Rtt(w[0]).Quantile(0.5), 0.006, 0.006 * 0.02);
}

TEST(ProbeTrackerTest, TimeoutIsLossNeverASampleAndLateAnswerIsCounted) {
  ProbeTracker t("test", "monotonic");
  uint64_t seq = t.OnSent("c", Seconds(1), Milliseconds(100));
  t.ExpireDue(Seconds(1) + Milliseconds(99));
  EXPECT_EQ(t.outstanding(), 1u);
  t.ExpireDue(Seconds(1) + Milliseconds(100));
  EXPECT_EQ(t.outstanding(), 0u);
  EXPECT_EQ(t.OnReply(seq, Seconds(2), Milliseconds(1)), ProbeTracker::Outcome::kLate);
  auto w = t.TakeWindow();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].probes_sent(), 1u);
  EXPECT_EQ(w[0].probes_lost(), 1u);
  EXPECT_EQ(Rtt(w[0]).count(), 0u);
  EXPECT_EQ(t.anomalies().late, 1u);
}

TEST(ProbeTrackerTest, DuplicateForeignAndBogusAnswersAreCountedNotSampled) {
  ProbeTracker t("test", "monotonic");
  uint64_t a = t.OnSent("c", Seconds(1), Seconds(1));
  uint64_t b = t.OnSent("c", Seconds(1), Seconds(1));
  EXPECT_EQ(t.OnReply(a, Seconds(1) + Milliseconds(5), Milliseconds(1)),
            ProbeTracker::Outcome::kSample);
  EXPECT_EQ(t.OnReply(a, Seconds(1) + Milliseconds(6), Milliseconds(1)),
            ProbeTracker::Outcome::kDuplicate);
  EXPECT_EQ(t.OnReply(9999, Seconds(1), Milliseconds(1)), ProbeTracker::Outcome::kForeign);
  // Responder claims more delay than the whole round trip.
  EXPECT_EQ(t.OnReply(b, Seconds(1) + Milliseconds(5), Milliseconds(50)),
            ProbeTracker::Outcome::kBogus);
  ProbeAnomalies an = t.anomalies();
  EXPECT_EQ(an.duplicate, 1u);
  EXPECT_EQ(an.foreign, 1u);
  EXPECT_EQ(an.bogus, 1u);
  auto w = t.TakeWindow();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(Rtt(w[0]).count(), 1u);
  EXPECT_EQ(w[0].probes_sent(), 2u);
  EXPECT_EQ(w[0].probes_lost(), 1u);
}

TEST(ProbeTrackerTest, WindowsArePerPeerClassAndSendFailuresAreLoss) {
  ProbeTracker t("test", "monotonic");
  uint64_t a = t.OnSent("intra_tor", Seconds(1), Seconds(1));
  t.OnSent("inter_tor", Seconds(1), Seconds(1));
  t.OnSendFailed("inter_tor", "peer down");
  t.OnReply(a, Seconds(1) + Milliseconds(1), absl::ZeroDuration());
  t.ExpireDue(Seconds(5));
  auto w = t.TakeWindow();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].peer_class(), "inter_tor");
  EXPECT_EQ(w[0].probes_sent(), 2u);
  EXPECT_EQ(w[0].probes_lost(), 2u);
  EXPECT_EQ(w[1].peer_class(), "intra_tor");
  EXPECT_EQ(w[1].probes_lost(), 0u);
  EXPECT_EQ(t.anomalies().send_errors, 1u);
}

}  // namespace
}  // namespace rocetune
