#include "tests/e2e/e2e_env.h"

#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_support.h"

namespace rocetune::e2e {
namespace {

grpc::ClientContext* WithActor(grpc::ClientContext* ctx) {
  ctx->AddMetadata("rocetune-actor", "e2e-test");
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return ctx;
}

}  // namespace

Env::Env(EnvOptions options) : options_(std::move(options)) { dir_ = testing::MakeTempDir("e2e"); }

Env::~Env() {
  if (fabric_ != nullptr) {
    fabric_->Signal(SIGTERM);
    if (!fabric_->Wait(absl::Seconds(10)).has_value()) fabric_->Signal(SIGKILL);
  }
  if (controller_ != nullptr) {
    controller_->Signal(SIGTERM);
    if (!controller_->Wait(absl::Seconds(10)).has_value()) controller_->Signal(SIGKILL);
  }
  // A fabric that fell behind its pace reports lower rates than it simulates:
  // a flaky throughput figure starts here, so every test shows it.
  if (fabric_ != nullptr) {
    for (absl::string_view line : absl::StrSplit(fabric_->Log(), '\n')) {
      if (absl::StrContains(line, "fabric behind its pace")) {
        std::fprintf(stderr, "fabricsim: %s\n", std::string(line).c_str());
      }
    }
  }
  // A passing test leaves nothing behind; a failing one keeps its logs and
  // state for a look (the path is in the failure messages).
  if (!::testing::Test::HasFailure()) {
    if (fabric_ != nullptr) fabric_->Wait(absl::Seconds(5));
    if (controller_ != nullptr) controller_->Wait(absl::Seconds(5));
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

bool Env::StartController() {
  // The first controller binds a port of the kernel's choice (read from its
  // ready file); a restart asks for that same port, where the agents
  // reconnect. No port is picked and released first: e2e tests run side by
  // side, and another test could take a released port.
  ++controller_starts_;
  testing::ControllerLaunch launch{
      .dir = dir_,
      .port = port_,
      .flags =
          {
              "--window=1s",
              "--retention=3m",
              "--rollout_tick=200ms",
              "--stale_after=10s",
              "--gone_after=30s",
              absl::StrCat("--probe_rate=", options_.probe_rate),
              absl::StrCat("--probe_peers=", options_.probe_peers),
              "--probe_replan_delay=500ms",
          },
      .name = absl::StrCat("controller", controller_starts_),
  };
  launch.flags.insert(launch.flags.end(), options_.controller_flags.begin(),
                      options_.controller_flags.end());
  controller_ = std::make_unique<testing::ControllerProcess>(std::move(launch));
  if (!controller_->Start()) return false;
  port_ = controller_->grpc_port();
  channel_ =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials());
  admin_ = v1::AdminService::NewStub(channel_);
  return true;
}

std::optional<int> Env::StopController(int sig, absl::Duration timeout) {
  if (controller_ == nullptr) return std::nullopt;
  controller_->Signal(sig);
  return controller_->Wait(timeout);
}

void Env::KillController() {
  if (controller_ == nullptr) return;
  controller_->Signal(SIGKILL);
  controller_->Wait(absl::Seconds(10));
}

bool Env::Start() {
  if (!StartController()) return false;
  std::vector<std::string> args = {
      absl::StrCat("--scenario=", ROCETUNE_SOURCE_DIR, "/", options_.scenario),
      "--agents",
      absl::StrCat("--controller=127.0.0.1:", port_),
      absl::StrCat("--pace=", options_.pace),
      "--duration=100000s",
      "--sample_interval=250ms",
      "--labels=role=trainer",
      absl::StrCat("--state_dir=", dir_, "/agents"),
      "--output=none",
      absl::StrCat("--switch_agents=", options_.switch_agents ? "true" : "false"),
  };
  for (const std::string& s : options_.sets) args.push_back(absl::StrCat("--set=", s));
  if (!options_.controller_address_of.empty()) {
    std::string pairs;
    for (const auto& [host, address] : options_.controller_address_of) {
      absl::StrAppend(&pairs, pairs.empty() ? "" : ",", host, "=", address, ":", port_);
    }
    args.push_back(absl::StrCat("--controller_of=", pairs));
  }
  if (options_.fabric_metrics) {
    args.push_back("--metrics_address=127.0.0.1:0");
    args.push_back(absl::StrCat("--ready_file=", dir_, "/fabricsim.ready"));
  }
  args.insert(args.end(), options_.fabricsim_flags.begin(), options_.fabricsim_flags.end());
  mkdir(absl::StrCat(dir_, "/agents").c_str(), 0700);
  fabric_ = std::make_unique<testing::Subprocess>(testing::BuiltBinary("sim/rocetune-fabricsim"),
                                                  args, absl::StrCat(dir_, "/fabricsim.log"));
  if (!fabric_->Start()) return false;
  return WaitFor(
      [&] {
        int connected = 0;
        for (const v1::HostInfo& h : Hosts()) connected += h.state() == v1::HOST_CONNECTED;
        return connected >= options_.expect_hosts;
      },
      absl::Seconds(60));
}

int Env::Ctl(const std::vector<std::string>& args, const std::string& actor, std::string* out) {
  std::vector<std::string> full = {absl::StrCat("--controller=127.0.0.1:", port_),
                                   "--insecure_loopback", absl::StrCat("--actor=", actor)};
  full.insert(full.end(), args.begin(), args.end());
  std::string output;
  int rc = testing::RunCommand(testing::BuiltBinary("cli/rocetunectl"), full, &output,
                               absl::Seconds(60));
  if (out != nullptr) *out = output;
  return rc;
}

namespace {

// The number after `"key": ` in the JSON object that follows `"object": {` in
// `json` (rocetune-fabricsim's summary), or nullopt.
std::optional<double> SummaryField(const std::string& json, const std::string& object,
                                   const std::string& key) {
  size_t at = json.find(absl::StrCat("\"", object, "\": {"));
  if (at == std::string::npos) return std::nullopt;
  const size_t end = json.find('}', at);
  at = json.find(absl::StrCat("\"", key, "\": "), at);
  if (at == std::string::npos || at > end) return std::nullopt;
  double v = 0;
  if (!absl::SimpleAtod(
          absl::string_view(json).substr(at + key.size() + 4,
                                         json.find_first_of(",}", at) - (at + key.size() + 4)),
          &v)) {
    return std::nullopt;
  }
  return v;
}

}  // namespace

absl::StatusOr<OfflineFigures> Env::SimulateOffline(const std::map<std::string, int64_t>& dcqcn,
                                                    int seed, absl::Duration sim_time) const {
  std::vector<std::string> args = {
      absl::StrCat("--scenario=", ROCETUNE_SOURCE_DIR, "/", options_.scenario),
      absl::StrCat("--set=seed=", seed),
      absl::StrCat("--duration=", absl::ToInt64Milliseconds(sim_time), "ms"),
      "--output=json",
  };
  for (const std::string& s : options_.sets) args.push_back(absl::StrCat("--set=", s));
  for (const auto& [name, value] : dcqcn) {
    // A switch knob (ecn.<profile>.<field>, as the switch agents name the
    // ToRs' WRED fields) sets the ToRs' own marking, as the agents would.
    if (absl::StartsWith(name, "ecn.")) {
      if (absl::EndsWith(name, ".green_min_threshold")) {
        args.push_back(absl::StrCat("--set=tor_ecn.kmin_bytes=", value));
      } else if (absl::EndsWith(name, ".green_max_threshold")) {
        args.push_back(absl::StrCat("--set=tor_ecn.kmax_bytes=", value));
      } else if (absl::EndsWith(name, ".green_drop_probability") && value > 0) {
        // (tor_ecn.pmax 0 means "the scenario's": 0% has no equivalent.)
        args.push_back(absl::StrCat("--set=tor_ecn.pmax=", value / 100.0));
      } else {
        return absl::InvalidArgumentError(absl::StrCat("no offline equivalent of ", name));
      }
      continue;
    }
    args.push_back(absl::StrCat("--set=dcqcn.", name, "=", value));
  }
  std::string out;
  const int rc = testing::RunCommand(testing::BuiltBinary("sim/rocetune-fabricsim"), args, &out,
                                     absl::Seconds(120));
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("rocetune-fabricsim exited ", rc, ": ", out));
  }
  std::optional<double> probe = SummaryField(out, "probe_rtt_us", "p99");
  std::optional<double> intra = SummaryField(out, "probe_rtt_intra_tor_us", "p99");
  std::optional<double> burst = SummaryField(out, "incast_burst_us", "p99");
  std::optional<double> step = SummaryField(out, "allreduce_step_us", "p99");
  size_t at = out.find("\"delivered_gbps\": ");
  double gbps = 0;
  if (!probe || !intra || !burst || !step || at == std::string::npos ||
      !absl::SimpleAtod(absl::string_view(out).substr(at + 18, out.find(',', at) - at - 18),
                        &gbps)) {
    return absl::InternalError(absl::StrCat("no probe/burst/step p99 or throughput in: ", out));
  }
  return OfflineFigures{*probe, *intra, *burst, gbps, *step};
}

