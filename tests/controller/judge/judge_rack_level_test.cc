// The judge's rack-level design: every rack entirely canary or entirely
// control (a change applied per ToR), canary racks' before/after shifts
// against control racks' (judge.h). Behaviour on simulated fleets
// (judge_sim.h, RackLevelConfig): design choice and evidence, minimum racks,
// thin data, a clear improvement, guard metrics, determinism.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "controller/judge/judge.h"
#include "tests/controller/judge/judge_sim.h"

namespace rocetune::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kSeeds = 30;  // per thin-data scenario

std::vector<HostInput> FinalLook(const sim::SimConfig& c, uint64_t seed) {
  return sim::SimulateLooks(c, seed).back();
}

JudgeConfig FinalConfig() {
  JudgeConfig config = sim::AllMetricsConfig();
  config.look = 3;
  config.looks = 3;
  return config;
}

bool AnyDropMentions(const v1::Verdict& v, const std::string& text) {
  return std::any_of(v.dropped_hosts().begin(), v.dropped_hosts().end(),
                     [&](const std::string& d) { return d.find(text) != std::string::npos; });
}

// Runs every look of every seed and asserts each verdict is HOLD; returns the
// final verdict of the first seed.
v1::Verdict ExpectAlwaysHold(const sim::SimConfig& c, const JudgeConfig& base, const char* what) {
  v1::Verdict first;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    auto looks = sim::SimulateLooks(c, seed);
    JudgeConfig config = base;
    config.looks = static_cast<uint32_t>(looks.size());
    for (size_t l = 0; l < looks.size(); ++l) {
      config.look = static_cast<uint32_t>(l + 1);
      v1::Verdict v = Judge(looks[l], config);
      EXPECT_EQ(v.outcome(), v1::Verdict::HOLD) << what << ", seed " << seed << ", look " << l + 1
                                                << ": " << v.rule() << " - " << v.summary();
      if (seed == 1 && l + 1 == looks.size()) first = v;
    }
  }
  std::cout << what << ": HOLD, rule " << first.rule() << " - " << first.summary() << "\n";
  return first;
}

// --- Design choice and its evidence.

TEST(JudgeRackLevelTest, PureRacksUseTheRackLevelDesignAndSayIt) {
  v1::Verdict v = Judge(FinalLook(sim::RackLevelConfig(3, 5), 3), FinalConfig());
  ASSERT_EQ(v.outcome(), v1::Verdict::PASS) << v.summary();
  EXPECT_EQ(v.rule(), "p99_did_t_test");
  EXPECT_THAT(v.summary(), HasSubstr("over 3 canary racks vs 5 control racks"));
  EXPECT_EQ(v.dropped_hosts_size(), 0);
  ASSERT_GE(v.groups_size(), 2);
  EXPECT_EQ(v.groups(0).group(), "canary");
  EXPECT_EQ(v.groups(0).hosts(), 12u);
  EXPECT_EQ(v.groups(1).hosts(), 20u);
  // Every test's evidence keeps its name and says which design it used.
  for (const char* m :
       {"ln_p99_did", "ln_p999_did", "ln_throughput_gbps_did", "ln_pfc_pause_ratio_did",
        "ln_cnp_per_second_did", "ln_retransmits_per_second_did"}) {
    const v1::MetricEvidence* e = FindEvidence(v, m);
    ASSERT_NE(e, nullptr) << m;
    EXPECT_THAT(e->note(), StartsWith("design: rack-level, canary racks 3, control racks 5")) << m;
    EXPECT_EQ(e->rack_pairs(), 8u) << m;  // racks compared
  }
  const v1::MetricEvidence* p99 = FindEvidence(v, "ln_p99_did");
  EXPECT_THAT(p99->note(), HasSubstr("permutation p"));
  EXPECT_GT(p99->sd(), 0);
  EXPECT_GT(p99->ratio_upper(), p99->ratio());
  EXPECT_LT(p99->ratio_upper(), 1.2);
}

// The within-rack design's difference in differences and the rack-level one
// estimate the same thing: with one canary and one control host per rack,
// relabelling the racks as pure (each host its own rack) keeps mean(d).
TEST(JudgeRackLevelTest, RackLevelDidEqualsTheDifferenceOfGroupMeanShifts) {
  sim::SimConfig c = sim::RackLevelConfig(4, 4);
  c.canary_tail_scale = 1.1;
  auto hosts = FinalLook(c, 5);
  v1::Verdict v = Judge(hosts, FinalConfig());
  // By hand: per rack the mean over its hosts of ln p99 after - before.
  std::map<std::string, std::pair<bool, std::vector<double>>> racks;
  for (const HostInput& h : hosts) {
    auto& [canary, shifts] = racks[h.rack];
    canary = h.canary;
    shifts.push_back(std::log(h.after.rtt.Quantile(0.99)) - std::log(h.before.rtt.Quantile(0.99)));
  }
  double sum[2] = {0, 0};
  int n[2] = {0, 0};
  for (const auto& [name, rack] : racks) {
    double m = 0;
    for (double x : rack.second) m += x;
    sum[rack.first] += m / static_cast<double>(rack.second.size());
    n[rack.first]++;
  }
  ASSERT_EQ(n[0], 4);
  ASSERT_EQ(n[1], 4);
  EXPECT_NEAR(FindEvidence(v, "ln_p99_did")->mean(), sum[1] / n[1] - sum[0] / n[0], 1e-12);
}

