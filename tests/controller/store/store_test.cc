#include "controller/store/store.h"

#include <sqlite3.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "controller/audit/audit_chain.h"
#include "controller/control_loop.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/controller_test_util.h"

namespace rocetune::controller {
namespace {

using ::rocetune::controller::testing::MakeTempDir;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Store> OpenStore(const std::string& name) {
    path_ = dir_ + "/" + name;
    auto store = Store::OpenFile(path_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  std::string dir_;
  std::string path_;
};

// Runs SQL on a database file through a connection of its own (outside the Store).
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  std::string msg = err != nullptr ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << msg << "\nin: " << sql;
}

// The first column of the first row of `sql`, as an integer (-1 on error).
int64_t RawInt(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  int64_t out = -1;
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      out = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

v1::AuditEntry Audit(const std::string& action, std::vector<std::string> hosts = {},
                     const std::string& change_id = "", int64_t unix_nanos = 0) {
  v1::AuditEntry e;
  e.set_unix_nanos(unix_nanos);
  e.set_actor("alice");
  e.set_action(action);
  e.set_subject(change_id.empty() ? (hosts.empty() ? "" : hosts[0]) : change_id);
  e.set_reason("why " + action);
  e.set_authenticated(true);
  e.set_change_id(change_id);
  for (const std::string& h : hosts) {
    e.add_host_ids(h);
    v1::ValueChange* v = e.add_values();
    v->set_host_id(h);
    v->set_device("mlx5_0");
    v->set_parameter("rpg_ai_rate");
    v->set_old_value("5");
    v->set_new_value("8");
  }
  return e;
}

std::vector<int64_t> Ids(const v1::ListAuditResponse& r) {
  std::vector<int64_t> ids;
  for (const v1::AuditEntry& e : r.entries()) ids.push_back(e.id());
  return ids;
}

StoredHost Host(const std::string& id, uint64_t seq) {
  StoredHost h;
  h.info.set_host_id(id);
  h.info.set_hostname(id + ".example");
  h.info.set_desired_version(std::to_string(seq));
  h.desired_seq = seq;
  (*h.desired.add_devices()->mutable_dcqcn())["rpg_ai_rate"] = static_cast<int64_t>(seq);
  return h;
}

v1::Change MakeChange(const std::string& id, int64_t created) {
  v1::Change c;
  c.set_id(id);
  c.set_policy_name("p");
  c.set_policy_version("abc");
  c.set_state(v1::PROPOSED);
  c.set_created_unix_nanos(created);
  (*c.mutable_knobs())["rpg_ai_rate"] = 8;
  c.set_reason("test");
  return c;
}

v1::Campaign MakeCampaign(const std::string& id, int64_t created) {
  v1::Campaign c;
  c.set_id(id);
  c.set_policy_name("p");
  c.set_state(v1::Campaign::PROPOSED);
  c.set_trial_budget(4);
  c.set_created_unix_nanos(created);
  return c;
}

v1::PolicyVersion Policy(const std::string& name, const std::string& hash) {
  v1::PolicyVersion v;
  v.set_name(name);
  v.set_version_hash(hash);
  v.set_created_unix_nanos(1);
  v.set_created_by("alice");
  v.set_source_text("name: \"" + name + "\"");
  return v;
}

// Issue 25 item 6: a batch is one transaction whose writes each fail alone;
// another thread's write waits for the batch to end.
TEST_F(StoreTest, AWriteBatchCommitsOnceEachWriteFailsAloneAndOthersWait) {
  auto store = OpenStore("batch.db");
  ASSERT_NE(store, nullptr);
  const uint64_t before = store->commits();
  std::atomic<bool> other_done{false};
  std::thread other;
  absl::Status batch = store->RunWriteBatch([&] {
    EXPECT_TRUE(store->SaveHost(Host("h1", 1)).ok());
    EXPECT_EQ(store->SaveHost(Host("", 1)).code(), absl::StatusCode::kInvalidArgument);
    v1::AuditEntry e;
    e.set_action("ack");
    EXPECT_TRUE(store->AppendAudit(e).ok());
    // A write from another thread meanwhile waits for the batch.
    other = std::thread([&] {
      EXPECT_TRUE(store->SaveHost(Host("h2", 1)).ok());
      other_done = true;
    });
    // Either it waits for the batch (right) or it writes inside it (wrong).
    ASSERT_TRUE(::rocetune::testing::Eventually(
        [&] { return store->batch_waiters() == 1 || other_done.load(); }));
    EXPECT_FALSE(other_done.load()) << "another thread wrote inside the batch";
    EXPECT_TRUE(store->SaveHost(Host("h3", 1)).ok());
  });
  other.join();
  ASSERT_TRUE(batch.ok()) << batch;
  EXPECT_TRUE(other_done.load());
  EXPECT_EQ(store->commits() - before, 2u) << "the batch once, the other thread's write once";
  auto hosts = store->LoadHosts();
  ASSERT_TRUE(hosts.ok());
  std::set<std::string> ids;
  for (const StoredHost& h : *hosts) ids.insert(h.info.host_id());
  EXPECT_EQ(ids, (std::set<std::string>{"h1", "h2", "h3"}));
  auto rows = store->ListAudit(0, 10);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 1u);
  // Not reentrant.
  absl::Status nested = store->RunWriteBatch([&] {
    EXPECT_EQ(store->RunWriteBatch([] {}).code(), absl::StatusCode::kFailedPrecondition);
  });
  EXPECT_TRUE(nested.ok()) << nested;
}

// When SQLite rolls the batch's transaction back under it (here a trigger's
// RAISE(ROLLBACK); a full disk does the same), nothing of the batch is
// stored, later writes in it write nothing, and the batch says so; the
// control loop then runs its writes one by one, and each lands once.
TEST_F(StoreTest, ABatchRolledBackUnderItStoresNothingAndItsWritesRunAgainOnce) {
  auto store = OpenStore("broken.db");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(
      store
          ->ExecForTest("CREATE TRIGGER refuse_h9 BEFORE INSERT ON hosts "
                        "WHEN NEW.host_id = 'h9' BEGIN SELECT RAISE(ROLLBACK, 'h9 refused'); END")
          .ok());
  absl::Status batch = store->RunWriteBatch([&] {
    EXPECT_TRUE(store->SaveHost(Host("h1", 1)).ok());
    EXPECT_FALSE(store->SaveHost(Host("h9", 1)).ok());
    EXPECT_EQ(store->SaveHost(Host("h3", 1)).code(), absl::StatusCode::kUnavailable);
  });
  EXPECT_EQ(batch.code(), absl::StatusCode::kUnavailable) << batch;
  auto hosts = store->LoadHosts();
  ASSERT_TRUE(hosts.ok());
  EXPECT_TRUE(hosts->empty()) << "h1 was rolled back with the batch";
  // The store is usable after it.
  ControlLoop loop(store.get());
  absl::Notification release, running;
  ASSERT_TRUE(loop.Post([&] {
    running.Notify();
    release.WaitForNotification();
  }));
  running.WaitForNotification();
  for (const char* id : {"h1", "h9", "h3"}) {
    loop.Write([s = store.get(), id] { (void)s->SaveHost(Host(id, 1)); });
    v1::AuditEntry e;
    e.set_action(absl::StrCat("saved ", id));
    loop.Audit(e, "test");
  }
  release.Notify();
  loop.RunSync([] {});
  hosts = store->LoadHosts();
  ASSERT_TRUE(hosts.ok());
  std::set<std::string> ids;
  for (const StoredHost& h : *hosts) ids.insert(h.info.host_id());
  EXPECT_EQ(ids, (std::set<std::string>{"h1", "h3"}));
  auto rows = store->ListAudit(0, 100);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 3u) << "each audit row once";
  EXPECT_EQ((*rows)[0].action(), "saved h1");
  EXPECT_EQ((*rows)[2].action(), "saved h3");
  auto chain = store->VerifyAudit();
  ASSERT_TRUE(chain.ok());
  EXPECT_TRUE(chain->ok()) << chain->problem();
  loop.Stop();
}

TEST_F(StoreTest, FreshDatabaseGetsLatestSchemaInWalMode) {
  auto store = Store::Open(dir_ + "/state");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->schema_version(), Store::LatestSchemaVersion());
  EXPECT_EQ(Store::LatestSchemaVersion(), 4);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/state/controller.db"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/state/controller.db-wal"));
}