std::string Env::WriteFile(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(dir_, "/", name);
  std::ofstream(path) << text;
  return path;
}

absl::StatusOr<v1::Change> Env::GetChange(const std::string& id) {
  grpc::ClientContext ctx;
  v1::GetChangeRequest req;
  req.set_id(id);
  v1::Change c;
  grpc::Status s = admin_->GetChange(WithActor(&ctx), req, &c);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return c;
}

absl::StatusOr<v1::Campaign> Env::GetCampaign(const std::string& id) {
  grpc::ClientContext ctx;
  v1::GetCampaignRequest req;
  req.set_id(id);
  v1::Campaign c;
  grpc::Status s = admin_->GetCampaign(WithActor(&ctx), req, &c);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return c;
}

std::vector<v1::HostInfo> Env::Hosts() {
  std::vector<v1::HostInfo> out;
  std::string token;
  do {
    grpc::ClientContext ctx;
    v1::ListHostsRequest req;
    req.set_page_token(token);
    v1::ListHostsResponse resp;
    if (!admin_->ListHosts(WithActor(&ctx), req, &resp).ok()) return out;
    for (const v1::HostInfo& h : resp.hosts()) out.push_back(h);
    token = resp.next_page_token();
  } while (!token.empty());
  return out;
}

absl::StatusOr<v1::FleetSummaryResponse> Env::Summary(absl::Duration over,
                                                      const std::string& peer_class) {
  // FleetSummary covers the previous and current windows: average several.
  v1::FleetSummaryResponse best;
  grpc::ClientContext ctx;
  v1::FleetSummaryRequest req;
  req.set_peer_class(peer_class);
  (void)over;
  grpc::Status s = admin_->FleetSummary(WithActor(&ctx), req, &best);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return best;
}

