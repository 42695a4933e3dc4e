#include "agent/sampler.h"

#include <map>
#include <string>
#include <vector>

#include "daemon/clock.h"
#include "daemon/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;

CounterValue V(const std::string& name, uint64_t value, uint8_t width = 64, int32_t prio = -1) {
  CounterValue v;
  v.key.device = "mlx5_0";
  v.key.port = 1;
  v.key.priority = prio;
  v.key.name = name;
  v.value = value;
  v.width_bits = width;
  return v;
}

// A CounterSource fake that returns scripted snapshots.
class ScriptedSource : public CounterSource {
 public:
  std::vector<std::vector<CounterValue>> snapshots;
  size_t next = 0;
  absl::Status fail;
  std::string name() const override { return "scripted"; }
  absl::Status Collect(std::vector<CounterValue>* out) override {
    if (!fail.ok()) return fail;
    const std::vector<CounterValue>& s = snapshots.at(next++);
    out->insert(out->end(), s.begin(), s.end());
    return absl::OkStatus();
  }
};

std::map<std::string, v1::CounterSample> ByName(const SampleBatch& b) {
  std::map<std::string, v1::CounterSample> m;
  for (const v1::CounterSample& s : b.samples) m[s.name()] = s;
  return m;
}

std::unique_ptr<Sampler> MakeSampler(CounterSource* src, Clock* clock,
                                     absl::Duration interval = absl::Seconds(1)) {
  absl::StatusOr<std::unique_ptr<Sampler>> s = Sampler::Create(src, clock, interval);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

TEST(SamplerTest, FirstSightIsBaselineThenDeltasAndMeasuredRates) {
  ScriptedSource src;
  FakeClock clock;
  src.snapshots = {{V("cnp_sent", 100), V("rx_pfc_pause_frames", 7, 64, 3)},
                   {V("cnp_sent", 400), V("rx_pfc_pause_frames", 7, 64, 3)}};
  auto sampler = MakeSampler(&src, &clock);
  absl::StatusOr<SampleBatch> first = sampler->SampleOnce();
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->samples.empty());
  // The loop ran late: 1.5 s passed although the interval is 1 s.
  clock.Advance(absl::Milliseconds(1500));
  absl::StatusOr<SampleBatch> second = sampler->SampleOnce();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->measured_interval, absl::Milliseconds(1500));
  EXPECT_EQ(second->end - second->start, absl::Milliseconds(1500));
  auto m = ByName(*second);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m["cnp_sent"].delta(), 300u);
  EXPECT_DOUBLE_EQ(m["cnp_sent"].rate_per_second(), 200.0);
  EXPECT_EQ(m["cnp_sent"].device(), "mlx5_0");
  EXPECT_EQ(m["cnp_sent"].port(), 1u);
  EXPECT_EQ(m["cnp_sent"].priority(), -1);
  EXPECT_EQ(m["rx_pfc_pause_frames"].delta(), 0u);
  EXPECT_EQ(m["rx_pfc_pause_frames"].priority(), 3);
}

TEST(SamplerTest, ThirtyTwoBitCounterWraps) {
  ScriptedSource src;
  FakeClock clock;
  auto sampler = MakeSampler(&src, &clock);
  sampler->Ingest({V("out_of_sequence", 0xFFFFFF00u, 32)}, absl::Seconds(1), absl::Now());
  SampleBatch b = sampler->Ingest({V("out_of_sequence", 0x100, 32)}, absl::Seconds(2), absl::Now());
  ASSERT_EQ(b.samples.size(), 1u);
  EXPECT_EQ(b.samples[0].delta(), 0x200u);
  EXPECT_DOUBLE_EQ(b.samples[0].rate_per_second(), 512.0);
  EXPECT_EQ(sampler->wraps(), 1u);
  EXPECT_EQ(sampler->resets(), 0u);
}

