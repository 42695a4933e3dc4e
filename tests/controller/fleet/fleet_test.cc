#include "controller/fleet/fleet.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "controller/control_loop.h"
#include "controller/store/store.h"
#include "daemon/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/controller/controller_test_util.h"
#include "tests/controller/fake_agent.h"

namespace rocetune::controller {
namespace {

using ::testing::HasSubstr;

using testing::FakeAgent;

class RecordingSubscriber : public EventSubscriber {
 public:
  void OnEvent(const v1::Event& e) override { kinds.push_back(e.kind() + ":" + e.subject()); }
  std::vector<std::string> kinds;
};

v1::Hello MakeHello(const std::string& id, const std::string& rack = "r1") {
  v1::Hello h;
  h.set_host_id(id);
  (*h.mutable_labels())["rack"] = rack;
  return h;
}

v1::ParameterSet Params(int64_t v) {
  v1::ParameterSet p;
  (*p.add_devices()->mutable_dcqcn())["rpg_ai_rate"] = v;
  p.mutable_devices(0)->set_device("mlx5_0");
  return p;
}

class FleetTest : public ::testing::Test {
 protected:
  FleetTest()
      : telemetry_(TelemetryOptions{}),
        fleet_(&clock_, &telemetry_, nullptr, &events_, FleetOptions{}) {
    events_.Subscribe(sub_);
  }
  FakeClock clock_;
  TelemetryStore telemetry_;
  EventBus events_;
  std::shared_ptr<RecordingSubscriber> sub_ = std::make_shared<RecordingSubscriber>();
  Fleet fleet_;
};

TEST_F(FleetTest, HelloValidation) {
  auto c = std::make_shared<FakeAgent>(1);
  EXPECT_EQ(fleet_.Register(MakeHello(""), c).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fleet_.Register(MakeHello("has space"), c).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const std::string& id : std::vector<std::string>{"../../etc/passwd", std::string(254, 'a'),
                                                        std::string(900000, 'x')}) {
    auto r = fleet_.Register(MakeHello(id), c);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << id.substr(0, 20);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("hello.host_id: host id"));
    EXPECT_LT(r.status().message().size(), 500u);
  }
  v1::Hello bad_label = MakeHello("h1");
  (*bad_label.mutable_labels())[""] = "x";
  auto s = fleet_.Register(bad_label, c);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("labels"));
  EXPECT_TRUE(fleet_.ListHosts({}).empty());
  EXPECT_TRUE(sub_->kinds.empty());
}

TEST_F(FleetTest, NewerStreamSupersedesOlderAndOlderUnregisterIsIgnored) {
  auto a = std::make_shared<FakeAgent>(1);
  auto b = std::make_shared<FakeAgent>(2);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), a).ok());
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), b).ok());
  ASSERT_TRUE(a->closed().has_value());
  EXPECT_EQ(a->closed()->code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(b->closed().has_value());
  fleet_.Unregister("h1", 1);  // the old stream ending must not unregister the new one
  EXPECT_EQ(fleet_.GetHost("h1")->state(), v1::HOST_CONNECTED);
  fleet_.Unregister("h1", 2);
  EXPECT_EQ(fleet_.GetHost("h1")->state(), v1::HOST_GONE);
}

TEST_F(FleetTest, AStreamSupersedesOnceThenTwinsAreRefused) {
  auto a = std::make_shared<FakeAgent>(1);
  auto b = std::make_shared<FakeAgent>(2);
  auto c = std::make_shared<FakeAgent>(3);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), a).ok());
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), b).ok());  // a reconnect: supersedes a
  ASSERT_TRUE(a->closed().has_value());
  // a's agent comes back while b reports: two agents share h1's identity.
  absl::StatusOr<Registration> again = fleet_.Register(MakeHello("h1"), c);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(b->closed().has_value());
  EXPECT_FALSE(c->closed().has_value());
  // Once b has been silent for stale_after, a new stream may take over.
  clock_.Advance(FleetOptions{}.stale_after + absl::Seconds(1));
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), c).ok());
  ASSERT_TRUE(b->closed().has_value());
  EXPECT_EQ(b->closed()->code(), absl::StatusCode::kAborted);
  // After b's stream ends, a plain reconnect registers again.
  fleet_.Unregister("h1", 3);
  EXPECT_TRUE(fleet_.Register(MakeHello("h1"), std::make_shared<FakeAgent>(4)).ok());
}

