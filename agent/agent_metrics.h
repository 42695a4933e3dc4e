#ifndef ROCETUNE_AGENT_AGENT_METRICS_H_
#define ROCETUNE_AGENT_AGENT_METRICS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "agent/job/job_listener.h"
#include "agent/probe/probe_metrics.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "rocetune/v1/agent.pb.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune {

// The agent's host series on /metrics (docs/metrics.md). Every canonical
// counter becomes a Prometheus counter `rocetune_rdma_<name>_total` (durations
// converted to seconds, byte counters keep bytes) with labels host, device,
// port and, where it applies, priority; counters without a canonical mapping go
// to `rocetune_rdma_unmapped_total{name=...}`. Switch queue counters are
// `rocetune_switch_<name>_total{host,device,queue}`. A report's levels are
// gauges: the switch queue levels `rocetune_switch_<name>{host,device,queue}`
// (queue_occupancy_bytes, queue_watermark_bytes, pfcwd_stormed), any other
// level `rocetune_unmapped_level{host,device,port,name}`; a level is exported
// while reports carry it and removed from the first report that does not
// (one whose collection failed included). DCQCN parameters are gauges
// `rocetune_dcqcn_parameter{host,device,parameter}`. Probe windows in a report
// feed ProbeMetrics (rocetune_probe_rtt_seconds etc.). Every series carries
// `host`. Several AgentMetrics (one per host) may share one registry.
// Thread-safe.
//
// Counter values are the NIC's own, like node_exporter and `ethtool -S`: a
// series starts at the value the counter had when this process first saw it,
// then grows by each report's delta. The deltas come from the sampler, which
// widens 32-bit wraps and treats any other decrease as a reset (delta = the
// new value), so a series stays monotonic across wraps and NIC resets: after
// either it runs ahead of the raw NIC value by what the wrap or reset took away.
class AgentMetrics {
 public:
  AgentMetrics(std::shared_ptr<prometheus::Registry> registry, std::string host);

  // Adds every counter delta of `report` and sets its levels. `values`, when
  // it has one entry per counter of `report` (SampleBatch::values), holds each
  // counter's value as read: a series seen for the first time starts there
  // instead of at its delta. Otherwise a new series starts at its delta.
  void ObserveReport(const v1::Report& report, absl::Span<const uint64_t> values = {});
  void SetParameters(const v1::ParameterSet& params);
  void RecordApply(bool ok);
  void RecordGuardRollback();
  void RecordLeaseExpiry();
  // One drift check found `drifted` parameters off the applied set.
  void RecordDriftCheck(size_t drifted);
  void RecordSampling(absl::Duration collection_time);
  void SetConnected(bool connected);
  void RecordReportSent();
  // The held-report ring (reports taken while disconnected).
  void SetReportsHeld(size_t held);
  void RecordHeldReportSent();
  void RecordHeldReportsDropped(size_t n);
  void RecordStall();
  // The job signal (agent/job/job_listener.h), once a round: `counts` are the
  // listener's totals since it started (rocetune_agent_job_lines_total by
  // result, connections refused under result="connection_refused"), `series` what the round took
  // (rocetune_agent_job_events_total, rocetune_agent_job_p50_seconds and _p99_seconds per job and
  // op, the quantiles those of the last round that had events). A (job, op) without an event for
  // kJobSeriesIdleRounds rounds leaves /metrics.
  static constexpr uint64_t kJobSeriesIdleRounds = 600;
  // At most this many (job, op) pairs on /metrics: past it, those updated
  // longest ago leave first.
  static constexpr size_t kMaxJobSeriesExported = 256;
  void ObserveJobSignal(const JobListenerCounts& counts, const std::vector<JobSeries>& series);
  // rocetune_agent_applied_version / _desired_version: the version number
  // (versions are decimal strings); "" or a non-numeric version is 0.
  void SetAppliedVersion(const std::string& version);
  void SetDesiredVersion(const std::string& version);

  // Converts a canonical counter name into its metric name and the factor that
  // turns the counter's unit into the metric's base unit.
  static std::pair<std::string, double> MetricNameFor(const std::string& canonical);

 private:
  prometheus::Family<prometheus::Counter>& CounterFamily(const std::string& metric)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // One report counter's series, cached by its position in the report: reports
  // list the same counters in the same order round after round, so a steady
  // round costs a key comparison per counter instead of building label maps.
  struct Series {
    std::string device;
    uint32_t port = 0;
    int32_t priority = -1;
    std::string name;
    prometheus::Counter* counter = nullptr;
    double factor = 1.0;
  };
  prometheus::Counter& SeriesFor(const v1::CounterSample& c, double* factor)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A report's levels, cached by position like the counters.
  struct LevelSeries {
    std::string device;
    uint32_t port = 0;
    int32_t priority = -1;
    std::string name;
    prometheus::Gauge* gauge = nullptr;
    prometheus::Family<prometheus::Gauge>* family = nullptr;
  };
  prometheus::Gauge& LevelGaugeFor(const v1::LevelSample& l,
                                   prometheus::Family<prometheus::Gauge>** family)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ObserveLevels(const v1::Report& report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<prometheus::Registry> registry_;
  std::string host_;
  absl::Mutex mu_;
  std::map<std::string, prometheus::Family<prometheus::Counter>*> families_ ABSL_GUARDED_BY(mu_);
  prometheus::Family<prometheus::Gauge>& params_;
  prometheus::Family<prometheus::Counter>& applies_;
  prometheus::Counter& guard_rollbacks_;
  prometheus::Counter& lease_expiries_;
  prometheus::Counter& drift_found_;
  prometheus::Gauge& drifted_now_;
  prometheus::Histogram& sampling_seconds_;
  prometheus::Gauge& connected_;
  prometheus::Counter& reports_sent_;
  prometheus::Gauge& reports_held_;
  prometheus::Counter& held_sent_;
  prometheus::Counter& held_dropped_;
  prometheus::Counter& stalls_;
  prometheus::Gauge& applied_version_;
  prometheus::Gauge& desired_version_;
  prometheus::Family<prometheus::Counter>& job_lines_;
  prometheus::Family<prometheus::Counter>& job_events_;
  prometheus::Family<prometheus::Gauge>& job_p50_;
  prometheus::Family<prometheus::Gauge>& job_p99_;
  struct JobExport {
    prometheus::Counter* events = nullptr;
    prometheus::Gauge* p50 = nullptr;
    prometheus::Gauge* p99 = nullptr;
    uint64_t last_round = 0;
  };
  std::map<std::pair<std::string, std::string>, JobExport> job_exports_ ABSL_GUARDED_BY(mu_);
  JobListenerCounts job_seen_ ABSL_GUARDED_BY(mu_);
  uint64_t job_round_ ABSL_GUARDED_BY(mu_) = 0;
  ProbeMetrics probe_metrics_ ABSL_GUARDED_BY(mu_);
  std::vector<Series> by_position_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> level_families_
      ABSL_GUARDED_BY(mu_);
  std::vector<LevelSeries> level_by_position_ ABSL_GUARDED_BY(mu_);
  // The level gauges the last report set, with their families.
  absl::flat_hash_map<prometheus::Gauge*, prometheus::Family<prometheus::Gauge>*> exported_levels_
      ABSL_GUARDED_BY(mu_);
  // Series that have had their first value.
  absl::flat_hash_set<const prometheus::Counter*> started_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_AGENT_METRICS_H_
