#ifndef ROCETUNE_CONTROLLER_AUDIT_TLS_REFUSAL_LOG_H_
#define ROCETUNE_CONTROLLER_AUDIT_TLS_REFUSAL_LOG_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/client_cert_verifier.h"
#include "daemon/clock.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::controller {

struct TlsRefusalLogOptions {
  // At most one audit row per key (reason, subject, issuer) per period.
  absl::Duration period = absl::Minutes(1);
  // Distinct (subject, issuer) keys tracked at once; refusals beyond them are
  // counted under one overflow key per reason (subject and issuer "(others)").
  size_t max_keys = 32;
};

// Turns refused TLS handshakes into audit rows at a bounded rate, so that a
// flood of refused handshakes cannot grow the audit log without bound.
//
// A key's first refusal becomes a row at once (detail "count=1: ..."); later
// refusals of the key within `period` of its last row are counted, and the
// count goes out as one row ("count=N since TIME: <last message>") at the
// first Record or Flush once the period has passed. A key with nothing
// pending is forgotten at the Flush after its period. So each key gives at
// most one row per period, and at most max_keys + (number of reasons) keys
// exist at once.
//
// Rows are handed to `emit`, which must only queue them (it runs under this
// object's lock, on gRPC's handshake thread for Record); `count` is called
// with the reason of every refusal (a metric counter). Either may be empty.
// Thread-safe.
class TlsRefusalLog {
 public:
  TlsRefusalLog(Clock* clock, std::function<void(const v1::AuditEntry&)> emit,
                std::function<void(const std::string& reason)> count,
                TlsRefusalLogOptions options = {});

  // One refused handshake. Does nothing after Close.
  void Record(const TlsRefusal& refusal);
  // Emits the counts of keys whose period has passed; forgets idle keys.
  void Flush();
  // Emits every pending count, then ignores further refusals. Idempotent.
  void Close();

  // Keys tracked now (tests).
  size_t keys() const;

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // reason, subject, issuer
  struct Slot {
    absl::Time last_row;  // when the key's last row went out
    int64_t pending = 0;  // refusals since then
    absl::Time first_pending;
    std::string message;  // of the latest pending refusal
  };

  // Each appends the rows it emitted to `out`, for logging once unlocked.
  void RecordLocked(const TlsRefusal& refusal, std::vector<v1::AuditEntry>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FlushLocked(std::vector<v1::AuditEntry>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseLocked(std::vector<v1::AuditEntry>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Emit(const Key& key, int64_t count, absl::Time since, absl::Time now,
            const std::string& message, std::vector<v1::AuditEntry>* to_log)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void LogRows(const std::vector<v1::AuditEntry>& rows);

  Clock* const clock_;
  const std::function<void(const v1::AuditEntry&)> emit_;
  const std::function<void(const std::string&)> count_;
  const TlsRefusalLogOptions options_;
  mutable absl::Mutex mu_;
  std::map<Key, Slot> slots_ ABSL_GUARDED_BY(mu_);
  size_t named_keys_ ABSL_GUARDED_BY(mu_) = 0;  // keys other than the overflow ones
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// The audit action of these rows.
inline constexpr char kTlsRefusedAction[] = "tls_refused";
// Subject and issuer of the overflow keys.
inline constexpr char kTlsRefusalOthers[] = "(others)";

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_AUDIT_TLS_REFUSAL_LOG_H_
