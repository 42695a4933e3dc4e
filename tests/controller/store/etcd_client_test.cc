// EtcdClient against a real etcd (Debian's etcd-server) on loopback ports this
// test picks: keys, leader-fenced transactions, leases, elections, and a
// 3-member cluster losing the member the client talks to.
#include "controller/store/etcd/etcd_client.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/store/etcd_cluster.h"
#include "tests/testing/test_support.h"

namespace rocetune::controller::etcd {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = rocetune::testing::MakeTempDir("etcd_client_test");
    ASSERT_FALSE(dir_.empty());
    cluster_ = std::make_unique<rocetune::testing::EtcdCluster>(dir_, 1);
    absl::Status s = cluster_->Start();
    ASSERT_TRUE(s.ok()) << s << "\n" << cluster_->Log(0);
    client_ = NewClient(cluster_->endpoints());
    ASSERT_NE(client_, nullptr);
  }
  static std::unique_ptr<EtcdClient> NewClient(std::vector<std::string> endpoints,
                                               absl::Duration timeout = absl::Seconds(10)) {
    EtcdOptions o;
    o.endpoints = std::move(endpoints);
    o.timeout = timeout;
    absl::StatusOr<std::unique_ptr<EtcdClient>> c = EtcdClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  std::string dir_;
  std::unique_ptr<rocetune::testing::EtcdCluster> cluster_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdClientTest, PutsAndGetsKeysAndPrefixes) {
  absl::StatusOr<int64_t> r1 = client_->Put("/rt/hosts/h1", "one");
  ASSERT_TRUE(r1.ok()) << r1.status();
  absl::StatusOr<int64_t> r2 = client_->Put("/rt/hosts/h2", "two");
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_GT(*r2, *r1);
  ASSERT_TRUE(client_->Put("/rt/hosts/h1", "one again").ok());
  ASSERT_TRUE(client_->Put("/rt/hostsx", "not under the prefix").ok());

  absl::StatusOr<std::optional<KeyValue>> h1 = client_->Get("/rt/hosts/h1");
  ASSERT_TRUE(h1.ok()) << h1.status();
  ASSERT_TRUE(h1->has_value());
  EXPECT_EQ((*h1)->value, "one again");
  EXPECT_EQ((*h1)->create_revision, *r1);
  EXPECT_GT((*h1)->mod_revision, *r2);
  EXPECT_EQ((*h1)->version, 2);

  absl::StatusOr<std::optional<KeyValue>> none = client_->Get("/rt/hosts/h9");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  absl::StatusOr<std::vector<KeyValue>> all = client_->GetPrefix("/rt/hosts/");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].key, "/rt/hosts/h1");
  EXPECT_EQ((*all)[1].key, "/rt/hosts/h2");
}