TEST_F(FleetTest, UpdateDesiredStatesHandsItsCommitTheWholeDecisionAndInstallsOnlyOnSuccess) {
  for (const char* id : {"h1", "h2"}) {
    ASSERT_TRUE(fleet_.Register(MakeHello(id), std::make_shared<FakeAgent>(1)).ok());
  }
  ASSERT_TRUE(fleet_.SetDesiredState("h1", Params(1)).ok());
  const std::string h1_before = fleet_.DesiredVersion("h1");
  // h1 unchanged (same parameters), h2 gets its first desired state.
  DesiredDecision seen;
  auto versions =
      fleet_.UpdateDesiredStates({DesiredUpdate{"h1", Params(1)}, DesiredUpdate{"h2", Params(7)}},
                                 [&](const DesiredDecision& d) {
                                   seen = d;
                                   return absl::OkStatus();
                                 });
  ASSERT_TRUE(versions.ok()) << versions.status();
  ASSERT_EQ(seen.next.size(), 1u);
  EXPECT_EQ(seen.next[0].info.host_id(), "h2");
  ASSERT_EQ(seen.before.count("h2"), 1u);
  EXPECT_EQ(seen.before.at("h2").desired_seq, 0) << "h2 had no desired state before";
  EXPECT_EQ(seen.versions.at("h1"), h1_before);
  EXPECT_EQ(seen.versions.at("h2"), seen.next[0].info.desired_version());
  EXPECT_EQ(*versions, seen.versions);
  EXPECT_EQ(fleet_.DesiredVersion("h2"), seen.versions.at("h2"));
  // A failed commit installs nothing.
  auto failed = fleet_.UpdateDesiredStates(
      {DesiredUpdate{"h2", Params(8)}},
      [](const DesiredDecision&) { return absl::UnavailableError("disk full"); });
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(fleet_.DesiredVersion("h2"), seen.versions.at("h2"));
}

TEST_F(FleetTest, DesiredStateVersionsPushesAndDrift) {
  auto c = std::make_shared<FakeAgent>(1);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), c).ok());
  EXPECT_EQ(fleet_.SetDesiredState("nope", Params(1)).status().code(), absl::StatusCode::kNotFound);
  auto v1 = fleet_.SetDesiredState("h1", Params(1));
  ASSERT_TRUE(v1.ok());
  auto again = fleet_.SetDesiredState("h1", Params(1));
  EXPECT_EQ(*again, *v1);
  auto v2 = fleet_.SetDesiredState("h1", Params(2));
  ASSERT_TRUE(v2.ok());
  EXPECT_NE(*v2, *v1);
  EXPECT_EQ(c->pushed(), (std::vector<std::string>{*v1, *v2}));
  EXPECT_EQ(c->leases(), (std::vector<uint32_t>{0, 0})) << "a hand push is final";
  EXPECT_EQ(fleet_.Counts().drifted, 1u);
  v1::Ack ack;
  ack.set_version(*v2);
  fleet_.HandleAck("h1", ack);
  EXPECT_EQ(fleet_.Counts().drifted, 0u);
  // A reconnect gets the desired state pushed again.
  auto d = std::make_shared<FakeAgent>(2);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), d).ok());
  EXPECT_EQ(d->pushed(), (std::vector<std::string>{*v2}));
}

