#ifndef ROCETUNE_CONTROLLER_ADMIN_WATCH_STREAM_H_
#define ROCETUNE_CONTROLLER_ADMIN_WATCH_STREAM_H_

#include <deque>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "controller/controller_metrics.h"
#include "controller/fleet/event_bus.h"
#include "grpcpp/grpcpp.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::controller {

// A Watch server stream: forwards fleet events with a bounded queue (events
// beyond it are dropped and counted). Ends when the client cancels or the
// server shuts down.
class WatchStream final : public grpc::ServerWriteReactor<v1::Event>,
                          public EventSubscriber,
                          public std::enable_shared_from_this<WatchStream> {
 public:
  // Subscribes to `bus`; the pointer stays valid until OnDone.
  static WatchStream* Start(EventBus* bus, ControllerMetrics* metrics, size_t max_queue);

  WatchStream(EventBus* bus, ControllerMetrics* metrics, size_t max_queue)
      : bus_(bus), metrics_(metrics), max_queue_(max_queue) {}

  void OnEvent(const v1::Event& event) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void End(const grpc::Status& status);

  EventBus* const bus_;
  ControllerMetrics* const metrics_;
  const size_t max_queue_;
  std::shared_ptr<WatchStream> self_;

  absl::Mutex mu_;
  std::deque<v1::Event> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ADMIN_WATCH_STREAM_H_