// The fencing a replicated controller relies on: a leader's writes are one
// transaction guarded by its election key, so once it has lost the election
// (its lease revoked here, as when it stops renewing) its writes are refused
// and change nothing, while the new leader's go through.
TEST_F(EtcdClientTest, AFencedWriteIsRefusedOnceItsLeaderIsDeposed) {
  absl::StatusOr<int64_t> lease_a = client_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease_a.ok()) << lease_a.status();
  absl::StatusOr<Leadership> a =
      client_->Campaign("/rt/leader", *lease_a, "controller-a", absl::Seconds(10));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->key, StartsWith("/rt/leader/"));
  EXPECT_GT(a->create_revision, 0);
  absl::StatusOr<std::optional<KeyValue>> leader = client_->Leader("/rt/leader");
  ASSERT_TRUE(leader.ok()) << leader.status();
  ASSERT_TRUE(leader->has_value());
  EXPECT_EQ((*leader)->value, "controller-a");

  ASSERT_TRUE(client_->FencedPut(*a, {{"/rt/changes/c-1", "CANARY by a"}}).ok());

  // A second controller waits while a leads (its own lease for this try: the
  // server withdraws an abandoned campaign's key, which is the lease's).
  absl::StatusOr<int64_t> lease_try = client_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease_try.ok()) << lease_try.status();
  absl::StatusOr<Leadership> early =
      client_->Campaign("/rt/leader", *lease_try, "controller-b", absl::Milliseconds(500));
  EXPECT_EQ(early.status().code(), absl::StatusCode::kDeadlineExceeded) << early.status();
  EXPECT_EQ(client_->Campaign("/rt/leader", *lease_try, "b", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<int64_t> lease_b = client_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease_b.ok()) << lease_b.status();

  // a's lease ends: b leads, a's writes are refused and change nothing.
  ASSERT_TRUE(client_->RevokeLease(*lease_a).ok());
  absl::StatusOr<Leadership> b =
      client_->Campaign("/rt/leader", *lease_b, "controller-b", absl::InfiniteDuration());
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<int64_t> late =
      client_->FencedPut(*a, {{"/rt/changes/c-1", "ROLLED_BACK by a"}, {"/rt/audit/9", "a"}});
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition) << late.status();
  EXPECT_THAT(late.status().message(), HasSubstr("leadership lost"));
  absl::StatusOr<std::optional<KeyValue>> c1 = client_->Get("/rt/changes/c-1");
  ASSERT_TRUE(c1.ok() && c1->has_value());
  EXPECT_EQ((*c1)->value, "CANARY by a");
  absl::StatusOr<std::optional<KeyValue>> audit = client_->Get("/rt/audit/9");
  ASSERT_TRUE(audit.ok());
  EXPECT_FALSE(audit->has_value()) << "a refused transaction wrote part of itself";

  ASSERT_TRUE(client_->FencedPut(*b, {{"/rt/changes/c-1", "DONE by b"}}).ok());
  leader = client_->Leader("/rt/leader");
  ASSERT_TRUE(leader.ok() && leader->has_value());
  EXPECT_EQ((*leader)->value, "controller-b");

  // Resigning ends the leadership too.
  ASSERT_TRUE(client_->Resign(*b).ok());
  leader = client_->Leader("/rt/leader");
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_FALSE(leader->has_value());
  EXPECT_EQ(client_->FencedPut(*b, {{"/rt/changes/c-1", "x"}}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(EtcdClientTest, ALeaseNotKeptAliveExpiresWithItsKeys) {
  absl::StatusOr<int64_t> lease = client_->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client_->Put("/rt/alive/h1", "up", *lease).ok());
  absl::StatusOr<absl::Duration> left = client_->KeepAliveOnce(*lease);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_GE(*left, absl::Seconds(1));
  // Not renewed: the key goes with the lease.
  const absl::Time renewed = absl::Now();
  EXPECT_TRUE(rocetune::testing::Eventually(
      [&] {
        absl::StatusOr<std::optional<KeyValue>> k = client_->Get("/rt/alive/h1");
        return k.ok() && !k->has_value();
      },
      absl::Seconds(20), absl::Milliseconds(100)));
  EXPECT_GE(absl::Now() - renewed, absl::Seconds(1));
  absl::StatusOr<absl::Duration> gone = client_->KeepAliveOnce(*lease);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound) << gone.status();
}

TEST_F(EtcdClientTest, BadOptionsAndAnUnreachableEtcdAreNamed) {
  EtcdOptions none;
  EXPECT_EQ(EtcdClient::Connect(none).status().code(), absl::StatusCode::kInvalidArgument);
  EtcdOptions mixed;
  mixed.endpoints = {"127.0.0.1:2379", "etcd-1.example:2379"};
  absl::StatusOr<std::unique_ptr<EtcdClient>> c = EtcdClient::Connect(mixed);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("etcd-1.example:2379"));
  EtcdOptions no_port;
  no_port.endpoints = {"127.0.0.1:"};
  EXPECT_EQ(EtcdClient::Connect(no_port).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->GrantLease(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);

  // A port nothing listens on (the cluster's own, once it is stopped).
  const std::vector<std::string> gone = cluster_->endpoints();
  cluster_.reset();
  std::unique_ptr<EtcdClient> dead = NewClient(gone, absl::Seconds(1));
  ASSERT_NE(dead, nullptr);
  absl::StatusOr<int64_t> put = dead->Put("/rt/x", "y");
  ASSERT_FALSE(put.ok());
  EXPECT_TRUE(absl::IsUnavailable(put.status()) || absl::IsDeadlineExceeded(put.status()))
      << put.status();
  EXPECT_THAT(put.status().message(), HasSubstr("put \"/rt/x\""));
  EXPECT_THAT(put.status().message(), HasSubstr(gone[0]));
}

