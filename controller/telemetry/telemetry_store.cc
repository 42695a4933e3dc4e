#include "controller/telemetry/telemetry_store.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/logging.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "model/job_event.h"

namespace rocetune::controller {

CounterKind ClassifyCounter(absl::string_view name) {
  if (name == "cnp_sent" || name == "np_cnp_sent" || name == "tx_cnp_pkts") {
    return CounterKind::kCnp;
  }
  if (name == "rx_pfc_pause_frames" || name == "rx_prio_pause" || name == "rx_pause_frames") {
    return CounterKind::kPfcPause;
  }
  return CounterKind::kOther;
}

std::string PriorityCounterName(absl::string_view name, int32_t priority) {
  return absl::StrCat(name, "@p", priority);
}

namespace {

// The key of counters[i] in the name table: the name, or for a per-priority
// counter "<name>@p<priority>" built in `buf` (no allocation once warm).
absl::string_view CounterKey(const CounterInput& c, std::string* buf) {
  if (c.priority < 0) return c.name;
  buf->assign(c.name.data(), c.name.size());
  absl::StrAppend(buf, "@p", c.priority);
  return *buf;
}

}  // namespace

void CounterNames::Resolve(absl::Span<const CounterInput> counters, std::vector<int32_t>* ids) {
  ids->assign(counters.size(), -1);
  bool missing = false;
  thread_local std::string key_buf;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (size_t i = 0; i < counters.size(); ++i) {
      auto it = ids_.find(CounterKey(counters[i], &key_buf));
      if (it == ids_.end()) {
        missing = true;
      } else {
        (*ids)[i] = it->second;
      }
    }
  }
  if (!missing) return;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < counters.size(); ++i) {
    if ((*ids)[i] >= 0) continue;
    const absl::string_view name = CounterKey(counters[i], &key_buf);
    auto it = ids_.find(name);
    if (it != ids_.end()) {
      (*ids)[i] = it->second;
      continue;
    }
    if (static_cast<int>(names_.size()) >= max_names_) {
      overflowed_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    int32_t id = static_cast<int32_t>(names_.size());
    names_.emplace_back(name);
    kinds_.push_back(ClassifyCounter(counters[i].name));
    ids_.emplace(std::string(name), id);
    (*ids)[i] = id;
  }
}

CounterKind CounterNames::kind(int32_t id) const {
  absl::ReaderMutexLock lock(&mu_);
  return kinds_[id];
}

std::string CounterNames::name(int32_t id) const {
  absl::ReaderMutexLock lock(&mu_);
  return names_[id];
}

int CounterNames::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int>(names_.size());
}

namespace {

struct DecodedLatency {
  const v1::LatencyWindow* proto;
  QuantileSketch rtt;
  QuantileSketch host_delay;
};

// `what` is built only on error: this runs for every counter of every report.
absl::Status CheckName(absl::string_view name, size_t max_len, const char* field, int index,
                       const char* member) {
  if (!name.empty() && name.size() <= max_len) return absl::OkStatus();
  std::string what = absl::StrCat(field, "[", index, "].", member);
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  return absl::InvalidArgumentError(
      absl::StrCat(what, " is ", name.size(), " bytes long (limit ", max_len, ")"));
}

// The report's limits and counters: the checks that need no decoding.
absl::Status CheckReport(const v1::Report& report, absl::Span<const CounterInput> counters,
                         const TelemetryOptions& opt) {
  if (report.held_nanos() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("report ", report.seq(), ": held_nanos ",
                                                   report.held_nanos(), " is negative"));
  }
  if (counters.size() > static_cast<size_t>(opt.max_counters_per_report)) {
    return absl::InvalidArgumentError(absl::StrCat("report.counters has ", counters.size(),
                                                   " entries (limit ", opt.max_counters_per_report,
                                                   ")"));
  }
  if (report.latency_size() > opt.max_latency_windows_per_report) {
    return absl::InvalidArgumentError(absl::StrCat("report.latency has ", report.latency_size(),
                                                   " entries (limit ",
                                                   opt.max_latency_windows_per_report, ")"));
  }
  if (report.end_unix_nanos() < report.start_unix_nanos()) {
    return absl::InvalidArgumentError(
        absl::StrCat("report ", report.seq(), ": end_unix_nanos ", report.end_unix_nanos(),
                     " is before start_unix_nanos ", report.start_unix_nanos()));
  }
  for (size_t i = 0; i < counters.size(); ++i) {
    const CounterInput& c = counters[i];
    if (absl::Status s =
            CheckName(c.name, opt.max_name_length, "report.counters", static_cast<int>(i), "name");
        !s.ok()) {
      return s;
    }
    if (!std::isfinite(c.rate_per_second) || c.rate_per_second < 0) {
      return absl::InvalidArgumentError(absl::StrCat("report.counters[", i, "] (", c.name,
                                                     "): rate_per_second ", c.rate_per_second,
                                                     " is not a finite non-negative number"));
    }
  }
  return absl::OkStatus();
}

