// rocetune-agent: per-host daemon. Reads RoCE congestion counters, runs latency
// probes, applies DCQCN / PFC parameters transactionally, reports to the controller.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/agent.h"
#include "agent/agent_metrics.h"
#include "agent/probe/probe_stack.h"
#include "agent/real_host.h"
#include "agent/switch/sonic_switch.h"
#include "agent/switch/switch_counter_names.h"
#include "daemon/address.h"
#include "daemon/grpc_log.h"
#include "daemon/init.h"
#include "daemon/json.h"
#include "daemon/logging.h"
#include "daemon/metrics_exposer.h"
#include "daemon/process_metrics.h"
#include "daemon/progress.h"
#include "daemon/shutdown.h"
#include "daemon/state_dir_lock.h"
#include "daemon/systemd_notify.h"
#include "daemon/tls.h"
#include "google/protobuf/util/json_util.h"
#include "rocetune/v1/config.pb.h"

ABSL_FLAG(std::string, host_id, "", "Stable identity of this host (default: the hostname).");
ABSL_FLAG(std::string, controller, "127.0.0.1:7070", "Controller address (host:port).");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:9471",
          "Where to serve Prometheus /metrics (host:port; port 0 picks a free port).");
ABSL_FLAG(std::string, fault_write_delay, "0s",
          "Fault-injection tests only: pause this long before each DCQCN parameter write, so "
          "that a kill can land inside an apply (0s = none).");
ABSL_FLAG(std::string, sysfs_root, "/sys", "Directory that plays /sys (tests use fixture trees).");
ABSL_FLAG(std::string, debugfs_root, "/sys/kernel/debug",
          "Directory that plays debugfs (upstream mlx5 cc_params layout).");
ABSL_FLAG(std::string, job_socket, "",
          "Unix socket on which training jobs report how long their steps and collectives "
          "took (docs/job-signal.md), e.g. /run/rocetune/job.sock; its directory must exist. "
          "Empty: no job signal.");
ABSL_FLAG(std::string, job_socket_group, "",
          "Group that may write to --job_socket (mode 0660). Empty: the agent's own group.");
ABSL_FLAG(std::string, state_dir, "/var/lib/rocetune-agent",
          "Where the last-known-good parameter set is kept.");
ABSL_FLAG(std::string, labels, "", "Host labels sent to the controller: k1=v1,k2=v2.");
ABSL_FLAG(std::string, sample_interval, "1s", "Counter sampling interval (10ms .. 1h).");
ABSL_FLAG(std::string, drift_interval, "60s",
          "How often every managed DCQCN/PFC parameter is re-read and compared with the "
          "applied set; differences are reported to the controller (10ms .. 24h).");
ABSL_FLAG(std::string, counter_source, "auto",
          "Counter mechanism: auto (netlink, else sysfs), netlink or sysfs.");
ABSL_FLAG(bool, insecure_loopback, false,
          "Without TLS files: plaintext gRPC, allowed only to a numeric loopback --controller "
          "address or localhost.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate of this agent (its CN is the host id); with --tls_key and --tls_ca "
          "the agent talks mutual TLS to the controller.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA bundle the controller's certificate must chain to.");
ABSL_FLAG(absl::Duration, tls_refresh, absl::Seconds(10),
          "How often the TLS files are re-read (rotation needs no restart).");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name the controller's certificate must carry (default: the host of --controller).");
ABSL_FLAG(std::string, kernel_netdevs, "auto",
          "Read ethtool statistics (per-priority PFC pauses) and configure PFC through dcbnl "
          "on this kernel's netdevs: on, off, or auto (on when --sysfs_root is /sys).");
ABSL_FLAG(std::string, probe, "auto",
          "Latency prober: auto (RDMA UD verbs when a device is usable, else UDP), verbs, udp "
          "or none.");
ABSL_FLAG(std::string, probe_udp_listen, "0.0.0.0:7471",
          "Where this host's UDP probe responder listens (port 0 picks a free port).");
