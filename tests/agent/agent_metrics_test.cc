#include "agent/agent_metrics.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/sampler.h"
#include "daemon/clock.h"
#include "prometheus/text_serializer.h"
#include "tests/testing/report_builders.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

std::string Serialize(prometheus::Registry& registry) {
  prometheus::TextSerializer s;
  return s.Serialize(registry.Collect());
}

v1::Report MakeReport() {
  v1::Report r;
  auto add = [&](const char* name, int prio, uint64_t delta) {
    ::rocetune::testing::AddCounter(&r, name, prio, delta);
  };
  add("cnp_sent", -1, 10);
  add("rx_pfc_pause_duration_us", 3, 2'500'000);  // 2.5 s of pause
  add("tx_bytes", -1, 4096);
  add("RNR sent", -1, 2);  // vendor name with a space: a label value, not a metric name
  return r;
}

// The value of the series named exactly `series` (name and labels as
// serialized), or -1 when absent.
double Value(prometheus::Registry& registry, const std::string& series) {
  const std::string text = Serialize(registry);
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

// A source is never read: the tests feed snapshots through Sampler::Ingest.
class NoSource : public CounterSource {
 public:
  std::string name() const override { return "none"; }
  absl::Status Collect(std::vector<CounterValue>*) override { return absl::OkStatus(); }
};

CounterValue Read(const std::string& name, uint64_t value, uint8_t width) {
  CounterValue v;
  v.key.device = "mlx5_0";
  v.key.port = 1;
  v.key.name = name;
  v.value = value;
  v.width_bits = width;
  return v;
}

// Snapshots -> sampler -> report -> /metrics, as the agent's round does.
class Pipeline {
 public:
  Pipeline() : registry_(std::make_shared<prometheus::Registry>()), metrics_(registry_, "h1") {
    sampler_ = *Sampler::Create(&source_, &clock_);
  }
  void Round(std::vector<CounterValue> snapshot) {
    mono_ += absl::Seconds(1);
    SampleBatch batch = sampler_->Ingest(snapshot, mono_, absl::Now());
    v1::Report report;
    report.mutable_counters()->Swap(&batch.samples);
    report.mutable_levels()->Swap(&batch.levels);
    metrics_.ObserveReport(report, batch.values);
  }
  double Series(const std::string& series) { return Value(*registry_, series); }

 private:
  NoSource source_;
  FakeClock clock_;
  std::unique_ptr<Sampler> sampler_;
  absl::Duration mono_;
  std::shared_ptr<prometheus::Registry> registry_;
  AgentMetrics metrics_;
};

constexpr char kOos[] =
    "rocetune_rdma_out_of_sequence_total{device=\"mlx5_0\",host=\"h1\",port=\"1\"}";
constexpr char kCnp[] = "rocetune_rdma_cnp_handled_total{device=\"mlx5_0\",host=\"h1\",port=\"1\"}";

// A series starts at the NIC's own value (not at 0), then follows it.
TEST(AgentMetricsTest, CountersAreTheNicsOwnValues) {
  Pipeline p;
  p.Round({Read("cnp_handled", 48'213, 64)});
  EXPECT_EQ(p.Series(kCnp), -1);  // a baseline only: no sample yet
  p.Round({Read("cnp_handled", 48'300, 64)});
  EXPECT_EQ(p.Series(kCnp), 48'300);
  p.Round({Read("cnp_handled", 48'301, 64)});
  EXPECT_EQ(p.Series(kCnp), 48'301);
}

// A 32-bit counter that wraps keeps growing on /metrics (widened to 64 bits).
TEST(AgentMetricsTest, ThirtyTwoBitWrapIsWidened) {
  Pipeline p;
  p.Round({Read("out_of_sequence", 0xFFFFFF00u, 32)});
  p.Round({Read("out_of_sequence", 0xFFFFFFF0u, 32)});
  EXPECT_EQ(p.Series(kOos), 0xFFFFFFF0u);
  p.Round({Read("out_of_sequence", 0x10, 32)});  // wrapped: +0x20
  EXPECT_EQ(p.Series(kOos), 0x100000010ull);
  p.Round({Read("out_of_sequence", 0x30, 32)});
  EXPECT_EQ(p.Series(kOos), 0x100000030ull);
}

// A NIC reset (driver reload, cleared counters) drops the raw value; the
// series continues from where it was, by the new value, and never goes down.
TEST(AgentMetricsTest, NicResetContinuesTheSeries) {
  Pipeline p;
  p.Round({Read("cnp_handled", 1000, 64), Read("out_of_sequence", 500, 32)});
  p.Round({Read("cnp_handled", 1200, 64), Read("out_of_sequence", 600, 32)});
  EXPECT_EQ(p.Series(kCnp), 1200);
  EXPECT_EQ(p.Series(kOos), 600);
  p.Round({Read("cnp_handled", 7, 64), Read("out_of_sequence", 3, 32)});  // reset
  EXPECT_EQ(p.Series(kCnp), 1207);
  EXPECT_EQ(p.Series(kOos), 603);
  p.Round({Read("cnp_handled", 10, 64), Read("out_of_sequence", 5, 32)});
  EXPECT_EQ(p.Series(kCnp), 1210);
  EXPECT_EQ(p.Series(kOos), 605);
}

// Counters the contract names get their own metric; vendor names stay in
// rocetune_rdma_unmapped_total.
TEST(AgentMetricsTest, NewCanonicalCountersHaveTheirOwnMetric) {
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "h1");
  v1::Report r;
  for (const char* name : {"port_xmit_wait", "out_of_buffer", "link_downed", "symbol_error",
                           "link_error_recovery", "port_rcv_errors", "duplicate_request",
                           "implied_nak_seq_err", "rnr_nak_retry_err", "rx_write_requests"}) {
    v1::CounterSample* c = r.add_counters();
    c->set_device("mlx5_0");
    c->set_port(1);
    c->set_priority(-1);
    c->set_name(name);
    c->set_delta(3);
  }
  m.ObserveReport(r);
  for (const char* name :
       {"port_xmit_wait", "out_of_buffer", "link_downed", "symbol_error", "link_error_recovery",
        "port_rcv_errors", "duplicate_request", "implied_nak_seq_err", "rnr_nak_retry_err"}) {
    EXPECT_EQ(Value(*registry, absl::StrCat("rocetune_rdma_", name,
                                            "_total{device=\"mlx5_0\",host=\"h1\",port=\"1\"}")),
              3)
        << name;
  }
  EXPECT_EQ(Value(*registry,
                  "rocetune_rdma_unmapped_total{device=\"mlx5_0\",host=\"h1\","
                  "name=\"rx_write_requests\",port=\"1\"}"),
            3);
  EXPECT_EQ(Serialize(*registry).find("name=\"port_xmit_wait\""), std::string::npos);
}

TEST(AgentMetricsTest, VersionsAndProbeSeriesCarryTheHost) {
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "h7");
  m.SetDesiredVersion("13");
  m.SetAppliedVersion("12");
  EXPECT_EQ(Value(*registry, "rocetune_agent_desired_version{host=\"h7\"}"), 13);
  EXPECT_EQ(Value(*registry, "rocetune_agent_applied_version{host=\"h7\"}"), 12);
  m.SetAppliedVersion("");  // the baseline
  EXPECT_EQ(Value(*registry, "rocetune_agent_applied_version{host=\"h7\"}"), 0);
  v1::Report r;
  v1::LatencyWindow* w = r.add_latency();
  w->set_peer_class("intra_tor");
  w->set_probes_sent(10);
  w->set_probes_lost(2);
  m.ObserveReport(r);
  EXPECT_EQ(Value(*registry, "rocetune_probe_timeouts_total{host=\"h7\",peer_class=\"intra_tor\"}"),
            2);
  // Every series of the agent carries host="h7".
  const std::string text = Serialize(*registry);
  size_t series = 0;
  for (size_t at = 0; (at = text.find('\n', at)) != std::string::npos; ++at) {
    if (at + 1 >= text.size() || text[at + 1] == '#') continue;
    ++series;
    const size_t end = text.find('\n', at + 1);
    EXPECT_NE(text.substr(at + 1, end - at - 1).find("host=\"h7\""), std::string::npos)
        << text.substr(at + 1, end - at - 1);
  }
  EXPECT_GT(series, 10u);
}

TEST(AgentMetricsTest, CountersAccumulateWithBaseUnitsAndLabels) {
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "h1");
  m.ObserveReport(MakeReport());
  m.ObserveReport(MakeReport());
  std::string text = Serialize(*registry);
  EXPECT_NE(text.find("rocetune_rdma_cnp_sent_total{device=\"mlx5_0\",host=\"h1\",port=\"1\"} 20"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rocetune_rdma_rx_pfc_pause_duration_seconds_total{device=\"mlx5_0\","
                      "host=\"h1\",port=\"1\",priority=\"3\"} 5"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rocetune_rdma_tx_bytes_total"), std::string::npos);
  EXPECT_NE(text.find("rocetune_rdma_unmapped_total{device=\"mlx5_0\",host=\"h1\","
                      "name=\"RNR sent\",port=\"1\"} 4"),
            std::string::npos)
      << text;
}

// Series are cached by position in the report; a report whose counters come in
// another order, with one gone and one new, still lands on the right series.
TEST(AgentMetricsTest, ReorderedAndChangedReportsHitTheRightSeries) {
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "h1");
  m.ObserveReport(MakeReport());
  v1::Report r = MakeReport();
  r.mutable_counters()->SwapElements(0, 2);  // tx_bytes first, cnp_sent third
  r.mutable_counters(1)->set_priority(5);    // pause duration now on priority 5
  r.mutable_counters(3)->set_device("mlx5_1");
  m.ObserveReport(r);
  m.ObserveReport(r);
  std::string text = Serialize(*registry);
  EXPECT_NE(text.find("rocetune_rdma_cnp_sent_total{device=\"mlx5_0\",host=\"h1\",port=\"1\"} 30"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rocetune_rdma_tx_bytes_total{device=\"mlx5_0\",host=\"h1\",port=\"1\"} "
                      "12288"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rocetune_rdma_rx_pfc_pause_duration_seconds_total{device=\"mlx5_0\","
                      "host=\"h1\",port=\"1\",priority=\"3\"} 2.5"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rocetune_rdma_rx_pfc_pause_duration_seconds_total{device=\"mlx5_0\","
                      "host=\"h1\",port=\"1\",priority=\"5\"} 5"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rocetune_rdma_unmapped_total{device=\"mlx5_0\",host=\"h1\","
                      "name=\"RNR sent\",port=\"1\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rocetune_rdma_unmapped_total{device=\"mlx5_1\",host=\"h1\","
                      "name=\"RNR sent\",port=\"1\"} 4"),
            std::string::npos)
      << text;
}

TEST(AgentMetricsTest, ParametersAppliesAndGuard) {
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "h1");
  v1::ParameterSet p;
  v1::DeviceParameters* d = p.add_devices();
  d->set_device("mlx5_0");
  (*d->mutable_dcqcn())["rpg_ai_rate"] = 5;
  d->set_rp_enable_mask(8);
  m.SetParameters(p);
  m.RecordApply(true);
  m.RecordApply(false);
  m.RecordApply(false);
  m.RecordGuardRollback();
  m.RecordSampling(absl::Microseconds(300));
  std::string text = Serialize(*registry);
  EXPECT_NE(text.find("rocetune_dcqcn_parameter{device=\"mlx5_0\",host=\"h1\",parameter=\""
                      "rpg_ai_rate\"} 5"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rocetune_agent_applies_total{host=\"h1\",result=\"failure\"} 2"),
            std::string::npos);
  EXPECT_NE(text.find("rocetune_agent_guard_rollbacks_total{host=\"h1\"} 1"), std::string::npos);
  EXPECT_NE(text.find("rocetune_agent_sampling_duration_seconds_count{host=\"h1\"} 1"),
            std::string::npos);
}

TEST(AgentMetricsTest, SwitchQueueCountersHaveTheirOwnMetricWithAQueueLabel) {
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "tor0");
  v1::Report r;
  auto add = [&](const char* name, uint32_t queue, uint64_t delta) {
    v1::CounterSample* c = r.add_counters();
    c->set_device("Ethernet8");
    c->set_port(queue);
    c->set_priority(-1);
    c->set_name(name);
    c->set_delta(delta);
  };
  add("queue_ecn_marked_packets", 3, 120);
  add("queue_bytes", 3, 4096);
  add("queue_occupancy_bytes", 3, 10);  // a level: not a counter family
  m.ObserveReport(r);
  m.ObserveReport(r);
  EXPECT_EQ(
      Value(*registry,
            "rocetune_switch_queue_ecn_marked_packets_total{device=\"Ethernet8\",host=\"tor0\","
            "queue=\"3\"}"),
      240);
  EXPECT_EQ(
      Value(*registry,
            "rocetune_switch_queue_bytes_total{device=\"Ethernet8\",host=\"tor0\",queue=\"3\"}"),
      8192);
  EXPECT_EQ(Serialize(*registry).find("rocetune_switch_queue_occupancy_bytes"), std::string::npos);
}

void AddLevel(v1::Report* r, const std::string& device, uint32_t queue, const std::string& name,
              uint64_t value) {
  v1::LevelSample* l = r->add_levels();
  l->set_device(device);
  l->set_port(queue);
  l->set_priority(-1);
  l->set_name(name);
  l->set_value(value);
}

constexpr char kOccupancy[] =
    "rocetune_switch_queue_occupancy_bytes{device=\"Ethernet8\",host=\"tor0\",queue=\"3\"}";
constexpr char kStormed[] =
    "rocetune_switch_pfcwd_stormed{device=\"Ethernet8\",host=\"tor0\",queue=\"4\"}";
constexpr char kWatermark[] =
    "rocetune_switch_queue_watermark_bytes{device=\"Ethernet8\",host=\"tor0\",queue=\"3\"}";

// Levels are gauges set to the value read, down as well as up; a level a
// report no longer carries is no longer exported.
TEST(AgentMetricsTest, SwitchLevelsAreGaugesThatFollowTheValueRead) {
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "tor0");
  auto report = [](uint64_t occupancy, uint64_t stormed, bool watermark) {
    v1::Report r;
    AddLevel(&r, "Ethernet8", 3, "queue_occupancy_bytes", occupancy);
    if (watermark) AddLevel(&r, "Ethernet8", 3, "queue_watermark_bytes", 2 * occupancy);
    AddLevel(&r, "Ethernet8", 4, "pfcwd_stormed", stormed);
    return r;
  };
  m.ObserveReport(report(300'000, 0, true));
  EXPECT_EQ(Value(*registry, kOccupancy), 300'000);
  EXPECT_EQ(Value(*registry, kWatermark), 600'000);
  EXPECT_EQ(Value(*registry, kStormed), 0);
  m.ObserveReport(report(1'500, 1, true));
  EXPECT_EQ(Value(*registry, kOccupancy), 1'500);
  EXPECT_EQ(Value(*registry, kWatermark), 3'000);
  EXPECT_EQ(Value(*registry, kStormed), 1);
  m.ObserveReport(report(700'000, 0, true));
  EXPECT_EQ(Value(*registry, kOccupancy), 700'000);
  EXPECT_EQ(Value(*registry, kStormed), 0);
  const std::string text = Serialize(*registry);
  EXPECT_NE(text.find("# TYPE rocetune_switch_queue_occupancy_bytes gauge"), std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE rocetune_switch_pfcwd_stormed gauge"), std::string::npos);
  EXPECT_EQ(text.find("rocetune_rdma_unmapped_total"), std::string::npos) << text;
  EXPECT_EQ(text.find("rocetune_rdma_"), std::string::npos) << text;
  EXPECT_EQ(text.find("_bytes_total"), std::string::npos) << text;
  EXPECT_EQ(text.find("stormed_total"), std::string::npos) << text;
  // The watermark is no longer read: its series goes; the others stay.
  m.ObserveReport(report(10, 1, false));
  EXPECT_EQ(Value(*registry, kWatermark), -1);
  EXPECT_EQ(Value(*registry, kOccupancy), 10);
  EXPECT_EQ(Value(*registry, kStormed), 1);
  // It comes back when read again.
  m.ObserveReport(report(20, 1, true));
  EXPECT_EQ(Value(*registry, kWatermark), 40);
  // A report without levels (a failed collection) leaves none.
  m.ObserveReport(v1::Report());
  EXPECT_EQ(Value(*registry, kOccupancy), -1);
  EXPECT_EQ(Value(*registry, kStormed), -1);
}

// Levels without a canonical name go to one gauge family under their name;
// another host's levels on the same registry are left alone.
TEST(AgentMetricsTest, UnmappedLevelsAndTwoHostsOnOneRegistry) {
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics a(registry, "tor0");
  AgentMetrics b(registry, "tor1");
  v1::Report r;
  AddLevel(&r, "Ethernet8", 3, "queue_occupancy_bytes", 5);
  AddLevel(&r, "Ethernet8", 2, "vendor temperature", 41);
  a.ObserveReport(r);
  b.ObserveReport(r);
  EXPECT_EQ(Value(*registry,
                  "rocetune_unmapped_level{device=\"Ethernet8\",host=\"tor0\",name=\"vendor "
                  "temperature\",port=\"2\"}"),
            41);
  a.ObserveReport(v1::Report());
  EXPECT_EQ(Value(*registry, kOccupancy), -1);
  EXPECT_EQ(Value(*registry,
                  "rocetune_switch_queue_occupancy_bytes{device=\"Ethernet8\",host=\"tor1\","
                  "queue=\"3\"}"),
            5);
}

// Through the sampler: a level in a snapshot reaches /metrics as a gauge in
// the first round already, and no counter is made of it.
TEST(AgentMetricsTest, LevelsThroughTheSampler) {
  Pipeline p;
  CounterValue level = Read("queue_occupancy_bytes", 4096, 64);
  level.kind = CounterKind::kLevel;
  p.Round({Read("cnp_handled", 10, 64), level});
  const std::string series =
      "rocetune_switch_queue_occupancy_bytes{device=\"mlx5_0\",host=\"h1\",queue=\"1\"}";
  EXPECT_EQ(p.Series(series), 4096);
  level.value = 100;
  p.Round({Read("cnp_handled", 12, 64), level});
  EXPECT_EQ(p.Series(series), 100);
  EXPECT_EQ(p.Series(kCnp), 12);
}

TEST(AgentMetricsTest, OutputPassesPromtoolCheckMetrics) {
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "h1");
  m.ObserveReport(MakeReport());
  AgentMetrics other(registry, "h2");  // a second simulated host on the same registry
  other.ObserveReport(MakeReport());
  v1::Report probes;
  probes.add_latency()->set_peer_class("intra_tor");
  m.ObserveReport(probes);
  AgentMetrics tor(registry, "tor0");  // a switch: queue counters and levels
  v1::Report sw;
  v1::CounterSample* c = sw.add_counters();
  c->set_device("Ethernet8");
  c->set_port(3);
  c->set_priority(-1);
  c->set_name("queue_ecn_marked_packets");
  c->set_delta(5);
  AddLevel(&sw, "Ethernet8", 3, "queue_occupancy_bytes", 1000);
  AddLevel(&sw, "Ethernet8", 3, "queue_watermark_bytes", 2000);
  AddLevel(&sw, "Ethernet8", 3, "pfcwd_stormed", 0);
  AddLevel(&sw, "Ethernet8", 3, "vendor_level", 7);
  tor.ObserveReport(sw);
  m.SetDesiredVersion("3");
  v1::ParameterSet p;
  (*p.add_devices()->mutable_dcqcn())["rpg_time_reset"] = 300;
  p.mutable_devices(0)->set_device("mlx5_0");
  m.SetParameters(p);
  m.RecordApply(true);
  m.RecordSampling(absl::Microseconds(120));
  std::string text = Serialize(*registry);
  const ::rocetune::testing::TempDir dir("agent-metrics");
  std::string path = dir.path() + "/agent_metrics.prom";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fwrite(text.data(), 1, text.size(), f);
  fclose(f);
  std::string cmd = "promtool check metrics < " + path + " 2>&1";
  FILE* p2 = popen(cmd.c_str(), "r");
  ASSERT_NE(p2, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), p2)) out += buf;
  int status = pclose(p2);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "promtool says:\n" << out << "\non:\n" << text;
}

// The job signal on /metrics: lines by outcome from the listener's totals
// (only the increase since the last round is added), events and the last
// round's p50 / p99 per (job, op), and a (job, op) idle for
// kJobSeriesIdleRounds rounds removed.
TEST(AgentMetricsTest, JobSignalSeriesFollowTheListener) {
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "h1");
  JobSeries s;
  s.job = "train-1";
  s.op = "allreduce";
  for (int i = 1; i <= 100; ++i) s.seconds.Insert(i * 1e-3);
  JobListenerCounts c;
  c.accepted = 100;
  c.malformed = 2;
  m.ObserveJobSignal(c, {s});
  const std::string labels = "{host=\"h1\",job=\"train-1\",op=\"allreduce\"}";
  EXPECT_EQ(Value(*registry, "rocetune_agent_job_events_total" + labels), 100);
  EXPECT_NEAR(Value(*registry, "rocetune_agent_job_p99_seconds" + labels), 0.099, 0.099 * 0.02);
  EXPECT_NEAR(Value(*registry, "rocetune_agent_job_p50_seconds" + labels), 0.050, 0.050 * 0.02);
  EXPECT_EQ(Value(*registry, "rocetune_agent_job_lines_total{host=\"h1\",result=\"accepted\"}"),
            100);
  EXPECT_EQ(Value(*registry, "rocetune_agent_job_lines_total{host=\"h1\",result=\"malformed\"}"),
            2);
  c.accepted = 130;  // totals: 30 more
  JobSeries t = s;
  t.seconds = QuantileSketch();
  for (int i = 0; i < 30; ++i) t.seconds.Insert(0.2);
  m.ObserveJobSignal(c, {t});
  EXPECT_EQ(Value(*registry, "rocetune_agent_job_events_total" + labels), 130);
  EXPECT_EQ(Value(*registry, "rocetune_agent_job_lines_total{host=\"h1\",result=\"accepted\"}"),
            130);
  EXPECT_NEAR(Value(*registry, "rocetune_agent_job_p99_seconds" + labels), 0.2, 0.2 * 0.02);
  for (uint64_t r = 0; r + 1 < AgentMetrics::kJobSeriesIdleRounds; ++r) m.ObserveJobSignal(c, {});
  EXPECT_EQ(Value(*registry, "rocetune_agent_job_events_total" + labels), 130);  // still there
  m.ObserveJobSignal(c, {});
  EXPECT_EQ(Value(*registry, "rocetune_agent_job_events_total" + labels), -1);  // idle: gone
  EXPECT_EQ(Value(*registry, "rocetune_agent_job_p99_seconds" + labels), -1);
}

}  // namespace
}  // namespace rocetune