// The report's latency windows, their sketches decoded and checked.
absl::Status DecodeLatency(const v1::Report& report, const TelemetryOptions& opt,
                           std::vector<DecodedLatency>* latency) {
  latency->reserve(report.latency_size());
  for (int i = 0; i < report.latency_size(); ++i) {
    const v1::LatencyWindow& w = report.latency(i);
    if (absl::Status s =
            CheckName(w.peer_class(), opt.max_name_length, "report.latency", i, "peer_class");
        !s.ok()) {
      return s;
    }
    auto rtt = QuantileSketch::FromProto(w.network_rtt_seconds());
    if (!rtt.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("report.latency[", i, "].network_rtt_seconds: ", rtt.status().message()));
    }
    absl::StatusOr<QuantileSketch> delay = QuantileSketch(rtt->relative_accuracy());
    if (w.has_host_delay_seconds()) {
      delay = QuantileSketch::FromProto(w.host_delay_seconds());
      if (!delay.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("report.latency[", i, "].host_delay_seconds: ", delay.status().message()));
      }
    }
    if (rtt->relative_accuracy() != QuantileSketch::kDefaultRelativeAccuracy ||
        delay->relative_accuracy() != QuantileSketch::kDefaultRelativeAccuracy) {
      return absl::InvalidArgumentError(absl::StrCat("report.latency[", i,
                                                     "]: sketch relative_accuracy must be ",
                                                     QuantileSketch::kDefaultRelativeAccuracy));
    }
    latency->push_back({&w, *std::move(rtt), *std::move(delay)});
  }
  return absl::OkStatus();
}

// The report's job timings' sketches, decoded and checked, in their order.
absl::Status DecodeJobs(const v1::Report& report, const TelemetryOptions& opt,
                        std::vector<QuantileSketch>* job_seconds) {
  if (report.jobs_size() > opt.max_jobs_per_report) {
    return absl::InvalidArgumentError(absl::StrCat(
        "report.jobs has ", report.jobs_size(), " entries (limit ", opt.max_jobs_per_report, ")"));
  }
  job_seconds->reserve(report.jobs_size());
  for (int i = 0; i < report.jobs_size(); ++i) {
    const v1::JobTiming& j = report.jobs(i);
    for (const absl::Status& s : {CheckJobName(j.job()), CheckJobOp(j.op())}) {
      if (!s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("report.jobs[", i, "].", s.message()));
      }
    }
    absl::StatusOr<QuantileSketch> seconds = QuantileSketch::FromProto(j.seconds());
    if (!seconds.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("report.jobs[", i, "].seconds: ", seconds.status().message()));
    }
    if (seconds->relative_accuracy() != QuantileSketch::kDefaultRelativeAccuracy) {
      return absl::InvalidArgumentError(absl::StrCat("report.jobs[", i,
                                                     "].seconds: relative_accuracy must be ",
                                                     QuantileSketch::kDefaultRelativeAccuracy));
    }
    job_seconds->push_back(*std::move(seconds));
  }
  return absl::OkStatus();
}

}  // namespace

