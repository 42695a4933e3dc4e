#include "controller/store/store.h"

#include <fcntl.h>
#include <google/protobuf/unknown_field_set.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <utility>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "controller/audit/audit_chain.h"

namespace rocetune::controller {
namespace {

// Migration i (0-based) moves the schema from version i to i + 1; Store::MigrateData
// then rewrites what SQL cannot, in the same transaction. Never edit a released
// migration; append a new one.
const char* const kMigrations[] = {
    // 1: initial schema.
    R"sql(
CREATE TABLE hosts (
  host_id TEXT PRIMARY KEY,
  hostname TEXT NOT NULL,
  current_version TEXT NOT NULL,
  desired_version TEXT NOT NULL,
  desired_seq INTEGER NOT NULL,
  info BLOB NOT NULL,
  desired BLOB NOT NULL
);
CREATE TABLE policies (
  name TEXT PRIMARY KEY,
  created_unix_nanos INTEGER NOT NULL
);
CREATE TABLE policy_versions (
  name TEXT NOT NULL REFERENCES policies(name),
  version_hash TEXT NOT NULL,
  created_unix_nanos INTEGER NOT NULL,
  body BLOB NOT NULL,
  PRIMARY KEY (name, version_hash)
);
CREATE TABLE changes (
  id TEXT PRIMARY KEY,
  policy_name TEXT NOT NULL,
  policy_version TEXT NOT NULL,
  state INTEGER NOT NULL,
  body BLOB NOT NULL
);
CREATE TABLE change_transitions (
  change_id TEXT NOT NULL REFERENCES changes(id),
  seq INTEGER NOT NULL,
  from_state INTEGER NOT NULL,
  to_state INTEGER NOT NULL,
  unix_nanos INTEGER NOT NULL,
  actor TEXT NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (change_id, seq)
);
CREATE TABLE approvals (
  change_id TEXT NOT NULL REFERENCES changes(id),
  approver TEXT NOT NULL,
  unix_nanos INTEGER NOT NULL,
  PRIMARY KEY (change_id, approver)
);
CREATE TABLE audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  unix_nanos INTEGER NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  subject TEXT NOT NULL,
  detail TEXT NOT NULL
);
)sql",
    // 2: audit lookups by subject, hosts by desired version.
    R"sql(
CREATE INDEX audit_subject ON audit(subject, id);
CREATE INDEX hosts_desired ON hosts(desired_version);
)sql",
    // 3: the tuning loop. Audit rows carry every AuditEntry field and are
    // hash-chained (`lists` = a serialized AuditEntry holding only host_ids and
    // values; audit_hosts indexes host_ids); existing rows are chained in id
    // order by MigrateData. Policy versions get per-name sequence numbers.
    // Changes are stored whole (transitions and approvals inside; the old side
    // tables are folded in and dropped by MigrateData). Campaigns.
    R"sql(
ALTER TABLE audit ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN authenticated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE audit ADD COLUMN change_id TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN lists BLOB NOT NULL DEFAULT x'';
ALTER TABLE audit ADD COLUMN prev_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN hash TEXT NOT NULL DEFAULT '';
CREATE INDEX audit_change ON audit(change_id, id);
CREATE INDEX audit_time ON audit(unix_nanos);
CREATE TABLE audit_hosts (
  host_id TEXT NOT NULL,
  audit_id INTEGER NOT NULL,
  PRIMARY KEY (host_id, audit_id)
) WITHOUT ROWID;
ALTER TABLE policy_versions ADD COLUMN sequence INTEGER NOT NULL DEFAULT 0;
UPDATE policy_versions SET sequence = (
  SELECT COUNT(*) FROM policy_versions AS p
  WHERE p.name = policy_versions.name AND
        (p.created_unix_nanos < policy_versions.created_unix_nanos OR
         (p.created_unix_nanos = policy_versions.created_unix_nanos AND
          p.rowid <= policy_versions.rowid)));
CREATE UNIQUE INDEX policy_versions_sequence ON policy_versions(name, sequence);
ALTER TABLE changes ADD COLUMN campaign_id TEXT NOT NULL DEFAULT '';
ALTER TABLE changes ADD COLUMN created_unix_nanos INTEGER NOT NULL DEFAULT 0;
CREATE INDEX changes_state ON changes(state);
CREATE INDEX changes_campaign ON changes(campaign_id);
CREATE INDEX changes_created ON changes(created_unix_nanos, id);
CREATE TABLE campaigns (
  id TEXT PRIMARY KEY,
  policy_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  created_unix_nanos INTEGER NOT NULL,
  body BLOB NOT NULL
);
CREATE INDEX campaigns_state ON campaigns(state);
CREATE INDEX campaigns_created ON campaigns(created_unix_nanos, id);
)sql",
    // 4: a change's current step baseline (v1::StepBaseline), kept while the
    // change is in CANARY or STAGE so that a restarted controller resumes the bake.
    R"sql(
CREATE TABLE step_baselines (
  change_id TEXT PRIMARY KEY,
  body BLOB NOT NULL
);
)sql",
};
constexpr int kLatest = sizeof(kMigrations) / sizeof(kMigrations[0]);

constexpr uint32_t kDefaultAuditLimit = 100;
constexpr uint32_t kMaxAuditLimit = 10000;

// Column list of an audit row, in the order ReadAuditRow expects.
constexpr char kAuditColumns[] =
    "a.id, a.unix_nanos, a.actor, a.action, a.subject, a.detail, a.reason, a.authenticated, "
    "a.change_id, a.lists, a.prev_hash, a.hash";

