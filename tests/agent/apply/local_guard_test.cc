#include "agent/apply/local_guard.h"

#include <stdlib.h>

#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "agent/host/ofed_sysfs_cc_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

using ::rocetune::testing::FixtureTree;
using ::testing::HasSubstr;

v1::CounterSample Sample(const std::string& name, int prio, double rate) {
  v1::CounterSample s;
  s.set_device("mlx5_0");
  s.set_port(1);
  s.set_priority(prio);
  s.set_name(name);
  s.set_rate_per_second(rate);
  s.set_delta(static_cast<uint64_t>(rate));
  return s;
}

// One sampler round, as the agent hands it to the guard.
google::protobuf::RepeatedPtrField<v1::CounterSample> Round(
    std::initializer_list<v1::CounterSample> samples) {
  return {samples.begin(), samples.end()};
}

class LocalGuardTest : public ::testing::Test {
 protected:
  LocalGuardTest() {
    options_.window = absl::Minutes(5);
    options_.max_pfc_pause_ratio = 0.2;
    options_.max_cnp_rate_per_second = 100000;
    options_.rounds_over = 1;
  }
  void SetUp() override {
    // Baseline (firmware defaults) is last-known-good; then v2 is applied.
    ASSERT_TRUE(journal_.Save("baseline", applier_.ReadCurrent()).ok());
    v1::ParameterSet set;
    v1::DeviceParameters* d = set.add_devices();
    d->set_device("mlx5_0");
    (*d->mutable_dcqcn())["rpg_ai_rate"] = 40;
    (*d->mutable_dcqcn())["min_time_between_cnps"] = 0;
    absl::StatusOr<ApplyResult> r = applier_.Apply(set);
    ASSERT_TRUE(r.ok()) << r.status();
    applied_ = r->applied;
    ASSERT_EQ(FixtureTree::ReadFile(RpAi()), "40\n");
  }
  // One round that began a second ago (after any Arm() before that) and ends now.
  std::optional<v1::GuardEvent> Feed(
      LocalGuard& guard, const google::protobuf::RepeatedPtrField<v1::CounterSample>& r) {
    const absl::Duration start = clock_.Monotonic();
    clock_.Advance(absl::Seconds(1));
    return guard.Observe(r, start, clock_.Monotonic());
  }
  std::string RpAi() const { return tree_.sys() + "/class/net/ens1f0np0/ecn/roce_rp/rpg_ai_rate"; }

  FixtureTree tree_{"mlx5_ofed"};
  OfedSysfsCcStore store_{tree_.sys()};
  Applier applier_{{{"mlx5_0", {&store_, nullptr, "ens1f0np0"}}}};
  LkgJournal journal_{tree_.root() + "/state"};
  FakeClock clock_;
  LocalGuardOptions options_;
  v1::ParameterSet applied_;
};

