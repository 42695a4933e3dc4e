// The real daemons' /metrics, as Prometheus sees it: a rocetune-controller, a
// rocetune-agent reading a fixture sysfs tree, and rocetune-fabricsim --agents
// with --metrics_address run on loopback ports; each text output must pass
// `promtool check metrics` with no finding, carry rocetune_build_info and the
// process_* series, and every agent series must carry `host`. The agent's RDMA
// counters must equal the fixture's own values (the NIC's, not deltas).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "rocetune_job.h"
#include "tests/integration/subprocess.h"

namespace rocetune {
namespace {

using ::rocetune::testing::BuiltBinary;
using ::rocetune::testing::ControllerLaunch;
using ::rocetune::testing::ControllerProcess;
using ::rocetune::testing::HostFixture;
using ::rocetune::testing::HttpGet;
using ::rocetune::testing::MakeTempDir;
using ::rocetune::testing::MetricValue;
using ::rocetune::testing::RunCommand;
using ::rocetune::testing::Subprocess;
using ::rocetune::testing::WaitForPortInReadyFile;

// Scrapes `port` until `needle` shows up (or `timeout`); returns the last body.
std::string ScrapeUntil(int port, const std::string& needle, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string body;
  while (absl::Now() < deadline) {
    body = HttpGet(port, "/metrics");
    if (absl::StrContains(body, needle)) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return body;
}

// Runs `promtool check metrics` on `text`; returns its exit code, output in *out.
int Promtool(const std::string& dir, const std::string& name, const std::string& text,
             std::string* out) {
  const std::string path = absl::StrCat(dir, "/", name, ".prom");
  std::ofstream(path) << text;
  return RunCommand("/bin/sh", {"-c", "promtool check metrics < " + path + " 2>&1"}, out);
}

// Checks that every daemon carries: build info for `component`, the process series.
void ExpectDaemonSeries(const std::string& body, const std::string& component) {
  EXPECT_TRUE(absl::StrContains(
      body, absl::StrCat("rocetune_build_info{component=\"", component, "\",revision=\"")))
      << body;
  for (const char* name : {"process_resident_memory_bytes", "process_virtual_memory_bytes",
                           "process_open_fds", "process_max_fds", "process_start_time_seconds"}) {
    EXPECT_GT(MetricValue(body, name), 0) << component << " " << name;
  }
  // Present, but may still read 0: /proc counts CPU time in 10 ms ticks, and
  // a daemon scraped soon after its start on a busy machine has used fewer
  // (this failed 1 run in 8 under ctest -j2).
  EXPECT_GE(MetricValue(body, "process_cpu_seconds_total"), 0) << component;
}

// Every sample line of a rocetune_ series other than build_info has a host label.
void ExpectHostOnEverySeries(const std::string& body, const std::string& who) {
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    if (line[0] == '#' || !absl::StartsWith(line, "rocetune_") ||
        absl::StartsWith(line, "rocetune_build_info") ||
        absl::StartsWith(line, "rocetune_fabricsim_")) {  // the fabric's own, no host
      continue;
    }
    ++lines;
    EXPECT_TRUE(absl::StrContains(line, "host=\"")) << who << ": " << line;
  }
  EXPECT_GT(lines, 20) << who;
}

class MetricsPromtoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("metrics-promtool");
    ASSERT_FALSE(dir_.empty());
    std::string out;
    ASSERT_EQ(RunCommand("/bin/sh", {"-c", "command -v promtool"}, &out), 0)
        << "promtool is missing: install the Debian package prometheus (scripts/install-deps)";
    controller_ = std::make_unique<ControllerProcess>(ControllerLaunch{.dir = dir_});
    ASSERT_TRUE(controller_->Start()) << controller_->Log();
    grpc_port_ = controller_->grpc_port();
    controller_metrics_ = controller_->metrics_port();
  }
  void TearDown() override {
    if (controller_ != nullptr) {
      controller_->Signal(SIGTERM);
      EXPECT_EQ(controller_->Wait(absl::Seconds(10)), 0) << controller_->Log();
    }
  }

  std::string dir_;
  std::unique_ptr<ControllerProcess> controller_;
  int grpc_port_ = -1;
  int controller_metrics_ = -1;
};