void WindowAggregate::AddCounter(int32_t id, uint64_t delta) {
  auto it = std::lower_bound(counter_deltas.begin(), counter_deltas.end(), id,
                             [](const auto& e, int32_t v) { return e.first < v; });
  if (it != counter_deltas.end() && it->first == id) {
    it->second += delta;
  } else {
    counter_deltas.insert(it, {id, delta});
  }
}

void CountersOf(const v1::Report& report, std::vector<CounterInput>* out) {
  out->resize(report.counters_size());
  for (int i = 0; i < report.counters_size(); ++i) {
    const v1::CounterSample& c = report.counters(i);
    (*out)[i] = CounterInput{c.name(), c.delta(), c.rate_per_second(), c.priority()};
  }
}

absl::Status HostTelemetry::AddReport(const v1::Report& report, absl::Time received,
                                      ReportFiling* filing) {
  thread_local std::vector<CounterInput> counters;
  CountersOf(report, &counters);
  return AddReport(report, counters, received, filing);
}

absl::Status HostTelemetry::AddReport(const v1::Report& report,
                                      absl::Span<const CounterInput> counters, absl::Time received,
                                      ReportFiling* filing) {
  const TelemetryOptions& opt = store_->options();
  if (absl::Status s = CheckReport(report, counters, opt); !s.ok()) return s;
  std::vector<DecodedLatency> latency;
  if (absl::Status s = DecodeLatency(report, opt, &latency); !s.ok()) return s;
  std::vector<QuantileSketch> job_seconds;
  if (absl::Status s = DecodeJobs(report, opt, &job_seconds); !s.ok()) return s;

  thread_local std::vector<int32_t> ids;
  store_->names().Resolve(counters, &ids);
  double interval = static_cast<double>(report.end_unix_nanos() - report.start_unix_nanos()) * 1e-9;
  const bool held = report.held_nanos() > 0;
  const int64_t keep = std::max<int64_t>(1, opt.retention / opt.window);
  int64_t index = store_->WindowIndex(received - absl::Nanoseconds(report.held_nanos()));
  if (held && index <= store_->WindowIndex(received) - keep) {
    // Its window is past the retention (it would be pruned at once).
    if (filing != nullptr) *filing = ReportFiling::kHeldDiscarded;
    reports_.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  if (filing != nullptr) *filing = held ? ReportFiling::kHeld : ReportFiling::kLive;
  {
    absl::MutexLock lock(&mu_);
    // A held report for a window before the newest: that window, which is
    // closed (or missing, the host did not report then).
    WindowAggregate* older = nullptr;
    if (held && !windows_.empty() && index < windows_.back().index) {
      auto it = std::lower_bound(windows_.begin(), windows_.end(), index,
                                 [](const WindowAggregate& w, int64_t i) { return w.index < i; });
      if (it == windows_.end() || it->index != index) {
        it = windows_.emplace(it);
        it->index = index;
      } else {
        closed_bytes_ -= it->ApproxBytes();
        it->Reopen();
      }
      older = &*it;
    } else if (windows_.empty() || windows_.back().index < index) {
      // Live reports land only in the newest window: the one before it is closed.
      if (!windows_.empty()) {
        windows_.back().Compact();
        closed_bytes_ += windows_.back().ApproxBytes();
      }
      windows_.emplace_back();
      windows_.back().index = index;
    }
    // A live report for an older window (clock step) lands in the newest one.
    WindowAggregate& w = older != nullptr ? *older : windows_.back();
    for (const DecodedLatency& d : latency) {
      if (!w.latency.contains(d.proto->peer_class()) &&
          static_cast<int>(w.latency.size()) >= store_->options().max_peer_classes_per_window) {
        continue;
      }
      LatencyAggregate& agg = w.latency[d.proto->peer_class()];
      agg.network_rtt.Merge(d.rtt).IgnoreError();  // accuracies checked above
      agg.host_delay.Merge(d.host_delay).IgnoreError();
      agg.probes_sent += d.proto->probes_sent();
      agg.probes_lost += d.proto->probes_lost();
    }
    for (size_t i = 0; i < counters.size(); ++i) {
      if (ids[i] < 0) continue;
      w.AddCounter(ids[i], counters[i].delta);
    }
    for (int i = 0; i < report.jobs_size(); ++i) {
      if (job_seconds[i].empty()) continue;  // no event: takes no slot
      JobKey key(report.jobs(i).job(), report.jobs(i).op());
      if (!w.jobs.contains(key) &&
          static_cast<int>(w.jobs.size()) >= store_->options().max_job_series_per_window) {
        continue;
      }
      JobAggregate& agg = w.jobs[std::move(key)];
      agg.seconds.Merge(job_seconds[i]).IgnoreError();  // accuracy checked above
      agg.bytes += report.jobs(i).bytes();
    }
    w.covered_seconds += interval;
    ++w.reports;
    if (older != nullptr) {
      older->Compact();
      closed_bytes_ += older->ApproxBytes();
    } else {
      while (!windows_.empty() && windows_.front().index <= index - keep) PopOldest();
    }
  }
  last_report_nanos_.store(absl::ToUnixNanos(received), std::memory_order_relaxed);
  reports_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

namespace {

std::string Encode(const QuantileSketch& sketch) {
  v1::Sketch proto;
  sketch.ToProto(&proto);
  return proto.SerializeAsString();
}

// Decodes what Encode wrote (so it cannot fail short of memory corruption; an
// undecodable sketch reads as empty rather than taking the controller down).
QuantileSketch Decode(const std::string& bytes) {
  v1::Sketch proto;
  if (proto.ParseFromString(bytes)) {
    absl::StatusOr<QuantileSketch> s = QuantileSketch::FromProto(proto);
    if (s.ok()) return *std::move(s);
  }
  LogOnce("telemetry.undecodable_sketch", LogLevel::kError,
          "a packed telemetry sketch did not decode; reading it as empty");
  return QuantileSketch();
}

}  // namespace

void LatencyAggregate::Pack() {
  if (packed) return;
  packed_rtt = Encode(network_rtt);
  packed_delay = Encode(host_delay);
  network_rtt = QuantileSketch(network_rtt.relative_accuracy());
  host_delay = QuantileSketch(host_delay.relative_accuracy());
  packed = true;
}

QuantileSketch LatencyAggregate::NetworkRtt() const {
  return packed ? Decode(packed_rtt) : network_rtt;
}

QuantileSketch LatencyAggregate::HostDelay() const {
  return packed ? Decode(packed_delay) : host_delay;
}

void JobAggregate::Pack() {
  if (packed) return;
  packed_seconds = Encode(seconds);
  seconds = QuantileSketch(seconds.relative_accuracy());
  packed = true;
}

QuantileSketch JobAggregate::Seconds() const { return packed ? Decode(packed_seconds) : seconds; }

void WindowAggregate::Compact() {
  if (!counter_deltas.empty()) {
    std::string packed;
    {
      google::protobuf::io::StringOutputStream zero_copy(&packed);
      google::protobuf::io::CodedOutputStream out(&zero_copy);
      int32_t previous = 0;  // ids are >= 0 and sorted
      for (const auto& [id, sum] : counter_deltas) {
        out.WriteVarint32(static_cast<uint32_t>(id - previous));
        out.WriteVarint64(sum);
        previous = id;
      }
    }
    packed.shrink_to_fit();
    packed_counter_deltas = std::move(packed);
    counter_deltas.clear();
    counter_deltas.shrink_to_fit();
  }
  for (auto& [peer_class, agg] : latency) agg.Pack();
  for (auto& [key, agg] : jobs) agg.Pack();
}

void WindowAggregate::Reopen() {
  if (!packed_counter_deltas.empty()) {
    std::vector<std::pair<int32_t, uint64_t>> sums;
    ForEachCounter([&](int32_t id, uint64_t sum) { sums.emplace_back(id, sum); });
    counter_deltas = std::move(sums);
    packed_counter_deltas.clear();
    packed_counter_deltas.shrink_to_fit();
  }
  for (auto& [peer_class, agg] : latency) {
    if (!agg.packed) continue;
    agg.network_rtt = Decode(agg.packed_rtt);
    agg.host_delay = Decode(agg.packed_delay);
    agg.packed_rtt.clear();
    agg.packed_delay.clear();
    agg.packed = false;
  }
  for (auto& [key, agg] : jobs) {
    if (!agg.packed) continue;
    agg.seconds = Decode(agg.packed_seconds);
    agg.packed_seconds.clear();
    agg.packed = false;
  }
}

size_t WindowAggregate::ApproxBytes() const {
  size_t bytes = sizeof(*this) + counter_deltas.capacity() * sizeof(counter_deltas[0]) +
                 packed_counter_deltas.capacity() + latency.capacity() * sizeof(*latency.begin());
  for (const auto& [peer_class, agg] : latency) {
    bytes += peer_class.capacity() + agg.network_rtt.ApproxBytes() + agg.host_delay.ApproxBytes() -
             2 * sizeof(QuantileSketch) +  // the objects themselves are in the slot
             agg.packed_rtt.capacity() + agg.packed_delay.capacity();
  }
  bytes += jobs.capacity() * sizeof(*jobs.begin());
  for (const auto& [key, agg] : jobs) {
    bytes += key.first.capacity() + key.second.capacity() + agg.seconds.ApproxBytes() -
             sizeof(QuantileSketch) + agg.packed_seconds.capacity();
  }
  return bytes;
}

namespace {

// Merges a window's job signal into `out` (one host: hosts stays 1).
void AddJobs(const WindowAggregate& w, std::map<JobKey, JobPeriod>* out) {
  for (const auto& [key, agg] : w.jobs) {
    JobPeriod& p = (*out)[key];
    p.seconds.Merge(agg.packed ? agg.Seconds() : agg.seconds).IgnoreError();
    p.bytes += agg.bytes;
    p.hosts = 1;
  }
}

}  // namespace

void HostTelemetry::Prune(absl::Time oldest, size_t* windows, size_t* bytes) {
  int64_t first = store_->WindowIndex(oldest);
  absl::MutexLock lock(&mu_);
  while (!windows_.empty() && windows_.front().index < first) PopOldest();
  if (windows != nullptr) *windows += windows_.size();
  if (bytes != nullptr && !windows_.empty())
    *bytes += closed_bytes_ + windows_.back().ApproxBytes();
}

void HostTelemetry::PopOldest() {
  if (windows_.size() > 1) closed_bytes_ -= windows_.front().ApproxBytes();  // a closed one
  windows_.pop_front();
}

bool HostTelemetry::AddTo(absl::Time from, absl::Time to, const std::string& peer_class,
                          TelemetrySummary* out) const {
  int64_t first = store_->WindowIndex(from);
  int64_t last = store_->WindowIndex(to - absl::Nanoseconds(1));
  absl::flat_hash_map<int32_t, uint64_t> deltas;
  double covered = 0;
  uint64_t reports = 0;
  std::map<JobKey, JobPeriod> jobs;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const WindowAggregate& w : windows_) {
      if (w.index < first || w.index > last) continue;
      reports += w.reports;
      covered += w.covered_seconds;
      w.ForEachCounter([&](int32_t id, uint64_t d) { deltas[id] += d; });
      for (const auto& [cls, agg] : w.latency) {
        if (!peer_class.empty() && cls != peer_class) continue;
        if (agg.packed) {
          out->network_rtt.Merge(agg.NetworkRtt()).IgnoreError();
        } else {
          out->network_rtt.Merge(agg.network_rtt).IgnoreError();
        }
        out->probes_sent += agg.probes_sent;
        out->probes_lost += agg.probes_lost;
      }
      AddJobs(w, &jobs);
    }
  }
  if (reports == 0) return false;
  ++out->hosts;
  for (auto& [key, period] : jobs) {
    JobPeriod& fleet = out->jobs[key];
    fleet.seconds.Merge(period.seconds).IgnoreError();
    fleet.bytes += period.bytes;
    ++fleet.hosts;
  }
  out->reports += reports;
  if (covered > 0) {
    for (const auto& [id, d] : deltas) {
      double rate = static_cast<double>(d) / covered;
      out->counter_rates[store_->names().name(id)] += rate;
      switch (store_->names().kind(id)) {
        case CounterKind::kCnp:
          out->cnp_rate_per_second += rate;
          break;
        case CounterKind::kPfcPause:
          out->pfc_pause_rate_per_second += rate;
          break;
        case CounterKind::kOther:
          break;
      }
    }
  }
  return true;
}

