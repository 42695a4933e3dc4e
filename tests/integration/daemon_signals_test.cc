// The real agent under a fake systemd: the watchdog is petted only while the
// sampling loop makes progress, and SIGHUP reloads --config without exiting.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/integration/subprocess.h"

namespace rocetune {
namespace {

using ::rocetune::testing::BuiltBinary;
using ::rocetune::testing::HostFixture;
using ::rocetune::testing::MakeTempDir;
using ::rocetune::testing::Subprocess;

// A unix datagram socket playing systemd's NOTIFY_SOCKET.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << path;
    timeval tv{0, 100000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~NotifySocket() { close(fd_); }
  // Whether a datagram containing `what` arrives within `timeout`.
  bool Receives(const std::string& what, absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    char buf[4096];
    while (absl::Now() < end) {
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n > 0 && std::string(buf, n).find(what) != std::string::npos) return true;
    }
    return false;
  }
  void Drain() {
    char buf[4096];
    while (recv(fd_, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

using ::rocetune::testing::Eventually;

// The real agent on a fixture host, reporting to a controller that is not
// there.
Subprocess AgentUnderSystemd(const std::string& dir, const std::string& config) {
  return Subprocess(
      BuiltBinary("agent/rocetune-agent"),
      {"--config=" + config, "--host_id=h1", "--controller=127.0.0.1:1", "--insecure_loopback",
       "--metrics_address=127.0.0.1:0", "--sysfs_root=" + HostFixture("mlx5_ofed") + "/sys",
       "--debugfs_root=" + HostFixture("mlx5_ofed") + "/debug", "--state_dir=" + dir + "/state",
       "--probe=none"},
      dir + "/agent.log");
}

// Starts `agent` as systemd would (NOTIFY_SOCKET in `dir`, a 1 s watchdog),
// with the sampling-stall hook on `stall`: the environment is set only
// while it forks.
bool StartUnderSystemd(Subprocess* agent, const std::string& dir, const std::string& stall) {
  setenv("NOTIFY_SOCKET", (dir + "/notify.sock").c_str(), 1);
  setenv("WATCHDOG_USEC", "1000000", 1);
  setenv("ROCETUNE_TEST_STALL_SAMPLING_FILE", stall.c_str(), 1);
  const bool started = agent->Start();
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  unsetenv("ROCETUNE_TEST_STALL_SAMPLING_FILE");
  return started;
}

TEST(DaemonSignalsTest, SighupReloadsConfigAndNeverExits) {
  const std::string dir = MakeTempDir("daemon-signals");
  const std::string stall = dir + "/stall";
  const std::string config = dir + "/agent.textproto";
  std::ofstream(config) << "log_level: \"info\"\nsample_interval: \"100ms\"\n";
  NotifySocket notify(dir + "/notify.sock");
  Subprocess agent = AgentUnderSystemd(dir, config);
  ASSERT_TRUE(StartUnderSystemd(&agent, dir, stall));

  ASSERT_TRUE(notify.Receives("READY=1", absl::Seconds(20))) << agent.Log();
  ASSERT_TRUE(notify.Receives("WATCHDOG=1", absl::Seconds(3))) << agent.Log();

  // SIGHUP: the changed fields are logged, the process lives on.
  std::ofstream(config, std::ios::trunc) << "log_level: \"debug\"\nsample_interval: \"200ms\"\n"
                                            "labels: \"rack=r9\"\n";
  agent.Signal(SIGHUP);
  ASSERT_TRUE(Eventually(
      [&] { return agent.Log().find("SIGHUP: configuration reloaded") != std::string::npos; },
      absl::Seconds(5)))
      << agent.Log();
  const std::string log = agent.Log();
  EXPECT_NE(log.find("log_level: info -> debug"), std::string::npos) << log;
  EXPECT_NE(log.find("sample_interval: 100ms -> 200ms"), std::string::npos) << log;
  EXPECT_NE(log.find("labels:  -> rack=r9"), std::string::npos) << log;
  EXPECT_TRUE(agent.Running());

  // The new level is in effect: at warning, the next reload's info line is
  // not printed, while a broken config's error is.
  std::ofstream(config, std::ios::trunc) << "log_level: \"warning\"\n";
  agent.Signal(SIGHUP);
  absl::SleepFor(absl::Milliseconds(500));
  std::ofstream(config, std::ios::trunc) << "no_such_field: 1\n";
  agent.Signal(SIGHUP);
  ASSERT_TRUE(Eventually(
      [&] { return agent.Log().find("configuration not reloaded") != std::string::npos; },
      absl::Seconds(5)))
      << agent.Log();
  const std::string after = agent.Log();
  size_t first = after.find("SIGHUP: configuration reloaded");
  EXPECT_EQ(after.find("SIGHUP: configuration reloaded", first + 1), std::string::npos) << after;
  EXPECT_TRUE(agent.Running());
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(absl::Seconds(10)), 0) << agent.Log();
}

// The sampling loop is stalled from the start (the hook's file exists): the
// watchdog is petted until the loop's deadline (10 s) passes, then not, and
// again once the loop moves.
TEST(DaemonSignalsTest, WatchdogStopsWhenTheSamplingLoopStalls) {
  const std::string dir = MakeTempDir("daemon-signals");
  const std::string stall = dir + "/stall";
  const std::string config = dir + "/agent.textproto";
  std::ofstream(config) << "log_level: \"info\"\nsample_interval: \"100ms\"\n";
  NotifySocket notify(dir + "/notify.sock");
  { std::ofstream(stall) << "stall\n"; }
  Subprocess agent = AgentUnderSystemd(dir, config);
  ASSERT_TRUE(StartUnderSystemd(&agent, dir, stall));

  ASSERT_TRUE(notify.Receives("READY=1", absl::Seconds(20))) << agent.Log();
  ASSERT_TRUE(notify.Receives("WATCHDOG=1", absl::Seconds(3))) << agent.Log();

  // Past the stalled loop's deadline (10 s) the pets stop. The socket is
  // drained meanwhile, as systemd would: a full datagram queue would block the
  // agent's sd_notify.
  ASSERT_TRUE(Eventually(
      [&] {
        notify.Drain();
        return agent.Log().find("watchdog not petted") != std::string::npos;
      },
      absl::Seconds(20)))
      << agent.Log();
  EXPECT_NE(agent.Log().find("loops=agent_sampling"), std::string::npos) << agent.Log();
  absl::SleepFor(absl::Seconds(1));
  notify.Drain();
  EXPECT_FALSE(notify.Receives("WATCHDOG=1", absl::Seconds(2))) << agent.Log();
  // The loop moves again: so do the pets.
  std::remove(stall.c_str());
  EXPECT_TRUE(notify.Receives("WATCHDOG=1", absl::Seconds(3))) << agent.Log();

  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(absl::Seconds(10)), 0) << agent.Log();
}

}  // namespace
}  // namespace rocetune
