#ifndef ROCETUNE_CONTROLLER_FLEET_EVENT_BUS_H_
#define ROCETUNE_CONTROLLER_FLEET_EVENT_BUS_H_

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::controller {

class EventSubscriber {
 public:
  virtual ~EventSubscriber() = default;
  // Must not block; called without any bus lock held.
  virtual void OnEvent(const v1::Event& event) = 0;
};

// Fan-out of fleet events to Watch streams. Thread-safe.
class EventBus {
 public:
  void Publish(const v1::Event& event);
  void Subscribe(std::shared_ptr<EventSubscriber> subscriber);
  void Unsubscribe(const EventSubscriber* subscriber);
  size_t subscribers() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<EventSubscriber>> subscribers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_FLEET_EVENT_BUS_H_
