#include "controller/agent_service.h"

namespace rocetune::controller {

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* AgentService::Connect(
    grpc::CallbackServerContext*) {
  return AgentStream::Start(deps_, next_stream_id_.fetch_add(1));
}

}  // namespace rocetune::controller
