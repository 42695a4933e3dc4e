#include "controller/controller.h"

#include <arpa/inet.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "daemon/address.h"
#include "daemon/logging.h"
#include "daemon/process_metrics.h"

namespace rocetune::controller {
namespace {

// Splits "host:port" / "[v6]:port".
bool SplitHostPort(const std::string& address, std::string* host, int* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  std::string h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) return false;
  if (!absl::SimpleAtoi(address.substr(colon + 1), port) || *port < 0 || *port > 65535) {
    return false;
  }
  *host = h;
  return true;
}

// Logs failed store writes: the first at once, then at most one line every
// 10 s carrying how many failed meanwhile (a full disk fails every write).
// Called under the store's lock, so never concurrently.
class StoreErrorLog {
 public:
  void Record(const absl::Status& e) {
    ++failed_;
    const absl::Time now = absl::Now();
    if (now < next_) return;
    next_ = now + absl::Seconds(10);
    LogError("store write failed: nothing of it was kept",
             {{"error", e.ToString()}, {"failed_writes_since_last_line", absl::StrCat(failed_)}});
    failed_ = 0;
  }

 private:
  absl::Time next_ = absl::InfinitePast();
  uint64_t failed_ = 0;
};

// Refused TLS handshakes: counted in `metrics`, their aggregated audit rows
// written on the control loop, never on gRPC's handshake thread.
std::shared_ptr<TlsRefusalLog> NewTlsRefusalLog(Store* store, ControlLoop* loop,
                                                ControllerMetrics* metrics, Clock* clock,
                                                absl::Duration period) {
  std::function<void(const v1::AuditEntry&)> emit;
  if (store != nullptr) {
    emit = [loop](const v1::AuditEntry& e) { loop->Audit(e, "a refused TLS handshake"); };
  }
  TlsRefusalLogOptions opt;
  opt.period = period;
  return std::make_shared<TlsRefusalLog>(
      clock, std::move(emit), [metrics](const std::string& reason) { metrics->TlsRefused(reason); },
      opt);
}

}  // namespace

bool IsLoopbackAddress(const std::string& address) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(address, &host, &port)) return false;
  if (host == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6);
  }
  return false;
}

namespace {

// The options Start refuses, before anything is opened.
absl::Status CheckOptions(const ControllerOptions& options) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(options.listen, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen=\"", options.listen, "\": want host:port"));
  }
  if (!options.metrics_address.empty() && !SplitHostPort(options.metrics_address, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_address=\"", options.metrics_address, "\": want host:port"));
  }
  if (options.window <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--window must be positive");
  }
  if (options.retention < options.window) {
    return absl::InvalidArgumentError("--retention must be at least one --window");
  }
  if (options.stale_after <= absl::ZeroDuration() || options.gone_after <= options.stale_after) {
    return absl::InvalidArgumentError("want 0 < --stale_after < --gone_after");
  }
  if (options.max_message_bytes < 1024) {
    return absl::InvalidArgumentError("--max_message_bytes must be at least 1024");
  }
  if (options.probe_replan_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--probe_replan_delay must not be negative");
  }
  if (options.max_outbound_queue < 1) {
    return absl::InvalidArgumentError("--max_outbound_queue must be at least 1");
  }
  if (!(options.probe_rate > 0 && options.probe_rate <= 1e6)) {
    return absl::InvalidArgumentError(
        "--probe_rate must be in (0, 1e6] probes per second per peer");
  }
  if (options.probe_peers < 1 || options.probe_peers > 1024) {
    return absl::InvalidArgumentError("--probe_peers must be 1 to 1024");
  }
  if (options.stream_threads < 0 || options.stream_threads > 256) {
    return absl::InvalidArgumentError("--stream_threads must be 0 (automatic) to 256");
  }
  return absl::OkStatus();
}

