#include "controller/store/store.h"

#include <sqlite3.h>

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/controller_test_util.h"

namespace rocetune::controller {
namespace {

using ::rocetune::controller::testing::MakeTempDir;
using ::testing::HasSubstr;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

// Runs SQL on a database file outside the Store.
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  std::string msg = err != nullptr ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

TEST_F(StoreTest, FreshDatabaseGetsLatestSchemaInWalMode) {
  auto store = Store::Open(dir_ + "/state");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->schema_version(), Store::LatestSchemaVersion());
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/state/controller.db"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/state/controller.db-wal"));
}

TEST_F(StoreTest, MigratesVersionOneDatabaseKeepingRows) {
  std::string path = dir_ + "/old.db";
  {
    auto store = Store::OpenFile(path);
    ASSERT_TRUE(store.ok());
    v1::AuditEntry e;
    e.set_actor("alice");
    e.set_action("x");
    e.set_subject("h1");
    ASSERT_TRUE((*store)->AppendAudit(e).ok());
  }
  // Roll the file back to schema 1 as an older controller would have left it.
  RawExec(path, "DROP INDEX audit_subject; DROP INDEX hosts_desired; PRAGMA user_version = 1;");
  auto store = Store::OpenFile(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->schema_version(), Store::LatestSchemaVersion());
  auto audit = (*store)->ListAudit(0, 10);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ((*audit)[0].actor(), "alice");
  // The migration re-created the index.
  EXPECT_FALSE((*store)->ExecForTest("CREATE INDEX audit_subject ON audit(subject)").ok());
}

TEST_F(StoreTest, RefusesNewerSchema) {
  std::string path = dir_ + "/new.db";
  { ASSERT_TRUE(Store::OpenFile(path).ok()); }
  RawExec(path, "PRAGMA user_version = 99;");
  auto store = Store::OpenFile(path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("newer"));
}

TEST_F(StoreTest, HostsRoundTripAndDesiredStateWithAuditIsOneTransaction) {
  auto store = Store::OpenFile(dir_ + "/h.db");
  ASSERT_TRUE(store.ok());
  StoredHost h;
  h.info.set_host_id("h1");
  h.info.set_hostname("h1.example");
  (*h.info.mutable_labels())["rack"] = "r1";
  h.info.set_desired_version("3");
  h.info.set_state(v1::HOST_CONNECTED);  // live field: not persisted
  h.desired_seq = 3;
  (*h.desired.add_devices()->mutable_dcqcn())["rpg_ai_rate"] = 8;
  v1::AuditEntry audit;
  audit.set_action("set_desired_state");
  audit.set_subject("h1");
  ASSERT_TRUE((*store)->SaveHostWithAudit(h, audit).ok());
  auto hosts = (*store)->LoadHosts();
  ASSERT_TRUE(hosts.ok());
  ASSERT_EQ(hosts->size(), 1u);
  EXPECT_EQ((*hosts)[0].info.labels().at("rack"), "r1");
  EXPECT_EQ((*hosts)[0].info.state(), v1::HOST_STATE_UNSPECIFIED);
  EXPECT_EQ((*hosts)[0].desired_seq, 3u);
  EXPECT_EQ((*hosts)[0].desired.devices(0).dcqcn().at("rpg_ai_rate"), 8);
  EXPECT_EQ((*store)->ListAudit(0, 0)->size(), 1u);

  // A failing audit insert rolls the host update back too.
  ASSERT_TRUE((*store)->ExecForTest("DROP TABLE audit").ok());
  h.desired_seq = 4;
  EXPECT_FALSE((*store)->SaveHostWithAudit(h, audit).ok());
  EXPECT_EQ((*(*store)->LoadHosts())[0].desired_seq, 3u);
}

TEST_F(StoreTest, ChangesWithTransitionsApprovalsAndPolicies) {
  auto store = Store::OpenFile(dir_ + "/c.db");
  ASSERT_TRUE(store.ok());
  v1::PolicyVersion pv;
  pv.set_name("p");
  pv.set_version_hash("abc");
  ASSERT_TRUE((*store)->SavePolicyVersion(pv).ok());
  ASSERT_TRUE((*store)->SavePolicyVersion(pv).ok());  // immutable: no-op
  EXPECT_EQ((*store)->ListPolicyVersions()->size(), 1u);

  v1::Change c;
  c.set_id("c1");
  c.set_policy_name("p");
  c.set_policy_version("abc");
  c.set_state(v1::PROPOSED);
  v1::ChangeTransition t;
  t.set_from(v1::CHANGE_STATE_UNSPECIFIED);
  t.set_to(v1::PROPOSED);
  t.set_actor("bob");
  ASSERT_TRUE((*store)->SaveChange(c, &t, nullptr).ok());
  c.set_state(v1::APPROVED);
  t.set_from(v1::PROPOSED);
  t.set_to(v1::APPROVED);
  t.set_actor("carol");
  v1::AuditEntry a;
  a.set_action("approve");
  ASSERT_TRUE((*store)->SaveChange(c, &t, &a).ok());
  ASSERT_TRUE((*store)->AddApproval("c1", "carol", 1).ok());
  EXPECT_FALSE((*store)->AddApproval("c1", "carol", 2).ok());  // once per approver
  auto changes = (*store)->LoadChanges();
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ((*changes)[0].state(), v1::APPROVED);
  ASSERT_EQ((*changes)[0].transitions_size(), 2);
  EXPECT_EQ((*changes)[0].transitions(1).actor(), "carol");
}

}  // namespace
}  // namespace rocetune::controller
