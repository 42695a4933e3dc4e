// Integration tests of the SONiC switch platform against a real redis-server
// (one per test, on a unix socket in a temp dir), seeded as a 32-port switch.
#include "agent/switch/sonic_switch.h"

#include <signal.h>
#include <stdlib.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/agent_metrics.h"
#include "agent/apply/lkg_journal.h"
#include "agent/apply/local_guard.h"
#include "agent/apply/nic_owner.h"
#include "agent/sampler.h"
#include "agent/switch/switch_counter_names.h"
#include "daemon/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "tests/agent/switch/redis_server.h"
#include "tests/agent/switch/sonic_seed.h"
#include "tests/integration/subprocess.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::RedisServer;
using testing::SeedSonic;

std::string TempDir() { return ::rocetune::testing::MakeTempDir("sonic"); }

class SonicSwitchTest : public ::testing::Test {
 protected:
  void SetUp() override { StartRedis({}); }

  void StartRedis(std::vector<std::string> extra) {
    dir_ = TempDir();
    ASSERT_FALSE(dir_.empty());
    redis_ = std::make_unique<RedisServer>(dir_, std::move(extra));
    ASSERT_TRUE(redis_->Start().ok()) << "is redis-server installed? (scripts/install-deps)";
    ASSERT_TRUE(SeedSonic(redis_->endpoint()).ok());
    MakeSwitch();
  }

  void MakeSwitch(SwitchApplierOptions applier = {}) {
    SonicSwitchOptions o;
    o.redis = redis_->endpoint();
    o.client.backoff_min = absl::Milliseconds(50);
    o.client.backoff_max = absl::Milliseconds(200);
    o.applier = std::move(applier);
    auto sw = SonicSwitch::Create(o);
    ASSERT_TRUE(sw.ok());
    sw_ = std::move(*sw);
    client_ = std::make_unique<RedisClient>(*RedisEndpoint::Parse(redis_->endpoint()), 4);
    counters_ = std::make_unique<RedisClient>(*RedisEndpoint::Parse(redis_->endpoint()), 2);
  }

  std::string Hget(const std::string& key, const std::string& field) {
    absl::StatusOr<RedisReply> r = client_->Command({"HGET", key, field});
    return r.ok() ? r->str : "<error>";
  }
  void Hset(RedisClient* c, const std::string& key, const std::string& field,
            const std::string& value) {
    ASSERT_TRUE(c->Command({"HSET", key, field, value}).ok());
  }

  static v1::ParameterSet Set(std::vector<std::pair<std::string, int64_t>> knobs) {
    v1::ParameterSet set;
    v1::DeviceParameters* d = set.add_devices();
    d->set_device("switch");
    for (const auto& [k, v] : knobs) (*d->mutable_dcqcn())[k] = v;
    return set;
  }

  std::string dir_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<SonicSwitch> sw_;
  std::unique_ptr<RedisClient> client_, counters_;
};

const CounterValue* Find(const std::vector<CounterValue>& v, const std::string& dev, uint32_t port,
                         int prio, const std::string& name) {
  for (const auto& c : v) {
    if (c.key.device == dev && c.key.port == port && c.key.priority == prio && c.key.name == name) {
      return &c;
    }
  }
  return nullptr;
}

