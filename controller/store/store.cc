#include "controller/store/store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rocetune::controller {
namespace {

// Migration i (0-based) moves the schema from version i to i + 1. Never edit a
// released migration; append a new one.
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
};
constexpr int kLatest = sizeof(kMigrations) / sizeof(kMigrations[0]);

// RAII prepared statement.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Stmt() { sqlite3_finalize(stmt_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }
  void Text(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void Blob(int i, const std::string& s) {
    sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
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

}  // namespace

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
  std::unique_ptr<Store> store(new Store(db));
  sqlite3_busy_timeout(db, 5000);
  {
    absl::MutexLock lock(&store->mu_);
    for (const char* pragma :
         {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON"}) {
      if (absl::Status s = store->Exec(pragma); !s.ok()) {
        return absl::UnavailableError(absl::StrCat(path, ": ", s.message()));
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
  sqlite3_close(db_);
}

absl::Status Store::Error(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", sqlite3_errmsg(db_)));
}

absl::Status Store::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err != nullptr ? err : "unknown error";
    sqlite3_free(err);
    return absl::InternalError(absl::StrCat("sqlite: ", msg));
  }
  return absl::OkStatus();
}

absl::Status Store::ExecForTest(const std::string& sql) {
  absl::MutexLock lock(&mu_);
  return Exec(sql);
}

absl::Status Store::InTransaction(const std::function<absl::Status()>& body) {
  Timer timer(latency_observer_);
  if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  absl::Status s = body();
  if (s.ok()) s = Exec("COMMIT");
  if (!s.ok()) Exec("ROLLBACK").IgnoreError();
  return s;
}

int Store::schema_version() {
  absl::MutexLock lock(&mu_);
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
  for (int v = current; v < kLatest; ++v) {
    absl::Status s = InTransaction([&]() -> absl::Status {
      if (absl::Status e = Exec(kMigrations[v]); !e.ok()) return e;
      return Exec(absl::StrCat("PRAGMA user_version = ", v + 1));
    });
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("migration to schema ", v + 1, " failed: ", s.message()));
    }
  }
  return absl::OkStatus();
}

void Store::set_latency_observer(std::function<void(double)> observer) {
  absl::MutexLock lock(&mu_);
  latency_observer_ = std::move(observer);
}

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
  if (st.Step() != SQLITE_DONE) return Error("insert host");
  return absl::OkStatus();
}

absl::Status Store::SaveHost(const StoredHost& host) {
  absl::MutexLock lock(&mu_);
  return InTransaction([&] { return SaveHostLocked(host); });
}

absl::Status Store::SaveHostWithAudit(const StoredHost& host, const v1::AuditEntry& audit) {
  absl::MutexLock lock(&mu_);
  return InTransaction([&]() -> absl::Status {
    if (absl::Status s = SaveHostLocked(host); !s.ok()) return s;
    return AppendAuditLocked(audit).status();
  });
}

absl::StatusOr<std::vector<StoredHost>> Store::LoadHosts() {
  absl::MutexLock lock(&mu_);
  Stmt st(db_, "SELECT host_id, desired_seq, info, desired FROM hosts ORDER BY host_id");
  if (!st.ok()) return Error("prepare hosts select");
  std::vector<StoredHost> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    StoredHost h;
    std::string id = st.ColText(0);
    if (!h.info.ParseFromString(st.ColBlob(2)) || !h.desired.ParseFromString(st.ColBlob(3))) {
      return absl::DataLossError(absl::StrCat("hosts row ", id, ": cannot parse"));
    }
    h.info.set_host_id(id);
    h.desired_seq = static_cast<uint64_t>(st.ColInt(1));
    out.push_back(std::move(h));
  }
  if (rc != SQLITE_DONE) return Error("select hosts");
  return out;
}

absl::StatusOr<int64_t> Store::AppendAuditLocked(const v1::AuditEntry& e) {
  Stmt st(db_,
          "INSERT INTO audit (unix_nanos, actor, action, subject, detail) "
          "VALUES (?1, ?2, ?3, ?4, ?5)");
  if (!st.ok()) return Error("prepare audit insert");
  st.Int(1, e.unix_nanos());
  st.Text(2, e.actor());
  st.Text(3, e.action());
  st.Text(4, e.subject());
  st.Text(5, e.detail());
  if (st.Step() != SQLITE_DONE) return Error("insert audit");
  return sqlite3_last_insert_rowid(db_);
}

absl::StatusOr<int64_t> Store::AppendAudit(const v1::AuditEntry& entry) {
  absl::MutexLock lock(&mu_);
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
  if (limit == 0) limit = 100;
  absl::MutexLock lock(&mu_);
  Stmt st(db_,
          "SELECT id, unix_nanos, actor, action, subject, detail FROM audit WHERE id > ?1 "
          "ORDER BY id LIMIT ?2");
  if (!st.ok()) return Error("prepare audit select");
  st.Int(1, after_id);
  st.Int(2, limit);
  std::vector<v1::AuditEntry> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    v1::AuditEntry e;
    e.set_id(st.ColInt(0));
    e.set_unix_nanos(st.ColInt(1));
    e.set_actor(st.ColText(2));
    e.set_action(st.ColText(3));
    e.set_subject(st.ColText(4));
    e.set_detail(st.ColText(5));
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return Error("select audit");
  return out;
}

