#ifndef ROCETUNE_CONTROLLER_STORE_STORE_H_
#define ROCETUNE_CONTROLLER_STORE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
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

// Every status code of a failed store write, each once: the SQLite failures
// mapped as Store's comment says, kInternal for any other. (Refused input,
// kInvalidArgument or kNotFound, is the caller's error and is not a store
// failure.) The controller exports rocetune_controller_store_errors_total for
// each from the start; a code a write fails with outside this list would be
// exported only once it happens.
std::vector<absl::StatusCode> StoreErrorCodes();

// The controller's durable state in SQLite (WAL mode) at <dir>/controller.db:
// hosts, policies, policy_versions, changes, campaigns, step_baselines, audit
// (+ audit_hosts, its host index). The schema version is PRAGMA user_version; Open applies
// pending migrations in one transaction each. Thread-safe (one connection,
// serialized).
//
// Every mutating call runs in one BEGIN IMMEDIATE transaction and either
// writes everything or nothing. SQLite failures map to: read-only database ->
// kFailedPrecondition, disk or database full -> kResourceExhausted, locked or
// I/O error -> kUnavailable, corrupt file -> kDataLoss, a violated constraint
// -> kFailedPrecondition; messages name the database file and the failing step.
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

  // Inserts or replaces a host row. kInvalidArgument for an empty host id.
  absl::Status SaveHost(const StoredHost& host);
  // SaveHost and an audit row in one transaction. The host's id is added to
  // the audit row's host_ids when absent.
  absl::Status SaveHostWithAudit(const StoredHost& host, const v1::AuditEntry& audit);
  absl::StatusOr<std::vector<StoredHost>> LoadHosts();

  // Appends an audit row to the hash chain; returns its id. `entry.id`,
  // `prev_hash` and `hash` are ignored and computed here (controller/audit):
  // ids are never reused, even after rows were deleted.
  absl::StatusOr<int64_t> AppendAudit(const v1::AuditEntry& entry);
  // Entries with id > after_id, oldest first, at most `limit` (0 = 100;
  // kInvalidArgument above 10000).
  absl::StatusOr<std::vector<v1::AuditEntry>> ListAudit(int64_t after_id, uint32_t limit);
  // Filtered, paged listing (see v1::ListAuditRequest): oldest first from
  // after_id, or newest first below before_id (0 = from the newest) with
  // next_before_id set when more rows match. Filters combine with AND; host_id
  // matches rows whose host_ids contain it exactly. limit 0 = 100;
  // kInvalidArgument above 10000 or for negative ids.
  absl::StatusOr<v1::ListAuditResponse> QueryAudit(const v1::ListAuditRequest& request);
  // Walks the whole chain in id order: recomputes each row's hash and checks
  // prev_hash links and that no id is missing. Finds a modified, deleted or
  // reordered row (AuditChainVerifier). An error status only when the
  // database cannot be read; a broken chain is ok=false in the response.
  // Holds the store's lock for the walk (writers wait; about 6 us per row).
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
    std::vector<std::string> forget_hosts;  // host rows deleted (after `hosts` are saved)
    // Upserted by change id, after `changes`. A change saved in any state but
    // CANARY or STAGE drops its step baseline.
    std::vector<v1::StepBaseline> step_baselines;
  };
  // What a successful Commit wrote, index-aligned with the batch.
  struct CommitResult {
    std::vector<v1::PolicyVersion> policy_versions;  // as stored (sequence set)
    std::vector<bool> policy_version_created;        // false: (name, hash) existed
    std::vector<int64_t> audit_ids;
  };
  // kInvalidArgument (nothing written) for a host, change, campaign or policy
  // version without its id / name / hash. `result` may be null.
  absl::Status Commit(const Batch& batch, CommitResult* result = nullptr);

  // Policy versions are immutable: saving an existing (name, version_hash) is
  // a no-op returning false; a new one gets the next sequence of its name
  // (1, 2, ...; the caller's `sequence` is ignored) and returns true.
  // `stored`, when not null, receives the version as stored (the existing one
  // for a no-op). kInvalidArgument for an empty name or version_hash.
  absl::StatusOr<bool> SavePolicyVersion(const v1::PolicyVersion& version,
                                         v1::PolicyVersion* stored = nullptr);
  // Every version, oldest first (by name, then sequence).
  absl::StatusOr<std::vector<v1::PolicyVersion>> ListPolicyVersions();
  // Upserts a change (the whole message) and, when `audit` is not null, an
  // audit row, in one transaction. kInvalidArgument for an empty id.
  absl::Status SaveChange(const v1::Change& change, const v1::AuditEntry* audit);
  // Every change, oldest first (by created_unix_nanos, then id).
  absl::StatusOr<std::vector<v1::Change>> LoadChanges();
  // Same contract as SaveChange.
  absl::Status SaveCampaign(const v1::Campaign& campaign, const v1::AuditEntry* audit);
  // Every campaign, oldest first (by created_unix_nanos, then id).
  absl::StatusOr<std::vector<v1::Campaign>> LoadCampaigns();

  // The step baselines of the changes in CANARY or STAGE (see Batch).
  absl::StatusOr<std::vector<v1::StepBaseline>> LoadStepBaselines();

  // Runs `writes` (calls of this store's write methods, on this thread) in
  // one SQLite transaction: each write method's transaction becomes a
  // savepoint inside it, so a write that fails is rolled back alone and
  // reports its error as it would by itself, and the rest commit together
  // at the end (one WAL commit instead of one per write). Writes from other
  // threads, and their reads (which would see what is not committed yet),
  // wait until the batch ends. The status of BEGIN or COMMIT: when
  // the COMMIT fails nothing of the batch is stored (the caller may run the
  // writes again one by one). Not reentrant.
  absl::Status RunWriteBatch(const std::function<void()>& writes) ABSL_LOCKS_EXCLUDED(mu_);
  // Write transactions committed (a batch counts once), for tests and benchmarks.
  uint64_t commits();
  // Calls on other threads waiting for the open batch to end (tests).
  int batch_waiters();

  // Called with the duration of every write transaction (for /metrics).
  void set_latency_observer(std::function<void(double seconds)> observer);
  // Called with every write transaction that failed (disk full, read-only,
  // I/O error...), after the rollback: the caller's status says the same, but
  // this is the one place every failed write passes (for /metrics and logs).
  void set_error_observer(std::function<void(const absl::Status& error)> observer);

  // Runs raw SQL (tests of migrations).
  absl::Status ExecForTest(const std::string& sql);

 private:
  Store(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  absl::Status Migrate();
  absl::Status Exec(const std::string& sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Data rewrites that SQL alone cannot do, run inside migration `version`'s transaction.
  absl::Status MigrateData(int version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ChainExistingAuditRows() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FoldOldChangeRows() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SaveHostLocked(const StoredHost& host) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ForgetHostLocked(const std::string& host_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int64_t> AppendAuditLocked(const v1::AuditEntry& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<bool> SavePolicyVersionLocked(const v1::PolicyVersion& version,
                                               v1::PolicyVersion* stored)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SaveChangeLocked(const v1::Change& change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SaveCampaignLocked(const v1::Campaign& campaign) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SaveStepBaselineLocked(const v1::StepBaseline& baseline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes the step baseline of a change no longer in CANARY or STAGE.
  absl::Status DropEndedStepBaselineLocked(const v1::Change& change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `body` inside BEGIN IMMEDIATE / COMMIT (ROLLBACK on error).
  absl::Status InTransaction(const std::function<absl::Status()>& body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits while another thread's RunWriteBatch holds the transaction.
  void WaitForOtherBatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The connection's last error as a status (see the class comment), naming
  // the database file and `what`.
  absl::Status Error(const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  // A RunWriteBatch transaction is open, on `batch_thread_`.
  bool batch_open_ ABSL_GUARDED_BY(mu_) = false;
  bool batch_broken_ ABSL_GUARDED_BY(mu_) = false;
  std::thread::id batch_thread_ ABSL_GUARDED_BY(mu_);
  uint64_t commits_ ABSL_GUARDED_BY(mu_) = 0;
  int batch_waiters_ ABSL_GUARDED_BY(mu_) = 0;
  const std::string path_;
  std::function<void(double)> latency_observer_;
  std::function<void(const absl::Status&)> error_observer_;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_STORE_STORE_H_
