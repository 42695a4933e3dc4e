#ifndef ROCETUNE_CONTROLLER_FLEET_EVENT_BUS_H_
#define ROCETUNE_CONTROLLER_FLEET_EVENT_BUS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::controller {

class EventSubscriber {
 public:
  virtual ~EventSubscriber() = default;
  // Must not block nor call back into the bus: it runs under the bus's
  // delivery lock (which keeps every subscriber's events in order).
  virtual void OnEvent(const v1::Event& event) = 0;
};

// Fan-out of fleet events to Watch streams, numbered (boot, seq) and the most
// recent `keep` held for watches that resume. Thread-safe; every subscriber
// sees events in seq order.
class EventBus {
 public:
  // `boot_unix_nanos` names this controller run (its start time).
  explicit EventBus(int64_t boot_unix_nanos = absl::GetCurrentTimeNanos(), size_t keep = 1024);

  // Numbers the event (seq, boot), holds it and hands it to every subscriber.
  void Publish(v1::Event event);
  // Subscribes to events published from now on.
  void Subscribe(std::shared_ptr<EventSubscriber> subscriber);
  // Subscribes after replaying the held events that follow `after`: those
  // of this run with a greater seq, or, when `after` names another run, all
  // held (preceded by a "controller_restarted" event). When events after
  // `after` are no longer held, or more follow it than fit in `max_replay`
  // (which bounds everything handed over, markers included), an
  // "events_lost" event naming how many precedes the newest ones. Nothing is
  // missed or repeated between the replay and the live events. Returns the
  // number of events handed over in the replay. An unset `after` (boot 0)
  // is Subscribe.
  size_t SubscribeAfter(std::shared_ptr<EventSubscriber> subscriber, const v1::WatchRequest& after,
                        size_t max_replay);
  void Unsubscribe(const EventSubscriber* subscriber);
  size_t subscribers() const;
  int64_t boot_unix_nanos() const { return boot_; }

 private:
  v1::Event Marker(const std::string& kind, const std::string& detail) const;

  const int64_t boot_;
  const size_t keep_;
  // Publishing and subscribing take deliver_mu_ first: deliveries happen in
  // seq order and a subscription starts at an exact point of the sequence.
  absl::Mutex deliver_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  uint64_t seq_ ABSL_GUARDED_BY(deliver_mu_) = 0;
  std::deque<v1::Event> held_ ABSL_GUARDED_BY(deliver_mu_);
  std::vector<std::shared_ptr<EventSubscriber>> subscribers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_FLEET_EVENT_BUS_H_
