#ifndef ROCETUNE_CONTROLLER_TELEMETRY_TELEMETRY_STORE_H_
#define ROCETUNE_CONTROLLER_TELEMETRY_TELEMETRY_STORE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "google/protobuf/io/coded_stream.h"
#include "model/quantile_sketch.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune::controller {

struct TelemetryOptions {
  absl::Duration window = absl::Seconds(10);
  // Windows older than this are dropped.
  // Must cover a rollout's baseline and its bake, each on its own: the
  // rollout takes the baseline when a step starts (proposals whose policy
  // needs more are refused).
  absl::Duration retention = absl::Minutes(10);
  // Distinct counter names accepted process-wide; beyond it new names are skipped.
  int max_counter_names = 4096;
  // Per-report limits; a report beyond them is refused.
  int max_counters_per_report = 4096;
  int max_latency_windows_per_report = 64;
  int max_peer_classes_per_window = 16;
  // The job signal: (job, op) entries per report (the agent's own cap is
  // 64 per round) and per window (further pairs in a window are skipped).
  int max_jobs_per_report = 64;
  int max_job_series_per_window = 64;
  size_t max_name_length = 128;
};

// Which fleet metric a canonical counter name feeds.
enum class CounterKind : uint8_t { kOther = 0, kCnp = 1, kPfcPause = 2 };
CounterKind ClassifyCounter(absl::string_view name);

// One counter of a Report as telemetry reads it: views into a CounterSample
// or into the bytes of one (ReportDecoder). Device and port are not kept:
// windows sum deltas per (counter name, priority), so per-priority PFC
// counters stay apart.
struct CounterInput {
  absl::string_view name;
  uint64_t delta = 0;
  double rate_per_second = 0;
  int32_t priority = -1;  // -1: not a per-priority counter
};

// The telemetry key of a per-priority counter: "<name>@p<priority>".
std::string PriorityCounterName(absl::string_view name, int32_t priority);

// Fills `out` with views of report.counters() (valid while `report` is).
void CountersOf(const v1::Report& report, std::vector<CounterInput>* out);

// Process-wide counter-name table: reports carry names, windows store small ids.
// Thread-safe.
class CounterNames {
 public:
  explicit CounterNames(int max_names) : max_names_(max_names) {}
  // Fills ids[i] for counters[i]; -1 where the table is full.
  void Resolve(absl::Span<const CounterInput> counters, std::vector<int32_t>* ids);
  CounterKind kind(int32_t id) const;
  std::string name(int32_t id) const;
  int size() const;
  // Names that could not be added because the table was full.
  uint64_t overflowed() const { return overflowed_.load(); }

 private:
  const int max_names_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, int32_t> ids_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  std::vector<CounterKind> kinds_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> overflowed_{0};
};

struct LatencyAggregate {
  // Encodes both sketches (v1::Sketch bytes, a few hundred bytes) and drops
  // their dense bucket arrays (kilobytes). Done when a window closes.
  void Pack();
  // The sketches, decoded when packed.
  QuantileSketch NetworkRtt() const;
  QuantileSketch HostDelay() const;

  QuantileSketch network_rtt;  // empty once packed
  QuantileSketch host_delay;   // empty once packed
  bool packed = false;
  std::string packed_rtt;
  std::string packed_delay;
  uint64_t probes_sent = 0;
  uint64_t probes_lost = 0;
};

// A job's (job, op): the key of the job signal's series.
using JobKey = std::pair<std::string, std::string>;

// One (job, op) of the job signal in a window, like LatencyAggregate.
struct JobAggregate {
  void Pack();
  QuantileSketch Seconds() const;  // decoded when packed

  QuantileSketch seconds;  // empty once packed
  bool packed = false;
  std::string packed_seconds;
  uint64_t bytes = 0;
};

// One (job, op) over a period or a group of hosts.
struct JobPeriod {
  QuantileSketch seconds;
  uint64_t bytes = 0;
  int hosts = 0;  // hosts that reported it (TelemetrySummary; 1 in a PeriodAggregate)
};

// One host's aggregates for one window [index*window, (index+1)*window).
struct WindowAggregate {
  void AddCounter(int32_t id, uint64_t delta);
  // Memory held by this window (counter sums, sketches, peer-class keys).
  size_t ApproxBytes() const;
  // A window that will take no more reports gives back spare capacity and
  // packs its sketches.
  void Compact();
  // Undoes Compact() so that a report can be added (a held report filed late).
  void Reopen();

  int64_t index = 0;
  uint64_t reports = 0;
  double covered_seconds = 0;  // sum of the reports' measured intervals
  // (counter id, sum of deltas), sorted by id. A vector: ~16 bytes per counter.
  std::vector<std::pair<int32_t, uint64_t>> counter_deltas;  // empty once packed
  // Closed windows: the same sums as varints (id gap, sum), 2-6 bytes each.
  std::string packed_counter_deltas;
  // Calls fn(id, sum) for every counter sum, packed or not, in id order.
  template <typename Fn>
  void ForEachCounter(Fn fn) const;
  absl::flat_hash_map<std::string, LatencyAggregate> latency;  // by peer class
  absl::flat_hash_map<JobKey, JobAggregate> jobs;              // the job signal
};

template <typename Fn>
void WindowAggregate::ForEachCounter(Fn fn) const {
  for (const auto& [id, sum] : counter_deltas) fn(id, sum);
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(packed_counter_deltas.data()),
      static_cast<int>(packed_counter_deltas.size()));
  uint32_t id = 0, gap = 0;
  uint64_t sum = 0;
  while (in.ReadVarint32(&gap) && in.ReadVarint64(&sum)) {
    id += gap;
    fn(static_cast<int32_t>(id), sum);
  }
}

