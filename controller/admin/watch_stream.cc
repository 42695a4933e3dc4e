#include "controller/admin/watch_stream.h"

#include <algorithm>

#include "controller/admin/admin_service.h"

namespace rocetune::controller {

void WatchCall::Request(AdminService* service, grpc::ServerCompletionQueue* cq,
                        CallTracker* calls) {
  if (!calls->Enter()) return;
  auto call = std::make_shared<WatchCall>(service, cq, calls);
  call->self_ = call;
  // Must precede the request. gRPC delivers this tag only for a call that
  // started: a request that fails (shutdown) is handled in OnAccepted.
  call->ctx_.AsyncNotifyWhenDone(&call->done_op_);
  service->RequestWatch(&call->ctx_, &call->request_, &call->writer_, cq, cq, &call->accept_op_);
}

WatchCall::WatchCall(AdminService* service, grpc::ServerCompletionQueue* cq, CallTracker* calls)
    : service_(service),
      bus_(service->deps().events),
      metrics_(service->deps().metrics),
      max_queue_(service->deps().max_watch_queue),
      cq_(cq),
      calls_(calls) {}

void WatchCall::OnAccepted(bool ok) {
  if (!ok) {
    // Never started (the server is shutting down): no other tag will come.
    calls_->Leave();
    std::shared_ptr<WatchCall> self = std::move(self_);  // may delete this on return
    return;
  }
  Request(service_, cq_, calls_);  // the next Watch
  const grpc::Status allowed = service_->Authorize(ctx_, "Watch");
  {
    absl::MutexLock lock(&mu_);
    accepted_ = true;
    if (!allowed.ok()) {
      // Refused: finished at once, never subscribed.
      closing_ = true;
      finish_pending_ = true;
      writer_.Finish(allowed, &finish_op_);
      return;
    }
  }
  service_->AuditOutcome(ctx_, "Watch", grpc::Status::OK);
  // A resumed watch gets what it missed first: at most half a queue, so that
  // live events published while the replay is written still fit.
  bus_->SubscribeAfter(shared_from_this(), request_, std::max<size_t>(max_queue_ / 2, 4));
}

void WatchCall::OnEvent(const v1::Event& event) {
  absl::MutexLock lock(&mu_);
  if (closing_) return;
  if (queue_.size() >= max_queue_) {
    metrics_->WatchEventDropped();
    return;
  }
  queue_.push_back(event);
  if (!writing_) StartWriteLocked();
}

void WatchCall::StartWriteLocked() {
  writing_ = true;
  writer_.Write(queue_.front(), &write_op_);
}

void WatchCall::OnWriteDone(bool ok) {
  bool end = false;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    queue_.pop_front();
    if (!ok && !closing_) {
      // The client is gone or the call was cancelled.
      closing_ = true;
      queue_.clear();
      if (!call_done_) {
        finish_pending_ = true;
        writer_.Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"), &finish_op_);
      }
    }
    if (!closing_ && !queue_.empty()) StartWriteLocked();
    end = TakeEndedLocked();
  }
  if (end) End();
}

void WatchCall::OnFinishDone(bool) {
  bool end = false;
  {
    absl::MutexLock lock(&mu_);
    finish_pending_ = false;
    end = TakeEndedLocked();
  }
  if (end) End();
}

void WatchCall::OnCallDone(bool) {
  bool end = false;
  {
    absl::MutexLock lock(&mu_);
    call_done_ = true;
    closing_ = true;
    // A write in flight completes (failed); the rest is dropped.
    while (queue_.size() > (writing_ ? 1u : 0u)) queue_.pop_back();
    end = TakeEndedLocked();
  }
  if (end) End();
}

bool WatchCall::TakeEndedLocked() {
  if (ended_ || !accepted_ || !call_done_ || writing_ || finish_pending_) return false;
  ended_ = true;
  return true;
}

void WatchCall::End() {
  bus_->Unsubscribe(this);
  calls_->Leave();
  std::shared_ptr<WatchCall> self = std::move(self_);  // may delete this on return
}

}  // namespace rocetune::controller
