#ifndef ROCETUNE_TESTS_E2E_E2E_ENV_H_
#define ROCETUNE_TESTS_E2E_E2E_ENV_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "rocetune/v1/admin.grpc.pb.h"
#include "tests/integration/subprocess.h"

namespace rocetune::e2e {

// What rocetune-fabricsim reports when run offline (no agents, as fast as it
// can) on a scenario: the probes' p99 RTT, the p99 time an incast burst took
// to complete (what a job doing that exchange waits on) and the delivered
// throughput.
struct OfflineFigures {
  double probe_p99_us = 0;
  double intra_tor_probe_p99_us = 0;  // probes between hosts of one ToR
  double burst_p99_us = 0;
  double delivered_gbps = 0;
  double step_p99_us = 0;  // the all-reduce's steps (0 without one)
};

// The real binaries of an end-to-end test: rocetune-controller and
// rocetune-fabricsim --agents (a simulated fabric whose in-process agents
// report to it), driven with rocetunectl. Everything listens on loopback
// ports picked here and is stopped by PID.
struct EnvOptions {
  std::string scenario = "sim/scenarios/incast_background_32_hosts.textproto";
  std::vector<std::string> sets = {"topology.hosts_per_tor=4"};  // 8 ToRs of 4
  double pace = 0.05;        // simulated seconds per wall second
  double probe_rate = 3000;  // per peer per simulated second
  int probe_peers = 8;
  std::vector<std::string> fabricsim_flags;  // e.g. guard thresholds
  std::vector<std::string> controller_flags;
  // Hosts whose agents reach the controller's port at another loopback
  // address (host id -> "127.0.0.N"; fabricsim --controller_of), for a fault
  // test that maps it to the controller and cuts that host alone.
  std::map<std::string, std::string> controller_address_of;
  // One switch agent per simulated ToR (role=switch); off unless a test uses them.
  bool switch_agents = false;
  int expect_hosts = 32;  // hosts and switches
  // fabricsim serves /metrics on a loopback port it picks (--metrics_address,
  // --ready_file), for WaitForSimulatedTime and fabric_metrics_port().
  bool fabric_metrics = false;
};

class Env {
 public:
  explicit Env(EnvOptions options);
  ~Env();

  // Starts the controller, then the fabric; waits for every host.
  bool Start();
  // The controller alone (kill -9 and restart on the same port and state).
  bool StartController();
  void KillController();  // SIGKILL
  // Sends `sig` to the controller and waits up to `timeout` for it to exit;
  // its exit status, or nullopt when it is still running (or none runs).
  std::optional<int> StopController(int sig, absl::Duration timeout);
  // Runs rocetunectl as `actor`; returns its exit code, output in `out`.
  int Ctl(const std::vector<std::string>& args, const std::string& actor = "alice",
          std::string* out = nullptr);
  // Writes `text` to a file in the test's directory; returns its path.
  std::string WriteFile(const std::string& name, const std::string& text);

  v1::AdminService::Stub& admin() { return *admin_; }
  // Admin calls from the test itself (state checks).
  absl::StatusOr<v1::Change> GetChange(const std::string& id);
  absl::StatusOr<v1::Campaign> GetCampaign(const std::string& id);
  std::vector<v1::HostInfo> Hosts();
  // The fleet summary; probe quantiles of `peer_class` only when not empty.
  absl::StatusOr<v1::FleetSummaryResponse> Summary(absl::Duration over,
                                                   const std::string& peer_class = "");
  // Runs rocetune-fabricsim offline on this environment's scenario (and its
  // --set overrides) with seed `seed`, every host's DCQCN parameters set to
  // `dcqcn` (name -> value; a switch knob "ecn.<profile>.green_min_threshold",
  // "...green_max_threshold" or "...green_drop_probability" sets every ToR's
  // marking instead, through the scenario's tor_ecn; "disabled" 1 turns
  // DCQCN off, PFC alone), for `sim_time` of
  // simulated time. The same seed gives the same traffic, so two parameter
  // sets compare paired.
  absl::StatusOr<OfflineFigures> SimulateOffline(const std::map<std::string, int64_t>& dcqcn,
                                                 int seed, absl::Duration sim_time) const;
  bool WaitFor(const std::function<bool()>& cond, absl::Duration timeout,
               absl::Duration poll = absl::Milliseconds(200));
  // Waits until every connected host (switches included) has a report the
  // controller received at least `span` after this call: `span` more of
  // telemetry for a baseline or a measurement, however fast the simulation
  // runs. False after `timeout`.
  bool WaitForTelemetry(absl::Duration span, absl::Duration timeout = absl::Seconds(60));
  // Waits until the fabric has run `sim_time` of simulated time (its
  // rocetune_fabricsim_simulated_seconds), however far behind its pace it
  // runs: a warm-up measured on the fabric's clock, not the wall's. Needs
  // EnvOptions::fabric_metrics. False after `timeout`.
  bool WaitForSimulatedTime(absl::Duration sim_time, absl::Duration timeout);
  // fabricsim's /metrics port (EnvOptions::fabric_metrics), -1 when unknown.
  int fabric_metrics_port();

  const std::string& dir() const { return dir_; }
  // The running controller's PID (-1 when none) and /metrics port (-1 unknown).
  pid_t controller_pid() const { return controller_ ? controller_->pid() : -1; }
  int controller_metrics_port() const;
  int port() const { return port_; }
  std::string ControllerLog() const;
  std::string FabricLog() const;

 private:
  EnvOptions options_;
  std::string dir_;
  int port_ = 0;
  int fabric_metrics_port_ = -1;  // fabric_metrics_port(), once read
  std::unique_ptr<testing::ControllerProcess> controller_;
  std::unique_ptr<testing::Subprocess> fabric_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
  int controller_starts_ = 0;
};

// A policy for the tests: the knobs the simulator responds to, short bakes.
// `min_improvement` 0 leaves tuner.min_improvement unset (each trial's own
// noise band is its bar).
std::string TestPolicy(const std::string& name, int bake_seconds, int approvers = 1,
                       uint32_t trial_budget = 20, int looks = 3, double min_improvement = 0.03);

}  // namespace rocetune::e2e

#endif  // ROCETUNE_TESTS_E2E_E2E_ENV_H_
