#include "controller/fleet/event_bus.h"

#include <algorithm>

namespace rocetune::controller {

void EventBus::Publish(const v1::Event& event) {
  std::vector<std::shared_ptr<EventSubscriber>> subs;
  {
    absl::MutexLock lock(&mu_);
    subs = subscribers_;
  }
  for (const auto& s : subs) s->OnEvent(event);
}

void EventBus::Subscribe(std::shared_ptr<EventSubscriber> subscriber) {
  absl::MutexLock lock(&mu_);
  subscribers_.push_back(std::move(subscriber));
}

void EventBus::Unsubscribe(const EventSubscriber* subscriber) {
  absl::MutexLock lock(&mu_);
  subscribers_.erase(std::remove_if(subscribers_.begin(), subscribers_.end(),
                                    [&](const auto& s) { return s.get() == subscriber; }),
                     subscribers_.end());
}

size_t EventBus::subscribers() const {
  absl::MutexLock lock(&mu_);
  return subscribers_.size();
}

}  // namespace rocetune::controller
