// Soak: rocetune-controller under a steady paced Report load from the
// benchmark's HTTP/2 load generator (bench/controller_load_bench --generator,
// one Connect stream per simulated host). Its RSS after warm-up must grow
// less than 10% to the end, and the hosts and telemetry maps must stay
// bounded; then every stream ends, the gone hosts are forgotten
// (rocetunectl host forget, the ForgetHost call) and the maps shrink to
// nothing. A connected host cannot be forgotten.
//
// make test runs 60 s at 4,000 Reports/s over 2,000 streams; `make soak` runs
// the 10 minutes at twice the benchmark's paced target (40,000/s over
// 10,000 streams). Environment: ROCETUNE_SOAK_SECONDS, ROCETUNE_SOAK_STREAMS,
// ROCETUNE_SOAK_RATE.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_env.h"

namespace rocetune::e2e {
namespace {

using ::rocetune::testing::MetricSum;

double EnvNumber(const char* name, double fallback) {
  const char* v = getenv(name);
  double d = 0;
  return v != nullptr && absl::SimpleAtod(v, &d) && d > 0 ? d : fallback;
}

int64_t RssKb(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      int64_t kb = 0;
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kb)) return kb;
    }
  }
  return -1;
}

// The load generator with a pipe to its commands and one from its answers.
class Generator {
 public:
  bool Start(int port, int streams, const std::string& log) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return false;
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      dup2(in[0], STDIN_FILENO);
      dup2(out[1], STDOUT_FILENO);
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) dup2(fd, STDERR_FILENO);
      close(in[1]);
      close(out[0]);
      const std::string bin = testing::BuiltBinary("bench/controller_load_bench");
      const std::string p = absl::StrCat("--port=", port);
      const std::string n = absl::StrCat("--n=", streams);
      // The small Report (64 counters): the soak is about memory and
      // streams over time, at a rate 2 cores sustain beside the controller.
      execl(bin.c_str(), bin.c_str(), "--generator", p.c_str(), n.c_str(), "--first=0",
            "--report=small", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    cmd_ = fdopen(in[1], "w");
    ans_ = fdopen(out[0], "r");
    return cmd_ != nullptr && ans_ != nullptr;
  }
  void Send(const std::string& line) {
    std::fprintf(cmd_, "%s\n", line.c_str());
    std::fflush(cmd_);
  }
  std::string ReadLine() {
    char buf[512];
    if (std::fgets(buf, sizeof buf, ans_) == nullptr) return "";
    return buf;
  }
  void Quit() {
    if (pid_ <= 0) return;
    Send("quit");
    std::fclose(cmd_);
    cmd_ = nullptr;
    int status = 0;
    for (int i = 0; i < 100 && waitpid(pid_, &status, WNOHANG) == 0; ++i) {
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (waitpid(pid_, &status, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
  ~Generator() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (cmd_ != nullptr) std::fclose(cmd_);
    if (ans_ != nullptr) std::fclose(ans_);
  }

 private:
  pid_t pid_ = -1;
  FILE* cmd_ = nullptr;
  FILE* ans_ = nullptr;
};

TEST(ControllerSoakE2E, SteadyLoadBoundedMemoryAndForgetShrinksMaps) {
  const double seconds = EnvNumber("ROCETUNE_SOAK_SECONDS", 60);
  const int streams = static_cast<int>(EnvNumber("ROCETUNE_SOAK_STREAMS", 2000));
  const double rate = EnvNumber("ROCETUNE_SOAK_RATE", 4000);
  EnvOptions opt;
  opt.controller_flags = {"--retention=30s", "--stale_after=3s", "--gone_after=5s"};
  Env env(opt);
  ASSERT_TRUE(env.StartController()) << env.ControllerLog();
  const int metrics = env.controller_metrics_port();
  ASSERT_GT(metrics, 0);
  Generator gen;
  ASSERT_TRUE(gen.Start(env.port(), streams, absl::StrCat(env.dir(), "/generator.log")));
  const std::string connected = gen.ReadLine();
  ASSERT_THAT(connected, ::testing::StartsWith("CONNECTED")) << connected;
  gen.Send(absl::StrCat("pace ", rate));

  // Warm-up: a fifth of the run (at least the telemetry retention), then the
  // RSS baseline.
  const absl::Duration total = absl::Seconds(seconds);
  const absl::Duration warm = std::max(total / 5, absl::Seconds(35));
  absl::SleepFor(warm);
  const pid_t pid = env.controller_pid();
  const int64_t rss0 = RssKb(pid);
  std::string page = testing::HttpGet(metrics, "/metrics");
  const double windows0 = MetricSum(page, "rocetune_controller_telemetry_windows");
  const double hosts0 = MetricSum(page, "rocetune_controller_hosts");
  const double received0 = MetricSum(page, "rocetune_controller_reports_received_total");
  int64_t rss_max = rss0;
  double windows_max = windows0, hosts_max = hosts0;
  const absl::Time end = absl::Now() + (total - warm);
  while (absl::Now() < end) {
    absl::SleepFor(absl::Seconds(5));
    rss_max = std::max(rss_max, RssKb(pid));
    page = testing::HttpGet(metrics, "/metrics");
    windows_max = std::max(windows_max, MetricSum(page, "rocetune_controller_telemetry_windows"));
    hosts_max = std::max(hosts_max, MetricSum(page, "rocetune_controller_hosts"));
  }
  const int64_t rss1 = RssKb(pid);
  page = testing::HttpGet(metrics, "/metrics");
  const double received = MetricSum(page, "rocetune_controller_reports_received_total") - received0;
  const double measured_s = absl::ToDoubleSeconds(total - warm);
  const double growth = rss0 > 0 ? static_cast<double>(rss1 - rss0) / rss0 : 0;

  // A connected host cannot be forgotten.
  std::string out;
  EXPECT_EQ(env.Ctl({"host", "forget", "bench-0", "--reason=soak"}, "alice", &out), 1) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("FAILED_PRECONDITION"));

  // Every stream ends: every host is gone; forget them.
  gen.Quit();
  ASSERT_TRUE(env.WaitFor(
      [&] {
        for (const v1::HostInfo& h : env.Hosts()) {
          if (h.state() != v1::HOST_GONE) return false;
        }
        return true;
      },
      absl::Seconds(60)));
  const size_t before_forget = env.Hosts().size();
  EXPECT_EQ(env.Ctl({"host", "forget", "bench-0", "--reason=soak"}, "alice", &out), 0) << out;
  int forgotten = 1;
  for (const v1::HostInfo& h : env.Hosts()) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("rocetune-actor", "alice");
    v1::ForgetHostRequest req;
    req.set_host_id(h.host_id());
    req.set_reason("soak");
    v1::ForgetHostResponse resp;
    grpc::Status s = env.admin().ForgetHost(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << h.host_id() << ": " << s.error_message();
    forgotten += s.ok();
  }
  const size_t after_forget = env.Hosts().size();
  page = testing::HttpGet(metrics, "/metrics");
  // Telemetry windows of forgotten hosts are gone once the windows rotate.
  env.WaitFor(
      [&] {
        page = testing::HttpGet(metrics, "/metrics");
        return MetricSum(page, "rocetune_controller_telemetry_windows") == 0;
      },
      absl::Seconds(10));
  const double windows_after = MetricSum(page, "rocetune_controller_telemetry_windows");
  const double hosts_after = MetricSum(page, "rocetune_controller_hosts");
  ASSERT_EQ(env.Ctl({"audit", "--host=bench-0"}, "carol", &out), 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("host_forgotten"));
  EXPECT_EQ(env.Ctl({"audit", "verify"}, "carol", &out), 0) << out;
  // Restarted, the controller does not bring the forgotten hosts back.
  env.KillController();
  ASSERT_TRUE(env.StartController()) << env.ControllerLog();
  const size_t after_restart = env.Hosts().size();

  std::printf(
      "FAULT soak seconds=%.0f streams=%d offered=%.0f/s received=%.0f/s rss_kb %lld -> %lld "
      "(max %lld, growth %.1f%%) telemetry_windows %.0f..%.0f hosts %.0f..%.0f; forget: hosts "
      "%zu -> %zu (forgotten %d), windows -> %.0f, hosts gauge -> %.0f, after restart %zu\n",
      seconds, streams, rate, received / measured_s, static_cast<long long>(rss0),
      static_cast<long long>(rss1), static_cast<long long>(rss_max), 100 * growth, windows0,
      windows_max, hosts0, hosts_max, before_forget, after_forget, forgotten, windows_after,
      hosts_after, after_restart);
  EXPECT_LT(growth, 0.10) << "RSS grew " << 100 * growth << "%";
  EXPECT_GT(received, 0.8 * rate * measured_s) << "the controller kept up with the offered load";
  EXPECT_LE(windows_max, windows0 * 1.2 + 10) << "telemetry windows bounded";
  EXPECT_LE(hosts_max, hosts0 + 1) << "host map bounded";
  EXPECT_EQ(before_forget, static_cast<size_t>(streams));
  EXPECT_EQ(after_forget, 0u);
  EXPECT_EQ(after_restart, 0u);
  EXPECT_EQ(windows_after, 0);
}

}  // namespace
}  // namespace rocetune::e2e
