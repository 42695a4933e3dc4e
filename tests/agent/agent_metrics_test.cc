#include "agent/agent_metrics.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <memory>
#include <string>

#include "prometheus/text_serializer.h"

namespace rocetune {
namespace {

std::string Serialize(prometheus::Registry& registry) {
  prometheus::TextSerializer s;
  return s.Serialize(registry.Collect());
}

v1::Report MakeReport() {
  v1::Report r;
  auto add = [&](const char* name, int prio, uint64_t delta) {
    v1::CounterSample* c = r.add_counters();
    c->set_device("mlx5_0");
    c->set_port(1);
    c->set_priority(prio);
    c->set_name(name);
    c->set_delta(delta);
  };
  add("cnp_sent", -1, 10);
  add("rx_pfc_pause_duration_us", 3, 2'500'000);  // 2.5 s of pause
  add("tx_bytes", -1, 4096);
  add("RNR sent", -1, 2);  // vendor name with a space: a label value, not a metric name
  return r;
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

TEST(AgentMetricsTest, OutputPassesPromtoolCheckMetrics) {
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "h1");
  m.ObserveReport(MakeReport());
  v1::ParameterSet p;
  (*p.add_devices()->mutable_dcqcn())["rpg_time_reset"] = 300;
  p.mutable_devices(0)->set_device("mlx5_0");
  m.SetParameters(p);
  m.RecordApply(true);
  m.RecordSampling(absl::Microseconds(120));
  std::string text = Serialize(*registry);
  std::string path = ::testing::TempDir() + "/agent_metrics.prom";
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

}  // namespace
}  // namespace rocetune
