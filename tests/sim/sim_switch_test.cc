// The simulator's ToRs behind the switch seams, written through the agent's
// SwitchApplier.
#include "sim/sim_switch.h"

#include <map>
#include <string>

#include "agent/sampler.h"
#include "daemon/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune::sim {
namespace {

using ::testing::HasSubstr;

constexpr char kKmin[] = "ecn.AZURE_LOSSLESS.green_min_threshold";
constexpr char kKmax[] = "ecn.AZURE_LOSSLESS.green_max_threshold";
constexpr char kPmax[] = "ecn.AZURE_LOSSLESS.green_drop_probability";

// 4 hosts in 2 ToRs under 1 spine; hosts 2 and 3 send to host 0 (tor0's queue
// towards h0 fills and marks).
std::unique_ptr<Fabric> TwoTors() {
  v1::Scenario s;
  s.set_duration_ms(100);
  s.mutable_topology()->set_hosts(4);
  s.mutable_topology()->set_hosts_per_tor(2);
  s.mutable_topology()->set_spines(1);
  s.mutable_topology()->set_uplink_gbps(400);
  s.mutable_topology()->set_switch_buffer_bytes(4000000);
  s.mutable_ecn()->set_kmin_bytes(5000);
  s.mutable_ecn()->set_kmax_bytes(200000);
  s.mutable_ecn()->set_pmax(0.2);
  s.mutable_pfc()->set_enabled(true);
  for (int src : {1, 2, 3}) {
    v1::LongFlow* f = s.mutable_workload()->add_long_flows();
    f->set_src(src);
    f->set_dst(0);
  }
  absl::StatusOr<std::unique_ptr<Fabric>> fabric = Fabric::Create(s);
  EXPECT_TRUE(fabric.ok()) << fabric.status();
  return std::move(*fabric);
}

v1::ParameterSet Set(const std::map<std::string, int64_t>& knobs) {
  v1::ParameterSet set;
  v1::DeviceParameters* d = set.add_devices();
  d->set_device("switch");
  for (const auto& [k, v] : knobs) (*d->mutable_dcqcn())[k] = v;
  return set;
}

uint64_t Marked(SimSwitch& sw) {
  std::vector<CounterValue> values;
  EXPECT_TRUE(sw.counters()->Collect(&values).ok());
  uint64_t sum = 0;
  for (const CounterValue& v : values) {
    if (v.key.name == "queue_ecn_marked_packets") sum += v.value;
  }
  return sum;
}

TEST(SimSwitchTest, DiscoversPortsQueuesAndTheProfile) {
  auto fabric = TwoTors();
  SimSwitch sw(fabric.get(), 1);
  EXPECT_EQ(sw.host_id(), "sim-tor1");
  absl::StatusOr<SwitchInventory> inv = sw.discovery()->DiscoverSwitch();
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->platform, "sim");
  EXPECT_EQ(inv->buffer_limit_bytes, 4000000);
  ASSERT_EQ(inv->ports.size(), 3u);  // h2, h3, spine0
  EXPECT_EQ(inv->ports[0].name, "Ethernet0");
  EXPECT_EQ(inv->ports[2].name, "Ethernet8");
  EXPECT_EQ(inv->ports[0].speed_mbps, 100000);
  EXPECT_EQ(inv->ports[2].speed_mbps, 400000);
  EXPECT_EQ(inv->ports[0].pfc_enable, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(inv->queues.size(), 24u);
  ASSERT_EQ(inv->profiles.size(), 1u);
  EXPECT_EQ(inv->profiles[0].fields.at("green_min_threshold"), "5000");
  EXPECT_EQ(inv->profiles[0].fields.at("green_max_threshold"), "200000");
  EXPECT_EQ(inv->profiles[0].fields.at("green_drop_probability"), "20");
  absl::StatusOr<std::vector<v1::NicDevice>> devices = sw.discovery()->Discover();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].name(), "switch");
  EXPECT_EQ((*devices)[0].switch_queues_size(), 24);
  EXPECT_EQ((*devices)[0].switch_buffer_bytes(), 4000000u);
}

