// The simulated agents' clock: the fabric's time over the pace, so an agent's
// rates are the fabric's own however far the fabric lags the wall clock.
#include "sim/sim_clock.h"

#include <memory>

#include "absl/time/clock.h"
#include "agent/sampler.h"
#include "gtest/gtest.h"
#include "sim/sim_host.h"

namespace rocetune::sim {
namespace {

std::unique_ptr<Fabric> OneFlow() {
  v1::Scenario s;
  s.set_duration_ms(10);
  s.mutable_topology()->set_hosts(2);
  v1::LongFlow* f = s.mutable_workload()->add_long_flows();
  f->set_src(0);
  f->set_dst(1);
  absl::StatusOr<std::unique_ptr<Fabric>> fabric = Fabric::Create(s);
  EXPECT_TRUE(fabric.ok()) << fabric.status();
  return std::move(*fabric);
}

TEST(SimClockTest, MovesWithTheFabricOverThePaceNotWithTheWallClock) {
  auto fabric = OneFlow();
  SimClock clock(fabric.get(), 0.5);
  const absl::Duration m0 = clock.Monotonic();
  const absl::Time w0 = clock.Now();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(clock.Monotonic(), m0) << "the fabric has not moved";
  EXPECT_EQ(clock.Now(), w0);
  fabric->RunUntil(1000000);  // 1 ms of simulated time at pace 0.5: 2 ms
  EXPECT_EQ(clock.Monotonic() - m0, absl::Milliseconds(2));
  EXPECT_EQ(clock.Now() - w0, absl::Milliseconds(2));
  // Made later, a clock starts from the fabric's time then.
  SimClock later(fabric.get(), 1.0);
  const absl::Duration l0 = later.Monotonic();
  fabric->RunUntil(3000000);
  EXPECT_EQ(later.Monotonic() - l0, absl::Milliseconds(2));
  EXPECT_EQ(clock.Monotonic() - m0, absl::Milliseconds(6));
}

TEST(SimClockTest, SamplerRatesAreTheFabricsOwnWhenTheFabricLags) {
  auto fabric = OneFlow();
  SimHost sender(fabric.get(), 0);
  SimClock clock(fabric.get(), 1.0);
  auto sampler = Sampler::Create(sender.counters(), &clock, absl::Milliseconds(10));
  ASSERT_TRUE(sampler.ok()) << sampler.status();
  fabric->RunUntil(1000000);
  ASSERT_TRUE((*sampler)->SampleOnce().ok());
  // 2 ms of simulated time take far longer than 2 ms of wall time here: a
  // wall-clock rate would read a fraction of the link.
  absl::SleepFor(absl::Milliseconds(50));
  fabric->RunUntil(3000000);
  absl::StatusOr<SampleBatch> batch = (*sampler)->SampleOnce();
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->measured_interval, absl::Milliseconds(2));
  double tx_rate = -1;
  for (const v1::CounterSample& c : batch->samples) {
    if (c.name() == "tx_bytes" && c.priority() == -1) tx_rate = c.rate_per_second();
  }
  // One long flow alone on a 100 Gb/s link: 12.5 GB/s, less its ramp.
  EXPECT_GT(tx_rate, 12.0e9);
  EXPECT_LE(tx_rate, 12.5e9 + 1);
}

}  // namespace
}  // namespace rocetune::sim
