// Starts a real rocetune-controller and a real rocetune-agent (reading a
// fixture sysfs tree) on loopback ports they pick, and checks that the
// controller registered the host with its inventory, that both serve /metrics,
// and that both stop cleanly on SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "rocetune/v1/admin.grpc.pb.h"
#include "tests/integration/subprocess.h"

namespace rocetune {
namespace {

using ::rocetune::testing::BuiltBinary;
using ::rocetune::testing::ControllerLaunch;
using ::rocetune::testing::ControllerProcess;
using ::rocetune::testing::Eventually;
using ::rocetune::testing::HostFixture;
using ::rocetune::testing::HttpGet;
using ::rocetune::testing::MakeTempDir;
using ::rocetune::testing::Subprocess;
using ::rocetune::testing::WaitForPortInReadyFile;

class AgentControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("agent-controller");
    ASSERT_FALSE(dir_.empty());
    controller_ = std::make_unique<ControllerProcess>(ControllerLaunch{.dir = dir_});
    ASSERT_TRUE(controller_->Start()) << controller_->Log();
    grpc_port_ = controller_->grpc_port();
    controller_metrics_port_ = controller_->metrics_port();
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_port_),
                                       grpc::InsecureChannelCredentials());
    admin_ = v1::AdminService::NewStub(channel);
  }

  std::unique_ptr<Subprocess> StartAgent(const std::string& host_id, const std::string& fixture,
                                         std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--host_id=" + host_id,
                                  absl::StrCat("--controller=127.0.0.1:", grpc_port_),
                                  "--insecure_loopback",
                                  "--metrics_address=127.0.0.1:0",
                                  "--sysfs_root=" + HostFixture(fixture) + "/sys",
                                  "--debugfs_root=" + HostFixture(fixture) + "/debug",
                                  "--state_dir=" + dir_ + "/" + host_id,
                                  "--labels=rack=r1,role=trainer",
                                  "--sample_interval=100ms",
                                  "--probe_udp_listen=127.0.0.1:0",
                                  "--ready_file=" + dir_ + "/" + host_id + ".ready"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto agent = std::make_unique<Subprocess>(BuiltBinary("agent/rocetune-agent"), args,
                                              dir_ + "/" + host_id + ".log");
    EXPECT_TRUE(agent->Start());
    return agent;
  }

  std::optional<v1::HostInfo> WaitForHost(const std::string& host_id, absl::Duration timeout) {
    absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      grpc::ClientContext ctx;
      v1::ListHostsResponse resp;
      if (admin_->ListHosts(&ctx, v1::ListHostsRequest(), &resp).ok()) {
        for (const auto& h : resp.hosts()) {
          if (h.host_id() == host_id && h.state() == v1::HOST_CONNECTED) return h;
        }
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    return std::nullopt;
  }

  std::string dir_;
  std::unique_ptr<ControllerProcess> controller_;
  int grpc_port_ = -1;
  int controller_metrics_port_ = -1;
  std::unique_ptr<v1::AdminService::Stub> admin_;
};

TEST_F(AgentControllerTest, ControllerRegistersHostFromHello) {
  auto agent = StartAgent("host-a", "mlx5_ofed");
  std::optional<v1::HostInfo> host = WaitForHost("host-a", absl::Seconds(20));
  ASSERT_TRUE(host.has_value()) << "agent log:\n"
                                << agent->Log() << "\ncontroller log:\n"
                                << controller_->Log();
  EXPECT_EQ(host->labels().at("rack"), "r1");
  EXPECT_EQ(host->labels().at("role"), "trainer");
  ASSERT_GE(host->devices_size(), 1);
  bool saw_mlx5 = false;
  for (const auto& d : host->devices()) {
    if (d.name() == "mlx5_0") {
      saw_mlx5 = true;
      EXPECT_EQ(d.driver(), "mlx5_core");
      EXPECT_EQ(d.cc_param_layout(), "ofed_sysfs");
      ASSERT_GE(d.ports_size(), 1);
      EXPECT_EQ(d.ports(0).link_layer(), "Ethernet");
    }
  }
  EXPECT_TRUE(saw_mlx5);
  // No RDMA here, so the agent fell back to UDP probes and advertises its responder.
  EXPECT_EQ(host->devices(0).counter_source(), "sysfs");

  // Reports flow: the host's report count grows.
  absl::SleepFor(absl::Milliseconds(600));
  grpc::ClientContext ctx;
  v1::GetHostRequest req;
  req.set_host_id("host-a");
  v1::HostInfo again;
  ASSERT_TRUE(admin_->GetHost(&ctx, req, &again).ok());
  EXPECT_GE(again.reports(), 2u);

  // Both daemons serve /metrics.
  int agent_metrics =
      WaitForPortInReadyFile(dir_ + "/host-a.ready", "metrics_port", absl::Seconds(5));
  ASSERT_GT(agent_metrics, 0);
  EXPECT_NE(HttpGet(agent_metrics, "/metrics").find("rocetune_agent_reports_sent_total"),
            std::string::npos);
  EXPECT_NE(HttpGet(controller_metrics_port_, "/metrics").find("rocetune_"), std::string::npos);

  // Clean stop on SIGTERM.
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(10)), 0) << agent->Log();
  controller_->Signal(SIGTERM);
  EXPECT_EQ(controller_->Wait(absl::Seconds(10)), 0) << controller_->Log();
}