TEST_F(SonicSwitchTest, DiscoversPortsQueuesProfilesAndWatchdog) {
  absl::StatusOr<SwitchInventory> inv = sw_->discovery()->DiscoverSwitch();
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->hostname, "leaf1");
  EXPECT_EQ(inv->hwsku, "Mellanox-SN4600C-C64");
  ASSERT_EQ(inv->ports.size(), 32u);
  EXPECT_EQ(inv->ports[0].name, "Ethernet0");
  EXPECT_EQ(inv->ports[2].name, "Ethernet8");  // natural order, not "Ethernet100"
  EXPECT_EQ(inv->ports[31].name, "Ethernet124");
  EXPECT_EQ(inv->ports[0].speed_mbps, 100000);
  EXPECT_EQ(inv->ports[1].speed_mbps, 400000);
  EXPECT_EQ(inv->ports[0].oper_status, "up");
  EXPECT_EQ(inv->ports[7].oper_status, "down");
  EXPECT_EQ(inv->ports[5].pfc_enable, (std::vector<int>{3, 4}));
  EXPECT_EQ(inv->ports[5].pfcwd_enable, (std::vector<int>{3, 4}));
  ASSERT_EQ(inv->queues.size(), 32u * 5);  // 0-2 and 3-4 expanded
  int lossless = 0;
  for (const auto& q : inv->queues) {
    if (q.index >= 3) {
      ++lossless;
      EXPECT_EQ(q.wred_profile, q.port == "Ethernet0" ? "ROCE_TUNED" : "AZURE_LOSSLESS");
    } else {
      EXPECT_EQ(q.wred_profile, "");
    }
  }
  EXPECT_EQ(lossless, 64);
  ASSERT_EQ(inv->profiles.size(), 2u);
  EXPECT_EQ(inv->profiles[0].name, "AZURE_LOSSLESS");
  EXPECT_EQ(inv->profiles[0].fields.at("green_max_threshold"), "2097152");
  EXPECT_EQ(inv->pfc_watchdog.size(), 33u);  // 32 ports + GLOBAL
  EXPECT_EQ(inv->buffer_limit_bytes, 12766208);
  EXPECT_TRUE(inv->ecn_marked_counter_supported);
  absl::StatusOr<std::vector<v1::NicDevice>> devs = sw_->discovery()->Discover();
  ASSERT_TRUE(devs.ok());
  ASSERT_EQ(devs->size(), 1u);
  EXPECT_EQ((*devs)[0].name(), "switch");
  EXPECT_EQ((*devs)[0].ports_size(), 32);
  EXPECT_EQ((*devs)[0].ports(7).state(), "DOWN");
}

TEST_F(SonicSwitchTest, SeamsAreTheSwitchsOwn) {
  HostSeams s = sw_->seams();
  EXPECT_EQ(s.discovery, sw_->discovery());
  EXPECT_EQ(s.counters, sw_->counters());
  EXPECT_EQ(s.applier, sw_->applier());
  EXPECT_EQ(s.clock, Clock::Real());
  EXPECT_EQ(s.pfc, nullptr);
  EXPECT_THAT(s.capabilities, ::testing::ElementsAre("switch.sonic", "wred_ecn", "pfc_enable"));
}

TEST_F(SonicSwitchTest, CountersUseCanonicalNamesInOneRoundTripPerRound) {
  std::vector<CounterValue> v;
  ASSERT_TRUE(sw_->counters()->Collect(&v).ok());
  // 32 ports x (16 PFC frame counters + 2 pause durations) + 32 x 8 unicast
  // queues x 7 fields + 64 lossless queues x 3 watchdog fields.
  EXPECT_EQ(v.size(), 32u * 18 + 32u * 8 * 7 + 64u * 3);
  const CounterValue* c = Find(v, "Ethernet4", 0, 3, "rx_pfc_pause_frames");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->value, testing::SeedPfcRx(1, 3));
  ASSERT_NE(Find(v, "Ethernet4", 0, 4, "rx_pfc_pause_duration_us"), nullptr);
  ASSERT_NE(Find(v, "Ethernet124", 3, -1, "queue_ecn_marked_packets"), nullptr);
  ASSERT_NE(Find(v, "Ethernet124", 4, -1, "pfcwd_storms_detected"), nullptr);
  EXPECT_EQ(Find(v, "Ethernet0", 3, -1, "pfcwd_stormed")->value, 0u);
  // The levels are marked as such; the counters are not.
  EXPECT_EQ(Find(v, "Ethernet0", 3, -1, "pfcwd_stormed")->kind, CounterKind::kLevel);
  EXPECT_EQ(Find(v, "Ethernet0", 3, -1, "queue_watermark_bytes")->kind, CounterKind::kLevel);
  EXPECT_EQ(Find(v, "Ethernet0", 3, -1, "queue_bytes")->kind, CounterKind::kCounter);
  EXPECT_EQ(Find(v, "Ethernet0", 3, -1, "pfcwd_storms_detected")->kind, CounterKind::kCounter);
  EXPECT_EQ(Find(v, "Ethernet4", 0, 3, "rx_pfc_pause_frames")->kind, CounterKind::kCounter);
  EXPECT_EQ(Find(v, "Ethernet0", 8, -1, "queue_packets"), nullptr);  // multicast skipped
  // Steady state: exactly one round trip per round, whatever the counter count.
  uint64_t before = sw_->counters_db()->round_trips();
  for (int i = 0; i < 5; ++i) {
    v.clear();
    ASSERT_TRUE(sw_->counters()->Collect(&v).ok());
  }
  EXPECT_EQ(sw_->counters_db()->round_trips() - before, 5u);
}

