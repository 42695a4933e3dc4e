// Fault injection: rocetune-agent (on a copy of the mlx5 OFED fixture tree)
// killed with SIGKILL inside an apply, at least 100 times. The agent pauses
// before each parameter write (--fault_write_delay) so that the kill lands
// between two writes of one apply. After each kill the agent is restarted
// with no controller to talk to (nothing can re-push), and the fixture files
// must hold entirely the old set or entirely the new one, as the agent's log
// says. Then an agent with the controller takes the host back to the desired
// set for the next trial. Prints one line with the counts.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_env.h"

namespace rocetune::e2e {
namespace {

constexpr int kTrials = 104;
constexpr char kHost[] = "e2e-kill";
constexpr char kRp[] = "/sys/class/net/ens1f0np0/ecn/roce_rp/";
constexpr int kWriteDelayMs = 20;
const char* const kKnobs[] = {"rpg_ai_rate",    "rpg_hai_rate",  "rpg_time_reset",
                              "rpg_byte_reset", "rpg_threshold", "rpg_min_dec_fac"};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(s.str()));
}

using Values = std::map<std::string, std::string>;

Values ReadKnobs(const std::string& rp) {
  Values v;
  for (const char* k : kKnobs) v[k] = ReadFile(rp + k);
  return v;
}

// Trial i's set: every knob differs from trial i-1's.
Values TrialSet(int i) {
  const int j = i % 40;
  return {
      {"rpg_ai_rate", absl::StrCat(6 + j)},           {"rpg_hai_rate", absl::StrCat(60 + j)},
      {"rpg_time_reset", absl::StrCat(310 + 10 * j)}, {"rpg_byte_reset", absl::StrCat(1000 + j)},
      {"rpg_threshold", absl::StrCat(2 + j % 20)},    {"rpg_min_dec_fac", absl::StrCat(51 + j)}};
}

// "old", "new" or "mixed" for `now` against the set before and the set pushed.
std::string Which(const Values& now, const Values& old_set, const Values& new_set) {
  bool all_old = true, all_new = true;
  for (const auto& [k, v] : now) {
    all_old &= v == old_set.at(k);
    all_new &= v == new_set.at(k);
  }
  return all_new ? "new" : all_old ? "old" : "mixed";
}

class Agent {
 public:
  Agent(Env& env, const std::string& tree, const std::string& controller, int n)
      : proc_(testing::BuiltBinary("agent/rocetune-agent"),
              {absl::StrCat("--host_id=", kHost), absl::StrCat("--controller=", controller),
               "--insecure_loopback", "--metrics_address=127.0.0.1:0",
               absl::StrCat("--sysfs_root=", tree, "/sys"),
               absl::StrCat("--debugfs_root=", tree, "/debug"),
               absl::StrCat("--state_dir=", env.dir(), "/agent"), "--counter_source=sysfs",
               "--sample_interval=200ms", "--probe=none", "--labels=rack=r1,role=trainer",
               absl::StrCat("--fault_write_delay=", kWriteDelayMs, "ms")},
              absl::StrCat(env.dir(), "/agent", n, ".log")) {}
  testing::Subprocess& proc() { return proc_; }

 private:
  testing::Subprocess proc_;
};