absl::Status Store::SavePolicyVersion(const v1::PolicyVersion& version) {
  absl::MutexLock lock(&mu_);
  return InTransaction([&]() -> absl::Status {
    Stmt p(db_, "INSERT OR IGNORE INTO policies (name, created_unix_nanos) VALUES (?1, ?2)");
    if (!p.ok()) return Error("prepare policies insert");
    p.Text(1, version.name());
    p.Int(2, version.created_unix_nanos());
    if (p.Step() != SQLITE_DONE) return Error("insert policy");
    Stmt v(db_,
           "INSERT OR IGNORE INTO policy_versions (name, version_hash, created_unix_nanos, body) "
           "VALUES (?1, ?2, ?3, ?4)");
    if (!v.ok()) return Error("prepare policy_versions insert");
    v.Text(1, version.name());
    v.Text(2, version.version_hash());
    v.Int(3, version.created_unix_nanos());
    v.Blob(4, version.SerializeAsString());
    if (v.Step() != SQLITE_DONE) return Error("insert policy version");
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<v1::PolicyVersion>> Store::ListPolicyVersions() {
  absl::MutexLock lock(&mu_);
  Stmt st(db_, "SELECT body FROM policy_versions ORDER BY name, created_unix_nanos");
  if (!st.ok()) return Error("prepare policy_versions select");
  std::vector<v1::PolicyVersion> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    v1::PolicyVersion v;
    if (!v.ParseFromString(st.ColBlob(0))) return absl::DataLossError("policy_versions row");
    out.push_back(std::move(v));
  }
  if (rc != SQLITE_DONE) return Error("select policy versions");
  return out;
}

absl::Status Store::SaveChange(const v1::Change& change, const v1::ChangeTransition* transition,
                               const v1::AuditEntry* audit) {
  absl::MutexLock lock(&mu_);
  return InTransaction([&]() -> absl::Status {
    v1::Change body = change;
    body.clear_transitions();
    Stmt c(db_,
           "INSERT OR REPLACE INTO changes (id, policy_name, policy_version, state, body) "
           "VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!c.ok()) return Error("prepare changes insert");
    c.Text(1, change.id());
    c.Text(2, change.policy_name());
    c.Text(3, change.policy_version());
    c.Int(4, change.state());
    c.Blob(5, body.SerializeAsString());
    if (c.Step() != SQLITE_DONE) return Error("insert change");
    if (transition != nullptr) {
      Stmt t(db_,
             "INSERT INTO change_transitions (change_id, seq, from_state, to_state, unix_nanos, "
             "actor, reason) VALUES (?1, (SELECT COUNT(*) FROM change_transitions WHERE "
             "change_id = ?1), ?2, ?3, ?4, ?5, ?6)");
      if (!t.ok()) return Error("prepare transition insert");
      t.Text(1, change.id());
      t.Int(2, transition->from());
      t.Int(3, transition->to());
      t.Int(4, transition->unix_nanos());
      t.Text(5, transition->actor());
      t.Text(6, transition->reason());
      if (t.Step() != SQLITE_DONE) return Error("insert transition");
    }
    if (audit != nullptr) return AppendAuditLocked(*audit).status();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<v1::Change>> Store::LoadChanges() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Change> out;
  {
    Stmt st(db_, "SELECT body FROM changes ORDER BY id");
    if (!st.ok()) return Error("prepare changes select");
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      v1::Change c;
      if (!c.ParseFromString(st.ColBlob(0))) return absl::DataLossError("changes row");
      out.push_back(std::move(c));
    }
    if (rc != SQLITE_DONE) return Error("select changes");
  }
  for (v1::Change& c : out) {
    Stmt t(db_,
           "SELECT from_state, to_state, unix_nanos, actor, reason FROM change_transitions "
           "WHERE change_id = ?1 ORDER BY seq");
    if (!t.ok()) return Error("prepare transitions select");
    t.Text(1, c.id());
    int rc;
    while ((rc = t.Step()) == SQLITE_ROW) {
      v1::ChangeTransition* tr = c.add_transitions();
      tr->set_from(static_cast<v1::ChangeState>(t.ColInt(0)));
      tr->set_to(static_cast<v1::ChangeState>(t.ColInt(1)));
      tr->set_unix_nanos(t.ColInt(2));
      tr->set_actor(t.ColText(3));
      tr->set_reason(t.ColText(4));
    }
    if (rc != SQLITE_DONE) return Error("select transitions");
  }
  return out;
}

absl::Status Store::AddApproval(const std::string& change_id, const std::string& approver,
                                int64_t unix_nanos) {
  absl::MutexLock lock(&mu_);
  return InTransaction([&]() -> absl::Status {
    Stmt st(db_, "INSERT INTO approvals (change_id, approver, unix_nanos) VALUES (?1, ?2, ?3)");
    if (!st.ok()) return Error("prepare approvals insert");
    st.Text(1, change_id);
    st.Text(2, approver);
    st.Int(3, unix_nanos);
    if (st.Step() != SQLITE_DONE) return Error("insert approval");
    return absl::OkStatus();
  });
}

}  // namespace rocetune::controller