TEST(SimSwitchTest, ApplyChangesOnlyThatTorsMarking) {
  auto fabric = TwoTors();
  SimSwitch sw(fabric.get(), 0);
  absl::StatusOr<ApplyResult> r = sw.applier()->Apply(Set({{kKmax, 100000}, {kPmax, 50}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->writes, 2);
  EXPECT_EQ(r->applied.devices(0).dcqcn().at(kKmax), 100000);
  EXPECT_EQ(fabric->TorEcn(0).kmax_bytes(), 100000u);
  EXPECT_DOUBLE_EQ(fabric->TorEcn(0).pmax(), 0.5);
  EXPECT_EQ(fabric->TorEcn(1).kmax_bytes(), 200000u);
  std::vector<std::string> errors;
  v1::ParameterSet current = sw.applier()->ReadCurrent(&errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(current.devices(0).dcqcn().at(kKmin), 5000);
  EXPECT_EQ(current.devices(0).dcqcn().at("pfc.Ethernet8.pfc_enable"), 255);
}

TEST(SimSwitchTest, RefusalsChangeNothing) {
  auto fabric = TwoTors();
  SimSwitch sw(fabric.get(), 0);
  absl::StatusOr<ApplyResult> r = sw.applier()->Apply(Set({{kKmax, 4000001}}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("exceeds the buffer (4000000 bytes)"));
  r = sw.applier()->Apply(Set({{kKmin, 300000}}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("must be below green_max_threshold=200000"));
  r = sw.applier()->Apply(Set({{"ecn.AZURE_LOSSLESS.yellow_max_threshold", 1000}}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  r = sw.applier()->Apply(Set({{"ecn.OTHER.green_max_threshold", 1000}}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  r = sw.applier()->Apply(Set({{"pfc.Ethernet99.pfc_enable", 8}}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fabric->TorEcn(0).kmax_bytes(), 200000u);
  EXPECT_EQ(fabric->TorEcn(0).kmin_bytes(), 5000u);
}

TEST(SimSwitchTest, ChangeUnderneathAbortsWithNothingWritten) {
  auto fabric = TwoTors();
  SwitchApplierOptions opt;
  v1::EcnSettings theirs = fabric->TorEcn(0);
  theirs.set_kmax_bytes(150000);
  opt.before_commit = [&] { ASSERT_TRUE(fabric->SetTorConfig(0, &theirs, {}, {}).ok()); };
  SimSwitch sw(fabric.get(), 0);
  SwitchApplier applier(sw.store(), opt);
  absl::StatusOr<ApplyResult> r = applier.Apply(Set({{kKmax, 100000}}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_EQ(fabric->TorEcn(0).kmax_bytes(), 150000u);
}

TEST(SimSwitchTest, PfcEnablePerPort) {
  auto fabric = TwoTors();
  SimSwitch sw(fabric.get(), 0);
  absl::StatusOr<ApplyResult> r = sw.applier()->Apply(Set({{"pfc.Ethernet4.pfc_enable", 8}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->disruptive.size(), 1u);
  EXPECT_EQ(fabric->TorPfcMasks(0), (std::vector<uint8_t>{0xff, 0x08, 0xff}));
  absl::StatusOr<SwitchInventory> inv = sw.discovery()->DiscoverSwitch();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->ports[1].pfc_enable, std::vector<int>{3});
}

TEST(SimSwitchTest, MarkingFollowsTheAppliedThresholds) {
  auto fabric = TwoTors();
  SimSwitch tor0(fabric.get(), 0);
  fabric->RunUntil(5000000);
  const uint64_t first = Marked(tor0);
  EXPECT_GT(first, 0u);
  // Thresholds far above what PFC lets the queue reach: no more marks.
  ASSERT_TRUE(tor0.applier()->Apply(Set({{kKmin, 3900000}, {kKmax, 4000000}})).ok());
  fabric->RunUntil(6000000);  // let the write take effect and the queue settle
  const uint64_t settled = Marked(tor0);
  fabric->RunUntil(16000000);
  EXPECT_EQ(Marked(tor0), settled);
  // Back to tight thresholds: marking resumes.
  ASSERT_TRUE(tor0.applier()->Apply(Set({{kKmin, 5000}, {kKmax, 20000}})).ok());
  fabric->RunUntil(26000000);
  EXPECT_GT(Marked(tor0), settled);
}

TEST(SimSwitchTest, SeamsAreTheSwitchsOwn) {
  auto fabric = TwoTors();
  SimSwitch tor0(fabric.get(), 0);
  HostSeams s = tor0.seams();
  EXPECT_EQ(s.discovery, tor0.discovery());
  EXPECT_EQ(s.counters, tor0.counters());
  EXPECT_EQ(s.applier, tor0.applier());
  EXPECT_EQ(s.clock, Clock::Real());
  EXPECT_EQ(s.cc, nullptr);
  EXPECT_THAT(s.capabilities, ::testing::ElementsAre("switch.sim", "wred_ecn", "pfc_enable"));
}

TEST(SimSwitchTest, CountersPerQueueAndPriority) {
  auto fabric = TwoTors();
  SimSwitch tor0(fabric.get(), 0);
  fabric->RunUntil(2000000);
  std::vector<CounterValue> values;
  ASSERT_TRUE(tor0.counters()->Collect(&values).ok());
  std::map<std::string, uint64_t> ethernet0;  // the port towards h0, queue 3
  for (const CounterValue& v : values) {
    if (v.key.device != "Ethernet0") continue;
    if (v.key.priority == -1 && v.key.port == 3) ethernet0[v.key.name] = v.value;
  }
  EXPECT_GT(ethernet0["queue_bytes"], 1000000u);
  EXPECT_GT(ethernet0["queue_packets"], 1000u);
  EXPECT_EQ(ethernet0.count("queue_occupancy_bytes"), 1u);
  EXPECT_EQ(ethernet0.count("queue_dropped_packets"), 1u);
  // The occupancy is a level; everything else only grows.
  for (const CounterValue& v : values) {
    EXPECT_EQ(v.kind,
              v.key.name == "queue_occupancy_bytes" ? CounterKind::kLevel : CounterKind::kCounter)
        << v.key.name;
  }
  // 3 ports x (8 queues x 6 + 8 priorities x 2).
  EXPECT_EQ(values.size(), 3u * (8 * 6 + 8 * 2));
}

// Mean occupancy of tor0's queue towards h0 over `n` samples 100 us apart
// (from `at_ns` on), read through the sampler as the agent does: a level in
// every batch, never a counter sample.
double MeanOccupancy(Fabric* fabric, Sampler* sampler, int64_t at_ns, int n) {
  double sum = 0;
  SampleBatch batch;
  for (int i = 0; i < n; ++i) {
    fabric->RunUntil(at_ns + 100000 * i);
    EXPECT_TRUE(sampler->SampleOnce(&batch).ok());
    for (const v1::CounterSample& c : batch.samples) {
      EXPECT_NE(c.name(), "queue_occupancy_bytes");
    }
    int found = 0;
    for (const v1::LevelSample& l : batch.levels) {
      EXPECT_EQ(l.name(), "queue_occupancy_bytes");
      if (l.device() == "Ethernet0" && l.port() == 3) {
        sum += static_cast<double>(l.value());
        ++found;
      }
    }
    EXPECT_EQ(found, 1);
  }
  return sum / n;
}

// The queue's occupancy follows the marking thresholds up and back down.
TEST(SimSwitchTest, OccupancyIsALevelThatGoesDownAsWellAsUp) {
  auto fabric = TwoTors();
  SimSwitch tor0(fabric.get(), 0);
  std::unique_ptr<Sampler> sampler =
      *Sampler::Create(tor0.counters(), Clock::Real(), absl::Milliseconds(10));
  const double tight = MeanOccupancy(fabric.get(), sampler.get(), 5000000, 20);
  // Thresholds far above what PFC lets the queue reach: it fills.
  ASSERT_TRUE(tor0.applier()->Apply(Set({{kKmin, 3900000}, {kKmax, 4000000}})).ok());
  const double loose = MeanOccupancy(fabric.get(), sampler.get(), 16000000, 20);
  // Tight again: it drains.
  ASSERT_TRUE(tor0.applier()->Apply(Set({{kKmin, 5000}, {kKmax, 20000}})).ok());
  const double again = MeanOccupancy(fabric.get(), sampler.get(), 26000000, 20);
  EXPECT_GT(loose, 2 * tight) << tight << " " << loose << " " << again;
  EXPECT_LT(again, loose / 2) << tight << " " << loose << " " << again;
  EXPECT_EQ(sampler->resets(), 0u);
}

}  // namespace
}  // namespace rocetune::sim
