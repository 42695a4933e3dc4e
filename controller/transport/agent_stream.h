#ifndef ROCETUNE_CONTROLLER_TRANSPORT_AGENT_STREAM_H_
#define ROCETUNE_CONTROLLER_TRANSPORT_AGENT_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "controller/admin/authorizer.h"
#include "controller/controller_metrics.h"
#include "controller/fleet/agent_connection.h"
#include "controller/fleet/fleet.h"
#include "controller/telemetry/telemetry_store.h"
#include "controller/transport/cq_tag.h"
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
  // With mutual TLS: only an identity with the agent role may register, and
  // only as the host id equal to its identity. Null: not enforced.
  const Authorizer* authorizer = nullptr;
  // Appends an audit row (a refused Hello); may be empty.
  std::function<void(const v1::AuditEntry&)> audit = nullptr;
};

class AgentStream;

// A completion-queue tag: which stream, which operation. Every operation a
// stream starts carries one of its own four tags.
struct StreamOp final : CqTag {
  enum Kind : uint8_t { kAccept, kRead, kWrite, kFinish };
  StreamOp(AgentStream* s, Kind k) : stream(s), kind(k) {}
  void OnComplete(bool ok) override;
  AgentStream* const stream;
  const Kind kind;
};

// One agent's Connect stream on gRPC's async API, driven by the thread of the
// completion queue it was accepted on (AgentService). The first message must
// be a Hello; then Reports go to telemetry and Ack/Nack replies are checked
// against the nonces this stream issued (xDS: a reply carrying an older nonce
// is ignored; one carrying a nonce or version never sent is refused).
// Refused input ends the stream with a status naming the problem.
//
// Operations: at most one read, one write and one finish outstanding, each
// started under mu_. The stream is done once Finish has completed and no read
// or write is outstanding; it then unregisters and drops its self-reference.
// Whoever holds it as an AgentConnection may keep it (calls are then ignored).
class AgentStream final : public AgentConnection, public std::enable_shared_from_this<AgentStream> {
 public:
  // Called once when the stream is done (after OnDone's own work).
  using DoneCallback = std::function<void()>;
  // Called when the call has been accepted, before the stream's first read
  // (the service requests the next call there).
  using AcceptedCallback = std::function<void()>;

  // Creates a stream waiting to be accepted; `service` requests the call with
  // accept_tag(). The stream holds itself until it is done, or until the
  // accept fails.
  // `ids` numbers the streams as they are accepted.
  static std::shared_ptr<AgentStream> Create(const AgentStreamDeps& deps,
                                             std::atomic<uint64_t>* ids, AcceptedCallback accepted,
                                             DoneCallback done);

  grpc::ServerContext* context() { return &ctx_; }
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* io() { return &io_; }
  void* accept_tag() { return &accept_op_; }

  // Dispatches a completion of one of this stream's tags.
  void OnEvent(StreamOp::Kind kind, bool ok);

  uint64_t stream_id() const override { return stream_id_; }
  void PushDesiredState(const std::string& version, const v1::ParameterSet& params,
                        uint32_t lease_seconds) override;
  void PushProbePlan(const v1::ProbePlan& plan) override;
  void Close(const absl::Status& status) override;

  AgentStream(const AgentStreamDeps& deps, std::atomic<uint64_t>* ids, AcceptedCallback accepted,
              DoneCallback done)
      : deps_(deps),
        ids_(ids),
        accepted_callback_(std::move(accepted)),
        done_callback_(std::move(done)) {}

 private:
  void OnAccepted(bool ok);
  void OnReadDone(bool ok);
  void OnWriteDone(bool ok);
  void OnFinishDone();
  // Unregisters, counts and drops the self-reference (may delete this).
  void OnDone();

  // Handles in_; a non-OK status ends the stream.
  absl::Status HandleMessage();
  // Decodes in_bytes_ as a Report with ReportDecoder (this thread's fast-path
  // state); false: parse it with protobuf instead.
  bool DecodeReportInPlace();
  // OK when the caller may register as `hello`'s host (see AgentStreamDeps);
  // else PERMISSION_DENIED, audited.
  absl::Status CheckHelloIdentity(const v1::Hello& hello);
  // A Report of the registered host: telemetry, then counted.
  absl::Status HandleReport(const v1::Report& head, absl::Span<const CounterInput> counters);
  // Queues `msg` (replacing a queued message of the same kind) and starts a write.
  void Enqueue(v1::ControllerMessage msg);
  absl::Status HandleReply(v1::ResourceKind kind, const std::string& version,
                           const std::string& nonce);
  // Parses in_bytes_ into a fresh message on the (reset) read arena; refuses
  // oversized and unparseable bytes (counted) with a status naming the problem.
  absl::Status ParseInbound();

  void StartReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Serializes queue_.front() and starts writing it.
  void StartWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True (once) when nothing is outstanding after Finish.
  bool TakeDoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AgentStreamDeps deps_;
  std::atomic<uint64_t>* const ids_;
  uint64_t stream_id_ = 0;  // set when accepted, before anyone else sees the stream
  const AcceptedCallback accepted_callback_;
  const DoneCallback done_callback_;
  std::shared_ptr<AgentStream> self_;

  grpc::ServerContext ctx_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> io_{&ctx_};
  StreamOp accept_op_{this, StreamOp::kAccept};
  StreamOp read_op_{this, StreamOp::kRead};
  StreamOp write_op_{this, StreamOp::kWrite};
  StreamOp finish_op_{this, StreamOp::kFinish};

  // Read side: touched only by the completion of the one outstanding read.
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
  std::string host_id_;
  std::shared_ptr<HostTelemetry> telemetry_;

  absl::Mutex mu_;
  grpc::ByteBuffer out_bytes_ ABSL_GUARDED_BY(mu_);  // the write in flight
  // queue_.front() is being written while writing_.
  std::deque<v1::ControllerMessage> queue_ ABSL_GUARDED_BY(mu_);
  bool read_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;         // Close requested
  bool finished_ ABSL_GUARDED_BY(mu_) = false;        // Finish started
  bool finish_pending_ ABSL_GUARDED_BY(mu_) = false;  // Finish not yet completed
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
  uint64_t nonces_issued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t latest_nonce_ ABSL_GUARDED_BY(mu_) = 0;
  std::string latest_version_ ABSL_GUARDED_BY(mu_);
  // The same for ProbePlan (nonces come from one counter; staleness is per kind).
  uint64_t latest_probe_nonce_ ABSL_GUARDED_BY(mu_) = 0;
  std::string latest_probe_version_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_TRANSPORT_AGENT_STREAM_H_