TEST_F(StoreTest, RefusesNewerSchema) {
  std::string path = dir_ + "/new.db";
  { ASSERT_TRUE(Store::OpenFile(path).ok()); }
  RawExec(path, "PRAGMA user_version = 99;");
  auto store = Store::OpenFile(path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("newer"));
}

// ---- migration from the schema before the audit chain

// Schemas 1 and 2 as released (the store's migrations 1 and 2).
constexpr char kSchemaV1[] = R"sql(
CREATE TABLE hosts (host_id TEXT PRIMARY KEY, hostname TEXT NOT NULL,
  current_version TEXT NOT NULL, desired_version TEXT NOT NULL, desired_seq INTEGER NOT NULL,
  info BLOB NOT NULL, desired BLOB NOT NULL);
CREATE TABLE policies (name TEXT PRIMARY KEY, created_unix_nanos INTEGER NOT NULL);
CREATE TABLE policy_versions (name TEXT NOT NULL REFERENCES policies(name),
  version_hash TEXT NOT NULL, created_unix_nanos INTEGER NOT NULL, body BLOB NOT NULL,
  PRIMARY KEY (name, version_hash));
CREATE TABLE changes (id TEXT PRIMARY KEY, policy_name TEXT NOT NULL,
  policy_version TEXT NOT NULL, state INTEGER NOT NULL, body BLOB NOT NULL);
CREATE TABLE change_transitions (change_id TEXT NOT NULL REFERENCES changes(id),
  seq INTEGER NOT NULL, from_state INTEGER NOT NULL, to_state INTEGER NOT NULL,
  unix_nanos INTEGER NOT NULL, actor TEXT NOT NULL, reason TEXT NOT NULL,
  PRIMARY KEY (change_id, seq));
CREATE TABLE approvals (change_id TEXT NOT NULL REFERENCES changes(id),
  approver TEXT NOT NULL, unix_nanos INTEGER NOT NULL, PRIMARY KEY (change_id, approver));
CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, unix_nanos INTEGER NOT NULL,
  actor TEXT NOT NULL, action TEXT NOT NULL, subject TEXT NOT NULL, detail TEXT NOT NULL);
PRAGMA user_version = 1;
)sql";
constexpr char kSchemaV2[] = R"sql(
CREATE INDEX audit_subject ON audit(subject, id);
CREATE INDEX hosts_desired ON hosts(desired_version);
PRAGMA user_version = 2;
)sql";

