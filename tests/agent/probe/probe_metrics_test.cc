#include "agent/probe/probe_metrics.h"

#include <cmath>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "model/quantile_sketch.h"
#include "prometheus/registry.h"

namespace rocetune {
namespace {

// name{label=value,...} -> value, from the registry's current state.
std::map<std::string, double> Scrape(prometheus::Registry& r) {
  std::map<std::string, double> out;
  for (const auto& fam : r.Collect()) {
    for (const auto& m : fam.metric) {
      std::string key = fam.name + "{";
      for (const auto& l : m.label) key += l.name + "=" + l.value + ",";
      key += "}";
      out[key] = fam.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return out;
}

v1::LatencyWindow Window(const std::string& cls, int samples, double base, uint64_t sent,
                         uint64_t lost) {
  QuantileSketch s;
  for (int i = 1; i <= samples; ++i) s.Insert(base * i);
  v1::LatencyWindow w;
  w.set_peer_class(cls);
  s.ToProto(w.mutable_network_rtt_seconds());
  w.set_probes_sent(sent);
  w.set_probes_lost(lost);
  return w;
}

TEST(ProbeMetricsTest, QuantilesLossAndTimeoutsPerPeerClass) {
  prometheus::Registry registry;
  ProbeMetrics metrics(registry, "h1");
  metrics.Update({Window("intra_tor", 1000, 1e-6, 1010, 10), Window("inter_tor", 0, 0, 5, 5)});
  auto m = Scrape(registry);
  EXPECT_NEAR(m["rocetune_probe_rtt_seconds{host=h1,peer_class=intra_tor,q=0.5,}"], 500e-6,
              500e-6 * 0.03);
  EXPECT_NEAR(m["rocetune_probe_rtt_seconds{host=h1,peer_class=intra_tor,q=0.9,}"], 900e-6,
              900e-6 * 0.03);
  EXPECT_NEAR(m["rocetune_probe_rtt_seconds{host=h1,peer_class=intra_tor,q=0.99,}"], 990e-6,
              990e-6 * 0.03);
  EXPECT_NEAR(m["rocetune_probe_rtt_seconds{host=h1,peer_class=intra_tor,q=0.999,}"], 999e-6,
              999e-6 * 0.03);
  EXPECT_DOUBLE_EQ(m["rocetune_probe_loss_ratio{host=h1,peer_class=intra_tor,}"], 10.0 / 1010);
  EXPECT_DOUBLE_EQ(m["rocetune_probe_timeouts_total{host=h1,peer_class=intra_tor,}"], 10);
  EXPECT_DOUBLE_EQ(m["rocetune_probe_loss_ratio{host=h1,peer_class=inter_tor,}"], 1.0);
  EXPECT_TRUE(std::isnan(m["rocetune_probe_rtt_seconds{host=h1,peer_class=inter_tor,q=0.5,}"]));

  metrics.Update({Window("intra_tor", 10, 1e-3, 10, 0)});
  m = Scrape(registry);
  EXPECT_DOUBLE_EQ(m["rocetune_probe_timeouts_total{host=h1,peer_class=intra_tor,}"], 10);
  EXPECT_DOUBLE_EQ(m["rocetune_probe_sent_total{host=h1,peer_class=intra_tor,}"], 1020);
  EXPECT_DOUBLE_EQ(m["rocetune_probe_loss_ratio{host=h1,peer_class=intra_tor,}"], 0);
  EXPECT_GT(m["rocetune_probe_rtt_seconds{host=h1,peer_class=intra_tor,q=0.5,}"], 4e-3);
}

TEST(ProbeMetricsTest, InvalidSketchIsSkippedCountersStillMove) {
  prometheus::Registry registry;
  ProbeMetrics metrics(registry, "h1");
  v1::LatencyWindow w = Window("c", 10, 1e-3, 10, 1);
  w.mutable_network_rtt_seconds()->set_relative_accuracy(7);  // invalid
  metrics.Update({w});
  auto m = Scrape(registry);
  EXPECT_DOUBLE_EQ(m["rocetune_probe_timeouts_total{host=h1,peer_class=c,}"], 1);
  EXPECT_TRUE(std::isnan(m["rocetune_probe_rtt_seconds{host=h1,peer_class=c,q=0.99,}"]));
}

// Two hosts' probe series share one registry (the fabric simulator's agents).
TEST(ProbeMetricsTest, HostsShareARegistry) {
  prometheus::Registry registry;
  ProbeMetrics a(registry, "h1");
  ProbeMetrics b(registry, "h2");
  a.Update({Window("intra_tor", 10, 1e-3, 10, 1)});
  b.Update({Window("intra_tor", 10, 1e-3, 20, 4)});
  auto m = Scrape(registry);
  EXPECT_DOUBLE_EQ(m["rocetune_probe_timeouts_total{host=h1,peer_class=intra_tor,}"], 1);
  EXPECT_DOUBLE_EQ(m["rocetune_probe_timeouts_total{host=h2,peer_class=intra_tor,}"], 4);
  EXPECT_DOUBLE_EQ(m["rocetune_probe_sent_total{host=h2,peer_class=intra_tor,}"], 20);
  EXPECT_EQ(m.count("rocetune_probe_rtt_seconds{host=h2,peer_class=intra_tor,q=0.999,}"), 1u);
}

}  // namespace
}  // namespace rocetune
