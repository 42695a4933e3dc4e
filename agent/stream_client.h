#ifndef ROCETUNE_AGENT_STREAM_CLIENT_H_
#define ROCETUNE_AGENT_STREAM_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "agent/agent_metrics.h"
#include "agent/report_wire.h"
#include "daemon/clock.h"
#include "daemon/tls.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/rpc_method.h"
#include "rocetune/v1/agent.grpc.pb.h"

namespace rocetune {

struct StreamClientOptions {
  std::string controller = "127.0.0.1:7070";  // as configured, for messages
  std::string host_id;                        // for messages
  // Mutual TLS to the controller; not enabled: plaintext.
  TlsOptions tls;
  // See AgentOptions.
  absl::Duration refused_backoff = absl::Seconds(60);
  absl::Duration reconnect_min = absl::Milliseconds(200);
  absl::Duration reconnect_max = absl::Seconds(3);
  size_t report_buffer_max = 300;
  size_t report_buffer_max_bytes = size_t{4} << 20;
  absl::Duration stall_timeout = absl::Seconds(5);
  AgentMetrics* metrics = nullptr;  // optional, not owned
};

// What the stream client did, for tests and AgentStats.
struct StreamStats {
  uint64_t connects = 0;
  uint64_t reports_sent = 0;          // live and held
  uint64_t local_rounds = 0;          // reports offered while not connected
  uint64_t reports_held_sent = 0;     // held reports sent after a reconnect or a slow write
  uint64_t reports_held_dropped = 0;  // held reports dropped (buffer full)
  uint64_t stalls = 0;                // streams cancelled for a stalled write
  size_t reports_held = 0;            // held now
  bool connected = false;             // a stream is up (Hello written)
};

// The agent's side of AgentService.Connect: connects (and reconnects, with
// jittered backoff), sends Hello, then one writer thread writes what is
// queued (replies first, then the live report, then held reports, oldest
// first, each with how long it was held); a reader thread hands the
// controller's messages to the agent. A write that does not complete within
// the stall timeout ends the stream. Reports offered while the stream is down
// or the writer is busy are held in a bounded ring; their guard events wait
// for the next live report. All waits are on the clock seam, except the
// deadlines gRPC itself keeps (in real time).
class StreamClient {
 public:
  struct Handlers {
    // The Hello of each connection.
    absl::AnyInvocable<absl::StatusOr<v1::Hello>()> hello;
    // One controller message, and its bytes as received; returns the reply
    // to queue, if any. Called on the stream's reader thread.
    absl::AnyInvocable<std::optional<v1::AgentMessage>(const v1::ControllerMessage& msg,
                                                       absl::string_view wire)>
        message;
  };

  // `target` is the address to dial (checked by the caller); `clock` is not owned.
  static absl::StatusOr<std::unique_ptr<StreamClient>> Create(StreamClientOptions options,
                                                              const std::string& target,
                                                              Clock* clock, Handlers handlers);
  ~StreamClient();

  // Connects and reconnects until Stop(). Returns OK after Stop(), or the
  // error of a Hello that could not be built as invalid.
  absl::Status Run();
  // Thread-safe; makes Run() return promptly. Final.
  void Stop();

  // One round's report, from the sampling loop: sent next when the stream is
  // up and the writer idle, else held (its guard events kept for the next
  // live report). Guard events kept from earlier rounds join a live report.
  void Offer(v1::Report* report);

  StreamStats stats() const;
  // How long the agent has been without contact with its controller
  // (Clock::Monotonic time; since the client was made, before the first):
  // zero while a stream is up that the controller has sent a message on or
  // that has lasted a stall timeout. A stream refused or dropped at once
  // does not reset it.
  absl::Duration DisconnectedFor() const;

  using Stream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

 private:
  StreamClient(StreamClientOptions options, Clock* clock, Handlers handlers);
  absl::Status MakeChannel(const std::string& target);
  // One connection lifetime; returns when the stream ends.
  absl::Status RunStream();
  // Writes queued messages until the stream ends or Stop.
  void WriteQueued(Stream* stream);
  bool WriteBytes(Stream* stream, absl::string_view bytes);
  // Encodes `report` (its guard events taken out first) into the held ring,
  // dropping the oldest beyond its bounds.
  void HoldLocked(v1::Report* report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void KeepGuardEventsLocked(v1::Report* report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TrimHeldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool InContactLocked(absl::Duration now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A report waiting to be written: the encoded AgentMessage, when its round
  // was taken (Clock::Monotonic), and copies of the guard events the encoding
  // carries (given back to the kept events if it is dropped unsent).
  struct Pending {
    std::string bytes;
    absl::Duration taken;
    std::vector<v1::GuardEvent> events;
  };

  StreamClientOptions options_;
  Clock* clock_;
  Handlers handlers_;
  std::shared_ptr<grpc::Channel> channel_;
  std::string connect_method_;  // "/rocetune.v1.AgentService/Connect"
  std::unique_ptr<grpc::internal::RpcMethod> connect_;
  absl::Notification stopped_;
  // When the write in progress started (Clock::Monotonic in nanoseconds; -1
  // for none), read by the stream's stall watch.
  std::atomic<int64_t> write_started_nanos_{-1};

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* active_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Hello written and the stream not yet over.
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration disconnected_since_ ABSL_GUARDED_BY(mu_);
  // The current stream: when its Hello was written, and whether a message
  // from the controller came on it.
  absl::Duration connected_at_ ABSL_GUARDED_BY(mu_);
  bool heard_ ABSL_GUARDED_BY(mu_) = false;
  bool stream_over_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::string> replies_ ABSL_GUARDED_BY(mu_);
  std::optional<Pending> live_ ABSL_GUARDED_BY(mu_);
  std::deque<Pending> held_ ABSL_GUARDED_BY(mu_);
  size_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::GuardEvent> kept_events_ ABSL_GUARDED_BY(mu_);
  ReportWireEncoder encoder_ ABSL_GUARDED_BY(mu_);
  StreamStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_STREAM_CLIENT_H_
