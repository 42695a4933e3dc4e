#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/audit_view.h"
#include "cli/campaign_view.h"
#include "cli/change_view.h"
#include "google/protobuf/text_format.h"
#include "model/quantile_sketch.h"

namespace rocetune::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

template <typename T>
T Parse(const std::string& text) {
  T m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m)) << text;
  return m;
}

v1::Sketch Sketch(double lo, double hi) {
  QuantileSketch s;
  for (int i = 0; i < 200; ++i) s.Insert(lo + (hi - lo) * i / 199);
  return s.ToProto();
}

v1::Change SampleChange() {
  auto c = Parse<v1::Change>(R"pb(
    id: "c-7"
    policy_name: "incast"
    policy_version: "abcdef0123456789"
    state: STAGE
    stage: 2
    proposer: "alice"
    reason: "faster recovery"
    approvals_required: 1
    knobs { key: "rpg_ai_rate" value: 20 }
    approvals { approver: "bob" reason: "looks fine" authenticated: false }
    transitions { from: PROPOSED to: APPROVED actor: "bob" reason: "looks fine" }
    transitions { from: APPROVED to: CANARY actor: "controller" }
    hosts { host_id: "h1" role: CANARY stage: 0 pushed_version: "v2" acked_version: "v2" }
    hosts { host_id: "h2" role: CONTROL stage: 1 }
    hosts { host_id: "h3" role: REST stage: 1 pushed_version: "v3" rejected: "nack: bad value" }
    verdicts {
      outcome: FAIL
      stage: 0
      look: 2
      looks: 3
      rule: "p99_did_t_test"
      summary: "canary p99 18% worse than control"
      groups {
        group: "canary"
        hosts: 4
        samples: 4000
        p99_seconds: 24e-6
        p99_lower_seconds: 22e-6
        p99_upper_seconds: 26e-6
      }
      groups { group: "control" hosts: 4 samples: 3900 p99_seconds: 11e-6 }
      metrics {
        metric: "ln_p99_did"
        outcome: "fail"
        rack_pairs: 6
        mean: 0.166
        sd: 0.05
        t: 8.1
        p_value: 0.0002
        alpha: 0.001
        ratio: 1.18
        ratio_lower: 1.1
        ratio_upper: 1.27
      }
      dropped_hosts: "h9: no samples"
    }
  )pb");
  *c.mutable_verdicts(0)->mutable_groups(0)->mutable_rtt() = Sketch(18e-6, 30e-6);
  *c.mutable_verdicts(0)->mutable_groups(1)->mutable_rtt() = Sketch(9e-6, 12e-6);
  return c;
}

TEST(ChangeViewTest, ShowsStateTransitionsApprovalsAndHosts) {
  std::string out = RenderChange(SampleChange(), absl::Now());
  EXPECT_THAT(out, HasSubstr("c-7  STAGE 2"));
  EXPECT_THAT(out, HasSubstr("rpg_ai_rate=20"));
  EXPECT_THAT(out, HasSubstr("bob (unauthenticated)"));
  EXPECT_THAT(out, HasSubstr("approvals   1/1"));
  EXPECT_THAT(out, HasSubstr("PROPOSED"));
  EXPECT_THAT(out, HasSubstr("APPROVED"));
  EXPECT_THAT(out, HasSubstr("3 (canary 1, control 1, rest 1); pushed 2, acked 1, rejected 1"));
  EXPECT_THAT(out, HasSubstr("rejected on h3: nack: bad value"));
}

// Issue 25 item 8: a host that applied the change but where it cannot act.
TEST(ChangeViewTest, NamesTheHostsTheChangeIsNotInEffectOn) {
  v1::Change c = SampleChange();
  v1::ParameterNote* n = c.mutable_hosts(0)->add_not_in_effect();
  n->set_device("mlx5_0");
  n->set_parameter("rpg_ai_rate");
  n->set_reason("the DCQCN reaction point is off on every priority (rp_enable_mask 0x00)");
  EXPECT_THAT(RenderChange(c, absl::Now()),
              HasSubstr(absl::StrCat("not changed on ", c.hosts(0).host_id(),
                                     ": rpg_ai_rate on mlx5_0 is not in effect (the DCQCN "
                                     "reaction point is off on every priority (rp_enable_mask "
                                     "0x00))")));
}

