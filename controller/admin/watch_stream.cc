#include "controller/admin/watch_stream.h"

namespace rocetune::controller {

WatchStream* WatchStream::Start(EventBus* bus, ControllerMetrics* metrics, size_t max_queue) {
  auto stream = std::make_shared<WatchStream>(bus, metrics, max_queue);
  stream->self_ = stream;
  bus->Subscribe(stream);
  return stream.get();
}

void WatchStream::OnEvent(const v1::Event& event) {
  const v1::Event* to_write = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (closing_ || finished_) return;
    if (queue_.size() >= max_queue_) {
      metrics_->WatchEventDropped();
      return;
    }
    queue_.push_back(event);
    if (!writing_) {
      writing_ = true;
      to_write = &queue_.front();
    }
  }
  if (to_write != nullptr) StartWrite(to_write);
}

void WatchStream::OnWriteDone(bool ok) {
  const v1::Event* to_write = nullptr;
  bool finish = false;
  grpc::Status st;
  {
    absl::MutexLock lock(&mu_);
    queue_.pop_front();
    if (!ok) {
      queue_.clear();
      closing_ = true;
      status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed");
    }
    if (!queue_.empty() && !closing_) {
      to_write = &queue_.front();
    } else {
      writing_ = false;
      if (closing_ && !finished_) {
        finished_ = true;
        finish = true;
        st = status_;
      }
    }
  }
  if (to_write != nullptr) StartWrite(to_write);
  if (finish) Finish(st);
}

void WatchStream::End(const grpc::Status& status) {
  bool finish = false;
  {
    absl::MutexLock lock(&mu_);
    if (closing_ || finished_) return;
    closing_ = true;
    status_ = status;
    if (!writing_) {
      finished_ = true;
      finish = true;
    }
  }
  if (finish) Finish(status);
}

void WatchStream::OnCancel() { End(grpc::Status::CANCELLED); }

void WatchStream::OnDone() {
  bus_->Unsubscribe(this);
  std::shared_ptr<WatchStream> self = std::move(self_);  // may delete this on return
}

}  // namespace rocetune::controller
