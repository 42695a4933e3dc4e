// rocetune-controller: the fleet controller daemon.
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "controller/controller.h"
#include "controller/policy/policy_loader.h"
#include "daemon/grpc_log.h"
#include "daemon/init.h"
#include "daemon/logging.h"
#include "daemon/progress.h"
#include "daemon/shutdown.h"
#include "daemon/state_dir_lock.h"
#include "daemon/systemd_notify.h"
#include "rocetune/v1/config.pb.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7070",
          "gRPC address (host:port) for agents and rocetunectl; port 0 picks a free port.");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:9470",
          "Prometheus /metrics address (host:port); port 0 picks a free port.");
ABSL_FLAG(std::string, state_dir, "/var/lib/rocetune-controller",
          "Directory of the SQLite store (controller.db); empty keeps state in memory only.");
ABSL_FLAG(absl::Duration, window, absl::Seconds(10), "Telemetry window length.");
ABSL_FLAG(absl::Duration, retention, absl::Minutes(10),
          "How long telemetry windows are kept in memory.");
ABSL_FLAG(absl::Duration, stale_after, absl::Seconds(30),
          "A connected host without a report for this long is stale.");
ABSL_FLAG(absl::Duration, gone_after, absl::Seconds(120),
          "A host without a report for this long is gone.");
ABSL_FLAG(bool, insecure_loopback, false,
          "Serve plaintext gRPC without TLS files. Allowed only on a numeric loopback --listen "
          "address or localhost; identities are then declared, not verified, and roles are not "
          "enforced.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate (chain) of the controller; with --tls_key and --tls_ca enables mutual "
          "TLS: every agent and rocetunectl must present a certificate signed by --tls_ca.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA bundle that client certificates must chain to.");
ABSL_FLAG(absl::Duration, tls_refresh, absl::Seconds(10),
          "How often the TLS files are re-read (certificate and CA rotation needs no restart).");
ABSL_FLAG(std::string, roles_file, "",
          "Text-format RolesConfig mapping certificate identities (CN) to the roles viewer, "
          "operator, approver and agent; required with TLS.");
ABSL_FLAG(std::string, ready_file, "",
          "Once serving, write {\"grpc_port\":N,\"metrics_port\":M} to this file (atomically).");
ABSL_FLAG(int32_t, max_message_bytes, 1 << 20,
          "Largest agent or admin message accepted; larger ones are refused.");
ABSL_FLAG(int32_t, max_outbound_queue, 8,
          "Messages queued per agent stream before further ones are dropped (and counted).");
ABSL_FLAG(std::string, group_label, "rack",
          "Host label whose values form the groups of the per-group /metrics series.");
ABSL_FLAG(bool, observe_only, false,
          "Audit parameter drift that agents report, but never correct it (by default the "
          "host's desired state is pushed again).");
ABSL_FLAG(int32_t, stream_threads, 0,
          "Threads, each with its own gRPC completion queue, that agent streams are spread "
          "over (0 = one per CPU; at most 256).");
ABSL_FLAG(double, probe_rate, 10,
          "Latency probes per second each agent sends to each of its peers (the probe plan).");
ABSL_FLAG(int32_t, probe_peers, 16, "Peers in each agent's probe plan (half in its own ToR).");
ABSL_FLAG(std::string, probe_locality_label, "tor",
          "Host label whose values say which hosts share a ToR: half of each host's probe "
          "peers share its value (peer class intra_<label>), half do not (inter_<label>). Set "
          "it to the label your hosts' rack or ToR is in (e.g. rack).");
ABSL_FLAG(absl::Duration, proposal_ttl, absl::Hours(24),
          "A change still PROPOSED this long after its proposal is rejected by the controller "
          "(audited change_expired) and frees its hosts; 0 = never.");