TEST_F(SonicSwitchTest, SixtyFourBitCountersAndResets) {
  std::unique_ptr<Sampler> sampler =
      *Sampler::Create(sw_->counters(), Clock::Real(), absl::Milliseconds(10));
  const std::string q = "COUNTERS:" + testing::SeedQueueOid(2, 3);
  const std::string p = "COUNTERS:" + testing::SeedPortOid(2);
  Hset(counters_.get(), q, "SAI_QUEUE_STAT_BYTES", "4294967000");  // just below 2^32
  Hset(counters_.get(), p, "SAI_PORT_STAT_PFC_3_TX_PKTS", "5000000");
  ASSERT_TRUE(sampler->SampleOnce().ok());
  // Past 2^32 (a 64-bit counter does not wrap there), and a counter reset.
  Hset(counters_.get(), q, "SAI_QUEUE_STAT_BYTES", "8589934592000");
  Hset(counters_.get(), p, "SAI_PORT_STAT_PFC_3_TX_PKTS", "7");
  Hset(counters_.get(), q, "PFC_WD_STATUS", "stormed");
  Hset(counters_.get(), q, "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED", "1");
  absl::StatusOr<SampleBatch> b = sampler->SampleOnce();
  ASSERT_TRUE(b.ok());
  std::map<std::string, uint64_t> d;
  for (const auto& s : b->samples) {
    if (s.device() == "Ethernet8")
      d[absl::StrCat(s.name(), "/", s.port(), "/", s.priority())] = s.delta();
  }
  EXPECT_EQ(d["queue_bytes/3/-1"], 8589934592000ull - 4294967000ull);
  EXPECT_EQ(d["tx_pfc_pause_frames/0/3"], 7u);  // reset: delta = new value
  EXPECT_EQ(d["pfcwd_storms_detected/3/-1"], 1u);
  EXPECT_EQ(d.count("pfcwd_stormed/3/-1"), 0u);  // a level, not a counter
  EXPECT_EQ(sampler->resets(), 1u);
  EXPECT_EQ(sampler->wraps(), 0u);
}

