// End to end (issue 25 item 2): a change's canary is provisional. The real
// rocetune-controller is killed (SIGKILL) during the canary's bake and stays
// away longer than the policy's lease (10 s): every canary host (agents of
// rocetune-fabricsim --agents) restores its last-known-good set by itself, no
// sooner than the lease. The restarted controller hears of it and rolls the
// change back, and every host ends on the set it held before the change.
// A kill shorter than the lease changes nothing: the canary goes on.
// Prints the times measured.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/campaign_flow.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/fault_checks.h"

namespace rocetune::e2e {
namespace {

constexpr int kLeaseSeconds = 10;
constexpr char kUnreachable[] = "controller unreachable; retrying with backoff";

// 4 canary and 4 control hosts in 4 ToRs; a bake far longer than the test,
// so the change is still in its canary when the controller goes away.
std::string LeasePolicy() {
  return SmallFleetPolicy(
      "lease", 150,
      absl::StrCat("provisional_lease_seconds: ", kLeaseSeconds, " max_hold_seconds: 20"));
}

// Proposes and approves rpg_time_reset=`value`; waits until every canary
// host runs it. Returns the change's id and its canary hosts.
std::string CanaryRunning(Env& env, int value, std::set<std::string>* canary) {
  std::string out;
  if (env.Ctl({"change", "propose", "lease", absl::StrCat("rpg_time_reset=", value),
               "--reason=lease e2e"},
              "alice", &out) != 0) {
    ADD_FAILURE() << out;
    return "";
  }
  const std::string id = IdIn(out, "c-");
  if (env.Ctl({"change", "approve", id, "--reason=lease e2e"}, "bob", &out) != 0) {
    ADD_FAILURE() << out;
    return "";
  }
  const bool running = env.WaitFor(
      [&] {
        absl::StatusOr<v1::Change> c = env.GetChange(id);
        if (!c.ok() || c->state() != v1::CANARY) return false;
        std::map<std::string, std::string> applied;
        for (const v1::HostInfo& h : env.Hosts()) applied[h.host_id()] = h.current_version();
        canary->clear();
        for (const v1::HostTarget& t : c->hosts()) {
          if (t.role() != v1::HostTarget::CANARY) continue;
          if (t.pushed_version().empty() || applied[t.host_id()] != t.pushed_version()) {
            return false;
          }
          canary->insert(t.host_id());
        }
        return !canary->empty();
      },
      absl::Seconds(60));
  EXPECT_TRUE(running) << "the canary never ran: " << env.ControllerLog().substr(0, 4000);
  return running ? id : "";
}

TEST(ControllerLeaseE2E, CanaryHostsGiveUpTheSetWhenTheControllerStaysAwayPastTheLease) {
  EnvOptions opt = SmallFleetOptions();
  // The bake, the HOLD limit and a look interval must fit in the retention.
  opt.controller_flags = {"--retention=6m"};
  Env env(opt);
  ASSERT_TRUE(env.Start()) << env.ControllerLog() << env.FabricLog();
  std::string out;
  ASSERT_EQ(
      env.Ctl({"policy", "apply", env.WriteFile("lease.textproto", LeasePolicy())}, "alice", &out),
      0)
      << out;
  std::map<std::string, std::string> initial;
  for (const v1::HostInfo& h : env.Hosts()) initial[h.host_id()] = ParamKey(h.current_parameters());
  ASSERT_EQ(initial.size(), 8u);

  // 1. Away for less than the lease: nothing is given up, the canary goes on.
  std::set<std::string> canary;
  const std::string first = CanaryRunning(env, 700, &canary);
  ASSERT_FALSE(first.empty());
  ASSERT_EQ(env.Ctl({"host", *canary.begin()}, "carol", &out), 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("provisional until its change is done"));
  const int unreachable = CountOf(env.FabricLog(), kUnreachable);
  env.KillController();
  // Back as soon as the agents have seen it go (their streams ended): an
  // outage well inside the lease.
  ASSERT_TRUE(env.WaitFor([&] { return CountOf(env.FabricLog(), kUnreachable) > unreachable; },
                          absl::Seconds(30), absl::Milliseconds(100)));
  ASSERT_TRUE(env.StartController()) << env.ControllerLog();
  ASSERT_TRUE(env.WaitFor(
      [&] {
        int n = 0;
        for (const v1::HostInfo& h : env.Hosts()) n += h.state() == v1::HOST_CONNECTED;
        return n == 8;
      },
      absl::Seconds(30)));
  EXPECT_EQ(CountOf(env.FabricLog(), kLeaseExpiredLog), 0);
  absl::StatusOr<v1::Change> c = env.GetChange(first);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state(), v1::CANARY) << "a short outage must not end the canary";
  ASSERT_EQ(env.Ctl({"change", "rollback", first, "--reason=next"}, "bob", &out), 0) << out;
  ASSERT_TRUE(env.WaitFor(
      [&] {
        for (const v1::HostInfo& h : env.Hosts()) {
          if (ParamKey(h.current_parameters()) != initial[h.host_id()]) return false;
        }
        return true;
      },
      absl::Seconds(30)));