// Old rows: three audit rows (two about stored host h1), a host, two
// versions of one policy, a change with its side-table transitions and
// approval and the old `approvers`/`verdict` string fields in its body.
void FillOldDatabase(const std::string& path) {
  StoredHost h = Host("h1", 2);
  v1::HostInfo info = h.info;
  // The old change body: today's fields 1-6 and 8 have the same encoding;
  // fields 7 (approvers) and 10 (verdict) were strings.
  v1::Change c;
  c.set_id("c1");
  c.set_policy_name("p");
  c.set_policy_version("abc");
  c.set_state(v1::APPROVED);
  c.set_proposer("bob");
  (*c.mutable_knobs())["rpg_ai_rate"] = 8;
  std::string body = c.SerializeAsString();
  body += std::string("\x3a\x05", 2) + "carol";         // approvers: "carol"
  body += std::string("\x52\x0c", 2) + "canary: pass";  // verdict
  auto hex = [](const std::string& s) {
    static const char* d = "0123456789abcdef";
    std::string out;
    for (unsigned char ch : s) {
      out.push_back(d[ch >> 4]);
      out.push_back(d[ch & 15]);
    }
    return out;
  };
  v1::PolicyVersion p1 = Policy("p", "abc");
  p1.set_created_unix_nanos(10);
  v1::PolicyVersion p2 = Policy("p", "def");
  p2.set_created_unix_nanos(20);
  RawExec(path, std::string(kSchemaV1) + kSchemaV2);
  RawExec(path, "INSERT INTO hosts VALUES ('h1', 'h1.example', '', '2', 2, x'" +
                    hex(info.SerializeAsString()) + "', x'" + hex(h.desired.SerializeAsString()) +
                    "');"
                    "INSERT INTO audit (unix_nanos, actor, action, subject, detail) VALUES "
                    "(100, 'op', 'set_desired_state', 'h1', 'version=1'),"
                    "(200, 'op', 'approve', 'c1', ''),"
                    "(300, 'op', 'set_desired_state', 'h1', 'version=2');"
                    "INSERT INTO policies VALUES ('p', 10);"
                    "INSERT INTO policy_versions VALUES ('p', 'def', 20, x'" +
                    hex(p2.SerializeAsString()) +
                    "'),"
                    "('p', 'abc', 10, x'" +
                    hex(p1.SerializeAsString()) +
                    "');"
                    "INSERT INTO changes VALUES ('c1', 'p', 'abc', 2, x'" +
                    hex(body) +
                    "');"
                    "INSERT INTO change_transitions VALUES ('c1', 0, 0, 1, 50, 'bob', 'propose'),"
                    "('c1', 1, 1, 2, 60, 'carol', 'looks fine');"
                    "INSERT INTO approvals VALUES ('c1', 'carol', 60);");
}

TEST_F(StoreTest, MigratesSchemaTwoDatabaseChainingOldAuditRowsInIdOrder) {
  std::string path = dir_ + "/old.db";
  FillOldDatabase(path);
  auto opened = Store::OpenFile(path);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  EXPECT_EQ(store.schema_version(), 4);

  // Old rows kept, chained in id order, with valid hashes.
  auto audit = store.ListAudit(0, 10);
  ASSERT_TRUE(audit.ok()) << audit.status();
  ASSERT_EQ(audit->size(), 3u);
  std::string prev;
  for (const v1::AuditEntry& e : *audit) {
    EXPECT_EQ(e.prev_hash(), prev) << e.id();
    EXPECT_EQ(e.hash().size(), 64u);
    EXPECT_EQ(e.hash(), AuditRowHash(e)) << e.id();
    prev = e.hash();
  }
  EXPECT_EQ((*audit)[0].detail(), "version=1");
  EXPECT_EQ((*audit)[2].unix_nanos(), 300);
  auto verify = store.VerifyAudit();
  ASSERT_TRUE(verify.ok());
  EXPECT_TRUE(verify->ok()) << verify->problem();
  EXPECT_EQ(verify->rows(), 3);

  // A subject naming a stored host became host_ids: filtering by host finds it.
  v1::ListAuditRequest by_host;
  by_host.set_host_id("h1");
  EXPECT_THAT(Ids(*store.QueryAudit(by_host)), ElementsAre(1, 3));
  EXPECT_THAT((*audit)[0].host_ids(), ElementsAre("h1"));
  EXPECT_EQ((*audit)[1].host_ids_size(), 0);

  // New rows continue the chain.
  auto id = store.AppendAudit(Audit("after"));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 4);
  EXPECT_TRUE(store.VerifyAudit()->ok());

  // Policy versions numbered per name in creation order.
  auto versions = store.ListPolicyVersions();
  ASSERT_TRUE(versions.ok());
  ASSERT_EQ(versions->size(), 2u);
  EXPECT_EQ((*versions)[0].version_hash(), "abc");
  EXPECT_EQ((*versions)[0].sequence(), 1u);
  EXPECT_EQ((*versions)[1].version_hash(), "def");
  EXPECT_EQ((*versions)[1].sequence(), 2u);

  // The change was folded whole: side tables in, old string fields converted.
  auto changes = store.LoadChanges();
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 1u);
  const v1::Change& c = (*changes)[0];
  EXPECT_EQ(c.id(), "c1");
  EXPECT_EQ(c.state(), v1::APPROVED);
  EXPECT_EQ(c.proposer(), "bob");
  EXPECT_EQ(c.knobs().at("rpg_ai_rate"), 8);
  ASSERT_EQ(c.approvals_size(), 1);
  EXPECT_EQ(c.approvals(0).approver(), "carol");
  EXPECT_EQ(c.approvals(0).unix_nanos(), 60);
  ASSERT_EQ(c.transitions_size(), 2);
  EXPECT_EQ(c.transitions(1).to(), v1::APPROVED);
  EXPECT_EQ(c.transitions(1).reason(), "looks fine");
  ASSERT_EQ(c.verdicts_size(), 1);
  EXPECT_EQ(c.verdicts(0).summary(), "canary: pass");
  EXPECT_EQ(c.created_unix_nanos(), 50);
  // The side tables are gone.
  EXPECT_FALSE(store.ExecForTest("SELECT * FROM approvals").ok());
  EXPECT_FALSE(store.ExecForTest("SELECT * FROM change_transitions").ok());

  // Hosts untouched.
  auto hosts = store.LoadHosts();
  ASSERT_TRUE(hosts.ok());
  ASSERT_EQ(hosts->size(), 1u);
  EXPECT_EQ((*hosts)[0].desired_seq, 2u);
}

TEST_F(StoreTest, MigratesSchemaOneDatabase) {
  std::string path = dir_ + "/v1.db";
  RawExec(path, std::string(kSchemaV1) +
                    "INSERT INTO audit (unix_nanos, actor, action, subject, detail) VALUES "
                    "(1, 'a', 'x', 's', 'd'), (2, 'b', 'y', 's', 'd');");
  auto store = Store::OpenFile(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->schema_version(), 4);
  EXPECT_TRUE((*store)->VerifyAudit()->ok());
  EXPECT_EQ((*store)->VerifyAudit()->rows(), 2);
  // Migration 2's index exists.
  EXPECT_FALSE((*store)->ExecForTest("CREATE INDEX audit_subject ON audit(subject)").ok());
}