// A 3-member cluster and a client given every member's endpoint.
class EtcdClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = rocetune::testing::MakeTempDir("etcd_cluster_test");
    ASSERT_FALSE(dir.empty());
    cluster_ = std::make_unique<rocetune::testing::EtcdCluster>(dir, 3);
    absl::Status s = cluster_->Start(absl::Seconds(60));
    ASSERT_TRUE(s.ok()) << s << "\n" << cluster_->Log(0);
    EtcdOptions o;
    o.endpoints = cluster_->endpoints();
    o.timeout = absl::Seconds(5);
    absl::StatusOr<std::unique_ptr<EtcdClient>> c = EtcdClient::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }
  // Writes `n` keys `prefix`0.. (each acknowledged).
  void PutRows(const std::string& prefix, int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(client_->Put(absl::StrCat(prefix, 100 + i), "row").ok()) << i;
    }
  }
  // Tries to write `key` until it is acknowledged (at most 30 s: the first
  // tries after a member died may fail while the channel moves on and the
  // cluster elects again); its last status.
  absl::Status PutEventually(const std::string& key) {
    absl::Status last;
    rocetune::testing::Eventually(
        [&] {
          last = client_->Put(key, "row").status();
          return last.ok();
        },
        absl::Seconds(30), absl::Milliseconds(200));
    return last;
  }
  size_t Rows(const std::string& prefix) {
    absl::StatusOr<std::vector<KeyValue>> rows = client_->GetPrefix(prefix);
    EXPECT_TRUE(rows.ok()) << rows.status();
    return rows.ok() ? rows->size() : 0;
  }

  std::unique_ptr<rocetune::testing::EtcdCluster> cluster_;
  std::unique_ptr<EtcdClient> client_;
};

// Member m0 (the first, which the client's channel tries first) is killed:
// writes go on through another member, and the cluster (two of three, still
// a majority) has every earlier write.
TEST_F(EtcdClusterTest, AClientOfThreeMembersWritesOnWhenItsMemberDies) {
  PutRows("/rt/audit/", 20);
  cluster_->Kill(0);
  absl::Status after = PutEventually("/rt/audit/120");
  EXPECT_TRUE(after.ok()) << after << "\n" << cluster_->Log(1);
  EXPECT_EQ(Rows("/rt/audit/"), 21u);
}

// The whole cluster goes down (every member killed) and comes back on its data
// directories: the client, unchanged, writes again once a majority is back,
// and every write acknowledged before is still there.
TEST_F(EtcdClusterTest, EveryAcknowledgedWriteSurvivesARestartOfTheWholeCluster) {
  PutRows("/rt/changes/c-", 30);
  for (int i = 0; i < 3; ++i) cluster_->Kill(i);
  EXPECT_FALSE(client_->Put("/rt/changes/c-200", "during the outage").ok())
      << "a write acknowledged with every member dead";
  absl::Status s = cluster_->Restart({0, 1, 2});
  ASSERT_TRUE(s.ok()) << s;
  absl::Status after = PutEventually("/rt/changes/c-201");
  EXPECT_TRUE(after.ok()) << after << "\n" << cluster_->Log(0);
  EXPECT_EQ(Rows("/rt/changes/"), 31u);
}

}  // namespace
}  // namespace rocetune::controller::etcd
