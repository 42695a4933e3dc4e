// Integration: the rocetune-controller binary (flags, --ready_file, SIGTERM).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/controller_test_util.h"
#include "tests/controller/test_agent.h"

namespace rocetune::controller {
namespace {

using ::rocetune::controller::testing::AdminStub;
using ::rocetune::controller::testing::Eventually;
using ::rocetune::controller::testing::MakeTempDir;
using ::rocetune::controller::testing::TestAgent;
using ::testing::HasSubstr;

const char kBinary[] = ROCETUNE_BINARY_DIR "/controller/rocetune-controller";

pid_t Spawn(std::vector<std::string> args, const std::string& stderr_path) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::freopen(stderr_path.c_str(), "w", stderr);
    (void)f;
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kBinary));
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(kBinary, argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for `pid` to exit; returns its exit code or -1 on timeout.
int WaitExit(pid_t pid, double seconds = 10) {
  int status = 0;
  bool done = Eventually([&] { return waitpid(pid, &status, WNOHANG) == pid; }, seconds);
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class ControllerMainTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ControllerMainTest, ServesWritesReadyFileAndStopsOnSigterm) {
  std::string ready = dir_ + "/ready.json";
  pid_t pid = Spawn({"--insecure_loopback", "--listen=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                     "--state_dir=" + dir_ + "/state", "--ready_file=" + ready},
                    dir_ + "/stderr");
  int grpc_port = 0, metrics_port = 0;
  ASSERT_TRUE(Eventually([&] {
    return std::sscanf(Slurp(ready).c_str(), "{\"grpc_port\":%d,\"metrics_port\":%d}", &grpc_port,
                       &metrics_port) == 2;
  }));
  EXPECT_GT(grpc_port, 0);
  EXPECT_GT(metrics_port, 0);
  {
    TestAgent agent(grpc_port);
    ASSERT_TRUE(agent.Hello("h1"));
    auto admin = AdminStub(grpc_port);
    ASSERT_TRUE(Eventually([&] {
      grpc::ClientContext ctx;
      v1::ListHostsResponse resp;
      return admin->ListHosts(&ctx, v1::ListHostsRequest(), &resp).ok() && resp.hosts_size() == 1;
    }));
  }
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid), 0);
  std::string log = Slurp(dir_ + "/stderr");
  EXPECT_THAT(log, HasSubstr("msg=ready"));
  EXPECT_THAT(log, HasSubstr("msg=stopped"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/state/controller.db"));
}

TEST_F(ControllerMainTest, RefusesPlaintextWithoutFlag) {
  pid_t pid = Spawn({"--listen=127.0.0.1:0", "--metrics_address=127.0.0.1:0", "--state_dir="},
                    dir_ + "/stderr");
  EXPECT_NE(WaitExit(pid), 0);
  EXPECT_THAT(Slurp(dir_ + "/stderr"), HasSubstr("--insecure_loopback"));
}

TEST_F(ControllerMainTest, BadFlagValueExitsNonZero) {
  pid_t pid = Spawn({"--insecure_loopback", "--window=banana"}, dir_ + "/stderr");
  EXPECT_NE(WaitExit(pid), 0);
  EXPECT_THAT(Slurp(dir_ + "/stderr"), HasSubstr("window"));
}

TEST_F(ControllerMainTest, NegativeProbeReplanDelayIsRefused) {
  pid_t pid = Spawn({"--insecure_loopback", "--listen=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                     "--state_dir=", "--probe_replan_delay=-1s"},
                    dir_ + "/stderr");
  EXPECT_NE(WaitExit(pid), 0);
  EXPECT_THAT(Slurp(dir_ + "/stderr"), HasSubstr("--probe_replan_delay must not be negative"));
}

// --probe_locality_label names a host label: the probe classes are
// "intra_<label>" / "inter_<label>". Anything else is refused with exit 2
// before the controller opens its state, naming the flag and what it wants.
TEST_F(ControllerMainTest, ABadProbeLocalityLabelIsRefused) {
  for (const std::string& bad :
       {std::string(), std::string("rack id"), std::string("tor;rm"), std::string(64, 'a')}) {
    pid_t pid =
        Spawn({"--insecure_loopback", "--listen=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
               "--state_dir=" + dir_ + "/state", "--probe_locality_label=" + bad},
              dir_ + "/stderr");
    EXPECT_EQ(WaitExit(pid), 2) << bad;
    EXPECT_THAT(Slurp(dir_ + "/stderr"),
                HasSubstr(absl::StrCat("--probe_locality_label=\"", bad, "\": want the name")))
        << bad;
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/state/controller.db")) << bad;
  }
}

TEST_F(ControllerMainTest, UnbindableAddressExitsNonZero) {
  pid_t pid = Spawn({"--insecure_loopback", "--listen=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                     "--state_dir=", "--ready_file=" + dir_ + "/r1"},
                    dir_ + "/stderr1");
  int port = 0, mport = 0;
  ASSERT_TRUE(Eventually([&] {
    return std::sscanf(Slurp(dir_ + "/r1").c_str(), "{\"grpc_port\":%d,\"metrics_port\":%d}", &port,
                       &mport) == 2;
  }));
  pid_t second = Spawn({"--insecure_loopback", absl::StrCat("--listen=127.0.0.1:", port),
                        "--metrics_address=127.0.0.1:0", "--state_dir="},
                       dir_ + "/stderr2");
  EXPECT_NE(WaitExit(second), 0);
  EXPECT_THAT(Slurp(dir_ + "/stderr2"), HasSubstr("cannot listen"));
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid), 0);
}

}  // namespace
}  // namespace rocetune::controller