TEST_F(StoreTest, FailedMigrationLeavesTheOldSchema) {
  std::string path = dir_ + "/bad.db";
  RawExec(path, std::string(kSchemaV1) + kSchemaV2 +
                    "INSERT INTO changes VALUES ('c1', 'p', 'abc', 1, x'ff');");
  auto store = Store::OpenFile(path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("migration to schema 3"));
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("changes row c1"));
  EXPECT_EQ(RawInt(path, "PRAGMA user_version"), 2);
  EXPECT_EQ(RawInt(path, "SELECT COUNT(*) FROM approvals"), 0);  // side table not dropped
}

// ---- hosts

TEST_F(StoreTest, HostsRoundTripAndDesiredStateWithAuditIsOneTransaction) {
  auto store = OpenStore("h.db");
  ASSERT_NE(store, nullptr);
  StoredHost h = Host("h1", 3);
  (*h.info.mutable_labels())["rack"] = "r1";
  h.info.set_state(v1::HOST_CONNECTED);  // live field: not persisted
  v1::AuditEntry audit;
  audit.set_action("set_desired_state");
  audit.set_subject("h1");
  ASSERT_TRUE(store->SaveHostWithAudit(h, audit).ok());
  auto hosts = store->LoadHosts();
  ASSERT_TRUE(hosts.ok());
  ASSERT_EQ(hosts->size(), 1u);
  EXPECT_EQ((*hosts)[0].info.labels().at("rack"), "r1");
  EXPECT_EQ((*hosts)[0].info.state(), v1::HOST_STATE_UNSPECIFIED);
  EXPECT_EQ((*hosts)[0].desired_seq, 3u);
  EXPECT_EQ((*hosts)[0].desired.devices(0).dcqcn().at("rpg_ai_rate"), 3);
  auto rows = store->ListAudit(0, 0);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  // The host is listed on its audit row, once.
  EXPECT_THAT((*rows)[0].host_ids(), ElementsAre("h1"));
  audit.add_host_ids("h1");
  ASSERT_TRUE(store->SaveHostWithAudit(h, audit).ok());
  EXPECT_THAT((*store->ListAudit(1, 0))[0].host_ids(), ElementsAre("h1"));

  // A failing audit insert rolls the host update back too.
  ASSERT_TRUE(store->ExecForTest("DROP TABLE audit").ok());
  h.desired_seq = 4;
  EXPECT_FALSE(store->SaveHostWithAudit(h, audit).ok());
  EXPECT_EQ((*store->LoadHosts())[0].desired_seq, 3u);
}

TEST_F(StoreTest, HostWithoutIdIsRejected) {
  auto store = OpenStore("h.db");
  ASSERT_NE(store, nullptr);
  StoredHost h = Host("", 1);
  EXPECT_EQ(store->SaveHost(h).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->SaveHostWithAudit(h, Audit("x")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store->LoadHosts()->empty());
  EXPECT_TRUE(store->ListAudit(0, 0)->empty());
}

// ---- the audit chain

class AuditChainStoreTest : public StoreTest {
 protected:
  // Five chained rows, ids 1..5.
  void SetUp() override {
    StoreTest::SetUp();
    store_ = OpenStore("audit.db");
    ASSERT_NE(store_, nullptr);
    for (int i = 1; i <= 5; ++i) {
      auto id = store_->AppendAudit(
          Audit(absl::StrCat("a", i), {absl::StrCat("h", i)}, absl::StrCat("c-", i % 2), i * 100));
      ASSERT_TRUE(id.ok()) << id.status();
      ASSERT_EQ(*id, i);
    }
  }
  v1::VerifyAuditResponse Verify() {
    auto r = store_->VerifyAudit();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::VerifyAuditResponse();
  }
  std::unique_ptr<Store> store_;
};

TEST_F(AuditChainStoreTest, AppendedRowsAreChainedAndVerify) {
  v1::VerifyAuditResponse r = Verify();
  EXPECT_TRUE(r.ok()) << r.problem();
  EXPECT_EQ(r.rows(), 5);
  EXPECT_EQ(r.first_bad_id(), 0);
  auto rows = store_->ListAudit(0, 0);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 5u);
  EXPECT_EQ((*rows)[0].prev_hash(), "");
  for (size_t i = 0; i < rows->size(); ++i) {
    const v1::AuditEntry& e = (*rows)[i];
    EXPECT_EQ(e.hash(), AuditRowHash(e));
    if (i > 0) {
      EXPECT_EQ(e.prev_hash(), (*rows)[i - 1].hash());
    }
  }
  // Every field round-trips.
  const v1::AuditEntry& e = (*rows)[2];
  EXPECT_EQ(e.actor(), "alice");
  EXPECT_EQ(e.action(), "a3");
  EXPECT_EQ(e.reason(), "why a3");
  EXPECT_TRUE(e.authenticated());
  EXPECT_EQ(e.change_id(), "c-1");
  EXPECT_EQ(e.unix_nanos(), 300);
  EXPECT_THAT(e.host_ids(), ElementsAre("h3"));
  ASSERT_EQ(e.values_size(), 1);
  EXPECT_EQ(e.values(0).new_value(), "8");
}

TEST_F(AuditChainStoreTest, CallerIdAndHashesAreIgnored) {
  v1::AuditEntry e = Audit("forged");
  e.set_id(77);
  e.set_prev_hash("00");
  e.set_hash("11");
  auto id = store_->AppendAudit(e);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 6);
  EXPECT_TRUE(Verify().ok());
}

TEST_F(AuditChainStoreTest, EditedFieldIsFound) {
  RawExec(path_, "UPDATE audit SET reason = 'edited' WHERE id = 3");
  v1::VerifyAuditResponse r = Verify();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 3);
  EXPECT_EQ(r.rows(), 5);
  EXPECT_THAT(r.problem(), HasSubstr("row 3 was modified"));
}

