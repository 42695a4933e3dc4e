#ifndef ROCETUNE_CONTROLLER_FLEET_AGENT_CONNECTION_H_
#define ROCETUNE_CONTROLLER_FLEET_AGENT_CONNECTION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "rocetune/v1/agent.pb.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune::controller {

// One agent stream as the fleet registry sees it. Implemented by the gRPC
// stream reactor; tests may implement it directly.
// Thread-safe; every method is non-blocking and may be called after the
// stream ended (the call is then ignored).
class AgentConnection {
 public:
  virtual ~AgentConnection() = default;
  // Unique per process, increasing with each accepted stream.
  virtual uint64_t stream_id() const = 0;
  // Queues a DesiredState push; the connection stamps a fresh per-stream
  // nonce. A queued, not yet written DesiredState is replaced (only the latest
  // matters); a full queue drops the message and counts it. `lease_seconds`
  // > 0 marks the set provisional (DesiredState.provisional_lease_seconds).
  virtual void PushDesiredState(const std::string& version, const v1::ParameterSet& params,
                                uint32_t lease_seconds) = 0;
  // Queues a ProbePlan push (the connection stamps the nonce); like
  // PushDesiredState only the newest queued plan is kept. Default: ignored.
  virtual void PushProbePlan(const v1::ProbePlan& plan) { (void)plan; }
  // Ends the stream with `status` (sent to the agent as the gRPC status).
  virtual void Close(const absl::Status& status) = 0;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_FLEET_AGENT_CONNECTION_H_