// SQLite's primary result codes and the status code each maps to (see
// Store's class comment); any other failure is kInternal.
struct SqliteCode {
  int rc;
  absl::StatusCode code;
};
constexpr SqliteCode kSqliteCodes[] = {
    {SQLITE_READONLY, absl::StatusCode::kFailedPrecondition},
    {SQLITE_CONSTRAINT, absl::StatusCode::kFailedPrecondition},
    {SQLITE_FULL, absl::StatusCode::kResourceExhausted},
    {SQLITE_BUSY, absl::StatusCode::kUnavailable},
    {SQLITE_LOCKED, absl::StatusCode::kUnavailable},
    {SQLITE_IOERR, absl::StatusCode::kUnavailable},
    {SQLITE_CANTOPEN, absl::StatusCode::kUnavailable},
    {SQLITE_PERM, absl::StatusCode::kUnavailable},
    {SQLITE_CORRUPT, absl::StatusCode::kDataLoss},
    {SQLITE_NOTADB, absl::StatusCode::kDataLoss},
};

absl::StatusCode CodeFor(int rc) {
  for (const SqliteCode& c : kSqliteCodes) {
    if (c.rc == (rc & 0xff)) return c.code;
  }
  return absl::StatusCode::kInternal;
}

// RAII prepared statement.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }
  void Text(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void Blob(int i, const std::string& s) {
    // A zero-length blob binds as x'' (not NULL) through a non-null pointer.
    sqlite3_bind_blob(stmt_, i, s.empty() ? "" : s.data(), static_cast<int>(s.size()),
                      SQLITE_TRANSIENT);
  }
  void Int(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  int Step() { return sqlite3_step(stmt_); }
  std::string ColText(int i) {
    const unsigned char* p = sqlite3_column_text(stmt_, i);
    return p == nullptr
               ? ""
               : std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, i));
  }
  std::string ColBlob(int i) {
    const void* p = sqlite3_column_blob(stmt_, i);
    return p == nullptr ? ""
                        : std::string(static_cast<const char*>(p), sqlite3_column_bytes(stmt_, i));
  }
  int64_t ColInt(int i) { return sqlite3_column_int64(stmt_, i); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

class Timer {
 public:
  explicit Timer(const std::function<void(double)>& obs)
      : obs_(obs), start_(std::chrono::steady_clock::now()) {}
  ~Timer() {
    if (obs_) {
      obs_(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }
  }

 private:
  const std::function<void(double)>& obs_;
  std::chrono::steady_clock::time_point start_;
};

// Reads the row at `st` (columns kAuditColumns). false when the lists blob
// does not parse.
bool ReadAuditRow(Stmt& st, v1::AuditEntry* e) {
  if (!e->ParseFromString(st.ColBlob(9))) return false;
  e->set_id(st.ColInt(0));
  e->set_unix_nanos(st.ColInt(1));
  e->set_actor(st.ColText(2));
  e->set_action(st.ColText(3));
  e->set_subject(st.ColText(4));
  e->set_detail(st.ColText(5));
  e->set_reason(st.ColText(6));
  e->set_authenticated(st.ColInt(7) != 0);
  e->set_change_id(st.ColText(8));
  e->set_prev_hash(st.ColText(10));
  e->set_hash(st.ColText(11));
  return true;
}

// The `lists` column: host_ids and values only.
std::string ListsBlob(const v1::AuditEntry& e) {
  v1::AuditEntry lists;
  *lists.mutable_host_ids() = e.host_ids();
  *lists.mutable_values() = e.values();
  return lists.SerializeAsString();
}

absl::Status ValidateHost(const StoredHost& host) {
  if (host.info.host_id().empty()) return absl::InvalidArgumentError("host without a host_id");
  return absl::OkStatus();
}
absl::Status ValidateChange(const v1::Change& c) {
  if (c.id().empty()) return absl::InvalidArgumentError("change without an id");
  return absl::OkStatus();
}
absl::Status ValidateCampaign(const v1::Campaign& c) {
  if (c.id().empty()) return absl::InvalidArgumentError("campaign without an id");
  return absl::OkStatus();
}
absl::Status ValidatePolicyVersion(const v1::PolicyVersion& v) {
  if (v.name().empty() || v.version_hash().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("policy version needs a name and a hash (name \"", v.name(), "\", hash \"",
                     v.version_hash(), "\")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<absl::StatusCode> StoreErrorCodes() {
  std::vector<absl::StatusCode> codes;
  for (const SqliteCode& c : kSqliteCodes) {
    if (std::find(codes.begin(), codes.end(), c.code) == codes.end()) codes.push_back(c.code);
  }
  codes.push_back(absl::StatusCode::kInternal);
  return codes;
}

int Store::LatestSchemaVersion() { return kLatest; }

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("--state_dir is empty");
  if (mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("cannot create state dir ", dir, ": ", std::strerror(errno)));
  }
  return OpenFile(absl::StrCat(dir, "/controller.db"));
}

absl::StatusOr<std::unique_ptr<Store>> Store::OpenFile(const std::string& path) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", msg));
  }
  std::unique_ptr<Store> store(new Store(db, path));
  sqlite3_busy_timeout(db, 5000);
  {
    absl::MutexLock lock(&store->mu_);
    for (const char* pragma :
         {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON"}) {
      if (absl::Status s = store->Exec(pragma); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
      }
    }
  }
  if (absl::Status s = store->Migrate(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  return store;
}

Store::~Store() {
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  sqlite3_close(db_);
}

namespace {

// " (the state dir <dir> is read-only: ...)" when `db_path`'s directory
// refuses writes with EROFS, else "". SQLite reports a write refused by a
// filesystem that went read-only under an open database as an I/O error (or
// "readonly database"). The mount flags may not show it (after an ext4 error
// they still say "rw"), so this tries to create a file there.
std::string ReadOnlyCause(const std::string& db_path) {
  const size_t slash = db_path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : db_path.substr(0, slash);
  bool read_only = false;
  if (struct statvfs st; statvfs(dir.c_str(), &st) == 0 && (st.f_flag & ST_RDONLY) != 0) {
    read_only = true;
  } else {
    const std::string probe = absl::StrCat(dir, "/.write-probe");
    const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      close(fd);
      unlink(probe.c_str());
    } else {
      read_only = errno == EROFS;
    }
  }
  if (!read_only) return "";
  return absl::StrCat(" (the state dir ", dir, " is read-only: ", std::strerror(EROFS), ")");
}

constexpr char kReadOnlyMark[] = " is read-only: ";

}  // namespace

absl::Status Store::Error(const std::string& what) {
  return absl::Status(
      CodeFor(sqlite3_extended_errcode(db_)),
      absl::StrCat(path_, ": ", what, ": ", sqlite3_errmsg(db_), ReadOnlyCause(path_)));
}

absl::Status Store::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return absl::Status(CodeFor(rc), absl::StrCat("sqlite: ", msg));
  }
  return absl::OkStatus();
}

