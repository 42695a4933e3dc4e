// End to end: a real rocetune-controller, rocetune-fabricsim --agents (32
// simulated hosts in 8 ToRs, incast plus background traffic) and rocetunectl.
// A bad change is rolled back by the judge, a local guard on a canary host
// rolls a change back everywhere, and a controller killed with SIGKILL during
// the canary and during a stage resumes the bake from the persisted baseline.
#include <signal.h>

#include <map>
#include <string>

#include "absl/strings/match.h"
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

// Every host acked its desired version, and holds `value` for `knob`.
bool Converged(Env& env, const std::string& knob, int64_t value, std::string* why) {
  for (const v1::HostInfo& h : env.Hosts()) {
    if (!h.desired_version().empty() && h.current_version() != h.desired_version()) {
      *why = absl::StrCat(h.host_id(), " applied ", h.current_version(), ", desired ",
                          h.desired_version());
      return false;
    }
    if (ParameterOf(h, knob) != value) {
      *why = absl::StrCat(h.host_id(), " holds ", knob, "=", ParameterOf(h, knob));
      return false;
    }
  }
  return true;
}

// One line per verdict: step, look, outcome, rule and the p99 evidence, for
// failure messages (a change's DebugString runs to tens of kilobytes).
std::string VerdictTrail(const v1::Change& c) {
  std::string out;
  for (const v1::Verdict& v : c.verdicts()) {
    absl::StrAppend(&out, "stage ", v.stage(), " look ", v.look(), "/", v.looks(), " ",
                    v1::Verdict::Outcome_Name(v.outcome()), " ", v.rule());
    for (const v1::MetricEvidence& m : v.metrics()) {
      if (m.metric() != "ln_p99_did") continue;
      absl::StrAppend(&out, " ratio ", m.ratio(), " [", m.ratio_lower(), ", ", m.ratio_upper(),
                      "] sd ", m.sd(), " pairs ", m.rack_pairs());
    }
    if (v.dropped_hosts_size() > 0) {
      absl::StrAppend(&out, "; ", v.dropped_hosts_size(), " hosts dropped, e.g. ",
                      v.dropped_hosts(0));
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string Propose(Env& env, const std::string& policy, const std::string& knobs,
                    const std::string& actor = "alice") {
  std::string out;
  const int rc = env.Ctl({"change", "propose", policy, knobs, "--reason=e2e"}, actor, &out);
  EXPECT_EQ(rc, 0) << out;
  return IdIn(out, "c-");
}

TEST(RolloutE2E, BadChangeIsRolledBackWithinTwoJudgeWindows) {
  EnvOptions opt;
  // The judge, not the agents' guard, must catch this one.
  opt.fabricsim_flags = {"--guard_max_pfc_pause_ratio=0", "--guard_max_cnp_rate=0"};
  Env env(opt);
  ASSERT_TRUE(env.Start()) << env.ControllerLog() << env.FabricLog();
  const std::string policy = env.WriteFile("bad.textproto", TestPolicy("e2e-bad", 6));
  std::string out;
  ASSERT_EQ(env.Ctl({"policy", "apply", policy, "--reason=e2e"}, "alice", &out), 0) << out;
  // A baseline: 6 s of reports from every host.
  ASSERT_TRUE(env.WaitForTelemetry(absl::Seconds(6))) << env.ControllerLog();
  // rpg_min_dec_fac=100: a CNP barely cuts the rate, queues and pauses grow.
  const std::string id = Propose(env, "e2e-bad", "rpg_min_dec_fac=100");
  ASSERT_FALSE(id.empty());
  // Self-approval is refused; approvals count per identity.
  EXPECT_EQ(env.Ctl({"change", "approve", id, "--reason=mine"}, "alice", &out), 1);
  EXPECT_THAT(out, HasSubstr("PERMISSION_DENIED"));
  ASSERT_EQ(env.Ctl({"change", "approve", id, "--reason=ok"}, "bob", &out), 0) << out;
  ASSERT_TRUE(env.WaitFor(
      [&] {
        auto c = env.GetChange(id);
        return c.ok() && (c->state() == v1::ROLLED_BACK || c->state() == v1::DONE ||
                          c->state() == v1::ABORTED);
      },
      absl::Seconds(60)));
  auto c = env.GetChange(id);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->state(), v1::ROLLED_BACK) << c->DebugString();
  int64_t canary_start = 0, rolled_back = 0;
  for (const auto& t : c->transitions()) {
    if (t.to() == v1::CANARY) canary_start = t.unix_nanos();
    if (t.to() == v1::ROLLED_BACK) rolled_back = t.unix_nanos();
  }
  // Every touched host back on its previous set, acked.
  std::string why;
  ASSERT_TRUE(
      env.WaitFor([&] { return Converged(env, "rpg_min_dec_fac", 50, &why); }, absl::Seconds(20)))
      << why;
  const absl::Time converged = absl::Now();
  const double decided = (rolled_back - canary_start) / 1e9;
  const double complete = absl::ToDoubleSeconds(converged - absl::FromUnixNanos(canary_start));
  // A judge window (look) is bake / looks = 2 s.
  EXPECT_LE(decided, 4.0) << "rollback decided " << decided << " s after the canary started\n"
                          << c->DebugString().substr(0, 6000);
  std::printf("BENCH e2e_rollback decided_s=%.2f complete_s=%.2f judge_window_s=2\n", decided,
              complete);
  EXPECT_LE(complete, 6.0);
  const v1::Verdict& v = c->verdicts(c->verdicts_size() - 1);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL);
  ASSERT_EQ(env.Ctl({"audit", absl::StrCat("--change=", id)}, "carol", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("change_rolled_back"));
  EXPECT_THAT(out, HasSubstr("FAIL"));
  ASSERT_EQ(env.Ctl({"audit", "verify"}, "carol", &out), 0) << out;
}

TEST(RolloutE2E, LocalGuardOnACanaryHostRollsBackEverywhereAndIsNotRepushed) {
  EnvOptions opt;
  // The agents' guard trips at 2% paused time; the judge looks late. The
  // simulated NIC counts paused time in simulated microseconds while the agent
  // divides by wall-clock intervals, so at pace 0.05 a 2% pause reads 0.1%.
  opt.fabricsim_flags = {"--guard_max_pfc_pause_ratio=0.001", "--guard_window=60s"};
  Env env(opt);
  ASSERT_TRUE(env.Start()) << env.ControllerLog() << env.FabricLog();
  // Under this incast a bad set's pause bursts last a round or two of 250 ms:
  // the policy has the guard act on the first judged round over the limit
  // (and the agents' guard rounds reach them through the pushed sets).
  const std::string policy = env.WriteFile(
      "guard.textproto",
      absl::StrReplaceAll(TestPolicy("e2e-guard", 30),
                          {{"min_rack_pairs: 6", "min_rack_pairs: 6\n  local_guard_rounds: 1"}}));
  std::string out;
  ASSERT_EQ(env.Ctl({"policy", "apply", policy}, "alice", &out), 0) << out;
  ASSERT_TRUE(env.WaitForTelemetry(absl::Seconds(5)));  // the canary's baseline
  const std::string id = Propose(env, "e2e-guard", "rpg_min_dec_fac=100");
  ASSERT_EQ(env.Ctl({"change", "approve", id, "--reason=e2e"}, "bob", &out), 0) << out;
  ASSERT_TRUE(env.WaitFor(
      [&] {
        auto c = env.GetChange(id);
        return c.ok() && c->state() == v1::ROLLED_BACK;
      },
      absl::Seconds(60)))
      << env.ControllerLog().substr(0, 4000);
  auto c = env.GetChange(id);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->verdicts(c->verdicts_size() - 1).rule(), "local_guard") << [&] {
    std::string g;
    for (absl::string_view l : absl::StrSplit(env.FabricLog(), '\n')) {
      if (absl::StrContains(l, "guard")) absl::StrAppend(&g, l, "\n");
    }
    return g.size() > 8000 ? g.substr(g.size() - 8000) : g;
  }() << VerdictTrail(*c);
  std::string why;
  ASSERT_TRUE(
      env.WaitFor([&] { return Converged(env, "rpg_min_dec_fac", 50, &why); }, absl::Seconds(20)))
      << why;
  // The guard-rejected version is recorded and never becomes desired again.
  std::map<std::string, std::string> rejected;
  for (const v1::HostInfo& h : env.Hosts()) {
    for (const std::string& v : h.rejected_versions()) rejected[h.host_id()] = v;
  }
  ASSERT_FALSE(rejected.empty());
  for (const v1::HostInfo& h : env.Hosts()) {
    auto it = rejected.find(h.host_id());
    if (it != rejected.end()) {
      EXPECT_NE(h.desired_version(), it->second);
    }
  }
}

TEST(RolloutE2E, ControllerKilledDuringCanaryAndStageResumesTheBake) {
  EnvOptions opt;
  opt.fabricsim_flags = {"--guard_max_pfc_pause_ratio=0", "--guard_max_cnp_rate=0"};
  Env env(opt);
  ASSERT_TRUE(env.Start()) << env.ControllerLog() << env.FabricLog();
  // A neutral change must PASS every judged step, which needs the p99 ratio's
  // upper bound below 1.2 over 8 rack pairs. Per-host p99 over a few seconds
  // of incast is noisy: rack-pair DiD sd 0.04-0.3 per step (the first
  // change's canary, one changed host per rack, draws 0.2-0.3 on every run;
  // the seed is the change id). With 6 s bakes and 4 s baselines, 1 run in 8
  // here, and one CI run, held a step past its 18 s limit; 10 s on both sides
  // of the change passed 17 of 17 runs, then held stage 1 once (sd 0.24 over
  // 8 pairs: mean +9%, upper bound +30% at the final look, and the hold looks
  // cannot narrow a per-rack spread). This test is about the resume, not the
  // judge's reach (judge_*_test): its PASS margin is +50%, so a neutral
  // change's noise cannot end it at the HOLD limit; a real regression of the
  // same size would still FAIL on the 5% tolerance.
  const std::string policy = env.WriteFile(
      "kill.textproto",
      absl::StrReplaceAll(TestPolicy("e2e-kill", 10),
                          {{"baseline_seconds: 4", "baseline_seconds: 10"},
                           {"pass_max_ucb_regression: 0.2", "pass_max_ucb_regression: 0.5"}}));
  std::string out;
  ASSERT_EQ(env.Ctl({"policy", "apply", policy}, "alice", &out), 0) << out;
  ASSERT_TRUE(env.WaitForTelemetry(absl::Seconds(12)));  // the first baseline: 10 s of reports
  // A neutral change: the canary passes, so it reaches a stage.
  for (const v1::ChangeState kill_in : {v1::CANARY, v1::STAGE}) {
    const std::string id = Propose(
        env, "e2e-kill", kill_in == v1::CANARY ? "rpg_time_reset=290" : "rpg_time_reset=310");
    ASSERT_EQ(env.Ctl({"change", "approve", id, "--reason=e2e"}, "bob", &out), 0) << out;
    ASSERT_TRUE(env.WaitFor(
        [&] {
          auto c = env.GetChange(id);
          return c.ok() && c->state() == kill_in;
        },
        absl::Seconds(90)))
        << "never reached " << v1::ChangeState_Name(kill_in) << ": "
        << env.GetChange(id)->DebugString().substr(0, 3000);
    env.KillController();
    ASSERT_TRUE(env.StartController()) << env.ControllerLog();
    auto c = env.GetChange(id);
    ASSERT_TRUE(c.ok());
    // The step's baseline was persisted when the step started: the restarted
    // controller resumes the bake (a transition to the same state) and the
    // neutral change goes on to DONE.
    ASSERT_EQ(c->state(), kill_in) << c->DebugString().substr(0, 3000);
    const v1::ChangeTransition& resumed = c->transitions(c->transitions_size() - 1);
    EXPECT_EQ(resumed.from(), kill_in);
    EXPECT_EQ(resumed.actor(), "controller");
    EXPECT_THAT(resumed.reason(), HasSubstr("resumed"));
    const absl::Time restarted = absl::Now();
    ASSERT_TRUE(env.WaitFor(
        [&] {
          auto now = env.GetChange(id);
          return now.ok() && now->state() != v1::CANARY && now->state() != v1::STAGE;
        },
        absl::Seconds(90)));
    c = env.GetChange(id);
    ASSERT_TRUE(c.ok());
    ASSERT_EQ(c->state(), v1::DONE) << VerdictTrail(*c) << c->DebugString().substr(0, 3000);
    std::printf("verdicts of %s:\n%s", id.c_str(), VerdictTrail(*c).c_str());
    std::printf("BENCH e2e_resume killed_in=%s restart_to_done_s=%.1f\n",
                v1::ChangeState_Name(kill_in).c_str(),
                absl::ToDoubleSeconds(absl::Now() - restarted));
    const int64_t value = kill_in == v1::CANARY ? 290 : 310;
    std::string why;
    ASSERT_TRUE(env.WaitFor([&] { return Converged(env, "rpg_time_reset", value, &why); },
                            absl::Seconds(60)))
        << why;
    ASSERT_EQ(env.Ctl({"audit", absl::StrCat("--change=", id)}, "carol", &out), 0) << out;
    EXPECT_THAT(out, HasSubstr("change_resumed"));
    ASSERT_EQ(env.Ctl({"audit", "verify"}, "carol", &out), 0) << out;
    ASSERT_TRUE(env.WaitForTelemetry(absl::Seconds(5)));  // the next change's baseline
  }
}

}  // namespace
}  // namespace rocetune::e2e
