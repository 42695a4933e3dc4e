// End to end: the fleet guard on the simulated fabric. A neutral change
// reaches DONE with the fleet's before/after throughput ratio recorded at
// every step; a change whose cost is collective is rolled back by the fleet
// guard (rule fleet_constraint) on every host.
//
// The fabric (sim/scenarios/allreduce_incast_32_hosts.textproto: 32 hosts in
// 8 ToRs) runs a lockstep ring all-reduce over every host beside an incast and
// background traffic. rate_to_set_on_first_cnp=1000 makes a sender that gets
// a CNP restart at 1 Gb/s: its ring transfer crawls, and since a step ends
// with its slowest transfer, every host's steps slow down, changed or not. A
// canary judged against control hosts of its own racks sees only what the
// change costs the canary hosts' own background flows; the fleet loses about
// half its throughput in simulated time (1121 -> 557 Gb/s over 100 ms with
// every host changed).
//
// Before, this test ran the incast + background fabric, where the same
// change costs 1-4 % of delivered throughput in simulated time; the 25-44 %
// "fleet losses" it used to catch were the simulator falling behind its pace
// (the change multiplies the simulator's work by about 5, and throughput is
// counted per wall-clock second), so on a machine with a spare core nothing
// rolled back and the test failed.
//
// ROCETUNE_FLEET_AA_RUNS=n runs n neutral changes (default 1) and prints every
// fleet ratio: the A/A spread the guard's noise margin is set from.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/campaign_flow.h"
#include "tests/e2e/e2e_env.h"

namespace rocetune::e2e {
namespace {

using ::testing::HasSubstr;

bool Ended(v1::ChangeState s) {
  return s == v1::DONE || s == v1::ROLLED_BACK || s == v1::ABORTED || s == v1::REJECTED;
}

const v1::MetricEvidence* FleetThroughput(const v1::Verdict& v) {
  for (const v1::MetricEvidence& m : v.metrics()) {
    if (m.metric() == "fleet_throughput_gbps") return &m;
  }
  return nullptr;
}

int64_t TransitionTo(const v1::Change& c, v1::ChangeState to, uint32_t stage = 0) {
  for (const auto& t : c.transitions()) {
    if (t.to() == to && (to != v1::STAGE || t.stage() == stage)) return t.unix_nanos();
  }
  return 0;
}

class FleetGuardE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    EnvOptions opt;
    opt.scenario = "sim/scenarios/allreduce_incast_32_hosts.textproto";
    opt.sets = {};  // the scenario has its 8 ToRs of 4
    // The controller, not the agents' guard, must decide.
    opt.fabricsim_flags = {"--guard_max_pfc_pause_ratio=0", "--guard_max_cnp_rate=0"};
    env_ = std::make_unique<Env>(opt);
    ASSERT_TRUE(env_->Start()) << env_->ControllerLog() << env_->FabricLog();
    // The e2e policy plus the knob a canary cannot judge.
    const std::string text = absl::StrReplaceAll(
        TestPolicy("e2e-fleet", /*bake_seconds=*/6),
        {{"knobs { parameter: \"dce_tcp_rtt\"",
          "knobs { parameter: \"rate_to_set_on_first_cnp\" min: 0 max: 10000 step: 1000 }\n"
          "knobs { parameter: \"dce_tcp_rtt\""}});
    std::string out;
    ASSERT_EQ(
        env_->Ctl({"policy", "apply", env_->WriteFile("fleet.textproto", text)}, "alice", &out), 0)
        << out;
    // A baseline: 5 s more of every host's telemetry.
    ASSERT_TRUE(env_->WaitForTelemetry(absl::Seconds(5)));
    // The simulated job's exchanges reach the controller through every host's
    // agent socket (docs/job-signal.md): the ring all-reduce from all 32
    // hosts, the incast from its 16 senders and its receiver.
    ASSERT_EQ(env_->Ctl({"status"}, "alice", &out), 0) << out;
    EXPECT_THAT(out, HasSubstr("job:         allreduce_incast_32_hosts allreduce: 32 hosts"));
    EXPECT_THAT(out, HasSubstr("job:         allreduce_incast_32_hosts incast: 17 hosts"));
  }

