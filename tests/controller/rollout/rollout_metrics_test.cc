#include "controller/rollout/rollout_metrics.h"

#include <cmath>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace rocetune::controller {
namespace {

// name{label=value,...} -> value.
std::map<std::string, double> Scrape(prometheus::Registry& r) {
  std::map<std::string, double> out;
  for (const auto& fam : r.Collect()) {
    for (const auto& m : fam.metric) {
      std::string key = fam.name + "{";
      for (const auto& l : m.label) key += l.name + "=" + l.value + ",";
      key += "}";
      out[key] = fam.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return out;
}

v1::Change MakeChange(const std::string& id, v1::ChangeState state, int64_t step_started) {
  v1::Change c;
  c.set_id(id);
  c.set_state(state);
  c.set_step_started_unix_nanos(step_started);
  return c;
}

TEST(RolloutMetricsTest, CountersStartAtZeroForEveryLabel) {
  prometheus::Registry r;
  RolloutMetrics m(r);
  auto s = Scrape(r);
  for (const char* state :
       {"PROPOSED", "APPROVED", "CANARY", "STAGE", "DONE", "REJECTED", "ROLLED_BACK", "ABORTED"}) {
    EXPECT_EQ(s.at(std::string("rocetune_controller_changes{state=") + state + ",}"), 0);
    EXPECT_EQ(
        s.at(std::string("rocetune_controller_change_transitions_total{to_state=") + state + ",}"),
        0);
  }
  // Every reason, lease_expired included: an alert on increase() misses a
  // series whose first sample is already 1.
  for (const char* reason : {"judge_fail", "nack", "guard", "manual", "hold_timeout", "restart",
                             "fabric_regression", "fleet_guard", "lease_expired"}) {
    EXPECT_EQ(
        s.at(std::string("rocetune_controller_changes_rolled_back_total{reason=") + reason + ",}"),
        0);
  }
  EXPECT_EQ(s.at("rocetune_controller_judge_verdicts_total{verdict=HOLD,}"), 0);
  EXPECT_EQ(s.at("rocetune_controller_change_hold_seconds{}"), 0);
}

TEST(RolloutMetricsTest, RecordsTransitionsRollbacksVerdictsAndTrials) {
  prometheus::Registry r;
  RolloutMetrics m(r);
  m.RecordTransition(v1::CANARY);
  m.RecordTransition(v1::CANARY);
  m.RecordTransition(v1::CHANGE_STATE_UNSPECIFIED);  // ignored
  m.RecordRollback(RollbackReasonForRule("p99_did_t_test"));
  m.RecordRollback(RollbackReasonForRule("nack"));
  m.RecordRollback(RollbackReasonForRule("local_guard"));
  m.RecordRollback(RollbackReasonForRule("fabric_regression"));
  m.RecordRollback(RollbackReasonForRule("fleet_constraint"));
  m.RecordRollback(RollbackReasonForRule("fleet_p99"));
  m.RecordRollback(RollbackReason::kHoldTimeout);
  v1::Verdict v;
  v.set_outcome(v1::Verdict::HOLD);
  v.set_rule("thin_data");
  m.RecordVerdict(v);
  v.set_outcome(v1::Verdict::FAIL);
  v.set_rule("p99_did_t_test");
  m.RecordVerdict(v);
  m.RecordTrial("improved");
  m.RecordTrial("fail");
  m.RecordTrial("fail");
  auto s = Scrape(r);
  EXPECT_EQ(s["rocetune_controller_change_transitions_total{to_state=CANARY,}"], 2);
  EXPECT_EQ(s["rocetune_controller_changes_rolled_back_total{reason=judge_fail,}"], 1);
  EXPECT_EQ(s["rocetune_controller_changes_rolled_back_total{reason=nack,}"], 1);
  EXPECT_EQ(s["rocetune_controller_changes_rolled_back_total{reason=guard,}"], 1);
  EXPECT_EQ(s["rocetune_controller_changes_rolled_back_total{reason=fabric_regression,}"], 1);
  EXPECT_EQ(s["rocetune_controller_changes_rolled_back_total{reason=fleet_guard,}"], 2);
  EXPECT_EQ(s["rocetune_controller_changes_rolled_back_total{reason=hold_timeout,}"], 1);
  EXPECT_EQ(s["rocetune_controller_judge_verdicts_total{verdict=HOLD,}"], 1);
  EXPECT_EQ(s["rocetune_controller_judge_verdicts_total{verdict=FAIL,}"], 1);
  EXPECT_EQ(s["rocetune_controller_campaign_trials_total{outcome=fail,}"], 2);
  EXPECT_EQ(s["rocetune_controller_campaign_trials_total{outcome=improved,}"], 1);
}

TEST(RolloutMetricsTest, RefreshFollowsTheActiveChange) {
  prometheus::Registry r;
  RolloutMetrics m(r);
  const absl::Time now = absl::FromUnixSeconds(1'700'000'100);
  std::map<std::string, v1::Change> changes;
  changes["c-1"] = MakeChange("c-1", v1::DONE, 1);
  changes["c-2"] = MakeChange("c-2", v1::CANARY, absl::ToUnixNanos(now - absl::Seconds(30)));
  changes["c-3"] = MakeChange("c-3", v1::PROPOSED, 0);
  v1::Change& active = changes["c-2"];
  active.set_hold_since_unix_nanos(absl::ToUnixNanos(now - absl::Seconds(12)));
  v1::Verdict* v = active.add_verdicts();
  for (const auto& [group, p99] : std::map<std::string, double>{{"canary", 2e-5},
                                                                {"control", 1.5e-5},
                                                                {"canary_baseline", 1.4e-5},
                                                                {"control_baseline", 0}}) {
    v1::GroupEvidence* g = v->add_groups();
    g->set_group(group);
    g->set_p99_seconds(p99);
    g->set_samples(p99 > 0 ? 1000 : 0);
  }
  m.Refresh(changes, now);
  auto s = Scrape(r);
  EXPECT_EQ(s["rocetune_controller_changes{state=DONE,}"], 1);
  EXPECT_EQ(s["rocetune_controller_changes{state=CANARY,}"], 1);
  EXPECT_EQ(s["rocetune_controller_changes{state=PROPOSED,}"], 1);
  EXPECT_EQ(s["rocetune_controller_changes{state=STAGE,}"], 0);
  EXPECT_EQ(s["rocetune_controller_active_change{change=c-2,state=CANARY,}"], 1);
  EXPECT_EQ(s.count("rocetune_controller_active_change{change=c-1,state=DONE,}"), 0u);
  EXPECT_DOUBLE_EQ(s["rocetune_controller_change_hold_seconds{}"], 12);
  EXPECT_DOUBLE_EQ(s["rocetune_controller_change_p99_seconds{group=canary,period=bake,}"], 2e-5);
  EXPECT_DOUBLE_EQ(s["rocetune_controller_change_p99_seconds{group=canary,period=baseline,}"],
                   1.4e-5);
  EXPECT_TRUE(
      std::isnan(s["rocetune_controller_change_p99_seconds{group=control,period=baseline,}"]));

  // The change moves to STAGE, then ends: its series follow, then go.
  active.set_state(v1::STAGE);
  active.set_hold_since_unix_nanos(0);
  m.Refresh(changes, now);
  s = Scrape(r);
  EXPECT_EQ(s.count("rocetune_controller_active_change{change=c-2,state=CANARY,}"), 0u);
  EXPECT_EQ(s["rocetune_controller_active_change{change=c-2,state=STAGE,}"], 1);
  EXPECT_EQ(s["rocetune_controller_change_hold_seconds{}"], 0);
  active.set_state(v1::ROLLED_BACK);
  m.Refresh(changes, now);
  s = Scrape(r);
  for (const auto& [key, value] : s) {
    EXPECT_EQ(key.find("rocetune_controller_active_change"), std::string::npos) << key;
    EXPECT_EQ(key.find("rocetune_controller_change_p99_seconds"), std::string::npos) << key;
  }
  EXPECT_EQ(s["rocetune_controller_changes{state=ROLLED_BACK,}"], 1);
  EXPECT_EQ(s["rocetune_controller_changes{state=CANARY,}"], 0);
}

}  // namespace
}  // namespace rocetune::controller
