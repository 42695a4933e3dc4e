#ifndef ROCETUNE_CONTROLLER_CONTROLLER_H_
#define ROCETUNE_CONTROLLER_CONTROLLER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "controller/admin/admin_service.h"
#include "controller/audit/tls_refusal_log.h"
#include "controller/control_loop.h"
#include "controller/controller_metrics.h"
#include "controller/fleet/event_bus.h"
#include "controller/fleet/fleet.h"
#include "controller/rollout/rollout_manager.h"
#include "controller/store/store.h"
#include "controller/telemetry/telemetry_store.h"
#include "controller/transport/agent_service.h"
#include "daemon/clock.h"
#include "daemon/metrics_exposer.h"
#include "daemon/tls.h"
#include "grpcpp/grpcpp.h"

namespace rocetune::controller {

struct ControllerOptions {
  std::string listen = "127.0.0.1:7070";           // port 0 picks a free port
  std::string metrics_address = "127.0.0.1:9470";  // "" = no /metrics endpoint
  std::string state_dir;                           // "" = no durable store
  // Mutual TLS for agents and CLI (client certificates required). Without it
  // the controller only serves plaintext, with insecure_loopback and on a
  // numeric loopback address or localhost.
  TlsOptions tls;
  bool insecure_loopback = false;
  // Text-format RolesConfig mapping certificate identities to roles; required
  // with TLS, refused without it (roles need verified identities).
  std::string roles_file;
  absl::Duration window = absl::Seconds(10);
  absl::Duration retention = absl::Minutes(10);
  absl::Duration stale_after = absl::Seconds(30);
  absl::Duration gone_after = absl::Seconds(120);
  int max_message_bytes = 1 << 20;
  size_t max_outbound_queue = 8;
  std::string group_label = "rack";  // label whose values are the metric groups
  // Joins and leaves within this delay share one probe replan (0: inline).
  absl::Duration probe_replan_delay = absl::Milliseconds(200);
  // Drift agents report is audited, never corrected.
  bool observe_only = false;
  // Latency probes the controller plans for every agent: probes per second
  // to each peer, and peers per host.
  double probe_rate = 10;
  int probe_peers = 16;
  // Host label whose values make probe peers near (peer class
  // "intra_<label>") or far ("inter_<label>"); half of each host's peers are
  // near. A policy's objective.peer_class must be one of the two.
  std::string probe_locality_label = "tor";
  // Completion queues (one thread each) that agent streams are spread over;
  // 0 picks one per CPU.
  int stream_threads = 0;
  // Period of the background sweep (liveness events, gauges, retention);
  // zero disables the thread (tests call Tick()).
  absl::Duration tick_interval = absl::Seconds(1);
  // Period at which active changes are driven (judge looks, stages, HOLD
  // limits); zero disables the ticker (tests call rollout().Tick()).
  absl::Duration rollout_tick = absl::Seconds(1);
  // A change left PROPOSED this long is rejected (RolloutOptions::proposal_ttl).
  absl::Duration proposal_ttl = absl::Hours(24);
  // RolloutOptions::restore_confirm_timeout.
  absl::Duration restore_confirm_timeout = absl::Minutes(2);
  // Refused TLS handshakes become at most one audit row per (reason,
  // certificate subject, issuer) per period, carrying their count.
  absl::Duration tls_refusal_audit_period = absl::Minutes(1);
};

// The controller: stores, registry, telemetry, gRPC services, /metrics.
class Controller {
 public:
  // Validates options, opens the store, reloads the fleet and starts serving.
  // kInvalidArgument for bad options (TLS files, roles file), kFailedPrecondition
  // when plaintext is not allowed, kUnavailable when an address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Controller>> Start(const ControllerOptions& options,
                                                           Clock* clock = Clock::Real());
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return exposer_ != nullptr ? exposer_->port() : 0; }

  Fleet& fleet() { return *fleet_; }
  TelemetryStore& telemetry() { return *telemetry_; }
  ControllerMetrics& metrics() { return *metrics_; }
  EventBus& events() { return events_; }
  Store* store() { return store_.get(); }
  RolloutManager& rollout() { return *rollout_; }
  ControlLoop& loop() { return *loop_; }

  // One sweep: liveness events, fleet and group gauges, telemetry retention.
  void Tick();
  // Stops serving (open streams end with UNAVAILABLE). Idempotent.
  void Stop();

 private:
  Controller(const ControllerOptions& options, Clock* clock) : options_(options), clock_(clock) {}
  // Builds the gRPC server on `listen` with the services made by Start, and
  // starts them.
  absl::Status Serve(const std::string& listen, std::shared_ptr<grpc::ServerCredentials> creds);

  const ControllerOptions options_;
  Clock* const clock_;
  std::unique_ptr<ControllerMetrics> metrics_;
  std::unique_ptr<Store> store_;
  EventBus events_;
  std::unique_ptr<TelemetryStore> telemetry_;
  std::unique_ptr<Fleet> fleet_;
  std::unique_ptr<RolloutManager> rollout_;
  // The single writer (controller/control_loop.h); stopped (drained) by
  // Stop after the services and the rollout manager's ticker.
  std::unique_ptr<ControlLoop> loop_;
  std::unique_ptr<Authorizer> authorizer_;  // null without TLS
  // Shared with the TLS credentials' verifier (which may outlive this
  // object inside gRPC); closed by Stop. Null without TLS.
  std::shared_ptr<TlsRefusalLog> tls_refusals_;
  std::unique_ptr<AgentService> agent_service_;
  std::unique_ptr<AdminService> admin_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsExposer> exposer_;
  int grpc_port_ = 0;
  absl::Mutex tick_mu_;
  int64_t last_group_window_ ABSL_GUARDED_BY(tick_mu_) = -1;
  absl::Notification stop_;
  std::thread ticker_;
  bool stopped_ = false;
};

// True for 127.0.0.0/8, ::1 and "localhost" in a "host:port" address.
bool IsLoopbackAddress(const std::string& address);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_CONTROLLER_H_