TEST_F(MetricsPromtoolTest, AgentAndControllerPassPromtool) {
  Subprocess agent(BuiltBinary("agent/rocetune-agent"),
                   {"--host_id=host-m", absl::StrCat("--controller=127.0.0.1:", grpc_port_),
                    "--insecure_loopback", "--metrics_address=127.0.0.1:0",
                    "--sysfs_root=" + HostFixture("mlx5_upstream") + "/sys",
                    "--debugfs_root=" + HostFixture("mlx5_upstream") + "/debug",
                    "--state_dir=" + dir_ + "/host-m", "--sample_interval=100ms",
                    "--probe_udp_listen=127.0.0.1:0", "--ready_file=" + dir_ + "/host-m.ready"},
                   dir_ + "/host-m.log");
  ASSERT_TRUE(agent.Start());
  const int port =
      WaitForPortInReadyFile(dir_ + "/host-m.ready", "metrics_port", absl::Seconds(20));
  ASSERT_GT(port, 0) << agent.Log();
  const std::string body =
      ScrapeUntil(port, "rocetune_rdma_port_xmit_wait_total", absl::Seconds(20));

  // The NIC's own values (the fixture's files), under their canonical names.
  const std::string mlx5_0 = "{device=\"mlx5_0\",host=\"host-m\",port=\"1\"}";
  EXPECT_EQ(MetricValue(body, "rocetune_rdma_port_xmit_wait_total" + mlx5_0), 123456) << body;
  EXPECT_EQ(MetricValue(body, "rocetune_rdma_cnp_handled_total" + mlx5_0), 48213) << body;
  EXPECT_GE(MetricValue(body, "rocetune_rdma_symbol_error_total" + mlx5_0), 0) << body;
  EXPECT_GE(MetricValue(body, "rocetune_rdma_out_of_buffer_total" + mlx5_0), 0) << body;
  EXPECT_FALSE(absl::StrContains(body, "name=\"port_xmit_wait\"")) << body;
  // `quantile` only on summaries (prometheus-cpp's own exposer_request_latencies).
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (absl::StartsWith(line, "rocetune_")) {
      EXPECT_FALSE(absl::StrContains(line, "quantile=")) << line;
    }
  }
  ExpectDaemonSeries(body, "agent");
  ExpectHostOnEverySeries(body, "agent");

  std::string out;
  EXPECT_EQ(Promtool(dir_, "agent", body, &out), 0) << out;
  EXPECT_EQ(absl::StripAsciiWhitespace(out), "") << "promtool findings on the agent:\n" << out;

  const std::string controller = HttpGet(controller_metrics_, "/metrics");
  ExpectDaemonSeries(controller, "controller");
  EXPECT_TRUE(absl::StrContains(controller, "rocetune_controller_changes{state=\"CANARY\"} 0"))
      << controller;
  EXPECT_TRUE(absl::StrContains(controller, "rocetune_controller_judge_verdicts_total"));
  // Series that alerts take increase() of exist at 0 before their first event
  // (increase() does not count a series' first sample).
  for (const char* series :
       {"rocetune_controller_store_errors_total{code=\"resource_exhausted\"} 0",
        "rocetune_controller_store_errors_total{code=\"failed_precondition\"} 0",
        "rocetune_controller_changes_rolled_back_total{reason=\"lease_expired\"} 0"}) {
    EXPECT_TRUE(absl::StrContains(controller, series)) << series << "\n" << controller;
  }
  EXPECT_EQ(Promtool(dir_, "controller", controller, &out), 0) << out;
  EXPECT_EQ(absl::StripAsciiWhitespace(out), "") << "promtool findings on the controller:\n" << out;

  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(absl::Seconds(10)), 0) << agent.Log();
}

