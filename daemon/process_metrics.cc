#include "daemon/process_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"

#ifndef ROCETUNE_VERSION
#define ROCETUNE_VERSION "unknown"
#endif
#ifndef ROCETUNE_REVISION
#define ROCETUNE_REVISION "unknown"
#endif

namespace rocetune {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<double> CountOpenFds(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot list ", dir, ": ", std::strerror(errno)));
  }
  // The listing's own descriptor is not one of the process's.
  const std::string own = absl::StrCat(dirfd(d));
  double n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (own == e->d_name) continue;
    ++n;
  }
  closedir(d);
  return n;
}

prometheus::MetricFamily Family(const char* name, const char* help, prometheus::MetricType type,
                                double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
  return f;
}

}  // namespace

absl::Status ParseProcStat(absl::string_view stat, double ticks_per_second, double page_bytes,
                           double boot_time_seconds, ProcessStats* out) {
  const size_t close = stat.rfind(')');
  if (close == absl::string_view::npos) {
    return absl::InvalidArgumentError("/proc stat: no ')' after the command name");
  }
  // Fields after the command: [0] is field 3 (state), so field k is [k - 3].
  std::vector<absl::string_view> f =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipWhitespace());
  if (f.size() < 22) {
    return absl::InvalidArgumentError(
        absl::StrCat("/proc stat: ", f.size() + 2, " fields, want at least 24"));
  }
  uint64_t utime = 0, stime = 0, start = 0, vsize = 0;
  int64_t rss = 0;
  if (!absl::SimpleAtoi(f[14 - 3], &utime) || !absl::SimpleAtoi(f[15 - 3], &stime) ||
      !absl::SimpleAtoi(f[22 - 3], &start) || !absl::SimpleAtoi(f[23 - 3], &vsize) ||
      !absl::SimpleAtoi(f[24 - 3], &rss)) {
    return absl::InvalidArgumentError("/proc stat: a numeric field does not parse");
  }
  if (ticks_per_second <= 0) return absl::InvalidArgumentError("clock ticks per second <= 0");
  out->cpu_seconds = static_cast<double>(utime + stime) / ticks_per_second;
  out->start_time_seconds = boot_time_seconds + static_cast<double>(start) / ticks_per_second;
  out->virtual_bytes = static_cast<double>(vsize);
  out->resident_bytes = static_cast<double>(rss < 0 ? 0 : rss) * page_bytes;
  return absl::OkStatus();
}

absl::StatusOr<double> ParseBootTime(absl::string_view proc_stat) {
  for (absl::string_view line : absl::StrSplit(proc_stat, '\n')) {
    if (!absl::ConsumePrefix(&line, "btime ")) continue;
    double v = 0;
    if (absl::SimpleAtod(absl::StripAsciiWhitespace(line), &v)) return v;
    return absl::InvalidArgumentError(absl::StrCat("/proc/stat: bad btime \"", line, "\""));
  }
  return absl::NotFoundError("/proc/stat: no btime line");
}

absl::StatusOr<double> ParseMaxOpenFiles(absl::string_view limits) {
  for (absl::string_view line : absl::StrSplit(limits, '\n')) {
    if (!absl::ConsumePrefix(&line, "Max open files")) continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (f.empty()) break;
    if (f[0] == "unlimited") return std::numeric_limits<double>::infinity();
    double v = 0;
    if (absl::SimpleAtod(f[0], &v)) return v;
    return absl::InvalidArgumentError(absl::StrCat("limits: bad Max open files \"", f[0], "\""));
  }
  return absl::NotFoundError("limits: no \"Max open files\" line");
}

absl::StatusOr<ProcessStats> ReadProcessStats(const std::string& proc_root) {
  ProcessStats s;
  absl::StatusOr<std::string> sys = ReadFile(proc_root + "/stat");
  if (!sys.ok()) return sys.status();
  absl::StatusOr<double> boot = ParseBootTime(*sys);
  if (!boot.ok()) return boot.status();
  absl::StatusOr<std::string> stat = ReadFile(proc_root + "/self/stat");
  if (!stat.ok()) return stat.status();
  const long ticks = sysconf(_SC_CLK_TCK);
  const long page = sysconf(_SC_PAGESIZE);
  if (absl::Status st = ParseProcStat(*stat, static_cast<double>(ticks > 0 ? ticks : 100),
                                      static_cast<double>(page > 0 ? page : 4096), *boot, &s);
      !st.ok()) {
    return st;
  }
  absl::StatusOr<std::string> limits = ReadFile(proc_root + "/self/limits");
  if (!limits.ok()) return limits.status();
  absl::StatusOr<double> max_fds = ParseMaxOpenFiles(*limits);
  if (!max_fds.ok()) return max_fds.status();
  s.max_fds = *max_fds;
  absl::StatusOr<double> fds = CountOpenFds(proc_root + "/self/fd");
  if (!fds.ok()) return fds.status();
  s.open_fds = *fds;
  return s;
}

const char* BuildVersion() { return ROCETUNE_VERSION; }
const char* BuildRevision() { return ROCETUNE_REVISION; }

ProcessMetrics::ProcessMetrics(std::string component, std::string proc_root)
    : component_(std::move(component)), proc_root_(std::move(proc_root)) {}

std::vector<prometheus::MetricFamily> ProcessMetrics::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  prometheus::MetricFamily info =
      Family("rocetune_build_info",
             "Always 1; the labels name the build (version, source revision) and the daemon.",
             MetricType::Gauge, 1);
  info.metric[0].label = {
      {"component", component_}, {"revision", BuildRevision()}, {"version", BuildVersion()}};
  out.push_back(std::move(info));
  absl::StatusOr<ProcessStats> s = ReadProcessStats(proc_root_);
  if (!s.ok()) return out;
  out.push_back(Family("process_cpu_seconds_total",
                       "CPU time this process used, user plus system, in seconds.",
                       MetricType::Counter, s->cpu_seconds));
  out.push_back(Family("process_resident_memory_bytes",
                       "Memory of this process resident in RAM (RSS), in bytes.", MetricType::Gauge,
                       s->resident_bytes));
  out.push_back(Family("process_virtual_memory_bytes",
                       "Size of this process's virtual address space, in bytes.", MetricType::Gauge,
                       s->virtual_bytes));
  out.push_back(Family("process_open_fds", "File descriptors this process holds open.",
                       MetricType::Gauge, s->open_fds));
  out.push_back(Family("process_max_fds", "Soft limit on open file descriptors (RLIMIT_NOFILE).",
                       MetricType::Gauge, s->max_fds));
  out.push_back(Family("process_start_time_seconds",
                       "When this process started, in seconds since the Unix epoch.",
                       MetricType::Gauge, s->start_time_seconds));
  return out;
}

}  // namespace rocetune
