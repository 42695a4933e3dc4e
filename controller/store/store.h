#ifndef ROCETUNE_CONTROLLER_STORE_STORE_H_
#define ROCETUNE_CONTROLLER_STORE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/params.pb.h"

struct sqlite3;

namespace rocetune::controller {

// A host as persisted: the admin view plus its desired state.
struct StoredHost {
  v1::HostInfo info;         // state, reports and timestamps are not meaningful after reload
  uint64_t desired_seq = 0;  // 0 = no desired state
  v1::ParameterSet desired;
};

// The controller's durable state in SQLite (WAL mode) at <dir>/controller.db:
// hosts, policies, policy_versions, changes, change_transitions, approvals,
// audit. The schema version is PRAGMA user_version; Open applies pending
// migrations in one transaction each. Thread-safe (one connection, serialized).
class Store {
 public:
  // Creates `dir` if needed. kFailedPrecondition when the database was written
  // by a newer controller (schema version above LatestSchemaVersion()).
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& dir);
  // Opens a database file directly (tests; ":memory:" allowed).
  static absl::StatusOr<std::unique_ptr<Store>> OpenFile(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  static int LatestSchemaVersion();
  int schema_version();

  // Inserts or replaces a host row.
  absl::Status SaveHost(const StoredHost& host);
  // SaveHost and an audit row in one transaction.
  absl::Status SaveHostWithAudit(const StoredHost& host, const v1::AuditEntry& audit);
  absl::StatusOr<std::vector<StoredHost>> LoadHosts();

  // Appends an audit row to the hash chain; returns its id. `entry.id`,
  // `prev_hash` and `hash` are ignored and computed here (controller/audit).
  absl::StatusOr<int64_t> AppendAudit(const v1::AuditEntry& entry);
  // Entries with id > after_id, oldest first, at most `limit` (0 = 100).
  absl::StatusOr<std::vector<v1::AuditEntry>> ListAudit(int64_t after_id, uint32_t limit);
  // Filtered, paged listing (see v1::ListAuditRequest).
  absl::StatusOr<v1::ListAuditResponse> QueryAudit(const v1::ListAuditRequest& request);
  // Walks the whole chain: recomputes each row's hash and checks prev_hash
  // links and id order. Finds a modified, deleted or reordered row.
  absl::StatusOr<v1::VerifyAuditResponse> VerifyAudit();

  // Everything one controller decision persists, written in ONE transaction
  // (all or nothing): hosts' desired state, changes (whole, transitions and
  // verdicts included), campaigns, a policy version, and audit rows appended
  // to the chain in order.
  struct Batch {
    std::vector<StoredHost> hosts;
    std::vector<v1::Change> changes;
    std::vector<v1::Campaign> campaigns;
    std::vector<v1::PolicyVersion> policy_versions;  // immutable: existing (name, hash) skipped
    std::vector<v1::AuditEntry> audit;
  };
  absl::Status Commit(const Batch& batch);

  // Policy versions are immutable: saving an existing (name, version_hash) is a no-op.
  absl::Status SavePolicyVersion(const v1::PolicyVersion& version);
  // Every version, oldest first (per name in sequence order).
  absl::StatusOr<std::vector<v1::PolicyVersion>> ListPolicyVersions();
  // Upserts a change (the whole message) and an audit row in one transaction.
  absl::Status SaveChange(const v1::Change& change, const v1::AuditEntry* audit);
  absl::StatusOr<std::vector<v1::Change>> LoadChanges();
  absl::Status SaveCampaign(const v1::Campaign& campaign, const v1::AuditEntry* audit);
  absl::StatusOr<std::vector<v1::Campaign>> LoadCampaigns();

  // Called with the duration of every write transaction (for /metrics).
  void set_latency_observer(std::function<void(double seconds)> observer);

  // Runs raw SQL (tests of migrations).
  absl::Status ExecForTest(const std::string& sql);

 private:
  explicit Store(sqlite3* db) : db_(db) {}
  absl::Status Migrate();
  absl::Status Exec(const std::string& sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SaveHostLocked(const StoredHost& host) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int64_t> AppendAuditLocked(const v1::AuditEntry& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `body` inside BEGIN IMMEDIATE / COMMIT (ROLLBACK on error).
  absl::Status InTransaction(const std::function<absl::Status()>& body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Error(const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  std::function<void(double)> latency_observer_;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_STORE_STORE_H_