absl::Status Store::ExecForTest(const std::string& sql) {
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  return Exec(sql);
}

void Store::WaitForOtherBatchLocked() {
  // A batch holds the connection's one transaction: another thread neither
  // writes into it nor reads what it has not committed.
  if (batch_open_ && batch_thread_ != std::this_thread::get_id()) {
    ++batch_waiters_;
    mu_.Await(absl::Condition(
        +[](bool* open) { return !*open; }, &batch_open_));
    --batch_waiters_;
  }
}

int Store::batch_waiters() {
  absl::MutexLock lock(&mu_);
  return batch_waiters_;
}

absl::Status Store::RunWriteBatch(const std::function<void()>& writes) {
  std::optional<Timer> timer;
  {
    absl::MutexLock lock(&mu_);
    const std::thread::id self = std::this_thread::get_id();
    if (batch_open_ && batch_thread_ == self) {
      return absl::FailedPreconditionError("RunWriteBatch: a batch is already open on this thread");
    }
    WaitForOtherBatchLocked();
    timer.emplace(latency_observer_);
    if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) {
      s = absl::Status(s.code(),
                       absl::StrCat(path_, ": cannot start a write transaction: ", s.message()));
      if (error_observer_) error_observer_(s);
      return s;
    }
    batch_open_ = true;
    batch_thread_ = self;
  }
  writes();
  absl::MutexLock lock(&mu_);
  batch_open_ = false;
  if (batch_broken_ || sqlite3_get_autocommit(db_) != 0) {
    // The failing write reported itself; the caller runs the batch again.
    batch_broken_ = false;
    return absl::UnavailableError(absl::StrCat(
        path_, ": a write batch's transaction was rolled back; nothing of it is stored"));
  }
  absl::Status s = Exec("COMMIT");
  if (s.ok()) {
    ++commits_;
    return s;
  }
  Exec("ROLLBACK").IgnoreError();
  // Not reported to the error observer: the caller runs the writes again,
  // one by one, and those report what still fails.
  return absl::Status(s.code(), absl::StrCat(path_, ": commit of a write batch: ", s.message()));
}

uint64_t Store::commits() {
  absl::MutexLock lock(&mu_);
  return commits_;
}

absl::Status Store::InTransaction(const std::function<absl::Status()>& body) {
  WaitForOtherBatchLocked();
  if (batch_open_) {
    // Inside this thread's batch: a savepoint, so this write fails alone.
    if (batch_broken_) {
      // The batch's transaction was rolled back under it (SQLite does so on
      // some errors, e.g. a full disk): writing now would commit this write
      // on its own while the batch's earlier ones are gone. Nothing is
      // written; the batch reports the failure and its writes run again.
      return absl::UnavailableError(
          absl::StrCat(path_, ": the write batch's transaction was rolled back"));
    }
    if (absl::Status s = Exec("SAVEPOINT w"); !s.ok()) {
      if (error_observer_) error_observer_(s);
      return s;
    }
    absl::Status s = body();
    if (s.ok()) s = Exec("RELEASE w");
    if (!s.ok()) {
      Exec("ROLLBACK TO w").IgnoreError();
      Exec("RELEASE w").IgnoreError();
    }
    if (sqlite3_get_autocommit(db_) != 0) batch_broken_ = true;
    if (!s.ok() && error_observer_ && s.code() != absl::StatusCode::kInvalidArgument &&
        s.code() != absl::StatusCode::kNotFound) {
      error_observer_(s);
    }
    return s;
  }
  Timer timer(latency_observer_);
  if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) {
    s = absl::Status(s.code(),
                     absl::StrCat(path_, ": cannot start a write transaction: ", s.message()));
    if (error_observer_) error_observer_(s);
    return s;
  }
  absl::Status s = body();
  if (s.ok()) {
    s = Exec("COMMIT");
    if (!s.ok()) s = absl::Status(s.code(), absl::StrCat(path_, ": commit: ", s.message()));
    if (s.ok()) ++commits_;
  }
  // SQLite may already have rolled back (e.g. on SQLITE_FULL); then this is a no-op error.
  if (!s.ok()) Exec("ROLLBACK").IgnoreError();
  if (!s.ok() && !absl::StrContains(s.message(), kReadOnlyMark) &&
      s.code() != absl::StatusCode::kInvalidArgument && s.code() != absl::StatusCode::kNotFound) {
    if (std::string cause = ReadOnlyCause(path_); !cause.empty()) {
      s = absl::Status(s.code(), absl::StrCat(s.message(), cause));
    }
  }
  // Refused input (an empty id, an unknown row) is the caller's error, not the store's.
  if (!s.ok() && error_observer_ && s.code() != absl::StatusCode::kInvalidArgument &&
      s.code() != absl::StatusCode::kNotFound) {
    error_observer_(s);
  }
  return s;
}

int Store::schema_version() {
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  Stmt st(db_, "PRAGMA user_version");
  return st.ok() && st.Step() == SQLITE_ROW ? static_cast<int>(st.ColInt(0)) : -1;
}

