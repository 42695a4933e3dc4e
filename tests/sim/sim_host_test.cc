// The agent's host seams as the simulator implements them, and the clock its
// agents run on.
#include "sim/sim_host.h"

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "agent/sampler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/quantile_sketch.h"
#include "sim/scenario_loader.h"
#include "sim/sim_clock.h"
#include "sim/switch_ecn_config.h"

namespace rocetune::sim {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Fabric> TwoHosts(double duration_ms) {
  v1::Scenario s;
  s.set_duration_ms(duration_ms);
  s.mutable_topology()->set_hosts(2);
  v1::LongFlow* f = s.mutable_workload()->add_long_flows();
  f->set_src(0);
  f->set_dst(1);
  absl::StatusOr<std::unique_ptr<Fabric>> fabric = Fabric::Create(s);
  EXPECT_TRUE(fabric.ok()) << fabric.status();
  return std::move(*fabric);
}

std::map<std::string, uint64_t> Collect(SimHost& host, int prio = -1) {
  std::vector<CounterValue> values;
  EXPECT_TRUE(host.counters()->Collect(&values).ok());
  std::map<std::string, uint64_t> out;
  for (const CounterValue& v : values) {
    EXPECT_EQ(v.key.device, "mlx5_0");
    EXPECT_EQ(v.key.port, 1u);
    if (v.key.priority == prio) out[v.key.name] = v.value;
  }
  return out;
}

TEST(SimHostTest, DiscoversOneMlx5DeviceAtTheLinkSpeed) {
  auto fabric = TwoHosts(1);
  SimHost host(fabric.get(), 1);
  EXPECT_EQ(host.host_id(), "h1");
  auto devices = host.discovery()->Discover();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].name(), "mlx5_0");
  EXPECT_EQ((*devices)[0].counter_source(), "sim");
  ASSERT_EQ((*devices)[0].ports_size(), 1);
  EXPECT_EQ((*devices)[0].ports(0).speed_mbps(), 100000u);
  EXPECT_EQ((*devices)[0].ports(0).netdev(), "eth0");
}

TEST(SimHostTest, CountersUseCanonicalNamesAndCountTraffic) {
  auto fabric = TwoHosts(1);
  fabric->RunToEnd();
  SimHost sender(fabric.get(), 0), receiver(fabric.get(), 1);
  auto s = Collect(sender);
  auto r = Collect(receiver);
  const std::set<std::string> port_names = {"tx_bytes",          "rx_bytes", "tx_packets",
                                            "rx_packets",        "cnp_sent", "cnp_handled",
                                            "ecn_marked_packets"};
  for (const std::string& n : port_names) EXPECT_EQ(s.count(n), 1u) << n;
  for (int p = 0; p < 8; ++p) {
    auto per_prio = Collect(sender, p);
    for (const char* n : {"rx_pfc_pause_frames", "tx_pfc_pause_frames", "rx_pfc_pause_duration_us",
                          "tx_pfc_pause_duration_us"}) {
      EXPECT_EQ(per_prio.count(n), 1u) << n << " prio " << p;
    }
  }
  // 1 ms at 100 Gb/s is 12.5 MB.
  EXPECT_GT(s["tx_bytes"], 12000000u);
  EXPECT_LE(s["tx_bytes"], 12500001u);
  EXPECT_GT(r["rx_bytes"], 12000000u);
  EXPECT_EQ(s["rx_bytes"], 0u);
  EXPECT_EQ(s["tx_packets"], (s["tx_bytes"] + 1023) / 1024);
}

TEST(SimHostTest, CcParamStoreReadsDefaultsAndWritesTakeEffect) {
  auto fabric = TwoHosts(4);
  SimHost host(fabric.get(), 0);
  auto params = host.cc()->Read("mlx5_0");
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->dcqcn().at("rpg_ai_rate"), 5);
  EXPECT_EQ(params->dcqcn().at("dce_tcp_g"), 1019);
  EXPECT_EQ(params->dcqcn().size(), 19u);
  EXPECT_EQ(params->rp_enable_mask(), 255u);

  fabric->RunUntil(1000000);
  const uint64_t tx1 = Collect(host)["tx_bytes"];
  ASSERT_TRUE(host.cc()->Write("mlx5_0", "rpg_max_rate", 10000).ok());
  EXPECT_EQ(host.cc()->Read("mlx5_0")->dcqcn().at("rpg_max_rate"), 10000);
  fabric->RunUntil(2000000);
  const uint64_t tx2 = Collect(host)["tx_bytes"];
  // Capped at 10 Gb/s from the next sync point on: about 1.25 MB per ms.
  EXPECT_LT(tx2 - tx1, 1400000u);
  EXPECT_GT(tx2 - tx1, 1100000u);
}

