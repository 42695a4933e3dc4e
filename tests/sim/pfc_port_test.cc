// PFC thresholds and the pause/resume state machine of one ingress port.
#include "sim/pfc_port.h"

#include <vector>

#include "gtest/gtest.h"

namespace rocetune::sim {
namespace {

constexpr int64_t kStep = 1000;

PfcPortConfig Config(double xoff_static, double hyst, int64_t refresh_ns) {
  PfcPortConfig c;
  c.xoff_static_bytes = xoff_static;
  c.xon_hysteresis_bytes = hyst;
  c.headroom_bytes = 20000;
  c.refresh_ns = refresh_ns;
  return c;
}

TEST(PfcPortConfigTest, StaticXoffIgnoresOccupancy) {
  const PfcPortConfig c = Config(50000, 2048, 10000);
  EXPECT_EQ(c.Xoff(1e6, 0), 50000);
  EXPECT_EQ(c.Xoff(1e6, 9e5), 50000);
  EXPECT_EQ(c.Xon(50000), 50000 - 2048);
  EXPECT_EQ(c.AdmitLimit(50000), 70000);
}

TEST(PfcPortConfigTest, DynamicXoffIsAlphaTimesFreeBuffer) {
  PfcPortConfig c = Config(0, 2048, 10000);
  c.dynamic_alpha = 0.125;
  EXPECT_DOUBLE_EQ(c.Xoff(1e6, 0), 125000);
  EXPECT_DOUBLE_EQ(c.Xoff(1e6, 6e5), 50000) << "shrinks as the shared buffer fills";
  EXPECT_EQ(c.Xoff(1e6, 2e6), 0) << "never negative";
  EXPECT_EQ(c.Xon(1000), 0) << "XON clamps at an empty ingress";
}

TEST(PfcPortTest, PausesAboveXoffOnly) {
  const PfcPortConfig c = Config(50000, 2048, 100000);
  PfcPort port;
  EXPECT_FALSE(port.Step(3, 50000, 50000, c, kStep)) << "at XOFF: no pause yet";
  EXPECT_FALSE(port.paused(3));
  EXPECT_TRUE(port.Step(3, 50001, 50000, c, kStep)) << "above XOFF: a PAUSE frame";
  EXPECT_TRUE(port.paused(3));
  EXPECT_EQ(port.paused_mask(), 1 << 3);
}

TEST(PfcPortTest, ResumesAtXonWithHysteresis) {
  const PfcPortConfig c = Config(50000, 2048, 100000);
  PfcPort port;
  ASSERT_TRUE(port.Step(3, 60000, 50000, c, kStep));
  // Below XOFF but above XON = 47952: still paused, no new frame.
  EXPECT_FALSE(port.Step(3, 49000, 50000, c, kStep));
  EXPECT_TRUE(port.paused(3));
  EXPECT_FALSE(port.Step(3, 47953, 50000, c, kStep));
  EXPECT_TRUE(port.paused(3));
  // At XON: resumes.
  EXPECT_FALSE(port.Step(3, 47952, 50000, c, kStep));
  EXPECT_FALSE(port.paused(3));
  // Between XON and XOFF again: stays resumed.
  EXPECT_FALSE(port.Step(3, 49999, 50000, c, kStep));
  EXPECT_FALSE(port.paused(3));
  EXPECT_TRUE(port.Step(3, 50001, 50000, c, kStep)) << "pauses again above XOFF";
}

TEST(PfcPortTest, RefreshesThePauseWhileAboveXon) {
  const PfcPortConfig c = Config(50000, 2048, 3 * kStep);
  PfcPort port;
  int frames = 0;
  std::vector<int> frame_steps;
  for (int i = 0; i < 10; ++i) {
    if (port.Step(0, 80000, 50000, c, kStep)) {
      ++frames;
      frame_steps.push_back(i);
    }
  }
  EXPECT_EQ(frame_steps, (std::vector<int>{0, 3, 6, 9})) << "one frame per refresh_ns";
  EXPECT_EQ(frames, 4);
  EXPECT_TRUE(port.paused(0));
}

TEST(PfcPortTest, PrioritiesAreIndependent) {
  const PfcPortConfig c = Config(50000, 2048, 100000);
  PfcPort port;
  ASSERT_TRUE(port.Step(3, 60000, 50000, c, kStep));
  EXPECT_FALSE(port.Step(5, 10000, 50000, c, kStep));
  EXPECT_FALSE(port.paused(5));
  ASSERT_TRUE(port.Step(5, 60000, 50000, c, kStep));
  EXPECT_EQ(port.paused_mask(), (1 << 3) | (1 << 5));
  EXPECT_FALSE(port.Step(3, 0, 50000, c, kStep));
  EXPECT_EQ(port.paused_mask(), 1 << 5);
}

TEST(PfcPortTest, FollowsADynamicXoff) {
  PfcPortConfig c = Config(0, 1000, 100000);
  c.dynamic_alpha = 0.5;
  PfcPort port;
  // 30 KB buffered: below XOFF of an empty 100 KB buffer, above it once the
  // switch holds 50 KB more elsewhere.
  EXPECT_FALSE(port.Step(3, 30000, c.Xoff(100000, 30000), c, kStep));  // XOFF 35000
  EXPECT_TRUE(port.Step(3, 30000, c.Xoff(100000, 80000), c, kStep));   // XOFF 10000
  EXPECT_FALSE(port.Step(3, 30000, c.Xoff(100000, 30000), c, kStep))
      << "XON is 34000 once the buffer frees";
  EXPECT_FALSE(port.paused(3));
}

}  // namespace
}  // namespace rocetune::sim