TEST_F(AuditChainStoreTest, EditedHostListIsFound) {
  v1::AuditEntry lists;
  lists.add_host_ids("h9");
  std::string blob = lists.SerializeAsString();
  std::string hex;
  for (unsigned char ch : blob) {
    hex.push_back("0123456789abcdef"[ch >> 4]);
    hex.push_back("0123456789abcdef"[ch & 15]);
  }
  RawExec(path_, "UPDATE audit SET lists = x'" + hex + "' WHERE id = 2");
  v1::VerifyAuditResponse r = Verify();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 2);
  EXPECT_THAT(r.problem(), HasSubstr("row 2 was modified"));
}

TEST_F(AuditChainStoreTest, GarbledBlobIsFound) {
  RawExec(path_, "UPDATE audit SET lists = x'ff' WHERE id = 4");
  v1::VerifyAuditResponse r = Verify();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 4);
  EXPECT_THAT(r.problem(), HasSubstr("row 4 cannot be decoded"));
  // Listing names the row instead of returning garbage.
  auto list = store_->ListAudit(0, 0);
  EXPECT_EQ(list.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(list.status().message()), HasSubstr("audit row 4"));
}

TEST_F(AuditChainStoreTest, DeletedRowIsFound) {
  RawExec(path_, "DELETE FROM audit WHERE id = 3");
  v1::VerifyAuditResponse r = Verify();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 3);
  EXPECT_EQ(r.rows(), 4);
  EXPECT_THAT(r.problem(), HasSubstr("row 3 is missing (deleted)"));
}

TEST_F(AuditChainStoreTest, DeletedLastRowIsFoundEvenAfterMoreAppends) {
  RawExec(path_, "DELETE FROM audit WHERE id = 5");
  v1::VerifyAuditResponse r = Verify();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 5);
  EXPECT_THAT(r.problem(), HasSubstr("row 5 is missing (deleted) after the last row 4"));
  // The id is not reused: the gap stays visible.
  auto id = store_->AppendAudit(Audit("later"));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 6);
  r = Verify();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 5);
}

TEST_F(AuditChainStoreTest, EmptiedLogIsFound) {
  RawExec(path_, "DELETE FROM audit");
  v1::VerifyAuditResponse r = Verify();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.rows(), 0);
  EXPECT_EQ(r.first_bad_id(), 1);
  EXPECT_THAT(r.problem(), HasSubstr("rows 1..5 are missing"));
}

TEST_F(AuditChainStoreTest, SwappedRowsAreFound) {
  // Swap every column but the id between rows 2 and 4.
  RawExec(path_,
          "CREATE TEMP TABLE t AS SELECT * FROM audit WHERE id IN (2, 4);"
          "UPDATE audit SET (unix_nanos, actor, action, subject, detail, reason, authenticated, "
          "change_id, lists, prev_hash, hash) = (SELECT unix_nanos, actor, action, subject, "
          "detail, reason, authenticated, change_id, lists, prev_hash, hash FROM t "
          "WHERE t.id = 6 - audit.id) WHERE id IN (2, 4);");
  ASSERT_EQ((*store_->ListAudit(1, 1))[0].action(), "a4");
  v1::VerifyAuditResponse r = Verify();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 2);
  EXPECT_THAT(r.problem(), HasSubstr("reordered"));
  EXPECT_THAT(r.problem(), HasSubstr("chained after row 3"));
}

TEST_F(AuditChainStoreTest, RewrittenHashIsCaughtAtTheNextRow) {
  // Editing a row and recomputing its hash moves the break to the next link.
  auto rows = store_->ListAudit(0, 0);
  ASSERT_TRUE(rows.ok());
  v1::AuditEntry e = (*rows)[2];
  e.set_detail("edited");
  RawExec(path_,
          "UPDATE audit SET detail = 'edited', hash = '" + AuditRowHash(e) + "' WHERE id = 3");
  v1::VerifyAuditResponse r = Verify();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 4);
  EXPECT_THAT(r.problem(), HasSubstr("does not match row 3's hash"));
}

// ---- audit queries

class AuditQueryTest : public StoreTest {
 protected:
  // id  time  hosts      change
  //  1   100  h1         c-1
  //  2   200  h10        c-1
  //  3   300  h1, h2     c-2
  //  4   400  -          c-2
  //  5   500  h2         -
  //  6   600  h1         c-1
  void SetUp() override {
    StoreTest::SetUp();
    store_ = OpenStore("q.db");
    ASSERT_NE(store_, nullptr);
    std::vector<v1::AuditEntry> rows = {
        Audit("a", {"h1"}, "c-1", 100),       Audit("b", {"h10"}, "c-1", 200),
        Audit("c", {"h1", "h2"}, "c-2", 300), Audit("d", {}, "c-2", 400),
        Audit("e", {"h2"}, "", 500),          Audit("f", {"h1"}, "c-1", 600),
    };
    for (const v1::AuditEntry& e : rows) ASSERT_TRUE(store_->AppendAudit(e).ok());
  }
  v1::ListAuditResponse Query(const v1::ListAuditRequest& req) {
    auto r = store_->QueryAudit(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::ListAuditResponse();
  }
  std::unique_ptr<Store> store_;
};

TEST_F(AuditQueryTest, DefaultIsOldestFirstEverything) {
  v1::ListAuditResponse r = Query({});
  EXPECT_THAT(Ids(r), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(r.next_before_id(), 0);
}

TEST_F(AuditQueryTest, HostFilterIsExact) {
  v1::ListAuditRequest req;
  req.set_host_id("h1");
  EXPECT_THAT(Ids(Query(req)), ElementsAre(1, 3, 6));  // not h10's row 2
  req.set_host_id("h");
  EXPECT_TRUE(Query(req).entries().empty());
  req.set_host_id("h2");
  EXPECT_THAT(Ids(Query(req)), ElementsAre(3, 5));
}

TEST_F(AuditQueryTest, ChangeAndTimeFilters) {
  v1::ListAuditRequest req;
  req.set_change_id("c-2");
  EXPECT_THAT(Ids(Query(req)), ElementsAre(3, 4));
  req.clear_change_id();
  req.set_since_unix_nanos(400);
  EXPECT_THAT(Ids(Query(req)), ElementsAre(4, 5, 6));
  req.set_change_id("c-1");
  EXPECT_THAT(Ids(Query(req)), ElementsAre(6));
  req.set_host_id("h1");
  req.set_since_unix_nanos(0);
  EXPECT_THAT(Ids(Query(req)), ElementsAre(1, 6));
}

TEST_F(AuditQueryTest, OldestFirstPagingWithAfterId) {
  v1::ListAuditRequest req;
  req.set_limit(4);
  EXPECT_THAT(Ids(Query(req)), ElementsAre(1, 2, 3, 4));
  req.set_after_id(4);
  EXPECT_THAT(Ids(Query(req)), ElementsAre(5, 6));
  req.set_after_id(6);
  EXPECT_TRUE(Query(req).entries().empty());
  auto listed = store_->ListAudit(2, 2);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].id(), 3);
}