// Issue 25 item 8: the notes of an ACK (applied, not in effect) are the
// host's until it runs another version: a NACK that keeps an older one, or a
// Hello with another, clears them; a Hello with the same keeps them.
TEST_F(FleetTest, NotInEffectNotesDescribeTheAckedVersionOnly) {
  auto c = std::make_shared<FakeAgent>(1);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), c).ok());
  auto v1 = fleet_.SetDesiredState("h1", Params(1));
  ASSERT_TRUE(v1.ok());
  v1::Ack ack;
  ack.set_kind(v1::DESIRED_STATE);
  ack.set_version(*v1);
  v1::ParameterNote* n = ack.add_not_in_effect();
  n->set_device("mlx5_0");
  n->set_parameter("rpg_time_reset");
  n->set_reason("the DCQCN reaction point is off on every priority (rp_enable_mask 0x00)");
  fleet_.HandleAck("h1", ack);
  auto notes = [&] {
    absl::StatusOr<StoredHost> h = fleet_.GetStored("h1");
    return h.ok() ? h->info.not_in_effect_size() : -1;
  };
  EXPECT_EQ(notes(), 1);
  v1::Hello same = MakeHello("h1");
  same.set_current_version(*v1);
  ASSERT_TRUE(fleet_.Register(same, std::make_shared<FakeAgent>(2)).ok());
  EXPECT_EQ(notes(), 1);
  auto v2 = fleet_.SetDesiredState("h1", Params(2));
  ASSERT_TRUE(v2.ok());
  v1::Nack nack;
  nack.set_kind(v1::DESIRED_STATE);
  nack.set_version(*v2);
  nack.set_kept_version(*v1);
  fleet_.HandleNack("h1", nack);
  EXPECT_EQ(notes(), 1) << "the host still runs the version the notes describe";
  fleet_.HandleAck("h1", ack);
  fleet_.Unregister("h1", 2);  // that agent's stream ends; the host comes back with no version
  v1::Hello other = MakeHello("h1");
  other.set_current_version("");
  auto reg = fleet_.Register(other, std::make_shared<FakeAgent>(3));
  ASSERT_TRUE(reg.ok()) << reg.status();
  EXPECT_EQ(notes(), 0);
}

// Issue 25 item 2: the same parameters with another lease keep their
// version and are pushed again (the controller's confirmation of a
// provisional set); a reconnect gets the lease the host's set has now.
TEST_F(FleetTest, ALeaseOnlyUpdateKeepsTheVersionAndPushesItAgain) {
  auto c = std::make_shared<FakeAgent>(1);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), c).ok());
  auto noop = [](const DesiredDecision&) { return absl::OkStatus(); };
  auto first = fleet_.UpdateDesiredStates({DesiredUpdate{"h1", Params(3), 120}}, noop);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string v = first->at("h1");
  auto same = fleet_.UpdateDesiredStates({DesiredUpdate{"h1", Params(3), 120}}, noop);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(c->pushes(), 1) << "nothing changed: nothing pushed";
  DesiredDecision seen;
  auto confirm = fleet_.UpdateDesiredStates({DesiredUpdate{"h1", Params(3), 0}},
                                            [&](const DesiredDecision& d) {
                                              seen = d;
                                              return absl::OkStatus();
                                            });
  ASSERT_TRUE(confirm.ok());
  EXPECT_EQ(confirm->at("h1"), v);
  ASSERT_EQ(seen.next.size(), 1u) << "the lease is stored with the host";
  EXPECT_EQ(seen.next[0].info.desired_lease_seconds(), 0u);
  EXPECT_EQ(seen.before.at("h1").info.desired_lease_seconds(), 120u);
  EXPECT_EQ(c->pushed(), (std::vector<std::string>{v, v}));
  EXPECT_EQ(c->leases(), (std::vector<uint32_t>{120, 0}));
  auto info = fleet_.GetHost("h1");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->desired_version(), v);
  EXPECT_EQ(info->desired_lease_seconds(), 0u);
  // New parameters, provisional again: a new version; a reconnect repushes its lease.
  auto next = fleet_.UpdateDesiredStates({DesiredUpdate{"h1", Params(4), 60}}, noop);
  ASSERT_TRUE(next.ok());
  EXPECT_NE(next->at("h1"), v);
  auto d = std::make_shared<FakeAgent>(2);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), d).ok());
  EXPECT_EQ(d->pushed(), (std::vector<std::string>{next->at("h1")}));
  EXPECT_EQ(d->leases(), (std::vector<uint32_t>{60}));
}

