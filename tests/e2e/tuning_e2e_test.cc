// End to end: a tuning campaign on the simulated fabric (32 hosts in 8 ToRs,
// a 16:1 incast every 500 us plus WebSearch background at 30% load), from
// firmware defaults, with tuner.min_improvement unset: each trial is scored
// by the judge's canary-versus-control DiD and must beat the incumbent by its
// own noise band. Every trial runs canary-only under the campaign's one
// approval; a winner, if one beats its noise, is promoted through a second
// approval, the canary and the stages; the fleet's probe p99 is measured
// before and after.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/campaign_flow.h"
#include "tests/e2e/e2e_env.h"

namespace rocetune::e2e {
namespace {

TEST(TuningE2E, CampaignFromFirmwareDefaultsPromotesOnlyWhatBeatsTrialNoise) {
  EnvOptions opt;
  opt.fabricsim_flags = {"--guard_max_pfc_pause_ratio=0", "--guard_max_cnp_rate=0"};
  opt.fabric_metrics = true;
  Env env(opt);
  ASSERT_TRUE(env.Start()) << env.ControllerLog() << env.FabricLog();
  const std::string policy =
      env.WriteFile("tune.textproto", TestPolicy("e2e-tune", /*bake_seconds=*/4, /*approvers=*/1,
                                                 /*trial_budget=*/12, /*looks=*/2,
                                                 /*min_improvement=*/0));
  std::string out;
  ASSERT_EQ(env.Ctl({"policy", "apply", policy, "--reason=e2e"}, "alice", &out), 0) << out;
  // The fleet's "before": the background traffic's long flows take about
  // 1.2 s of simulated time to reach steady state (24 s of wall time at pace
  // 0.05, longer when the fabric runs behind its pace); windows taken earlier
  // read up to 20% higher p99 and would count the warm-up as the tuner's gain.
  ASSERT_TRUE(env.WaitForSimulatedTime(absl::Seconds(1.2), absl::Seconds(120))) << env.FabricLog();
  const FleetFigures before = MeasureFleet(env, 7);
  ASSERT_GT(before.p99_us, 0);

  absl::StatusOr<v1::Campaign> t = RunApprovedCampaign(env, "e2e-tune", absl::Seconds(540));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->state(), v1::Campaign::FINISHED) << t->DebugString();
  const std::string campaign = t->id();
  EXPECT_LE(BudgetedTrials(*t), 12);
  for (const v1::Trial& tr : t->trials()) {
    if (tr.outcome() == "rejected_before") continue;  // not run: no change
    auto c = env.GetChange(tr.change_id());
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(c->canary_only());
    bool stage = false;
    for (const auto& x : c->transitions()) stage |= x.to() == v1::STAGE;
    EXPECT_FALSE(stage) << "a trial went beyond its canary: " << tr.change_id();
  }
  ASSERT_EQ(env.Ctl({"tuning", "show", campaign}, "carol", &out), 0);
  std::printf("%s\n", out.c_str());
  // Every scored trial: its objective is its change's DiD ratio, with a 90%
  // interval around it, and its bar is that interval's half-width (the
  // trial's noise band), at least 2%; an improvement beats the incumbent of
  // its time by its bar.
  int scored = 0;
  double incumbent = 1.0;
  for (const v1::Trial& tr : t->trials()) {
    if (tr.outcome() != "improved" && tr.outcome() != "not_improved" &&
        tr.outcome() != "constraint_exceeded") {
      continue;
    }
    ++scored;
    auto c = env.GetChange(tr.change_id());
    ASSERT_TRUE(c.ok() && c->verdicts_size() > 0) << tr.change_id();
    double did = 0;
    for (const v1::MetricEvidence& m : c->verdicts(c->verdicts_size() - 1).metrics()) {
      if (m.metric() == "ln_p99_did") did = m.ratio();
    }
    EXPECT_NEAR(tr.objective_ratio(), did, 1e-9) << tr.DebugString();
    ASSERT_GT(tr.objective_lower(), 0) << tr.DebugString();
    EXPECT_LT(tr.objective_lower(), tr.objective_ratio());
    EXPECT_GT(tr.objective_upper(), tr.objective_ratio());
    // A confirmation (its outcome constraint_exceeded when a constraint
    // stopped it) is held to the floor, the smallest gain worth a fleet-wide
    // change, not to its noise band.
    const double bar =
        tr.confirms() != 0
            ? 0.02
            : std::max(0.02, 1 - std::sqrt(tr.objective_lower() / tr.objective_upper()));
    EXPECT_NEAR(tr.min_improvement(), bar, 1e-9) << tr.DebugString();
    if (tr.outcome() == "improved") {
      EXPECT_LT(tr.objective_ratio(), incumbent * (1 - tr.min_improvement())) << tr.DebugString();
      incumbent = tr.objective_ratio();
    }
  }
  EXPECT_GE(scored, 6) << out;
  if (t->promotion_change_id().empty()) {
    // Nothing beat its own noise, or the winner was not confirmed on fresh
    // canary hosts: the fleet keeps the start values.
    std::printf(
        "BENCH e2e_tuning trials=%d promoted=0 search_estimate=%s confirmed_estimate=%s "
        "confirmation=%s\n",
        t->trials_size(), EstimateOf(ConfirmedTrial(*t)).c_str(),
        EstimateOf(Confirmation(*t)).c_str(),
        Confirmation(*t) == nullptr ? "none" : Confirmation(*t)->outcome().c_str());
    if (Confirmation(*t) != nullptr) {
      EXPECT_NE(Confirmation(*t)->outcome(), "confirmed") << out;
      EXPECT_THAT(t->note(), ::testing::HasSubstr("not confirmed")) << out;
    } else {
      for (const auto& [k, v] : t->start()) EXPECT_EQ(t->best().at(k), v) << k;
    }
    // And no trial's values were left on any host.
    for (const v1::HostInfo& h : env.Hosts()) {
      for (const auto& [k, v] : t->start()) EXPECT_EQ(ParameterOf(h, k), v) << h.host_id() << k;
    }
    return;
  }
  // Proposed only once confirmed against the start values on fresh canary
  // hosts.
  const v1::Trial* conf = Confirmation(*t);
  ASSERT_NE(conf, nullptr) << out;
  EXPECT_EQ(conf->outcome(), "confirmed");
  EXPECT_LT(conf->objective_upper(), 1.0);
  const std::string promo = t->promotion_change_id();
  absl::StatusOr<v1::Change> c = PromoteAndWait(env, promo, absl::Seconds(120));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->state(), v1::DONE) << c->DebugString().substr(0, 4000);
  // Every host now holds the winner.
  for (const v1::HostInfo& h : env.Hosts()) {
    for (const auto& [knob, value] : t->best()) {
      EXPECT_EQ(ParameterOf(h, knob), value) << h.host_id() << " " << knob;
    }
  }
  const FleetFigures after = MeasureFleet(env, 7);
  const double improvement = 1 - after.p99_us / before.p99_us;
  const double tput = after.gbps / before.gbps - 1;

