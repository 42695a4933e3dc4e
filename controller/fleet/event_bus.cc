#include "controller/fleet/event_bus.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rocetune::controller {

EventBus::EventBus(int64_t boot_unix_nanos, size_t keep)
    : boot_(boot_unix_nanos), keep_(std::max<size_t>(keep, 1)) {}

void EventBus::Publish(v1::Event event) {
  absl::MutexLock deliver(&deliver_mu_);
  event.set_seq(++seq_);
  event.set_boot_unix_nanos(boot_);
  held_.push_back(event);
  if (held_.size() > keep_) held_.pop_front();
  std::vector<std::shared_ptr<EventSubscriber>> subs;
  {
    absl::MutexLock lock(&mu_);
    subs = subscribers_;
  }
  for (const auto& s : subs) s->OnEvent(event);
}

void EventBus::Subscribe(std::shared_ptr<EventSubscriber> subscriber) {
  absl::MutexLock deliver(&deliver_mu_);
  absl::MutexLock lock(&mu_);
  subscribers_.push_back(std::move(subscriber));
}

v1::Event EventBus::Marker(const std::string& kind, const std::string& detail) const {
  v1::Event e;
  e.set_unix_nanos(absl::GetCurrentTimeNanos());
  e.set_kind(kind);
  e.set_subject("controller");
  e.set_detail(detail);
  e.set_boot_unix_nanos(boot_);
  return e;
}

size_t EventBus::SubscribeAfter(std::shared_ptr<EventSubscriber> subscriber,
                                const v1::WatchRequest& after, size_t max_replay) {
  absl::MutexLock deliver(&deliver_mu_);
  if (after.after_boot_unix_nanos() == 0) {  // not a resume: new events only
    absl::MutexLock lock(&mu_);
    subscribers_.push_back(std::move(subscriber));
    return 0;
  }
  const bool same_run = after.after_boot_unix_nanos() == boot_;
  // This run's events after `after`: seq first .. seq_.
  const uint64_t first = same_run ? std::min(after.after_seq(), seq_) + 1 : 1;
  std::vector<const v1::Event*> replay;
  for (const v1::Event& e : held_) {
    if (e.seq() >= first) replay.push_back(&e);
  }
  const uint64_t wanted = seq_ >= first ? seq_ - first + 1 : 0;
  size_t sent = 0;
  if (!same_run) {
    subscriber->OnEvent(Marker(
        "controller_restarted",
        absl::StrCat("the controller restarted; ", wanted, " events since it started follow")));
    ++sent;
  }
  // `max_replay` counts everything handed over: the (up to two) markers too.
  const size_t room = max_replay > 3 ? max_replay - 2 : 1;
  const size_t skip = replay.size() > room ? replay.size() - room : 0;
  const uint64_t lost = wanted - (replay.size() - skip);
  if (lost > 0) {
    subscriber->OnEvent(
        Marker("events_lost", absl::StrCat(lost, " events were not kept for this watch (seq ",
                                           first, "..", first + lost - 1, ")")));
    ++sent;
  }
  for (size_t i = skip; i < replay.size(); ++i) subscriber->OnEvent(*replay[i]);
  sent += replay.size() - skip;
  absl::MutexLock lock(&mu_);
  subscribers_.push_back(std::move(subscriber));
  return sent;
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