// Occupancy, watermark and the watchdog's stormed state are levels from
// COUNTERS_DB to /metrics: read as levels each round (never deltas, never
// resets), exported as gauges that follow the switch down as well as up.
TEST_F(SonicSwitchTest, QueueLevelsAreGaugesThatGoDownAsWellAsUp) {
  const std::string q = "COUNTERS:" + testing::SeedQueueOid(2, 3);  // Ethernet8 queue 3
  auto set_levels = [&](const std::string& occupancy, const std::string& watermark,
                        const std::string& status) {
    Hset(counters_.get(), q, "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES", occupancy);
    Hset(counters_.get(), q, "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES", watermark);
    Hset(counters_.get(), q, "PFC_WD_STATUS", status);
  };
  std::unique_ptr<Sampler> sampler =
      *Sampler::Create(sw_->counters(), Clock::Real(), absl::Milliseconds(10));
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics metrics(registry, "leaf1");
  SampleBatch batch;
  // One agent round: sample, lend to a Report, observe, take back.
  auto round = [&]() {
    EXPECT_TRUE(sampler->SampleOnce(&batch).ok());
    v1::Report report;
    report.mutable_counters()->Swap(&batch.samples);
    report.mutable_levels()->Swap(&batch.levels);
    for (const v1::CounterSample& c : report.counters()) {
      EXPECT_NE(c.name(), "queue_occupancy_bytes");
      EXPECT_NE(c.name(), "queue_watermark_bytes");
      EXPECT_NE(c.name(), "pfcwd_stormed");
    }
    std::map<std::string, uint64_t> levels;
    for (const v1::LevelSample& l : report.levels()) {
      if (l.device() == "Ethernet8" && l.port() == 3) levels[l.name()] = l.value();
    }
    metrics.ObserveReport(report, batch.values);
    batch.samples.Swap(report.mutable_counters());
    batch.levels.Swap(report.mutable_levels());
    return levels;
  };
  auto gauge = [&](const std::string& name) {
    prometheus::TextSerializer ser;
    const std::string text = ser.Serialize(registry->Collect());
    const std::string series =
        absl::StrCat("\n", name, "{device=\"Ethernet8\",host=\"leaf1\",queue=\"3\"} ");
    const size_t at = text.find(series);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + series.size()));
  };
  set_levels("524288", "1048576", "operational");
  std::map<std::string, uint64_t> l = round();  // the first round has levels already
  EXPECT_EQ(l["queue_occupancy_bytes"], 524288u);
  EXPECT_EQ(l["queue_watermark_bytes"], 1048576u);
  EXPECT_EQ(l["pfcwd_stormed"], 0u);
  EXPECT_EQ(gauge("rocetune_switch_queue_occupancy_bytes"), 524288);
  EXPECT_EQ(gauge("rocetune_switch_queue_watermark_bytes"), 1048576);
  EXPECT_EQ(gauge("rocetune_switch_pfcwd_stormed"), 0);
  // Up: a storm.
  set_levels("2097152", "3145728", "stormed");
  round();
  EXPECT_EQ(gauge("rocetune_switch_queue_occupancy_bytes"), 2097152);
  EXPECT_EQ(gauge("rocetune_switch_queue_watermark_bytes"), 3145728);
  EXPECT_EQ(gauge("rocetune_switch_pfcwd_stormed"), 1);
  // Down: drained and restored.
  set_levels("0", "4096", "operational");
  l = round();
  EXPECT_EQ(l["queue_occupancy_bytes"], 0u);
  EXPECT_EQ(gauge("rocetune_switch_queue_occupancy_bytes"), 0);
  EXPECT_EQ(gauge("rocetune_switch_queue_watermark_bytes"), 4096);
  EXPECT_EQ(gauge("rocetune_switch_pfcwd_stormed"), 0);
  EXPECT_EQ(sampler->resets(), 0u);  // a level going down is no counter reset
  prometheus::TextSerializer ser;
  const std::string text = ser.Serialize(registry->Collect());
  EXPECT_THAT(text, HasSubstr("# TYPE rocetune_switch_queue_occupancy_bytes gauge"));
  EXPECT_THAT(text, HasSubstr("# TYPE rocetune_switch_queue_watermark_bytes gauge"));
  EXPECT_THAT(text, HasSubstr("# TYPE rocetune_switch_pfcwd_stormed gauge"));
  EXPECT_THAT(text, HasSubstr("rocetune_switch_queue_bytes_total{"));  // counters stay counters
  EXPECT_THAT(text, Not(HasSubstr("rocetune_rdma_unmapped_total")));
  // The watchdog stops polling the queue: its level is no longer exported.
  ASSERT_TRUE(counters_->Command({"HDEL", q, "PFC_WD_STATUS"}).ok());
  round();
  EXPECT_EQ(gauge("rocetune_switch_pfcwd_stormed"), -1);
  EXPECT_EQ(gauge("rocetune_switch_queue_occupancy_bytes"), 0);
}