  // Proposes `knobs` under `policy`, approves, waits for the end; returns the change.
  v1::Change Run(const std::string& knobs, const std::string& policy = "e2e-fleet") {
    std::string out;
    EXPECT_EQ(env_->Ctl({"change", "propose", policy, knobs, "--reason=e2e"}, "alice", &out), 0)
        << out;
    const std::string id = IdIn(out, "c-");
    EXPECT_FALSE(id.empty()) << out;
    if (id.empty()) return v1::Change();  // not proposed: nothing to wait for
    EXPECT_EQ(env_->Ctl({"change", "approve", id, "--reason=e2e"}, "bob", &out), 0) << out;
    EXPECT_TRUE(env_->WaitFor(
        [&] {
          auto c = env_->GetChange(id);
          return c.ok() && Ended(c->state());
        },
        absl::Seconds(120), absl::Milliseconds(500)));
    auto c = env_->GetChange(id);
    EXPECT_TRUE(c.ok());
    return c.ok() ? *c : v1::Change();
  }

  // Every host acked its desired version and holds `value` for `knob`.
  bool Converged(const std::string& knob, int64_t value, std::string* why) {
    for (const v1::HostInfo& h : env_->Hosts()) {
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

  std::unique_ptr<Env> env_;
};

TEST_F(FleetGuardE2E, NeutralChangeIsDoneAndAFleetWideLossIsRolledBack) {
  const char* runs_env = std::getenv("ROCETUNE_FLEET_AA_RUNS");
  const int runs = runs_env != nullptr ? std::max(1, std::atoi(runs_env)) : 1;
  std::vector<double> aa;
  for (int i = 0; i < runs; ++i) {
    // Neutral: rpg_time_reset 300 -> 290 -> 300 ...
    const int64_t value = i % 2 == 0 ? 290 : 300;
    v1::Change c = Run(absl::StrCat("rpg_time_reset=", value));
    // Under load the judge sometimes cannot narrow p99 enough to PASS a stage
    // (HOLD p99_ucb_too_wide until the limit aborts): that is the judge's
    // thin-data rule, not the fleet guard; such a change is proposed again once.
    for (int retry = 0; retry < 1 && c.state() == v1::ABORTED; ++retry) {
      const std::string rule =
          c.verdicts_size() == 0 ? "" : c.verdicts(c.verdicts_size() - 1).rule();
      // The fleet guard's own rules fail the test; "fleet_shift" (a fleet-wide
      // rise that began after the change, such as simulator lag) is retried.
      ASSERT_TRUE(rule.substr(0, 5) != "fleet" || rule == "fleet_shift")
          << c.DebugString().substr(0, 6000);
      std::printf("FLEET a/a change=%s aborted by the judge (%s), proposed again\n", c.id().c_str(),
                  rule.c_str());
      ASSERT_TRUE(env_->WaitForTelemetry(absl::Seconds(5)));  // a fresh baseline
      c = Run(absl::StrCat("rpg_time_reset=", value));
    }
    ASSERT_EQ(c.state(), v1::DONE) << c.DebugString().substr(0, 6000);
    for (const v1::Verdict& v : c.verdicts()) {
      const v1::MetricEvidence* m = FleetThroughput(v);
      if (v.outcome() != v1::Verdict::PASS || m == nullptr) continue;
      aa.push_back(m->ratio());
      std::printf("FLEET a/a change=%s stage=%u fleet_throughput_ratio=%.4f  %s\n", c.id().c_str(),
                  v.stage(), m->ratio(), m->note().c_str());
    }
    std::string why;
    ASSERT_TRUE(
        env_->WaitFor([&] { return Converged("rpg_time_reset", value, &why); }, absl::Seconds(20)))
        << why;
    // The next baseline holds no transition: 5 s more of every host's telemetry.
    ASSERT_TRUE(env_->WaitForTelemetry(absl::Seconds(5)));
  }
  ASSERT_EQ(aa.size(), static_cast<size_t>(3 * runs)) << "canary, stage 1, stage 2 per change";
  double lo = aa.front(), hi = aa.front();
  for (double r : aa) {
    lo = std::min(lo, r);
    hi = std::max(hi, r);
  }
  std::printf("BENCH e2e_fleet_aa ratios=%zu min=%.4f max=%.4f\n", aa.size(), lo, hi);

  const v1::Change bad = Run("rate_to_set_on_first_cnp=1000");
  for (const v1::Verdict& v : bad.verdicts()) {
    const v1::MetricEvidence* m = FleetThroughput(v);
    if (m != nullptr) {
      std::printf("FLEET bad change=%s stage=%u %s/%s fleet_throughput_ratio=%.4f\n",
                  bad.id().c_str(), v.stage(), v1::Verdict::Outcome_Name(v.outcome()).c_str(),
                  v.rule().c_str(), m->ratio());
    }
  }
  ASSERT_EQ(bad.state(), v1::ROLLED_BACK) << bad.DebugString().substr(0, 8000);
  const v1::Verdict& v = bad.verdicts(bad.verdicts_size() - 1);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL);
  ASSERT_EQ(v.rule(), "fleet_constraint") << bad.DebugString().substr(0, 8000);
  const v1::MetricEvidence* m = FleetThroughput(v);
  ASSERT_NE(m, nullptr);
  const int64_t canary = TransitionTo(bad, v1::CANARY);
  const int64_t step = v.stage() == 0 ? canary : TransitionTo(bad, v1::STAGE, v.stage());
  const int64_t rolled = TransitionTo(bad, v1::ROLLED_BACK);
  std::printf(
      "BENCH e2e_fleet_guard stage=%u fleet_throughput_ratio=%.4f rollback_after_step_s=%.1f "
      "rollback_after_canary_s=%.1f  %s\n",
      v.stage(), m->ratio(), (rolled - step) / 1e9, (rolled - canary) / 1e9, m->note().c_str());
  EXPECT_LT(m->ratio(), 0.85);
  // Decided at the end of the failing step's bake (6 s), not later.
  EXPECT_LE((rolled - step) / 1e9, 10.0);
  // Every host the change touched is back on rate_to_set_on_first_cnp=0.
  std::string why;
  ASSERT_TRUE(env_->WaitFor([&] { return Converged("rate_to_set_on_first_cnp", 0, &why); },
                            absl::Seconds(20)))
      << why;
  std::string out;
  ASSERT_EQ(env_->Ctl({"audit", absl::StrCat("--change=", bad.id())}, "carol", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("change_rolled_back"));
  EXPECT_THAT(out, HasSubstr("fleet_constraint"));
  EXPECT_THAT(out, HasSubstr("throughput_gbps"));
  ASSERT_EQ(env_->Ctl({"audit", "verify"}, "carol", &out), 0) << out;
}

// Issue 24 item 2: with the job's own all-reduce time as the objective
// (STEP_TIME_P99, op "allreduce", reported by every simulated host through
// its agent's job socket), the canary judge reads what each host's part of
// the ring took. The collective cost that probes judged against same-rack
// control hosts cannot see is then the canary's own.
TEST_F(FleetGuardE2E, UnderTheJobsStepTimeTheCanaryJudgeSeesACollectiveCost) {
  const std::string text = absl::StrReplaceAll(
      TestPolicy("e2e-job", /*bake_seconds=*/8),
      {{"knobs { parameter: \"dce_tcp_rtt\"",
        "knobs { parameter: \"rate_to_set_on_first_cnp\" min: 0 max: 10000 step: 1000 }\n"
        "knobs { parameter: \"dce_tcp_rtt\""},
       {"objective { metric: PROBE_RTT_P99 }",
        "objective { metric: STEP_TIME_P99 op: \"allreduce\" }"},
       // About 110 steps a second per host here (at 5/100 of real time):
       // 4 s of baseline hold about 450. The bad change slows the ring 2-3
       // times, so a canary host's 8 s bake holds 300-450, and half that when
       // a loaded machine leaves the simulator behind its pace. At 200 (and a
       // 6 s bake) a run under load once held every look on "0 rack pairs
       // usable": the judge never read the step time it is tested on.
       {"min_samples: 500", "min_samples: 100"}});
  std::string out;
  ASSERT_EQ(env_->Ctl({"policy", "apply", env_->WriteFile("job.textproto", text)}, "alice", &out),
            0)
      << out;
  const v1::Change ended = Run("rate_to_set_on_first_cnp=1000", "e2e-job");
  ASSERT_FALSE(ended.id().empty()) << "not proposed";
  const v1::Change* c = &ended;
  for (const v1::Verdict& v : c->verdicts()) {
    const v1::MetricEvidence* p99 = nullptr;
    for (const v1::MetricEvidence& m : v.metrics()) {
      if (m.metric() == "ln_p99_did") p99 = &m;
    }
    std::printf("JOB change=%s stage=%u look=%u %s/%s p99_ratio=%.3f groups=%d  %s\n",
                c->id().c_str(), v.stage(), v.look(),
                v1::Verdict::Outcome_Name(v.outcome()).c_str(), v.rule().c_str(),
                p99 == nullptr ? 0.0 : p99->ratio(), v.groups_size(), v.summary().c_str());
  }
  ASSERT_EQ(c->state(), v1::ROLLED_BACK) << c->DebugString().substr(0, 8000);
  // The first FAIL decides, at the canary.
  int first_fail = -1;
  for (int i = 0; i < c->verdicts_size() && first_fail < 0; ++i) {
    if (c->verdicts(i).outcome() == v1::Verdict::FAIL) first_fail = i;
  }
  ASSERT_GE(first_fail, 0);
  const v1::Verdict* judged = &c->verdicts(first_fail);
  EXPECT_EQ(judged->stage(), 0u) << "caught at the canary";
  // The canary judge's reading of the job's step time: the verdict that holds
  // its ln_p99_did.
  const v1::Verdict* reading = judged;
  if (judged->rule() == "fleet_constraint") {
    // On a loaded machine (e2e tests side by side, a build beside them) the
    // judge can still hold at the final look, its bound too wide on thin or
    // noisy data; the fleet guard then decides that look (the change costs
    // the fleet's throughput from its onset), its FAIL right after the
    // judge's HOLD. The judge's reading is in that HOLD.
    ASSERT_GT(first_fail, 0);
    reading = &c->verdicts(first_fail - 1);
    EXPECT_EQ(reading->outcome(), v1::Verdict::HOLD) << reading->DebugString().substr(0, 4000);
    EXPECT_EQ(reading->look(), judged->look());
    EXPECT_THAT(judged->summary(), HasSubstr("the judge held this look"));
  } else {
    // Usually the difference-in-differences test decides. Under load the
    // first looks can hold on thin data and the judge's fabric-regression
    // rule decide a look or two later: the canary's step time against its
    // own baseline, far beyond control's. Either is the canary judge reading
    // the job's step time.
    ASSERT_TRUE(judged->rule() == "p99_did_t_test" || judged->rule() == "fabric_regression")
        << judged->DebugString().substr(0, 4000);
    EXPECT_THAT(judged->summary(),
                HasSubstr(judged->rule() == "p99_did_t_test" ? "canary p99 job step time changed"
                                                             : "canary p99 rose"));
  }
  const v1::MetricEvidence* did = nullptr;
  for (const v1::MetricEvidence& m : reading->metrics()) {
    if (m.metric() == "ln_p99_did") did = &m;
  }
  ASSERT_NE(did, nullptr) << reading->DebugString().substr(0, 4000);
  ASSERT_GT(did->rack_pairs(), 0u)
      << "the judge read no rack pair's job step times: " << reading->summary();
  std::printf("BENCH e2e_job_objective canary_step_p99_ratio=%.3f rack_pairs=%u rule=%s\n",
              did->ratio(), did->rack_pairs(), judged->rule().c_str());
  // Setting the rate on the first CNP to 1000 (from 0) costs the ring far
  // more than any look's noise: 2.2 to 3.0 measured across looks and runs.
  EXPECT_GT(did->ratio(), 1.5);
}

}  // namespace
}  // namespace rocetune::e2e
