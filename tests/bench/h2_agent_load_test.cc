// bench/h2_agent_load (controller_load_bench's raw HTTP/2 generator), run
// in-process against the real grpc_sink and rocetune-controller on loopback
// ports they pick: every stream connects, every Report the generator says it
// handed to the kernel is read by the server (none more, none lost), paced and in
// a flood, and the server never resets a stream or the connection (flow control
// and framing as gRPC expects them).
#include "bench/h2_agent_load.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rocetune/v1/agent.pb.h"
#include "tests/integration/subprocess.h"

namespace rocetune {
namespace {

using ::rocetune::bench::H2AgentLoadOptions;
using ::rocetune::bench::H2AgentLoadStats;
using ::rocetune::testing::BuiltBinary;
using ::rocetune::testing::HttpGet;
using ::rocetune::testing::MakeTempDir;
using ::rocetune::testing::Subprocess;
using ::rocetune::testing::WaitForPortInReadyFile;

std::string Hello(int i) {
  v1::AgentMessage m;
  m.mutable_hello()->set_host_id(absl::StrCat("h2load-", i));
  m.mutable_hello()->set_hostname(absl::StrCat("h2load-", i, ".example"));
  (*m.mutable_hello()->mutable_labels())["rack"] = absl::StrCat("r", i % 4);
  return m.SerializeAsString();
}

std::string ReportBody(int i) {
  v1::Report r;
  for (int c = 0; c < 8; ++c) {
    v1::CounterSample* s = r.add_counters();
    s->set_device("mlx5_0");
    s->set_port(1);
    s->set_priority(c % 8);
    s->set_name(c == 0 ? "cnp_sent" : absl::StrCat("counter_", c));
    s->set_delta(100 + c + i);
    s->set_rate_per_second(10.0 + c);
  }
  return r.SerializeAsString();
}

// A Report of `counters` counters of one port (about 33 bytes each), for
// stream `i`.
std::string ReportOfCounters(int counters, int i) {
  v1::Report r;
  for (int c = 0; c < counters; ++c) {
    v1::CounterSample* s = r.add_counters();
    s->set_device("mlx5_0");
    s->set_port(1);
    s->set_name(absl::StrCat("counter_", c));
    s->set_delta(100000 + c + i);
  }
  return r.SerializeAsString();
}

// 800 counters, tens of KB: the server's 4 MiB stream window holds only some
// hundred of them, so a flood without an in-flight bound runs into it.
std::string BigReportBody(int i) { return ReportOfCounters(800, i); }

// 3000 counters, above gRPC's 64 KB default stream window (the test checks;
// an 8-port host's Report is 83 KB): each goes out in parts as the server
// returns credit.
std::string HugeReportBody(int i) { return ReportOfCounters(3000, i); }

// The value of the sample `key` ("name" or "name{labels}") on /metrics, or -1.
double Metric(int port, const std::string& key) {
  return testing::MetricValue(HttpGet(port, "/metrics"), key);
}

// Polls until `key` equals `want`; returns the last value read.
double WaitForMetric(int port, const std::string& key, double want, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  double v = Metric(port, key);
  while (v != want && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
    v = Metric(port, key);
  }
  return v;
}

// The generator on a thread of this process, driven through pipes as
// controller_load_bench drives it through stdin/stdout.
class Generator {
 public:
  explicit Generator(H2AgentLoadOptions options) {
    if (pipe(commands_) != 0 || pipe(replies_) != 0) return;
    reply_out_ = fdopen(replies_[1], "w");
    thread_ = std::thread([this, options] {
      result_ = bench::RunH2AgentLoad(options, commands_[0], reply_out_);
      std::fclose(reply_out_);  // EOF for ReadLine
    });
  }
  ~Generator() {
    if (thread_.joinable()) Quit();
    for (int fd : {commands_[0], commands_[1], replies_[0]}) {
      if (fd >= 0) close(fd);
    }
  }

  void Send(const std::string& command) {
    const std::string line = command + "\n";
    ASSERT_EQ(write(commands_[1], line.data(), line.size()), static_cast<ssize_t>(line.size()));
  }

