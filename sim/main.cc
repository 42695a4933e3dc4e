// rocetune-fabricsim: runs a simulated RoCE fabric scenario and prints a JSON
// summary; with --agents, one in-process rocetune agent per simulated host
// talks to a controller over gRPC while the fabric runs.
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/agent.h"
#include "agent/agent_metrics.h"
#include "daemon/clock.h"
#include "daemon/grpc_log.h"
#include "daemon/init.h"
#include "daemon/logging.h"
#include "daemon/metrics_exposer.h"
#include "daemon/process_metrics.h"
#include "daemon/shutdown.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "rocetune_job.h"
#include "sim/fabric.h"
#include "sim/scenario_loader.h"
#include "sim/sim_clock.h"
#include "sim/sim_host.h"
#include "sim/sim_switch.h"

ABSL_FLAG(std::string, scenario, "",
          "Scenario file (text-format rocetune.v1.Scenario: topology, workload, DCQCN / ECN / PFC "
          "parameters, duration, seed). Required.");
ABSL_FLAG(std::vector<std::string>, set, {},
          "path=value override of any scalar scenario field, e.g. --set=dcqcn.rpg_ai_rate=20 or "
          "--set=workload.incast[0].bytes_per_sender=65536. Repeatable; applied in order.");
ABSL_FLAG(std::string, output, "json", "Summary format printed to stdout: json or none.");
ABSL_FLAG(bool, agents, false,
          "Run one in-process rocetune agent per simulated host, each connected to --controller.");
ABSL_FLAG(bool, job_signal, true,
          "With --agents: each simulated host's agent serves a job socket (<state_dir>/<host>/"
          "job.sock), and every all-reduce step and incast burst of the scenario is reported "
          "to the agents of the hosts that took part, through the job signal's C client, as a "
          "training job would (docs/job-signal.md).");
ABSL_FLAG(std::string, job_name, "",
          "With --job_signal: the job's name in its events; empty = the scenario's name.");
ABSL_FLAG(std::string, controller, "127.0.0.1:7070",
          "Controller address (host:port) for --agents.");
ABSL_FLAG(std::vector<std::string>, controller_of, {},
          "With --agents: host=address pairs (comma-separated) giving a simulated host's agent "
          "another controller address than --controller, e.g. h3=127.0.0.3:7070; a fault test "
          "maps that address to the controller and cuts it alone with nftables. Each host must "
          "be one of the scenario's.");
ABSL_FLAG(double, pace, 0,
          "Simulated seconds per wall-clock second; 0 = as fast as possible. --agents defaults "
          "to 1.0 when this is 0.");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "Simulated time to run; overrides the scenario's duration_ms when non-zero.");
ABSL_FLAG(absl::Duration, sample_interval, absl::Seconds(1), "Agents' report interval (--agents).");
ABSL_FLAG(std::string, state_dir, "",
          "Base directory for the agents' state (--agents); each agent uses <dir>/<host>. "
          "Empty = a new temporary directory.");
ABSL_FLAG(std::string, metrics_address, "",
          "With --agents: serve every simulated agent's /metrics series (each with its own "
          "host label) on this host:port, one endpoint for all. Empty = none; port 0 picks "
          "a free port (logged, and written to --ready_file).");
ABSL_FLAG(std::string, ready_file, "",
          "With --metrics_address: once serving, write {\"metrics_port\":N} here (atomically).");
ABSL_FLAG(bool, switch_agents, true,
          "With --agents: also run one switch agent per simulated ToR (host id sim-tor<N>, "
          "labels role=switch, tor=<N>, sim=1), whose WRED/ECN profile and per-port PFC enables "
          "are the ToR's marking (Kmin, Kmax, Pmax) and PFC (docs/sonic.md).");
ABSL_FLAG(std::string, tls_dir, "",
          "With --agents: mutual TLS to the controller. The directory holds one client "
          "certificate per simulated agent, agent-<host id>.pem and .key (CN = the host id), as "
          "deploy/pki/make-dev-pki.sh -a <host id> writes them; --tls_ca is the CA the "
          "controller's certificate must chain to. Without it the agents talk plaintext, which "
          "the controller allows only with --insecure_loopback (roles are then not enforced).");
ABSL_FLAG(std::string, tls_ca, "", "With --tls_dir: the CA bundle (PEM) of the controller.");
ABSL_FLAG(std::string, tls_server_name, "",
          "With --tls_dir: the name the controller's certificate must carry (default: the host "
          "of --controller).");