// A lease that expired is not a finding about the values: the version is not
// rejected, and the host's versions stay as its Hello and ACKs told them.
TEST_F(FleetTest, ALeaseExpiryRejectsNothingAndLeavesTheHostsVersions) {
  auto c = std::make_shared<FakeAgent>(1, &fleet_, "h1");
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), c).ok());
  auto noop = [](const DesiredDecision&) { return absl::OkStatus(); };
  auto v = fleet_.UpdateDesiredStates({DesiredUpdate{"h1", Params(3), 60}}, noop);
  ASSERT_TRUE(v.ok());
  const std::string version = v->at("h1");
  ASSERT_EQ(fleet_.GetHost("h1")->current_version(), version);  // the fake acked it
  google::protobuf::RepeatedPtrField<v1::GuardEvent> events;
  v1::GuardEvent* e = events.Add();
  e->set_kind("lease_expired");
  e->set_detail("no stream to the controller for 1m0s (the set's lease is 1m)");
  e->set_judged_version(version);
  e->set_restored_version("baseline");
  fleet_.HandleGuardEvents("h1", events);
  auto info = fleet_.GetHost("h1");
  ASSERT_TRUE(info.ok());
  EXPECT_THAT(info->rejected_versions(), ::testing::IsEmpty());
  EXPECT_EQ(info->current_version(), version);
  EXPECT_THAT(info->last_guard_event(), ::testing::HasSubstr("lease_expired"));
  // A guard restore, by contrast, rejects the version it judged.
  e->set_kind("pfc_pause_guard");
  fleet_.HandleGuardEvents("h1", events);
  EXPECT_THAT(fleet_.GetHost("h1")->rejected_versions(), ::testing::Contains(version));
}

v1::GuardEvent Drift(const std::string& detail) {
  v1::GuardEvent e;
  e.set_kind("drift");
  e.set_detail(detail);
  return e;
}

google::protobuf::RepeatedPtrField<v1::GuardEvent> Events(const v1::GuardEvent& e) {
  google::protobuf::RepeatedPtrField<v1::GuardEvent> out;
  *out.Add() = e;
  return out;
}

TEST_F(FleetTest, DriftIsCorrectedByRepushingTheDesiredState) {
  auto c = std::make_shared<FakeAgent>(1);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), c).ok());
  auto v = fleet_.SetDesiredState("h1", Params(33));
  ASSERT_TRUE(v.ok());
  v1::Ack ack;
  ack.set_version(*v);
  fleet_.HandleAck("h1", ack);
  const std::string found = "version 1: mlx5_0/rpg_ai_rate: expected 33, found 5";
  fleet_.HandleGuardEvents("h1", Events(Drift(found)));
  EXPECT_EQ(c->pushed(), (std::vector<std::string>{*v, *v}));
  v1::HostInfo info = *fleet_.GetHost("h1");
  ASSERT_EQ(info.drift_size(), 1);
  EXPECT_EQ(info.drift(0), found);
  EXPECT_EQ(info.current_version(), *v);  // drift is not a rejection
  EXPECT_TRUE(info.rejected_versions().empty());
  EXPECT_THAT(sub_->kinds, ::testing::Contains("drift_corrected:h1"));
  // Level-triggered, with a back-off: the same finding right after the
  // re-push waits; a second later it is corrected again.
  fleet_.HandleGuardEvents("h1", Events(Drift(found)));
  EXPECT_EQ(c->pushed().size(), 2u);
  clock_.Advance(absl::Seconds(1));
  fleet_.HandleGuardEvents("h1", Events(Drift(found)));
  EXPECT_EQ(c->pushed().size(), 3u);
  // The Ack of the re-push clears the drift.
  fleet_.HandleAck("h1", ack);
  EXPECT_EQ(fleet_.GetHost("h1")->drift_size(), 0);
}

v1::GuardEvent DriftOf(const std::string& device, const std::string& parameter, int64_t expected,
                       int64_t found) {
  v1::GuardEvent e = Drift(absl::StrCat("version 1: ", device, "/", parameter, ": expected ",
                                        expected, ", found ", found));
  v1::DriftedParameter* p = e.add_drifted();
  p->set_device(device);
  p->set_parameter(parameter);
  p->set_expected(expected);
  p->set_found(found);
  return e;
}