PeriodAggregate HostTelemetry::Aggregate(absl::Time from, absl::Time to,
                                         const std::string& peer_class) const {
  PeriodAggregate out;
  const int64_t first = store_->WindowIndex(from);
  const int64_t last = store_->WindowIndex(to - absl::Nanoseconds(1));
  absl::flat_hash_map<int32_t, uint64_t> deltas;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const WindowAggregate& w : windows_) {
      if (w.index < first || w.index > last) continue;
      if (w.reports > 0) ++out.windows_present;
      out.covered_seconds += w.covered_seconds;
      w.ForEachCounter([&](int32_t id, uint64_t d) { deltas[id] += d; });
      for (const auto& [cls, agg] : w.latency) {
        if (!peer_class.empty() && cls != peer_class) continue;
        if (agg.packed) {
          out.rtt.Merge(agg.NetworkRtt()).IgnoreError();
        } else {
          out.rtt.Merge(agg.network_rtt).IgnoreError();
        }
        out.probes_sent += agg.probes_sent;
        out.probes_lost += agg.probes_lost;
      }
      AddJobs(w, &out.jobs);
    }
  }
  for (const auto& [id, d] : deltas) out.deltas[store_->names().name(id)] += d;
  return out;
}

std::vector<WindowAggregate> HostTelemetry::Windows() const {
  absl::ReaderMutexLock lock(&mu_);
  return std::vector<WindowAggregate>(windows_.begin(), windows_.end());
}