TEST_F(AuditQueryTest, NewestFirstPagingWithBeforeId) {
  v1::ListAuditRequest req;
  req.set_newest_first(true);
  req.set_limit(2);
  std::vector<int64_t> seen;
  std::vector<int64_t> cursors;
  for (int page = 0; page < 10; ++page) {
    v1::ListAuditResponse r = Query(req);
    for (int64_t id : Ids(r)) seen.push_back(id);
    cursors.push_back(r.next_before_id());
    if (r.next_before_id() == 0) break;
    req.set_before_id(r.next_before_id());
  }
  EXPECT_THAT(seen, ElementsAre(6, 5, 4, 3, 2, 1));
  // Six rows in pages of two: the third page is the last (no empty fourth page).
  EXPECT_THAT(cursors, ElementsAre(5, 3, 0));
}

TEST_F(AuditQueryTest, NewestFirstPagingWithHostFilter) {
  v1::ListAuditRequest req;
  req.set_newest_first(true);
  req.set_host_id("h1");
  req.set_limit(2);
  v1::ListAuditResponse r = Query(req);
  EXPECT_THAT(Ids(r), ElementsAre(6, 3));
  EXPECT_EQ(r.next_before_id(), 3);
  req.set_before_id(3);
  r = Query(req);
  EXPECT_THAT(Ids(r), ElementsAre(1));
  EXPECT_EQ(r.next_before_id(), 0);
}