TEST(SimHostTest, CcParamStoreRejectsBadWritesAndKeepsValues) {
  auto fabric = TwoHosts(1);
  SimHost host(fabric.get(), 0);
  absl::Status s = host.cc()->Write("mlx5_0", "rpg_ai_ratez", 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("rpg_ai_ratez"));
  s = host.cc()->Write("mlx5_0", "dce_tcp_g", 5000);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("dce_tcp_g=5000 outside [0, 1023]"));
  EXPECT_EQ(host.cc()->Read("mlx5_0")->dcqcn().at("dce_tcp_g"), 1019);
  EXPECT_EQ(host.cc()->Write("mlx5_1", "rpg_ai_rate", 3).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(host.cc()->Read("mlx5_1").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(host.cc()->Write("mlx5_0", "rp_enable_mask", 256).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(host.cc()->Write("mlx5_0", "rp_enable_mask", 8).ok());
  EXPECT_EQ(host.cc()->Read("mlx5_0")->rp_enable_mask(), 8u);
}

TEST(SimHostTest, PfcConfigReportsPausesAndStoresSettings) {
  absl::StatusOr<v1::Scenario> s =
      LoadScenario(std::string(ROCETUNE_SOURCE_DIR) + "/sim/scenarios/victim_flow.textproto", {});
  ASSERT_TRUE(s.ok());
  s->set_duration_ms(5);
  auto fabric = Fabric::Create(*s);
  ASSERT_TRUE(fabric.ok());
  (*fabric)->RunToEnd();
  SimHost victim(fabric->get(), 0);
  auto state = victim.pfc()->Read("eth0");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->enable_mask, 0xff);
  EXPECT_GT(state->indications[3], 0u) << "the victim's NIC received PAUSE frames";
  EXPECT_GT(Collect(victim, 3)["rx_pfc_pause_duration_us"], 0u);
  v1::PfcSettings settings;
  settings.set_enable_mask(1 << 3);
  settings.set_delay(20);
  ASSERT_TRUE(victim.pfc()->Write("eth0", settings).ok());
  EXPECT_EQ(victim.pfc()->Read("eth0")->enable_mask, 1 << 3);
  EXPECT_EQ(victim.pfc()->Read("eth0")->delay, 20);
  settings.set_enable_mask(300);
  EXPECT_EQ(victim.pfc()->Write("eth0", settings).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(victim.pfc()->Read("eth1").status().code(), absl::StatusCode::kUnavailable);
}

TEST(SimHostTest, ProberMeasuresItsPlanPerPeerClass) {
  auto fabric = TwoHosts(3);
  SimHost host(fabric.get(), 1);
  v1::ProbePlan bad;
  bad.set_probes_per_second(1000);
  bad.add_peers()->set_host_id("h7");
  absl::Status st = host.prober()->SetPlan(bad);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("h7"));
  v1::ProbePlan plan;
  plan.set_probes_per_second(100000);  // one every 10 us
  v1::ProbePeer* peer = plan.add_peers();
  peer->set_host_id("h0");
  peer->set_peer_class("intra_tor");
  ASSERT_TRUE(host.prober()->SetPlan(plan).ok());
  fabric->RunUntil(1000000);
  std::vector<v1::LatencyWindow> w = host.prober()->TakeWindow();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].peer_class(), "intra_tor");
  EXPECT_NEAR(static_cast<double>(w[0].probes_sent()), 100, 2);
  auto sketch = QuantileSketch::FromProto(w[0].network_rtt_seconds());
  ASSERT_TRUE(sketch.ok());
  EXPECT_GT(sketch->count(), 90u);
  // The probe from h1 returns over h0 -> h1, which carries a 100 Gb/s flow.
  EXPECT_GT(sketch->Quantile(0.5), 4e-6);
  EXPECT_TRUE(host.prober()->TakeWindow().empty());
}

TEST(SimHostTest, SeamsAreSafeToUseWhileTheFabricSteps) {
  auto fabric = TwoHosts(5);
  SimHost host(fabric.get(), 0);
  FabricEcnConfig ecn(fabric.get());
  std::atomic<bool> done{false};
  std::atomic<bool> started{false};
  std::thread stepper([&] {
    // Steps only once the seams are in use (a busy machine could otherwise
    // run the whole fabric before the first read).
    while (!started) std::this_thread::yield();
    fabric->RunToEnd();
    done = true;
  });
  int reads = 0;
  do {
    std::vector<CounterValue> v;
    ASSERT_TRUE(host.counters()->Collect(&v).ok());
    ASSERT_TRUE(host.cc()->Write("mlx5_0", "rpg_ai_rate", 5 + reads % 10).ok());
    v1::EcnSettings e;
    e.set_kmin_bytes(1000 + reads);
    e.set_kmax_bytes(200000);
    e.set_pmax(0.1);
    ASSERT_TRUE(ecn.Write(e).ok());
    host.prober()->TakeWindow();
    ++reads;
    started = true;
  } while (!done);
  stepper.join();
  EXPECT_GT(reads, 0);
  v1::EcnSettings bad;
  bad.set_kmin_bytes(10);
  bad.set_kmax_bytes(5);
  EXPECT_EQ(ecn.Write(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ecn.Read()->kmax_bytes(), 200000u);
}

// The simulated agents' clock (sim/sim_clock.h): the fabric's time over the
// pace, so an agent's rates are the fabric's own however far it lags.
TEST(SimClockTest, MovesWithTheFabricOverThePaceNotWithTheWallClock) {
  auto fabric = TwoHosts(10);
  SimClock clock(fabric.get(), 0.5);
  const absl::Duration m0 = clock.Monotonic();
  const absl::Time w0 = clock.Now();
  // Wall time has passed since m0 (a real clock would differ by now); the
  // fabric has not moved.
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
  auto fabric = TwoHosts(10);
  SimHost sender(fabric.get(), 0);
  SimClock clock(fabric.get(), 1.0);
  auto sampler = Sampler::Create(sender.counters(), &clock, absl::Milliseconds(10));
  ASSERT_TRUE(sampler.ok()) << sampler.status();
  fabric->RunUntil(1000000);
  ASSERT_TRUE((*sampler)->SampleOnce().ok());
  // However much wall time these 2 ms of simulated time take, the interval
  // (and so the rate) is the fabric's: a wall-clock interval would not be
  // exactly 2 ms, and a lagging fabric would read a fraction of the link.
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
