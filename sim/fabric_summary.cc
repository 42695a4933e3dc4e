// Fabric: queue sampling and the run summary of the measurement window.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/fabric.h"
#include "sim/fabric_internal.h"

namespace rocetune::sim {
namespace {

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

SimSummary::Distribution Describe(const std::vector<double>& v) {
  SimSummary::Distribution d;
  d.count = v.size();
  if (v.empty()) return d;
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / static_cast<double>(v.size());
  d.p50 = Percentile(v, 0.5);
  d.p99 = Percentile(v, 0.99);
  d.p999 = Percentile(v, 0.999);
  d.max = *std::max_element(v.begin(), v.end());
  return d;
}

std::string SizeLabel(uint64_t b) {
  if (b >= 1000000 && b % 1000000 == 0) return absl::StrCat(b / 1000000, "MB");
  if (b >= 1000 && b % 1000 == 0) return absl::StrCat(b / 1000, "KB");
  return absl::StrCat(b, "B");
}

}  // namespace

absl::Status Fabric::ConfigureStatistics(uint8_t used) {
  for (int p = 0; p < 8; ++p) {
    if (used & (1 << p)) used_prios_.push_back(p);
  }
  for (int l : switch_links_) {
    for (int p : used_prios_) {
      links_[l].stat[p] = static_cast<int>(queue_stats_.size());
      QueueStat qs;
      qs.link = l;
      qs.prio = p;
      queue_stats_.push_back(std::move(qs));
    }
  }
  for (uint64_t b : scenario_.fct_bin_bounds_bytes()) fct_bounds_.push_back(b);
  if (fct_bounds_.empty()) fct_bounds_ = {10000, 100000, 1000000, 10000000};
  for (size_t i = 1; i < fct_bounds_.size(); ++i) {
    if (fct_bounds_[i] <= fct_bounds_[i - 1]) {
      return fabric_internal::Invalid("fct_bin_bounds_bytes", "must be strictly increasing");
    }
  }
  fct_bins_.resize(fct_bounds_.size() + 1);
  return absl::OkStatus();
}

void Fabric::Sample() {
  if (!measuring()) return;
  ++measured_steps_;
  const bool sketch = measured_steps_ % stats_every_steps_ == 0;
  for (QueueStat& qs : queue_stats_) {
    const double v = links_[qs.link].q[qs.prio];
    qs.sum += v;
    qs.max = std::max(qs.max, v);
    if (sketch) qs.sketch.Insert(v);
  }
}

SimSummary Fabric::Summary(double wall_seconds) const {
  SimSummary s;
  s.scenario = scenario_.name();
  s.seed = scenario_.seed();
  s.sim_seconds = static_cast<double>(now_ns_) * 1e-9;
  const double measured_ns = static_cast<double>(measured_steps_ * step_ns_);
  s.measured_seconds = measured_ns * 1e-9;
  s.wall_seconds = wall_seconds;
  s.steps = steps_;
  s.events = events_;
  for (const QueueStat& qs : queue_stats_) {
    if (qs.max < 1) continue;  // never held a byte: not a queue
    SimSummary::Queue q;
    q.name = links_[qs.link].name;
    q.priority = qs.prio;
    q.mean_bytes = measured_steps_ > 0 ? qs.sum / static_cast<double>(measured_steps_) : 0;
    q.p99_bytes = qs.sketch.Quantile(0.99);
    q.max_bytes = qs.max;
    s.queues.push_back(q);
  }
  for (const Link& l : links_) {
    if (l.tx_bytes_measured <= 0 && l.pause_frames == 0) continue;
    SimSummary::Link out;
    out.name = l.name;
    out.utilization = measured_ns > 0 ? l.tx_bytes_measured / (l.bytes_per_ns * measured_ns) : 0;
    out.pause_frames = l.pause_frames;
    out.paused_us = l.paused_ns / 1000;
    s.links.push_back(out);
  }
  const v1::Workload& w = scenario_.workload();
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < w.long_flows_size(); ++i) {
    SimSummary::Flow r = long_results_[i];
    const auto& lf = w.long_flows(i);
    r.id = static_cast<uint64_t>(i);
    r.src = HostName(static_cast<int>(lf.src()));
    r.dst = HostName(static_cast<int>(lf.dst()));
    r.tag = lf.tag();
    r.bytes = static_cast<double>(lf.bytes());
    double delivered = r.throughput_gbps;  // finished: bytes recorded at finish
    if (long_flow_slot_[i] >= 0) delivered = flows_[long_flow_slot_[i]].delivered_measured;
    if (long_flow_slot_[i] == -1) delivered = 0;
    r.throughput_gbps = measured_ns > 0 ? delivered * 8.0 / measured_ns : 0;
    sum += r.throughput_gbps;
    sum_sq += r.throughput_gbps * r.throughput_gbps;
    s.flows.push_back(r);
  }
  s.jain_index = s.flows.size() < 2 || sum_sq == 0
                     ? 1.0
                     : sum * sum / (static_cast<double>(s.flows.size()) * sum_sq);
  s.delivered_gbps = measured_ns > 0 ? delivered_measured_ * 8.0 / measured_ns : 0;
  for (size_t b = 0; b < fct_bins_.size(); ++b) {
    SimSummary::FctBin bin;
    const std::string lo = b == 0 ? "0" : SizeLabel(fct_bounds_[b - 1]);
    bin.label = b < fct_bounds_.size() ? absl::StrCat(lo, "-", SizeLabel(fct_bounds_[b]))
                                       : absl::StrCat(">=", lo);
    std::vector<double> v(fct_bins_[b].begin(), fct_bins_[b].end());
    bin.count = v.size();
    bin.p50 = Percentile(v, 0.5);
    bin.p95 = Percentile(v, 0.95);
    bin.p99 = Percentile(v, 0.99);
    s.fct_slowdown.push_back(bin);
  }
  auto describe = [](const QuantileSketch& q, SimSummary::Distribution* d) {
    d->count = q.count();
    if (q.empty()) return;
    d->mean = q.sum() / static_cast<double>(q.count()) * 1e6;
    d->p50 = q.Quantile(0.5) * 1e6;
    d->p99 = q.Quantile(0.99) * 1e6;
    d->p999 = q.Quantile(0.999) * 1e6;
    d->max = q.max() * 1e6;
  };
  describe(probe_rtt_, &s.probe_rtt_us);
  describe(probe_rtt_intra_tor_, &s.probe_rtt_intra_tor_us);
  s.incast_burst_us = Describe(burst_us_);
  s.allreduce_step_us = Describe(ar_step_us_);
  s.flows_started = flows_started_;
  s.flows_completed = flows_completed_;
  s.cnp_sent = static_cast<uint64_t>(cnp_sent_);
  s.cnp_handled = static_cast<uint64_t>(cnp_handled_);
  s.ecn_marked_packets = static_cast<uint64_t>(marked_);
  s.pfc_pause_frames = pause_frames_;
  s.pfc_paused_us = paused_ns_ / 1000;
  s.host_rx_pause_frames = host_rx_pause_frames_;
  s.host_rx_paused_us = host_rx_paused_ns_ / 1000;
  s.dropped_bytes = dropped_;
  return s;
}

}  // namespace rocetune::sim