TEST(ChangeViewTest, VerdictEvidenceNamesRuleGroupsAndMetrics) {
  std::string out = RenderVerdict(SampleChange().verdicts(0));
  EXPECT_THAT(out, HasSubstr("FAIL"));
  EXPECT_THAT(out, HasSubstr("look 2/3"));
  EXPECT_THAT(out, HasSubstr("rule p99_did_t_test"));
  EXPECT_THAT(out, HasSubstr("canary p99 18% worse"));
  EXPECT_THAT(out, HasSubstr("24.0us"));
  EXPECT_THAT(out, HasSubstr("[22.0us, 26.0us]"));
  EXPECT_THAT(out, HasSubstr("ln_p99_did"));
  EXPECT_THAT(out, HasSubstr("8.1"));     // t
  EXPECT_THAT(out, HasSubstr("0.0002"));  // p
  EXPECT_THAT(out, HasSubstr("[1.1, 1.27]"));
  EXPECT_THAT(out, HasSubstr("+18.0%"));
  EXPECT_THAT(out, HasSubstr("dropped: h9: no samples"));
}

TEST(ChangeViewTest, OneSidedIntervalsLooksPastThePlanAndLaterStagesOfControlRacks) {
  v1::Change c = SampleChange();
  v1::Verdict& v = *c.mutable_verdicts(0);
  v.mutable_metrics(0)->set_ratio_upper(0);  // one-sided: no upper bound
  v.set_look(5);                             // held past the three planned looks
  std::string out = RenderVerdict(v);
  EXPECT_THAT(out, HasSubstr("[1.1, inf]"));
  EXPECT_THAT(out, Not(HasSubstr(", 0]")));
  EXPECT_THAT(out, HasSubstr("look 5 (held past 3)"));
  EXPECT_THAT(out, Not(HasSubstr("5/3")));
  // h2 controls the canary stage and takes the change in stage 1 (rack
  // plans): stage 1 lists it beside h3.
  std::string change = RenderChange(c, absl::Now());
  EXPECT_THAT(change, HasSubstr("\n  1       2      1       0      1\n"));
}

TEST(ChangeViewTest, ARolledBackChangeCountsConfirmedRestoresAndNamesThePending) {
  v1::Change c = SampleChange();
  c.set_state(v1::ROLLED_BACK);
  // h1 acked its restore (v2), h3's restore (v3) is pending.
  std::string out = RenderChange(c, absl::Now());
  EXPECT_THAT(out, HasSubstr("restored    1 of 2 confirmed; pending: h3"));
  c.mutable_hosts(2)->set_acked_version("v3");
  EXPECT_THAT(RenderChange(c, absl::Now()), HasSubstr("restored    2 of 2 confirmed\n"));
  c.set_state(v1::DONE);
  EXPECT_THAT(RenderChange(c, absl::Now()), Not(HasSubstr("restored")));
  // Issue 25: an aborted change restores too, and a NACKed restore is failed,
  // not pending.
  c.set_state(v1::ABORTED);
  c.mutable_hosts(2)->set_acked_version("v2");
  c.mutable_hosts(2)->set_rejected("restore NACK: mlx5_0: write failed");
  EXPECT_THAT(RenderChange(c, absl::Now()),
              HasSubstr("restored    1 of 2 confirmed; failed: h3 (restore NACK: mlx5_0: write "
                        "failed)"));
}

TEST(ChangeViewTest, HistogramOfCanaryAndControl) {
  v1::Change c = SampleChange();
  std::string out = RenderChange(c, absl::Now());
  EXPECT_THAT(out, HasSubstr("canary vs control"));
  EXPECT_THAT(out, HasSubstr("canary (n=200)"));
  EXPECT_THAT(out, HasSubstr("control (n=200)"));
  // Without canary/control groups there is no histogram.
  c.mutable_verdicts(0)->clear_groups();
  EXPECT_EQ(RenderVerdictHistogram(c.verdicts(0)), "");
  EXPECT_THAT(RenderChange(c, absl::Now()), Not(HasSubstr("canary vs control")));
}

TEST(ChangeViewTest, RehearsalSideBySide) {
  auto r = Parse<v1::Rehearsal>(R"pb(
    scenario: "incast.textproto"
    regression: true
    current { probe_p99_seconds: 10e-6 throughput_gbps: 90 }
    proposed { probe_p99_seconds: 15e-6 throughput_gbps: 95 }
  )pb");
  std::string out = RenderRehearsal(r);
  EXPECT_THAT(out, HasSubstr("incast.textproto"));
  EXPECT_THAT(out, HasSubstr("10.0us"));
  EXPECT_THAT(out, HasSubstr("15.0us"));
  EXPECT_THAT(out, HasSubstr("+50.0%"));
  EXPECT_THAT(out, HasSubstr("REGRESSION"));
  // The job's own figures side by side, and the reason the rehearsal gives.
  auto job = Parse<v1::Rehearsal>(R"pb(
    scenario: "allreduce.textproto"
    regression: true
    regression_reason: "all-reduce step p99 +39.0% (beyond 5.0%)"
    current { probe_p99_seconds: 20e-6 step_time_seconds: 1e-3 incast_burst_seconds: 2e-3 }
    proposed { probe_p99_seconds: 10e-6 step_time_seconds: 1.39e-3 incast_burst_seconds: 2e-3 }
  )pb");
  out = RenderRehearsal(job);
  EXPECT_THAT(out, HasSubstr("all-reduce step p99"));
  EXPECT_THAT(out, HasSubstr("+39.0%"));
  EXPECT_THAT(out, HasSubstr("incast burst p99"));
  EXPECT_THAT(out, HasSubstr("REGRESSION predicted: all-reduce step p99 +39.0% (beyond 5.0%)"));
}