// The job signal end to end on one host: the real rocetune-agent with
// --job_socket, a job reporting through the C client (librocetune-job.so) and
// a garbage line on a raw connection; /metrics shows the events per job and
// op, their p99 and the lines by outcome, and still passes promtool.
TEST_F(MetricsPromtoolTest, AgentExportsTheJobSignal) {
  const std::string socket_path = dir_ + "/job.sock";
  Subprocess agent(BuiltBinary("agent/rocetune-agent"),
                   {"--host_id=host-j", absl::StrCat("--controller=127.0.0.1:", grpc_port_),
                    "--insecure_loopback", "--metrics_address=127.0.0.1:0",
                    "--sysfs_root=" + HostFixture("mlx5_upstream") + "/sys",
                    "--debugfs_root=" + HostFixture("mlx5_upstream") + "/debug",
                    "--state_dir=" + dir_ + "/host-j", "--sample_interval=100ms",
                    "--probe_udp_listen=127.0.0.1:0", "--job_socket=" + socket_path,
                    "--ready_file=" + dir_ + "/host-j.ready"},
                   dir_ + "/host-j.log");
  ASSERT_TRUE(agent.Start());
  const int port =
      WaitForPortInReadyFile(dir_ + "/host-j.ready", "metrics_port", absl::Seconds(20));
  ASSERT_GT(port, 0) << agent.Log();
  rocetune_job* job = rocetune_job_open(socket_path.c_str(), "train-7");
  ASSERT_NE(job, nullptr);
  for (int i = 1; i <= 50; ++i)
    ASSERT_EQ(rocetune_job_report(job, "allreduce", i * 1e-3, 0, 4096), 0);
  rocetune_job_close(job);
  {
    rocetune_job* raw = rocetune_job_open(socket_path.c_str(), "x");  // a valid handle, a bad op
    EXPECT_EQ(rocetune_job_report(raw, "Not An Op", 1e-3, 0, 0), -EINVAL);  // refused client-side
    rocetune_job_close(raw);
  }
  {
    // A line the client library would never write, on a raw connection.
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    socket_path.copy(addr.sun_path, sizeof addr.sun_path - 1);
    ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    const std::string line = "RTJ1 job=x op=step us=oops\n";
    EXPECT_EQ(send(fd, line.data(), line.size(), MSG_NOSIGNAL), static_cast<ssize_t>(line.size()));
    close(fd);
  }
  const std::string labels = "{host=\"host-j\",job=\"train-7\",op=\"allreduce\"}";
  std::string body;
  testing::Eventually(
      [&] {
        body = HttpGet(port, "/metrics");
        return MetricValue(body, "rocetune_agent_job_events_total" + labels) == 50 &&
               MetricValue(
                   body, "rocetune_agent_job_lines_total{host=\"host-j\",result=\"malformed\"}") ==
                   1;
      },
      absl::Seconds(20), absl::Milliseconds(100));
  EXPECT_EQ(MetricValue(body, "rocetune_agent_job_events_total" + labels), 50) << body;
  EXPECT_EQ(
      MetricValue(body, "rocetune_agent_job_lines_total{host=\"host-j\",result=\"accepted\"}"), 50)
      << body;
  EXPECT_EQ(
      MetricValue(body, "rocetune_agent_job_lines_total{host=\"host-j\",result=\"malformed\"}"), 1)
      << body;
  EXPECT_GT(MetricValue(body, "rocetune_agent_job_p99_seconds" + labels), 0.03) << body;
  std::string out;
  EXPECT_EQ(Promtool(dir_, "agent-job", body, &out), 0) << out;
  EXPECT_EQ(absl::StripAsciiWhitespace(out), "") << "promtool findings:\n" << out;
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(absl::Seconds(10)), 0) << agent.Log();
  EXPECT_FALSE(std::filesystem::exists(socket_path));  // removed at exit
}