// The real agent binary on the seeded switch, no controller reachable: its
// /metrics serves the queue levels as gauges and follows them down.
TEST_F(SonicSwitchTest, AgentServesQueueLevelsAsGauges) {
  const std::string q = "COUNTERS:" + testing::SeedQueueOid(2, 3);
  Hset(counters_.get(), q, "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES", "777216");
  const std::string ready = dir_ + "/agent.ready";
  testing::Subprocess agent(ROCETUNE_AGENT_BINARY,
                            {"--platform=sonic", "--redis=" + redis_->endpoint(), "--host_id=leaf1",
                             "--controller=127.0.0.1:1", "--insecure_loopback",
                             "--metrics_address=127.0.0.1:0", "--state_dir=" + dir_ + "/state",
                             "--sample_interval=100ms", "--probe=none", "--ready_file=" + ready},
                            dir_ + "/agent.log");
  ASSERT_TRUE(agent.Start());
  const int port = testing::WaitForPortInReadyFile(ready, "metrics_port", absl::Seconds(20));
  ASSERT_GT(port, 0) << agent.Log();
  const std::string series =
      "rocetune_switch_queue_occupancy_bytes{device=\"Ethernet8\",host=\"leaf1\",queue=\"3\"} ";
  auto scrape_until = [&](const std::string& want) {
    std::string body;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      body = testing::HttpGet(port, "/metrics");
      if (absl::StrContains(body, series + want + "\n")) return body;
      absl::SleepFor(absl::Milliseconds(100));
    }
    ADD_FAILURE() << "no " << series << want << " in:\n" << body << "\nlog:\n" << agent.Log();
    return body;
  };
  const std::string body = scrape_until("777216");
  EXPECT_THAT(body, HasSubstr("# TYPE rocetune_switch_queue_occupancy_bytes gauge"));
  EXPECT_THAT(body, HasSubstr("rocetune_switch_pfcwd_stormed{device=\"Ethernet0\",host=\"leaf1\","
                              "queue=\"3\"} 0"));
  EXPECT_THAT(body, HasSubstr("rocetune_switch_queue_watermark_bytes{"));
  EXPECT_THAT(body, Not(HasSubstr("name=\"queue_occupancy_bytes\"")));
  Hset(counters_.get(), q, "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES", "1024");
  scrape_until("1024");
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(absl::Seconds(10)), 0) << agent.Log();
}

TEST_F(SonicSwitchTest, AppliesWithReadBack) {
  v1::ParameterSet set = Set({{"ecn.AZURE_LOSSLESS.green_min_threshold", 500000},
                              {"ecn.AZURE_LOSSLESS.green_max_threshold", 3000000},
                              {"ecn.AZURE_LOSSLESS.green_drop_probability", 20},
                              {"ecn.ROCE_TUNED.green_min_threshold", 250000},  // unchanged
                              {"pfc.Ethernet4.pfc_enable", 0x08}});
  absl::StatusOr<ApplyResult> r = sw_->applier()->Apply(set);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->writes, 4);
  ASSERT_EQ(r->disruptive.size(), 1u);
  EXPECT_THAT(r->disruptive[0], HasSubstr("Ethernet4: pfc_enable \"3,4\" -> \"3\""));
  EXPECT_EQ(Hget("WRED_PROFILE|AZURE_LOSSLESS", "green_min_threshold"), "500000");
  EXPECT_EQ(Hget("WRED_PROFILE|AZURE_LOSSLESS", "green_max_threshold"), "3000000");
  EXPECT_EQ(Hget("WRED_PROFILE|AZURE_LOSSLESS", "green_drop_probability"), "20");
  EXPECT_EQ(Hget("WRED_PROFILE|AZURE_LOSSLESS", "yellow_min_threshold"), "1048576");
  EXPECT_EQ(Hget("PORT_QOS_MAP|Ethernet4", "pfc_enable"), "3");
  ASSERT_EQ(r->applied.devices_size(), 1);
  const auto& applied = r->applied.devices(0).dcqcn();
  EXPECT_EQ(applied.at("ecn.AZURE_LOSSLESS.green_max_threshold"), 3000000);
  EXPECT_EQ(applied.at("pfc.Ethernet4.pfc_enable"), 0x08);
  EXPECT_EQ(applied.at("pfc.Ethernet0.pfc_enable"), 0x18);
  v1::ParameterSet cur = sw_->applier()->ReadCurrent(nullptr);
  EXPECT_EQ(cur.devices(0).dcqcn().at("ecn.AZURE_LOSSLESS.green_min_threshold"), 500000);
  // The same set again writes nothing.
  r = sw_->applier()->Apply(set);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->writes, 0);
}

