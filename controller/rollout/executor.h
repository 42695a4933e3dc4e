#ifndef ROCETUNE_CONTROLLER_ROLLOUT_EXECUTOR_H_
#define ROCETUNE_CONTROLLER_ROLLOUT_EXECUTOR_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace rocetune::controller {

// One thread running posted tasks in order. What runs on it needs no lock of
// its own against other tasks: the rollout manager's state lives there, and
// its SQLite writes run there, never on a gRPC queue thread.
class Executor {
 public:
  Executor();
  ~Executor();  // runs the tasks already posted, then joins
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // False once stopping (the task is dropped).
  bool Post(std::function<void()> task);
  // As Post, but ahead of every task still queued (after the one running, and
  // after urgent tasks posted before it): what must not wait behind a backlog
  // of ticks and admin calls (a NACK, a local guard restore).
  bool PostUrgent(std::function<void()> task);
  // Tasks queued and not yet started.
  size_t Queued() const;
  // Runs `task` on the executor and waits for it (tests, shutdown).
  // REQUIRES: not called from the executor's own thread.
  void RunSync(const std::function<void()>& task);
  bool OnExecutorThread() const { return std::this_thread::get_id() == thread_.get_id(); }
  void Stop();

 private:
  void Loop();

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  size_t urgent_ ABSL_GUARDED_BY(mu_) = 0;  // urgent tasks at the front of tasks_
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ROLLOUT_EXECUTOR_H_
