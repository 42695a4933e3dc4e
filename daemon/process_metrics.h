#ifndef ROCETUNE_DAEMON_PROCESS_METRICS_H_
#define ROCETUNE_DAEMON_PROCESS_METRICS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace rocetune {

// What /proc says about one process (the standard Prometheus process_* set).
struct ProcessStats {
  double cpu_seconds = 0;         // user + system CPU time
  double resident_bytes = 0;      // RSS
  double virtual_bytes = 0;       // VSZ
  double start_time_seconds = 0;  // since the Unix epoch
  double open_fds = 0;
  double max_fds = 0;  // the soft RLIMIT_NOFILE; +Inf when unlimited
};

// Parses /proc/<pid>/stat: utime + stime (field 14, 15) in clock ticks,
// starttime (22) in ticks since boot, vsize (23) in bytes, rss (24) in pages.
// Fills cpu_seconds, virtual_bytes, resident_bytes and start_time_seconds
// (boot_time_seconds + starttime / ticks). The command name (field 2) may hold
// spaces and parentheses: fields are counted from the last ')'.
absl::Status ParseProcStat(absl::string_view stat, double ticks_per_second, double page_bytes,
                           double boot_time_seconds, ProcessStats* out);
// The "btime" line of /proc/stat: boot time in seconds since the Unix epoch.
absl::StatusOr<double> ParseBootTime(absl::string_view proc_stat);
// The soft limit of the "Max open files" line of /proc/<pid>/limits.
absl::StatusOr<double> ParseMaxOpenFiles(absl::string_view limits);

// Reads every field of ProcessStats for the process whose /proc directory is
// `proc_root` + "/self" (boot time from `proc_root` + "/stat").
absl::StatusOr<ProcessStats> ReadProcessStats(const std::string& proc_root = "/proc");

// rocetune's version (the CMake project version) and the source revision the
// build was configured from ("unknown" outside a git checkout).
const char* BuildVersion();
const char* BuildRevision();

// A prometheus::Collectable for a daemon's /metrics (MetricsExposer::AddCollectable):
//   rocetune_build_info{version,revision,component} 1                 gauge
//   process_cpu_seconds_total                                        counter, seconds
//   process_resident_memory_bytes, process_virtual_memory_bytes      gauges, bytes
//   process_open_fds, process_max_fds                                gauges
//   process_start_time_seconds                                       gauge, Unix time
// The process_* values are read from /proc on each scrape; when /proc cannot
// be read they are left out (build_info stays). Thread-safe.
class ProcessMetrics : public prometheus::Collectable {
 public:
  // `component`: "agent", "controller", "fabricsim".
  explicit ProcessMetrics(std::string component, std::string proc_root = "/proc");
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::string component_;
  const std::string proc_root_;
};

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_PROCESS_METRICS_H_
