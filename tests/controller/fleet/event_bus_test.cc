#include "controller/fleet/event_bus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace rocetune::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class Recorder : public EventSubscriber {
 public:
  void OnEvent(const v1::Event& e) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(e);
  }
  std::vector<v1::Event> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  std::vector<std::string> kinds() const {
    std::vector<std::string> out;
    for (const v1::Event& e : events()) out.push_back(e.kind());
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<v1::Event> events_;
};

void PublishKinds(EventBus& bus, const std::vector<std::string>& kinds) {
  for (const std::string& k : kinds) {
    v1::Event e;
    e.set_kind(k);
    bus.Publish(e);
  }
}

v1::WatchRequest After(int64_t boot, uint64_t seq) {
  v1::WatchRequest r;
  r.set_after_boot_unix_nanos(boot);
  r.set_after_seq(seq);
  return r;
}

TEST(EventBusTest, EventsAreNumberedWithinARun) {
  EventBus bus(/*boot_unix_nanos=*/7);
  auto live = std::make_shared<Recorder>();
  bus.Subscribe(live);
  PublishKinds(bus, {"a", "b"});
  std::vector<v1::Event> got = live->events();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].seq(), 1u);
  EXPECT_EQ(got[1].seq(), 2u);
  EXPECT_EQ(got[1].boot_unix_nanos(), 7);
}

TEST(EventBusTest, AResumedWatchGetsWhatItMissedThenLiveEventsInOrder) {
  EventBus bus(7);
  PublishKinds(bus, {"a", "b", "c", "d"});
  auto resumed = std::make_shared<Recorder>();
  EXPECT_EQ(bus.SubscribeAfter(resumed, After(7, 2), 100), 2u);
  PublishKinds(bus, {"e"});
  EXPECT_THAT(resumed->kinds(), ElementsAre("c", "d", "e"));
  // Not a resume: new events only.
  auto fresh = std::make_shared<Recorder>();
  EXPECT_EQ(bus.SubscribeAfter(fresh, v1::WatchRequest(), 100), 0u);
  PublishKinds(bus, {"f"});
  EXPECT_THAT(fresh->kinds(), ElementsAre("f"));
}

TEST(EventBusTest, AfterARestartEveryEventOfTheNewRunFollowsAMarker) {
  EventBus bus(/*boot_unix_nanos=*/9);  // the restarted controller
  PublishKinds(bus, {"host_registered", "host_registered"});
  auto resumed = std::make_shared<Recorder>();
  bus.SubscribeAfter(resumed, After(/*the old run*/ 7, 120), 100);
  EXPECT_THAT(resumed->kinds(),
              ElementsAre("controller_restarted", "host_registered", "host_registered"));
  EXPECT_THAT(resumed->events()[0].detail(), HasSubstr("2 events since it started"));
}

TEST(EventBusTest, EventsNoLongerHeldOrBeyondTheReplayLimitAreCountedAsLost) {
  EventBus bus(7, /*keep=*/3);
  PublishKinds(bus, {"a", "b", "c", "d", "e"});  // holds c, d, e
  auto r = std::make_shared<Recorder>();
  bus.SubscribeAfter(r, After(7, 1), 100);  // b was not kept
  EXPECT_THAT(r->kinds(), ElementsAre("events_lost", "c", "d", "e"));
  EXPECT_THAT(r->events()[0].detail(), HasSubstr("1 events were not kept"));
  auto small = std::make_shared<Recorder>();
  bus.SubscribeAfter(small, After(7, 2), /*max_replay=*/2);  // c, d, e wanted; room for 1 + marker
  EXPECT_THAT(small->kinds(), ElementsAre("events_lost", "e"));
  EXPECT_THAT(small->events()[0].detail(),
              HasSubstr("2 events were not kept for this watch (seq 3..4)"));
}

TEST(EventBusTest, AReplayNeverHandsOverMoreThanItsBudgetMarkersIncluded) {
  EventBus bus(/*boot_unix_nanos=*/9);
  PublishKinds(bus, {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"});
  auto r = std::make_shared<Recorder>();
  EXPECT_EQ(bus.SubscribeAfter(r, After(/*another run*/ 7, 5), /*max_replay=*/5), 5u);
  EXPECT_THAT(r->kinds(), ElementsAre("controller_restarted", "events_lost", "h", "i", "j"));
  // A resume point past the end (or garbage) replays nothing and loses nothing.
  auto past = std::make_shared<Recorder>();
  EXPECT_EQ(bus.SubscribeAfter(past, After(9, ~uint64_t{0}), 5), 0u);
  PublishKinds(bus, {"k"});
  EXPECT_THAT(past->kinds(), ElementsAre("k"));
}

TEST(EventBusTest, ConcurrentPublishersDeliverInSeqOrderToEverySubscriber) {
  EventBus bus(7, /*keep=*/4096);
  auto early = std::make_shared<Recorder>();
  bus.Subscribe(early);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) PublishKinds(bus, {"x"});
    });
  }
  auto late = std::make_shared<Recorder>();
  bus.SubscribeAfter(late, After(7, 0), 100000);
  for (std::thread& t : threads) t.join();
  for (const auto& r : {early, late}) {
    std::vector<v1::Event> got = r->events();
    ASSERT_EQ(got.size(), 2000u);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].seq(), i + 1);
  }
}

}  // namespace
}  // namespace rocetune::controller
