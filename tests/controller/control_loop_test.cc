// The control loop's ordering: posted tasks run in order, urgent ones (a
// NACK, a local guard restore) ahead of whatever is still queued, and the
// rollout manager's ticks coalesce instead of queuing behind a slow one.
#include "controller/control_loop.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "controller/fleet/fleet.h"
#include "controller/rollout/rollout_manager.h"
#include "controller/telemetry/telemetry_store.h"
#include "daemon/clock.h"
#include "tests/testing/test_support.h"

namespace rocetune::controller {
namespace {

class Recorder {
 public:
  std::function<void()> Task(std::string name) {
    return [this, name] {
      absl::MutexLock lock(&mu_);
      order_.push_back(name);
    };
  }
  std::vector<std::string> order() {
    absl::MutexLock lock(&mu_);
    return order_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> order_;
};

// Occupies the loop until `release` is notified; returns once it runs.
bool Block(ControlLoop& loop, absl::Notification* release) {
  auto running = std::make_shared<absl::Notification>();
  if (!loop.Post([release, running] {
        running->Notify();
        release->WaitForNotification();
      })) {
    return false;
  }
  running->WaitForNotification();
  return true;
}

TEST(ControlLoopTest, UrgentTasksRunAheadOfTheQueueInTheirOwnOrder) {
  ControlLoop loop(nullptr);
  absl::Notification release;
  ASSERT_TRUE(Block(loop, &release));
  Recorder r;
  ASSERT_TRUE(loop.Post(r.Task("tick1")));
  ASSERT_TRUE(loop.Post(r.Task("admin")));
  ASSERT_TRUE(loop.PostUrgent(r.Task("nack")));
  ASSERT_TRUE(loop.Post(r.Task("tick2")));
  ASSERT_TRUE(loop.PostUrgent(r.Task("guard")));
  EXPECT_EQ(loop.Queued(), 5u);
  release.Notify();
  loop.RunSync([] {});
  EXPECT_EQ(r.order(), (std::vector<std::string>{"nack", "guard", "tick1", "admin", "tick2"}));
  // Once drained, an urgent task is simply next.
  ASSERT_TRUE(loop.PostUrgent(r.Task("late")));
  loop.RunSync([] {});
  EXPECT_EQ(r.order().back(), "late");
  loop.Stop();
  EXPECT_FALSE(loop.PostUrgent(r.Task("after stop")));
}

// Issue 25 item 6: writes queued while the loop is busy (a burst of ACKs)
// commit together, in their order; more than a batch goes in several.
TEST(ControlLoopTest, WritesQueuedWhileTheLoopIsBusyCommitAsOneBatchInOrder) {
  ::rocetune::testing::TempDir dir{"control-loop"};
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  ControlLoop loop(store->get());
  const uint64_t before = (*store)->commits();
  absl::Notification release;
  ASSERT_TRUE(Block(loop, &release));
  constexpr int kWrites = ControlLoop::kMaxWriteBatch + 88;
  for (int i = 0; i < kWrites; ++i) {
    v1::AuditEntry e;
    e.set_actor("h1");
    e.set_action("ack");
    e.set_subject(absl::StrCat("w", i));
    loop.Audit(e, "a test write");
  }
  // One write that fails (an empty host id) fails alone.
  loop.Write([s = store->get()] { EXPECT_FALSE(s->SaveHost(StoredHost()).ok()); });
  release.Notify();
  // The first batch runs before this task, the rest (queued behind it) after.
  loop.RunSync([] {});
  loop.RunSync([] {});
  auto rows = (*store)->ListAudit(0, 10000);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), static_cast<size_t>(kWrites));
  for (int i = 0; i < kWrites; ++i) EXPECT_EQ((*rows)[i].subject(), absl::StrCat("w", i));
  EXPECT_EQ((*store)->commits() - before, 2u)
      << "one commit per batch of at most " << ControlLoop::kMaxWriteBatch;
  auto chain = (*store)->VerifyAudit();
  ASSERT_TRUE(chain.ok());
  EXPECT_TRUE(chain->ok()) << chain->problem();
  // Alone, a write is its own transaction; after Stop, writes run at once.
  loop.Audit(v1::AuditEntry(), "one");
  loop.RunSync([] {});
  EXPECT_EQ((*store)->commits() - before, 3u);
  loop.Stop();
  v1::AuditEntry late;
  late.set_action("late");
  loop.Audit(late, "after stop");
  rows = (*store)->ListAudit(0, 10000);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->back().action(), "late");
}

TEST(ControlLoopTest, TicksCoalesceWhileOneIsQueued) {
  FakeClock clock(absl::FromUnixSeconds(1'700'000'000));
  TelemetryStore telemetry{TelemetryOptions{}};
  FleetOptions fopt;
  fopt.plan_probes = false;
  Fleet fleet(&clock, &telemetry, nullptr, nullptr, fopt);
  ControlLoop loop(nullptr);
  RolloutOptions ropt;
  ropt.tick = absl::ZeroDuration();  // no ticker: the test posts
  RolloutManager manager(&fleet, &telemetry, nullptr, nullptr, &clock, ropt, &loop);
  absl::Notification release;
  ASSERT_TRUE(Block(loop, &release));
  EXPECT_TRUE(manager.PostTick());
  for (int i = 0; i < 9; ++i) EXPECT_FALSE(manager.PostTick());
  EXPECT_EQ(loop.Queued(), 1u);
  EXPECT_EQ(manager.ticks_coalesced(), 9u);
  release.Notify();
  loop.RunSync([] {});
  // The tick ran: the next one is queued again.
  EXPECT_TRUE(manager.PostTick());
  loop.RunSync([] {});
  manager.Stop();
  loop.Stop();
}

}  // namespace
}  // namespace rocetune::controller