TEST(SamplerTest, DecreasesThatAreNotWrapsAreResets) {
  ScriptedSource src;
  FakeClock clock;
  auto sampler = MakeSampler(&src, &clock);
  std::string log;
  SetLogSinkForTest(&log);
  sampler->Ingest({V("cnp_sent", 5'000'000'000), V("out_of_sequence", 1000, 32)}, absl::Seconds(1),
                  absl::Now());
  // Driver reload: the 64-bit counter restarts; the 32-bit one drops by far
  // less than a wrap would need.
  SampleBatch b = sampler->Ingest({V("cnp_sent", 40), V("out_of_sequence", 5, 32)},
                                  absl::Seconds(2), absl::Now());
  auto m = ByName(b);
  EXPECT_EQ(m["cnp_sent"].delta(), 40u);
  EXPECT_EQ(m["out_of_sequence"].delta(), 5u);
  EXPECT_EQ(sampler->resets(), 2u);
  EXPECT_EQ(sampler->wraps(), 0u);
  // A second reset of the same counter is counted but not logged again.
  sampler->Ingest({V("cnp_sent", 100), V("out_of_sequence", 10, 32)}, absl::Seconds(3),
                  absl::Now());
  b = sampler->Ingest({V("cnp_sent", 1), V("out_of_sequence", 11, 32)}, absl::Seconds(4),
                      absl::Now());
  SetLogSinkForTest(nullptr);
  EXPECT_EQ(ByName(b)["cnp_sent"].delta(), 1u);
  EXPECT_EQ(sampler->resets(), 3u);
  EXPECT_THAT(log, HasSubstr("reset"));
  const std::string needle = "counter=cnp_sent";
  EXPECT_NE(log.find(needle), std::string::npos);
  EXPECT_EQ(log.find(needle), log.rfind(needle));
}

TEST(SamplerTest, ThirtyTwoBitWidthDoesNotApplyToValuesAbove32Bits) {
  ScriptedSource src;
  FakeClock clock;
  auto sampler = MakeSampler(&src, &clock);
  sampler->Ingest({V("x", uint64_t{1} << 40, 32)}, absl::Seconds(1), absl::Now());
  SampleBatch b = sampler->Ingest({V("x", 3, 32)}, absl::Seconds(2), absl::Now());
  EXPECT_EQ(b.samples[0].delta(), 3u);
  EXPECT_EQ(sampler->resets(), 1u);
}

TEST(SamplerTest, NewAndVanishedCounters) {
  ScriptedSource src;
  FakeClock clock;
  auto sampler = MakeSampler(&src, &clock);
  sampler->Ingest({V("a", 1)}, absl::Seconds(1), absl::Now());
  SampleBatch b = sampler->Ingest({V("a", 2), V("b", 50)}, absl::Seconds(2), absl::Now());
  auto m = ByName(b);
  EXPECT_EQ(m.size(), 1u);  // b is new: baseline only
  EXPECT_EQ(m["a"].delta(), 1u);
  b = sampler->Ingest({V("b", 60)}, absl::Seconds(3), absl::Now());  // a vanished
  m = ByName(b);
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(m["b"].delta(), 10u);
  b = sampler->Ingest({V("a", 9), V("b", 60)}, absl::Seconds(4), absl::Now());
  EXPECT_EQ(ByName(b).count("a"), 0u);  // came back: baseline again, no bogus delta
}

TEST(SamplerTest, SameNameDifferentPriorityAreDistinct) {
  ScriptedSource src;
  FakeClock clock;
  auto sampler = MakeSampler(&src, &clock);
  sampler->Ingest({V("p", 10, 64, 3), V("p", 100, 64, 4)}, absl::Seconds(1), absl::Now());
  SampleBatch b =
      sampler->Ingest({V("p", 11, 64, 3), V("p", 200, 64, 4)}, absl::Seconds(2), absl::Now());
  ASSERT_EQ(b.samples.size(), 2u);
  for (const v1::CounterSample& s : b.samples) {
    EXPECT_EQ(s.delta(), s.priority() == 3 ? 1u : 100u);
  }
}

TEST(SamplerTest, IntervalBounds) {
  ScriptedSource src;
  FakeClock clock;
  absl::StatusOr<std::unique_ptr<Sampler>> s = Sampler::Create(&src, &clock, absl::Milliseconds(9));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("10ms"));
  s = Sampler::Create(&src, &clock, absl::Milliseconds(10));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->interval(), absl::Milliseconds(10));
  s = Sampler::Create(&src, &clock);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->interval(), absl::Seconds(1));
  EXPECT_EQ(Sampler::Create(nullptr, &clock).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SamplerTest, FailedCollectKeepsTheBaseline) {
  ScriptedSource src;
  FakeClock clock;
  src.snapshots = {{V("a", 10)}, {V("a", 30)}};
  auto sampler = MakeSampler(&src, &clock);
  ASSERT_TRUE(sampler->SampleOnce().ok());
  clock.Advance(absl::Seconds(1));
  src.fail = absl::UnavailableError("device gone");
  EXPECT_EQ(sampler->SampleOnce().status().code(), absl::StatusCode::kUnavailable);
  clock.Advance(absl::Seconds(1));
  src.fail = absl::OkStatus();
  absl::StatusOr<SampleBatch> b = sampler->SampleOnce();
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->samples.size(), 1u);
  EXPECT_EQ(b->samples[0].delta(), 20u);
  EXPECT_EQ(b->measured_interval, absl::Seconds(2));
  EXPECT_DOUBLE_EQ(b->samples[0].rate_per_second(), 10.0);
}

TEST(SamplerTest, WaitForNextSleepsUntilOneIntervalAfterTheLastSnapshot) {
  ScriptedSource src;
  FakeClock clock;
  src.snapshots = {{V("a", 1)}};
  auto sampler = MakeSampler(&src, &clock, absl::Milliseconds(250));
  const absl::Duration t0 = clock.Monotonic();
  ASSERT_TRUE(sampler->SampleOnce().ok());
  clock.Advance(absl::Milliseconds(100));
  sampler->WaitForNext();
  EXPECT_EQ(clock.Monotonic() - t0, absl::Milliseconds(250));
  clock.Advance(absl::Seconds(1));  // already late: no sleep
  const absl::Duration late = clock.Monotonic();
  sampler->WaitForNext();
  EXPECT_EQ(clock.Monotonic(), late);
}

}  // namespace
}  // namespace rocetune