TEST_F(AuditQueryTest, LimitBounds) {
  v1::ListAuditRequest req;
  req.set_limit(10001);
  auto r = store_->QueryAudit(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("10000"));
  EXPECT_EQ(store_->ListAudit(0, 10001).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_limit(10000);
  EXPECT_EQ(Query(req).entries_size(), 6);
  req.set_limit(0);
  req.set_before_id(-1);
  EXPECT_EQ(store_->QueryAudit(req).status().code(), absl::StatusCode::kInvalidArgument);

  // limit 0 means 100.
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(store_->AppendAudit(Audit("bulk")).ok());
  EXPECT_EQ(Query({}).entries_size(), 100);
  v1::ListAuditRequest newest;
  newest.set_newest_first(true);
  v1::ListAuditResponse page = Query(newest);
  EXPECT_EQ(page.entries_size(), 100);
  EXPECT_EQ(page.entries(0).id(), 106);
  EXPECT_EQ(page.next_before_id(), 7);
}

// ---- policy versions, changes, campaigns

TEST_F(StoreTest, PolicyVersionsAreImmutableAndNumberedPerName) {
  auto store = OpenStore("p.db");
  ASSERT_NE(store, nullptr);
  v1::PolicyVersion stored;
  auto created = store->SavePolicyVersion(Policy("p", "abc"), &stored);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(*created);
  EXPECT_EQ(stored.sequence(), 1u);

  // Same (name, hash): no-op, reports the stored version, even if the rest differs.
  v1::PolicyVersion again = Policy("p", "abc");
  again.set_created_by("mallory");
  again.set_sequence(9);
  created = store->SavePolicyVersion(again, &stored);
  ASSERT_TRUE(created.ok());
  EXPECT_FALSE(*created);
  EXPECT_EQ(stored.sequence(), 1u);
  EXPECT_EQ(stored.created_by(), "alice");

  created = store->SavePolicyVersion(Policy("p", "def"), &stored);
  ASSERT_TRUE(created.ok());
  EXPECT_TRUE(*created);
  EXPECT_EQ(stored.sequence(), 2u);
  ASSERT_TRUE(store->SavePolicyVersion(Policy("q", "abc")).ok());

  auto all = store->ListPolicyVersions();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  std::vector<std::string> listed;
  for (const v1::PolicyVersion& v : *all) {
    listed.push_back(v.name() + "@" + v.version_hash() + "#" + std::to_string(v.sequence()));
  }
  EXPECT_THAT(listed, ElementsAre("p@abc#1", "p@def#2", "q@abc#1"));
  EXPECT_EQ((*all)[0].source_text(), "name: \"p\"");
  EXPECT_EQ((*all)[0].created_by(), "alice");

  EXPECT_EQ(store->SavePolicyVersion(Policy("", "x")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->SavePolicyVersion(Policy("p", "")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->ListPolicyVersions()->size(), 3u);
}

TEST_F(StoreTest, ChangesAreStoredWholeAndReplaced) {
  auto store = OpenStore("c.db");
  ASSERT_NE(store, nullptr);
  v1::Change c = MakeChange("c-2", 20);
  ASSERT_TRUE(store->SaveChange(c, nullptr).ok());
  ASSERT_TRUE(store->SaveChange(MakeChange("c-10", 10), nullptr).ok());

  c.set_state(v1::APPROVED);
  v1::Approval* a = c.add_approvals();
  a->set_approver("carol");
  a->set_authenticated(true);
  v1::ChangeTransition* t = c.add_transitions();
  t->set_from(v1::PROPOSED);
  t->set_to(v1::APPROVED);
  t->set_actor("carol");
  v1::Verdict* v = c.add_verdicts();
  v->set_outcome(v1::Verdict::PASS);
  v->add_metrics()->set_metric("ln_p99_did");
  v1::HostTarget* ht = c.add_hosts();
  ht->set_host_id("h1");
  ht->set_role(v1::HostTarget::CANARY);
  v1::AuditEntry audit = Audit("approve", {}, "c-2");
  ASSERT_TRUE(store->SaveChange(c, &audit).ok());

  auto changes = store->LoadChanges();
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 2u);
  EXPECT_EQ((*changes)[0].id(), "c-10");  // oldest first by creation time
  const v1::Change& got = (*changes)[1];
  EXPECT_EQ(got.state(), v1::APPROVED);
  ASSERT_EQ(got.approvals_size(), 1);
  EXPECT_TRUE(got.approvals(0).authenticated());
  ASSERT_EQ(got.transitions_size(), 1);
  EXPECT_EQ(got.verdicts(0).metrics(0).metric(), "ln_p99_did");
  EXPECT_EQ(got.hosts(0).role(), v1::HostTarget::CANARY);
  EXPECT_EQ(got.knobs().at("rpg_ai_rate"), 8);

  v1::ListAuditRequest by_change;
  by_change.set_change_id("c-2");
  EXPECT_EQ(store->QueryAudit(by_change)->entries_size(), 1);
  EXPECT_EQ(store->SaveChange(MakeChange("", 1), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, CampaignsAreStoredWholeAndReplaced) {
  auto store = OpenStore("t.db");
  ASSERT_NE(store, nullptr);
  v1::Campaign c = MakeCampaign("t-1", 5);
  ASSERT_TRUE(store->SaveCampaign(c, nullptr).ok());
  c.set_state(v1::Campaign::RUNNING);
  v1::Trial* trial = c.add_trials();
  trial->set_index(1);
  (*trial->mutable_knobs())["rpg_ai_rate"] = 10;
  trial->set_outcome("running");
  (*c.mutable_best())["rpg_ai_rate"] = 10;
  v1::AuditEntry audit = Audit("campaign_trial");
  ASSERT_TRUE(store->SaveCampaign(c, &audit).ok());
  ASSERT_TRUE(store->SaveCampaign(MakeCampaign("t-0", 1), nullptr).ok());

  auto campaigns = store->LoadCampaigns();
  ASSERT_TRUE(campaigns.ok()) << campaigns.status();
  ASSERT_EQ(campaigns->size(), 2u);
  EXPECT_EQ((*campaigns)[0].id(), "t-0");
  const v1::Campaign& got = (*campaigns)[1];
  EXPECT_EQ(got.state(), v1::Campaign::RUNNING);
  ASSERT_EQ(got.trials_size(), 1);
  EXPECT_EQ(got.trials(0).knobs().at("rpg_ai_rate"), 10);
  EXPECT_EQ(got.best().at("rpg_ai_rate"), 10);
  EXPECT_EQ(store->ListAudit(0, 0)->size(), 1u);
  EXPECT_EQ(store->SaveCampaign(MakeCampaign("", 1), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- batches

Store::Batch FullBatch() {
  Store::Batch b;
  b.hosts = {Host("h1", 1), Host("h2", 1)};
  b.changes = {MakeChange("c-1", 1)};
  b.campaigns = {MakeCampaign("t-1", 1)};
  b.policy_versions = {Policy("p", "abc"), Policy("p", "def")};
  b.audit = {Audit("first", {"h1"}, "c-1"), Audit("second", {"h2"}, "c-1")};
  return b;
}

TEST_F(StoreTest, CommitWritesEverythingAndChainsAuditInOrder) {
  auto store = OpenStore("b.db");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->AppendAudit(Audit("before")).ok());
  ASSERT_TRUE(store->SavePolicyVersion(Policy("p", "abc")).ok());
  int writes = 0;
  store->set_latency_observer([&](double s) {
    EXPECT_GE(s, 0);
    ++writes;
  });
  Store::CommitResult result;
  absl::Status s = store->Commit(FullBatch(), &result);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(writes, 1);  // one transaction
  EXPECT_THAT(result.audit_ids, ElementsAre(2, 3));
  EXPECT_THAT(result.policy_version_created, ElementsAre(false, true));
  ASSERT_EQ(result.policy_versions.size(), 2u);
  EXPECT_EQ(result.policy_versions[0].sequence(), 1u);
  EXPECT_EQ(result.policy_versions[1].sequence(), 2u);

  EXPECT_EQ(store->LoadHosts()->size(), 2u);
  EXPECT_EQ(store->LoadChanges()->size(), 1u);
  EXPECT_EQ(store->LoadCampaigns()->size(), 1u);
  EXPECT_EQ(store->ListPolicyVersions()->size(), 2u);
  auto audit = store->ListAudit(0, 0);
  ASSERT_EQ(audit->size(), 3u);
  EXPECT_EQ((*audit)[1].action(), "first");
  EXPECT_EQ((*audit)[2].action(), "second");
  EXPECT_EQ((*audit)[2].prev_hash(), (*audit)[1].hash());
  EXPECT_TRUE(store->VerifyAudit()->ok());
  ASSERT_TRUE(store->Commit(Store::Batch{}).ok());  // empty batch: nothing to do
}

// What a failed Commit must leave: exactly the state before it.
void ExpectOnlyBaseline(Store& store) {
  auto hosts = store.LoadHosts();
  ASSERT_TRUE(hosts.ok());
  ASSERT_EQ(hosts->size(), 1u);
  EXPECT_EQ((*hosts)[0].desired_seq, 7u);
  EXPECT_TRUE(store.LoadChanges()->empty());
  EXPECT_TRUE(store.LoadCampaigns()->empty());
  EXPECT_TRUE(store.ListPolicyVersions()->empty());
  auto audit = store.ListAudit(0, 0);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ((*audit)[0].action(), "baseline");
  // No id was consumed either: the chain continues without a gap.
  auto id = store.AppendAudit(Audit("next"));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 2);
  EXPECT_TRUE(store.VerifyAudit()->ok()) << store.VerifyAudit()->problem();
}

TEST_F(StoreTest, CommitFailingOnAHostWritesNothing) {
  auto store = OpenStore("b.db");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->SaveHostWithAudit(Host("h1", 7), Audit("baseline")).ok());
  ASSERT_TRUE(store
                  ->ExecForTest("CREATE TRIGGER reject_h2 BEFORE INSERT ON hosts "
                                "WHEN NEW.host_id = 'h2' BEGIN SELECT RAISE(ABORT, "
                                "'host h2 rejected'); END")
                  .ok());
  Store::CommitResult result;
  result.audit_ids = {42};
  absl::Status s = store->Commit(FullBatch(), &result);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("save host h2"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("host h2 rejected"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(path_));
  EXPECT_THAT(result.audit_ids, ElementsAre(42));  // untouched on failure
  ExpectOnlyBaseline(*store);
}

TEST_F(StoreTest, CommitFailingOnTheLastAuditRowWritesNothing) {
  auto store = OpenStore("b.db");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->SaveHostWithAudit(Host("h1", 7), Audit("baseline")).ok());
  ASSERT_TRUE(store
                  ->ExecForTest("CREATE TRIGGER reject_second BEFORE INSERT ON audit "
                                "WHEN NEW.action = 'second' BEGIN SELECT RAISE(ABORT, "
                                "'no second'); END")
                  .ok());
  absl::Status s = store->Commit(FullBatch());
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("no second"));
  ExpectOnlyBaseline(*store);
}

TEST_F(StoreTest, CommitWithInvalidPartWritesNothing) {
  auto store = OpenStore("b.db");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->SaveHostWithAudit(Host("h1", 7), Audit("baseline")).ok());
  Store::Batch b = FullBatch();
  b.campaigns.push_back(MakeCampaign("", 1));
  absl::Status s = store->Commit(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("campaign without an id"));
  ExpectOnlyBaseline(*store);
}

// ---- read-only and full databases

// Every mutating call once; returns their statuses.
std::vector<absl::Status> MutateEverything(Store& store, const std::string& big) {
  std::vector<absl::Status> out;
  StoredHost h = Host("h1", 8);
  h.info.set_last_guard_event(big);
  v1::AuditEntry a = Audit("mutate");
  a.set_detail(big);
  v1::Change c = MakeChange("c-9", 9);
  c.set_reason(big);
  v1::Campaign t = MakeCampaign("t-9", 9);
  t.set_reason(big);
  v1::PolicyVersion p = Policy("p", "zzz");
  p.set_source_text(big);
  Store::Batch b = FullBatch();
  b.audit[0].set_detail(big);
  out.push_back(store.SaveHost(h));
  out.push_back(store.SaveHostWithAudit(h, a));
  out.push_back(store.AppendAudit(a).status());
  out.push_back(store.Commit(b));
  out.push_back(store.SavePolicyVersion(p).status());
  out.push_back(store.SaveChange(c, &a));
  out.push_back(store.SaveCampaign(t, &a));
  return out;
}

TEST_F(StoreTest, ReadOnlyDatabaseRefusesEveryWriteClearly) {
  auto store = OpenStore("ro.db");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->SaveHostWithAudit(Host("h1", 7), Audit("baseline")).ok());
  ASSERT_TRUE(store->ExecForTest("PRAGMA query_only = ON").ok());
  for (const absl::Status& s : MutateEverything(*store, "x")) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(StoreErrorCodes(), Contains(s.code()));  // exported from the start
    EXPECT_THAT(std::string(s.message()), HasSubstr("readonly")) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(path_)) << s;
  }
  ASSERT_TRUE(store->ExecForTest("PRAGMA query_only = OFF").ok());
  ExpectOnlyBaseline(*store);
}