// Scrapes `port` and returns the value of the series named exactly `series`
// (name plus labels), or -1.
double MetricValue(int port, const std::string& series) {
  return testing::MetricValue(HttpGet(port, "/metrics"), series);
}

// The agent's /metrics and its local guard must not depend on the
// controller: with the controller gone, sampling goes on.
TEST_F(AgentControllerTest, AgentKeepsSamplingWhileTheControllerIsDown) {
  auto agent = StartAgent("host-c", "mlx5_ofed");
  ASSERT_TRUE(WaitForHost("host-c", absl::Seconds(20)).has_value()) << agent->Log();
  const int metrics =
      WaitForPortInReadyFile(dir_ + "/host-c.ready", "metrics_port", absl::Seconds(5));
  ASSERT_GT(metrics, 0);
  const std::string rounds = "rocetune_agent_sampling_duration_seconds_count{host=\"host-c\"}";
  const std::string connected = "rocetune_agent_controller_connected{host=\"host-c\"}";
  // The agent sets the gauge when its Hello write completes, which can come
  // after the controller has filed the Hello.
  EXPECT_TRUE(Eventually([&] { return MetricValue(metrics, connected) == 1; }, absl::Seconds(10),
                         absl::Milliseconds(50)))
      << HttpGet(metrics, "/metrics");
  controller_->Signal(SIGTERM);
  ASSERT_EQ(controller_->Wait(absl::Seconds(10)), 0) << controller_->Log();
  ASSERT_TRUE(Eventually([&] { return MetricValue(metrics, connected) == 0; }, absl::Seconds(10),
                         absl::Milliseconds(50)))
      << agent->Log();
  const double before = MetricValue(metrics, rounds);
  ASSERT_GT(before, 0) << HttpGet(metrics, "/metrics");
  absl::SleepFor(absl::Seconds(2));  // --sample_interval=100ms: about 20 rounds
  const double after = MetricValue(metrics, rounds);
  EXPECT_GE(after - before, 10) << agent->Log();
  EXPECT_NE(agent->Log().find("controller unreachable"), std::string::npos) << agent->Log();
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(10)), 0) << agent->Log();
}

TEST_F(AgentControllerTest, AgentReconnectsWithinSecondsOfAControllerRestart) {
  auto agent = StartAgent("host-r", "mlx5_ofed");
  ASSERT_TRUE(WaitForHost("host-r", absl::Seconds(20)).has_value()) << agent->Log();
  controller_->Signal(SIGTERM);
  ASSERT_EQ(controller_->Wait(absl::Seconds(10)), 0) << controller_->Log();
  // Down long enough for every backoff to reach its cap.
  absl::SleepFor(absl::Seconds(12));
  controller_ = std::make_unique<ControllerProcess>(
      ControllerLaunch{.dir = dir_, .port = grpc_port_, .name = "controller2"});
  // From the restart on (the controller's own start-up included).
  const absl::Time restarted = absl::Now();
  ASSERT_TRUE(controller_->Start()) << controller_->Log();
  ASSERT_TRUE(WaitForHost("host-r", absl::Seconds(30)).has_value()) << agent->Log();
  const absl::Duration took = absl::Now() - restarted;
  std::printf("agent reconnected %.2f s after the controller restarted\n",
              absl::ToDoubleSeconds(took));
  EXPECT_LT(took, absl::Seconds(5)) << agent->Log();
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(10)), 0) << agent->Log();
}