TEST(JudgeRackLevelTest, MixedRacksKeepTheWithinRackDesignOnThoseRacksOnly) {
  // 8 racks with a canary and a control host each, plus 2 pure control racks.
  auto hosts = FinalLook(sim::SimConfig{}, 11);
  auto extra = FinalLook(sim::RackLevelConfig(1, 3), 12);
  for (HostInput& h : extra) {
    if (h.canary) continue;
    h.rack = "pure-" + h.rack;
    h.host_id = "pure-" + h.host_id;
    hosts.push_back(h);
  }
  v1::Verdict v = Judge(hosts, FinalConfig());
  EXPECT_EQ(v.outcome(), v1::Verdict::PASS) << v.summary();
  EXPECT_THAT(FindEvidence(v, "ln_p99_did")->note(),
              StartsWith("design: within-rack, rack pairs 8"));
  EXPECT_EQ(FindEvidence(v, "ln_p99_did")->rack_pairs(), 8u);
  EXPECT_EQ(v.dropped_hosts_size(), 12);  // the pure racks' hosts
  EXPECT_TRUE(AnyDropMentions(v, "has no canary host"));
}

// The design follows the hosts given, not those admitted: a mixed fleet whose
// control hosts are all thin does not turn rack-level.
TEST(JudgeRackLevelTest, ThinHostsDoNotSwitchTheDesign) {
  auto hosts = FinalLook(sim::SimConfig{}, 13);
  for (HostInput& h : hosts) {
    if (!h.canary) h.after.windows_present = 1;
  }
  v1::Verdict v = Judge(hosts, FinalConfig());
  EXPECT_EQ(v.outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(v.rule(), "min_rack_pairs");
  EXPECT_THAT(FindEvidence(v, "ln_p99_did")->note(), StartsWith("design: within-rack"));
}

// --- Minimum racks and thin data: HOLD, never PASS.

TEST(JudgeRackLevelTest, TooFewRacksHold) {
  struct Case {
    int canary_racks, control_racks;
  };
  // One canary rack; one control rack; 2 + 3 racks < min_rack_pairs (6).
  for (Case k : {Case{1, 7}, Case{7, 1}, Case{2, 3}}) {
    std::string what =
        "rack-level " + std::to_string(k.canary_racks) + " vs " + std::to_string(k.control_racks);
    v1::Verdict v = ExpectAlwaysHold(sim::RackLevelConfig(k.canary_racks, k.control_racks),
                                     sim::AllMetricsConfig(), what.c_str());
    EXPECT_EQ(v.rule(), "min_rack_pairs") << what;
    EXPECT_THAT(v.summary(), HasSubstr(std::to_string(k.canary_racks) + " canary racks vs " +
                                       std::to_string(k.control_racks) + " control racks"))
        << what;
    EXPECT_THAT(v.summary(), HasSubstr("at least 2 canary and 2 control racks, 6 in all"));
    EXPECT_EQ(FindEvidence(v, "ln_p99_did")->outcome(), "hold");
  }
  // The policy's min_rack_pairs counts racks in all: 8 racks hold at 9.
  JudgeConfig config = sim::AllMetricsConfig();
  config.guard.set_min_rack_pairs(9);
  v1::Verdict v = ExpectAlwaysHold(sim::RackLevelConfig(3, 5), config, "3 vs 5, 9 racks needed");
  EXPECT_EQ(v.rule(), "min_rack_pairs");
}

TEST(JudgeRackLevelTest, FewSamplesPerHostHold) {
  sim::SimConfig c = sim::RackLevelConfig(3, 5);
  c.probes_per_window = 10;  // ~300 per host and period
  v1::Verdict v = ExpectAlwaysHold(c, sim::AllMetricsConfig(), "rack-level, 300 probes per host");
  EXPECT_TRUE(AnyDropMentions(v, "probe RTTs"));
  EXPECT_EQ(FindEvidence(v, "ln_p99_did")->rack_pairs(), 0u);
}

TEST(JudgeRackLevelTest, NoBaselineOrMissingWindowsHold) {
  sim::SimConfig c = sim::RackLevelConfig(4, 4);
  c.windows_before = 0;
  v1::Verdict v = ExpectAlwaysHold(c, sim::AllMetricsConfig(), "rack-level, no baseline");
  EXPECT_TRUE(AnyDropMentions(v, "no baseline windows"));
  c = sim::RackLevelConfig(4, 4);
  c.present_share = 0.5;
  v = ExpectAlwaysHold(c, sim::AllMetricsConfig(), "rack-level, 50% windows missing");
  EXPECT_TRUE(AnyDropMentions(v, "windows present"));
}

// Thin hosts leave their rack; a rack keeps counting while it has one
// admitted host, and the group minimum then decides.
TEST(JudgeRackLevelTest, ThinHostsLeaveTheirRackAndTheMinimumDecides) {
  auto hosts = FinalLook(sim::RackLevelConfig(3, 5), 17);
  // Three of rack0's four hosts thin: rack0 still counts.
  int thinned = 0;
  for (HostInput& h : hosts) {
    if (h.rack == "rack0" && thinned < 3) {
      h.before.windows_present = 1;
      ++thinned;
    }
  }
  v1::Verdict v = Judge(hosts, FinalConfig());
  EXPECT_NE(v.rule(), "min_rack_pairs") << v.summary();
  EXPECT_EQ(v.dropped_hosts_size(), 3);
  EXPECT_EQ(FindEvidence(v, "ln_p99_did")->rack_pairs(), 8u);
  // Every host of rack0 and rack1 thin: one canary rack left, HOLD.
  for (HostInput& h : hosts) {
    if (h.rack == "rack0" || h.rack == "rack1") h.before.windows_present = 1;
  }
  v = Judge(hosts, FinalConfig());
  EXPECT_EQ(v.outcome(), v1::Verdict::HOLD);
  EXPECT_EQ(v.rule(), "min_rack_pairs");
  EXPECT_THAT(v.summary(), HasSubstr("1 canary racks vs 5 control racks"));
}

// --- Decisions with enough racks.

TEST(JudgeRackLevelTest, ThirtyPercentImprovementPassesAtTheFinalLook) {
  sim::SimConfig c = sim::RackLevelConfig(3, 5);
  c.canary_body_scale = 0.7;  // the whole distribution, p99 included, 30% lower
  int pass = 0, fail = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    auto looks = sim::SimulateLooks(c, seed);
    JudgeConfig config = sim::AllMetricsConfig();
    config.looks = static_cast<uint32_t>(looks.size());
    for (size_t l = 0; l < looks.size(); ++l) {
      config.look = static_cast<uint32_t>(l + 1);
      v1::Verdict v = Judge(looks[l], config);
      if (l + 1 < looks.size()) {
        EXPECT_NE(v.outcome(), v1::Verdict::PASS) << "seed " << seed << ": " << v.summary();
      } else if (v.outcome() == v1::Verdict::PASS) {
        ++pass;
        EXPECT_LT(FindEvidence(v, "ln_p99_did")->ratio(), 0.8) << v.summary();
      }
      if (v.outcome() == v1::Verdict::FAIL) ++fail;
    }
  }
  EXPECT_EQ(fail, 0);
  EXPECT_GE(pass, 39) << "of 40";
}