// Issue 28 item 1: a finding that a re-push does not clear (another writer
// fights it, or the agent reports it after every apply) was re-pushed and
// audited on every report, ~4 a second, forever. Now the re-pushes of one
// finding back off (1 s, 2 s, 4 s ... 5 min).
TEST_F(FleetTest, DriftThatARepushDoesNotClearBacksOff) {
  auto c = std::make_shared<FakeAgent>(1);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), c).ok());
  auto v = fleet_.SetDesiredState("h1", Params(33));
  ASSERT_TRUE(v.ok());
  c->ClearPushed();
  sub_->kinds.clear();
  // Four reports a second for a minute, each with the same finding.
  for (int i = 0; i < 240; ++i) {
    fleet_.HandleGuardEvents("h1", Events(DriftOf("mlx5_0", "rpg_ai_rate", 33, 777)));
    clock_.Advance(absl::Milliseconds(250));
  }
  // At 0, 1, 3, 7, 15, 31 s (the next would be at 63 s).
  EXPECT_EQ(c->pushed().size(), 6u);
  EXPECT_EQ(std::count(sub_->kinds.begin(), sub_->kinds.end(), "drift_corrected:h1"), 6);
  // A different finding is corrected at once.
  fleet_.HandleGuardEvents("h1", Events(DriftOf("mlx5_0", "rpg_ai_rate", 33, 778)));
  EXPECT_EQ(c->pushed().size(), 7u);
  // The same finding right after waits; once it has stopped coming back for
  // a while, it starts over and is corrected at once.
  fleet_.HandleGuardEvents("h1", Events(DriftOf("mlx5_0", "rpg_ai_rate", 33, 778)));
  EXPECT_EQ(c->pushed().size(), 7u);
  clock_.Advance(absl::Minutes(2));
  fleet_.HandleGuardEvents("h1", Events(DriftOf("mlx5_0", "rpg_ai_rate", 33, 778)));
  EXPECT_EQ(c->pushed().size(), 8u);
}

// A drifted parameter the desired state does not name cannot be corrected by
// a re-push (before: re-pushed with writes=0 on every report): it is observed
// and audited once, and nothing is pushed.
TEST_F(FleetTest, DriftOutsideTheDesiredStateIsObservedOnceNotRepushed) {
  auto c = std::make_shared<FakeAgent>(1);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), c).ok());
  ASSERT_TRUE(fleet_.SetDesiredState("h1", Params(33)).ok());  // mlx5_0/rpg_ai_rate only
  c->ClearPushed();
  sub_->kinds.clear();
  for (int i = 0; i < 40; ++i) {
    fleet_.HandleGuardEvents("h1", Events(DriftOf("mlx5_1", "rpg_time_reset", 300, 777)));
    clock_.Advance(absl::Milliseconds(250));
  }
  EXPECT_TRUE(c->pushed().empty());
  EXPECT_EQ(std::count(sub_->kinds.begin(), sub_->kinds.end(), "drift_observed:h1"), 1);
  EXPECT_THAT(fleet_.GetHost("h1")->drift(0), HasSubstr("mlx5_1/rpg_time_reset"));
}

TEST_F(FleetTest, ObserveOnlyHostsReportDriftWithoutCorrection) {
  FleetOptions o;
  o.observe_only = true;
  Fleet fleet(&clock_, &telemetry_, nullptr, &events_, o);
  auto c = std::make_shared<FakeAgent>(1);
  ASSERT_TRUE(fleet.Register(MakeHello("h1"), c).ok());
  ASSERT_TRUE(fleet.SetDesiredState("h1", Params(33)).ok());
  fleet.HandleGuardEvents("h1", Events(Drift("x: expected 33, found 5")));
  fleet.HandleGuardEvents("h1", Events(Drift("x: expected 33, found 5")));
  EXPECT_EQ(c->pushed().size(), 1u);
  EXPECT_EQ(std::count(sub_->kinds.begin(), sub_->kinds.end(), "drift_observed:h1"), 1);
  // Per host (a policy's observe_only): the fleet-wide flag off, the check on.
  auto d = std::make_shared<FakeAgent>(2);
  ASSERT_TRUE(fleet_.Register(MakeHello("h2"), d).ok());
  ASSERT_TRUE(fleet_.SetDesiredState("h2", Params(33)).ok());
  fleet_.SetObserveOnlyCheck([](const std::string& id) { return id == "h2"; });
  fleet_.HandleGuardEvents("h2", Events(Drift("y: expected 33, found 6")));
  EXPECT_EQ(d->pushed().size(), 1u);
  EXPECT_EQ(fleet_.GetHost("h2")->drift(0), "y: expected 33, found 6");
}

