#include "agent/apply/local_guard.h"

#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/logging.h"

ABSL_FLAG(absl::Duration, guard_window, absl::Minutes(5),
          "How long after an apply the local guard watches PFC pause time and CNP rate.");
ABSL_FLAG(double, guard_max_pfc_pause_ratio, 0.2,
          "Local guard: restore the last-known-good set when a priority is paused (rx or tx) "
          "for more than this fraction of a sampling interval. <= 0 disables.");
ABSL_FLAG(double, guard_max_cnp_rate, 1e6,
          "Local guard: restore the last-known-good set when CNPs handled or sent on a device "
          "port exceed this many per second. <= 0 disables.");

namespace rocetune {

LocalGuardOptions LocalGuardOptionsFromFlags() {
  LocalGuardOptions o;
  o.window = absl::GetFlag(FLAGS_guard_window);
  o.max_pfc_pause_ratio = absl::GetFlag(FLAGS_guard_max_pfc_pause_ratio);
  o.max_cnp_rate_per_second = absl::GetFlag(FLAGS_guard_max_cnp_rate);
  return o;
}

LocalGuard::LocalGuard(LocalGuardOptions options, Clock* clock, ParameterApplier* applier,
                       LkgJournal* journal)
    : options_(options), clock_(clock), applier_(applier), journal_(journal) {}

void LocalGuard::Arm(const std::string& version, const v1::ParameterSet& applied) {
  absl::MutexLock lock(&mu_);
  armed_ = true;
  armed_at_ = clock_->Monotonic();
  candidate_version_ = version;
  candidate_ = applied;
}

void LocalGuard::SetOptions(const LocalGuardOptions& options) {
  absl::MutexLock lock(&mu_);
  options_ = options;
}

bool LocalGuard::armed() const {
  absl::MutexLock lock(&mu_);
  return armed_;
}

std::optional<v1::GuardEvent> LocalGuard::Observe(
    const google::protobuf::RepeatedPtrField<v1::CounterSample>& samples) {
  absl::MutexLock lock(&mu_);
  if (!armed_) return std::nullopt;
  const absl::Duration since = clock_->Monotonic() - armed_at_;
  if (since > options_.window) {
    armed_ = false;
    absl::Status st = journal_->Save(candidate_version_, candidate_);
    if (st.ok()) {
      LogInfo("guard window passed, set is last-known-good", {{"version", candidate_version_}});
    } else {
      LogError("cannot save last-known-good set",
               {{"version", candidate_version_}, {"error", std::string(st.message())}});
    }
    return std::nullopt;
  }

  std::string kind;
  std::string detail;
  for (const v1::CounterSample& s : samples) {
    const bool pause =
        s.name() == "rx_pfc_pause_duration_us" || s.name() == "tx_pfc_pause_duration_us";
    const bool cnp = s.name() == "cnp_handled" || s.name() == "cnp_sent";
    if (!pause && !cnp) continue;
    std::string where = absl::StrCat(s.device(), " port ", s.port());
    if (s.priority() >= 0) absl::StrAppend(&where, " priority ", s.priority());
    if (pause && options_.max_pfc_pause_ratio > 0) {
      const double ratio = s.rate_per_second() / 1e6;  // us paused per second
      if (ratio > options_.max_pfc_pause_ratio) {
        kind = "pfc_pause_guard";
        detail = absl::StrFormat("%s %s: paused %.1f%% of the time > %.1f%%", where, s.name(),
                                 ratio * 100, options_.max_pfc_pause_ratio * 100);
        break;
      }
    }
    if (cnp && options_.max_cnp_rate_per_second > 0 &&
        s.rate_per_second() > options_.max_cnp_rate_per_second) {
      kind = "cnp_rate_guard";
      detail = absl::StrFormat("%s %s: %.0f/s > %.0f/s", where, s.name(), s.rate_per_second(),
                               options_.max_cnp_rate_per_second);
      break;
    }
  }
  if (kind.empty()) return std::nullopt;

  armed_ = false;
  v1::GuardEvent event;
  event.set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  event.set_kind(kind);
  absl::StrAppend(&detail, absl::StrFormat(" %s after applying version %s",
                                           absl::FormatDuration(since), candidate_version_));
  std::optional<LkgEntry> lkg = journal_->Get();
  if (!lkg.has_value()) {
    absl::StrAppend(&detail, "; no last-known-good set, nothing restored");
  } else {
    absl::StatusOr<ApplyResult> r = applier_->Apply(lkg->parameters);
    if (r.ok()) {
      event.set_restored_version(lkg->version);
      absl::StrAppend(&detail, "; restored last-known-good version ", lkg->version);
      for (const std::string& d : r->disruptive) absl::StrAppend(&detail, " (", d, ")");
    } else {
      absl::StrAppend(&detail, "; restoring last-known-good version ", lkg->version,
                      " failed: ", r.status().message());
    }
  }
  event.set_detail(detail);
  LogWarning("local guard tripped", {{"kind", kind}, {"detail", detail}});
  return event;
}

}  // namespace rocetune
