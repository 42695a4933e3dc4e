#include "agent/agent_metrics.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/switch/switch_counter_names.h"
#include "model/counter_names.h"

namespace rocetune {
namespace {

bool ValidMetricChars(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

double VersionNumber(const std::string& version) {
  double v = 0;
  return absl::SimpleAtod(version, &v) ? v : 0.0;
}

// A switch queue counter that only grows (agent/switch/switch_counter_names.h).
// The levels (occupancy, watermark, stormed) travel as LevelSamples; a
// CounterSample carrying one of their names is no counter of theirs and goes
// to rocetune_rdma_unmapped_total.
bool IsSwitchQueueCounterMetric(const std::string& name) {
  namespace sn = switch_counter_names;
  for (const char* k :
       {sn::kQueuePackets, sn::kQueueBytes, sn::kQueueDroppedPackets, sn::kQueueDroppedBytes,
        sn::kQueueEcnMarkedPackets, sn::kQueueEcnMarkedBytes, sn::kPfcwdStormsDetected,
        sn::kPfcwdStormsRestored}) {
    if (name == k) return true;
  }
  return false;
}

struct LevelMetric {
  const char* level;
  const char* help;
};

// The switch queue levels and their gauges, rocetune_switch_<name>.
constexpr LevelMetric kSwitchLevels[] = {
    {switch_counter_names::kQueueOccupancyBytes,
     "Bytes in the switch queue when last read (a level)."},
    {switch_counter_names::kQueueWatermarkBytes,
     "Peak bytes in the switch queue over the switch's last watermark period (a level)."},
    {switch_counter_names::kPfcwdStormed,
     "1 while the PFC watchdog holds the switch queue as stormed, else 0."},
};

constexpr char kUnmappedLevel[] = "rocetune_unmapped_level";

}  // namespace

std::pair<std::string, double> AgentMetrics::MetricNameFor(const std::string& canonical) {
  std::string base = canonical;
  double factor = 1.0;
  if (absl::EndsWith(base, "_duration_us")) {
    base = absl::StrCat(base.substr(0, base.size() - 3), "_seconds");
    factor = 1e-6;
  }
  return {absl::StrCat("rocetune_rdma_", base, "_total"), factor};
}

AgentMetrics::AgentMetrics(std::shared_ptr<prometheus::Registry> registry, std::string host)
    : registry_(std::move(registry)),
      host_(std::move(host)),
      params_(prometheus::BuildGauge()
                  .Name("rocetune_dcqcn_parameter")
                  .Help("DCQCN parameter in force on the device, in the parameter's own unit "
                        "(model/cc_params.h).")
                  .Register(*registry_)),
      applies_(prometheus::BuildCounter()
                   .Name("rocetune_agent_applies_total")
                   .Help("Parameter set applies by result (success, failure).")
                   .Register(*registry_)),
      guard_rollbacks_(prometheus::BuildCounter()
                           .Name("rocetune_agent_guard_rollbacks_total")
                           .Help("Local guard restores of the last-known-good set.")
                           .Register(*registry_)
                           .Add({{"host", host_}})),
      lease_expiries_(prometheus::BuildCounter()
                          .Name("rocetune_agent_lease_expiries_total")
                          .Help("Provisional sets given up for the last-known-good set after "
                                "their lease ran out without the controller.")
                          .Register(*registry_)
                          .Add({{"host", host_}})),
      drift_found_(prometheus::BuildCounter()
                       .Name("rocetune_agent_parameter_drift_total")
                       .Help("Parameters found on the NIC with a value other than the applied "
                             "set's, summed over drift checks.")
                       .Register(*registry_)
                       .Add({{"host", host_}})),
      drifted_now_(prometheus::BuildGauge()
                       .Name("rocetune_agent_parameters_drifted")
                       .Help("Parameters off the applied set at the last drift check.")
                       .Register(*registry_)
                       .Add({{"host", host_}})),
      sampling_seconds_(prometheus::BuildHistogram()
                            .Name("rocetune_agent_sampling_duration_seconds")
                            .Help("Time to collect one round of counters.")
                            .Register(*registry_)
                            .Add({{"host", host_}},
                                 prometheus::Histogram::BucketBoundaries{
                                     1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 0.1})),
      connected_(prometheus::BuildGauge()
                     .Name("rocetune_agent_controller_connected")
                     .Help("1 while the Connect stream to the controller is up.")
                     .Register(*registry_)
                     .Add({{"host", host_}})),
      reports_sent_(prometheus::BuildCounter()
                        .Name("rocetune_agent_reports_sent_total")
                        .Help("Reports sent to the controller.")
                        .Register(*registry_)
                        .Add({{"host", host_}})),
      reports_held_(prometheus::BuildGauge()
                        .Name("rocetune_agent_reports_held")
                        .Help("Reports taken while the controller was unreachable, held to "
                              "be sent on reconnect.")
                        .Register(*registry_)
                        .Add({{"host", host_}})),
      held_sent_(prometheus::BuildCounter()
                     .Name("rocetune_agent_held_reports_sent_total")
                     .Help("Held reports sent after a reconnect.")
                     .Register(*registry_)
                     .Add({{"host", host_}})),
      held_dropped_(prometheus::BuildCounter()
                        .Name("rocetune_agent_held_reports_dropped_total")
                        .Help("Held reports dropped, oldest first, beyond the buffer's bounds "
                              "(--report_buffer_max, --report_buffer_max_bytes).")
                        .Register(*registry_)
                        .Add({{"host", host_}})),
      stalls_(prometheus::BuildCounter()
                  .Name("rocetune_agent_stream_stalls_total")
                  .Help("Streams cancelled because a write did not complete within "
                        "--stream_stall_timeout.")
                  .Register(*registry_)
                  .Add({{"host", host_}})),
      applied_version_(prometheus::BuildGauge()
                           .Name("rocetune_agent_applied_version")
                           .Help("Version of the parameter set the NIC is expected to hold "
                                 "(0: the baseline found at first start).")
                           .Register(*registry_)
                           .Add({{"host", host_}})),
      desired_version_(prometheus::BuildGauge()
                           .Name("rocetune_agent_desired_version")
                           .Help("Version of the last desired state the controller pushed "
                                 "(0: none since the agent started).")
                           .Register(*registry_)
                           .Add({{"host", host_}})),
      job_lines_(prometheus::BuildCounter()
                     .Name("rocetune_agent_job_lines_total")
                     .Help("Lines on the job-signal socket (--job_socket) by outcome: accepted, "
                           "version, malformed, oversized, rate_limited, too_many_series.")
                     .Register(*registry_)),
      job_events_(prometheus::BuildCounter()
                      .Name("rocetune_agent_job_events_total")
                      .Help("Job-signal events accepted, per job and op.")
                      .Register(*registry_)),
      job_p50_(prometheus::BuildGauge()
                   .Name("rocetune_agent_job_p50_seconds")
                   .Help("Median duration of a job's op over the last sampling round that had "
                         "events for it.")
                   .Register(*registry_)),
      job_p99_(prometheus::BuildGauge()
                   .Name("rocetune_agent_job_p99_seconds")
                   .Help("99th-percentile duration of a job's op over the last sampling round "
                         "that had events for it.")
                   .Register(*registry_)),
      probe_metrics_(*registry_, host_) {
  applies_.Add({{"host", host_}, {"result", "success"}});
  applies_.Add({{"host", host_}, {"result", "failure"}});
}

prometheus::Family<prometheus::Counter>& AgentMetrics::CounterFamily(const std::string& metric) {
  auto it = families_.find(metric);
  if (it != families_.end()) return *it->second;
  auto& fam = prometheus::BuildCounter()
                  .Name(metric)
                  .Help(metric == "rocetune_rdma_unmapped_total"
                            ? "RDMA counter without a canonical mapping, under its vendor name."
                        : absl::StartsWith(metric, "rocetune_switch_")
                            ? "Switch queue counter (canonical name, base units)."
                            : "RDMA NIC counter (canonical name, base units).")
                  .Register(*registry_);
  families_[metric] = &fam;
  return fam;
}

prometheus::Counter& AgentMetrics::SeriesFor(const v1::CounterSample& c, double* factor) {
  std::map<std::string, std::string> labels = {
      {"host", host_}, {"device", c.device()}, {"port", absl::StrCat(c.port())}};
  if (c.priority() >= 0) labels["priority"] = absl::StrCat(c.priority());
  std::string metric;
  *factor = 1.0;
  if (IsSwitchQueueCounterMetric(c.name())) {
    // A switch's queue counter: `device` is the switch port and `port` the
    // queue's position (agent/switch/switch_counter_names.h).
    labels.erase("port");
    labels["queue"] = absl::StrCat(c.port());
    metric = absl::StrCat("rocetune_switch_", c.name(), "_total");
  } else if (IsCanonicalCounterName(c.name()) && ValidMetricChars(c.name())) {
    std::tie(metric, *factor) = MetricNameFor(c.name());
  } else {
    metric = "rocetune_rdma_unmapped_total";
    labels["name"] = c.name();
  }
  // Family::Add returns the existing series for known labels; series are never removed.
  return CounterFamily(metric).Add(labels);
}

prometheus::Gauge& AgentMetrics::LevelGaugeFor(const v1::LevelSample& l,
                                               prometheus::Family<prometheus::Gauge>** family) {
  std::map<std::string, std::string> labels = {{"host", host_}, {"device", l.device()}};
  std::string metric = kUnmappedLevel;
  const char* help = "Level without a canonical mapping, under its source's name.";
  for (const LevelMetric& m : kSwitchLevels) {
    if (l.name() == m.level) {
      // `device` is the switch port and `port` the queue's position.
      metric = absl::StrCat("rocetune_switch_", m.level);
      help = m.help;
      labels["queue"] = absl::StrCat(l.port());
      break;
    }
  }
  if (metric == kUnmappedLevel) {
    labels["port"] = absl::StrCat(l.port());
    labels["name"] = l.name();
  }
  if (l.priority() >= 0) labels["priority"] = absl::StrCat(l.priority());
  auto it = level_families_.find(metric);
  if (it == level_families_.end()) {
    auto& fam = prometheus::BuildGauge().Name(metric).Help(help).Register(*registry_);
    it = level_families_.emplace(metric, &fam).first;
  }
  *family = it->second;
  return it->second->Add(labels);
}

void AgentMetrics::ObserveLevels(const v1::Report& report) {
  const size_t n = static_cast<size_t>(report.levels_size());
  bool changed = n != level_by_position_.size();
  if (level_by_position_.size() < n) level_by_position_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const v1::LevelSample& l = report.levels(static_cast<int>(i));
    LevelSeries& s = level_by_position_[i];
    if (s.gauge == nullptr || s.port != l.port() || s.priority != l.priority() ||
        s.name != l.name() || s.device != l.device()) {
      s.gauge = &LevelGaugeFor(l, &s.family);
      s.device = l.device();
      s.port = l.port();
      s.priority = l.priority();
      s.name = l.name();
      changed = true;
    }
    s.gauge->Set(static_cast<double>(l.value()));
  }
  if (!changed) return;
  // The set of levels changed: a level no longer read is no longer exported
  // (a gauge left at its last value would claim a level nobody measured).
  level_by_position_.resize(n);
  absl::flat_hash_map<prometheus::Gauge*, prometheus::Family<prometheus::Gauge>*> now;
  for (const LevelSeries& s : level_by_position_) now.emplace(s.gauge, s.family);
  for (const auto& [gauge, family] : exported_levels_) {
    if (!now.contains(gauge)) family->Remove(gauge);
  }
  exported_levels_ = std::move(now);
}

void AgentMetrics::ObserveReport(const v1::Report& report, absl::Span<const uint64_t> values) {
  const bool have_values = values.size() == static_cast<size_t>(report.counters_size());
  absl::MutexLock lock(&mu_);
  if (by_position_.size() < static_cast<size_t>(report.counters_size())) {
    by_position_.resize(report.counters_size());
  }
  for (int i = 0; i < report.counters_size(); ++i) {
    const v1::CounterSample& c = report.counters(i);
    Series& s = by_position_[i];
    // A series cached at this position has had its first value.
    bool first = false;
    if (s.counter == nullptr || s.port != c.port() || s.priority != c.priority() ||
        s.name != c.name() || s.device != c.device()) {
      s.counter = &SeriesFor(c, &s.factor);
      s.device = c.device();
      s.port = c.port();
      s.priority = c.priority();
      s.name = c.name();
      first = started_.insert(s.counter).second;
    }
    if (first && have_values) {
      // First sight: the NIC's value as read already includes this delta.
      s.counter->Increment(static_cast<double>(values[i]) * s.factor);
    } else {
      s.counter->Increment(static_cast<double>(c.delta()) * s.factor);
    }
  }
  ObserveLevels(report);
  if (report.latency_size() > 0) {
    std::vector<v1::LatencyWindow> windows(report.latency().begin(), report.latency().end());
    probe_metrics_.Update(windows);
  }
}

void AgentMetrics::SetParameters(const v1::ParameterSet& params) {
  for (const auto& d : params.devices()) {
    for (const auto& [name, value] : d.dcqcn()) {
      params_.Add({{"host", host_}, {"device", d.device()}, {"parameter", name}})
          .Set(static_cast<double>(value));
    }
    if (d.has_rp_enable_mask()) {
      params_.Add({{"host", host_}, {"device", d.device()}, {"parameter", "rp_enable_mask"}})
          .Set(d.rp_enable_mask());
    }
    if (d.has_np_enable_mask()) {
      params_.Add({{"host", host_}, {"device", d.device()}, {"parameter", "np_enable_mask"}})
          .Set(d.np_enable_mask());
    }
    if (d.has_pfc()) {
      params_.Add({{"host", host_}, {"device", d.device()}, {"parameter", "pfc_enable_mask"}})
          .Set(d.pfc().enable_mask());
    }
  }
}

void AgentMetrics::RecordApply(bool ok) {
  applies_.Add({{"host", host_}, {"result", ok ? "success" : "failure"}}).Increment();
}

void AgentMetrics::RecordGuardRollback() { guard_rollbacks_.Increment(); }

void AgentMetrics::RecordLeaseExpiry() { lease_expiries_.Increment(); }

void AgentMetrics::RecordDriftCheck(size_t drifted) {
  drift_found_.Increment(static_cast<double>(drifted));
  drifted_now_.Set(static_cast<double>(drifted));
}

void AgentMetrics::RecordSampling(absl::Duration d) {
  sampling_seconds_.Observe(absl::ToDoubleSeconds(d));
}

void AgentMetrics::SetConnected(bool connected) { connected_.Set(connected ? 1 : 0); }

void AgentMetrics::RecordReportSent() { reports_sent_.Increment(); }

void AgentMetrics::SetReportsHeld(size_t held) { reports_held_.Set(static_cast<double>(held)); }

void AgentMetrics::RecordHeldReportSent() { held_sent_.Increment(); }

void AgentMetrics::RecordHeldReportsDropped(size_t n) {
  held_dropped_.Increment(static_cast<double>(n));
}

void AgentMetrics::RecordStall() { stalls_.Increment(); }

void AgentMetrics::SetAppliedVersion(const std::string& version) {
  applied_version_.Set(VersionNumber(version));
}

void AgentMetrics::SetDesiredVersion(const std::string& version) {
  desired_version_.Set(VersionNumber(version));
}

void AgentMetrics::ObserveJobSignal(const JobListenerCounts& counts,
                                    const std::vector<JobSeries>& series) {
  absl::MutexLock lock(&mu_);
  const std::pair<const char*, uint64_t JobListenerCounts::*> results[] = {
      {"accepted", &JobListenerCounts::accepted},
      {"version", &JobListenerCounts::version},
      {"malformed", &JobListenerCounts::malformed},
      {"oversized", &JobListenerCounts::oversized},
      {"rate_limited", &JobListenerCounts::rate_limited},
      {"too_many_series", &JobListenerCounts::too_many_series},
      {"connection_refused", &JobListenerCounts::connections_refused},
  };
  for (const auto& [result, field] : results) {
    prometheus::Counter& c = job_lines_.Add({{"host", host_}, {"result", result}});
    if (counts.*field > job_seen_.*field) {
      c.Increment(static_cast<double>(counts.*field - job_seen_.*field));
    }
  }
  job_seen_ = counts;
  ++job_round_;
  for (const JobSeries& s : series) {
    if (s.seconds.count() == 0) continue;
    JobExport& e = job_exports_[{s.job, s.op}];
    if (e.events == nullptr) {
      const std::map<std::string, std::string> labels = {
          {"host", host_}, {"job", s.job}, {"op", s.op}};
      e.events = &job_events_.Add(labels);
      e.p50 = &job_p50_.Add(labels);
      e.p99 = &job_p99_.Add(labels);
    }
    e.events->Increment(static_cast<double>(s.seconds.count()));
    e.p50->Set(s.seconds.Quantile(0.5));
    e.p99->Set(s.seconds.Quantile(0.99));
    e.last_round = job_round_;
  }
  auto remove = [this](std::map<std::pair<std::string, std::string>, JobExport>::iterator it)
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                      job_events_.Remove(it->second.events);
                      job_p50_.Remove(it->second.p50);
                      job_p99_.Remove(it->second.p99);
                      return job_exports_.erase(it);
                    };
  for (auto it = job_exports_.begin(); it != job_exports_.end();) {
    it = job_round_ - it->second.last_round < kJobSeriesIdleRounds ? std::next(it) : remove(it);
  }
  // Past the cap, the (job, op) pairs updated longest ago go first, so a
  // sender inventing job names cannot grow /metrics without bound.
  while (job_exports_.size() > kMaxJobSeriesExported) {
    auto oldest = job_exports_.begin();
    for (auto it = job_exports_.begin(); it != job_exports_.end(); ++it) {
      if (it->second.last_round < oldest->second.last_round) oldest = it;
    }
    remove(oldest);
  }
}

}  // namespace rocetune