// rocetune-fabricsim --agents --metrics_address: one endpoint with every
// simulated agent's series, each under its own host.
TEST_F(MetricsPromtoolTest, FabricsimAgentsServeAgentSeries) {
  std::error_code ec;
  std::filesystem::create_directories(dir_ + "/sim", ec);
  ASSERT_FALSE(ec) << ec.message();
  Subprocess sim(BuiltBinary("sim/rocetune-fabricsim"),
                 {absl::StrCat("--scenario=", ROCETUNE_SOURCE_DIR,
                               "/tests/sim/testdata/agents_incast.textproto"),
                  "--agents", absl::StrCat("--controller=127.0.0.1:", grpc_port_),
                  "--duration=600s", "--pace=1", "--sample_interval=200ms", "--output=none",
                  "--metrics_address=127.0.0.1:0", "--ready_file=" + dir_ + "/sim.ready",
                  "--state_dir=" + dir_ + "/sim", "--switch_agents=false"},
                 dir_ + "/sim.log");
  const absl::Time started = absl::Now();
  ASSERT_TRUE(sim.Start());
  const int port = WaitForPortInReadyFile(dir_ + "/sim.ready", "metrics_port", absl::Seconds(20));
  ASSERT_GT(port, 0) << sim.Log();
  // The three simulated hosts' counter series, each under its own host label.
  std::string body;
  std::set<std::string> hosts;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (hosts.size() < 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
    body = HttpGet(port, "/metrics");
    hosts.clear();
    for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
      if (!absl::StartsWith(line, "rocetune_rdma_")) continue;
      const size_t at = line.find("host=\"");
      if (at == absl::string_view::npos) continue;
      const size_t end = line.find('"', at + 6);
      hosts.insert(std::string(line.substr(at + 6, end - at - 6)));
    }
  }
  EXPECT_EQ(hosts.size(), 3u) << body;
  EXPECT_TRUE(absl::StrContains(body, "rocetune_agent_reports_sent_total{host=\"")) << body;
  EXPECT_TRUE(absl::StrContains(body, "rocetune_dcqcn_parameter{")) << body;
  // The fabric's clock: at pace 1, some simulated time has run by now, and no
  // more than the wall time since the process started.
  const double simulated = MetricValue(body, "rocetune_fabricsim_simulated_seconds");
  ASSERT_GE(simulated, 0) << body;
  EXPECT_GT(simulated, 0);
  EXPECT_LE(simulated, absl::ToDoubleSeconds(absl::Now() - started) + 0.01);
  ExpectDaemonSeries(body, "fabricsim");
  ExpectHostOnEverySeries(body, "fabricsim");
  std::string out;
  EXPECT_EQ(Promtool(dir_, "fabricsim", body, &out), 0) << out;
  EXPECT_EQ(absl::StripAsciiWhitespace(out), "") << "promtool findings on fabricsim:\n" << out;
  sim.Signal(SIGTERM);
  EXPECT_EQ(sim.Wait(absl::Seconds(15)), 0) << sim.Log();
}

// rocetune-fabricsim --agents with its switch agents: the queue occupancy is a
// gauge per switch queue (a level that goes up and down), the queue counters
// counters, and the whole output is promtool clean.
TEST_F(MetricsPromtoolTest, FabricsimSwitchAgentsServeQueueLevelsAsGauges) {
  std::error_code ec;
  std::filesystem::create_directories(dir_ + "/sim", ec);
  ASSERT_FALSE(ec) << ec.message();
  Subprocess sim(
      BuiltBinary("sim/rocetune-fabricsim"),
      {absl::StrCat("--scenario=", ROCETUNE_SOURCE_DIR,
                    "/tests/sim/testdata/agents_incast.textproto"),
       "--agents", absl::StrCat("--controller=127.0.0.1:", grpc_port_), "--duration=600s",
       "--pace=1", "--sample_interval=200ms", "--output=none", "--metrics_address=127.0.0.1:0",
       "--ready_file=" + dir_ + "/sim.ready", "--state_dir=" + dir_ + "/sim"},
      dir_ + "/sim.log");
  ASSERT_TRUE(sim.Start());
  const int port = WaitForPortInReadyFile(dir_ + "/sim.ready", "metrics_port", absl::Seconds(20));
  ASSERT_GT(port, 0) << sim.Log();
  // Levels show from the first round, counters from the second (the first
  // is their baseline).
  const std::string body =
      ScrapeUntil(port, "rocetune_switch_queue_bytes_total{", absl::Seconds(20));
  EXPECT_TRUE(absl::StrContains(body, "# TYPE rocetune_switch_queue_occupancy_bytes gauge"))
      << body;
  EXPECT_GE(MetricValue(body,
                        "rocetune_switch_queue_occupancy_bytes{device=\"Ethernet0\","
                        "host=\"sim-tor0\",queue=\"3\"}"),
            0)
      << body;
  EXPECT_TRUE(absl::StrContains(body, "# TYPE rocetune_switch_queue_bytes_total counter"));
  EXPECT_FALSE(absl::StrContains(body, "name=\"queue_occupancy_bytes\"")) << body;
  ExpectDaemonSeries(body, "fabricsim");
  ExpectHostOnEverySeries(body, "fabricsim");
  std::string out;
  EXPECT_EQ(Promtool(dir_, "fabricsim_switches", body, &out), 0) << out;
  EXPECT_EQ(absl::StripAsciiWhitespace(out), "")
      << "promtool findings on fabricsim with switches:\n"
      << out;
  sim.Signal(SIGTERM);
  EXPECT_EQ(sim.Wait(absl::Seconds(15)), 0) << sim.Log();
}

}  // namespace
}  // namespace rocetune