TEST(JudgeRackLevelTest, LargeRegressionFailsAtTheFirstLook) {
  sim::SimConfig c = sim::RackLevelConfig(4, 4);
  c.canary_body_scale = 2;
  auto looks = sim::SimulateLooks(c, 19);
  JudgeConfig config = sim::AllMetricsConfig();
  config.look = 1;
  config.looks = 3;
  v1::Verdict v = Judge(looks[0], config);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_EQ(v.rule(), "p99_did_t_test");
  EXPECT_THAT(v.summary(), HasSubstr("over 4 canary racks vs 4 control racks"));
  EXPECT_GT(FindEvidence(v, "ln_p99_did")->ratio_lower(), 1.2);
}

TEST(JudgeRackLevelTest, GuardMetricsUseTheSameDesign) {
  auto hosts = FinalLook(sim::RackLevelConfig(4, 4), 23);
  for (HostInput& h : hosts) {
    if (h.canary) h.after.cnp *= 3;
  }
  JudgeConfig config = FinalConfig();
  v1::Verdict v = Judge(hosts, config);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_EQ(v.rule(), "constraint:cnp_per_second");
  EXPECT_THAT(v.summary(), HasSubstr("over 4 canary racks vs 4 control racks"));
  const v1::MetricEvidence* cnp = FindEvidence(v, "ln_cnp_per_second_did");
  // x3 within the rack drift (sd 0.1 on ln rates; the DiD's sd is about 0.1).
  EXPECT_GT(cnp->ratio(), 2.2);
  EXPECT_LT(cnp->ratio(), 4.1);
  // The tuner's point check reads the same evidence.
  EXPECT_THAT(ConstraintPointExceeded(v, config.constraints), StartsWith("cnp_per_second"));
}

// --- Determinism: identical input, identical verdict, in any host order.

TEST(JudgeRackLevelTest, HostOrderDoesNotMatter) {
  sim::SimConfig c = sim::RackLevelConfig(3, 5);
  c.canary_tail_scale = 1.1;
  auto hosts = FinalLook(c, 29);
  JudgeConfig config = FinalConfig();
  std::string a, b;
  ASSERT_TRUE(Judge(hosts, config).SerializeToString(&a));
  std::mt19937_64 rng(7);
  for (int i = 0; i < 5; ++i) {
    std::shuffle(hosts.begin(), hosts.end(), rng);
    ASSERT_TRUE(Judge(hosts, config).SerializeToString(&b));
    EXPECT_EQ(a, b) << "shuffle " << i;
  }
}

}  // namespace
}  // namespace rocetune::controller