absl::Status Store::Migrate() {
  int current = schema_version();
  if (current < 0) return absl::InternalError("cannot read the schema version");
  if (current > kLatest) {
    return absl::FailedPreconditionError(absl::StrCat("schema version ", current,
                                                      " is newer than this controller's (", kLatest,
                                                      "); refusing to touch it"));
  }
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  for (int v = current; v < kLatest; ++v) {
    absl::Status s = InTransaction([&]() -> absl::Status {
      if (absl::Status e = Exec(kMigrations[v]); !e.ok()) return e;
      if (absl::Status e = MigrateData(v + 1); !e.ok()) return e;
      return Exec(absl::StrCat("PRAGMA user_version = ", v + 1));
    });
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("migration to schema ", v + 1, " failed: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status Store::MigrateData(int version) {
  if (version != 3) return absl::OkStatus();
  if (absl::Status s = FoldOldChangeRows(); !s.ok()) return s;
  return ChainExistingAuditRows();
}

// Schema 3: rows written before the chain existed get prev_hash and hash in
// id order. A subject naming a stored host becomes the row's host_ids (the
// old schema found a host's rows by subject).
absl::Status Store::ChainExistingAuditRows() {
  std::set<std::string> hosts;
  {
    Stmt st(db_, "SELECT host_id FROM hosts");
    if (!st.ok()) return Error("prepare hosts select");
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) hosts.insert(st.ColText(0));
    if (rc != SQLITE_DONE) return Error("select hosts");
  }
  Stmt read(db_, "SELECT id, unix_nanos, actor, action, subject, detail FROM audit ORDER BY id");
  Stmt update(db_, "UPDATE audit SET lists = ?2, prev_hash = ?3, hash = ?4 WHERE id = ?1");
  Stmt host(db_, "INSERT OR IGNORE INTO audit_hosts (host_id, audit_id) VALUES (?1, ?2)");
  if (!read.ok() || !update.ok() || !host.ok()) return Error("prepare audit chaining");
  std::string prev;
  int rc;
  while ((rc = read.Step()) == SQLITE_ROW) {
    v1::AuditEntry e;
    e.set_id(read.ColInt(0));
    e.set_unix_nanos(read.ColInt(1));
    e.set_actor(read.ColText(2));
    e.set_action(read.ColText(3));
    e.set_subject(read.ColText(4));
    e.set_detail(read.ColText(5));
    if (hosts.count(e.subject()) != 0) e.add_host_ids(e.subject());
    e.set_prev_hash(prev);
    e.set_hash(AuditRowHash(e));
    sqlite3_reset(update.get());
    update.Int(1, e.id());
    update.Blob(2, ListsBlob(e));
    update.Text(3, e.prev_hash());
    update.Text(4, e.hash());
    if (update.Step() != SQLITE_DONE) return Error(absl::StrCat("chain audit row ", e.id()));
    for (const std::string& h : e.host_ids()) {
      sqlite3_reset(host.get());
      host.Text(1, h);
      host.Int(2, e.id());
      if (host.Step() != SQLITE_DONE) return Error(absl::StrCat("index audit row ", e.id()));
    }
    prev = e.hash();
  }
  if (rc != SQLITE_DONE) return Error("read audit rows to chain");
  return absl::OkStatus();
}

// Schema 3: a change body no longer holds `approvers` (field 7, strings) and
// `verdict` (field 10, a string): these become Approval and Verdict messages
// under the same numbers. Transitions and approvals move from their side
// tables into the body; the side tables are dropped.
absl::Status Store::FoldOldChangeRows() {
  struct Row {
    std::string id;
    v1::Change change;
  };
  std::vector<Row> rows;
  {
    Stmt st(db_, "SELECT id, body FROM changes ORDER BY id");
    if (!st.ok()) return Error("prepare changes select");
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      Row row;
      row.id = st.ColText(0);
      google::protobuf::UnknownFieldSet old;
      if (!old.ParseFromString(st.ColBlob(1))) {
        return absl::DataLossError(absl::StrCat("changes row ", row.id, ": cannot parse"));
      }
      google::protobuf::UnknownFieldSet kept;
      std::vector<std::string> approvers;
      std::string verdict;
      for (int i = 0; i < old.field_count(); ++i) {
        const google::protobuf::UnknownField& f = old.field(i);
        bool text = f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED;
        if (f.number() == 7 && text) {
          approvers.push_back(f.length_delimited());
        } else if (f.number() == 10 && text) {
          verdict = f.length_delimited();
        } else {
          kept.AddField(f);
        }
      }
      std::string bytes;
      if (!kept.SerializeToString(&bytes) || !row.change.ParseFromString(bytes)) {
        return absl::DataLossError(absl::StrCat("changes row ", row.id, ": cannot parse"));
      }
      row.change.set_id(row.id);
      for (const std::string& a : approvers) row.change.add_approvals()->set_approver(a);
      if (!verdict.empty()) row.change.add_verdicts()->set_summary(verdict);
      rows.push_back(std::move(row));
    }
    if (rc != SQLITE_DONE) return Error("select changes");
  }
  for (Row& row : rows) {
    v1::Change& c = row.change;
    Stmt a(db_, "SELECT approver, unix_nanos FROM approvals WHERE change_id = ?1");
    if (!a.ok()) return Error("prepare approvals select");
    a.Text(1, row.id);
    int rc;
    while ((rc = a.Step()) == SQLITE_ROW) {
      std::string approver = a.ColText(0);
      v1::Approval* found = nullptr;
      for (v1::Approval& existing : *c.mutable_approvals()) {
        if (existing.approver() == approver) found = &existing;
      }
      if (found == nullptr) {
        found = c.add_approvals();
        found->set_approver(approver);
      }
      found->set_unix_nanos(a.ColInt(1));
    }
    if (rc != SQLITE_DONE) return Error("select approvals");
    Stmt t(db_,
           "SELECT from_state, to_state, unix_nanos, actor, reason FROM change_transitions "
           "WHERE change_id = ?1 ORDER BY seq");
    if (!t.ok()) return Error("prepare transitions select");
    t.Text(1, row.id);
    while ((rc = t.Step()) == SQLITE_ROW) {
      v1::ChangeTransition* tr = c.add_transitions();
      tr->set_from(static_cast<v1::ChangeState>(t.ColInt(0)));
      tr->set_to(static_cast<v1::ChangeState>(t.ColInt(1)));
      tr->set_unix_nanos(t.ColInt(2));
      tr->set_actor(t.ColText(3));
      tr->set_reason(t.ColText(4));
    }
    if (rc != SQLITE_DONE) return Error("select transitions");
    if (c.created_unix_nanos() == 0 && c.transitions_size() > 0) {
      c.set_created_unix_nanos(c.transitions(0).unix_nanos());
    }
    if (absl::Status s = SaveChangeLocked(c); !s.ok()) return s;
  }
  return Exec("DROP TABLE change_transitions; DROP TABLE approvals;");
}

