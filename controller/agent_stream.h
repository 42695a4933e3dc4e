#ifndef ROCETUNE_CONTROLLER_AGENT_STREAM_H_
#define ROCETUNE_CONTROLLER_AGENT_STREAM_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "controller/controller_metrics.h"
#include "controller/fleet/agent_connection.h"
#include "controller/fleet/fleet.h"
#include "daemon/clock.h"
#include "google/protobuf/arena.h"
#include "grpcpp/grpcpp.h"
#include "rocetune/v1/agent.grpc.pb.h"

namespace rocetune::controller {

struct AgentStreamDeps {
  Fleet* fleet;
  ControllerMetrics* metrics;
  Clock* clock;
  size_t max_outbound_queue = 8;
  // Inbound messages above this size are refused (kResourceExhausted) and counted.
  size_t max_message_bytes = 1 << 20;
};

// One agent's Connect stream on the callback API. The first message must be
// a Hello; then Reports go to telemetry and Ack/Nack replies are checked
// against the nonces this stream issued (xDS: a reply carrying an older nonce
// is ignored; one carrying a nonce or version never sent is refused).
// Refused input ends the stream with a status naming the problem.
//
// Lifetime: owned by a self-reference released in OnDone and by whoever holds
// it as an AgentConnection.
class AgentStream final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                          public AgentConnection,
                          public std::enable_shared_from_this<AgentStream> {
 public:
  // Creates a stream and starts reading. The returned pointer stays valid
  // until gRPC calls OnDone.
  static AgentStream* Start(const AgentStreamDeps& deps, uint64_t stream_id);

  uint64_t stream_id() const override { return stream_id_; }
  void PushDesiredState(const std::string& version, const v1::ParameterSet& params) override;
  void PushProbePlan(const v1::ProbePlan& plan) override;
  void Close(const absl::Status& status) override;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

  AgentStream(const AgentStreamDeps& deps, uint64_t stream_id)
      : deps_(deps), stream_id_(stream_id) {}

 private:
  // Handles in_; a non-OK status ends the stream.
  absl::Status HandleMessage();
  // Queues `msg` (replacing a queued message of the same kind) and starts a write.
  void Enqueue(v1::ControllerMessage msg);
  absl::Status HandleReply(v1::ResourceKind kind, const std::string& version,
                           const std::string& nonce);

  const AgentStreamDeps deps_;
  const uint64_t stream_id_;
  std::shared_ptr<AgentStream> self_;

  // Starts the next read of raw bytes.
  void StartNextRead();
  // Parses in_bytes_ into a fresh message on the (reset) read arena; refuses
  // oversized and unparseable bytes (counted) with a status naming the problem.
  absl::Status ParseInbound();
  // Serializes `msg` (the queue's front) and starts writing it.
  void StartWriteOf(const v1::ControllerMessage& msg);

  // Read side: touched only by OnReadDone (one read outstanding at a time).
  // The method is registered raw: gRPC hands over the bytes and the stream
  // parses them itself, so garbage and oversized messages are counted and
  // refused with a reason rather than failing inside gRPC. Every inbound
  // message is parsed into read_arena_, which is reset once the message is
  // handled. (Parsing into one reused heap message would not reuse
  // memory: AgentMessage's oneof member is deleted on every parse, so each
  // Report's 64+ strings and samples would be malloc'd and freed again.)
  grpc::ByteBuffer in_bytes_;
  google::protobuf::Arena read_arena_;
  v1::AgentMessage* in_ = nullptr;
  grpc::ByteBuffer out_bytes_;  // the write in flight (one at a time)
  std::string host_id_;
  std::shared_ptr<HostTelemetry> telemetry_;

  absl::Mutex mu_;
  // queue_.front() is being written while writing_.
  std::deque<v1::ControllerMessage> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;   // Close requested
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish called
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
  uint64_t nonces_issued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t latest_nonce_ ABSL_GUARDED_BY(mu_) = 0;
  std::string latest_version_ ABSL_GUARDED_BY(mu_);
  // The same for ProbePlan (nonces come from one counter; staleness is per kind).
  uint64_t latest_probe_nonce_ ABSL_GUARDED_BY(mu_) = 0;
  std::string latest_probe_version_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_AGENT_STREAM_H_