TEST_F(SonicSwitchTest, KeyChangedUnderneathAbortsAndWritesNothing) {
  RedisClient other(*RedisEndpoint::Parse(redis_->endpoint()), 4);
  MakeSwitch(
      {.before_commit =
           [&] { Hset(&other, "WRED_PROFILE|AZURE_LOSSLESS", "green_max_threshold", "2500000"); },
       .after_commit = nullptr});
  absl::StatusOr<ApplyResult> r = sw_->applier()->Apply(Set(
      {{"ecn.AZURE_LOSSLESS.green_min_threshold", 600000}, {"pfc.Ethernet0.pfc_enable", 0x08}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(r.status().message(), HasSubstr("changed since it was read"));
  EXPECT_THAT(r.status().message(), HasSubstr("nothing written"));
  EXPECT_EQ(Hget("WRED_PROFILE|AZURE_LOSSLESS", "green_min_threshold"), "1048576");
  EXPECT_EQ(Hget("WRED_PROFILE|AZURE_LOSSLESS", "green_max_threshold"), "2500000");
  EXPECT_EQ(Hget("PORT_QOS_MAP|Ethernet0", "pfc_enable"), "3,4");
}

TEST_F(SonicSwitchTest, ReadBackMismatchRestoresTheSnapshot) {
  RedisClient other(*RedisEndpoint::Parse(redis_->endpoint()), 4);
  MakeSwitch({.before_commit = nullptr, .after_commit = [&] {
                Hset(&other, "WRED_PROFILE|AZURE_LOSSLESS", "green_min_threshold", "777");
              }});
  absl::StatusOr<ApplyResult> r =
      sw_->applier()->Apply(Set({{"ecn.AZURE_LOSSLESS.green_min_threshold", 600000},
                                 {"ecn.AZURE_LOSSLESS.green_max_threshold", 1800000},
                                 {"pfc.Ethernet0.pfc_enable", 0x08}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(r.status().message(), HasSubstr("read back \"777\""));
  EXPECT_THAT(r.status().message(), HasSubstr("previous values restored"));
  EXPECT_EQ(Hget("WRED_PROFILE|AZURE_LOSSLESS", "green_min_threshold"), "1048576");
  EXPECT_EQ(Hget("WRED_PROFILE|AZURE_LOSSLESS", "green_max_threshold"), "2097152");
  EXPECT_EQ(Hget("PORT_QOS_MAP|Ethernet0", "pfc_enable"), "3,4");
}

TEST_F(SonicSwitchTest, MissingProfileNonNumericFieldAndBoundsAreRefused) {
  struct Case {
    v1::ParameterSet set;
    absl::StatusCode code;
    std::string text;
  };
  Hset(client_.get(), "WRED_PROFILE|ROCE_TUNED", "green_max_threshold", "2MB");
  std::vector<Case> cases = {
      {Set({{"ecn.AZURE_LOSSLESS.green_min_threshold", 600000},
            {"ecn.NO_SUCH.green_min_threshold", 1}}),
       absl::StatusCode::kFailedPrecondition, "WRED profile NO_SUCH missing"},
      {Set({{"ecn.ROCE_TUNED.green_min_threshold", 300000}}), absl::StatusCode::kInvalidArgument,
       "WRED_PROFILE|ROCE_TUNED field green_max_threshold=\"2MB\" is not a decimal integer"},
      {Set({{"ecn.AZURE_LOSSLESS.green_max_threshold", 20000000}}),
       absl::StatusCode::kInvalidArgument, "exceeds the buffer (12766208 bytes)"},
      {Set({{"ecn.AZURE_LOSSLESS.green_min_threshold", 2097152}}),
       absl::StatusCode::kInvalidArgument, "must be below green_max_threshold=2097152"},
      {Set({{"ecn.AZURE_LOSSLESS.green_drop_probability", 0}}), absl::StatusCode::kInvalidArgument,
       "outside [1, 100]"},
      {Set({{"pfc.Ethernet999.pfc_enable", 8}}), absl::StatusCode::kFailedPrecondition,
       "Ethernet999 has no PORT_QOS_MAP"},
      {Set({{"rpg_ai_rate", 8}}), absl::StatusCode::kInvalidArgument, "\"rpg_ai_rate\""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ApplyResult> r = sw_->applier()->Apply(c.set);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), c.code) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.text));
    EXPECT_THAT(r.status().message(), HasSubstr("nothing written"));
  }
  EXPECT_EQ(Hget("WRED_PROFILE|AZURE_LOSSLESS", "green_min_threshold"), "1048576");
  EXPECT_EQ(Hget("WRED_PROFILE|AZURE_LOSSLESS", "green_max_threshold"), "2097152");
  EXPECT_EQ(Hget("WRED_PROFILE|ROCE_TUNED", "green_min_threshold"), "250000");
  // The watch was released: a later apply goes through.
  EXPECT_TRUE(sw_->applier()->Apply(Set({{"ecn.AZURE_LOSSLESS.green_min_threshold", 9000}})).ok());
}

TEST_F(SonicSwitchTest, RedisKilledMidApplyLeavesTheOldSetWhole) {
  // Durable (fsync'd append-only file) so what Redis held survives SIGKILL.
  redis_.reset();
  StartRedis({"--appendonly", "yes", "--appendfsync", "always"});
  MakeSwitch({.before_commit = [&] { redis_->Signal(SIGKILL); }, .after_commit = nullptr});
  absl::StatusOr<ApplyResult> r =
      sw_->applier()->Apply(Set({{"ecn.AZURE_LOSSLESS.green_min_threshold", 600000},
                                 {"ecn.AZURE_LOSSLESS.green_max_threshold", 1800000},
                                 {"pfc.Ethernet0.pfc_enable", 0x08}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(redis_->endpoint()));
  EXPECT_THAT(r.status().message(), HasSubstr("never a mix"));
  // Restart on the same socket from the append-only file: the old values, whole.
  redis_ = std::make_unique<RedisServer>(dir_, std::vector<std::string>{"--appendonly", "yes"});
  ASSERT_TRUE(redis_->Start().ok());
  client_ = std::make_unique<RedisClient>(*RedisEndpoint::Parse(redis_->endpoint()), 4);
  EXPECT_EQ(Hget("WRED_PROFILE|AZURE_LOSSLESS", "green_min_threshold"), "1048576");
  EXPECT_EQ(Hget("WRED_PROFILE|AZURE_LOSSLESS", "green_max_threshold"), "2097152");
  EXPECT_EQ(Hget("PORT_QOS_MAP|Ethernet0", "pfc_enable"), "3,4");
}

TEST_F(SonicSwitchTest, RedisDownGivesClearErrorsAndRetriesWithBackoff) {
  redis_->Stop();
  absl::StatusOr<SwitchInventory> inv = sw_->discovery()->DiscoverSwitch();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(inv.status().message(), HasSubstr(absl::StrCat("redis ", redis_->endpoint())));
  // Within the backoff the next call fails without touching the socket.
  inv = sw_->discovery()->DiscoverSwitch();
  EXPECT_THAT(inv.status().message(), HasSubstr("next connect attempt in"));
  absl::StatusOr<ApplyResult> r =
      sw_->applier()->Apply(Set({{"ecn.AZURE_LOSSLESS.green_min_threshold", 600000}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("nothing written"));
  std::vector<CounterValue> v;
  EXPECT_EQ(sw_->counters()->Collect(&v).code(), absl::StatusCode::kUnavailable);
  // Back up: the clients reconnect once their backoff (at most 200 ms here) ends.
  redis_ = std::make_unique<RedisServer>(dir_);
  ASSERT_TRUE(redis_->Start().ok());
  ASSERT_TRUE(SeedSonic(redis_->endpoint()).ok());
  absl::SleepFor(absl::Milliseconds(250));
  inv = sw_->discovery()->DiscoverSwitch();
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->ports.size(), 32u);
  r = sw_->applier()->Apply(Set({{"ecn.AZURE_LOSSLESS.green_min_threshold", 600000}}));
  ASSERT_TRUE(r.ok()) << r.status();
  v.clear();
  EXPECT_TRUE(sw_->counters()->Collect(&v).ok());
  EXPECT_FALSE(v.empty());
}

TEST_F(SonicSwitchTest, OwnerJournalsAndSeesDrift) {
  LkgJournal journal(dir_ + "/state");
  LocalGuard guard(LocalGuardOptions{}, Clock::Real(), sw_->applier(), &journal);
  NicOwner owner(sw_->applier(), &journal, &guard);
  owner.SetExpected("baseline", sw_->applier()->ReadCurrent(nullptr));
  ASSERT_TRUE(owner.Apply("v1", Set({{"ecn.AZURE_LOSSLESS.green_min_threshold", 400000}})).ok());
  EXPECT_EQ(owner.expected_version(), "v1");
  EXPECT_TRUE(owner.CheckDrift().empty());
  Hset(client_.get(), "WRED_PROFILE|AZURE_LOSSLESS", "green_min_threshold", "123");
  std::vector<DriftItem> drift = owner.CheckDrift();
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].Text(),
            "switch/ecn.AZURE_LOSSLESS.green_min_threshold: expected 400000, found 123");
}

TEST_F(SonicSwitchTest, AgentOncePrintsInventoryConfigAndCounters) {
  std::string cmd =
      absl::StrCat(ROCETUNE_AGENT_BINARY, " --platform=sonic --redis=", redis_->endpoint(),
                   " --once --output=json --host_id=leaf1 2>&1");
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  ASSERT_EQ(pclose(f), 0) << out;
  EXPECT_THAT(out, HasSubstr("\"ecn.AZURE_LOSSLESS.green_max_threshold\": \"2097152\""));
  EXPECT_THAT(out, HasSubstr("\"pfc.Ethernet124.pfc_enable\": \"24\""));
  EXPECT_THAT(out, HasSubstr("{\"port\": \"Ethernet124\", \"queue\": 4, \"wred_profile\": "
                             "\"AZURE_LOSSLESS\""));
  EXPECT_THAT(out, HasSubstr("{\"device\": \"Ethernet4\", \"priority\": 3, \"name\": "
                             "\"rx_pfc_pause_frames\", \"value\": 2003}"));
  EXPECT_THAT(out, HasSubstr("{\"device\": \"Ethernet0\", \"queue\": 3, \"name\": "
                             "\"queue_ecn_marked_packets\""));
  EXPECT_THAT(out, HasSubstr("\"name\": \"pfcwd_stormed\", \"value\": 0, \"level\": true}"));
  EXPECT_THAT(out, HasSubstr("\"name\": \"queue_bytes\", \"value\": "));
  EXPECT_THAT(out, Not(HasSubstr("\"name\": \"queue_bytes\", \"value\": 0, \"level\"")));
  EXPECT_THAT(out, HasSubstr("\"counter_source\": \"sonic_redis\""));
  // Bad flags are refused with a message.
  f = popen(absl::StrCat(ROCETUNE_AGENT_BINARY, " --platform=sonic --once 2>&1").c_str(), "r");
  out.clear();
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  EXPECT_NE(pclose(f), 0);
  EXPECT_THAT(out, HasSubstr("--platform=sonic needs --redis"));
}

}  // namespace
}  // namespace rocetune
