#include "controller/audit/tls_refusal_log.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/logging.h"

namespace rocetune::controller {

TlsRefusalLog::TlsRefusalLog(Clock* clock, std::function<void(const v1::AuditEntry&)> emit,
                             std::function<void(const std::string&)> count,
                             TlsRefusalLogOptions options)
    : clock_(clock), emit_(std::move(emit)), count_(std::move(count)), options_(options) {}

void TlsRefusalLog::Record(const TlsRefusal& refusal) {
  std::vector<v1::AuditEntry> rows;
  {
    absl::MutexLock lock(&mu_);
    RecordLocked(refusal, &rows);
  }
  LogRows(rows);
}

void TlsRefusalLog::RecordLocked(const TlsRefusal& refusal, std::vector<v1::AuditEntry>* out) {
  if (closed_) return;
  if (count_) count_(refusal.reason);
  const absl::Time now = clock_->Now();
  Key key{refusal.reason, refusal.subject, refusal.issuer};
  auto it = slots_.find(key);
  if (it == slots_.end() && named_keys_ >= options_.max_keys) {
    key = Key{refusal.reason, kTlsRefusalOthers, kTlsRefusalOthers};
    it = slots_.find(key);
  }
  if (it == slots_.end()) {
    if (std::get<1>(key) != kTlsRefusalOthers) ++named_keys_;
    Slot& s = slots_[key];
    s.last_row = now;
    Emit(key, 1, now, now, refusal.message, out);
    return;
  }
  Slot& s = it->second;
  if (s.pending == 0) s.first_pending = now;
  ++s.pending;
  s.message = refusal.message;
  if (now - s.last_row >= options_.period) {
    Emit(key, s.pending, s.first_pending, now, s.message, out);
    s.last_row = now;
    s.pending = 0;
  }
}

void TlsRefusalLog::Flush() {
  std::vector<v1::AuditEntry> rows;
  {
    absl::MutexLock lock(&mu_);
    FlushLocked(&rows);
  }
  LogRows(rows);
}

void TlsRefusalLog::FlushLocked(std::vector<v1::AuditEntry>* out) {
  if (closed_) return;
  const absl::Time now = clock_->Now();
  for (auto it = slots_.begin(); it != slots_.end();) {
    Slot& s = it->second;
    if (now - s.last_row < options_.period) {
      ++it;
      continue;
    }
    if (s.pending > 0) {
      Emit(it->first, s.pending, s.first_pending, now, s.message, out);
      s.last_row = now;
      s.pending = 0;
      ++it;
      continue;
    }
    if (std::get<1>(it->first) != kTlsRefusalOthers) --named_keys_;
    it = slots_.erase(it);
  }
}

void TlsRefusalLog::Close() {
  std::vector<v1::AuditEntry> rows;
  {
    absl::MutexLock lock(&mu_);
    CloseLocked(&rows);
  }
  LogRows(rows);
}

void TlsRefusalLog::CloseLocked(std::vector<v1::AuditEntry>* out) {
  if (closed_) return;
  const absl::Time now = clock_->Now();
  for (const auto& [key, s] : slots_) {
    if (s.pending > 0) Emit(key, s.pending, s.first_pending, now, s.message, out);
  }
  slots_.clear();
  named_keys_ = 0;
  closed_ = true;
}

size_t TlsRefusalLog::keys() const {
  absl::MutexLock lock(&mu_);
  return slots_.size();
}

void TlsRefusalLog::Emit(const Key& key, int64_t count, absl::Time since, absl::Time now,
                         const std::string& message, std::vector<v1::AuditEntry>* to_log) {
  const auto& [reason, subject, issuer] = key;
  v1::AuditEntry e;
  e.set_unix_nanos(absl::ToUnixNanos(now));
  e.set_actor(subject.empty() ? "(no certificate)" : subject);
  e.set_authenticated(false);
  e.set_action(kTlsRefusedAction);
  e.set_subject(issuer);
  e.set_reason(reason);
  e.set_detail(count == 1 && since == now
                   ? absl::StrCat("count=1: ", message)
                   : absl::StrCat("count=", count, " since ",
                                  absl::FormatTime(absl::RFC3339_sec, since, absl::UTCTimeZone()),
                                  ": ", message));
  if (emit_) emit_(e);
  to_log->push_back(std::move(e));
}

void TlsRefusalLog::LogRows(const std::vector<v1::AuditEntry>& rows) {
  for (const v1::AuditEntry& e : rows) {
    LogWarning("TLS handshake refused", {{"reason", e.reason()},
                                         {"subject", e.actor()},
                                         {"issuer", e.subject()},
                                         {"detail", e.detail()}});
  }
}

}  // namespace rocetune::controller