TEST_F(FleetTest, SweepPublishesStateChangesOnce) {
  auto c = std::make_shared<FakeAgent>(1);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), c).ok());
  sub_->kinds.clear();
  fleet_.Sweep();
  EXPECT_TRUE(sub_->kinds.empty());
  clock_.Advance(absl::Seconds(31));
  fleet_.Sweep();
  fleet_.Sweep();
  EXPECT_EQ(sub_->kinds, (std::vector<std::string>{"host_stale:h1"}));
  clock_.Advance(absl::Seconds(100));
  fleet_.Sweep();
  EXPECT_EQ(sub_->kinds.back(), "host_gone:h1");
  EXPECT_EQ(fleet_.Counts().gone, 1u);
}

TEST_F(FleetTest, SilentHostsStreamIsClosedWhenItGoesGone) {
  auto silent = std::make_shared<FakeAgent>(1);
  auto busy = std::make_shared<FakeAgent>(2);
  ASSERT_TRUE(fleet_.Register(MakeHello("silent"), silent).ok());
  ASSERT_TRUE(fleet_.Register(MakeHello("busy"), busy).ok());
  clock_.Advance(absl::Seconds(31));  // stale: still open
  fleet_.Sweep();
  EXPECT_FALSE(silent->closed().has_value());
  clock_.Advance(absl::Seconds(60));
  v1::Report r;
  r.set_end_unix_nanos(absl::ToUnixNanos(clock_.Now()));
  ASSERT_TRUE(telemetry_.ForHost("busy")->AddReport(r, clock_.Now()).ok());
  clock_.Advance(absl::Seconds(40));  // 131 s since "silent" connected; 40 s since busy reported
  fleet_.Sweep();
  ASSERT_TRUE(silent->closed().has_value());
  EXPECT_EQ(silent->closed()->code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(silent->closed()->message(), HasSubstr("--gone_after"));
  EXPECT_FALSE(busy->closed().has_value());
}

TEST_F(FleetTest, SelectorsAndGroups) {
  ASSERT_TRUE(fleet_.Register(MakeHello("a", "r1"), std::make_shared<FakeAgent>(1)).ok());
  ASSERT_TRUE(fleet_.Register(MakeHello("b", "r1"), std::make_shared<FakeAgent>(2)).ok());
  ASSERT_TRUE(fleet_.Register(MakeHello("c", "r2"), std::make_shared<FakeAgent>(3)).ok());
  EXPECT_EQ(fleet_.Select({{"rack", "r1"}}).size(), 2u);
  EXPECT_EQ(fleet_.Select({}).size(), 3u);
  auto groups = fleet_.GroupBy("rack");
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups["r2"], (std::vector<std::string>{"c"}));
  EXPECT_TRUE(fleet_.GroupBy("pod").empty());
}

v1::Hello ProbingHello(int i) {
  v1::Hello h = MakeHello(absl::StrCat("h", i), "r1");
  (*h.mutable_labels())["fabric"] = "f";
  h.mutable_probe_endpoint()->set_udp_address(absl::StrCat("127.0.0.1:", 10000 + i));
  return h;
}