// Who may call and how the port is secured: mutual TLS with a roles file (the
// credentials are made once the audit path exists), or plaintext on a
// loopback --listen address, resolved into `listen`.
absl::Status CheckSecurity(const ControllerOptions& options,
                           std::unique_ptr<Authorizer>* authorizer,
                           std::shared_ptr<grpc::ServerCredentials>* creds, std::string* listen) {
  *listen = options.listen;
  if (options.tls.enabled()) {
    if (absl::Status s = CheckTlsOptions(options.tls); !s.ok()) return s;
    if (options.tls_refusal_audit_period <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("the TLS refusal audit period must be positive");
    }
    if (options.roles_file.empty()) {
      return absl::InvalidArgumentError(
          "--roles_file is required with mutual TLS: it says which certificate identities are "
          "viewers, operators, approvers and agents");
    }
    absl::StatusOr<std::unique_ptr<Authorizer>> a = Authorizer::Load(options.roles_file);
    if (!a.ok()) return a.status();
    *authorizer = *std::move(a);
    return absl::OkStatus();
  }
  if (!options.insecure_loopback) {
    return absl::FailedPreconditionError(
        "no TLS files given: pass --tls_cert, --tls_key and --tls_ca, or --insecure_loopback "
        "for plaintext on a loopback --listen address");
  }
  if (!options.roles_file.empty()) {
    return absl::InvalidArgumentError(
        "--roles_file needs mutual TLS: without certificates no identity is verified and "
        "roles are not enforced");
  }
  absl::StatusOr<std::string> resolved = ResolveLoopback(options.listen, "--listen");
  if (!resolved.ok()) return resolved.status();
  *listen = *resolved;
  *creds = grpc::InsecureServerCredentials();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Controller>> Controller::Start(const ControllerOptions& options,
                                                              Clock* clock) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  std::shared_ptr<grpc::ServerCredentials> creds;
  std::unique_ptr<Authorizer> authorizer;
  std::string listen;
  if (absl::Status s = CheckSecurity(options, &authorizer, &creds, &listen); !s.ok()) return s;

  std::unique_ptr<Controller> c(new Controller(options, clock));
  c->authorizer_ = std::move(authorizer);
  c->metrics_ = std::make_unique<ControllerMetrics>();
  if (!options.state_dir.empty()) {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options.state_dir);
    if (!store.ok()) return store.status();
    c->store_ = *std::move(store);
    ControllerMetrics* m = c->metrics_.get();
    c->store_->set_latency_observer([m](double s) { m->StoreWrite(s); });
    c->store_->set_error_observer(
        [m, log = std::make_shared<StoreErrorLog>()](const absl::Status& e) {
          m->StoreError(e.code());
          log->Record(e);
        });
  }
  TelemetryOptions topt;
  topt.window = options.window;
  topt.retention = options.retention;
  c->telemetry_ = std::make_unique<TelemetryStore>(topt);
  FleetOptions fopt;
  fopt.stale_after = options.stale_after;
  fopt.gone_after = options.gone_after;
  fopt.probe_replan_delay = options.probe_replan_delay;
  fopt.observe_only = options.observe_only;
  fopt.probes.probes_per_second = options.probe_rate;
  fopt.probes.max_peers = options.probe_peers;
  fopt.probes.locality_label = options.probe_locality_label;
  c->loop_ = std::make_unique<ControlLoop>(c->store_.get());
  c->fleet_ =
      std::make_unique<Fleet>(clock, c->telemetry_.get(), c->store_.get(), &c->events_, fopt);
  c->fleet_->SetControlLoop(c->loop_.get());
  if (absl::Status s = c->fleet_->LoadFromStore(); !s.ok()) return s;
  RolloutOptions ropt;
  ropt.tick = options.rollout_tick;
  ropt.window = options.window;
  ropt.retention = options.retention;
  ropt.probe_locality_label = options.probe_locality_label;
  ropt.max_message_bytes = static_cast<size_t>(options.max_message_bytes);
  ropt.proposal_ttl = options.proposal_ttl;
  ropt.restore_confirm_timeout = options.restore_confirm_timeout;
  c->rollout_ =
      std::make_unique<RolloutManager>(c->fleet_.get(), c->telemetry_.get(), c->store_.get(),
                                       &c->events_, clock, ropt, c->loop_.get());
  c->rollout_->set_metrics(&c->metrics_->rollout());
  c->rollout_->set_authorizer(c->authorizer_.get());
  if (absl::Status s = c->rollout_->Load(); !s.ok()) return s;

  AgentStreamDeps adeps{c->fleet_.get(), c->metrics_.get(), clock, options.max_outbound_queue,
                        static_cast<size_t>(options.max_message_bytes)};
  adeps.authorizer = c->authorizer_.get();
  if (c->store_ != nullptr) {
    adeps.audit = [loop = c->loop_.get()](const v1::AuditEntry& e) {
      loop->Audit(e, "a refused agent");
    };
  }
  int stream_threads = options.stream_threads;
  if (stream_threads <= 0) {
    stream_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  c->agent_service_ = std::make_unique<AgentService>(adeps, stream_threads);
  AdminDeps mdeps{c->fleet_.get(),  c->telemetry_.get(), c->store_.get(),
                  &c->events_,      c->metrics_.get(),   clock,
                  c->rollout_.get()};
  mdeps.authorizer = c->authorizer_.get();
  mdeps.max_message_bytes = static_cast<size_t>(options.max_message_bytes);
  c->admin_service_ = std::make_unique<AdminService>(mdeps);
  if (options.tls.enabled()) {
    c->tls_refusals_ = NewTlsRefusalLog(c->store_.get(), c->loop_.get(), c->metrics_.get(), clock,
                                        options.tls_refusal_audit_period);
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> tls = MakeServerCredentials(
        options.tls, [log = c->tls_refusals_](const TlsRefusal& r) { log->Record(r); });
    if (!tls.ok()) return tls.status();
    creds = *std::move(tls);
  }

  if (absl::Status s = c->Serve(listen, creds); !s.ok()) return s;
  if (!options.metrics_address.empty()) {
    auto exposer = MetricsExposer::Start(options.metrics_address, c->metrics_->registry());
    if (!exposer.ok()) return exposer.status();
    c->exposer_ = *std::move(exposer);
    c->exposer_->AddCollectable(std::make_shared<ProcessMetrics>("controller"));
  }
  c->rollout_->Start();
  c->Tick();
  if (options.tick_interval > absl::ZeroDuration()) {
    Controller* self = c.get();
    c->ticker_ = std::thread([self]() {
      while (!self->stop_.WaitForNotificationWithTimeout(self->options_.tick_interval)) {
        self->Tick();
      }
    });
  }
  return c;
}

