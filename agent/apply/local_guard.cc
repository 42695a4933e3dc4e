#include "agent/apply/local_guard.h"

#include <algorithm>
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
ABSL_FLAG(int32_t, guard_rounds, 1,
          "Local guard: sampling rounds over a threshold (and above the host's own rate before "
          "the apply), among the last this + 1, before it restores the last-known-good set. A "
          "change's policy (guard.local_guard_rounds) overrides it for the sets it pushes.");

namespace rocetune {

LocalGuardOptions LocalGuardOptionsFromFlags() {
  LocalGuardOptions o;
  o.window = absl::GetFlag(FLAGS_guard_window);
  o.max_pfc_pause_ratio = absl::GetFlag(FLAGS_guard_max_pfc_pause_ratio);
  o.max_cnp_rate_per_second = absl::GetFlag(FLAGS_guard_max_cnp_rate);
  o.rounds_over = absl::GetFlag(FLAGS_guard_rounds);
  return o;
}

LocalGuard::LocalGuard(LocalGuardOptions options, Clock* clock, ParameterApplier* applier,
                       LkgJournal* journal)
    : options_(options), clock_(clock), applier_(applier), journal_(journal) {}

void LocalGuard::Arm(const std::string& version, const v1::ParameterSet& applied, int rounds,
                     bool provisional) {
  absl::MutexLock lock(&mu_);
  rounds_ = std::clamp(rounds > 0 ? rounds : options_.rounds_over, 1, kMaxRounds);
  if ((armed_ || awaiting_confirm_) && version == candidate_version_) {
    // The same version again (a reconnect or a drift correction re-pushed
    // it, or the controller confirmed it): its window, baseline and count go
    // on; only whether it is provisional changes.
    candidate_ = applied;
    provisional_ = provisional;
    if (awaiting_confirm_ && !provisional) {
      // Its window passed clean while it was provisional: confirmed now.
      awaiting_confirm_ = false;
      SaveCandidateLocked();
    }
    return;
  }
  provisional_ = provisional;
  awaiting_confirm_ = false;
  armed_ = true;
  armed_at_ = clock_->Monotonic();
  candidate_version_ = version;
  candidate_ = applied;
  recent_.clear();
  // The host's own rates before the apply: the mean of each counter's last
  // rounds seen while no set was on probation.
  before_.clear();
  for (const auto& [key, past] : history_) {
    double sum = 0;
    for (const Past& p : past) sum += p.rate;
    if (!past.empty()) before_[key] = sum / static_cast<double>(past.size());
  }
}

void LocalGuard::SetOptions(const LocalGuardOptions& options) {
  absl::MutexLock lock(&mu_);
  options_ = options;
}

bool LocalGuard::armed() const {
  absl::MutexLock lock(&mu_);
  return armed_;
}

bool LocalGuard::awaiting_confirm() const {
  absl::MutexLock lock(&mu_);
  return awaiting_confirm_;
}

void LocalGuard::Abandon() {
  absl::MutexLock lock(&mu_);
  armed_ = false;
  awaiting_confirm_ = false;
  provisional_ = false;
  candidate_version_.clear();
  candidate_.Clear();
  recent_.clear();
}

void LocalGuard::SaveCandidateLocked() {
  absl::Status st = journal_->Save(candidate_version_, candidate_);
  if (st.ok()) {
    LogInfo("guard window passed, set is last-known-good", {{"version", candidate_version_}});
  } else {
    LogError("cannot save last-known-good set",
             {{"version", candidate_version_}, {"error", std::string(st.message())}});
  }
}

std::optional<v1::GuardEvent> LocalGuard::Observe(
    const google::protobuf::RepeatedPtrField<v1::CounterSample>& samples,
    absl::Duration round_start, absl::Duration round_end) {
  absl::MutexLock lock(&mu_);
  // Rounds of no set on probation are the rates a later apply is compared with
  // (a provisional set waiting for its confirmation is still on probation).
  if (!armed_ && !awaiting_confirm_) {
    for (const v1::CounterSample& s : samples) {
      if (s.name() != "rx_pfc_pause_duration_us" && s.name() != "tx_pfc_pause_duration_us" &&
          s.name() != "cnp_handled" && s.name() != "cnp_sent") {
        continue;
      }
      std::deque<Past>& past = history_[Key{s.device(), s.port(), s.priority(), s.name()}];
      past.push_back(Past{round_end, s.rate_per_second()});
      if (past.size() > kHistory) past.pop_front();
    }
  }
  if (!armed_) return std::nullopt;
  const absl::Duration since = clock_->Monotonic() - armed_at_;
  const int over_in_count = static_cast<int>(std::count(recent_.begin(), recent_.end(), true));
  if (since > options_.window && over_in_count == 0) {
    armed_ = false;
    if (provisional_) {
      // A change's canary or stage: last-known-good only once the controller
      // confirms it (the change is DONE), never on the window alone.
      awaiting_confirm_ = true;
      LogInfo("guard window passed; the set stays provisional until the controller confirms it",
              {{"version", candidate_version_}});
      return std::nullopt;
    }
    SaveCandidateLocked();
    return std::nullopt;
  }
  // A round that began before the apply is (partly) the old set's traffic.
  if (round_start < armed_at_) return std::nullopt;

  std::string kind;
  std::string detail;
  for (const v1::CounterSample& s : samples) {
    const bool pause =
        s.name() == "rx_pfc_pause_duration_us" || s.name() == "tx_pfc_pause_duration_us";
    const bool cnp = s.name() == "cnp_handled" || s.name() == "cnp_sent";
    if (!pause && !cnp) continue;
    const double limit = pause ? options_.max_pfc_pause_ratio * 1e6  // us paused per second
                               : options_.max_cnp_rate_per_second;
    if (limit <= 0 || s.rate_per_second() <= limit) continue;
    auto b = before_.find(Key{s.device(), s.port(), s.priority(), s.name()});
    const double before = b == before_.end() ? 0 : b->second;
    // Above the limit, but not risen by half of it over the host's own rate
    // before the apply: the host was like this already.
    if (s.rate_per_second() - before <= limit / 2) continue;
    std::string where = absl::StrCat(s.device(), " port ", s.port());
    if (s.priority() >= 0) absl::StrAppend(&where, " priority ", s.priority());
    if (pause) {
      kind = "pfc_pause_guard";
      detail = absl::StrFormat(
          "%s %s: paused %.1f%% of the time > %.1f%% (%.1f%% before the apply)", where, s.name(),
          s.rate_per_second() / 1e4, options_.max_pfc_pause_ratio * 100, before / 1e4);
    } else {
      kind = "cnp_rate_guard";
      detail = absl::StrFormat("%s %s: %.0f/s > %.0f/s (%.0f/s before the apply)", where, s.name(),
                               s.rate_per_second(), limit, before);
    }
    break;
  }
  recent_.push_back(!kind.empty());
  while (recent_.size() > static_cast<size_t>(rounds_) + 1) recent_.pop_front();
  const int over = static_cast<int>(std::count(recent_.begin(), recent_.end(), true));
  if (kind.empty() || over < rounds_) return std::nullopt;

  armed_ = false;
  v1::GuardEvent event;
  event.set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  event.set_kind(kind);
  event.set_judged_version(candidate_version_);
  if (rounds_ > 1) {
    absl::StrAppend(&detail, ", over in ", over, " of the last ", recent_.size(), " rounds,");
  }
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