TEST_F(StoreTest, FullDatabaseRefusesEveryWriteClearly) {
  auto store = OpenStore("full.db");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->SaveHostWithAudit(Host("h1", 7), Audit("baseline")).ok());
  int64_t pages = RawInt(path_, "PRAGMA page_count");
  ASSERT_GT(pages, 0);
  // No room to grow: every write that needs a new page fails as a full disk would.
  ASSERT_TRUE(store->ExecForTest("PRAGMA max_page_count = " + std::to_string(pages)).ok());
  const std::string big(64 * 1024, 'x');
  for (const absl::Status& s : MutateEverything(*store, big)) {
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_THAT(StoreErrorCodes(), Contains(s.code()));  // exported from the start
    EXPECT_THAT(std::string(s.message()), HasSubstr("full")) << s;
  }
  ASSERT_TRUE(store->ExecForTest("PRAGMA max_page_count = 1000000").ok());
  ExpectOnlyBaseline(*store);
}

TEST_F(StoreTest, StepBaselineIsKeptWhileTheChangeBakesAndDroppedWhenItEnds) {
  auto store = OpenStore("steps.db");
  ASSERT_NE(store, nullptr);
  v1::Change c;
  c.set_id("c-1");
  c.set_policy_name("p");
  c.set_state(v1::CANARY);
  v1::StepBaseline b;
  b.set_change_id("c-1");
  b.set_stage(0);
  b.add_hosts()->set_host_id("h1");
  Store::Batch batch;
  batch.changes.push_back(c);
  batch.step_baselines.push_back(b);
  ASSERT_TRUE(store->Commit(batch).ok());
  auto loaded = store->LoadStepBaselines();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 1u);
  EXPECT_EQ((*loaded)[0].hosts(0).host_id(), "h1");
  // A baseline without its change id is refused; nothing is written.
  Store::Batch bad;
  bad.step_baselines.emplace_back();
  EXPECT_EQ(store->Commit(bad).code(), absl::StatusCode::kInvalidArgument);
  // STAGE keeps it; an ended change drops it.
  c.set_state(v1::STAGE);
  ASSERT_TRUE(store->SaveChange(c, nullptr).ok());
  EXPECT_EQ(store->LoadStepBaselines()->size(), 1u);
  c.set_state(v1::ROLLED_BACK);
  ASSERT_TRUE(store->SaveChange(c, nullptr).ok());
  EXPECT_TRUE(store->LoadStepBaselines()->empty());
}

}  // namespace
}  // namespace rocetune::controller