// Aggregates over a range of windows for a set of hosts.
struct TelemetrySummary {
  int hosts = 0;  // hosts with at least one report in range
  uint64_t reports = 0;
  double cnp_rate_per_second = 0;        // summed over hosts
  double pfc_pause_rate_per_second = 0;  // summed over hosts
  QuantileSketch network_rtt;
  uint64_t probes_sent = 0;
  uint64_t probes_lost = 0;
  // Counter name -> summed per-host rate.
  absl::flat_hash_map<std::string, double> counter_rates;
  // The job signal, merged over hosts (ordered by job, then op).
  std::map<JobKey, JobPeriod> jobs;
};

// One host's windows over a period, merged (the judge's per-host input).
struct PeriodAggregate {
  QuantileSketch rtt;
  uint64_t probes_sent = 0;
  uint64_t probes_lost = 0;
  int windows_present = 0;  // windows with at least one report
  double covered_seconds = 0;
  // Summed deltas by counter key (name, or "<name>@p<priority>").
  absl::flat_hash_map<std::string, uint64_t> deltas;
  // The job signal (every peer class: it is not a probe's).
  std::map<JobKey, JobPeriod> jobs;
};

class TelemetryStore;

// Where AddReport put a report.
enum class ReportFiling {
  kLive,           // sent when taken: the window containing its receipt
  kHeld,           // held by the agent: the window containing receipt - held_nanos
  kHeldDiscarded,  // held so long that its window is past the retention: not stored
};

// The telemetry of one host. Thread-safe.
class HostTelemetry {
 public:
  HostTelemetry(TelemetryStore* store) : store_(store) {}

  // Validates `report` (names, finite values, interval, sketches) and, only if it
  // is valid, adds it to the window containing `received`. kInvalidArgument names
  // the offending field; nothing is stored then.
  //
  // A held report (held_nanos > 0: taken while the agent could not send it)
  // goes to the window containing `received` - held_nanos instead, created in
  // its place among the host's windows when missing (reopened when closed);
  // one whose window is already past the retention is validated and counted
  // but not stored. Only held reports go to a window before the newest: a
  // live report for an older window (a clock step) lands in the newest one.
  // `filing`, when given, says which it was.
  absl::Status AddReport(const v1::Report& report, absl::Time received,
                         ReportFiling* filing = nullptr);
  // The same with the counters given apart (ReportDecoder's fast path);
  // head.counters() is not read.
  absl::Status AddReport(const v1::Report& head, absl::Span<const CounterInput> counters,
                         absl::Time received, ReportFiling* filing = nullptr);

  // Drops windows that ended before `oldest`; adds the windows kept and the
  // memory they hold to the two counters when given.
  void Prune(absl::Time oldest, size_t* windows = nullptr, size_t* bytes = nullptr);

  // Adds windows overlapping [from, to) to `out` (rates are per-host averages
  // over the covered time). Returns whether any window matched.
  bool AddTo(absl::Time from, absl::Time to, const std::string& peer_class,
             TelemetrySummary* out) const;

  // Merges the windows overlapping [from, to); `peer_class` empty = all.
  PeriodAggregate Aggregate(absl::Time from, absl::Time to, const std::string& peer_class) const;

  // Copy of the windows, oldest first.
  std::vector<WindowAggregate> Windows() const;

  absl::Time last_report() const {
    return absl::FromUnixNanos(last_report_nanos_.load(std::memory_order_relaxed));
  }
  uint64_t reports() const { return reports_.load(std::memory_order_relaxed); }

 private:
  TelemetryStore* const store_;
  std::atomic<int64_t> last_report_nanos_{0};
  std::atomic<uint64_t> reports_{0};
  mutable absl::Mutex mu_;
  // Drops the oldest window, keeping closed_bytes_ in step.
  void PopOldest() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::deque<WindowAggregate> windows_ ABSL_GUARDED_BY(mu_);
  // ApproxBytes of every window but the newest (closed windows do not change),
  // so the footprint costs O(1) per host, not a walk over its windows.
  size_t closed_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// Per-host windows plus group merges. Thread-safe.
class TelemetryStore {
 public:
  explicit TelemetryStore(TelemetryOptions options);

  const TelemetryOptions& options() const { return options_; }
  CounterNames& names() { return names_; }

  // The telemetry of `host_id`, created on first use.
  std::shared_ptr<HostTelemetry> ForHost(const std::string& host_id);
  // The telemetry of `host_id`, or null when it never reported.
  std::shared_ptr<HostTelemetry> Find(const std::string& host_id) const;
  // Forgets a host's telemetry.
  void Remove(const std::string& host_id);

  // Merges the windows overlapping [from, to) of every host in `host_ids`.
  // `peer_class` empty = all classes.
  TelemetrySummary Summarize(const std::vector<std::string>& host_ids, absl::Time from,
                             absl::Time to, const std::string& peer_class = "") const;

  // Drops windows older than the retention, relative to `now`.
  void Prune(absl::Time now);
  // What the last Prune found: windows held over all hosts and their memory.
  struct Footprint {
    size_t hosts = 0;
    size_t windows = 0;
    size_t bytes = 0;
  };
  Footprint footprint() const;

  int64_t WindowIndex(absl::Time t) const;
  absl::Time WindowStart(int64_t index) const;

 private:
  const TelemetryOptions options_;
  CounterNames names_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<HostTelemetry>> hosts_ ABSL_GUARDED_BY(mu_);
  Footprint footprint_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_TELEMETRY_TELEMETRY_STORE_H_
