#include "agent/sampling_loop.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/logging.h"

namespace rocetune {

SamplingLoop::SamplingLoop(SamplingLoopOptions options, Sampler* sampler, NicOwner* owner,
                           Prober* prober, Clock* clock)
    : options_(std::move(options)),
      sampler_(sampler),
      owner_(owner),
      prober_(prober),
      clock_(clock),
      sample_interval_(options_.sample_interval),
      drift_interval_(options_.drift_interval) {}

void SamplingLoop::Run(Sink sink) {
  // Each round one interval after the previous one ended (a wait on the
  // clock: a simulated host's clock waits in wall time, as the controller
  // that expects its reports does).
  while (!clock_->WaitForNotification(stop_, sample_interval())) {
    if (options_.round_gate) {
      options_.round_gate(stop_);
      if (stop_.HasBeenNotified()) break;
    }
    v1::Report report;
    bool lent = false;
    Round(&report, &lent);
    sink(&report);
    if (lent) ReturnSamples(&report);
  }
}

void SamplingLoop::Stop() {
  // Agent::Stop and the end of Agent::Run may both stop the loop, at once.
  if (!stopping_.exchange(true)) stop_.Notify();
}

void SamplingLoop::Round(v1::Report* report, bool* lent) {
  *lent = false;
  if (options_.progress != nullptr) options_.progress->Mark();
  absl::Status sampled = sampler_->SampleOnce(&batch_);
  if (sampled.ok()) {
    if (options_.metrics != nullptr) options_.metrics->RecordSampling(batch_.collect_duration);
    report->set_start_unix_nanos(absl::ToUnixNanos(batch_.start));
    report->set_end_unix_nanos(absl::ToUnixNanos(batch_.end));
    if (std::optional<v1::GuardEvent> ev =
            owner_->Observe(batch_.samples, batch_.mono_start, batch_.mono_end);
        ev.has_value()) {
      if (!ev->restored_version().empty()) {
        RememberGivenUp(ev->judged_version(),
                        absl::StrCat("version ", ev->judged_version(),
                                     " was rolled back by this host's local guard"),
                        /*lease=*/false);
        *ev->mutable_restored_parameters() = owner_->expected();
      }
      LogWarning(
          "local guard restored the last-known-good set",
          {{"kind", ev->kind()}, {"detail", ev->detail()}, {"restored", ev->restored_version()}});
      if (options_.metrics != nullptr) options_.metrics->RecordGuardRollback();
      guard_rollbacks_.fetch_add(1);
      *report->add_guard_events() = std::move(*ev);
    }
    MaybeCheckDrift(report, check_drift_now_.exchange(false));
    // Both fields live on the heap (no arena): Swap exchanges pointers.
    report->mutable_counters()->Swap(&batch_.samples);
    report->mutable_levels()->Swap(&batch_.levels);
    *lent = true;
  } else {
    LogOnce(absl::StrCat("agent.collect:", sampled.message()), LogLevel::kWarning,
            "counter collection failed; reporting without counters",
            {{"error", std::string(sampled.message())}});
    const absl::Time now = clock_->Now();
    report->set_start_unix_nanos(absl::ToUnixNanos(now));
    report->set_end_unix_nanos(absl::ToUnixNanos(now));
  }
  if (options_.without_controller) {
    // Sampling or not, a provisional set is not kept past its lease.
    if (std::optional<v1::GuardEvent> ev = owner_->ExpireLease(options_.without_controller());
        ev.has_value()) {
      ev->set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
      RememberGivenUp(ev->judged_version(),
                      absl::StrCat("version ", ev->judged_version(),
                                   " was given up on this host when its provisional lease "
                                   "expired without the controller"),
                      /*lease=*/true);
      if (options_.metrics != nullptr) options_.metrics->RecordLeaseExpiry();
      *report->add_guard_events() = *std::move(ev);
    }
  }
  if (prober_ != nullptr) {
    for (auto& w : prober_->TakeWindow()) *report->add_latency() = std::move(w);
  }
  if (options_.job_listener != nullptr) {
    // Taken every round, exported or not, so the listener's series cap
    // counts one round's (job, op) pairs; the report carries them to the
    // controller.
    std::vector<JobSeries> series = options_.job_listener->TakeSeries();
    const JobListenerCounts counts = options_.job_listener->counts();
    if (options_.metrics != nullptr) options_.metrics->ObserveJobSignal(counts, series);
    for (const JobSeries& js : series) {
      if (js.seconds.count() == 0) continue;
      v1::JobTiming* t = report->add_jobs();
      t->set_job(js.job);
      t->set_op(js.op);
      js.seconds.ToProto(t->mutable_seconds());
      t->set_bytes(js.bytes);
    }
    const uint64_t refused = counts.version + counts.malformed + counts.oversized;
    // Good lines not kept: what the job sent and nobody will see.
    const uint64_t dropped = counts.rate_limited + counts.too_many_series;
    const absl::Duration now = clock_->Monotonic();
    if ((refused > job_refused_logged_ || dropped > job_dropped_logged_) &&
        (!job_logged_at_.has_value() || now - *job_logged_at_ >= absl::Minutes(1))) {
      // Counts since the last such line; the last refusal's reason only
      // when lines were refused since.
      LogWarning(
          "job signal: lines refused or dropped",
          {{"refused_since_last_log", absl::StrCat(refused - job_refused_logged_)},
           {"last_reason",
            refused > job_refused_logged_ ? options_.job_listener->last_refusal() : std::string()},
           {"dropped_since_last_log", absl::StrCat(dropped - job_dropped_logged_)},
           {"socket", options_.job_listener->path()}});
      job_refused_logged_ = refused;
      job_dropped_logged_ = dropped;
      job_logged_at_ = now;
    }
  }
  // Every round takes a number, sent or not: the controller sees the gap.
  report->set_seq(++seq_);
  rounds_.fetch_add(1);
  if (options_.metrics != nullptr) {
    // batch_.values lists the lent counters' values as read, in the report's order.
    options_.metrics->ObserveReport(
        *report, *lent ? absl::Span<const uint64_t>(batch_.values) : absl::Span<const uint64_t>());
    // Applies, guard restores and the start's journal all move the applied version.
    std::string applied = owner_->expected_version();
    options_.metrics->SetAppliedVersion(applied == "baseline" ? "" : applied);
  }
}

void SamplingLoop::ReturnSamples(v1::Report* report) {
  batch_.samples.Swap(report->mutable_counters());
  batch_.levels.Swap(report->mutable_levels());
}

void SamplingLoop::SetIntervals(absl::Duration sample_interval, absl::Duration drift_interval) {
  absl::MutexLock lock(&mu_);
  sample_interval_ = sample_interval;
  drift_interval_ = drift_interval;
}

absl::Duration SamplingLoop::sample_interval() const {
  absl::MutexLock lock(&mu_);
  return sample_interval_;
}

void SamplingLoop::RememberGivenUp(const std::string& version, std::string why, bool lease) {
  // The newest versions are kept; desired versions only grow, so an old one
  // does not come back.
  constexpr size_t kMaxGivenUp = 16;
  absl::MutexLock lock(&mu_);
  given_up_.push_back(GivenUpVersion{version, std::move(why), lease});
  if (given_up_.size() > kMaxGivenUp) given_up_.erase(given_up_.begin());
}

std::optional<std::string> SamplingLoop::GivenUp(const std::string& version) const {
  absl::MutexLock lock(&mu_);
  for (const GivenUpVersion& g : given_up_) {
    if (g.version == version) return g.why;
  }
  return std::nullopt;
}

bool SamplingLoop::GivenUpForLease(const std::string& version) const {
  absl::MutexLock lock(&mu_);
  for (const GivenUpVersion& g : given_up_) {
    if (g.version == version) return g.lease;
  }
  return false;
}

void SamplingLoop::ForgetGivenUp(const std::string& version) {
  absl::MutexLock lock(&mu_);
  given_up_.erase(std::remove_if(given_up_.begin(), given_up_.end(),
                                 [&](const GivenUpVersion& g) { return g.version == version; }),
                  given_up_.end());
}

std::vector<std::string> SamplingLoop::drift() const {
  absl::MutexLock lock(&mu_);
  return drift_;
}

void SamplingLoop::SetDrift(std::vector<std::string> drift) {
  absl::MutexLock lock(&mu_);
  drift_ = std::move(drift);
}

void SamplingLoop::MaybeCheckDrift(v1::Report* report, bool force) {
  const absl::Duration now = clock_->Monotonic();
  if (!force && now < next_drift_check_) return;
  {
    absl::MutexLock lock(&mu_);
    next_drift_check_ = now + drift_interval_;
  }
  v1::ParameterSet current;
  std::vector<DriftItem> drift = owner_->CheckDrift(&current);
  // /metrics shows what the device holds, as last read.
  if (options_.metrics != nullptr) {
    options_.metrics->SetParameters(current);
    options_.metrics->RecordDriftCheck(drift.size());
  }
  std::vector<std::string> lines;
  for (const DriftItem& d : drift) lines.push_back(d.Text());
  SetDrift(lines);
  if (drift.empty()) return;
  const std::string detail =
      absl::StrCat("version ", owner_->expected_version(), ": ", absl::StrJoin(lines, "; "));
  LogWarning("parameter drift: the NIC holds values other than the applied set",
             {{"detail", detail}});
  v1::GuardEvent* ev = report->add_guard_events();
  ev->set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  ev->set_kind("drift");
  ev->set_detail(detail);
  for (const DriftItem& d : drift) {
    v1::DriftedParameter* p = ev->add_drifted();
    p->set_device(d.device);
    p->set_parameter(d.parameter);
    p->set_expected(d.expected);
    if (d.found.has_value()) p->set_found(*d.found);
  }
}

}  // namespace rocetune