// A join storm shares replans: 300 hosts registering back to back get a few
// plans each, not one per later join, and every host ends with a full plan.
TEST(FleetProbePlanTest, JoinStormIsCoalescedAndEveryHostGetsTheFinalPlan) {
  FakeClock clock;
  TelemetryStore telemetry{TelemetryOptions{}};
  FleetOptions opt;
  opt.probe_replan_delay = absl::Milliseconds(100);
  Fleet fleet(&clock, &telemetry, nullptr, nullptr, opt);
  constexpr int kHosts = 300;
  std::vector<std::shared_ptr<FakeAgent>> conns;
  for (int i = 0; i < kHosts; ++i) {
    conns.push_back(std::make_shared<FakeAgent>(i + 1));
    ASSERT_TRUE(fleet.Register(ProbingHello(i), conns.back()).ok());
  }
  // The final plan of every host is what an inline planner would give it.
  std::vector<ProbeTarget> targets;
  for (int i = 0; i < kHosts; ++i) {
    ProbeTarget t;
    t.host_id = absl::StrCat("h", i);
    t.labels = {{"rack", "r1"}, {"fabric", "f"}};
    t.endpoint = ProbingHello(i).probe_endpoint();
    targets.push_back(t);
  }
  std::map<std::string, v1::ProbePlan> want = PlanProbes(targets, opt.probes);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  auto settled = [&] {
    for (int i = 0; i < kHosts; ++i) {
      if (conns[i]->last_plan_version() != want[absl::StrCat("h", i)].version()) return false;
    }
    return true;
  };
  while (!settled() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(settled());
  int total = 0;
  for (const auto& c : conns) total += c->plans();
  EXPECT_GE(total, kHosts);
  EXPECT_LE(total, kHosts * 5) << "replans were not coalesced";
  // A leave is replanned too (after the delay, with no later join): a host
  // that probed h0 gets a new plan.
  int prober = -1;
  for (int i = 1; i < kHosts && prober < 0; ++i) {
    for (const v1::ProbePeer& p : want[absl::StrCat("h", i)].peers()) {
      if (p.host_id() == "h0") prober = i;
    }
  }
  ASSERT_GT(prober, 0);
  const int before = conns[prober]->plans();
  fleet.Unregister("h0", 1);
  const absl::Time leave_deadline = absl::Now() + absl::Seconds(10);
  while (conns[prober]->plans() == before && absl::Now() < leave_deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(conns[prober]->plans(), before + 1);
}

// The agent acked `version`, reading back `applied`.
void AckApplied(Fleet& fleet, const std::string& host, const std::string& version,
                const v1::ParameterSet& applied) {
  v1::Ack ack;
  ack.set_version(version);
  *ack.mutable_applied() = applied;
  fleet.HandleAck(host, ack);
}

// A local guard trip that judged `judged` ("" as agents before the field) and
// restored `restored` ("" for nothing), reading back `restored_parameters`.
v1::GuardEvent GuardTrip(const std::string& judged, const std::string& restored,
                         std::optional<v1::ParameterSet> restored_parameters) {
  v1::GuardEvent e;
  e.set_kind("pfc_pause_guard");
  e.set_detail("paused 40% of the time");
  e.set_judged_version(judged);
  e.set_restored_version(restored);
  if (restored_parameters.has_value()) *e.mutable_restored_parameters() = *restored_parameters;
  return e;
}

::testing::AssertionResult HoldsParameters(const v1::HostInfo& info, const v1::ParameterSet& p) {
  if (google::protobuf::util::MessageDifferencer::Equals(info.current_parameters(), p)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << info.current_parameters().ShortDebugString();
}

TEST_F(FleetTest, GuardRestoreUpdatesCurrentParametersAndRejectsTheVersion) {
  auto c = std::make_shared<FakeAgent>(1);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), c).ok());
  auto v = fleet_.SetDesiredState("h1", Params(100));
  ASSERT_TRUE(v.ok());
  AckApplied(fleet_, "h1", *v, Params(100));
  fleet_.HandleGuardEvents("h1", Events(GuardTrip("", "baseline", Params(50))));
  v1::HostInfo info = *fleet_.GetHost("h1");
  EXPECT_EQ(info.current_version(), "");
  EXPECT_THAT(info.rejected_versions(), ::testing::Contains(*v));
  EXPECT_TRUE(HoldsParameters(info, Params(50)))
      << "the host's parameters are what the guard restored, not the rejected set";
}