TEST(AgentKillE2E, KilledInsideApplyHostIsEntirelyOldOrNew) {
  EnvOptions opt;
  Env env(opt);
  ASSERT_TRUE(env.StartController()) << env.ControllerLog();
  const std::string tree = absl::StrCat(env.dir(), "/host");
  std::filesystem::copy(
      absl::StrCat(ROCETUNE_SOURCE_DIR, "/tests/fixtures/hosts/mlx5_ofed"), tree,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
  const std::string rp = tree + kRp;
  const std::string controller = absl::StrCat("127.0.0.1:", env.port());
  auto host = [&] {
    for (const auto& h : env.Hosts()) {
      if (h.host_id() == kHost) return h;
    }
    return v1::HostInfo();
  };
  int starts = 0;
  auto live = std::make_unique<Agent>(env, tree, controller, ++starts);
  ASSERT_TRUE(live->proc().Start());
  ASSERT_TRUE(env.WaitFor([&] { return host().state() == v1::HOST_CONNECTED; }, absl::Seconds(30)))
      << live->proc().Log();

  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  std::uniform_real_distribution<double> u(0, 1);
  int trials = 0, mixed_at_kill = 0, mixed_after = 0, intent_found = 0, claim_wrong = 0;
  std::map<std::string, int> after_restart;  // "old" / "new" -> trials
  std::vector<std::string> problems;
  const absl::Time start = absl::Now();
  for (int i = 1; i <= kTrials; ++i) {
    const Values old_set = ReadKnobs(rp);
    const Values new_set = TrialSet(i);
    std::vector<std::string> push = {"push", kHost, "mlx5_0"};
    for (const auto& [k, v] : new_set) push.push_back(absl::StrCat(k, "=", v));
    push.push_back(absl::StrCat("--reason=kill trial ", i));
    std::string out;
    ASSERT_EQ(env.Ctl(push, "alice", &out), 0) << out;
    if (u(rng) < 0.2) {
      // Anywhere from before the apply's first write to its end.
      absl::SleepFor(absl::Milliseconds(150 * u(rng)));
    } else {
      // Between two writes: after the first lands, within the apply.
      env.WaitFor([&] { return ReadKnobs(rp) != old_set; }, absl::Seconds(5),
                  absl::Milliseconds(1));
      absl::SleepFor(absl::Milliseconds(kWriteDelayMs * 5 * u(rng)));
    }
    live->proc().Signal(SIGKILL);
    live->proc().Wait(absl::Seconds(10));
    ++trials;
    mixed_at_kill += Which(ReadKnobs(rp), old_set, new_set) == "mixed";

    // Restarted with no controller: nothing but the agent itself writes.
    Agent check(env, tree, "127.0.0.1:1", ++starts);
    ASSERT_TRUE(check.proc().Start());
    ASSERT_TRUE(env.WaitFor(
        [&] {
          const std::string log = check.proc().Log();
          return log.find("interrupted apply") != std::string::npos ||
                 log.find("controller unreachable") != std::string::npos;
        },
        absl::Seconds(10), absl::Milliseconds(10)))
        << check.proc().Log();
    const std::string now = Which(ReadKnobs(rp), old_set, new_set);
    const std::string log = check.proc().Log();
    check.proc().Signal(SIGKILL);
    check.proc().Wait(absl::Seconds(10));
    ++after_restart[now];
    if (now == "mixed") {
      ++mixed_after;
      problems.push_back(absl::StrCat("trial ", i, ": mixed after restart\n", log));
    }
    if (log.find("interrupted apply") != std::string::npos) {
      ++intent_found;
      // The agent says which set the host is on, and it is right.
      if (log.find(absl::StrCat(" on=", now)) == std::string::npos) {
        ++claim_wrong;
        problems.push_back(absl::StrCat("trial ", i, ": host on ", now, ", agent said\n", log));
      }
    } else if (now != "old" && now != "new") {
      problems.push_back(absl::StrCat("trial ", i, ": no word from the agent\n", log));
    }

    // Back to the controller: the host converges on the pushed set.
    live = std::make_unique<Agent>(env, tree, controller, ++starts);
    ASSERT_TRUE(live->proc().Start());
    ASSERT_TRUE(env.WaitFor(
        [&] {
          const v1::HostInfo h = host();
          return h.state() == v1::HOST_CONNECTED && h.current_version() == h.desired_version() &&
                 ReadKnobs(rp) == new_set;
        },
        absl::Seconds(20), absl::Milliseconds(20)))
        << "trial " << i << ": " << host().ShortDebugString() << live->proc().Log();
  }
  std::printf(
      "FAULT agent_kill trials=%d mixed_at_kill=%d mixed_after_restart=%d intent_found=%d "
      "agent_claim_wrong=%d after_restart_old=%d after_restart_new=%d loop_s=%.0f\n",
      trials, mixed_at_kill, mixed_after, intent_found, claim_wrong, after_restart["old"],
      after_restart["new"], absl::ToDoubleSeconds(absl::Now() - start));
  EXPECT_GE(trials, 100);
  EXPECT_EQ(mixed_after, 0);
  EXPECT_EQ(claim_wrong, 0);
  // The kills did land inside applies.
  EXPECT_GE(mixed_at_kill, trials / 2);
  for (size_t p = 0; p < std::min<size_t>(problems.size(), 5); ++p) ADD_FAILURE() << problems[p];
  live->proc().Signal(SIGTERM);
  live->proc().Wait(absl::Seconds(10));
}

}  // namespace
}  // namespace rocetune::e2e
