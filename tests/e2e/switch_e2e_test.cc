// End to end: a real rocetune-controller, rocetune-fabricsim --agents with a
// switch agent per simulated ToR (32 hosts in 8 ToRs, incast plus background)
// and rocetunectl. The switches are fleet members with role=switch; `rocetunectl
// host` shows a ToR's ports, queues and WRED/ECN profile; pushing a switch knob
// to one ToR is acked, shown, and changes that ToR's ECN marking in the running
// fabric (and only that ToR's); a threshold above the buffer is refused with
// nothing changed.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_env.h"
#include "tests/integration/subprocess.h"

namespace rocetune::e2e {
namespace {

using ::testing::HasSubstr;

constexpr char kKmin[] = "ecn.AZURE_LOSSLESS.green_min_threshold";
constexpr char kKmax[] = "ecn.AZURE_LOSSLESS.green_max_threshold";

// Sum of the ToR's ECN-marked packets over its ports and queues, from the
// fabricsim's /metrics (each switch agent's series carry host=<switch>).
double MarkedPackets(int port, const std::string& host) {
  const std::string body = testing::HttpGet(port, "/metrics");
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    // Switch queue counters: rocetune_switch_<name>_total (docs/metrics.md).
    const bool marked = absl::StartsWith(line, "rocetune_switch_queue_ecn_marked_packets_total{");
    if (!marked || !absl::StrContains(line, absl::StrCat("host=\"", host, "\""))) {
      continue;
    }
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) sum += v;
  }
  return sum;
}

// Marked packets per wall second over `d`.
double MarkRate(int port, const std::string& host, absl::Duration d) {
  const double a = MarkedPackets(port, host);
  absl::SleepFor(d);
  return (MarkedPackets(port, host) - a) / absl::ToDoubleSeconds(d);
}

int64_t Param(const v1::HostInfo& h, const std::string& name) {
  for (const auto& d : h.current_parameters().devices()) {
    auto it = d.dcqcn().find(name);
    if (it != d.dcqcn().end()) return it->second;
  }
  return -1;
}

v1::HostInfo Host(Env& env, const std::string& id) {
  for (const v1::HostInfo& h : env.Hosts()) {
    if (h.host_id() == id) return h;
  }
  return v1::HostInfo();
}

TEST(SwitchE2eTest, PushEcnThresholdToOneSimulatedTor) {
  const std::string sim_dir = testing::MakeTempDir("switch-e2e");
  const std::string ready = sim_dir + "/sim.ready";
  EnvOptions opt;
  opt.switch_agents = true;
  opt.expect_hosts = 40;  // 32 hosts and 8 ToRs
  opt.fabricsim_flags = {"--guard_max_pfc_pause_ratio=0", "--guard_max_cnp_rate=0",
                         "--metrics_address=127.0.0.1:0", "--ready_file=" + ready};
  Env env(opt);
  ASSERT_TRUE(env.Start()) << env.ControllerLog() << env.FabricLog();
  const int metrics = testing::WaitForPortInReadyFile(ready, "metrics_port", absl::Seconds(20));
  ASSERT_GT(metrics, 0) << env.FabricLog();

  // Fleet: 8 switches with role=switch, one device "switch" each; 32 trainers.
  int switches = 0, trainers = 0;
  for (const v1::HostInfo& h : env.Hosts()) {
    const std::string role = h.labels().count("role") ? h.labels().at("role") : "";
    if (role == "switch") {
      ++switches;
      EXPECT_TRUE(absl::StartsWith(h.host_id(), "sim-tor")) << h.host_id();
      EXPECT_EQ(h.labels().at("tor"), h.host_id().substr(7)) << h.host_id();
      ASSERT_EQ(h.devices_size(), 1) << h.host_id();
      EXPECT_EQ(h.devices(0).name(), "switch");
      EXPECT_EQ(h.devices(0).switch_queues_size(), 6 * 8) << h.host_id();  // 4 down + 2 up
      EXPECT_EQ(Param(h, kKmax), 1600000) << h.host_id();
    } else if (role == "trainer") {
      ++trainers;
    }
  }
  EXPECT_EQ(switches, 8);
  EXPECT_EQ(trainers, 32);

  std::string out;
  ASSERT_EQ(env.Ctl({"hosts"}, "alice", &out), 0) << out;
  bool row = false;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    row |= absl::StartsWith(line, "sim-tor0 ") && absl::StrContains(line, " switch ") &&
           absl::StrContains(line, "6 ports");
  }
  EXPECT_TRUE(row) << out;
  ASSERT_EQ(env.Ctl({"host", "sim-tor0"}, "alice", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("switch:        platform=sim"));
  EXPECT_THAT(out, HasSubstr("port Ethernet0: ACTIVE 100000 Mb/s pfc_enable=0,1,2,3,4,5,6,7"));
  EXPECT_THAT(out, HasSubstr("queue Ethernet20:0-7 -> AZURE_LOSSLESS"));
  EXPECT_THAT(out, HasSubstr("profile AZURE_LOSSLESS: green_drop_probability=20 "
                             "green_max_threshold=1600000 green_min_threshold=400000"));
  ASSERT_EQ(env.Ctl({"host", "sim-tor0", "-o", "json"}, "alice", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("AZURE_LOSSLESS"));
  EXPECT_THAT(out, HasSubstr("Ethernet20"));

  // The incast's receiver hangs under tor0: its ToR marks.
  const double before0 = MarkRate(metrics, "sim-tor0", absl::Seconds(4));
  const double before1 = MarkRate(metrics, "sim-tor1", absl::Seconds(4));
  EXPECT_GT(before0, 0) << env.FabricLog();

  // A Kmax above the switch buffer is refused, nothing changes.
  EXPECT_NE(env.Ctl({"push", "sim-tor0", "switch", absl::StrCat(kKmax, "=40000000"), "--wait",
                     "--reason=e2e"},
                    "alice", &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("exceeds the buffer"));
  EXPECT_EQ(Param(Host(env, "sim-tor0"), kKmax), 1600000);

  // Marking thresholds near the buffer: the ToR's queues (bounded by PFC well
  // below them) are no longer marked.
  ASSERT_EQ(env.Ctl({"push", "sim-tor0", "switch", absl::StrCat(kKmin, "=30000000"),
                     absl::StrCat(kKmax, "=33000000"), "--wait", "--reason=e2e"},
                    "alice", &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("sim-tor0 acked"));
  ASSERT_TRUE(env.WaitFor([&] { return Param(Host(env, "sim-tor0"), kKmax) == 33000000; },
                          absl::Seconds(10)));
  ASSERT_EQ(env.Ctl({"host", "sim-tor0"}, "alice", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("green_max_threshold=33000000 green_min_threshold=30000000"));
  EXPECT_EQ(Param(Host(env, "sim-tor1"), kKmax), 1600000);  // only that ToR

  // The fabric's next sync and agent rounds: 2 s more of reports from every
  // host and switch.
  ASSERT_TRUE(env.WaitForTelemetry(absl::Seconds(2))) << env.ControllerLog();
  const double after0 = MarkRate(metrics, "sim-tor0", absl::Seconds(4));
  const double after1 = MarkRate(metrics, "sim-tor1", absl::Seconds(4));
  std::printf("tor0 marked packets/s %.0f -> %.0f; tor1 (unchanged) %.0f -> %.0f\n", before0,
              after0, before1, after1);
  EXPECT_LT(after0, 0.05 * before0);
  if (before1 > 0) {
    EXPECT_GT(after1, 0);  // the other ToRs keep marking
  }
}

}  // namespace
}  // namespace rocetune::e2e