TelemetryStore::TelemetryStore(TelemetryOptions options)
    : options_(options), names_(options.max_counter_names) {}

std::shared_ptr<HostTelemetry> TelemetryStore::ForHost(const std::string& host_id) {
  absl::MutexLock lock(&mu_);
  auto& slot = hosts_[host_id];
  if (slot == nullptr) slot = std::make_shared<HostTelemetry>(this);
  return slot;
}

std::shared_ptr<HostTelemetry> TelemetryStore::Find(const std::string& host_id) const {
  absl::MutexLock lock(&mu_);
  auto it = hosts_.find(host_id);
  return it == hosts_.end() ? nullptr : it->second;
}

void TelemetryStore::Remove(const std::string& host_id) {
  absl::MutexLock lock(&mu_);
  hosts_.erase(host_id);
}

TelemetrySummary TelemetryStore::Summarize(const std::vector<std::string>& host_ids,
                                           absl::Time from, absl::Time to,
                                           const std::string& peer_class) const {
  std::vector<std::shared_ptr<HostTelemetry>> hosts;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& id : host_ids) {
      auto it = hosts_.find(id);
      if (it != hosts_.end()) hosts.push_back(it->second);
    }
  }
  TelemetrySummary out;
  for (const auto& h : hosts) h->AddTo(from, to, peer_class, &out);
  return out;
}

void TelemetryStore::Prune(absl::Time now) {
  std::vector<std::shared_ptr<HostTelemetry>> hosts;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, h] : hosts_) hosts.push_back(h);
  }
  Footprint f;
  f.hosts = hosts.size();
  for (const auto& h : hosts) h->Prune(now - options_.retention, &f.windows, &f.bytes);
  absl::MutexLock lock(&mu_);
  footprint_ = f;
}

TelemetryStore::Footprint TelemetryStore::footprint() const {
  absl::MutexLock lock(&mu_);
  return footprint_;
}

int64_t TelemetryStore::WindowIndex(absl::Time t) const {
  return absl::ToInt64Nanoseconds(t - absl::UnixEpoch()) /
         absl::ToInt64Nanoseconds(options_.window);
}

absl::Time TelemetryStore::WindowStart(int64_t index) const {
  return absl::UnixEpoch() + options_.window * index;
}

}  // namespace rocetune::controller
