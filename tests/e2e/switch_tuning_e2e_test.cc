// End to end: a tuning campaign of the simulated ToRs' ECN thresholds. A real
// controller, rocetune-fabricsim --agents with a switch agent per ToR (32
// hosts in 8 ToRs of 4, WebSearch background at 50% load, so every ToR's
// downlinks congest) starting from the HPCC-production ECN values of the
// shipped scenarios (Kmin 400 KB, Kmax 1600 KB, Pmax 20%), and rocetunectl.
// The campaign is approved once; every trial changes only its canary ToRs and
// is judged on the hosts below them against the hosts below the control ToRs;
// the winner is promoted through a second approval, the canary ToRs and the
// stages. The fleet's probe p99 and throughput are measured before and after.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/campaign_flow.h"
#include "tests/e2e/e2e_env.h"

namespace rocetune::e2e {
namespace {

constexpr int kFleetSamples = 12;

constexpr char kKmin[] = "ecn.AZURE_LOSSLESS.green_min_threshold";
constexpr char kKmax[] = "ecn.AZURE_LOSSLESS.green_max_threshold";

// Switch knobs only: Kmin and Kmax of the ToRs' lossless profile, from the
// HPCC-production values down (Kmax within the 32 MiB buffer, Kmin always
// below Kmax). Four canary racks against four control racks: the judge's
// rack-level design has power enough in a 6-second bake. Judged on the probes within each rack
// (intra_tor): they cross only their own ToR, the one the change touches.
std::string SwitchPolicy(int trial_budget) {
  return absl::StrCat(R"(name: "e2e-tor-ecn"
description: "ECN thresholds of the simulated ToRs"
selector { match_labels { key: "role" value: "switch" } }
objective { metric: PROBE_RTT_P99 peer_class: "intra_tor" }
# A trial's canary/control throughput ratio varies by several percent over a
# short bake; the fleet-wide figure below is held to 5%.
constraints { metric: "throughput_gbps" max_ratio: 1.08 }
knobs { parameter: "ecn.AZURE_LOSSLESS.green_min_threshold" min: 25000 max: 400000 step: 50000 log_scale: true }
knobs { parameter: "ecn.AZURE_LOSSLESS.green_max_threshold" min: 500000 max: 1600000 step: 200000 log_scale: true }
tuner { kind: COORDINATE_DESCENT trial_budget: )",
                      trial_budget, R"( min_improvement: 0.03 }
)",
                      RackLevelRollout(0.5));
}

TEST(SwitchTuningE2E, CampaignOfTorEcnThresholdsLowersFleetP99) {
  EnvOptions opt;
  opt.scenario = "tests/e2e/switch_tuning_32_hosts.textproto";
  opt.sets = {};
  opt.switch_agents = true;
  opt.expect_hosts = 40;  // 32 hosts and 8 ToRs
  opt.pace = 0.03;
  opt.probe_rate = 6000;
  opt.fabricsim_flags = {"--guard_max_pfc_pause_ratio=0", "--guard_max_cnp_rate=0"};
  Env env(opt);
  ASSERT_TRUE(env.Start()) << env.ControllerLog() << env.FabricLog();
  const std::string policy = env.WriteFile("tor-ecn.textproto", SwitchPolicy(8));
  std::string out;
  ASSERT_EQ(env.Ctl({"policy", "apply", policy, "--reason=e2e"}, "alice", &out), 0) << out;
  ASSERT_TRUE(env.WaitForTelemetry(absl::Seconds(3)));
  // 12 one-second samples of the last 2 s on each side: with 7, one run here
  // measured a winner at -5.7% throughput that the fleet guard's own bake-long
  // figure put at +2.3% (the simulator's pace under load moves short samples).
  const FleetFigures before = MeasureFleet(env, kFleetSamples);
  ASSERT_GT(before.p99_us, 0);

  absl::StatusOr<v1::Campaign> t = RunApprovedCampaign(env, "e2e-tor-ecn", absl::Seconds(300));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->state(), v1::Campaign::FINISHED) << t->DebugString();
  const std::string campaign = t->id();
  EXPECT_EQ(t->start().at(kKmin), 400000) << "the start is what the ToRs hold";
  EXPECT_EQ(t->start().at(kKmax), 1600000);
  for (const v1::Trial& tr : t->trials()) {
    if (tr.outcome() == "rejected_before") continue;  // not run: no change
    auto c = env.GetChange(tr.change_id());
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(c->canary_only());
    int canary_tors = 0, pushed_hosts = 0;
    for (const v1::HostTarget& h : c->hosts()) {
      const bool tor = h.host_id().rfind("sim-tor", 0) == 0;
      if (tor && h.role() == v1::HostTarget::CANARY) ++canary_tors;
      if (!tor && !h.pushed_version().empty()) ++pushed_hosts;
      if (tor && h.role() != v1::HostTarget::CANARY) {
        EXPECT_TRUE(h.pushed_version().empty())
            << "trial " << tr.index() << " touched control " << h.host_id();
      }
    }
    EXPECT_EQ(canary_tors, 4) << "trial " << tr.index() << ": half the racks, whole";
    EXPECT_EQ(pushed_hosts, 0) << "a switch trial never pushes to hosts";
    for (const auto& x : c->transitions()) EXPECT_NE(x.to(), v1::STAGE) << tr.change_id();
  }
  ASSERT_EQ(env.Ctl({"tuning", "show", campaign}, "carol", &out), 0);
  std::printf("%s\n", out.c_str());
  if (t->promotion_change_id().empty()) {
    ExpectUnconfirmedEnd(*t, out, "e2e_switch_tuning");
    return;
  }
  // Proposed only once confirmed against the start values on the other four
  // racks: every canary member (ToR and hosts) of the confirmation is fresh.
  const v1::Trial* conf = Confirmation(*t);
  ExpectConfirmedOnFreshRacks(conf, out);
  const std::string promo = t->promotion_change_id();
  absl::StatusOr<v1::Change> c = PromoteAndWait(env, promo, absl::Seconds(120));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(env.Ctl({"change", "show", promo}, "carol", &out), 0);
  std::printf("%s\n", out.c_str());
  ASSERT_EQ(c->state(), v1::DONE) << c->DebugString().substr(0, 4000);
  // Every ToR now holds the winner.
  for (const v1::HostInfo& h : env.Hosts()) {
    if (h.host_id().rfind("sim-tor", 0) != 0) continue;
    for (const auto& d : h.current_parameters().devices()) {
      auto it = d.dcqcn().find(kKmin);
      if (it != d.dcqcn().end()) {
        EXPECT_EQ(it->second, t->best().at(kKmin)) << h.host_id();
      }
    }
  }
  ASSERT_TRUE(env.WaitForTelemetry(absl::Seconds(2)));  // the winner's own windows
  const FleetFigures after = MeasureFleet(env, kFleetSamples);
  const double improvement = 1 - after.p99_us / before.p99_us;
  const double tput = after.gbps / before.gbps - 1;
  std::printf(
      "BENCH e2e_switch_tuning p99_before_us=%.1f p99_after_us=%.1f improvement_pct=%.1f "
      "throughput_change_pct=%.1f trials=%d best_trial_ratio=%.3f search_estimate=%s "
      "confirmed_estimate=%s best=%s%s\n",
      before.p99_us, after.p99_us, 100 * improvement, 100 * tput, t->trials_size(),
      t->best_objective_ratio(), EstimateOf(ConfirmedTrial(*t)).c_str(), EstimateOf(conf).c_str(),
      absl::StrCat(kKmin, "=", t->best().at(kKmin), " ", kKmax, "=", t->best().at(kKmax)).c_str(),
      JobFigures(before, after).c_str());
  // The issue's requirement: p99 lower, at most 5% of the throughput lost.
  EXPECT_LT(after.p99_us, before.p99_us);
  EXPECT_GE(tput, -0.05);
}

}  // namespace
}  // namespace rocetune::e2e
