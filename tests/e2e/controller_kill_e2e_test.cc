// Fault injection: rocetune-controller killed with SIGKILL at random points of
// many rollouts (8 simulated hosts from rocetune-fabricsim --agents, driven
// with rocetunectl), restarted each time on the same state directory. After
// every restart: every change is consistent (its transitions chain, nothing
// is left mid-bake from the dead process), nothing the dead process confirmed
// is lost (changes, approvals, transitions it served, audit rows), the audit
// chain verifies, and every host's applied parameters are a set the store
// records. Prints one line with the counts.
#include <signal.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/fault_checks.h"

namespace rocetune::e2e {
namespace {

constexpr int kTrials = 104;
// Kills per proposed change: the first at a random point of its rollout, the
// others soon after each restart.
constexpr int kKillsPerChange = 3;

std::string ChangeIdIn(const std::string& out) {
  size_t at = out.find("c-");
  if (at == std::string::npos) return "";
  size_t end = at + 2;
  while (end < out.size() && isdigit(static_cast<unsigned char>(out[end]))) ++end;
  return out.substr(at, end - at);
}

// Short looks on a small fleet: 4 canary and 4 control hosts in 4 ToRs,
// a 1 s baseline, one 2 s look per step, one stage.
std::string KillPolicy() { return SmallFleetPolicy("kill", 2, "max_hold_seconds: 4"); }

int AuditRows(Env& env) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("rocetune-actor", "e2e-test");
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::VerifyAuditRequest req;
  v1::VerifyAuditResponse resp;
  if (!env.admin().VerifyAudit(&ctx, req, &resp).ok()) return -1;
  return static_cast<int>(resp.rows());
}

// What the killed process confirmed about one change before it died.
struct Confirmed {
  bool approved = false;  // Approve returned OK
  int transitions = 0;    // transitions it served in GetChange
};

TEST(ControllerKillE2E, HundredKillsAcrossChangeStatesLoseNothing) {
  Env env(SmallFleetOptions());
  ASSERT_TRUE(env.Start()) << env.ControllerLog() << env.FabricLog();
  std::string out;
  ASSERT_EQ(
      env.Ctl({"policy", "apply", env.WriteFile("kill.textproto", KillPolicy())}, "alice", &out), 0)
      << out;
  std::map<std::string, std::string> initial;
  for (const v1::HostInfo& h : env.Hosts()) initial[h.host_id()] = ParamKey(h.current_parameters());
  ASSERT_EQ(initial.size(), 8u);

  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  std::uniform_real_distribution<double> u(0, 1);
  std::set<int> used_values;
  std::map<std::string, Confirmed> confirmed;
  std::map<std::string, int> killed_in;  // state at the kill -> trials
  int trials = 0, lost = 0, inconsistent = 0, off_record = 0, audit_broken = 0;
  std::vector<std::string> problems;
  // Full changes (ListChanges leaves out the hosts' sets); terminal ones
  // do not change again.
  std::map<std::string, v1::Change> full;
  auto full_changes = [&](const std::vector<v1::Change>& listed) {
    std::vector<v1::Change> out;
    for (const v1::Change& c : listed) {
      auto it = full.find(c.id());
      const bool terminal = c.state() == v1::DONE || c.state() == v1::REJECTED ||
                            c.state() == v1::ROLLED_BACK || c.state() == v1::ABORTED;
      if (it == full.end() || !terminal || it->second.state() != c.state()) {
        absl::StatusOr<v1::Change> got = env.GetChange(c.id());
        if (got.ok()) full[c.id()] = *got;
      }
      out.push_back(full.contains(c.id()) ? full[c.id()] : c);
    }
    return out;
  };
  const absl::Time start = absl::Now();
  int propose_failed = 0;
  std::vector<double> reconnect_s;  // restart -> 6 (8 in long trials) hosts connected
  int resync_kills = 0;
  for (int i = 0; trials < kTrials; ++i) {
    // A change a previous round left PROPOSED holds its hosts: reject it
    // (a kill may land right after).
    for (const v1::Change& c : ListAllChanges(env)) {
      if (c.state() == v1::PROPOSED) env.Ctl({"change", "reject", c.id(), "--reason=next"}, "bob");
      // One the restarted controller resumed (it was APPROVED) holds them too.
      if (c.state() == v1::APPROVED) env.Ctl({"change", "abort", c.id(), "--reason=next"});
      if (c.state() == v1::CANARY || c.state() == v1::STAGE) {
        env.Ctl({"change", "rollback", c.id(), "--reason=next"});
      }
    }
    const double kind = u(rng);
    // The agents reconnect with jittered backoff after each kill; a change
    // needs connected hosts. Long trials wait for the whole fleet and some
    // telemetry, so that the change can reach a stage or DONE before the kill.
    const absl::Time wait_from = absl::Now();
    const bool long_trial = kind >= 0.9;
    const bool all_back = env.WaitFor(
        [&] {
          int n = 0;
          for (const v1::HostInfo& h : env.Hosts()) n += h.state() == v1::HOST_CONNECTED;
          return n >= (long_trial ? 8 : 6);
        },
        absl::Seconds(long_trial ? 10 : 5), absl::Milliseconds(50));
    if (i > 0 && all_back) reconnect_s.push_back(absl::ToDoubleSeconds(absl::Now() - wait_from));
    // A baseline: the judge needs whole telemetry windows from before the canary.
    if (long_trial) absl::SleepFor(absl::Seconds(3));
    // Each trial its own value: one a judge FAILed is refused when proposed
    // again (issue 25 item 3), which is not what this test is about.
    if (used_values.size() >= 290) used_values.clear();
    int value = 100 + 10 * static_cast<int>(u(rng) * 290);
    while (!used_values.insert(value).second) value = 100 + 10 * static_cast<int>(u(rng) * 290);
    int propose_rc = env.Ctl({"change", "propose", "kill", absl::StrCat("rpg_time_reset=", value),
                              absl::StrCat("--reason=trial ", i)},
                             "alice", &out);
    const std::string id = propose_rc == 0 ? ChangeIdIn(out) : "";
    if (id.empty()) {
      ++propose_failed;
      problems.push_back(absl::StrCat("trial ", i, ": propose failed: ", out));
    } else {
      confirmed[id];
    }
    // Approve in a thread (the kill may land while it is in flight); a 0
    // exit before the kill means the approval was confirmed.
    std::atomic<int> approve_rc{-1};
    absl::Time approve_done = absl::InfiniteFuture();
    std::thread approver;
    if (!id.empty() && u(rng) < 0.9) {
      approver = std::thread([&, id] {
        std::string o;
        approve_rc = env.Ctl({"change", "approve", id, "--reason=kill loop"}, "bob", &o);
        approve_done = absl::Now();
      });
    }
    double delay_s;
    if (kind < 0.15) {
      delay_s = 0.08 * u(rng);  // while approve is in flight
    } else {
      if (approver.joinable()) approver.join();
      if (kind < 0.35) {
        delay_s = 0.06 * u(rng);  // right after the approval
      } else if (kind < 0.7) {
        delay_s = 0.1 + 1.4 * u(rng);
      } else if (kind < 0.9) {
        delay_s = 1.5 + 2.0 * u(rng);
      } else {
        // Until the canary's look has moved the change on (to a stage, or
        // ended it), then a random point of what follows.
        env.WaitFor(
            [&] {
              absl::StatusOr<v1::Change> c = env.GetChange(id);
              return !c.ok() || (c->state() != v1::APPROVED && c->state() != v1::CANARY);
            },
            absl::Seconds(10), absl::Milliseconds(50));
        delay_s = 2.5 * u(rng);
      }
    }
    for (int k = 0; k < kKillsPerChange && trials < kTrials; ++k) {
      // Later kills of the same change land while the restarted controller
      // resyncs: hosts reconnecting, rolled-back hosts being pushed again.
      absl::SleepFor(k == 0 ? absl::Seconds(delay_s) : absl::Milliseconds(500 * u(rng)));
      resync_kills += k > 0;
      // What the live process serves now must survive it.
      std::vector<v1::Change> before = ListAllChanges(env);
      const int rows_before = AuditRows(env);
      const absl::Time kill_at = absl::Now();
      env.KillController();
      if (approver.joinable()) approver.join();
      for (const v1::Change& c : before) confirmed[c.id()].transitions = c.transitions_size();
      if (!id.empty() && approve_rc.load() == 0 && approve_done < kill_at) {
        confirmed[id].approved = true;
      }
      ASSERT_TRUE(env.StartController()) << env.ControllerLog();
      ++trials;

      std::vector<v1::Change> after = ListAllChanges(env);
      std::map<std::string, const v1::Change*> by_id;
      for (const v1::Change& c : after) by_id[c.id()] = &c;
      if (!id.empty() && by_id.contains(id)) {
        ++killed_in[v1::ChangeState_Name(StateAt(*by_id[id], kill_at))];
      } else {
        ++killed_in["(no change)"];
      }
      for (const auto& [cid, conf] : confirmed) {
        auto it = by_id.find(cid);
        if (it == by_id.end()) {
          ++lost;
          problems.push_back(absl::StrCat("trial ", i, ": change ", cid, " lost"));
          continue;
        }
        const v1::Change& c = *it->second;
        bool has_bob = false;
        for (const v1::Approval& a : c.approvals()) has_bob |= a.approver() == "bob";
        if (conf.approved && !has_bob) {
          ++lost;
          problems.push_back(absl::StrCat("trial ", i, ": approval of ", cid, " lost"));
        }
        if (c.transitions_size() < conf.transitions) {
          ++lost;
          problems.push_back(absl::StrCat("trial ", i, ": ", cid, " had ", conf.transitions,
                                          " transitions, now ", c.transitions_size()));
        }
      }
      const int rows_after = AuditRows(env);
      if (rows_before >= 0 && rows_after < rows_before) {
        ++lost;
        problems.push_back(
            absl::StrCat("trial ", i, ": audit rows ", rows_before, " -> ", rows_after));
      }
      // Nothing may still be mid-bake from the dead process.
      for (const std::string& p : InconsistentChanges(after, kill_at)) {
        ++inconsistent;
        problems.push_back(absl::StrCat("trial ", i, ": ", p));
      }
      for (const std::string& p :
           HostsOffRecord(env.Hosts(), RecordedSets(full_changes(after), initial))) {
        ++off_record;
        problems.push_back(absl::StrCat("trial ", i, ": ", p));
      }
      if (env.Ctl({"audit", "verify"}, "carol", &out) != 0) {
        ++audit_broken;
        problems.push_back(absl::StrCat("trial ", i, ": audit verify: ", out));
      }
    }
  }
  const double loop_s = absl::ToDoubleSeconds(absl::Now() - start);

  // At rest: every host reconnects, applies its desired version, and what it
  // holds (as rocetunectl hosts -o json shows it) is a recorded set.
  std::string why;
  const bool converged = env.WaitFor(
      [&] {
        for (const v1::HostInfo& h : env.Hosts()) {
          if (h.state() != v1::HOST_CONNECTED ||
              (!h.desired_version().empty() && h.current_version() != h.desired_version())) {
            why = h.ShortDebugString().substr(0, 400);
            return false;
          }
        }
        return true;
      },
      absl::Seconds(60));
  EXPECT_TRUE(converged) << why;
  std::vector<v1::Change> final_changes = ListAllChanges(env);
  for (const std::string& p :
       HostsOffRecord(env.Hosts(), RecordedSets(full_changes(final_changes), initial))) {
    ++off_record;
    problems.push_back(absl::StrCat("at rest: ", p));
  }
  ASSERT_EQ(env.Ctl({"hosts", "-o", "json"}, "carol", &out), 0) << out;
  for (const auto& [host, key] : initial) EXPECT_THAT(out, ::testing::HasSubstr(host));
  EXPECT_EQ(env.Ctl({"audit", "verify"}, "carol", &out), 0) << out;

  std::sort(reconnect_s.begin(), reconnect_s.end());
  const double reconnect_p50 = reconnect_s.empty() ? 0 : reconnect_s[reconnect_s.size() / 2];
  const double reconnect_max = reconnect_s.empty() ? 0 : reconnect_s.back();
  std::printf("FAULT controller_kill reconnect after restart: median %.2f s, max %.2f s (%zu)\n",
              reconnect_p50, reconnect_max, reconnect_s.size());
  std::vector<std::string> states;
  for (const auto& [s, n] : killed_in) states.push_back(absl::StrCat(s, "=", n));
  std::printf(
      "FAULT controller_kill trials=%d lost=%d inconsistent=%d hosts_off_record=%d "
      "audit_broken=%d propose_failed=%d resync_kills=%d changes=%zu loop_s=%.0f killed_in: %s\n",
      trials, lost, inconsistent, off_record, audit_broken, propose_failed, resync_kills,
      final_changes.size(), loop_s, absl::StrJoin(states, " ").c_str());
  EXPECT_GE(trials, 100);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(inconsistent, 0);
  EXPECT_EQ(off_record, 0);
  EXPECT_EQ(audit_broken, 0);
  EXPECT_LE(propose_failed, 10) << "proposals refused (too few hosts back)";
  EXPECT_TRUE(problems.empty()) << absl::StrJoin(
      problems.begin(), problems.begin() + std::min<size_t>(problems.size(), 30), "\n");
  // Every state a change passes through saw kills.
  // (STAGE and DONE need the whole fleet back and a passing look before the
  // kill; they are counted in the FAULT line, not required.)
  for (const char* s : {"PROPOSED", "APPROVED", "CANARY"}) {
    EXPECT_GT(killed_in[s], 0) << "no kill landed in " << s;
  }
}

}  // namespace
}  // namespace rocetune::e2e
