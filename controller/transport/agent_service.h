#ifndef ROCETUNE_CONTROLLER_TRANSPORT_AGENT_SERVICE_H_
#define ROCETUNE_CONTROLLER_TRANSPORT_AGENT_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "controller/transport/agent_stream.h"
#include "controller/transport/cq_tag.h"
#include "grpcpp/grpcpp.h"
#include "rocetune/v1/agent.grpc.pb.h"

namespace rocetune::controller {

// AgentService on gRPC's async API. Agent streams are spread over several
// completion queues, each drained by its own thread: open streams cost memory,
// not threads, and each completion searches only its own queue's outstanding
// operations. (Debian's libgrpc is built with completion-queue tag checks on:
// every completion scans the queue's list of outstanding operations. With the
// callback API all streams share one queue, so at 10k streams that scan took
// about a quarter of the controller's CPU.)
//
// The queues also carry the AdminService's calls (queue(0)), so that no
// gRPC thread other than these polls the connections: a callback service
// would make gRPC start threads of its own that take the connections' reads
// and hand every completion over to these threads (a futex wake and a context
// switch per Report at 10k agents). Every tag on the queues is a CqTag, and
// every call object counts itself through CallTracker (this).
//
// Order: AddTo(builder) before BuildAndStart, Start() after it; after
// grpc::Server::Shutdown has returned, Stop() (also run by the destructor).
class AgentService final
    : public v1::AgentService::WithRawMethod_Connect<v1::AgentService::Service>,
      public CallTracker {
 public:
  // `queues` completion queues and threads; at least 1.
  AgentService(const AgentStreamDeps& deps, int queues);
  ~AgentService() override;
  AgentService(const AgentService&) = delete;
  AgentService& operator=(const AgentService&) = delete;

  // Registers the service and its completion queues.
  void AddTo(grpc::ServerBuilder* builder);
  // Requests the first calls on every queue and starts the threads.
  void Start();
  // A queue for other services' calls (valid after AddTo; i < queue count).
  grpc::ServerCompletionQueue* queue(size_t i) { return cqs_[i].get(); }
  // CallTracker.
  bool Enter() override;
  void Leave() override;
  // Waits (bounded) for the streams to end, then shuts the queues down and
  // joins the threads. Idempotent.
  void Stop();

 private:
  // Requests one more Connect call on `cq` (unless stopping).
  void RequestOne(grpc::ServerCompletionQueue* cq);
  void Serve(grpc::ServerCompletionQueue* cq);

  const AgentStreamDeps deps_;
  const int queue_count_;
  std::atomic<uint64_t> next_stream_id_{1};
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs_;
  std::vector<std::thread> threads_;

  absl::Mutex mu_;
  // Calls (agent streams, admin calls) not yet ended, including those waiting
  // to be accepted.
  int64_t live_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_TRANSPORT_AGENT_SERVICE_H_