ABSL_FLAG(std::vector<std::string>, rp_disabled_tors, {},
          "ToR indexes (comma-separated) whose hosts start with the DCQCN reaction point "
          "off on every priority (rp_enable_mask 0), as a NIC left misconfigured would: "
          "their DCQCN values are applied but not in effect (--agents).");
ABSL_FLAG(std::string, labels, "",
          "Extra labels k=v,... for every agent (--agents); each agent "
          "also gets tor=<index>.");

namespace rocetune::sim {
namespace {

constexpr char kUsage[] =
    "rocetune-fabricsim --scenario=FILE [--set=path=value ...] [--output=json]\n"
    "                   [--agents --controller=host:port --pace=1.0 --duration=60s]\n"
    "                   [--switch_agents=false] [--tls_dir=DIR --tls_ca=FILE]\n"
    "                   [--rp_disabled_tors=0,1]\n"
    "                   [--metrics_address=127.0.0.1:PORT --ready_file=FILE]\n"
    "Simulates a RoCE fabric (DCQCN, ECN, PFC) as a fluid model and prints a JSON summary.";

// Absl replaces a vector flag on every occurrence; --set must accumulate, so
// its occurrences are taken out of argv before flag parsing.
std::vector<std::string> ExtractSets(int* argc, char** argv) {
  std::vector<std::string> sets;
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const char* a = argv[i];
    if (std::strcmp(a, "--") == 0) {
      for (; i < *argc; ++i) argv[out++] = argv[i];
      break;
    }
    if (std::strncmp(a, "--set=", 6) == 0 || std::strncmp(a, "-set=", 5) == 0) {
      sets.push_back(std::strchr(a, '=') + 1);
      continue;
    }
    if ((std::strcmp(a, "--set") == 0 || std::strcmp(a, "-set") == 0) && i + 1 < *argc) {
      sets.push_back(argv[++i]);
      continue;
    }
    argv[out++] = argv[i];
  }
  *argc = out;
  return sets;
}

// Writes {"metrics_port":N} to `path` through a temporary file and a rename.
bool WriteReadyFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  const bool written = std::fprintf(f, "{\"metrics_port\":%d}\n", port) > 0;
  if (std::fclose(f) != 0 || !written) return false;
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

int RunAgents(Fabric* fabric) {
  std::vector<std::pair<std::string, std::string>> extra;
  if (absl::Status s = ParseLabels(absl::GetFlag(FLAGS_labels), &extra); !s.ok()) {
    std::fprintf(stderr, "--labels: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::set<int> rp_disabled;
  for (const std::string& t : absl::GetFlag(FLAGS_rp_disabled_tors)) {
    int tor = -1;
    if (!absl::SimpleAtoi(t, &tor) || tor < 0 || tor >= fabric->tor_count()) {
      std::fprintf(stderr, "--rp_disabled_tors: \"%s\" is not a ToR index in [0, %d)\n", t.c_str(),
                   fabric->tor_count());
      return 1;
    }
    rp_disabled.insert(tor);
  }
  for (int h = 0; h < fabric->host_count(); ++h) {
    if (rp_disabled.contains(fabric->HostTor(h))) fabric->SetHostEnableMasks(h, 0, 0xff);
  }
  std::string state_base = absl::GetFlag(FLAGS_state_dir);
  std::string temp_dir;  // removed on return when this run created it
  struct RemoveDir {
    std::string* dir;
    ~RemoveDir() {
      std::error_code ec;
      if (!dir->empty()) std::filesystem::remove_all(*dir, ec);
    }
  } remove_temp{&temp_dir};
  if (state_base.empty()) {
    char tmpl[] = "/tmp/rocetune-fabricsim-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::fprintf(stderr, "cannot create a state directory: %s\n", std::strerror(errno));
      return 1;
    }
    state_base = tmpl;
    temp_dir = tmpl;
  } else if (std::error_code ec; !std::filesystem::create_directories(state_base, ec) && ec) {
    // Like the agent's and the controller's --state_dir: made when missing.
    std::fprintf(stderr, "--state_dir=%s: cannot create it: %s\n", state_base.c_str(),
                 ec.message().c_str());
    return 1;
  }
  // One registry for every simulated agent: their series differ by host label.
  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<MetricsExposer> exposer;
  if (const std::string address = absl::GetFlag(FLAGS_metrics_address); !address.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsExposer>> e = MetricsExposer::Start(address, registry);
    if (!e.ok()) {
      std::fprintf(stderr, "--metrics_address: %s\n", std::string(e.status().message()).c_str());
      return 1;
    }
    exposer = *std::move(e);
    exposer->AddCollectable(std::make_shared<ProcessMetrics>("fabricsim"));
  }
  // The fabric's own clock: a test or an operator can wait for simulated time
  // (a warm-up, a workload phase) however far behind its pace the fabric runs.
  prometheus::Gauge& simulated_seconds = prometheus::BuildGauge()
                                             .Name("rocetune_fabricsim_simulated_seconds")
                                             .Help("Simulated time the fabric has run, in seconds")
                                             .Register(*registry)
                                             .Add({});
  std::vector<std::unique_ptr<AgentMetrics>> metrics;
  // The agents measure time on the fabric's clock (see SimClock), so their
  // rates stay the fabric's own when it falls behind its pace.
  const double pace = absl::GetFlag(FLAGS_pace) > 0 ? absl::GetFlag(FLAGS_pace) : 1.0;
  SimClock sim_clock(fabric, pace);
  std::vector<std::unique_ptr<SimHost>> hosts;
  std::vector<std::unique_ptr<SimSwitch>> switches;  // outlive the agents
  std::vector<std::unique_ptr<Agent>> agents;
  // What every simulated agent (host or switch) shares: the sampling
  // interval, the local guard (--guard_window, --guard_max_pfc_pause_ratio,
  // --guard_max_cnp_rate, --guard_rounds), a state dir of its own, its series
  // on /metrics.
  auto finish_options = [&](AgentOptions* opt) {
    opt->sample_interval = absl::GetFlag(FLAGS_sample_interval);
    opt->guard = LocalGuardOptionsFromFlags();
    ConnectionOptionsFromFlags(opt);
    opt->state_dir = absl::StrCat(state_base, "/", opt->host_id);
    if (const std::string dir = absl::GetFlag(FLAGS_tls_dir); !dir.empty()) {
      opt->tls.cert_file = absl::StrCat(dir, "/agent-", opt->host_id, ".pem");
      opt->tls.key_file = absl::StrCat(dir, "/agent-", opt->host_id, ".key");
      opt->tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
      opt->tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
      opt->insecure_loopback = false;
    }
    if (exposer != nullptr) {
      metrics.push_back(std::make_unique<AgentMetrics>(registry, opt->host_id));
      opt->metrics = metrics.back().get();
    }
    if (mkdir(opt->state_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      std::fprintf(stderr, "cannot create %s: %s\n", opt->state_dir.c_str(), std::strerror(errno));
      return false;
    }
    return true;
  };
  std::map<std::string, std::string> controller_of;
  for (const std::string& pair : absl::GetFlag(FLAGS_controller_of)) {
    const std::vector<std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty() || kv[1].empty()) {
      std::fprintf(stderr, "--controller_of=%s: want host=host:port\n", pair.c_str());
      return 2;
    }
    controller_of[kv[0]] = kv[1];
  }
  for (int h = 0; h < fabric->host_count(); ++h) {
    hosts.push_back(std::make_unique<SimHost>(fabric, h));
    SimHost* host = hosts.back().get();
    AgentOptions opt;
    opt.host_id = host->host_id();
    opt.controller = absl::GetFlag(FLAGS_controller);
    if (auto it = controller_of.find(opt.host_id); it != controller_of.end()) {
      opt.controller = it->second;
      controller_of.erase(it);
    }
    opt.labels = extra;
    opt.labels.emplace_back("sim", "1");
    // The controller plans probes within one fabric; sim hosts are probed through
    // the simulated fabric by host id, so the endpoint only names the host.
    opt.labels.emplace_back("fabric", "sim");
    opt.probe_endpoint.set_udp_address("sim/" + host->host_id());
    opt.labels.emplace_back("tor", absl::StrCat(fabric->HostTor(h)));
    if (!finish_options(&opt)) return 1;
    HostSeams seams;
    seams.discovery = host->discovery();
    seams.counters = host->counters();
    seams.cc = host->cc();
    seams.pfc = host->pfc();
    seams.prober = host->prober();
    seams.clock = &sim_clock;
    if (absl::GetFlag(FLAGS_job_signal)) {
      opt.job_socket = absl::StrCat(opt.state_dir, "/job.sock");
      // sockaddr_un holds 108 bytes with the terminating NUL.
      if (opt.job_socket.size() > 107) {
        std::fprintf(stderr,
                     "--job_signal: the job socket %s is %zu bytes, longer than a Unix socket "
                     "path may be (107): use a shorter --state_dir, or --job_signal=false\n",
                     opt.job_socket.c_str(), opt.job_socket.size());
        return 2;
      }
    }
    absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(opt, seams);
    if (!agent.ok()) {
      std::fprintf(stderr, "agent %s: %s\n", opt.host_id.c_str(),
                   std::string(agent.status().message()).c_str());
      return StartupExitCode(agent.status());
    }
    agents.push_back(std::move(*agent));
  }
  if (!controller_of.empty()) {
    std::fprintf(stderr, "--controller_of: %s is not a host of the scenario\n",
                 controller_of.begin()->first.c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_switch_agents)) {
    for (int t = 0; t < fabric->tor_count(); ++t) {
      switches.push_back(std::make_unique<SimSwitch>(fabric, t));
      SimSwitch* sw = switches.back().get();
      AgentOptions opt;
      opt.host_id = sw->host_id();
      opt.controller = absl::GetFlag(FLAGS_controller);
      // --labels apply to switches too, except role: a switch's role is "switch".
      for (const auto& [k, v] : extra) {
        if (k != "role") opt.labels.emplace_back(k, v);
      }
      opt.labels.emplace_back("sim", "1");
      opt.labels.emplace_back("role", "switch");
      opt.labels.emplace_back("tor", absl::StrCat(t));
      if (!finish_options(&opt)) return 1;
      HostSeams seams = sw->seams();
      seams.clock = &sim_clock;
      absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(opt, seams);
      if (!agent.ok()) {
        std::fprintf(stderr, "switch agent %s: %s\n", opt.host_id.c_str(),
                     std::string(agent.status().message()).c_str());
        return StartupExitCode(agent.status());
      }
      agents.push_back(std::move(*agent));
    }
  }
  // The job's side of the job signal: one client handle per host, as one
  // rank per host would hold.
  std::vector<rocetune_job*> jobs;
  auto close_jobs = [&jobs]() {
    for (rocetune_job* j : jobs) rocetune_job_close(j);
    jobs.clear();
  };
  if (absl::GetFlag(FLAGS_job_signal)) {
    std::string job = absl::GetFlag(FLAGS_job_name);
    if (job.empty()) job = fabric->scenario().name();
    for (int h = 0; h < fabric->host_count(); ++h) {
      const std::string socket = absl::StrCat(state_base, "/", hosts[h]->host_id(), "/job.sock");
      rocetune_job* j = rocetune_job_open(socket.c_str(), job.c_str());
      if (j == nullptr) {
        std::fprintf(stderr, "--job_signal: job \"%s\" on %s: %s\n", job.c_str(), socket.c_str(),
                     errno == EINVAL ? "not a valid job name (1-64 of A-Z a-z 0-9 . _ : @ / -; "
                                       "set --job_name)"
                                     : std::strerror(errno));
        close_jobs();
        return 2;
      }
      jobs.push_back(j);
    }
    fabric->EnableJobEvents();
  }
  std::vector<std::thread> threads;
  for (auto& a : agents) {
    Agent* agent = a.get();
    threads.emplace_back([agent] {
      absl::Status s = agent->Run();
      if (!s.ok()) LogWarning("agent stopped", {{"error", std::string(s.message())}});
    });
  }
  LogInfo("agents started", {{"count", absl::StrCat(agents.size() - switches.size())},
                             {"switches", absl::StrCat(switches.size())},
                             {"controller", absl::GetFlag(FLAGS_controller)},
                             {"metrics", exposer != nullptr ? exposer->address() : ""}});
  if (const std::string ready = absl::GetFlag(FLAGS_ready_file);
      exposer != nullptr && !ready.empty()) {
    if (!WriteReadyFile(ready, exposer->port())) {
      std::fprintf(stderr, "--ready_file=%s: cannot write: %s\n", ready.c_str(),
                   std::strerror(errno));
      close_jobs();
      for (auto& a : agents) a->Stop();
      for (auto& t : threads) t.join();
      return 1;
    }
  }
  const absl::Time start = absl::Now();
  const int64_t chunk = 1000000;  // 1 ms of simulated time
  // A fabric behind its pace gives the agents less simulated time per round
  // (they pace their rounds on the wall clock; their rates stay right, measured
  // on the fabric's clock): say so, every 10 s at most.
  absl::Time last_warned = absl::InfinitePast();
  while (!fabric->done() && !Shutdown::Requested()) {
    fabric->RunUntil(fabric->now_ns() + chunk);
    simulated_seconds.Set(static_cast<double>(fabric->now_ns()) / 1e9);
    for (const Fabric::SimJobEvent& e : fabric->TakeJobEvents()) {
      // A full or absent socket drops the event (counted by the handle), as
      // for a real job.
      rocetune_job_report(jobs[e.host], e.op, e.seconds, e.host, e.bytes);
    }
    const absl::Time due = start + absl::Nanoseconds(static_cast<double>(fabric->now_ns()) / pace);
    const absl::Time now = absl::Now();
    const absl::Duration wait = due - now;
    if (wait > absl::ZeroDuration()) {
      Shutdown::WaitFor(wait);
    } else if (-wait > absl::Milliseconds(100) && now - last_warned > absl::Seconds(10)) {
      last_warned = now;
      LogWarning("fabric behind its pace", {{"behind", absl::FormatDuration(-wait)}});
    }
  }
  if (!jobs.empty() && fabric->done()) {
    // At the scenario's end (not on a stop request): two more rounds, so
    // that the agents report the last events sent.
    Shutdown::WaitFor(2 * absl::GetFlag(FLAGS_sample_interval));
  }
  uint64_t sent = 0, dropped = 0;
  for (rocetune_job* j : jobs) {
    sent += rocetune_job_sent(j);
    dropped += rocetune_job_dropped(j);
  }
  if (dropped > 0) {
    LogWarning("job signal: events dropped (an agent's socket was full or absent)",
               {{"events_sent", absl::StrCat(sent)}, {"events_dropped", absl::StrCat(dropped)}});
  } else if (!jobs.empty()) {
    LogInfo("job signal",
            {{"events_sent", absl::StrCat(sent)}, {"events_dropped", absl::StrCat(dropped)}});
  }
  close_jobs();
  for (auto& a : agents) a->Stop();
  for (auto& t : threads) t.join();
  return 0;
}

int Main(int argc, char** argv) {
  std::vector<std::string> sets = ExtractSets(&argc, argv);
  InitDaemon(argc, argv, "fabricsim", kUsage, nullptr);
  rocetune::RouteGrpcLogs();  // gRPC's own lines: bounded, escaped, rate-limited
  const std::string path = absl::GetFlag(FLAGS_scenario);
  if (path.empty()) {
    std::fprintf(stderr, "rocetune-fabricsim: --scenario=FILE is required (see --help)\n");
    return 2;
  }
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output != "json" && output != "none") {
    std::fprintf(stderr, "rocetune-fabricsim: --output=%s: want json or none\n", output.c_str());
    return 2;
  }
  if (const double pace = absl::GetFlag(FLAGS_pace); !std::isfinite(pace) || pace < 0) {
    std::fprintf(stderr, "rocetune-fabricsim: --pace=%g: want a finite number >= 0\n", pace);
    return 2;
  }
  if (!absl::GetFlag(FLAGS_agents) &&
      (!absl::GetFlag(FLAGS_metrics_address).empty() || !absl::GetFlag(FLAGS_ready_file).empty())) {
    std::fprintf(stderr, "rocetune-fabricsim: --metrics_address and --ready_file need --agents\n");
    return 2;
  }
  absl::StatusOr<v1::Scenario> scenario = LoadScenario(path, sets);
  if (!scenario.ok()) {
    std::fprintf(stderr, "rocetune-fabricsim: %s\n",
                 std::string(scenario.status().message()).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_duration) > absl::ZeroDuration()) {
    scenario->set_duration_ms(absl::ToDoubleMilliseconds(absl::GetFlag(FLAGS_duration)));
  }
  absl::StatusOr<std::unique_ptr<Fabric>> fabric = Fabric::Create(*scenario);
  if (!fabric.ok()) {
    std::fprintf(stderr, "rocetune-fabricsim: %s: %s\n", path.c_str(),
                 std::string(fabric.status().message()).c_str());
    return 2;
  }
  const auto wall_start = std::chrono::steady_clock::now();
  if (absl::GetFlag(FLAGS_agents)) {
    Shutdown::Install();
    if (int rc = RunAgents(fabric->get()); rc != 0) return rc;
  } else if (absl::GetFlag(FLAGS_pace) > 0) {
    const double pace = absl::GetFlag(FLAGS_pace);
    const absl::Time start = absl::Now();
    while (!(*fabric)->done()) {
      (*fabric)->RunUntil((*fabric)->now_ns() + 1000000);
      absl::SleepFor(start + absl::Nanoseconds(static_cast<double>((*fabric)->now_ns()) / pace) -
                     absl::Now());
    }
  } else {
    (*fabric)->RunToEnd();
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  if (output == "json") std::fputs((*fabric)->Summary(wall).ToJson().c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace rocetune::sim

int main(int argc, char** argv) { return rocetune::sim::Main(argc, argv); }