// The agent judged and rolled back version 1 while version 2 was on its way;
// it then applied 2. The late event rejects 1, and the host still holds 2.
TEST_F(FleetTest, AGuardEventAboutAnOlderVersionDoesNotUndoANewerAck) {
  auto c = std::make_shared<FakeAgent>(1);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), c).ok());
  auto v1 = fleet_.SetDesiredState("h1", Params(100));
  ASSERT_TRUE(v1.ok());
  auto v2 = fleet_.SetDesiredState("h1", Params(60));
  ASSERT_TRUE(v2.ok());
  AckApplied(fleet_, "h1", *v2, Params(60));
  fleet_.HandleGuardEvents("h1", Events(GuardTrip(*v1, "baseline", Params(50))));
  v1::HostInfo info = *fleet_.GetHost("h1");
  EXPECT_EQ(info.current_version(), *v2);
  EXPECT_THAT(info.rejected_versions(), ::testing::Contains(*v1));
  EXPECT_THAT(info.rejected_versions(), ::testing::Not(::testing::Contains(*v2)));
  EXPECT_TRUE(HoldsParameters(info, Params(60)));
}

// An agent with no last-known-good set restores nothing: the host still
// holds the set the guard judged, which is rejected all the same.
TEST_F(FleetTest, AGuardThatRestoredNothingLeavesTheHostOnTheJudgedSet) {
  auto c = std::make_shared<FakeAgent>(1);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), c).ok());
  auto v = fleet_.SetDesiredState("h1", Params(100));
  ASSERT_TRUE(v.ok());
  AckApplied(fleet_, "h1", *v, Params(100));
  fleet_.HandleGuardEvents("h1", Events(GuardTrip(*v, "", std::nullopt)));
  v1::HostInfo info = *fleet_.GetHost("h1");
  EXPECT_EQ(info.current_version(), *v);
  EXPECT_THAT(info.rejected_versions(), ::testing::Contains(*v));
  EXPECT_TRUE(HoldsParameters(info, Params(100)));
}

TEST_F(FleetTest, ForgetHostOnlyWhenGone) {
  auto c = std::make_shared<FakeAgent>(1);
  ASSERT_TRUE(fleet_.Register(MakeHello("h1"), c).ok());
  EXPECT_EQ(fleet_.ForgetHost("nope", DesiredStateActor{}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(fleet_.ForgetHost("h1", DesiredStateActor{}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fleet_.GetHost("h1").ok()) << "nothing changes on a refusal";
  fleet_.Unregister("h1", 1);
  ASSERT_TRUE(
      fleet_.ForgetHost("h1", DesiredStateActor{"alice", false, "decommissioned", ""}).ok());
  EXPECT_EQ(fleet_.GetHost("h1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(sub_->kinds, ::testing::Contains("host_forgotten:h1"));
}

// With a control loop, the fleet's host rows are written on it: the thread
// that registers (a completion-queue thread) never waits for SQLite, and the
// row written is the host's state when the write runs, so a write queued
// before a desired-state commit does not put the older row back.
TEST(FleetControlLoopTest, HostRowsAreWrittenOnTheLoopWithTheStateWhenTheWriteRuns) {
  const std::string dir = testing::MakeTempDir();
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  FakeClock clock;
  TelemetryStore telemetry{TelemetryOptions{}};
  EventBus events;
  ControlLoop loop(store->get());
  Fleet fleet(&clock, &telemetry, store->get(), &events, FleetOptions{});
  fleet.SetControlLoop(&loop);
  // The loop is busy: what the fleet posts waits behind this task.
  absl::Notification release;
  ASSERT_TRUE(loop.Post([&] { release.WaitForNotification(); }));
  auto c = std::make_shared<FakeAgent>(1);
  ASSERT_TRUE(fleet.Register(MakeHello("h1"), c).ok());
  absl::StatusOr<std::vector<StoredHost>> rows = (*store)->LoadHosts();
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty()) << "the Hello's row was written on the registering thread";
  // A desired state committed meanwhile (the rollout does this on the loop;
  // here, directly) ...
  ASSERT_TRUE(fleet.SetDesiredState("h1", Params(7), DesiredStateActor{}).ok());
  release.Notify();
  loop.RunSync([] {});
  // ... is not overwritten by the Hello's write that ran after it.
  rows = (*store)->LoadHosts();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(rows->at(0).info.host_id(), "h1");
  EXPECT_EQ(rows->at(0).desired_seq, 1u);
  EXPECT_EQ(rows->at(0).desired.devices(0).dcqcn().at("rpg_ai_rate"), 7);
  loop.Stop();
}

}  // namespace
}  // namespace rocetune::controller
