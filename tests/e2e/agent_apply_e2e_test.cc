// End to end on the real agent's apply path: rocetune-agent on a copy of an
// mlx5 OFED fixture tree, rocetune-controller, and rocetunectl push --wait.
// push -> write -> read back -> Ack; a bad set is NACKed whole and the host
// keeps its version; the local guard restores last-known-good and the
// controller records the rejected version and never re-pushes it.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_env.h"

namespace rocetune::e2e {
namespace {

using ::testing::HasSubstr;

constexpr char kHost[] = "e2e-mlx5";
constexpr char kRp[] = "/sys/class/net/ens1f0np0/ecn/roce_rp/";
constexpr char kCounters[] =
    "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/infiniband/mlx5_0/ports/1/hw_counters/";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(s.str()));
}

// A copy of the mlx5 OFED fixture tree under the test's directory (symlinks
// kept, as sysfs is full of them); returns its path.
std::string CopyFixture(Env& env) {
  const std::string tree = absl::StrCat(env.dir(), "/host");
  std::filesystem::copy(
      absl::StrCat(ROCETUNE_SOURCE_DIR, "/tests/fixtures/hosts/mlx5_ofed"), tree,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
  return tree;
}

// rocetune-agent on `tree`, reporting to `env`'s controller, plus `extra` flags.
std::vector<std::string> AgentArgs(Env& env, const std::string& tree,
                                   std::vector<std::string> extra) {
  std::vector<std::string> args = {absl::StrCat("--host_id=", kHost),
                                   absl::StrCat("--controller=127.0.0.1:", env.port()),
                                   "--insecure_loopback",
                                   "--metrics_address=127.0.0.1:0",
                                   absl::StrCat("--sysfs_root=", tree, "/sys"),
                                   absl::StrCat("--debugfs_root=", tree, "/debug"),
                                   absl::StrCat("--state_dir=", env.dir(), "/agent"),
                                   "--counter_source=sysfs",
                                   "--sample_interval=200ms"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(AgentApplyE2E, PushAckNackAndGuardRestore) {
  EnvOptions opt;
  Env env(opt);
  ASSERT_TRUE(env.StartController()) << env.ControllerLog();
  const std::string tree = CopyFixture(env);
  testing::Subprocess agent(
      testing::BuiltBinary("agent/rocetune-agent"),
      AgentArgs(env, tree,
                {"--probe_udp_listen=127.0.0.1:0", "--guard_window=2s",
                 "--guard_max_cnp_rate=100000", "--labels=rack=r1,role=trainer"}),
      absl::StrCat(env.dir(), "/agent.log"));
  ASSERT_TRUE(agent.Start());
  ASSERT_TRUE(env.WaitFor(
      [&] {
        for (const auto& h : env.Hosts()) {
          if (h.host_id() == kHost && h.state() == v1::HOST_CONNECTED) return true;
        }
        return false;
      },
      absl::Seconds(30)))
      << agent.Log();
  auto host = [&] {
    for (const auto& h : env.Hosts()) {
      if (h.host_id() == kHost) return h;
    }
    return v1::HostInfo();
  };
  const std::string rp = tree + kRp;
  std::string out;
  // 1. push -> write -> read back -> Ack.
  ASSERT_EQ(
      env.Ctl({"push", kHost, "mlx5_0", "rpg_ai_rate=20", "--wait", "--reason=e2e"}, "alice", &out),
      0)
      << out << agent.Log();
  EXPECT_EQ(ReadFile(rp + "rpg_ai_rate"), "20");
  const std::string v1 = host().current_version();
  EXPECT_FALSE(v1.empty());
  EXPECT_EQ(host().desired_version(), v1);
  // v1 becomes last-known-good once its guard window (2s) has passed clean.
  ASSERT_TRUE(env.WaitFor(
      [&] { return absl::StrContains(agent.Log(), "guard window passed, set is last-known-good"); },
      absl::Seconds(30), absl::Milliseconds(100)))
      << agent.Log();
  // 2. An out-of-range value: the controller refuses the whole set against
  // the host's inventory before queueing it; nothing reaches the agent and
  // the host keeps v1.
  ASSERT_EQ(env.Ctl({"push", kHost, "mlx5_0", "rpg_ai_rate=30", "dce_tcp_g=2000", "--wait"},
                    "alice", &out),
            1)
      << out;
  EXPECT_THAT(out, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(out, HasSubstr("dce_tcp_g"));
  EXPECT_EQ(ReadFile(rp + "rpg_ai_rate"), "20") << "nothing half-applied";
  EXPECT_EQ(host().current_version(), v1);
  EXPECT_EQ(host().desired_version(), v1) << "a refused set is never queued";
  // 3. A good set, then a CNP storm: the guard restores last-known-good (v1).
  ASSERT_EQ(env.Ctl({"push", kHost, "mlx5_0", "rpg_ai_rate=40", "--wait"}, "alice", &out), 0)
      << out;
  EXPECT_EQ(ReadFile(rp + "rpg_ai_rate"), "40");
  const std::string v3 = host().current_version();
  const std::string cnp = tree + kCounters + "rp_cnp_handled";
  uint64_t before = 0;
  ASSERT_TRUE(absl::SimpleAtoi(ReadFile(cnp), &before));
  for (int i = 1; i <= 10; ++i) {
    std::ofstream(cnp) << before + static_cast<uint64_t>(i) * 10'000'000ull << "\n";
    absl::SleepFor(absl::Milliseconds(250));
    if (ReadFile(rp + "rpg_ai_rate") == "20") break;
  }
  EXPECT_EQ(ReadFile(rp + "rpg_ai_rate"), "20") << agent.Log();
  ASSERT_TRUE(env.WaitFor([&] { return !host().last_guard_event().empty(); }, absl::Seconds(10)));
  v1::HostInfo h = host();
  EXPECT_THAT(h.last_guard_event(), HasSubstr("cnp"));
  EXPECT_THAT(h.rejected_versions(), ::testing::Contains(v3));
  EXPECT_EQ(h.current_version(), v1);
  // Reconnect: the rejected set is not pushed again.
  agent.Signal(SIGTERM);
  agent.Wait(absl::Seconds(10));
  testing::Subprocess again(
      testing::BuiltBinary("agent/rocetune-agent"),
      AgentArgs(env, tree, {"--probe_udp_listen=127.0.0.1:0", "--labels=rack=r1,role=trainer"}),
      absl::StrCat(env.dir(), "/agent2.log"));
  ASSERT_TRUE(again.Start());
  // Connected again, and the controller has had a report from it: the time to
  // push anything it would push on a reconnect.
  const uint64_t reports = host().reports();
  ASSERT_TRUE(env.WaitFor(
      [&] {
        const v1::HostInfo h = host();
        return h.state() == v1::HOST_CONNECTED && h.reports() >= reports + 3;
      },
      absl::Seconds(30), absl::Milliseconds(100)))
      << again.Log();
  EXPECT_EQ(ReadFile(rp + "rpg_ai_rate"), "20") << again.Log();
  EXPECT_THAT(again.Log(), ::testing::Not(HasSubstr(absl::StrCat("\"version\":\"", v3))));
  again.Signal(SIGTERM);
  again.Wait(absl::Seconds(10));
}

// rocetune-controller and rocetune-agent on a copy of the mlx5 OFED fixture
// (two devices), checking drift every second; SetUp waits for the host.
class AgentDriftE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = std::make_unique<Env>(EnvOptions());
    ASSERT_TRUE(env_->StartController()) << env_->ControllerLog();
    tree_ = CopyFixture(*env_);
    agent_ = std::make_unique<testing::Subprocess>(
        testing::BuiltBinary("agent/rocetune-agent"),
        AgentArgs(*env_, tree_, {"--probe=none", "--drift_interval=1s"}),
        absl::StrCat(env_->dir(), "/agent.log"));
    ASSERT_TRUE(agent_->Start());
    ASSERT_TRUE(
        env_->WaitFor([&] { return Host().state() == v1::HOST_CONNECTED; }, absl::Seconds(30)))
        << agent_->Log();
  }
  void TearDown() override {
    if (agent_ == nullptr) return;
    agent_->Signal(SIGTERM);
    agent_->Wait(absl::Seconds(10));
  }
  v1::HostInfo Host() {
    for (const auto& h : env_->Hosts()) {
      if (h.host_id() == kHost) return h;
    }
    return v1::HostInfo();
  }

  std::unique_ptr<Env> env_;
  std::string tree_;
  std::unique_ptr<testing::Subprocess> agent_;
};

// Drift: an out-of-band write to the NIC's parameter file is found at the
// next drift check, reported, corrected by the controller's re-push and
// audited with what was found. Prints the timeline.
TEST_F(AgentDriftE2E, OutOfBandWriteIsDetectedCorrectedAndAudited) {
  const std::string ai = tree_ + kRp + "rpg_ai_rate";
  std::string out;
  ASSERT_EQ(env_->Ctl({"push", kHost, "mlx5_0", "rpg_ai_rate=33", "--wait"}, "alice", &out), 0)
      << out << agent_->Log();
  ASSERT_EQ(ReadFile(ai), "33");
  const std::string version = Host().current_version();

  const absl::Time edited = absl::Now();
  std::ofstream(ai) << "5\n";
  absl::Time detected = absl::InfinitePast();
  absl::Time corrected = absl::InfinitePast();
  ASSERT_TRUE(env_->WaitFor(
      [&] {
        if (detected == absl::InfinitePast() &&
            agent_->Log().find("parameter drift") != std::string::npos) {
          detected = absl::Now();
        }
        if (corrected == absl::InfinitePast() && ReadFile(ai) == "33") corrected = absl::Now();
        return detected != absl::InfinitePast() && corrected != absl::InfinitePast();
      },
      absl::Seconds(10)))
      << agent_->Log() << env_->ControllerLog();
  std::printf("drift timeline: edit at 0, detected at +%.0f ms, corrected at +%.0f ms\n",
              absl::ToDoubleMilliseconds(detected - edited),
              absl::ToDoubleMilliseconds(corrected - edited));
  EXPECT_LE(corrected - edited, absl::Seconds(3)) << "a drift interval of 1s";
  ASSERT_EQ(env_->Ctl({"audit", "--limit=50"}, "alice", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("drift_corrected"));
  EXPECT_THAT(out, HasSubstr("rpg_ai_rate: expected 33, found 5"));
  v1::HostInfo h = Host();
  EXPECT_EQ(h.current_version(), version);
  EXPECT_TRUE(h.rejected_versions().empty());
}

int CountLines(const std::string& text, const std::string& needle) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) n += absl::StrContains(line, needle);
  return n;
}

// Issue 28 item 1, as reported: an agent with two devices, `push n1 mlx5_0
// rpg_time_reset=310 --wait`, then an out-of-band write of 777 to mlx5_1's
// rpg_time_reset. Before, push replaced the whole desired state (mlx5_1
// unmanaged), the agent reported the drift after every re-push, the controller
// re-pushed the same version (writes=0) ~4 times a second with an audit row
// each, and an out-of-band write on mlx5_0 was absorbed by those re-pushes.
// Now: push merges, both writes are corrected, rows stay few; with --replace
// the unmanaged drift is observed once and nothing loops.
TEST_F(AgentDriftE2E, PushMergesAndDriftOnEitherDeviceIsCorrectedWithoutALoop) {
  const std::string rp0 = tree_ + "/sys/class/net/ens1f0np0/ecn/roce_rp/";
  const std::string rp1 = tree_ + "/sys/class/net/ens1f1np1/ecn/roce_rp/";
  std::string out;
  ASSERT_EQ(env_->Ctl({"push", kHost, "mlx5_0", "rpg_time_reset=310", "--wait"}, "alice", &out), 0)
      << out << agent_->Log();
  EXPECT_THAT(out, HasSubstr("mlx5_0/rpg_time_reset: 300 -> 310"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("(removed)")));
  ASSERT_EQ(ReadFile(rp0 + "rpg_time_reset"), "310");
  ASSERT_EQ(env_->Ctl({"audit", "--limit=200"}, "alice", &out), 0) << out;
  EXPECT_THAT(out, ::testing::Not(HasSubstr("(removed)"))) << "push dropped managed values";

  // Out of band on the device the push did not name, then on another
  // parameter of the one it did.
  std::ofstream(rp1 + "rpg_time_reset") << "777\n";
  ASSERT_TRUE(
      env_->WaitFor([&] { return ReadFile(rp1 + "rpg_time_reset") == "300"; }, absl::Seconds(10)))
      << agent_->Log() << env_->ControllerLog();
  std::ofstream(rp0 + "rpg_hai_rate") << "777\n";
  ASSERT_TRUE(
      env_->WaitFor([&] { return ReadFile(rp0 + "rpg_hai_rate") == "50"; }, absl::Seconds(10)))
      << agent_->Log() << env_->ControllerLog();
  EXPECT_EQ(ReadFile(rp0 + "rpg_time_reset"), "310");
  // A loop would keep writing rows meanwhile: 3 s more of the agent's reports
  // (three drift checks at least).
  ASSERT_TRUE(env_->WaitForTelemetry(absl::Seconds(3))) << agent_->Log();
  ASSERT_EQ(env_->Ctl({"audit", "--limit=500"}, "alice", &out), 0) << out;
  const int corrected = CountLines(out, "drift_corrected");
  std::printf("drift: 2 out-of-band writes corrected with %d drift_corrected rows\n", corrected);
  EXPECT_GE(corrected, 2);
  EXPECT_LE(corrected, 6) << out;

  // --replace: mlx5_1 is no longer managed, so its drift cannot be corrected
  // by a re-push: observed and audited once, nothing re-pushed in a loop.
  ASSERT_EQ(env_->Ctl({"push", kHost, "mlx5_0", "rpg_time_reset=310", "--replace", "--wait"},
                      "alice", &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("replacing the whole set"));
  EXPECT_THAT(out, HasSubstr("mlx5_1/rpg_time_reset: 300 -> (removed)"));
  std::ofstream(rp1 + "rpg_time_reset") << "777\n";
  ASSERT_TRUE(env_->WaitFor(
      [&] {
        std::string a;
        env_->Ctl({"audit", "--limit=500"}, "alice", &a);
        return absl::StrContains(a, "not in the host's desired state");
      },
      absl::Seconds(10)))
      << agent_->Log();
  // Four more drift checks, each finding the unmanaged value again.
  const int seen = CountLines(agent_->Log(), "parameter drift");
  ASSERT_TRUE(env_->WaitFor(
      [&] { return CountLines(agent_->Log(), "parameter drift") >= seen + 4; }, absl::Seconds(15)))
      << agent_->Log();
  ASSERT_EQ(env_->Ctl({"audit", "--limit=500"}, "alice", &out), 0) << out;
  EXPECT_EQ(CountLines(out, "not in the host's desired state"), 1) << out;
  EXPECT_EQ(CountLines(out, "drift_corrected"), corrected) << "no re-push of the replaced set";
  EXPECT_EQ(ReadFile(rp1 + "rpg_time_reset"), "777") << "not managed, not written";
}

}  // namespace
}  // namespace rocetune::e2e
