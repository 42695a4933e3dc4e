#ifndef ROCETUNE_CONTROLLER_CONTROL_LOOP_H_
#define ROCETUNE_CONTROLLER_CONTROL_LOOP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "controller/rollout/executor.h"
#include "controller/store/store.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::controller {

// The controller's control loop: the one thread on which the rollout manager
// decides (admin operations, ticks, fleet events) and on which the store is
// written. The controller owns it and hands it to the fleet, the rollout
// manager, the admin service and the agent transport; whatever they write
// (host rows, audit rows, transitions) is posted here, so writes happen in
// the order they were posted and never on a gRPC completion-queue thread.
// Thread-safe.
class ControlLoop {
 public:
  // `store` may be null (no persistence); not owned.
  explicit ControlLoop(Store* store) : store_(store) {}
  ControlLoop(const ControlLoop&) = delete;
  ControlLoop& operator=(const ControlLoop&) = delete;

  // False once stopping (the task is dropped).
  bool Post(std::function<void()> task) { return executor_.Post(std::move(task)); }
  // Ahead of the queued tasks (Executor::PostUrgent): NACKs and local guard
  // restores, which end a change, do not wait behind ticks and admin calls.
  bool PostUrgent(std::function<void()> task) { return executor_.PostUrgent(std::move(task)); }
  // Tasks posted and not yet started.
  size_t Queued() const { return executor_.Queued(); }
  // Runs `task` on the loop and waits for it. REQUIRES: not on the loop.
  void RunSync(const std::function<void()>& task) { executor_.RunSync(task); }
  bool OnLoopThread() const { return executor_.OnExecutorThread(); }
  // Runs what was posted, then ends the thread; later posts are refused.
  void Stop() { executor_.Stop(); }

  // A store write: queued and run on the loop, or run here when the loop is
  // stopping (so that nothing is lost at shutdown). Writes queued while the
  // loop is busy run together, in the order they were queued, in one store
  // transaction (Store::RunWriteBatch; at most kMaxWriteBatch at a time), so
  // a burst of ACKs after a stage push costs one commit, not one each. A
  // write queued after a task may run before it, and beyond kMaxWriteBatch
  // one queued before a task may run after it; writes keep their own order.
  // When the batch cannot commit, its writes run again one by one.
  void Write(std::function<void()> write);
  static constexpr size_t kMaxWriteBatch = 512;
  // Appends `entry` to the audit log (as Write); a failure is logged with
  // `what` ("a refused agent", "an admin call").
  void Audit(v1::AuditEntry entry, std::string what);

  Store* store() const { return store_; }

 private:
  // Runs the queued writes (batches of at most kMaxWriteBatch), on the loop
  // or at shutdown.
  void FlushWrites() ABSL_LOCKS_EXCLUDED(writes_mu_);
  void RunBatch(const std::vector<std::function<void()>>& batch) ABSL_LOCKS_EXCLUDED(writes_mu_);

  Store* const store_;
  absl::Mutex writes_mu_;
  std::vector<std::function<void()>> writes_ ABSL_GUARDED_BY(writes_mu_);
  bool flush_posted_ ABSL_GUARDED_BY(writes_mu_) = false;
  // One flush at a time (the loop's, and a caller's while the loop stops).
  absl::Mutex flush_mu_;
  Executor executor_;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_CONTROL_LOOP_H_
