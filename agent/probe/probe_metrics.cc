#include "agent/probe/probe_metrics.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/logging.h"
#include "model/quantile_sketch.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"

namespace rocetune {
namespace {

const char* QuantileLabel(int i) {
  static const char* kLabels[] = {"0.5", "0.9", "0.99", "0.999"};
  return kLabels[i];
}

}  // namespace

ProbeMetrics::ProbeMetrics(prometheus::Registry& registry, std::string host)
    : rtt_(prometheus::BuildGauge()
               .Name("rocetune_probe_rtt_seconds")
               .Help("Probe network round-trip time (responder delay removed) of the latest "
                     "window, by peer class and quantile.")
               .Register(registry)),
      loss_ratio_(prometheus::BuildGauge()
                      .Name("rocetune_probe_loss_ratio")
                      .Help("Probes lost / probes sent in the latest window, by peer class.")
                      .Register(registry)),
      timeouts_(prometheus::BuildCounter()
                    .Name("rocetune_probe_timeouts_total")
                    .Help("Probes that got no answer within the plan's timeout.")
                    .Register(registry)),
      sent_(prometheus::BuildCounter()
                .Name("rocetune_probe_sent_total")
                .Help("Probes sent.")
                .Register(registry)),
      host_(std::move(host)) {}

ProbeMetrics::ClassSeries& ProbeMetrics::Series(const std::string& peer_class) {
  auto it = series_.find(peer_class);
  if (it != series_.end()) return it->second;
  ClassSeries s{};
  for (int i = 0; i < kNumQuantiles; ++i) {
    s.quantiles[i] =
        &rtt_.Add({{"host", host_}, {"peer_class", peer_class}, {"q", QuantileLabel(i)}});
    s.quantiles[i]->Set(std::numeric_limits<double>::quiet_NaN());
  }
  s.loss_ratio = &loss_ratio_.Add({{"host", host_}, {"peer_class", peer_class}});
  s.timeouts = &timeouts_.Add({{"host", host_}, {"peer_class", peer_class}});
  s.sent = &sent_.Add({{"host", host_}, {"peer_class", peer_class}});
  return series_.emplace(peer_class, s).first->second;
}

void ProbeMetrics::Update(const std::vector<v1::LatencyWindow>& windows) {
  for (const v1::LatencyWindow& w : windows) {
    ClassSeries& s = Series(w.peer_class());
    s.sent->Increment(static_cast<double>(w.probes_sent()));
    s.timeouts->Increment(static_cast<double>(w.probes_lost()));
    s.loss_ratio->Set(w.probes_sent() == 0 ? 0.0
                                           : static_cast<double>(w.probes_lost()) /
                                                 static_cast<double>(w.probes_sent()));
    absl::StatusOr<QuantileSketch> sketch = QuantileSketch::FromProto(w.network_rtt_seconds());
    if (!sketch.ok()) {
      LogOnce(absl::StrCat("probe.metrics.bad_sketch.", w.peer_class()), LogLevel::kWarning,
              "probe metrics: invalid RTT sketch skipped",
              {{"peer_class", w.peer_class()}, {"error", std::string(sketch.status().message())}});
      continue;
    }
    for (int i = 0; i < kNumQuantiles; ++i) {
      s.quantiles[i]->Set(sketch->empty() ? std::numeric_limits<double>::quiet_NaN()
                                          : sketch->Quantile(kQuantiles[i]));
    }
  }
}

}  // namespace rocetune