void Store::set_latency_observer(std::function<void(double)> observer) {
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  latency_observer_ = std::move(observer);
}

void Store::set_error_observer(std::function<void(const absl::Status&)> observer) {
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  error_observer_ = std::move(observer);
}

// ---- hosts

absl::Status Store::SaveHostLocked(const StoredHost& host) {
  Stmt st(db_,
          "INSERT OR REPLACE INTO hosts (host_id, hostname, current_version, desired_version, "
          "desired_seq, info, desired) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!st.ok()) return Error("prepare hosts insert");
  v1::HostInfo info = host.info;
  // Live fields are not durable.
  info.clear_state();
  info.clear_reports();
  info.clear_connected_unix_nanos();
  st.Text(1, info.host_id());
  st.Text(2, info.hostname());
  st.Text(3, info.current_version());
  st.Text(4, info.desired_version());
  st.Int(5, static_cast<int64_t>(host.desired_seq));
  st.Blob(6, info.SerializeAsString());
  st.Blob(7, host.desired.SerializeAsString());
  if (st.Step() != SQLITE_DONE) return Error(absl::StrCat("save host ", info.host_id()));
  return absl::OkStatus();
}

absl::Status Store::ForgetHostLocked(const std::string& host_id) {
  Stmt st(db_, "DELETE FROM hosts WHERE host_id = ?1");
  if (!st.ok()) return Error("prepare hosts delete");
  st.Text(1, host_id);
  if (st.Step() != SQLITE_DONE) return Error(absl::StrCat("forget host ", host_id));
  return absl::OkStatus();
}

absl::Status Store::SaveHost(const StoredHost& host) {
  if (absl::Status s = ValidateHost(host); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  return InTransaction([&] { return SaveHostLocked(host); });
}

absl::Status Store::SaveHostWithAudit(const StoredHost& host, const v1::AuditEntry& audit) {
  if (absl::Status s = ValidateHost(host); !s.ok()) return s;
  v1::AuditEntry entry = audit;
  bool listed = false;
  for (const std::string& h : entry.host_ids()) listed = listed || h == host.info.host_id();
  if (!listed) entry.add_host_ids(host.info.host_id());
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  return InTransaction([&]() -> absl::Status {
    if (absl::Status s = SaveHostLocked(host); !s.ok()) return s;
    return AppendAuditLocked(entry).status();
  });
}

absl::StatusOr<std::vector<StoredHost>> Store::LoadHosts() {
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  Stmt st(db_, "SELECT host_id, desired_seq, info, desired FROM hosts ORDER BY host_id");
  if (!st.ok()) return Error("prepare hosts select");
  std::vector<StoredHost> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    StoredHost h;
    std::string id = st.ColText(0);
    if (!h.info.ParseFromString(st.ColBlob(2)) || !h.desired.ParseFromString(st.ColBlob(3))) {
      return absl::DataLossError(absl::StrCat(path_, ": hosts row ", id, ": cannot parse"));
    }
    h.info.set_host_id(id);
    h.desired_seq = static_cast<uint64_t>(st.ColInt(1));
    out.push_back(std::move(h));
  }
  if (rc != SQLITE_DONE) return Error("select hosts");
  return out;
}

// ---- audit

absl::StatusOr<int64_t> Store::AppendAuditLocked(const v1::AuditEntry& entry) {
  v1::AuditEntry e = entry;
  {
    Stmt last(db_, "SELECT hash FROM audit ORDER BY id DESC LIMIT 1");
    if (!last.ok()) return Error("prepare audit chain head select");
    int rc = last.Step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("read the audit chain head");
    e.set_prev_hash(rc == SQLITE_ROW ? last.ColText(0) : "");
  }
  {
    // Ids are never reused: deleting the newest rows leaves a gap that VerifyAudit reports.
    Stmt next(db_,
              "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'audit'), 0), "
              "COALESCE((SELECT MAX(id) FROM audit), 0)) + 1");
    if (!next.ok()) return Error("prepare audit id select");
    if (next.Step() != SQLITE_ROW) return Error("read the next audit id");
    e.set_id(next.ColInt(0));
  }
  e.set_hash(AuditRowHash(e));
  Stmt st(db_,
          "INSERT INTO audit (id, unix_nanos, actor, action, subject, detail, reason, "
          "authenticated, change_id, lists, prev_hash, hash) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
  if (!st.ok()) return Error("prepare audit insert");
  st.Int(1, e.id());
  st.Int(2, e.unix_nanos());
  st.Text(3, e.actor());
  st.Text(4, e.action());
  st.Text(5, e.subject());
  st.Text(6, e.detail());
  st.Text(7, e.reason());
  st.Int(8, e.authenticated() ? 1 : 0);
  st.Text(9, e.change_id());
  st.Blob(10, ListsBlob(e));
  st.Text(11, e.prev_hash());
  st.Text(12, e.hash());
  if (st.Step() != SQLITE_DONE) return Error(absl::StrCat("append audit row ", e.id()));
  Stmt h(db_, "INSERT OR IGNORE INTO audit_hosts (host_id, audit_id) VALUES (?1, ?2)");
  if (!h.ok()) return Error("prepare audit_hosts insert");
  for (const std::string& host_id : e.host_ids()) {
    sqlite3_reset(h.get());
    h.Text(1, host_id);
    h.Int(2, e.id());
    if (h.Step() != SQLITE_DONE) return Error(absl::StrCat("index audit row ", e.id()));
  }
  return e.id();
}

absl::StatusOr<int64_t> Store::AppendAudit(const v1::AuditEntry& entry) {
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  int64_t id = 0;
  absl::Status s = InTransaction([&]() -> absl::Status {
    absl::StatusOr<int64_t> r = AppendAuditLocked(entry);
    if (!r.ok()) return r.status();
    id = *r;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return id;
}

absl::StatusOr<std::vector<v1::AuditEntry>> Store::ListAudit(int64_t after_id, uint32_t limit) {
  v1::ListAuditRequest req;
  req.set_after_id(after_id);
  req.set_limit(limit);
  absl::StatusOr<v1::ListAuditResponse> r = QueryAudit(req);
  if (!r.ok()) return r.status();
  return std::vector<v1::AuditEntry>(r->entries().begin(), r->entries().end());
}

absl::StatusOr<v1::ListAuditResponse> Store::QueryAudit(const v1::ListAuditRequest& req) {
  uint32_t limit = req.limit() == 0 ? kDefaultAuditLimit : req.limit();
  if (limit > kMaxAuditLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("audit limit ", req.limit(), " is above the maximum of ", kMaxAuditLimit));
  }
  if (req.after_id() < 0 || req.before_id() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("audit after_id ", req.after_id(),
                                                   " and before_id ", req.before_id(),
                                                   " must not be negative"));
  }
  // With a host filter the rows come from the (host_id, audit_id) index.
  const bool by_host = !req.host_id().empty();
  const std::string id_col = by_host ? "h.audit_id" : "a.id";
  std::string sql = absl::StrCat(
      "SELECT ", kAuditColumns, " FROM ",
      by_host ? "audit_hosts AS h JOIN audit AS a ON a.id = h.audit_id" : "audit AS a", " WHERE 1");
  std::vector<std::variant<int64_t, std::string>> args;
  auto where = [&](const std::string& cond, std::variant<int64_t, std::string> arg) {
    args.push_back(std::move(arg));
    absl::StrAppend(&sql, " AND ", cond, " ?", args.size());
  };
  if (by_host) where("h.host_id =", req.host_id());
  if (req.after_id() > 0) where(id_col + " >", req.after_id());
  if (req.before_id() > 0) where(id_col + " <", req.before_id());
  if (!req.change_id().empty()) where("a.change_id =", req.change_id());
  if (req.since_unix_nanos() != 0) where("a.unix_nanos >=", req.since_unix_nanos());
  // One row more than asked tells whether another page exists.
  absl::StrAppend(&sql, " ORDER BY ", id_col, req.newest_first() ? " DESC" : " ASC", " LIMIT ",
                  limit + 1);

  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  Stmt st(db_, sql.c_str());
  if (!st.ok()) return Error("prepare audit query");
  for (size_t i = 0; i < args.size(); ++i) {
    int index = static_cast<int>(i + 1);
    if (const int64_t* v = std::get_if<int64_t>(&args[i])) {
      st.Int(index, *v);
    } else {
      st.Text(index, std::get<std::string>(args[i]));
    }
  }
  v1::ListAuditResponse out;
  int rc;
  bool more = false;
  while ((rc = st.Step()) == SQLITE_ROW) {
    if (static_cast<uint32_t>(out.entries_size()) == limit) {
      more = true;
      break;
    }
    v1::AuditEntry* e = out.add_entries();
    if (!ReadAuditRow(st, e)) {
      return absl::DataLossError(
          absl::StrCat(path_, ": audit row ", st.ColInt(0), ": host_ids/values do not parse"));
    }
  }
  if (!more && rc != SQLITE_DONE) return Error("query audit");
  if (more && req.newest_first()) out.set_next_before_id(out.entries().rbegin()->id());
  return out;
}

absl::StatusOr<v1::VerifyAuditResponse> Store::VerifyAudit() {
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  Stmt find(db_, "SELECT id FROM audit WHERE hash = ?1 ORDER BY id LIMIT 1");
  if (!find.ok()) return Error("prepare audit hash lookup");
  AuditChainVerifier verifier([&](const std::string& hash) -> int64_t {
    sqlite3_reset(find.get());
    find.Text(1, hash);
    return find.Step() == SQLITE_ROW ? find.ColInt(0) : 0;
  });
  Stmt st(db_, absl::StrCat("SELECT ", kAuditColumns, " FROM audit AS a ORDER BY a.id").c_str());
  if (!st.ok()) return Error("prepare audit walk");
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    v1::AuditEntry e;
    if (ReadAuditRow(st, &e)) {
      verifier.Add(e);
    } else {
      verifier.AddUnreadable(st.ColInt(0), "its host_ids/values blob does not parse");
    }
  }
  if (rc != SQLITE_DONE) return Error("walk the audit log");
  Stmt seq(db_, "SELECT seq FROM sqlite_sequence WHERE name = 'audit'");
  if (!seq.ok()) return Error("prepare audit sequence select");
  rc = seq.Step();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("read the audit sequence");
  verifier.Finish(rc == SQLITE_ROW ? seq.ColInt(0) : 0);
  return verifier.result();
}

// ---- policy versions

absl::StatusOr<bool> Store::SavePolicyVersionLocked(const v1::PolicyVersion& version,
                                                    v1::PolicyVersion* stored) {
  {
    Stmt existing(db_,
                  "SELECT body, sequence FROM policy_versions WHERE name = ?1 AND "
                  "version_hash = ?2");
    if (!existing.ok()) return Error("prepare policy version lookup");
    existing.Text(1, version.name());
    existing.Text(2, version.version_hash());
    int rc = existing.Step();
    if (rc == SQLITE_ROW) {
      if (stored != nullptr) {
        if (!stored->ParseFromString(existing.ColBlob(0))) {
          return absl::DataLossError(absl::StrCat(path_, ": policy version ", version.name(), "@",
                                                  version.version_hash(), ": cannot parse"));
        }
        stored->set_sequence(static_cast<uint32_t>(existing.ColInt(1)));
      }
      return false;
    }
    if (rc != SQLITE_DONE) return Error("look up policy version");
  }
  Stmt p(db_, "INSERT OR IGNORE INTO policies (name, created_unix_nanos) VALUES (?1, ?2)");
  if (!p.ok()) return Error("prepare policies insert");
  p.Text(1, version.name());
  p.Int(2, version.created_unix_nanos());
  if (p.Step() != SQLITE_DONE) return Error(absl::StrCat("save policy ", version.name()));
  v1::PolicyVersion v = version;
  {
    Stmt seq(db_, "SELECT COALESCE(MAX(sequence), 0) + 1 FROM policy_versions WHERE name = ?1");
    if (!seq.ok()) return Error("prepare policy sequence select");
    seq.Text(1, version.name());
    if (seq.Step() != SQLITE_ROW) return Error("read the next policy sequence");
    v.set_sequence(static_cast<uint32_t>(seq.ColInt(0)));
  }
  Stmt ins(db_,
           "INSERT INTO policy_versions (name, version_hash, created_unix_nanos, body, sequence) "
           "VALUES (?1, ?2, ?3, ?4, ?5)");
  if (!ins.ok()) return Error("prepare policy_versions insert");
  ins.Text(1, v.name());
  ins.Text(2, v.version_hash());
  ins.Int(3, v.created_unix_nanos());
  ins.Blob(4, v.SerializeAsString());
  ins.Int(5, v.sequence());
  if (ins.Step() != SQLITE_DONE) {
    return Error(absl::StrCat("save policy version ", v.name(), "@", v.version_hash()));
  }
  if (stored != nullptr) *stored = std::move(v);
  return true;
}

absl::StatusOr<bool> Store::SavePolicyVersion(const v1::PolicyVersion& version,
                                              v1::PolicyVersion* stored) {
  if (absl::Status s = ValidatePolicyVersion(version); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  bool created = false;
  v1::PolicyVersion out;
  absl::Status s = InTransaction([&]() -> absl::Status {
    absl::StatusOr<bool> r = SavePolicyVersionLocked(version, &out);
    if (!r.ok()) return r.status();
    created = *r;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (stored != nullptr) *stored = std::move(out);
  return created;
}

absl::StatusOr<std::vector<v1::PolicyVersion>> Store::ListPolicyVersions() {
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  Stmt st(db_,
          "SELECT name, version_hash, sequence, body FROM policy_versions "
          "ORDER BY name, sequence");
  if (!st.ok()) return Error("prepare policy_versions select");
  std::vector<v1::PolicyVersion> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    v1::PolicyVersion v;
    if (!v.ParseFromString(st.ColBlob(3))) {
      return absl::DataLossError(absl::StrCat(path_, ": policy version ", st.ColText(0), "@",
                                              st.ColText(1), ": cannot parse"));
    }
    v.set_sequence(static_cast<uint32_t>(st.ColInt(2)));
    out.push_back(std::move(v));
  }
  if (rc != SQLITE_DONE) return Error("select policy versions");
  return out;
}

// ---- changes and campaigns

absl::Status Store::SaveChangeLocked(const v1::Change& change) {
  Stmt c(db_,
         "INSERT OR REPLACE INTO changes (id, policy_name, policy_version, state, body, "
         "campaign_id, created_unix_nanos) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!c.ok()) return Error("prepare changes insert");
  c.Text(1, change.id());
  c.Text(2, change.policy_name());
  c.Text(3, change.policy_version());
  c.Int(4, change.state());
  c.Blob(5, change.SerializeAsString());
  c.Text(6, change.campaign_id());
  c.Int(7, change.created_unix_nanos());
  if (c.Step() != SQLITE_DONE) return Error(absl::StrCat("save change ", change.id()));
  return absl::OkStatus();
}

absl::Status Store::DropEndedStepBaselineLocked(const v1::Change& change) {
  if (change.state() == v1::CANARY || change.state() == v1::STAGE) return absl::OkStatus();
  Stmt d(db_, "DELETE FROM step_baselines WHERE change_id = ?1");
  if (!d.ok()) return Error("prepare step_baselines delete");
  d.Text(1, change.id());
  if (d.Step() != SQLITE_DONE) return Error(absl::StrCat("drop step baseline ", change.id()));
  return absl::OkStatus();
}

absl::Status Store::SaveStepBaselineLocked(const v1::StepBaseline& baseline) {
  Stmt st(db_, "INSERT OR REPLACE INTO step_baselines (change_id, body) VALUES (?1, ?2)");
  if (!st.ok()) return Error("prepare step_baselines insert");
  st.Text(1, baseline.change_id());
  st.Blob(2, baseline.SerializeAsString());
  if (st.Step() != SQLITE_DONE) {
    return Error(absl::StrCat("save step baseline ", baseline.change_id()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::StepBaseline>> Store::LoadStepBaselines() {
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  Stmt st(db_, "SELECT change_id, body FROM step_baselines ORDER BY change_id");
  if (!st.ok()) return Error("prepare step_baselines select");
  std::vector<v1::StepBaseline> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    v1::StepBaseline b;
    if (!b.ParseFromString(st.ColBlob(1)) || b.change_id() != st.ColText(0)) {
      return absl::DataLossError(
          absl::StrCat(path_, ": step baseline of change ", st.ColText(0), ": cannot parse"));
    }
    out.push_back(std::move(b));
  }
  if (rc != SQLITE_DONE) return Error("select step_baselines");
  return out;
}

absl::Status Store::SaveChange(const v1::Change& change, const v1::AuditEntry* audit) {
  if (absl::Status s = ValidateChange(change); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  return InTransaction([&]() -> absl::Status {
    if (absl::Status s = SaveChangeLocked(change); !s.ok()) return s;
    if (absl::Status s = DropEndedStepBaselineLocked(change); !s.ok()) return s;
    if (audit != nullptr) return AppendAuditLocked(*audit).status();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<v1::Change>> Store::LoadChanges() {
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  Stmt st(db_, "SELECT id, body FROM changes ORDER BY created_unix_nanos, id");
  if (!st.ok()) return Error("prepare changes select");
  std::vector<v1::Change> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    v1::Change c;
    if (!c.ParseFromString(st.ColBlob(1))) {
      return absl::DataLossError(absl::StrCat(path_, ": change ", st.ColText(0), ": cannot parse"));
    }
    out.push_back(std::move(c));
  }
  if (rc != SQLITE_DONE) return Error("select changes");
  return out;
}

absl::Status Store::SaveCampaignLocked(const v1::Campaign& campaign) {
  Stmt c(db_,
         "INSERT OR REPLACE INTO campaigns (id, policy_name, state, created_unix_nanos, body) "
         "VALUES (?1, ?2, ?3, ?4, ?5)");
  if (!c.ok()) return Error("prepare campaigns insert");
  c.Text(1, campaign.id());
  c.Text(2, campaign.policy_name());
  c.Int(3, campaign.state());
  c.Int(4, campaign.created_unix_nanos());
  c.Blob(5, campaign.SerializeAsString());
  if (c.Step() != SQLITE_DONE) return Error(absl::StrCat("save campaign ", campaign.id()));
  return absl::OkStatus();
}

absl::Status Store::SaveCampaign(const v1::Campaign& campaign, const v1::AuditEntry* audit) {
  if (absl::Status s = ValidateCampaign(campaign); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  return InTransaction([&]() -> absl::Status {
    if (absl::Status s = SaveCampaignLocked(campaign); !s.ok()) return s;
    if (audit != nullptr) return AppendAuditLocked(*audit).status();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<v1::Campaign>> Store::LoadCampaigns() {
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  Stmt st(db_, "SELECT id, body FROM campaigns ORDER BY created_unix_nanos, id");
  if (!st.ok()) return Error("prepare campaigns select");
  std::vector<v1::Campaign> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    v1::Campaign c;
    if (!c.ParseFromString(st.ColBlob(1))) {
      return absl::DataLossError(
          absl::StrCat(path_, ": campaign ", st.ColText(0), ": cannot parse"));
    }
    out.push_back(std::move(c));
  }
  if (rc != SQLITE_DONE) return Error("select campaigns");
  return out;
}

// ---- batch

absl::Status Store::Commit(const Batch& batch, CommitResult* result) {
  for (const StoredHost& h : batch.hosts) {
    if (absl::Status s = ValidateHost(h); !s.ok()) return s;
  }
  for (const v1::Change& c : batch.changes) {
    if (absl::Status s = ValidateChange(c); !s.ok()) return s;
  }
  for (const v1::Campaign& c : batch.campaigns) {
    if (absl::Status s = ValidateCampaign(c); !s.ok()) return s;
  }
  for (const v1::PolicyVersion& v : batch.policy_versions) {
    if (absl::Status s = ValidatePolicyVersion(v); !s.ok()) return s;
  }
  for (const v1::StepBaseline& b : batch.step_baselines) {
    if (b.change_id().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": a step baseline without change id"));
    }
  }
  CommitResult out;
  absl::MutexLock lock(&mu_);
  WaitForOtherBatchLocked();
  absl::Status s = InTransaction([&]() -> absl::Status {
    for (const v1::PolicyVersion& v : batch.policy_versions) {
      v1::PolicyVersion stored;
      absl::StatusOr<bool> created = SavePolicyVersionLocked(v, &stored);
      if (!created.ok()) return created.status();
      out.policy_versions.push_back(std::move(stored));
      out.policy_version_created.push_back(*created);
    }
    for (const StoredHost& h : batch.hosts) {
      if (absl::Status e = SaveHostLocked(h); !e.ok()) return e;
    }
    for (const std::string& id : batch.forget_hosts) {
      if (absl::Status e = ForgetHostLocked(id); !e.ok()) return e;
    }
    for (const v1::Campaign& c : batch.campaigns) {
      if (absl::Status e = SaveCampaignLocked(c); !e.ok()) return e;
    }
    for (const v1::Change& c : batch.changes) {
      if (absl::Status e = SaveChangeLocked(c); !e.ok()) return e;
      if (absl::Status e = DropEndedStepBaselineLocked(c); !e.ok()) return e;
    }
    for (const v1::StepBaseline& b : batch.step_baselines) {
      if (absl::Status e = SaveStepBaselineLocked(b); !e.ok()) return e;
    }
    for (const v1::AuditEntry& a : batch.audit) {
      absl::StatusOr<int64_t> id = AppendAuditLocked(a);
      if (!id.ok()) return id.status();
      out.audit_ids.push_back(*id);
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (result != nullptr) *result = std::move(out);
  return absl::OkStatus();
}

}  // namespace rocetune::controller
