// The control loop's ordering: posted tasks run in order, urgent ones (a
// NACK, a local guard restore) ahead of whatever is still queued, and the
// rollout manager's ticks coalesce instead of queuing behind a slow one.
#include "controller/control_loop.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "controller/fleet/fleet.h"
#include "controller/rollout/rollout_manager.h"
#include "controller/telemetry/telemetry_store.h"
#include "daemon/clock.h"

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
