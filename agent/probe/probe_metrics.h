#ifndef ROCETUNE_AGENT_PROBE_PROBE_METRICS_H_
#define ROCETUNE_AGENT_PROBE_PROBE_METRICS_H_

#include <map>
#include <string>
#include <vector>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {

// Agent metrics for latency probes, per peer class, fed with each window from
// Prober::TakeWindow(); every series carries `host`:
//   rocetune_probe_rtt_seconds{host,peer_class,q="0.5"|"0.9"|"0.99"|"0.999"}  gauge,
//       network RTT of the latest window (NaN when the window had no sample). The
//       label is `q`, not `quantile`: Prometheus reserves `quantile` for summaries.
//   rocetune_probe_loss_ratio{host,peer_class}      gauge, lost / sent of the latest window
//   rocetune_probe_timeouts_total{host,peer_class}  counter, probes lost
//   rocetune_probe_sent_total{host,peer_class}      counter, probes sent
// Several ProbeMetrics (other hosts) may share one registry. Not thread-safe:
// call Update from one thread.
class ProbeMetrics {
 public:
  static constexpr double kQuantiles[] = {0.5, 0.9, 0.99, 0.999};
  static constexpr int kNumQuantiles = 4;

  ProbeMetrics(prometheus::Registry& registry, std::string host);

  // A window whose sketch does not validate is skipped for the quantiles (logged once).
  void Update(const std::vector<v1::LatencyWindow>& windows);

 private:
  struct ClassSeries {
    prometheus::Gauge* quantiles[kNumQuantiles];
    prometheus::Gauge* loss_ratio;
    prometheus::Counter* timeouts;
    prometheus::Counter* sent;
  };
  ClassSeries& Series(const std::string& peer_class);

  prometheus::Family<prometheus::Gauge>& rtt_;
  prometheus::Family<prometheus::Gauge>& loss_ratio_;
  prometheus::Family<prometheus::Counter>& timeouts_;
  prometheus::Family<prometheus::Counter>& sent_;
  std::string host_;
  std::map<std::string, ClassSeries> series_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_PROBE_PROBE_METRICS_H_
