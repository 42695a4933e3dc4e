#ifndef ROCETUNE_CONTROLLER_ADMIN_WATCH_STREAM_H_
#define ROCETUNE_CONTROLLER_ADMIN_WATCH_STREAM_H_

#include <deque>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "controller/controller_metrics.h"
#include "controller/fleet/event_bus.h"
#include "controller/transport/cq_tag.h"
#include "grpcpp/grpcpp.h"
#include "rocetune/v1/admin.grpc.pb.h"

namespace rocetune::controller {

class AdminService;

// One Watch server stream on the async API: forwards fleet events with a
// bounded queue (events beyond it are dropped and counted). Ends when the
// client cancels or the server shuts down (gRPC's notify-when-done tag).
//
// Operations: the accept, at most one write, one finish after a failed write,
// and the done notification, each started under mu_ (writes also from the
// thread publishing an event). The call has ended once it was accepted, the
// done notification has arrived and no write or finish is outstanding; it
// then unsubscribes, leaves the tracker and drops its self-reference.
class WatchCall final : public EventSubscriber, public std::enable_shared_from_this<WatchCall> {
 public:
  // Puts up one Watch call on `cq` (none once `calls` is stopping).
  static void Request(AdminService* service, grpc::ServerCompletionQueue* cq, CallTracker* calls);

  WatchCall(AdminService* service, grpc::ServerCompletionQueue* cq, CallTracker* calls);

  void OnEvent(const v1::Event& event) override;

 private:
  struct Op final : CqTag {
    Op(WatchCall* c, void (WatchCall::*f)(bool)) : call(c), fn(f) {}
    void OnComplete(bool ok) override { (call->*fn)(ok); }
    WatchCall* const call;
    void (WatchCall::*const fn)(bool);
  };

  void OnAccepted(bool ok);
  void OnWriteDone(bool ok);
  void OnFinishDone(bool ok);
  void OnCallDone(bool ok);
  void StartWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True (once) when the call has ended; the caller then calls End().
  bool TakeEndedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void End();

  AdminService* const service_;
  EventBus* const bus_;
  ControllerMetrics* const metrics_;
  const size_t max_queue_;
  grpc::ServerCompletionQueue* const cq_;
  CallTracker* const calls_;
  std::shared_ptr<WatchCall> self_;

  grpc::ServerContext ctx_;
  v1::WatchRequest request_;
  grpc::ServerAsyncWriter<v1::Event> writer_{&ctx_};
  Op accept_op_{this, &WatchCall::OnAccepted};
  Op write_op_{this, &WatchCall::OnWriteDone};
  Op finish_op_{this, &WatchCall::OnFinishDone};
  Op done_op_{this, &WatchCall::OnCallDone};

  absl::Mutex mu_;
  std::deque<v1::Event> queue_ ABSL_GUARDED_BY(mu_);  // front() is being written while writing_
  bool accepted_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;  // no further write starts
  bool finish_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool call_done_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ADMIN_WATCH_STREAM_H_