  // The same comparison without the fleet's drift: the fabric model run
  // offline, defaults and winner on the same traffic (seed), paired.
  const std::map<std::string, int64_t> start(t->start().begin(), t->start().end());
  const std::map<std::string, int64_t> best(t->best().begin(), t->best().end());
  double ln_probe = 0, ln_burst = 0, ln_gbps = 0;
  const std::vector<int> seeds = {11, 12, 13};
  for (int seed : seeds) {
    absl::StatusOr<OfflineFigures> d = env.SimulateOffline(start, seed, absl::Milliseconds(300));
    absl::StatusOr<OfflineFigures> w = env.SimulateOffline(best, seed, absl::Milliseconds(300));
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_TRUE(w.ok()) << w.status();
    ln_probe += std::log(w->probe_p99_us / d->probe_p99_us) / seeds.size();
    ln_burst += std::log(w->burst_p99_us / d->burst_p99_us) / seeds.size();
    ln_gbps += std::log(w->delivered_gbps / d->delivered_gbps) / seeds.size();
  }
  std::printf(
      "BENCH e2e_tuning p99_before_us=%.1f p99_after_us=%.1f improvement_pct=%.1f "
      "throughput_change_pct=%.1f trials=%d best_trial_ratio=%.3f search_estimate=%s "
      "confirmed_estimate=%s model_probe_p99_change_pct=%.1f "
      "model_incast_burst_p99_change_pct=%.1f model_throughput_change_pct=%.1f%s\n",
      before.p99_us, after.p99_us, 100 * improvement, 100 * tput, t->trials_size(),
      t->best_objective_ratio(), EstimateOf(ConfirmedTrial(*t)).c_str(), EstimateOf(conf).c_str(),
      100 * std::expm1(ln_probe), 100 * std::expm1(ln_burst), 100 * std::expm1(ln_gbps),
      JobFigures(before, after).c_str());
  // The goal (p99 30% lower at most 5% throughput lost) is out of
  // reach for host DCQCN knobs on this scenario (bench/tuning_bench, README):
  // on the fabric model each single knob value the policy offers moves probe
  // p99 by -10% to +2% here (means over three seeds), and a 4-second trial's
  // DiD interval is 2-10% wide on either side, so most runs promote nothing;
  // a winner is the best of 12 noisy trials and its ratio overstates its gain.
  //
  // What must hold on every run:
  // - on the model, paired over three seeds, the winner's probe p99 is no
  //   more than 5% above the defaults' and its throughput no more than 5%
  //   below (drift-free, so this bound can be tight);
  // - on the live fleet, before and after are two 7-second windows taken
  //   minutes apart. At fixed defaults, twelve such windows in a row measured
  //   115-146 us here (+-12%, drift included), so the live bound is the
  //   judge's own PASS limit (+20%), and throughput at most 10% lower.
  EXPECT_LE(std::expm1(ln_probe), 0.05);
  EXPECT_GE(std::expm1(ln_gbps), -0.05);
  EXPECT_LE(after.p99_us, before.p99_us * 1.20);
  EXPECT_GE(tput, -0.10);
}

}  // namespace
}  // namespace rocetune::e2e