ABSL_FLAG(absl::Duration, restore_confirm_timeout, absl::Minutes(2),
          "A host that has not acked the restore of a rolled-back or aborted change this long "
          "after the change ended (or NACKed it) is unconfirmed: counted in "
          "rocetune_controller_restores_unconfirmed and audited (restore_unconfirmed).");
ABSL_FLAG(absl::Duration, rollout_tick, absl::Seconds(1),
          "How often active changes and tuning campaigns are driven: judge looks, stage moves, "
          "HOLD limits, next trials.");
ABSL_FLAG(absl::Duration, probe_replan_delay, absl::Milliseconds(200),
          "Hosts joining or leaving within this delay share one recomputation of the probe "
          "pinglists (a fleet reconnecting at once costs one pass, not one per host). 0: "
          "recompute at every join and leave.");

namespace {

bool WriteReadyFile(const std::string& path, int grpc_port, int metrics_port) {
  std::string tmp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "{\"grpc_port\":" << grpc_port << ",\"metrics_port\":" << metrics_port << "}\n";
    if (!out.good()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The distribution's Abseil is built with mutex deadlock detection on; with a
  // mutex per host its lock graph dominated the per-report cost (seen in perf).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  rocetune::Shutdown::Install();
  rocetune::v1::ControllerConfig config_prototype;
  rocetune::InitDaemon(argc, argv, "controller",
                       "rocetune-controller: fleet registry, telemetry and desired state for "
                       "rocetune agents.\nUsage: rocetune-controller (--tls_cert=F --tls_key=F "
                       "--tls_ca=F --roles_file=F | --insecure_loopback) "
                       "[--listen=127.0.0.1:7070] [--state_dir=DIR] [flags]",
                       &config_prototype);
  rocetune::RouteGrpcLogs();  // gRPC's own lines: bounded, escaped, rate-limited

  rocetune::controller::ControllerOptions opt;
  opt.listen = absl::GetFlag(FLAGS_listen);
  opt.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  opt.state_dir = absl::GetFlag(FLAGS_state_dir);
  opt.insecure_loopback = absl::GetFlag(FLAGS_insecure_loopback);
  opt.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  opt.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  opt.tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  opt.tls.refresh = absl::GetFlag(FLAGS_tls_refresh);
  opt.roles_file = absl::GetFlag(FLAGS_roles_file);
  opt.window = absl::GetFlag(FLAGS_window);
  opt.retention = absl::GetFlag(FLAGS_retention);
  opt.stale_after = absl::GetFlag(FLAGS_stale_after);
  opt.gone_after = absl::GetFlag(FLAGS_gone_after);
  opt.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  int32_t queue = absl::GetFlag(FLAGS_max_outbound_queue);
  opt.max_outbound_queue = queue < 1 ? 0 : static_cast<size_t>(queue);
  opt.group_label = absl::GetFlag(FLAGS_group_label);
  opt.probe_replan_delay = absl::GetFlag(FLAGS_probe_replan_delay);
  opt.stream_threads = absl::GetFlag(FLAGS_stream_threads);
  opt.observe_only = absl::GetFlag(FLAGS_observe_only);
  opt.rollout_tick = absl::GetFlag(FLAGS_rollout_tick);
  opt.restore_confirm_timeout = absl::GetFlag(FLAGS_restore_confirm_timeout);
  if (opt.restore_confirm_timeout <= absl::ZeroDuration()) {
    std::fprintf(stderr, "rocetune-controller: --restore_confirm_timeout=%s: want a duration > 0\n",
                 absl::FormatDuration(opt.restore_confirm_timeout).c_str());
    return 2;
  }
  opt.proposal_ttl = absl::GetFlag(FLAGS_proposal_ttl);
  if (opt.proposal_ttl < absl::ZeroDuration()) {
    std::fprintf(stderr, "rocetune-controller: --proposal_ttl=%s: want a duration >= 0\n",
                 absl::FormatDuration(opt.proposal_ttl).c_str());
    return 2;
  }
  opt.probe_rate = absl::GetFlag(FLAGS_probe_rate);
  opt.probe_peers = absl::GetFlag(FLAGS_probe_peers);
  opt.probe_locality_label = absl::GetFlag(FLAGS_probe_locality_label);
  // A label name (the characters the policy validator accepts in a probe
  // peer class, KnownProbePeerClass), short enough that "inter_<label>" stays
  // well inside the telemetry store's limit on a peer class.
  const std::string& locality = opt.probe_locality_label;
  if (locality.size() > 63 ||
      !rocetune::controller::KnownProbePeerClass(absl::StrCat("intra_", locality), std::nullopt)) {
    std::fprintf(stderr,
                 "rocetune-controller: --probe_locality_label=\"%s\": want the name of the host "
                 "label that says which ToR or rack a host is in (e.g. tor, rack): 1-63 of "
                 "A-Z a-z 0-9 _ - . /\n",
                 locality.c_str());
    return 2;
  }

  // One controller per state dir: two would hand out the same versions.
  std::unique_ptr<rocetune::StateDirLock> state_lock;
  if (!opt.state_dir.empty()) {
    auto lock = rocetune::StateDirLock::Acquire(opt.state_dir, "rocetune-controller");
    if (!lock.ok()) {
      std::fprintf(stderr, "rocetune-controller: %s\n",
                   std::string(lock.status().message()).c_str());
      return 1;  // another instance holds it: a retry may succeed once it stops
    }
    state_lock = std::move(*lock);
  }
  auto controller = rocetune::controller::Controller::Start(opt);
  if (!controller.ok()) {
    std::fprintf(stderr, "rocetune-controller: %s\n",
                 std::string(controller.status().message()).c_str());
    rocetune::LogError("cannot start", {{"error", controller.status().ToString()}});
    return rocetune::StartupExitCode(controller.status());
  }
  int grpc_port = (*controller)->grpc_port();
  int metrics_port = (*controller)->metrics_port();
  std::string ready_file = absl::GetFlag(FLAGS_ready_file);
  if (!ready_file.empty() && !WriteReadyFile(ready_file, grpc_port, metrics_port)) {
    std::fprintf(stderr, "rocetune-controller: cannot write --ready_file %s\n", ready_file.c_str());
    return 1;
  }
  rocetune::LogInfo("ready", {{"grpc_port", absl::StrCat(grpc_port)},
                              {"metrics_port", absl::StrCat(metrics_port)},
                              {"state_dir", opt.state_dir}});
  // SIGHUP: only the log level changes live; the rest of --config needs a restart.
  rocetune::Shutdown::OnHangup(
      [&config_prototype]() { rocetune::ReloadOnHangup(config_prototype, {}, nullptr); });
  // The watchdog is petted only while the control loop (policy, change and
  // campaign calls, the rollout ticks) runs what is posted to it.
  rocetune::ProgressLoop* executor_progress =
      rocetune::Progress::Register("controller_executor", absl::Seconds(60));
  absl::Notification stop_heartbeat;
  std::thread heartbeat([&]() {
    do {
      (void)(*controller)->loop().Post([executor_progress] { executor_progress->Mark(); });
    } while (!stop_heartbeat.WaitForNotificationWithTimeout(absl::Seconds(1)));
  });
  rocetune::SystemdNotifier notifier;
  notifier.Ready(absl::StrCat("serving on port ", grpc_port));
  notifier.StartWatchdog(&rocetune::Progress::Healthy);

  rocetune::Shutdown::Wait();
  rocetune::Shutdown::OnHangup(nullptr);
  stop_heartbeat.Notify();
  heartbeat.join();
  rocetune::LogInfo("stopping", {{"signal", absl::StrCat(rocetune::Shutdown::Signal())}});
  notifier.Stopping();
  (*controller)->Stop();
  rocetune::LogInfo("stopped");
  return 0;
}
