#ifndef ROCETUNE_CONTROLLER_AGENT_SERVICE_H_
#define ROCETUNE_CONTROLLER_AGENT_SERVICE_H_

#include <atomic>
#include <cstdint>

#include "controller/agent_stream.h"
#include "grpcpp/grpcpp.h"
#include "rocetune/v1/agent.grpc.pb.h"

namespace rocetune::controller {

// AgentService on gRPC's callback API: each Connect gets an AgentStream
// reactor, so open streams cost memory, not threads.
class AgentService final
    : public v1::AgentService::WithRawCallbackMethod_Connect<v1::AgentService::Service> {
 public:
  explicit AgentService(const AgentStreamDeps& deps) : deps_(deps) {}

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Connect(
      grpc::CallbackServerContext* ctx) override;

 private:
  const AgentStreamDeps deps_;
  std::atomic<uint64_t> next_stream_id_{1};
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_AGENT_SERVICE_H_