  // 2. Away for longer than the lease: every canary host gives the set up by
  // itself, no sooner than the lease.
  const std::string id = CanaryRunning(env, 900, &canary);
  ASSERT_FALSE(id.empty());
  env.KillController();
  const absl::Time killed = absl::Now();
  std::vector<double> given_up_s;
  int seen = 0;
  const bool all = env.WaitFor(
      [&] {
        const int n = CountOf(env.FabricLog(), kLeaseExpiredLog);
        for (; seen < n; ++seen) given_up_s.push_back(absl::ToDoubleSeconds(absl::Now() - killed));
        return n >= static_cast<int>(canary.size());
      },
      absl::Seconds(6 * kLeaseSeconds), absl::Milliseconds(100));
  ASSERT_TRUE(all) << "canary hosts that gave up: " << seen << " of " << canary.size() << "\n"
                   << env.FabricLog().substr(0, 6000);
  EXPECT_EQ(CountOf(env.FabricLog(), kLeaseExpiredLog), static_cast<int>(canary.size()))
      << "only the canary's hosts hold a provisional set";
  for (double s : given_up_s) EXPECT_GE(s, kLeaseSeconds - 0.5) << "given up before the lease";
  // Each line names its host (the simulated agents share one log).
  for (const std::string& host : canary) {
    bool named = false;
    for (absl::string_view line : absl::StrSplit(env.FabricLog(), '\n')) {
      named = named || (absl::StrContains(line, kLeaseExpiredLog) &&
                        absl::StrContains(line, absl::StrCat(" host=", host, " ")));
    }
    EXPECT_TRUE(named) << "no lease-expired line names " << host;
  }

  // 3. The controller is back: the change is rolled back for it and every
  // host is on its set from before the change.
  const absl::Time restarted = absl::Now();
  ASSERT_TRUE(env.StartController()) << env.ControllerLog();
  ASSERT_TRUE(env.WaitFor(
      [&] {
        absl::StatusOr<v1::Change> now = env.GetChange(id);
        return now.ok() && now->state() == v1::ROLLED_BACK;
      },
      absl::Seconds(60)))
      << env.ControllerLog().substr(0, 6000);
  const double rolled_back_s = absl::ToDoubleSeconds(absl::Now() - restarted);
  c = env.GetChange(id);
  ASSERT_TRUE(c.ok());
  const std::string rule = c->verdicts(c->verdicts_size() - 1).rule();
  // Whichever reaches it first: the event, or the NACK of the re-pushed set.
  EXPECT_TRUE(rule == "lease_expired" || rule == "nack") << rule;
  EXPECT_TRUE(absl::StrContains(c->verdicts(c->verdicts_size() - 1).summary(), "lease"))
      << c->verdicts(c->verdicts_size() - 1).summary();
  ASSERT_TRUE(env.WaitFor(
      [&] {
        for (const v1::HostInfo& h : env.Hosts()) {
          if (h.state() != v1::HOST_CONNECTED) return false;
          if (ParamKey(h.current_parameters()) != initial[h.host_id()]) return false;
          if (h.current_version() != h.desired_version()) return false;
        }
        return true;
      },
      absl::Seconds(60)))
      << env.ControllerLog().substr(0, 6000);
  // The values were not judged: they may be proposed again.
  ASSERT_EQ(env.Ctl({"change", "propose", "lease", "rpg_time_reset=900", "--reason=again"}, "alice",
                    &out),
            0)
      << out;
  std::sort(given_up_s.begin(), given_up_s.end());
  std::printf(
      "lease %d s: %zu canary hosts gave the set up %.1f to %.1f s after the kill; the restarted "
      "controller rolled the change back (rule %s) %.1f s after its start\n",
      kLeaseSeconds, given_up_s.size(), given_up_s.front(), given_up_s.back(), rule.c_str(),
      rolled_back_s);
}

}  // namespace
}  // namespace rocetune::e2e
