#include "controller/rollout/executor.h"

#include <cstddef>
#include <utility>

#include "absl/synchronization/notification.h"

namespace rocetune::controller {

Executor::Executor() {
  thread_ = std::thread([this] { Loop(); });
}

Executor::~Executor() { Stop(); }

void Executor::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable() && !OnExecutorThread()) thread_.join();
}

bool Executor::Post(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stop_) return false;
  tasks_.push_back(std::move(task));
  return true;
}

bool Executor::PostUrgent(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stop_) return false;
  tasks_.insert(tasks_.begin() + static_cast<std::ptrdiff_t>(urgent_), std::move(task));
  ++urgent_;
  return true;
}

size_t Executor::Queued() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

void Executor::RunSync(const std::function<void()>& task) {
  absl::Notification done;
  if (!Post([&] {
        task();
        done.Notify();
      })) {
    return;
  }
  done.WaitForNotification();
}

void Executor::Loop() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Executor* e)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) { return e->stop_ || !e->tasks_.empty(); },
          this));
      if (tasks_.empty()) return;  // stopping, and everything posted has run
      task = std::move(tasks_.front());
      tasks_.pop_front();
      if (urgent_ > 0) --urgent_;
    }
    task();
  }
}

}  // namespace rocetune::controller