TEST_F(LocalGuardTest, PauseStormRestoresLastKnownGood) {
  LocalGuard guard(options_, &clock_, &applier_, &journal_);
  guard.Arm("v2", applied_);
  clock_.Advance(absl::Seconds(10));
  EXPECT_FALSE(Feed(guard, Round({Sample("rx_pfc_pause_duration_us", 3, 150000)})).has_value());
  clock_.Advance(absl::Seconds(2));
  std::optional<v1::GuardEvent> e = Feed(
      guard, Round({Sample("cnp_handled", -1, 10), Sample("tx_pfc_pause_duration_us", 3, 450000)}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind(), "pfc_pause_guard");
  EXPECT_EQ(e->restored_version(), "baseline");
  EXPECT_EQ(e->unix_nanos(), absl::ToUnixNanos(clock_.Now()));
  EXPECT_THAT(e->detail(), HasSubstr("mlx5_0 port 1 priority 3 tx_pfc_pause_duration_us"));
  EXPECT_THAT(e->detail(), HasSubstr("45.0% of the time > 20.0%"));
  EXPECT_THAT(e->detail(), HasSubstr("14s after applying version v2"));
  EXPECT_EQ(FixtureTree::ReadFile(RpAi()), "5\n");
  EXPECT_FALSE(guard.armed());
  EXPECT_EQ(journal_.Get()->version, "baseline");
  // Disarmed: further storms do nothing.
  EXPECT_FALSE(Feed(guard, Round({Sample("tx_pfc_pause_duration_us", 3, 900000)})).has_value());
}

TEST_F(LocalGuardTest, CnpRateRestoresLastKnownGood) {
  LocalGuard guard(options_, &clock_, &applier_, &journal_);
  guard.Arm("v2", applied_);
  std::optional<v1::GuardEvent> e = Feed(guard, Round({Sample("cnp_sent", -1, 250000)}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind(), "cnp_rate_guard");
  EXPECT_THAT(e->detail(), HasSubstr("cnp_sent: 250000/s > 100000/s"));
  EXPECT_EQ(FixtureTree::ReadFile(RpAi()), "5\n");
}

TEST_F(LocalGuardTest, CleanWindowPromotesTheSet) {
  LocalGuard guard(options_, &clock_, &applier_, &journal_);
  EXPECT_FALSE(Feed(guard, Round({Sample("cnp_sent", -1, 1e9)})).has_value());  // not armed
  guard.Arm("v2", applied_);
  EXPECT_TRUE(guard.armed());
  clock_.Advance(absl::Minutes(4));
  EXPECT_FALSE(Feed(guard, Round({Sample("cnp_sent", -1, 50000)})).has_value());
  EXPECT_EQ(journal_.Get()->version, "baseline");
  clock_.Advance(absl::Minutes(2));
  EXPECT_FALSE(Feed(guard, Round({Sample("cnp_sent", -1, 1e9)})).has_value());
  EXPECT_FALSE(guard.armed());
  EXPECT_EQ(FixtureTree::ReadFile(RpAi()), "40\n");
  LkgJournal reloaded(tree_.root() + "/state");
  ASSERT_TRUE(reloaded.Load().ok());
  ASSERT_TRUE(reloaded.Get().has_value());
  EXPECT_EQ(reloaded.Get()->version, "v2");
  EXPECT_TRUE(reloaded.Drift(applier_.ReadCurrent()).empty());
}

// Issue 25 item 2: a change's set is provisional until the change is DONE.
// Its window passing clean does not make it last-known-good; the controller's
// confirmation (the same version armed again as final) does, at once.
TEST_F(LocalGuardTest, AProvisionalSetBecomesLastKnownGoodOnlyWhenConfirmed) {
  LocalGuard guard(options_, &clock_, &applier_, &journal_);
  guard.Arm("v2", applied_, 0, /*provisional=*/true);
  clock_.Advance(absl::Minutes(6));
  EXPECT_FALSE(Feed(guard, Round({Sample("cnp_sent", -1, 50000)})).has_value());
  EXPECT_FALSE(guard.armed());
  EXPECT_TRUE(guard.awaiting_confirm());
  EXPECT_EQ(journal_.Get()->version, "baseline");
  clock_.Advance(absl::Minutes(30));
  EXPECT_FALSE(Feed(guard, Round({Sample("cnp_sent", -1, 50000)})).has_value());
  EXPECT_EQ(journal_.Get()->version, "baseline") << "no window promotes a provisional set";
  // A re-push of the same provisional version (a reconnect) confirms nothing.
  guard.Arm("v2", applied_, 0, /*provisional=*/true);
  EXPECT_EQ(journal_.Get()->version, "baseline");
  guard.Arm("v2", applied_, 0, /*provisional=*/false);
  EXPECT_FALSE(guard.awaiting_confirm());
  EXPECT_EQ(journal_.Get()->version, "v2");
}

TEST_F(LocalGuardTest, AProvisionalSetConfirmedInsideItsWindowIsSavedWhenTheWindowPasses) {
  LocalGuard guard(options_, &clock_, &applier_, &journal_);
  guard.Arm("v2", applied_, 0, /*provisional=*/true);
  clock_.Advance(absl::Minutes(1));
  guard.Arm("v2", applied_, 0, /*provisional=*/false);  // confirmed, window not over
  EXPECT_TRUE(guard.armed());
  EXPECT_EQ(journal_.Get()->version, "baseline");
  clock_.Advance(absl::Minutes(5));
  EXPECT_FALSE(Feed(guard, Round({Sample("cnp_sent", -1, 50000)})).has_value());
  EXPECT_EQ(journal_.Get()->version, "v2");
}

TEST_F(LocalGuardTest, AnotherVersionOrAbandonDropsAProvisionalSetAwaitingConfirmation) {
  LocalGuard guard(options_, &clock_, &applier_, &journal_);
  guard.Arm("v2", applied_, 0, /*provisional=*/true);
  clock_.Advance(absl::Minutes(6));
  EXPECT_FALSE(Feed(guard, Round({Sample("cnp_sent", -1, 50000)})).has_value());
  ASSERT_TRUE(guard.awaiting_confirm());
  guard.Abandon();
  EXPECT_FALSE(guard.awaiting_confirm());
  guard.Arm("v2", applied_, 0, /*provisional=*/false);  // a fresh window, not a confirmation
  EXPECT_TRUE(guard.armed());
  EXPECT_EQ(journal_.Get()->version, "baseline");
  // Another version while one awaits its confirmation: the waiting set is
  // dropped, the new one judged on its own window.
  guard.Arm("v3", applied_, 0, /*provisional=*/true);
  clock_.Advance(absl::Minutes(6));
  EXPECT_FALSE(Feed(guard, Round({Sample("cnp_sent", -1, 50000)})).has_value());
  ASSERT_TRUE(guard.awaiting_confirm());
  guard.Arm("v4", applied_, 0, /*provisional=*/false);
  EXPECT_FALSE(guard.awaiting_confirm());
  EXPECT_TRUE(guard.armed());
  guard.Arm("v3", applied_, 0, /*provisional=*/false);  // a late confirmation of v3: a new window
  EXPECT_EQ(journal_.Get()->version, "baseline");
  clock_.Advance(absl::Minutes(6));
  EXPECT_FALSE(Feed(guard, Round({Sample("cnp_sent", -1, 50000)})).has_value());
  EXPECT_EQ(journal_.Get()->version, "v3");
}

TEST_F(LocalGuardTest, NoLastKnownGoodStillReports) {
  LkgJournal empty(tree_.root() + "/empty_state");
  LocalGuard guard(options_, &clock_, &applier_, &empty);
  guard.Arm("v2", applied_);
  std::optional<v1::GuardEvent> e = Feed(guard, Round({Sample("cnp_handled", -1, 2e5)}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->restored_version(), "");
  EXPECT_THAT(e->detail(), HasSubstr("nothing restored"));
  EXPECT_EQ(FixtureTree::ReadFile(RpAi()), "40\n");
}

TEST_F(LocalGuardTest, DisabledThresholdsNeverTrip) {
  options_.max_pfc_pause_ratio = 0;
  options_.max_cnp_rate_per_second = 0;
  LocalGuard guard(options_, &clock_, &applier_, &journal_);
  guard.Arm("v2", applied_);
  EXPECT_FALSE(Feed(guard, Round({Sample("rx_pfc_pause_duration_us", 3, 1e6),
                                  Sample("cnp_handled", -1, 1e9)}))
                   .has_value());
  EXPECT_TRUE(guard.armed());
}

TEST_F(LocalGuardTest, TheEventNamesTheVersionItJudged) {
  LocalGuard guard(options_, &clock_, &applier_, &journal_);
  guard.Arm("v2", applied_);
  std::optional<v1::GuardEvent> e = Feed(guard, Round({Sample("cnp_sent", -1, 250000)}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->judged_version(), "v2");
}

// The apply runs while a sampler round is in flight: that round's counts are
// (partly) the old set's traffic and must not roll the new one back.
TEST_F(LocalGuardTest, ARoundThatBeganBeforeTheApplyIsNotJudged) {
  LocalGuard guard(options_, &clock_, &applier_, &journal_);
  const absl::Duration round_start = clock_.Monotonic();
  clock_.Advance(absl::Milliseconds(400));
  guard.Arm("v2", applied_);
  clock_.Advance(absl::Milliseconds(600));
  EXPECT_FALSE(guard
                   .Observe(Round({Sample("tx_pfc_pause_duration_us", 3, 900000)}), round_start,
                            clock_.Monotonic())
                   .has_value());
  EXPECT_TRUE(guard.armed());
  EXPECT_EQ(FixtureTree::ReadFile(RpAi()), "40\n");
  // The next round began after the apply: judged.
  std::optional<v1::GuardEvent> e =
      Feed(guard, Round({Sample("tx_pfc_pause_duration_us", 3, 900000)}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(FixtureTree::ReadFile(RpAi()), "5\n");
}

// A host that was pausing 30% of the time before the apply is judged on what
// the apply changed: 35% is not the new set's doing, 45% is.
TEST_F(LocalGuardTest, AHostAlreadyOverTheLimitIsJudgedOnItsRise) {
  LocalGuard guard(options_, &clock_, &applier_, &journal_);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(Feed(guard, Round({Sample("rx_pfc_pause_duration_us", 3, 300000)})).has_value());
  }
  guard.Arm("v2", applied_);
  EXPECT_FALSE(Feed(guard, Round({Sample("rx_pfc_pause_duration_us", 3, 350000)})).has_value());
  EXPECT_TRUE(guard.armed());
  std::optional<v1::GuardEvent> e =
      Feed(guard, Round({Sample("rx_pfc_pause_duration_us", 3, 450000)}));
  ASSERT_TRUE(e.has_value());
  EXPECT_THAT(e->detail(), HasSubstr("paused 45.0% of the time > 20.0% (30.0% before the apply)"));
  // Another priority, quiet before, is held to the plain limit.
  guard.Arm("v3", applied_);
  EXPECT_TRUE(Feed(guard, Round({Sample("rx_pfc_pause_duration_us", 4, 250000)})).has_value());
}

// k of the last k + 1 judged rounds over a limit trip the guard: one calm
// round does not reset the count, so an on/off storm trips too.
TEST_F(LocalGuardTest, TripsWhenKOfTheLastKPlusOneRoundsAreOver) {
  options_.rounds_over = 2;
  LocalGuard guard(options_, &clock_, &applier_, &journal_);
  guard.Arm("v2", applied_, /*rounds=*/3);  // the set's own setting wins over the options
  const auto storm = Round({Sample("cnp_sent", -1, 250000)});
  const auto calm = Round({Sample("cnp_sent", -1, 10)});
  EXPECT_FALSE(Feed(guard, storm).has_value());          // 1 of 1
  EXPECT_FALSE(Feed(guard, calm).has_value());           // 1 of 2
  EXPECT_FALSE(Feed(guard, calm).has_value());           // 1 of 3
  EXPECT_FALSE(Feed(guard, storm).has_value());          // 2 of 4
  EXPECT_FALSE(Feed(guard, storm).has_value());          // 2 of the last 4 (the first aged out)
  std::optional<v1::GuardEvent> e = Feed(guard, storm);  // 3 of the last 4
  ASSERT_TRUE(e.has_value());
  EXPECT_THAT(e->detail(), HasSubstr("over in 3 of the last 4 rounds"));
  // Without a set's own setting, the options' 2 of 3: on, off, on trips.
  guard.Arm("v3", applied_);
  EXPECT_FALSE(Feed(guard, storm).has_value());
  EXPECT_FALSE(Feed(guard, calm).has_value());
  EXPECT_TRUE(Feed(guard, storm).has_value());
}

// A reconnect or a drift correction re-pushes the version on probation: the
// agent applies it again, and the guard keeps its window, its count and its
// baseline (the set's own storm is not its baseline).
TEST_F(LocalGuardTest, ArmingTheSameVersionAgainKeepsItsWindowAndCount) {
  options_.rounds_over = 2;
  LocalGuard guard(options_, &clock_, &applier_, &journal_);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(Feed(guard, Round({Sample("rx_pfc_pause_duration_us", 3, 0)})).has_value());
  }
  guard.Arm("v2", applied_);
  const auto storm = Round({Sample("rx_pfc_pause_duration_us", 3, 450000)});
  EXPECT_FALSE(Feed(guard, storm).has_value());
  clock_.Advance(absl::Minutes(4));
  guard.Arm("v2", applied_);
  std::optional<v1::GuardEvent> e = Feed(guard, storm);
  ASSERT_TRUE(e.has_value());
  EXPECT_THAT(e->detail(), HasSubstr("(0.0% before the apply)"));
  EXPECT_THAT(e->detail(), HasSubstr("4m2s after applying version v2"));
}

// A window that ends while rounds over the limit are in the count is not
// promoted to last-known-good: judging goes on until the guard trips or the
// over rounds age out.
TEST_F(LocalGuardTest, AWindowEndingMidCountDoesNotPromote) {
  options_.rounds_over = 2;
  LocalGuard guard(options_, &clock_, &applier_, &journal_);
  guard.Arm("v2", applied_);
  const auto storm = Round({Sample("cnp_handled", -1, 250000)});
  const auto calm = Round({Sample("cnp_handled", -1, 10)});
  clock_.Advance(absl::Minutes(5) - absl::Seconds(2));
  EXPECT_FALSE(Feed(guard, storm).has_value());  // 1 of 1, just inside the window
  EXPECT_FALSE(Feed(guard, calm).has_value());   // past the window, 1 of 2: judged
  EXPECT_TRUE(guard.armed());
  EXPECT_EQ(journal_.Get()->version, "baseline");
  EXPECT_TRUE(Feed(guard, storm).has_value());  // 2 of 3
  EXPECT_EQ(journal_.Get()->version, "baseline");
  // Clean rounds past the window: the over rounds age out, then it is promoted.
  guard.Arm("v3", applied_);
  clock_.Advance(absl::Minutes(5) - absl::Seconds(2));
  EXPECT_FALSE(Feed(guard, storm).has_value());
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(Feed(guard, calm).has_value());
  EXPECT_FALSE(guard.armed());
  EXPECT_EQ(journal_.Get()->version, "v3");
}

}  // namespace
}  // namespace rocetune