TEST(ChangeViewTest, ATrialNamesItsCampaignAndALongerBake) {
  auto c = Parse<v1::Change>(
      R"pb(
        id: "c-5" campaign_id: "t-1" trial: 5 canary_only: true bake_seconds: 12
      )pb");
  EXPECT_THAT(RenderChange(c, absl::Now()),
              HasSubstr("campaign    t-1 trial 5 (canary only), bake 12 s"));
  c.clear_bake_seconds();
  EXPECT_THAT(RenderChange(c, absl::Now()), Not(HasSubstr("bake")));
  // A campaign's promotion has no trial number.
  auto promo = Parse<v1::Change>(R"pb(id: "c-14" campaign_id: "t-1")pb");
  EXPECT_THAT(RenderChange(promo, absl::Now()), HasSubstr("campaign    t-1 (its promotion)\n"));
}

TEST(ChangeViewTest, ListShowsLastVerdictAndNextPage) {
  v1::ListChangesResponse r;
  *r.add_changes() = SampleChange();
  r.set_next_page_token("tok2");
  std::string out = RenderChangeList(r, absl::Now());
  EXPECT_THAT(out, HasSubstr("FAIL (p99_did_t_test)"));
  EXPECT_THAT(out, HasSubstr("more: --page=tok2"));
  EXPECT_EQ(RenderChangeList(v1::ListChangesResponse(), absl::Now()), "no changes\n");
  EXPECT_THAT(out, Not(HasSubstr("REASON")));
  std::string wide = RenderChangeList(r, absl::Now(), /*wide=*/true);
  EXPECT_THAT(wide, HasSubstr("APPROVERS"));
  EXPECT_THAT(wide, HasSubstr("incast@abcdef012345 "));
  EXPECT_THAT(wide, HasSubstr("  bob  "));
  EXPECT_THAT(wide, HasSubstr("faster recovery"));
}

TEST(AuditViewTest, ValuesOldToNewAndUnauthenticatedMarker) {
  auto r = Parse<v1::ListAuditResponse>(R"pb(
    entries {
      id: 12
      actor: "alice"
      action: "push"
      subject: "h1"
      reason: "lab"
      authenticated: false
      values {
        host_id: "h1"
        device: "mlx5_0"
        parameter: "rpg_ai_rate"
        old_value: "5"
        new_value: "20"
      }
      values { host_id: "h1" device: "mlx5_0" parameter: "rpg_min_rate" new_value: "1" }
    }
    entries { id: 11 actor: "ops" action: "approve" authenticated: true change_id: "c-1" }
    next_before_id: 11
  )pb");
  std::string out = RenderAudit(r);
  EXPECT_THAT(out, HasSubstr("alice (unauthenticated)"));
  EXPECT_THAT(out, Not(HasSubstr("ops (unauthenticated)")));
  EXPECT_THAT(out, HasSubstr("h1 mlx5_0 rpg_ai_rate: 5 -> 20"));
  EXPECT_THAT(out, HasSubstr("rpg_min_rate: (unset) -> 1"));
  EXPECT_THAT(out, HasSubstr("more: --page=11"));
  // Newest first as given: row 12 before row 11.
  EXPECT_LT(out.find("12 "), out.find("11 "));
}

TEST(AuditViewTest, SinceTakesDurationOrRfc3339) {
  absl::Time now = absl::FromUnixSeconds(1714564800);
  absl::StatusOr<int64_t> s = ParseSince("1h30m", now);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, absl::ToUnixNanos(now - absl::Minutes(90)));
  s = ParseSince("2024-05-01T10:00:00Z", now);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, int64_t{1714557600} * 1000000000);
  EXPECT_FALSE(ParseSince("yesterday", now).ok());
  EXPECT_FALSE(ParseSince("-5m", now).ok());
}