  // The next reply line ("" on timeout or EOF).
  std::string ReadLine(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return "";
      pollfd p{replies_[0], POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) continue;
      char buf[256];
      ssize_t n = read(replies_[0], buf, sizeof buf);
      if (n <= 0) return "";
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }

  // "sent" -> the count, or -1.
  double Sent() {
    Send("sent");
    const std::string line = ReadLine(absl::Seconds(5));
    double n = -1;
    if (line.rfind("SENT ", 0) != 0 || !absl::SimpleAtod(line.substr(5), &n)) return -1;
    return n;
  }

  H2AgentLoadStats Quit() {
    Send("quit");
    thread_.join();
    EXPECT_TRUE(result_.ok()) << result_.status();
    return result_.ok() ? *result_ : H2AgentLoadStats();
  }

 private:
  int commands_[2] = {-1, -1};
  int replies_[2] = {-1, -1};
  FILE* reply_out_ = nullptr;
  std::string buffer_;
  std::thread thread_;
  absl::StatusOr<H2AgentLoadStats> result_;
};

class H2AgentLoadTest : public ::testing::Test {
 protected:
  // Starts `binary` with `args` plus its --ready_file; sets the ports.
  void StartServer(const std::string& binary, std::vector<std::string> args) {
    dir_ = MakeTempDir("h2-agent-load");
    ASSERT_FALSE(dir_.empty());
    args.push_back("--ready_file=" + dir_ + "/ready");
    server_ = std::make_unique<Subprocess>(BuiltBinary(binary), args, dir_ + "/server.log");
    ASSERT_TRUE(server_->Start());
    grpc_port_ = WaitForPortInReadyFile(dir_ + "/ready", "grpc_port", absl::Seconds(20));
    ASSERT_GT(grpc_port_, 0) << server_->Log();
    metrics_port_ = WaitForPortInReadyFile(dir_ + "/ready", "metrics_port", absl::Seconds(1));
    ASSERT_GT(metrics_port_, 0) << server_->Log();
  }
  void StartSink() {
    StartServer("bench/grpc_sink", {"--listen=127.0.0.1:0", "--metrics_address=127.0.0.1:0"});
  }
  void StartController() {
    StartServer("controller/rocetune-controller",
                {"--insecure_loopback", "--listen=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                 "--state_dir=" + MakeTempDir("h2-agent-load-state"), "--log_level=warning"});
  }
  void TearDown() override {
    if (server_ != nullptr) {
      server_->Signal(SIGTERM);
      server_->Wait(absl::Seconds(10));
    }
  }

  H2AgentLoadOptions Options(int streams) const {
    H2AgentLoadOptions o;
    o.port = grpc_port_;
    o.streams = streams;
    o.hello = Hello;
    o.report_body = ReportBody;
    o.connect_deadline = absl::Seconds(20);
    return o;
  }

  // One phase: `command` for `seconds`, then idle; the server must read
  // exactly the Reports sent so far (`received_key` on /metrics).
  void PhaseDeliversExactlySent(Generator& gen, const std::string& command, double seconds,
                                const std::string& received_key, double min_sent) {
    gen.Send(command);
    absl::SleepFor(absl::Seconds(seconds));
    gen.Send("idle");
    const double sent = gen.Sent();
    ASSERT_GE(sent, min_sent) << command;
    EXPECT_EQ(WaitForMetric(metrics_port_, received_key, sent, absl::Seconds(10)), sent)
        << command << "\n"
        << server_->Log();
    absl::SleepFor(absl::Milliseconds(200));  // and no more than that
    EXPECT_EQ(Metric(metrics_port_, received_key), sent) << command;
  }

  static void ExpectNoFailure(const H2AgentLoadStats& stats, int streams) {
    EXPECT_EQ(stats.up, streams) << stats.Summary();
    EXPECT_EQ(stats.failed, 0) << stats.Summary();
    EXPECT_EQ(stats.frames_in[3], 0u) << "RST_STREAM: " << stats.Summary();
    EXPECT_EQ(stats.frames_in[7], 0u) << "GOAWAY: " << stats.Summary();
    EXPECT_GT(stats.frames_in[4], 0u) << "no SETTINGS: " << stats.Summary();
  }

  std::string dir_;
  std::unique_ptr<Subprocess> server_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
};

TEST_F(H2AgentLoadTest, SinkReadsEveryPacedReport) {
  StartSink();
  Generator gen(Options(50));
  ASSERT_EQ(gen.ReadLine(absl::Seconds(30)), "CONNECTED 50 0");
  PhaseDeliversExactlySent(gen, "pace 400", 1.0, "rocetune_sink_reports_received_total", 100);
  // After the drain every Report has been credited back: what flood relies on.
  absl::SleepFor(absl::Milliseconds(300));
  H2AgentLoadStats stats = gen.Quit();
  ExpectNoFailure(stats, 50);
  EXPECT_EQ(stats.awaiting_credit, 0) << stats.Summary();
}

TEST_F(H2AgentLoadTest, SinkFloodStaysWithinFlowControl) {
  StartSink();
  // Large Reports and no in-flight bound: the HTTP/2 windows alone hold the
  // flood back; a byte beyond them and gRPC ends the connection.
  H2AgentLoadOptions options = Options(20);
  options.report_body = BigReportBody;
  options.flood_inflight = 1 << 30;
  Generator gen(options);
  ASSERT_EQ(gen.ReadLine(absl::Seconds(30)), "CONNECTED 20 0");
  PhaseDeliversExactlySent(gen, "flood", 2.0, "rocetune_sink_reports_received_total", 200);
  H2AgentLoadStats stats = gen.Quit();
  ExpectNoFailure(stats, 20);
  // The windows filled: a Report waited for credit, or went out in parts.
  EXPECT_GT(stats.window_blocked + stats.split_by_window, 0u)
      << "the windows never filled: " << stats.Summary();
}

TEST_F(H2AgentLoadTest, ControllerRegistersEveryHostAndReadsEveryReport) {
  StartController();
  H2AgentLoadOptions options = Options(50);
  options.flood_inflight = 1;  // strict ping-pong: stalls unless every Report is credited
  Generator gen(options);
  ASSERT_EQ(gen.ReadLine(absl::Seconds(30)), "CONNECTED 50 0");
  EXPECT_EQ(WaitForMetric(metrics_port_, "rocetune_controller_hosts{state=\"connected\"}", 50,
                          absl::Seconds(10)),
            50);
  PhaseDeliversExactlySent(gen, "pace 400", 1.0, "rocetune_controller_reports_received_total", 100);
  // The closed loop (one Report in flight per stream) relies on the server
  // crediting each Report back once read: none may be left waiting after it.
  PhaseDeliversExactlySent(gen, "flood", 1.0, "rocetune_controller_reports_received_total", 500);
  absl::SleepFor(absl::Milliseconds(300));
  H2AgentLoadStats stats = gen.Quit();
  ExpectNoFailure(stats, 50);
  EXPECT_EQ(stats.awaiting_credit, 0) << stats.Summary();
  // The controller answers each Connect (response headers, then its messages).
  EXPECT_GE(stats.frames_in[1], 50u) << stats.Summary();
}

// Reports larger than the stream window, one in flight per stream: each is
// sent in parts as credit returns, every one is read, none left uncredited.
TEST_F(H2AgentLoadTest, ControllerReadsReportsLargerThanTheStreamWindow) {
  StartController();
  H2AgentLoadOptions options = Options(10);
  options.report_body = HugeReportBody;
  options.flood_inflight = 1;
  Generator gen(options);
  ASSERT_EQ(gen.ReadLine(absl::Seconds(30)), "CONNECTED 10 0");
  ASSERT_GT(HugeReportBody(0).size(), 65535u);
  PhaseDeliversExactlySent(gen, "pace 50", 1.0, "rocetune_controller_reports_received_total", 20);
  PhaseDeliversExactlySent(gen, "flood", 1.0, "rocetune_controller_reports_received_total", 50);
  absl::SleepFor(absl::Milliseconds(300));
  H2AgentLoadStats stats = gen.Quit();
  ExpectNoFailure(stats, 10);
  EXPECT_EQ(stats.awaiting_credit, 0) << stats.Summary();
  EXPECT_GT(stats.split_by_window, 0u)
      << "no Report was larger than the window: " << stats.Summary();
}

}  // namespace
}  // namespace rocetune
