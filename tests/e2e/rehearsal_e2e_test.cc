// End to end: a rehearsal is bounded and cancellable (issue 28 item 3). Before,
// `change rehearse ... --timeout=5s` of a 600 s scenario left the controller
// burning a core after the client gave up, and on SIGTERM it logged "stopped"
// and was still alive 30 s later: the simulation ran to its scenario's end,
// holding its call and so the shutdown.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/campaign_flow.h"
#include "tests/e2e/e2e_env.h"

namespace rocetune::e2e {
namespace {

using ::testing::HasSubstr;

// CPU seconds (user + system) the process `pid` has used; -1 when unreadable.
double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string stat = buf.str();
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ');
  int64_t utime = 0, stime = 0;
  // After the command: state is field 3, utime 14, stime 15 (1-based).
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return -1;
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string ReadSource(const std::string& rel) {
  std::ifstream in(absl::StrCat(ROCETUNE_SOURCE_DIR, "/", rel));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

TEST(RehearsalE2E, ARehearsalEndsAtItsDeadlineAndSigtermEndsTheControllerDuringOne) {
  EnvOptions opt;
  Env env(opt);
  ASSERT_TRUE(env.Start()) << env.ControllerLog() << env.FabricLog();
  std::string out;
  ASSERT_EQ(env.Ctl({"policy", "apply",
                     env.WriteFile("p.textproto", TestPolicy("e2e-rehearse", /*bake_seconds=*/6))},
                    "alice", &out),
            0)
      << out;
  ASSERT_EQ(env.Ctl({"change", "propose", "e2e-rehearse", "rpg_time_reset=290", "--reason=e2e"},
                    "alice", &out),
            0)
      << out;
  const std::string id = IdIn(out, "c-");
  ASSERT_FALSE(id.empty()) << out;
  // Ten simulated minutes: hours of wall time on this machine.
  const std::string scenario = env.WriteFile(
      "long.textproto", absl::StrReplaceAll(ReadSource(opt.scenario),
                                            {{"duration_ms: 1000", "duration_ms: 600000"}}));

  // 1. The client's deadline ends the simulation, and the controller goes idle.
  absl::Time t0 = absl::Now();
  EXPECT_NE(
      env.Ctl({"change", "rehearse", id, absl::StrCat("--scenario=", scenario), "--timeout=3s"},
              "alice", &out),
      0);
  EXPECT_THAT(out, HasSubstr("DEADLINE_EXCEEDED")) << out;
  const double client_s = absl::ToDoubleSeconds(absl::Now() - t0);
  // The simulation's next slice ends it, and the controller says so.
  ASSERT_TRUE(env.WaitFor(
      [&] {
        return env.ControllerLog().find("rehearsal ended without a result") != std::string::npos;
      },
      absl::Seconds(10)))
      << env.ControllerLog();
  // Then a measured quiet period: a simulation still running would use the
  // whole 3 s of a core.
  const double cpu0 = CpuSeconds(env.controller_pid());
  absl::SleepFor(absl::Seconds(3));
  const double cpu_3s = CpuSeconds(env.controller_pid()) - cpu0;
  ASSERT_GE(cpu0, 0);
  EXPECT_LT(cpu_3s, 1.0) << "the controller still simulates after the client gave up";
  EXPECT_THAT(env.ControllerLog(), HasSubstr("stopped at"));

  // 2. SIGTERM during a rehearsal: the controller exits promptly.
  std::string during;
  std::thread client([&] {
    env.Ctl({"change", "rehearse", id, absl::StrCat("--scenario=", scenario), "--timeout=300s"},
            "alice", &during);
  });
  // The rehearsal is simulating once the controller has burnt half a second of CPU.
  const double cpu_before = CpuSeconds(env.controller_pid());
  ASSERT_TRUE(env.WaitFor([&] { return CpuSeconds(env.controller_pid()) >= cpu_before + 0.5; },
                          absl::Seconds(20)));
  t0 = absl::Now();
  const std::optional<int> exit = env.StopController(SIGTERM, absl::Seconds(20));
  const double stop_s = absl::ToDoubleSeconds(absl::Now() - t0);
  client.join();
  ASSERT_TRUE(exit.has_value()) << "still running 20 s after SIGTERM";
  EXPECT_EQ(*exit, 0);
  EXPECT_LT(stop_s, 5.0);
  std::printf(
      "rehearsal: a --timeout=3s call returned after %.1f s, controller CPU over the next 3 s "
      "%.2f s; SIGTERM during a rehearsal: exited in %.2f s\n",
      client_s, cpu_3s, stop_s);
}

}  // namespace
}  // namespace rocetune::e2e