bool Env::WaitFor(const std::function<bool()>& cond, absl::Duration timeout, absl::Duration poll) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (cond()) return true;
    absl::SleepFor(poll);
  }
  return cond();
}

bool Env::WaitForTelemetry(absl::Duration span, absl::Duration timeout) {
  const int64_t after = absl::ToUnixNanos(absl::Now() + span);
  return WaitFor(
      [&] {
        const std::vector<v1::HostInfo> hosts = Hosts();
        if (hosts.empty()) return false;
        for (const v1::HostInfo& h : hosts) {
          if (h.state() == v1::HOST_CONNECTED && h.last_report_unix_nanos() < after) return false;
        }
        return true;
      },
      span + timeout, absl::Milliseconds(100));
}

int Env::fabric_metrics_port() {
  if (fabric_metrics_port_ <= 0 && options_.fabric_metrics && fabric_ != nullptr) {
    fabric_metrics_port_ = testing::WaitForPortInReadyFile(absl::StrCat(dir_, "/fabricsim.ready"),
                                                           "metrics_port", absl::Seconds(20));
  }
  return fabric_metrics_port_;
}

bool Env::WaitForSimulatedTime(absl::Duration sim_time, absl::Duration timeout) {
  const int port = fabric_metrics_port();
  if (port <= 0) {
    ADD_FAILURE() << (options_.fabric_metrics
                          ? "fabricsim wrote no metrics port to its ready file"
                          : "WaitForSimulatedTime needs EnvOptions::fabric_metrics");
    return false;
  }
  const double want = absl::ToDoubleSeconds(sim_time);
  return WaitFor(
      [&] {
        return testing::MetricValue(testing::HttpGet(port, "/metrics"),
                                    "rocetune_fabricsim_simulated_seconds") >= want;
      },
      timeout, absl::Milliseconds(250));
}

int Env::controller_metrics_port() const {
  return controller_ != nullptr ? controller_->metrics_port() : -1;
}

std::string Env::ControllerLog() const { return controller_ ? controller_->Log() : ""; }
std::string Env::FabricLog() const { return fabric_ ? fabric_->Log() : ""; }

std::string TestPolicy(const std::string& name, int bake_seconds, int approvers,
                       uint32_t trial_budget, int looks, double min_improvement) {
  return absl::StrCat(
      R"(# A policy for the end-to-end tests: short bakes on 1 s windows.
name: ")",
      name, R"("
description: "incast plus background on the simulated fabric"
selector { match_labels { key: "role" value: "trainer" } }
objective { metric: PROBE_RTT_P99 }
# A trial's canary/control throughput ratio varies by about +-8% over a
# 4-second bake here; a tighter tolerance rejects neutral trials by noise.
constraints { metric: "throughput_gbps" max_ratio: 1.08 }
# Not rate_to_set_on_first_cnp: its cost can be collective, which a canary
# trial judged against same-rack control hosts cannot see (under a lockstep
# all-reduce, a few crawling senders slow every host's steps); the fleet guard
# rolls such a change back (fleet_guard_e2e_test). It also multiplies the
# simulator's work about fivefold, so here it would slow the simulated fabric
# below its pace and count as lost throughput.
knobs { parameter: "dce_tcp_rtt" min: 1 max: 256 step: 1 log_scale: true }
knobs { parameter: "rpg_time_reset" min: 100 max: 3000 step: 100 log_scale: true }
knobs { parameter: "rpg_min_dec_fac" min: 50 max: 100 step: 5 }
tuner { kind: COORDINATE_DESCENT trial_budget: )",
      trial_budget, min_improvement > 0 ? absl::StrCat(" min_improvement: ", min_improvement) : "",
      R"( }
rollout {
  canary_fraction: 0.25
  min_canary_hosts: 8
  bake_seconds: )",
      bake_seconds, R"(
  baseline_seconds: 4
  looks: )",
      looks, R"(
  stages: [0.5, 1.0]
  rack_label: "tor"
}
guard {
  max_p99_regression: 0.05
  # Eight simulated ToRs cannot bound a neutral change at the default +5%.
  pass_max_ucb_regression: 0.2
  confidence: 0.995
  min_samples: 500
  min_rack_pairs: 6
  max_hold_seconds: )",
      3 * bake_seconds, R"(
}
approval { approvers: )",
      approvers, R"( }
)");
}

}  // namespace rocetune::e2e