ABSL_FLAG(std::string, probe_udp_advertise, "",
          "Address advertised to the controller for the UDP responder (default: the bound "
          "address; set it when listening on 0.0.0.0).");
ABSL_FLAG(std::string, probe_device, "", "RDMA device for verbs probes (default: the first).");
ABSL_FLAG(std::string, platform, "host",
          "What this agent runs on: host (RDMA NICs) or sonic (a SONiC switch, through its "
          "Redis databases; needs --redis).");
ABSL_FLAG(std::string, redis, "",
          "With --platform=sonic: the switch's Redis, unix:PATH (e.g. "
          "unix:/var/run/redis/redis.sock) or HOST:PORT (e.g. 127.0.0.1:6379).");
ABSL_FLAG(bool, once, false, "Print the inventory and one counter sample, then exit.");
ABSL_FLAG(std::string, output, "json", "Output format for --once: json.");
ABSL_FLAG(std::string, ready_file, "",
          "When set, write {\"metrics_port\":N} here once serving (tests, demos).");

namespace {

constexpr char kUsage[] =
    "per-host rocetune daemon: RoCE congestion counters, latency probes, DCQCN/PFC apply.\n"
    "usage: rocetune-agent [flags]        (run as a daemon)\n"
    "       rocetune-agent --once --output=json   (inventory + one sample, then exit)";

// --host_id, or the hostname when it is not given.
std::string HostId() {
  std::string id = absl::GetFlag(FLAGS_host_id);
  if (!id.empty()) return id;
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

int Once(rocetune::RealHost& host) {
  rocetune::v1::Hello hello;
  absl::StatusOr<std::vector<rocetune::v1::NicDevice>> devices = host.Discover();
  if (!devices.ok()) {
    std::fprintf(stderr, "rocetune-agent: %s\n", std::string(devices.status().message()).c_str());
    return 1;
  }
  std::vector<rocetune::CounterValue> values;
  absl::Status s = host.counters()->Collect(&values);
  if (!s.ok() && !devices->empty()) {
    std::fprintf(stderr, "rocetune-agent: counters: %s\n", std::string(s.message()).c_str());
  }
  // One JSON document: {"host_id", "devices": [...], "counters": [...], "parameters": {...}}.
  rocetune::v1::Report sample;
  for (auto& d : *devices) *hello.add_devices() = d;
  std::string host_id = HostId();
  hello.set_host_id(host_id);
  auto seams = host.seams();
  for (const auto& d : *devices) {
    auto params = seams.cc->Read(d.name());
    if (params.ok()) *hello.mutable_current_parameters()->add_devices() = *params;
  }
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.add_whitespace = true;
  std::string hello_json;
  (void)google::protobuf::util::MessageToJsonString(hello, &hello_json, opts);
  std::string out = "{\n\"inventory\": " + hello_json + ",\n\"counters\": [";
  bool first = true;
  for (const auto& v : values) {
    absl::StrAppend(&out, first ? "\n" : ",\n",
                    "  {\"device\": ", rocetune::JsonQuote(v.key.device),
                    ", \"port\": ", v.key.port, ", \"priority\": ", v.key.priority,
                    ", \"name\": ", rocetune::JsonQuote(v.key.name), ", \"value\": ", v.value,
                    v.kind == rocetune::CounterKind::kLevel ? ", \"level\": true}" : "}");
    first = false;
  }
  absl::StrAppend(&out, "\n],\n\"counter_source\": ", rocetune::JsonQuote(host.counters()->name()),
                  "\n}\n");
  std::cout << out;
  return 0;
}

// --once on a switch: {"inventory": Hello, "switch": inventory, "counters", "counter_source"}.
int OnceSwitch(rocetune::SonicSwitch& sw) {
  absl::StatusOr<rocetune::SwitchInventory> inv = sw.discovery()->DiscoverSwitch();
  if (!inv.ok()) {
    std::fprintf(stderr, "rocetune-agent: %s\n", std::string(inv.status().message()).c_str());
    return 1;
  }
  std::vector<rocetune::CounterValue> values;
  if (absl::Status s = sw.counters()->Collect(&values); !s.ok()) {
    std::fprintf(stderr, "rocetune-agent: counters: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  rocetune::v1::Hello hello;
  hello.set_host_id(HostId());
  *hello.add_devices() = rocetune::SwitchNicDevice(*inv);
  std::vector<std::string> errors;
  *hello.mutable_current_parameters() = sw.applier()->ReadCurrent(&errors);
  for (const auto& e : errors) std::fprintf(stderr, "rocetune-agent: parameters: %s\n", e.c_str());
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.add_whitespace = true;
  std::string hello_json;
  (void)google::protobuf::util::MessageToJsonString(hello, &hello_json, opts);
  std::string out = "{\n\"inventory\": " + hello_json +
                    ",\n\"switch\": " + rocetune::SwitchInventoryJson(*inv) + ",\n\"counters\": [";
  bool first = true;
  for (const auto& v : values) {
    const bool queue = rocetune::IsSwitchQueueCounter(v.key.name);
    absl::StrAppend(&out, first ? "\n" : ",\n",
                    "  {\"device\": ", rocetune::JsonQuote(v.key.device),
                    queue ? ", \"queue\": " : ", \"priority\": ",
                    queue ? static_cast<int64_t>(v.key.port) : v.key.priority,
                    ", \"name\": ", rocetune::JsonQuote(v.key.name), ", \"value\": ", v.value,
                    v.kind == rocetune::CounterKind::kLevel ? ", \"level\": true}" : "}");
    first = false;
  }
  absl::StrAppend(&out, "\n],\n\"counter_source\": ", rocetune::JsonQuote(sw.counters()->name()),
                  "\n}\n");
  std::cout << out;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  rocetune::Shutdown::Install();
  rocetune::v1::AgentConfig config_prototype;
  rocetune::InitDaemon(argc, argv, "agent", kUsage, &config_prototype);
  rocetune::RouteGrpcLogs();  // gRPC's own lines: bounded, escaped, rate-limited

  if (absl::GetFlag(FLAGS_output) != "json") {
    std::fprintf(stderr, "rocetune-agent: --output must be json\n");
    return 2;
  }
  absl::Duration interval;
  if (!absl::ParseDuration(absl::GetFlag(FLAGS_sample_interval), &interval) ||
      interval < absl::Milliseconds(10) || interval > absl::Hours(1)) {
    std::fprintf(stderr, "rocetune-agent: --sample_interval=%s: want a duration in 10ms..1h\n",
                 absl::GetFlag(FLAGS_sample_interval).c_str());
    return 2;
  }
  absl::Duration drift_interval;
  if (!absl::ParseDuration(absl::GetFlag(FLAGS_drift_interval), &drift_interval) ||
      drift_interval < absl::Milliseconds(10) || drift_interval > absl::Hours(24)) {
    std::fprintf(stderr, "rocetune-agent: --drift_interval=%s: want a duration in 10ms..24h\n",
                 absl::GetFlag(FLAGS_drift_interval).c_str());
    return 2;
  }
  std::vector<std::pair<std::string, std::string>> labels;
  if (absl::Status s = rocetune::ParseLabels(absl::GetFlag(FLAGS_labels), &labels); !s.ok()) {
    std::fprintf(stderr, "rocetune-agent: --labels: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  const std::string platform = absl::GetFlag(FLAGS_platform);
  if (platform != "host" && platform != "sonic") {
    std::fprintf(stderr, "rocetune-agent: --platform=%s: want host or sonic\n", platform.c_str());
    return 2;
  }
  std::unique_ptr<rocetune::SonicSwitch> sonic;
  if (platform == "sonic") {
    if (absl::GetFlag(FLAGS_redis).empty()) {
      std::fprintf(stderr,
                   "rocetune-agent: --platform=sonic needs --redis=unix:PATH or HOST:PORT\n");
      return 2;
    }
    rocetune::SonicSwitchOptions so;
    so.redis = absl::GetFlag(FLAGS_redis);
    absl::StatusOr<std::unique_ptr<rocetune::SonicSwitch>> sw = rocetune::SonicSwitch::Create(so);
    if (!sw.ok()) {
      std::fprintf(stderr, "rocetune-agent: --redis: %s\n",
                   std::string(sw.status().message()).c_str());
      return 2;
    }
    sonic = std::move(*sw);
    if (absl::GetFlag(FLAGS_once)) return OnceSwitch(*sonic);
  } else if (!absl::GetFlag(FLAGS_redis).empty()) {
    std::fprintf(stderr, "rocetune-agent: --redis needs --platform=sonic\n");
    return 2;
  }
  std::unique_ptr<rocetune::RealHost> host;
  if (sonic == nullptr) {
    rocetune::RealHostOptions host_options;
    host_options.sysfs_root = absl::GetFlag(FLAGS_sysfs_root);
    host_options.debugfs_root = absl::GetFlag(FLAGS_debugfs_root);
    host_options.counter_source = absl::GetFlag(FLAGS_counter_source);
    if (!absl::ParseDuration(absl::GetFlag(FLAGS_fault_write_delay), &host_options.write_delay) ||
        host_options.write_delay < absl::ZeroDuration() ||
        host_options.write_delay > absl::Seconds(10)) {
      std::fprintf(stderr, "rocetune-agent: --fault_write_delay=%s: want a duration in 0s..10s\n",
                   absl::GetFlag(FLAGS_fault_write_delay).c_str());
      return 2;
    }
    std::string netdevs = absl::GetFlag(FLAGS_kernel_netdevs);
    if (netdevs != "auto" && netdevs != "on" && netdevs != "off") {
      std::fprintf(stderr, "rocetune-agent: --kernel_netdevs=%s: want auto, on or off\n",
                   netdevs.c_str());
      return 2;
    }
    host_options.kernel_netdevs =
        netdevs == "on" || (netdevs == "auto" && host_options.sysfs_root == "/sys");
    absl::StatusOr<std::unique_ptr<rocetune::RealHost>> created =
        rocetune::RealHost::Create(host_options);
    if (!created.ok()) {
      std::fprintf(stderr, "rocetune-agent: %s\n", std::string(created.status().message()).c_str());
      return rocetune::StartupExitCode(created.status());
    }
    host = std::move(*created);
    if (absl::GetFlag(FLAGS_once)) return Once(*host);
  }

  rocetune::TlsOptions tls;
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  tls.key_file = absl::GetFlag(FLAGS_tls_key);
  tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  tls.refresh = absl::GetFlag(FLAGS_tls_refresh);
  tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
  std::string host_id = HostId();
  if (tls.enabled()) {
    // The controller accepts a host only under its certificate's identity.
    absl::StatusOr<std::string> cn = rocetune::CertificateCommonName(tls.cert_file);
    if (!cn.ok()) {
      std::fprintf(stderr, "rocetune-agent: %s\n", std::string(cn.status().message()).c_str());
      return rocetune::StartupExitCode(cn.status());
    }
    if (absl::GetFlag(FLAGS_host_id).empty()) {
      host_id = *cn;
    } else if (host_id != *cn) {
      std::fprintf(stderr,
                   "rocetune-agent: --host_id=%s but the certificate's CN is %s; the controller "
                   "accepts a host only under its certificate's identity\n",
                   host_id.c_str(), cn->c_str());
      return 2;
    }
  } else if (!absl::GetFlag(FLAGS_insecure_loopback)) {
    std::fprintf(stderr,
                 "rocetune-agent: pass --tls_cert, --tls_key and --tls_ca for mutual TLS, or "
                 "--insecure_loopback for plaintext to a controller on a loopback address\n");
    return 2;
  }
  // The controller refuses a malformed id (and the id names files here).
  if (absl::Status s = rocetune::CheckHostId(host_id); !s.ok()) {
    std::fprintf(stderr, "rocetune-agent: %s (from %s)\n", std::string(s.message()).c_str(),
                 !absl::GetFlag(FLAGS_host_id).empty() ? "--host_id"
                 : tls.enabled()                       ? "the certificate's CN"
                                                       : "the hostname");
    return 2;
  }
  // One agent per state dir: two would fight over the NIC and the journal.
  std::unique_ptr<rocetune::StateDirLock> state_lock;
  if (const std::string dir = absl::GetFlag(FLAGS_state_dir); !dir.empty()) {
    auto lock = rocetune::StateDirLock::Acquire(dir, "rocetune-agent");
    if (!lock.ok()) {
      std::fprintf(stderr, "rocetune-agent: %s\n", std::string(lock.status().message()).c_str());
      return 1;  // another instance holds it: a retry may succeed once it stops
    }
    state_lock = std::move(*lock);
  }
  auto registry = std::make_shared<prometheus::Registry>();
  rocetune::AgentMetrics metrics(registry, host_id);
  auto exposer = rocetune::MetricsExposer::Start(absl::GetFlag(FLAGS_metrics_address), registry);
  if (!exposer.ok()) {
    std::fprintf(stderr, "rocetune-agent: %s\n", std::string(exposer.status().message()).c_str());
    return rocetune::StartupExitCode(exposer.status());
  }
  (*exposer)->AddCollectable(std::make_shared<rocetune::ProcessMetrics>("agent"));
  // Probes: a responder so peers can measure this host, and a prober for the plan.
  std::string probe_mode = absl::GetFlag(FLAGS_probe);
  if (probe_mode != "auto" && probe_mode != "verbs" && probe_mode != "udp" &&
      probe_mode != "none") {
    std::fprintf(stderr, "rocetune-agent: --probe=%s: want auto, verbs, udp or none\n",
                 probe_mode.c_str());
    return 2;
  }
  rocetune::v1::ProbeEndpoint endpoint;
  rocetune::ProbeStack probes;
  if (probe_mode != "none") {
    rocetune::ProbeStackOptions po;
    po.transport = probe_mode;
    po.verbs.device = absl::GetFlag(FLAGS_probe_device);
    po.udp_listen = absl::GetFlag(FLAGS_probe_udp_listen);
    absl::StatusOr<rocetune::ProbeStack> stack = rocetune::StartProbeStack(po);
    if (!stack.ok()) {
      std::fprintf(stderr, "rocetune-agent: --probe=%s: %s\n", probe_mode.c_str(),
                   std::string(stack.status().message()).c_str());
      return 1;
    }
    probes = std::move(*stack);
    if (probes.verbs_responder != nullptr) {
      endpoint.set_gid(probes.verbs_responder->gid());
      endpoint.set_qpn(probes.verbs_responder->qpn());
      endpoint.set_qkey(probes.verbs_responder->qkey());
    }
    if (probes.udp_responder != nullptr) {
      std::string advertise = absl::GetFlag(FLAGS_probe_udp_advertise);
      endpoint.set_udp_address(advertise.empty() ? probes.udp_responder->address() : advertise);
    }
  }
  rocetune::HostSeams seams = sonic != nullptr ? sonic->seams() : host->seams();
  seams.prober = probes.prober.get();

  rocetune::AgentOptions options;
  options.probe_endpoint = endpoint;
  options.host_id = host_id;
  options.controller = absl::GetFlag(FLAGS_controller);
  options.tls = tls;
  options.insecure_loopback = absl::GetFlag(FLAGS_insecure_loopback);
  options.labels = labels;
  options.sample_interval = interval;
  options.drift_interval = drift_interval;
  options.state_dir = absl::GetFlag(FLAGS_state_dir);
  options.job_socket = absl::GetFlag(FLAGS_job_socket);
  options.job_socket_group = absl::GetFlag(FLAGS_job_socket_group);
  options.metrics = &metrics;
  options.guard = rocetune::LocalGuardOptionsFromFlags();
  rocetune::ConnectionOptionsFromFlags(&options);
  options.sampling_progress = rocetune::Progress::Register(
      "agent_sampling", rocetune::Agent::ProgressDeadline(options.sample_interval));
  // Test hook (the watchdog's integration test), read once here: while the
  // file named by this variable exists, no sampling round starts.
  if (const char* stall = std::getenv("ROCETUNE_TEST_STALL_SAMPLING_FILE"); stall != nullptr) {
    options.round_gate = [file = std::string(stall)](const absl::Notification& stop) {
      while (!stop.HasBeenNotified() && access(file.c_str(), F_OK) == 0) {
        stop.WaitForNotificationWithTimeout(absl::Milliseconds(50));
      }
    };
  }
  absl::StatusOr<std::unique_ptr<rocetune::Agent>> agent = rocetune::Agent::Create(options, seams);
  if (!agent.ok()) {
    std::fprintf(stderr, "rocetune-agent: %s\n", std::string(agent.status().message()).c_str());
    return rocetune::StartupExitCode(agent.status());
  }
  if (std::string ready = absl::GetFlag(FLAGS_ready_file); !ready.empty()) {
    std::string tmp = ready + ".tmp";
    std::ofstream(tmp) << "{\"metrics_port\":" << (*exposer)->port() << "}\n";
    std::rename(tmp.c_str(), ready.c_str());
  }
  // SIGHUP: the settings below change live; the rest of --config needs a restart.
  rocetune::Shutdown::OnHangup([&config_prototype, a = agent->get()]() {
    rocetune::ReloadOnHangup(
        config_prototype,
        {"sample_interval", "drift_interval", "labels", "guard_window", "guard_max_pfc_pause_ratio",
         "guard_max_cnp_rate", "guard_rounds"},
        [a]() -> std::string {
          absl::Duration sample;
          absl::Duration drift;
          if (!absl::ParseDuration(absl::GetFlag(FLAGS_sample_interval), &sample) ||
              sample < absl::Milliseconds(10) || sample > absl::Hours(1) ||
              !absl::ParseDuration(absl::GetFlag(FLAGS_drift_interval), &drift) ||
              drift < absl::Milliseconds(10) || drift > absl::Hours(24)) {
            return "sample_interval or drift_interval out of range; intervals kept";
          }
          a->SetIntervals(sample, drift);
          std::vector<std::pair<std::string, std::string>> labels;
          if (absl::Status s = rocetune::ParseLabels(absl::GetFlag(FLAGS_labels), &labels);
              !s.ok()) {
            return absl::StrCat("--labels: ", s.message(), "; labels kept");
          }
          a->SetLabels(std::move(labels));
          a->SetGuardOptions(rocetune::LocalGuardOptionsFromFlags());
          return "";
        });
  });
  rocetune::SystemdNotifier notifier;
  std::thread runner([&]() { (void)(*agent)->Run(); });
  rocetune::LogInfo(
      "agent ready",
      {{"host", host_id}, {"controller", options.controller}, {"metrics", (*exposer)->address()}});
  notifier.Ready("reporting to " + options.controller);
  // Petted only while the sampling loop makes progress.
  notifier.StartWatchdog(&rocetune::Progress::Healthy);
  rocetune::Shutdown::Wait();
  rocetune::Shutdown::OnHangup(nullptr);
  notifier.Stopping();
  rocetune::LogInfo("agent stopping", {{"signal", absl::StrCat(rocetune::Shutdown::Signal())}});
  (*agent)->Stop();
  runner.join();
  if (probes.udp_responder != nullptr) probes.udp_responder->Stop();
  if (probes.verbs_responder != nullptr) probes.verbs_responder->Stop();
  rocetune::LogInfo("agent stopped");
  return 0;
}