// Reports taken while the controller is down are held (bounded, oldest
// dropped first) and sent on reconnect; the controller files them in the
// windows of their time.
TEST_F(AgentControllerTest, ReportsHeldWhileTheControllerIsDownArriveAfterTheRestart) {
  auto agent = StartAgent("host-h", "mlx5_ofed");
  auto small = StartAgent("host-s", "mlx5_ofed", {"--report_buffer_max=5"});
  ASSERT_TRUE(WaitForHost("host-h", absl::Seconds(20)).has_value()) << agent->Log();
  ASSERT_TRUE(WaitForHost("host-s", absl::Seconds(20)).has_value()) << small->Log();
  const int metrics_h =
      WaitForPortInReadyFile(dir_ + "/host-h.ready", "metrics_port", absl::Seconds(5));
  const int metrics_s =
      WaitForPortInReadyFile(dir_ + "/host-s.ready", "metrics_port", absl::Seconds(5));
  ASSERT_GT(metrics_h, 0);
  ASSERT_GT(metrics_s, 0);
  controller_->Signal(SIGTERM);
  ASSERT_EQ(controller_->Wait(absl::Seconds(10)), 0) << controller_->Log();
  absl::SleepFor(absl::Seconds(2));  // --sample_interval=100ms: about 20 rounds held
  const double held_h = MetricValue(metrics_h, "rocetune_agent_reports_held{host=\"host-h\"}");
  EXPECT_GE(held_h, 10) << HttpGet(metrics_h, "/metrics");
  EXPECT_EQ(MetricValue(metrics_s, "rocetune_agent_reports_held{host=\"host-s\"}"), 5);
  controller_ = std::make_unique<ControllerProcess>(
      ControllerLaunch{.dir = dir_, .port = grpc_port_, .name = "controller2"});
  ASSERT_TRUE(controller_->Start()) << controller_->Log();
  const int cmetrics = controller_->metrics_port();
  ASSERT_TRUE(WaitForHost("host-h", absl::Seconds(15)).has_value()) << agent->Log();
  ASSERT_TRUE(WaitForHost("host-s", absl::Seconds(15)).has_value()) << small->Log();
  const std::string sent_h = "rocetune_agent_held_reports_sent_total{host=\"host-h\"}";
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (MetricValue(metrics_h, sent_h) < held_h && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  // Every report held by the roomy agent arrived; the small one kept its newest 5.
  EXPECT_GE(MetricValue(metrics_h, sent_h), held_h) << agent->Log();
  EXPECT_EQ(MetricValue(metrics_h, "rocetune_agent_held_reports_dropped_total{host=\"host-h\"}"),
            0);
  EXPECT_EQ(MetricValue(metrics_h, "rocetune_agent_reports_held{host=\"host-h\"}"), 0);
  const double sent_s =
      MetricValue(metrics_s, "rocetune_agent_held_reports_sent_total{host=\"host-s\"}");
  EXPECT_GE(sent_s, 5);
  EXPECT_LE(sent_s, 6);  // one more when a write failed as the stream broke
  EXPECT_GE(MetricValue(metrics_s, "rocetune_agent_held_reports_dropped_total{host=\"host-s\"}"),
            10)
      << HttpGet(metrics_s, "/metrics");
  // The controller filed them (none is past its 10-minute retention).
  const double filed =
      MetricValue(cmetrics, "rocetune_controller_held_reports_total{outcome=\"filed\"}");
  EXPECT_GE(filed, held_h + 5) << HttpGet(cmetrics, "/metrics");
  EXPECT_EQ(MetricValue(cmetrics, "rocetune_controller_held_reports_total{outcome=\"discarded\"}"),
            0);
  // The restarted controller counts them as the host's reports.
  grpc::ClientContext ctx;
  v1::GetHostRequest req;
  req.set_host_id("host-h");
  v1::HostInfo info;
  ASSERT_TRUE(admin_->GetHost(&ctx, req, &info).ok());
  EXPECT_GE(info.reports(), static_cast<uint64_t>(held_h));
  for (auto* a : {agent.get(), small.get()}) {
    a->Signal(SIGTERM);
    EXPECT_EQ(a->Wait(absl::Seconds(10)), 0) << a->Log();
  }
}

TEST_F(AgentControllerTest, TwoAgentsWithDistinctIdentitiesRegister) {
  // Two agents with distinct identities both register.
  auto a = StartAgent("host-b1", "bnxt_re");
  auto b = StartAgent("host-b2", "irdma");
  EXPECT_TRUE(WaitForHost("host-b1", absl::Seconds(20)).has_value()) << a->Log();
  EXPECT_TRUE(WaitForHost("host-b2", absl::Seconds(20)).has_value()) << b->Log();
  a->Signal(SIGTERM);
  b->Signal(SIGTERM);
  EXPECT_EQ(a->Wait(absl::Seconds(10)), 0);
  EXPECT_EQ(b->Wait(absl::Seconds(10)), 0);
}

}  // namespace
}  // namespace rocetune