TEST(CampaignViewTest, TrialsTableMarksTheBest) {
  auto c = Parse<v1::Campaign>(R"pb(
    id: "t-1"
    policy_name: "incast"
    state: RUNNING
    trial_budget: 5
    best_objective_ratio: 0.9
    best { key: "rpg_ai_rate" value: 10 }
    trials {
      index: 1
      knobs { key: "rpg_ai_rate" value: 10 }
      outcome: "improved"
      objective_ratio: 0.9
      constraints { key: "throughput_gbps" value: 91.5 }
    }
    trials {
      index: 2
      knobs { key: "rpg_ai_rate" value: 15 }
      outcome: "not_improved"
      objective_ratio: 1.02
      objective_lower: 0.95
      objective_upper: 1.09
      min_improvement: 0.041
      own_shift_ratio: 0.81
      bake_seconds: 60
    }
    trials { index: 3 outcome: "hold" bake_seconds: 60 }
    trials { index: 4 retry_of: 3 outcome: "running" bake_seconds: 120 }
  )pb");
  std::string out = RenderCampaign(c, absl::Now());
  EXPECT_THAT(out, HasSubstr("t-1  RUNNING"));
  EXPECT_THAT(out, HasSubstr("trials      3 of 5 (and 1 retried with a longer bake)"));
  EXPECT_THAT(out, HasSubstr("* 1"));
  EXPECT_THAT(out, Not(HasSubstr("* 2")));
  EXPECT_THAT(out, HasSubstr("0.900"));
  EXPECT_THAT(out, HasSubstr("throughput_gbps=91.5"));
  EXPECT_THAT(out, HasSubstr("best so far"));
  // The drift-corrected estimate with its interval, the bar it had to clear,
  // the canary's own shift beside it, the bake, and a retry named as one.
  EXPECT_THAT(out, HasSubstr("1.020 [0.95, 1.09]"));
  EXPECT_THAT(out, HasSubstr("4.1%"));
  EXPECT_THAT(out, HasSubstr("0.810"));
  EXPECT_THAT(out, HasSubstr("120s"));
  EXPECT_THAT(out, HasSubstr("running (retry of 3)"));
  EXPECT_THAT(out, HasSubstr("not drift-corrected, not scored"));
  // No winner confirmed yet: only the search's estimate.
  EXPECT_THAT(out, HasSubstr("search      0.900 (trial 1;"));
  EXPECT_THAT(out, Not(HasSubstr("\nconfirmation ")));
}

// Issue 24 item 4: `campaign show` prints the search's estimate of the winner
// and the confirmation's, and a confirmation counts neither against the
// budget nor as the best trial.
TEST(CampaignViewTest, ShowsTheSearchEstimateAndTheConfirmedOne) {
  auto c = Parse<v1::Campaign>(R"pb(
    id: "t-2"
    policy_name: "incast"
    state: FINISHED
    trial_budget: 4
    best_objective_ratio: 0.62
    best { key: "rpg_ai_rate" value: 10 }
    trials {
      index: 1
      knobs { key: "rpg_ai_rate" value: 10 }
      outcome: "improved"
      objective_ratio: 0.62
      objective_lower: 0.5
      objective_upper: 0.77
    }
    trials {
      index: 2
      knobs { key: "rpg_ai_rate" value: 15 }
      outcome: "not_improved"
      objective_ratio: 0.98
    }
    trials {
      index: 3
      knobs { key: "rpg_ai_rate" value: 10 }
      confirms: 1
      outcome: "confirmed"
      objective_ratio: 0.71
      objective_lower: 0.64
      objective_upper: 0.79
      canary_hosts: 4
      fresh_canary_hosts: 3
    }
    promotion_change_id: "c-9"
  )pb");
  std::string out = RenderCampaign(c, absl::Now());
  EXPECT_THAT(out, HasSubstr("trials      2 of 4 (and 1 confirmation)"));
  EXPECT_THAT(out, HasSubstr("search      0.620 [0.50, 0.77] (trial 1;"));
  EXPECT_THAT(out, HasSubstr("confirmation 0.710 [0.64, 0.79] (trial 3, confirmed; 4 canary "
                             "members, 3 of them fresh)"));
  EXPECT_THAT(out, Not(HasSubstr("not confirmed")));
  // Not confirmed: the best values are marked, and the list counts the
  // budgeted trials only.
  c.mutable_trials(2)->set_outcome("not_confirmed");
  EXPECT_THAT(RenderCampaign(c, absl::Now()), HasSubstr("objective ratio 0.620  (not confirmed)"));
  v1::ListCampaignsResponse list;
  *list.add_campaigns() = c;
  EXPECT_THAT(RenderCampaignList(list, absl::Now()), HasSubstr(" 2/4 "));
  EXPECT_THAT(out, HasSubstr("confirmed (confirms 1)"));
  EXPECT_THAT(out, HasSubstr("* 1"));
  EXPECT_THAT(out, Not(HasSubstr("* 3")));
}

}  // namespace
}  // namespace rocetune::cli