absl::Status Controller::Serve(const std::string& listen,
                               std::shared_ptr<grpc::ServerCredentials> creds) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, creds, &grpc_port_);
  agent_service_->AddTo(&builder);
  builder.RegisterService(admin_service_.get());
  // The agent streams check --max_message_bytes themselves (and count what they
  // refuse); gRPC's own limit sits above it and stops anything far larger.
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<int64_t>(int64_t{4} * options_.max_message_bytes, INT32_MAX)));
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  // Another process on the same port must be an error, not a shared listener.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // No HTTP/2 keepalive pings from the controller. This gRPC re-arms a
  // connection's keepalive timer on every read, and Debian's build (asserts
  // on) walks a debug hash chain of all live timers each time: about 12% of
  // the controller's CPU at 10k agents. Agents report every second; one
  // silent for --gone_after has its stream closed by the fleet sweep.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, INT_MAX);
  // No HTTP/2 BDP probing either. It sizes receive windows for bulk
  // transfers; an agent sends about 18 KB a second. Each probe is a PING the
  // agent answers (a capture of 20 agents at 5 Reports/s: one PING each way
  // per 3 Reports). Without it the controller's CPU per Report at 10k agents
  // fell from about 100 to 70 µs (bench/controller_load_bench, paced phase).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || grpc_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.listen, " (address in use or not local?)"));
  }
  // Admin calls ride on the first stream queue (see AgentService).
  admin_service_->Start(agent_service_->queue(0), agent_service_.get());
  agent_service_->Start();
  return absl::OkStatus();
}

void Controller::Tick() {
  absl::MutexLock lock(&tick_mu_);
  if (tls_refusals_ != nullptr) tls_refusals_->Flush();
  fleet_->Sweep();
  metrics_->UpdateFleet(fleet_->Counts());
  absl::Time now = clock_->Now();
  telemetry_->Prune(now);
  const TelemetryStore::Footprint f = telemetry_->footprint();
  metrics_->UpdateTelemetry(f.windows, f.bytes);
  int64_t index = telemetry_->WindowIndex(now);
  if (index != last_group_window_) {
    last_group_window_ = index;
    std::map<std::string, TelemetrySummary> groups;
    for (const auto& [group, ids] : fleet_->GroupBy(options_.group_label)) {
      groups[group] = telemetry_->Summarize(ids, telemetry_->WindowStart(index - 1),
                                            telemetry_->WindowStart(index));
    }
    metrics_->UpdateGroups(groups);
  }
}

void Controller::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stop_.Notify();
  if (ticker_.joinable()) ticker_.join();
  // A rehearsal in the simulator would hold its call (and so the shutdown)
  // until its scenario ends.
  if (admin_service_ != nullptr) admin_service_->StopRehearsals();
  if (server_ != nullptr) {
    // Pending calls are cancelled at the deadline; reactors then finish.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    server_->Wait();
  }
  // Pending refusal counts go out before the control loop drains; later
  // handshakes (none once the server is down) are ignored.
  if (tls_refusals_ != nullptr) tls_refusals_->Close();
  // The streams' completion queues go down after the server; admin calls
  // waiting on the control loop are answered first (it drains on Stop), and
  // the fleet's last host and audit rows are written.
  if (agent_service_ != nullptr) agent_service_->Stop();
  if (rollout_ != nullptr) rollout_->Stop();
  if (loop_ != nullptr) loop_->Stop();
  exposer_.reset();
}

Controller::~Controller() { Stop(); }

}  // namespace rocetune::controller
